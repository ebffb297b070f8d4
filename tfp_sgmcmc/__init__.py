"""tfp_sgmcmc: stochastic-gradient MCMC kernels for TensorFlow Probability."""

from tfp_sgmcmc import dynamics
from tfp_sgmcmc import synthetic
from tfp_sgmcmc.kernels import (AMAGOLD, AmortizedMetropolisHastings,
                                AmortizedMetropolisHastingsResults,
                                NaiveSGHMC, SGHMC, SGHMCResults, SGLD,
                                SGLDResults, UncalibratedAMAGOLD,
                                UncalibratedAMAGOLDResults)
from tfp_sgmcmc.schedules import PolynomialDecay, step_size_weighted_mean
from tfp_sgmcmc.targets import (DatasetTarget, InMemoryTarget, MinibatchTarget,
                                NoisyGradientTarget, TargetCapabilityError)

__version__ = "0.1.0"

__all__ = [
    "dynamics", "synthetic",
    # Targets.
    "MinibatchTarget", "InMemoryTarget", "DatasetTarget",
    "NoisyGradientTarget", "TargetCapabilityError",
    # Kernels.
    "SGLD", "SGLDResults", "SGHMC", "SGHMCResults", "NaiveSGHMC",
    "AMAGOLD", "UncalibratedAMAGOLD", "UncalibratedAMAGOLDResults",
    "AmortizedMetropolisHastings", "AmortizedMetropolisHastingsResults",
    # Schedules.
    "PolynomialDecay", "step_size_weighted_mean",
]
