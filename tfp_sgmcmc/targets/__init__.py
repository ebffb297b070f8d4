"""Minibatch targets: how every kernel sees the posterior.

A target represents a posterior pi(theta) proportional to exp(-U(theta)) with

    U(theta) = -sum_{i=1}^N log p(x_i | theta) - log p(theta),

and gives kernels what stochastic-gradient MCMC needs:

* `energy_and_gradient(state, seed)`: an unbiased minibatch estimate

      U~(theta) = -(N / n) sum_{i in batch} log p(x_i | theta) - log p(theta)

  and its gradient, on a fresh minibatch chosen by `seed`;
* `energy(state)`: the exact full-data U(theta), accumulated over chunks of
  the data so that N times the model never has to fit in memory at once;
* `gradient_noise_variance(state, seed)`: a per-coordinate estimate of the
  variance of the minibatch gradient, from per-example gradients (used by
  noise estimates such as SGHMC's B-hat).

The state is one tensor or a list of tensors (one per parameter). Leading
dimensions are chains: a log-likelihood returns one value per
example in its last axis, `batch_shape + [n]`, and a log-prior returns
`batch_shape`. By default all chains of one step see the same minibatch
(common random numbers, cheap, but the chains' gradient noise is then
correlated); `InMemoryTarget(independent_minibatches=True)` gives each chain
its own. The injected noise is always independent.

Modules, by where the data lives:

* `in_memory`: `InMemoryTarget`, data in memory, batches drawn from the
  kernel's seed (reproducible, XLA-compilable).
* `dataset`: `DatasetTarget`, batches from a `tf.data.Dataset`.
* `tfrecord`: `TFRecordTarget`, data larger than memory in sharded files,
  i.i.d. records drawn from the seed.
* `sharded`: `ShardedTarget`, data split across the replicas of a
  `tf.distribute` strategy.
* `joint`: `JointDistributionTarget`, a TFP JointDistribution model.
* `log_prob`: `LogProbFnTarget`, TFP's `target_log_prob_fn` convention.
* `synthetic`: `NoisyGradientTarget`, the papers' noisy-gradient targets.
* `wrappers`: `ControlVariateTarget`, `TemperedTarget`, `find_mode`.
* `base`, `checks`, `energy`: the interface, the checks of user input, the
  energies shared with the Keras adapter.
"""

from tfp_sgmcmc.targets.base import MinibatchTarget, TargetCapabilityError
from tfp_sgmcmc.targets.dataset import DatasetTarget
from tfp_sgmcmc.targets.in_memory import (ENERGY_CHUNK_BYTES,
                                          MIN_ENERGY_CHUNK, InMemoryTarget,
                                          default_energy_chunk_size)
from tfp_sgmcmc.targets.joint import JointDistributionTarget
from tfp_sgmcmc.targets.log_prob import LogProbFnTarget
from tfp_sgmcmc.targets.sharded import ShardedTarget
from tfp_sgmcmc.targets.synthetic import NoisyGradientTarget
from tfp_sgmcmc.targets.tfrecord import TFRecordTarget, write_tfrecord_shards
from tfp_sgmcmc.targets.wrappers import (ControlVariateTarget,
                                         TemperedTarget, find_mode)

__all__ = [
    "MinibatchTarget",
    "InMemoryTarget",
    "DatasetTarget",
    "NoisyGradientTarget",
    "ControlVariateTarget",
    "TemperedTarget",
    "TargetCapabilityError",
    "JointDistributionTarget",
    "LogProbFnTarget",
    "ShardedTarget",
    "TFRecordTarget",
    "write_tfrecord_shards",
    "find_mode",
]
