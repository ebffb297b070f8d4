"""One `tfp.mcmc.TransitionKernel` per module."""

from tfp_sgmcmc.kernels._common import (StepSizeFromResultsWarning,
                                        check_kernel_results, with_step_size)
from tfp_sgmcmc.kernels.amagold import (AMAGOLD, UncalibratedAMAGOLD,
                                        UncalibratedAMAGOLDResults)
from tfp_sgmcmc.kernels.amortized_mh import (
    AmortizedMetropolisHastings, AmortizedMetropolisHastingsResults)
from tfp_sgmcmc.kernels.barker import (AmortizedBarker, UncalibratedBarker,
                                       UncalibratedBarkerResults)
from tfp_sgmcmc.kernels.psgld import (PreconditionedSGLD,
                                      PreconditionedSGLDResults)
from tfp_sgmcmc.kernels.sgbd import SGBD, SGBDResults
from tfp_sgmcmc.kernels.sghmc import NaiveSGHMC, SGHMC, SGHMCResults
from tfp_sgmcmc.kernels.sgld import SGLD, SGLDResults
from tfp_sgmcmc.kernels.sgnht import SGNHT, SGNHTResults
from tfp_sgmcmc.kernels.sgnuts import SGNUTS, SGNUTSResults

__all__ = [
    "SGLD", "SGLDResults", "PreconditionedSGLD", "PreconditionedSGLDResults",
    "SGHMC", "SGHMCResults", "NaiveSGHMC", "SGNHT", "SGNHTResults",
    "SGNUTS", "SGNUTSResults", "SGBD", "SGBDResults",
    "AMAGOLD", "UncalibratedAMAGOLD", "UncalibratedAMAGOLDResults",
    "AmortizedMetropolisHastings", "AmortizedMetropolisHastingsResults",
    "AmortizedBarker", "UncalibratedBarker", "UncalibratedBarkerResults",
    "check_kernel_results", "StepSizeFromResultsWarning", "with_step_size",
]
