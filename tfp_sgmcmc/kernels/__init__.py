"""The `tfp.mcmc.TransitionKernel`s, one per module, over the shared base.

* `base`: the protocol and the step written once (`StochasticGradientKernel`).
* `sgld`, `psgld`, `sghmc`, `sgnht`, `sgbd`, `sgnuts`: one kernel each.
* `amortized_mh`: the amortized Metropolis-Hastings wrapper; `amagold` and
  `barker` its proposals and the calibrated shells built on them.
* `checks`, `results_guard`, `interop`: argument checks and the trace-time
  checks of what `one_step` is given, the explicit value check of results
  that continue a chain (`check_kernel_results`), and TFP interoperation.
* `momentum`: the mass matrix (`momentum_distribution`) of the Hamiltonian
  kernels, in their results as TFP's adaptation kernels expect it.
"""

from tfp_sgmcmc.kernels import interop  # pylint: disable=unused-import
from tfp_sgmcmc.kernels import momentum  # pylint: disable=unused-import
from tfp_sgmcmc.kernels.amagold import (AMAGOLD, UncalibratedAMAGOLD,
                                        UncalibratedAMAGOLDResults)
from tfp_sgmcmc.kernels.amortized_mh import (
    AmortizedMetropolisHastings, AmortizedMetropolisHastingsResults)
from tfp_sgmcmc.kernels.barker import (AmortizedBarker, UncalibratedBarker,
                                       UncalibratedBarkerResults)
from tfp_sgmcmc.kernels.psgld import (PreconditionedSGLD,
                                      PreconditionedSGLDResults)
from tfp_sgmcmc.kernels.results_guard import (MassFromResultsWarning,
                                              StepSizeFromResultsWarning,
                                              check_kernel_results,
                                              with_step_size)
from tfp_sgmcmc.kernels.sgbd import SGBD, SGBDResults
from tfp_sgmcmc.kernels.sghmc import (NaiveSGHMC, NaiveSGHMCResults, SGHMC,
                                      SGHMCResults)
from tfp_sgmcmc.kernels.sgld import SGLD, SGLDResults
from tfp_sgmcmc.kernels.sgnht import SGNHT, SGNHTResults
from tfp_sgmcmc.kernels.sgnuts import SGNUTS, SGNUTSResults

__all__ = [
    "SGLD", "SGLDResults", "PreconditionedSGLD", "PreconditionedSGLDResults",
    "SGHMC", "SGHMCResults", "NaiveSGHMC", "NaiveSGHMCResults", "SGNHT",
    "SGNHTResults",
    "SGNUTS", "SGNUTSResults", "SGBD", "SGBDResults",
    "AMAGOLD", "UncalibratedAMAGOLD", "UncalibratedAMAGOLDResults",
    "AmortizedMetropolisHastings", "AmortizedMetropolisHastingsResults",
    "AmortizedBarker", "UncalibratedBarker", "UncalibratedBarkerResults",
    "check_kernel_results", "StepSizeFromResultsWarning", "with_step_size",
    "MassFromResultsWarning",
]
