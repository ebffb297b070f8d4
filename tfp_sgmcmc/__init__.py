"""tfp_sgmcmc: stochastic-gradient MCMC kernels for TensorFlow Probability.

The package, by layer (docs/architecture.md):

* `random`: the one random-number engine and seed scheme.
* `dynamics`: the update rules, one call = one step, shared by every front
  end.
* `targets`: how a kernel sees the posterior (minibatch energies and
  gradients, the exact energy).
* `kernels`: the `tfp.mcmc.TransitionKernel`s.
* `chains`: long runs, checkpoints, diagnostics, schedules.
* `keras`: the samplers inside Keras `model.fit`.
"""

import sys

from tfp_sgmcmc import datasets
from tfp_sgmcmc import dynamics
from tfp_sgmcmc import random
from tfp_sgmcmc import synthetic
from tfp_sgmcmc.chains import diagnostics
from tfp_sgmcmc.chains.checkpointing import (StepSeeded, StepSeededResults,
                                             load_chain, save_chain)
from tfp_sgmcmc.chains.diagnostics import UnhealthyChainWarning, summarize
from tfp_sgmcmc.chains.inference_data import to_inference_data
from tfp_sgmcmc.chains.arrival import WarmupNotConvergedWarning
from tfp_sgmcmc.chains.runs import (ChainRun, Moments,
                                    sample_chain_with_progress,
                                    sample_moments)
from tfp_sgmcmc.chains.sample import SampleReport, SampleResult, sample
from tfp_sgmcmc.chains.stein import kernel_stein_discrepancy, ksd
from tfp_sgmcmc.chains.schedules import (CyclicalSchedule, PolynomialDecay,
                                         step_size_weighted_mean)
from tfp_sgmcmc.chains.warmup import (WarmupReport, WarmupResult, warm_up,
                                      warmup_windows)
from tfp_sgmcmc.dynamics.mass import diagonal_momentum_distribution
from tfp_sgmcmc.kernels import (
    AMAGOLD, SGBD, SGHMC, SGLD, SGNHT, SGNUTS, AmortizedBarker,
    AmortizedMetropolisHastings, AmortizedMetropolisHastingsResults,
    NaiveSGHMC, NaiveSGHMCResults, PreconditionedSGLD,
    PreconditionedSGLDResults, SGBDResults, SGHMCResults, SGLDResults, SGNHTResults, SGNUTSResults,
    UncalibratedAMAGOLD, UncalibratedAMAGOLDResults, UncalibratedBarker,
    UncalibratedBarkerResults, StepSizeFromResultsWarning,
    MassFromResultsWarning, check_kernel_results, with_step_size)
from tfp_sgmcmc.targets import (ControlVariateTarget, DatasetTarget,
                                InMemoryTarget, JointDistributionTarget,
                                LogProbFnTarget, MinibatchTarget,
                                NoisyGradientTarget, ShardedTarget,
                                TargetCapabilityError, TemperedTarget,
                                TFRecordTarget, find_mode,
                                write_tfrecord_shards)

# `tfp_sgmcmc.diagnostics` is a public module that lives in `chains`.
sys.modules[__name__ + ".diagnostics"] = diagnostics

__version__ = "0.1.0"

__all__ = [
    # From a model to checked draws in one call.
    "sample", "SampleResult", "SampleReport", "WarmupNotConvergedWarning",
    # How far a (biased) chain's draws are from the posterior.
    "kernel_stein_discrepancy", "ksd",
    "datasets", "dynamics", "synthetic", "random",
    # Targets and gradient estimators.
    "MinibatchTarget", "InMemoryTarget", "DatasetTarget",
    "NoisyGradientTarget", "ControlVariateTarget", "TemperedTarget",
    "TargetCapabilityError", "JointDistributionTarget", "LogProbFnTarget",
    "ShardedTarget", "TFRecordTarget", "write_tfrecord_shards",
    "find_mode",
    # Kernels.
    "SGLD", "SGLDResults", "PreconditionedSGLD", "PreconditionedSGLDResults",
    "SGHMC", "SGHMCResults", "NaiveSGHMC", "NaiveSGHMCResults", "SGNHT",
    "SGNHTResults", "SGNUTS", "SGNUTSResults",
    "AMAGOLD", "UncalibratedAMAGOLD", "UncalibratedAMAGOLDResults",
    "AmortizedMetropolisHastings", "AmortizedMetropolisHastingsResults",
    "SGBD", "SGBDResults", "AmortizedBarker", "UncalibratedBarker",
    "UncalibratedBarkerResults",
    # The mass matrix of the Hamiltonian kernels.
    "diagonal_momentum_distribution",
    # Schedules and the warm-up.
    "PolynomialDecay", "CyclicalSchedule", "step_size_weighted_mean",
    "warm_up", "WarmupResult", "WarmupReport", "warmup_windows",
    # Reliability: resumable chains and run health.
    "diagnostics", "StepSeeded", "StepSeededResults", "save_chain",
    "load_chain", "summarize", "UnhealthyChainWarning", "sample_moments",
    "Moments", "sample_chain_with_progress", "ChainRun",
    "check_kernel_results", "StepSizeFromResultsWarning", "with_step_size",
    "MassFromResultsWarning",
    # ArviZ output.
    "to_inference_data",
]
