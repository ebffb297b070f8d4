"""One `tfp.mcmc.TransitionKernel` per module."""

from tfp_sgmcmc.kernels.amagold import (AMAGOLD, UncalibratedAMAGOLD,
                                        UncalibratedAMAGOLDResults)
from tfp_sgmcmc.kernels.amortized_mh import (
    AmortizedMetropolisHastings, AmortizedMetropolisHastingsResults)
from tfp_sgmcmc.kernels.sghmc import NaiveSGHMC, SGHMC, SGHMCResults
from tfp_sgmcmc.kernels.sgld import SGLD, SGLDResults

__all__ = [
    "SGLD", "SGLDResults", "SGHMC", "SGHMCResults", "NaiveSGHMC",
    "AMAGOLD", "UncalibratedAMAGOLD", "UncalibratedAMAGOLDResults",
    "AmortizedMetropolisHastings", "AmortizedMetropolisHastingsResults",
]
