"""The energies of AMAGOLD's M-H test in `fit`: U over the training set, or
U~ of two positions on one minibatch.

    U(theta) = sum over `energy_data` of -log p(y | x, theta) - log p(theta)

(the minibatch estimate is `tfp_sgmcmc.targets.energy.minibatch_energy`, N
times the batch's mean NLL minus the log prior). Each test is one compiled
call (`run_test`): the energies, the sampler's test and the health check of
the state after it, under XLA where the model's train step is. In-memory
arrays are summed inside that call over batches of `batch_size` by the
targets' accumulator (`targets.energy.sum_over_chunks`: static slices, a
loop beyond `targets.energy.MAX_UNROLLED_CHUNKS` batches); a
`tf.data.Dataset` is iterated from Python first.

The minibatch test over arrays draws its batch as `AMAGOLD`'s kernel does
on an `InMemoryTarget`: `batch_size` indices with replacement, from the
energy seed of the outer step (`random.uniform_indices`); over a dataset
it takes the stream's next batch.
"""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import random
from tfp_sgmcmc.keras import losses as losses_lib
from tfp_sgmcmc.keras.fit import health as health_lib
from tfp_sgmcmc.keras.fit import keras_files
from tfp_sgmcmc.targets import energy as energy_lib

__all__ = ["AcceptanceEnergies"]

_NOT_COMPUTED = object()



class AcceptanceEnergies:
  """Compiled energy functions of a model, built at the first use.

  Args:
    data: the training set, (x, y) arrays or a finite `tf.data.Dataset` of
      (x, y) batches.
    batch_size: batch size for arrays (the exact sum runs in batches of it;
      the minibatch test draws one batch of it).
    num_examples: N.
    log_prior: log p(theta), a function of the list of trainable weights.
  """

  def __init__(self, data, batch_size, num_examples, log_prior):
    self._data = data
    self._batch_size = int(batch_size)
    self._num_examples = int(num_examples)
    self._log_prior = log_prior
    self._digest = _NOT_COMPUTED
    self._built = False
    self._checked = False
    self._batch_nll = None
    self._current_log_prior = None
    self._full_energy = None
    self._minibatch_function = None
    self._exact_body = None
    self._minibatch_body = None
    # Two independent minibatch estimates of grad U at given weights, over
    # arrays (`mass_estimate="gradients"`).
    self.gradient_body = None
    self._jit = False
    # The compiled test (`run_test`) and what it was built for.
    self._test_function = None
    self._test_for = None
    self._arrays = None
    self._dataset = None
    # The minibatch test's position in the dataset's stream (saved by
    # backups); over arrays the batch comes from the outer step's seed.
    self._iterator = None
    self.minibatches_drawn = 0

  @property
  def data(self):
    """`energy_data` as given."""
    return self._data

  def digest(self):
    """SHA-256 of `energy_data`'s arrays (dtype, shape, bytes), computed
    once; None for a dataset or none given. A backup records it: the
    chain's cached U(theta) is a sum over these examples."""
    if self._digest is _NOT_COMPUTED:
      data = self._data
      self._digest = None if not isinstance(data, (tuple, list)) else (
          keras_files.weights_digest([
              np.asarray(a) for a in tf.nest.flatten(data)]))
    return self._digest

  def _build(self, model, likelihood, exact):
    n = float(self._num_examples)
    log_prior = self._log_prior
    self._jit = health_lib.use_xla(model)

    def current_log_prior():
      return tf.cast(log_prior([v.value for v in model.trainable_variables]),
                     tf.float64)

    def batch_nll(x, y):
      return tf.cast(likelihood.batch_nll(y, model(x, training=False)),
                     tf.float64)
    self._batch_nll = tf.function(batch_nll, reduce_retracing=True,
                                  autograph=False)
    data = self._data
    if isinstance(data, (tuple, list)):
      if len(data) != 2:
        raise ValueError("`energy_data` must be a pair (x, y); got "
                         f"{len(data)} items.")
      x, y = (tf.nest.map_structure(tf.convert_to_tensor, a) for a in data)
      y = losses_lib.single_output(y)  # {"p": y} for one named output.
      size = int(tf.shape(y)[0])
      if size != self._num_examples and exact:
        raise ValueError(
            f"`energy_data` holds {size} examples but num_examples="
            f"{self._num_examples}: the exact M-H test needs the whole "
            "training set (and N must be its size).")
      batch = self._batch_size
      num_batches = -(-size // batch)

      def chunk(a, start, length):
        return tf.nest.map_structure(lambda t: t[start:start + length], a)
      all_x, all_y = x, y
      unroll = exact and num_batches <= energy_lib.MAX_UNROLLED_CHUNKS
      if unroll:
        # The batches as separate tensors (not slices taken in the compiled
        # function, which XLA copies at each call).
        parts = [(chunk(x, i * batch, batch), chunk(y, i * batch, batch))
                 for i in range(num_batches)]
        x = y = None
      else:
        self._arrays = (x, y)
        # XLA runs a loop over dynamic slices several times slower.
        self._jit = self._jit and not exact

      def full_energy(x, y):
        def chunk_sum(start, length):
          if unroll:
            return batch_nll(*parts[start // batch])
          return batch_nll(chunk(x, start, length), chunk(y, start, length))
        total = energy_lib.sum_over_chunks(chunk_sum, size, batch,
                                           unroll=unroll)
        return total - current_log_prior()
      self._exact_body = lambda: (full_energy(x, y), None)

      def minibatch_gradients(weights, seed):
        # Two unbiased estimates of grad U at `weights` (the model's
        # variables untouched), as `warm_up` takes on a minibatch target:
        # each N times the mean NLL gradient over `batch` examples drawn
        # with replacement (as an InMemoryTarget draws) from a seed derived
        # from the test's step `seed`, minus the log prior's. Independent
        # batches, so that `gradient_variance` sees their noise.
        non_trainable = [v.value for v in model.non_trainable_variables]
        estimates = []
        for seed in random.derive_seeds(seed, 2):
          idx = minibatch_indices(seed, min(batch, size), size)
          xs = tf.nest.map_structure(lambda a: tf.gather(a, idx), all_x)
          with tf.GradientTape() as tape:
            tape.watch(weights)
            out, _ = model.stateless_call(weights, non_trainable, xs,
                                          training=False)
            energy = energy_lib.minibatch_energy(
                tf.cast(likelihood.batch_nll(tf.gather(all_y, idx), out),
                        tf.float64) / tf.cast(tf.shape(idx)[0], tf.float64),
                tf.cast(log_prior(weights), tf.float64), n)
          estimates.append(tape.gradient(energy, weights,
                                         unconnected_gradients="zero"))
        return estimates
      self.gradient_body = minibatch_gradients
      self._full_energy = tf.function(lambda: full_energy(x, y),
                                      autograph=False, jit_compile=self._jit)
    else:
      self._dataset = data
    self._current_log_prior = tf.function(current_log_prior, autograph=False)

    def minibatch_energies(x, y, start):
      # U~ at theta (the trajectory's start, through stateless_call, so the
      # model's variables are untouched) and at theta* (the variables), on
      # one minibatch.
      non_trainable = [v.value for v in model.non_trainable_variables]
      out, _ = model.stateless_call(start, non_trainable, x, training=False)
      size = tf.cast(tf.shape(out)[0], tf.float64)
      current = energy_lib.minibatch_energy(
          tf.cast(likelihood.batch_nll(y, out), tf.float64) / size,
          log_prior(start), n)
      proposed = energy_lib.minibatch_energy(
          batch_nll(x, y) / size, current_log_prior(), n)
      return current, proposed
    self._minibatch_function = tf.function(
        minibatch_energies, reduce_retracing=True, autograph=False)
    self._minibatch_body = minibatch_energies
    self._built = True

  def exact(self, model, likelihood):
    """U(theta) at the model's weights, a float64 tensor."""
    if not self._built:
      self._build(model, likelihood, exact=True)
    if self._full_energy is not None:
      return self._full_energy()
    total, count = tf.constant(0., tf.float64), 0
    for batch in self._dataset:
      if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError("`energy_data` must yield (x, y) batches.")
      total += self._batch_nll(batch[0], batch[1])
      if not self._checked:
        count += int(tf.shape(losses_lib.single_output(batch[1]))[0])
        if count > self._num_examples:
          # Stop counting: a pipeline of unknown cardinality may be
          # infinite (a .repeat() behind a .filter()).
          raise ValueError(
              f"`energy_data` holds more than num_examples="
              f"{self._num_examples} examples (counted {count} so far, "
              "and stopped: its length is unknown to tf.data, so it may "
              "repeat forever): the exact M-H test needs the whole "
              "training set once (and N must be its size). Give the "
              "dataset without .repeat(), or (x, y) arrays.")
    if not self._checked:
      if count != self._num_examples:
        raise ValueError(
            f"`energy_data` holds {count} examples but num_examples="
            f"{self._num_examples}: the exact M-H test needs the whole "
            "training set (and N must be its size).")
      self._checked = True
    return total - self._current_log_prior()

  def _next_batch(self, seed):
    """The minibatch test's batch: over arrays, the indices the kernel
    draws from the outer step's energy `seed`; else the stream's next."""
    if self._arrays is not None:
      x, y = self._arrays
      size = int(tf.shape(y)[0])
      idx = minibatch_indices(seed, min(self._batch_size, size), size)
      return tf.nest.map_structure(lambda a: tf.gather(a, idx), x), tf.gather(
          y, idx)
    if self._iterator is None:
      # After a restore, skip the batches the run had already drawn.
      self._iterator = iter(
          self._dataset.repeat().skip(self.minibatches_drawn))
    batch = next(self._iterator)
    self.minibatches_drawn += 1
    return batch[0], batch[1]

  def start(self, sampler, model, likelihood):
    """Before the first trajectory: U at the chain's start (exact test)."""
    if sampler.acceptance_energy == "exact":
      sampler.set_energy(self.exact(model, likelihood))

  def run_test(self, sampler, model, likelihood, health):
    """AMAGOLD's M-H test at the end of a trajectory, with the energies it
    asks for, in one compiled call that also runs `health`'s check on the
    state after it; returns (accepted, the check's values)."""
    exact = sampler.acceptance_energy == "exact"
    if not self._built:
      self._build(model, likelihood, exact=exact)
    sampler.check_test_due()
    after = health.ensure_built(model, sampler, tf.distribute.get_strategy())
    if self._test_for != (sampler, health.version):
      if exact and self._exact_body is not None:
        energy_fn = self._exact_body   # The sum over arrays, in the call.
      elif exact:
        energy_fn = lambda energy: (energy, None)  # noqa: E731
      else:
        energy_fn = lambda x, y: self._minibatch_body(  # noqa: E731
            x, y, [s.value for s in sampler.start_position])[::-1]
      self._test_function = sampler.test_function(
          energy_fn, after, jit_compile=self._jit,
          gradient_fn=self.gradient_body if exact else None)
      self._test_for = (sampler, health.version)
    if exact:
      args = () if self._exact_body is not None else (
          self.exact(model, likelihood),)
    else:
      _, energy_seed, _ = sampler.outer_step_seeds()
      args = self._next_batch(energy_seed)
    accepted, values = self._test_function(*args)
    return bool(accepted), values

  def state(self):
    """The batch sampler's position, for a backup (JSON-able). The
    `minibatch_rng` key stays for the file format (always None: batches
    over arrays come from the step's seed, which the sampler's state
    holds)."""
    return dict(minibatches_drawn=self.minibatches_drawn, minibatch_rng=None)

  def restore(self, state):
    self.minibatches_drawn = state["minibatches_drawn"]
    self._iterator = None


def minibatch_indices(seed, batch_size, num_examples):
  """The example indices of the minibatch M-H test with the outer step's
  energy `seed`: those `InMemoryTarget(..., batch_size).minibatch_indices`
  gives for the same seed."""
  return random.uniform_indices(seed, [batch_size], num_examples)
