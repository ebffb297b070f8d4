"""Data-parallel targets: data split across the replicas of a tf.distribute
strategy.

`ShardedTarget` holds a data set split into one contiguous shard per replica
of a `tf.distribute.Strategy` (`MirroredStrategy` over GPUs or logical CPU
devices, `MultiWorkerMirroredStrategy` over worker processes). A kernel uses
it like any other target: it calls `energy_and_gradient` and `energy` from
its own (cross-replica) code, and the target computes each replica's share of
the log-likelihood and its gradient on that replica's device, sums the shares
with `strategy.reduce` (an all-reduce), and adds the prior once. Everything
else in the kernel (momentum, noise, the M-H test) runs once, unchanged.

Two ways to draw a minibatch of n examples:

* `minibatch="per_shard"` (default, the data-parallel one): each of the R
  replicas draws n / R indices uniformly, with replacement, from its own
  shard of N_r examples, from a seed derived from the step's seed and its
  replica id, and contributes (N_r / (n / R)) sum_i log p(x_i | theta). The
  sum over replicas is an unbiased (stratified) estimate of the full-data
  log-likelihood, each replica evaluates n / R examples, and no data moves
  between devices. `minibatch_indices(seed)` returns the global indices a
  step uses, so a single-device `InMemoryTarget` whose `minibatch_indices`
  returns them computes the same estimator.
* `minibatch="global"`: the n indices are `InMemoryTarget`'s for the same
  seed (uniform over all N examples); each replica evaluates the whole batch
  on its shard's rows and masks out the indices that are not its own. The
  chain is then `InMemoryTarget`'s chain up to the float rounding of the
  sum's order, but every replica evaluates n examples: this splits memory,
  not gradient work.

In both, the batch distribution does not depend on the state and the batches
of different steps are independent, which is what AMAGOLD's exactness
argument (Zhang et al. 2020, Theorem 1) asks of its minibatches. The exact
energy U(theta) is one pass over every shard in chunks of
`energy_chunk_size`, run on all replicas at once and summed: this is where
AMAGOLD's cost at large N goes, and it divides by R.

Chains batched along the state's leading dimensions share each step's
minibatch (as with `InMemoryTarget`'s default); per-chain minibatches are not
offered here. Tested with `MirroredStrategy` over two logical CPU devices
(tests/processes/test_sharded_devices.py); with
`MultiWorkerMirroredStrategy` every worker needs the same `data` (each keeps
only its replicas' shards on its devices), which has not been run here.

The target works eagerly and inside `tf.function` (the usual way to run
`tfp.mcmc.sample_chain`), not under XLA (`jit_compile=True`): a
`tf.distribute` step is not one XLA computation.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import random
from tfp_sgmcmc._structure import pack_like, state_dtype
from tfp_sgmcmc.targets import energy as energy_lib
from tfp_sgmcmc.targets.base import (DataLikelihoodTarget,
                                     TargetCapabilityError)
from tfp_sgmcmc.targets.checks import (check_batch_size, check_finite_data,
                                       check_float_state,
                                       check_functions_callable,
                                       checked_log_prior)
from tfp_sgmcmc.targets.in_memory import InMemoryTarget

__all__ = ["ShardedTarget", "MINIBATCH_SCHEMES"]

MINIBATCH_SCHEMES = ("per_shard", "global")

_SUM = tf.distribute.ReduceOp.SUM


class ShardedTarget(DataLikelihoodTarget):
  """A posterior over data split across the replicas of a strategy.

  Args:
    log_likelihood_fn: `(params, batch) -> log p(x_i | params)`, one value per
      example in the last axis, as for `InMemoryTarget`.
    data: a nested structure of arrays or tensors with a common leading axis
      N, e.g. `(x, y)`. It is split into `strategy.num_replicas_in_sync`
      contiguous shards (sizes as `np.array_split`), each copied to its
      replica's device.
    batch_size: n, the global minibatch size (with `minibatch="per_shard"` a
      multiple of the number of replicas; each draws n / R).
    strategy: a `tf.distribute.Strategy`; default the current one
      (`tf.distribute.get_strategy()`).
    log_prior_fn: `params -> log p(params)`, evaluated once per call, not
      per replica.
    energy_chunk_size: examples per chunk of each replica's exact-energy
      pass (default min(shard size, 4096)).
    parameter_shapes: as for `InMemoryTarget`.
    minibatch: "per_shard" (default) or "global"; see the module docstring.

  #### Example

  ```python
  strategy = tf.distribute.MirroredStrategy()   # every local GPU, or the CPU
  target = tfp_sgmcmc.ShardedTarget(log_likelihood, (x, y), batch_size=100,
                                    strategy=strategy, log_prior_fn=prior)
  kernel = tfp_sgmcmc.AMAGOLD(target, step_size=1e-3, num_leapfrog_steps=10,
                              friction=1.)
  run = tf.function(lambda seed: tfp.mcmc.sample_chain(
      1000, tf.zeros([d]), kernel=kernel, trace_fn=None, seed=seed))
  draws = run(tf.constant([0, 1]))
  ```
  """

  def __init__(self, log_likelihood_fn, data, batch_size, strategy=None,
               log_prior_fn=None, energy_chunk_size=None,
               parameter_shapes=None, minibatch="per_shard"):
    check_functions_callable(log_likelihood_fn, log_prior_fn)
    if minibatch not in MINIBATCH_SCHEMES:
      raise ValueError(f"`minibatch` must be one of {MINIBATCH_SCHEMES}; got "
                       f"{minibatch!r}.")
    strategy = strategy or tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.Strategy):
      raise TypeError(f"`strategy` must be a tf.distribute.Strategy; got "
                      f"{type(strategy).__name__}.")
    arrays = tf.nest.map_structure(np.asarray, data)
    leaves = tf.nest.flatten(arrays)
    if not leaves or any(a.ndim == 0 for a in leaves):
      raise ValueError("`data` must be a nested structure of arrays with a "
                       "common leading example axis N.")
    check_finite_data(arrays)
    lengths = sorted({a.shape[0] for a in leaves})
    if len(lengths) != 1:
      raise ValueError(f"the parts of `data` have different lengths "
                       f"{lengths}; expected one common leading axis N.")
    num_examples = int(lengths[0])
    num_replicas = strategy.num_replicas_in_sync
    if num_examples < num_replicas:
      raise ValueError(f"`data` has N = {num_examples} examples, fewer than "
                       f"the {num_replicas} replicas it is split across.")
    batch_size = check_batch_size(
        batch_size, num_examples)
    if minibatch == "per_shard" and batch_size % num_replicas:
      raise ValueError(
          f"with minibatch='per_shard' each of the {num_replicas} replicas "
          f"draws batch_size / {num_replicas} examples; `batch_size` = "
          f"{batch_size} is not a multiple of {num_replicas}. Use a multiple "
          "or minibatch='global'.")
    super().__init__(log_likelihood_fn, num_examples, log_prior_fn,
                     parameter_shapes)
    self._strategy = strategy
    self._batch_size = batch_size
    self._minibatch_scheme = minibatch
    sizes = [len(s) for s in np.array_split(np.arange(num_examples),
                                            num_replicas)]
    self._shard_sizes = sizes
    self._offsets = [int(o) for o in np.cumsum([0] + sizes[:-1])]
    if energy_chunk_size is not None and int(energy_chunk_size) < 1:
      raise ValueError(f"`energy_chunk_size` must be >= 1; got "
                       f"{energy_chunk_size}.")
    self._chunk = energy_chunk_size

    try:
      local_devices = strategy.extended.worker_devices
    except RuntimeError:  # The default strategy: the current device.
      local_devices = [None]

    def shard(ctx):
      r = ctx.replica_id_in_sync_group
      lo, hi = self._offsets[r], self._offsets[r] + sizes[r]
      # Replica ids are global; this worker's replicas are its devices in
      # order.
      with tf.device(local_devices[r % len(local_devices)]):
        return tf.nest.map_structure(lambda a: tf.identity(a[lo:hi]), arrays)
    # Called once per replica of this worker: each shard lives on its own
    # replica's device only.
    self._shards = strategy.experimental_distribute_values_from_function(
        shard)

  @property
  def strategy(self):
    return self._strategy

  @property
  def batch_size(self):
    return self._batch_size

  @property
  def minibatch(self):
    """The minibatch scheme, "per_shard" or "global"."""
    return self._minibatch_scheme

  @property
  def shard_sizes(self):
    """N_r, the number of examples on each replica."""
    return list(self._shard_sizes)

  # --- the minibatch ------------------------------------------------------

  def _shard_seed(self, seed, replica_id):
    return random.fold_in(tfp.random.sanitize_seed(seed), replica_id)

  def _shard_indices(self, seed, replica_id):
    """Replica `replica_id`'s n / R indices into its own shard."""
    return random.philox_indices(
        self._shard_seed(seed, replica_id),
        [self._batch_size // self._strategy.num_replicas_in_sync],
        self._shard_sizes[replica_id])

  def _global_indices(self, seed):
    # InMemoryTarget's draw for the same seed (InMemoryTarget._shared_indices).
    return random.uniform_indices(seed, [self._batch_size],
                                    self.num_examples)

  def minibatch_indices(self, seed):
    """The global example indices (into `data`) of the step with `seed`,
    shape [n]: with "per_shard" replica 0's draws first, then replica 1's,
    ...; with "global", `InMemoryTarget`'s indices for the seed."""
    if self._minibatch_scheme == "global":
      return self._global_indices(seed)
    return tf.concat([self._offsets[r] + self._shard_indices(seed, r)
                      for r in range(len(self._shard_sizes))], axis=0)

  # --- one replica's share ------------------------------------------------

  def _local_log_likelihood_sum(self, state, shard, replica_id, seed):
    """This replica's scaled share of the minibatch log-likelihood."""
    if self._minibatch_scheme == "per_shard":
      indices = self._shard_indices(seed, replica_id)
      batch = tf.nest.map_structure(lambda d: tf.gather(d, indices), shard)
      ll = self._log_likelihood(state, batch, int(indices.shape[0]))
      scale = self._shard_sizes[replica_id] / float(indices.shape[0])
      return _constant(scale, ll) * tf.reduce_sum(ll, axis=-1)
    local = self._global_indices(seed) - self._offsets[replica_id]
    mine = (local >= 0) & (local < self._shard_sizes[replica_id])
    batch = tf.nest.map_structure(
        lambda d: tf.gather(d, tf.clip_by_value(
            local, 0, self._shard_sizes[replica_id] - 1)), shard)
    ll = self._log_likelihood(state, batch, self._batch_size)
    ll = tf.where(mine, ll, tf.zeros_like(ll))
    scale = self.num_examples / float(self._batch_size)
    return _constant(scale, ll) * tf.reduce_sum(ll, axis=-1)

  def _local_full_log_likelihood(self, state, shard, replica_id):
    """Sum of log p(x_i | theta) over this replica's whole shard, in chunks,
    accumulated in float64 (`energy.sum_of_examples`) and returned in the
    state's dtype for the all-reduce."""
    size = self._shard_sizes[replica_id]

    def chunk_sum(start, n):
      batch = tf.nest.map_structure(lambda d: d[start:start + n], shard)
      return energy_lib.sum_of_examples(
          self._log_likelihood(state, batch, n))

    total = energy_lib.sum_over_chunks(
        chunk_sum, size, min(size, int(self._chunk or 4096)))
    return tf.cast(total, state_dtype(state))

  # --- all-reduce ---------------------------------------------------------

  def _all_reduce(self, state, local_fn, with_gradient):
    """Sum over replicas of `local_fn(state, shard, replica_id)` (a
    per-chain value) and, if asked, of its gradient in `state`."""
    def replica_fn(shard):
      ctx = tf.distribute.get_replica_context()
      replica_id = _static_replica_id(ctx)
      parts = [tf.identity(p) for p in tf.nest.flatten(state)]
      if not with_gradient:
        return local_fn(pack_like(state, parts), shard, replica_id)
      with tf.GradientTape() as tape:
        tape.watch(parts)
        value = local_fn(pack_like(state, parts), shard, replica_id)
      grads = tape.gradient(value, parts,
                            unconnected_gradients=tf.UnconnectedGradients.ZERO)
      return value, grads

    per_replica = self._strategy.run(replica_fn, args=(self._shards,))
    return self._strategy.reduce(_SUM, per_replica, axis=None)

  def _negative_log_prior_and_gradient(self, state, batch_shape):
    parts = tf.nest.flatten(state)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      value = -tf.convert_to_tensor(checked_log_prior(
          self._log_prior_fn, pack_like(state, parts), batch_shape,
          self.parameter_shapes))
    grads = tape.gradient(value, parts,
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return value, grads

  def _energy_and_gradient_of(self, state, local_fn):
    """-sum_r local_r - log prior and its gradient, in one pass."""
    ll, ll_grads = self._all_reduce(state, local_fn, with_gradient=True)
    prior, prior_grads = self._negative_log_prior_and_gradient(state,
                                                               ll.shape)
    energy = -ll + tf.cast(prior, ll.dtype)
    grads = [-g + tf.cast(p, g.dtype) for g, p in zip(ll_grads, prior_grads)]
    return energy, pack_like(state, grads)

  def _differentiable_energy(self, state, local_fn):
    """-sum_r local_r - log prior, differentiable by an outer tape (as
    `ControlVariateTarget` and `find_mode` need) through a custom gradient
    that runs a second, gradient-computing pass only when asked."""
    parts = tf.nest.flatten(state)

    @tf.custom_gradient
    def negative_log_likelihood(*parts):
      value = -self._all_reduce(pack_like(state, list(parts)), local_fn,
                                with_gradient=False)

      def grad(upstream):
        _, grads = self._all_reduce(pack_like(state, list(parts)), local_fn,
                                    with_gradient=True)
        return [_times_per_chain(-upstream, g) for g in grads]
      return value, grad

    nll = negative_log_likelihood(*parts)
    return nll - tf.cast(checked_log_prior(
        self._log_prior_fn, state, nll.shape, self.parameter_shapes),
                         nll.dtype)

  # --- the target interface -----------------------------------------------

  def _minibatch_fn(self, seed):
    return lambda state, shard, r: self._local_log_likelihood_sum(
        state, shard, r, seed)

  def minibatch_energy(self, state, seed):
    return self._differentiable_energy(state, self._minibatch_fn(seed))

  def energy_and_gradient(self, state, seed):
    check_float_state(state)
    return self._energy_and_gradient_of(state, self._minibatch_fn(seed))

  def energy(self, state):
    """Exact U(theta): every replica sums its shard, the sums are reduced."""
    return self._differentiable_energy(state, self._local_full_log_likelihood)

  def gradient_noise_variance(self, state, seed):
    """Per-coordinate variance of the minibatch gradient. With "per_shard"
    batches the stratified estimator's variance, sum_r (N_r^2 / n_r)
    Var_r[g_i], from each replica's per-example gradients."""
    if self._minibatch_scheme != "per_shard":
      raise TargetCapabilityError(
          "ShardedTarget(minibatch='global') has no gradient-noise estimate; "
          "use minibatch='per_shard'.")
    n_r = self._batch_size // self._strategy.num_replicas_in_sync
    if n_r < 2:
      raise ValueError("a per-example gradient-noise estimate needs at least "
                       f"2 examples per replica; got {n_r}.")

    def replica_fn(shard):
      replica_id = _static_replica_id(tf.distribute.get_replica_context())
      indices = self._shard_indices(seed, replica_id)
      batch = tf.nest.map_structure(lambda d: tf.gather(d, indices), shard)
      local = InMemoryTarget(
          self._log_likelihood_fn, shard, batch_size=n_r)
      # pylint: disable-next=protected-access
      return local._noise_variance_from_batch(state, batch, n_r)

    per_replica = self._strategy.run(replica_fn, args=(self._shards,))
    return self._strategy.reduce(_SUM, per_replica, axis=None)


def _static_replica_id(ctx):
  replica_id = tf.get_static_value(ctx.replica_id_in_sync_group)
  if replica_id is None:
    raise ValueError("ShardedTarget needs a strategy whose replica ids are "
                     "known when the step is traced (MirroredStrategy, "
                     "MultiWorkerMirroredStrategy, the default strategy).")
  return int(replica_id)


def _constant(value, like):
  """A Python float in `like`'s dtype. tf.cast of a Python float makes a
  float32 tensor first, which would round N / n in a float64 chain."""
  return tf.constant(value, like.dtype)


def _times_per_chain(per_chain, part):
  """per_chain [batch] times part [batch + event], broadcasting the event."""
  extra = part.shape.rank - per_chain.shape.rank
  return tf.reshape(per_chain, tf.concat(
      [tf.shape(per_chain), tf.ones([extra], tf.int32)], 0)) * part
