"""tfp_sgmcmc: stochastic-gradient MCMC kernels for TensorFlow Probability."""

from tfp_sgmcmc import datasets
from tfp_sgmcmc import diagnostics
from tfp_sgmcmc import dynamics
from tfp_sgmcmc import synthetic
from tfp_sgmcmc.checkpointing import (StepSeeded, StepSeededResults,
                                      load_chain, save_chain)
from tfp_sgmcmc.diagnostics import UnhealthyChainWarning, summarize
from tfp_sgmcmc.distributed import ShardedTarget
from tfp_sgmcmc.tfrecord import TFRecordTarget, write_tfrecord_shards
from tfp_sgmcmc.kernels import (
    AMAGOLD, SGBD, SGHMC, SGLD, SGNHT, SGNUTS, AmortizedBarker,
    AmortizedMetropolisHastings, AmortizedMetropolisHastingsResults,
    NaiveSGHMC, PreconditionedSGLD, PreconditionedSGLDResults, SGBDResults,
    SGHMCResults, SGLDResults, SGNHTResults, SGNUTSResults,
    UncalibratedAMAGOLD, UncalibratedAMAGOLDResults, UncalibratedBarker,
    UncalibratedBarkerResults, StepSizeFromResultsWarning,
    check_kernel_results, with_step_size)
from tfp_sgmcmc.joint import JointDistributionTarget
from tfp_sgmcmc.log_prob import LogProbFnTarget
from tfp_sgmcmc.optimize import find_mode
from tfp_sgmcmc.runs import (ChainRun, Moments, sample_chain_with_progress,
                             sample_moments)
from tfp_sgmcmc.schedules import (CyclicalSchedule, PolynomialDecay,
                                  step_size_weighted_mean)
from tfp_sgmcmc.targets import (ControlVariateTarget, DatasetTarget,
                                InMemoryTarget, MinibatchTarget,
                                NoisyGradientTarget, TargetCapabilityError,
                                TemperedTarget)

__version__ = "0.1.0"

__all__ = [
    "datasets", "dynamics", "synthetic",
    # Targets and gradient estimators.
    "MinibatchTarget", "InMemoryTarget", "DatasetTarget",
    "NoisyGradientTarget", "ControlVariateTarget", "TemperedTarget",
    "TargetCapabilityError", "JointDistributionTarget", "LogProbFnTarget",
    "ShardedTarget", "TFRecordTarget", "write_tfrecord_shards",
    "find_mode",
    # Kernels.
    "SGLD", "SGLDResults", "PreconditionedSGLD", "PreconditionedSGLDResults",
    "SGHMC", "SGHMCResults", "NaiveSGHMC", "SGNHT", "SGNHTResults",
    "SGNUTS", "SGNUTSResults",
    "AMAGOLD", "UncalibratedAMAGOLD", "UncalibratedAMAGOLDResults",
    "AmortizedMetropolisHastings", "AmortizedMetropolisHastingsResults",
    "SGBD", "SGBDResults", "AmortizedBarker", "UncalibratedBarker",
    "UncalibratedBarkerResults",
    # Schedules.
    "PolynomialDecay", "CyclicalSchedule", "step_size_weighted_mean",
    # Reliability: resumable chains and run health.
    "diagnostics", "StepSeeded", "StepSeededResults", "save_chain",
    "load_chain", "summarize", "UnhealthyChainWarning", "sample_moments",
    "Moments", "sample_chain_with_progress", "ChainRun",
    "check_kernel_results", "StepSizeFromResultsWarning", "with_step_size",
]
