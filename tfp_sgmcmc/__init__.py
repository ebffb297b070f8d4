"""tfp_sgmcmc: stochastic-gradient MCMC kernels for TensorFlow Probability."""

from tfp_sgmcmc import dynamics
from tfp_sgmcmc.kernels import NaiveSGHMC, SGHMC, SGHMCResults, SGLD, SGLDResults
from tfp_sgmcmc.schedules import PolynomialDecay, step_size_weighted_mean
from tfp_sgmcmc.targets import (DatasetTarget, InMemoryTarget, MinibatchTarget,
                                NoisyGradientTarget, TargetCapabilityError)

__version__ = "0.1.0"

__all__ = [
    "dynamics",
    "MinibatchTarget", "InMemoryTarget", "DatasetTarget",
    "NoisyGradientTarget", "TargetCapabilityError",
    "SGLD", "SGLDResults", "SGHMC", "SGHMCResults", "NaiveSGHMC",
    "PolynomialDecay", "step_size_weighted_mean",
]
