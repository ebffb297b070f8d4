"""`DatasetTarget`: a posterior whose minibatches stream from a
`tf.data.Dataset`, for data that does not fit on the device."""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc._structure import pack_like
from tfp_sgmcmc.targets import energy as energy_lib
from tfp_sgmcmc.targets.base import DataLikelihoodTarget
from tfp_sgmcmc.targets.checks import non_finite_examples, refuse_under_xla
from tfp_sgmcmc.targets.wrappers import FullBatchTarget

_ZERO = tf.UnconnectedGradients.ZERO

__all__ = ["DatasetTarget", "streamed_target", "reads_pipelines",
           "hessian_vector_products"]


class DatasetTarget(DataLikelihoodTarget):
  """A posterior whose minibatches stream from a `tf.data.Dataset`.

  Args:
    log_likelihood_fn: as for `InMemoryTarget`.
    dataset: a dataset of minibatches (already batched and, for long chains,
      repeated and shuffled). One element is taken per gradient evaluation.
    num_examples: N, the size of the full training set (needed to scale the
      minibatch log-likelihood by N/n). Checked against `full_dataset`
      where one is given; without it nothing can check N, and an N' in
      its place samples the likelihood raised to N'/N.
    log_prior_fn: as for `InMemoryTarget`.
    full_dataset: a finite dataset of batches covering the training set once,
      used for the exact energy U(theta), one pass over it per energy;
      without it `energy` is unavailable. From arrays, cut the batches
      before tf.data sees them (as below): `.batch` over a dataset of
      examples copies them one by one on every pass. The energy's gradient
      is one more pass (`exact_energy_and_gradient` gives both from one),
      a Hessian-vector product another; each holds a few batches in memory
      and one copy of the model in its graph, whatever N. A jacobian of
      the gradient (`GradientTape.jacobian`) needs
      `experimental_use_pfor=False`: TensorFlow cannot vectorise the loop
      over the batches.
    parameter_shapes: as for `InMemoryTarget`.

  A pipeline that shuffles and batches epoch by epoch samples without
  replacement: the batches of one epoch sum to the full gradient, so their
  noise is anti-correlated within an epoch, not i.i.d. as with
  `InMemoryTarget`'s seed-drawn batches.

  The kernel's seed does not choose the batch here: the pipeline's own
  shuffling does. Works eagerly and inside `tf.function` without XLA; under
  `jit_compile=True` drawing a batch raises a `ValueError` at trace time
  (XLA cannot compile a tf.data iterator; use `InMemoryTarget` there).

  Returns:
    A `MinibatchTarget`: the minibatch energy is
    U~(theta) = -log p(theta) - (N / n) sum_{i in batch} log p(x_i | theta)
    on the dataset's next batch of n examples.

  Raises:
    TypeError: `dataset` is not a `tf.data.Dataset`.
    ValueError: `num_examples` is not a positive integer, `dataset` is
      empty or unbatched, or `full_dataset` does not cover N examples.

  #### Example

  ```python
  batches = tf.data.Dataset.from_tensor_slices((x, y)).repeat().shuffle(
      1024, seed=0).batch(32)
  full = tf.data.Dataset.from_tensor_slices((x.reshape(4, 256, d),
                                             y.reshape(4, 256)))
  streamed = tfp_sgmcmc.DatasetTarget(log_likelihood, batches,
                                      num_examples=1024, log_prior_fn=prior,
                                      full_dataset=full)
  print(float(streamed.energy(tf.zeros([d]))))   # exact U, from `full`
  samples = tfp.mcmc.sample_chain(
      20, tf.zeros([d]), kernel=tfp_sgmcmc.SGLD(streamed, step_size=4e-3),
      trace_fn=None, seed=[0, 1])   # eager: a tf.data iterator
  ```
  """

  def __init__(self, log_likelihood_fn, dataset, num_examples,
               log_prior_fn=None, full_dataset=None, parameter_shapes=None):
    if not isinstance(dataset, tf.data.Dataset):
      raise TypeError(f"`dataset` must be a tf.data.Dataset; got "
                      f"{type(dataset).__name__}.")
    if (num_examples is None or isinstance(num_examples, (bool, str, bytes))
        or not isinstance(num_examples, (int, np.integer, float, np.floating))
        or not np.isfinite(num_examples)
        or num_examples != int(num_examples) or int(num_examples) < 1):
      raise ValueError(f"`num_examples` (N, the training-set size) must be a "
                       f"positive integer; got {num_examples!r}.")
    _check_batched_spec("dataset", dataset)
    if dataset.cardinality() == 0:
      raise ValueError("`dataset` is empty (cardinality 0): it must yield "
                       "minibatches; for long chains repeat it "
                       "(dataset.repeat()).")
    if full_dataset is not None:
      _check_full_dataset(dataset, full_dataset, int(num_examples))
    super().__init__(log_likelihood_fn, int(num_examples), log_prior_fn,
                     parameter_shapes)
    self._dataset = dataset
    self._cardinality = int(dataset.cardinality())
    self._iterator = iter(dataset)
    self._full_dataset = full_dataset
    self._full_count = None

  @property
  def has_exact_energy(self):
    return self._full_dataset is not None

  @property
  def is_full_batch(self):
    """False: a minibatch energy reads one batch of `dataset`."""
    return False

  def with_full_batch(self):
    """This target with exact gradients, every energy one pass over
    `full_dataset` (a `FullBatchTarget`), as `InMemoryTarget`'s; what
    `tfp_sgmcmc.sample` samples where minibatch noise holds the step size
    down."""
    return FullBatchTarget(self)

  @property
  def dataset(self):
    """The pipeline the minibatches are read from."""
    return self._dataset

  @property
  def minibatches_from_seed(self):
    """False: the pipeline, not the kernel's seed, chooses each batch."""
    return False

  def _next_batch(self):
    refuse_under_xla("DatasetTarget draws a minibatch from its `dataset`")
    if self._checks_exhaustion:
      batch = self._next_batch_checked()
    else:
      batch = _get_next(self._iterator)
    n = tf.shape(tf.nest.flatten(batch)[0])[0]
    return batch, n

  @property
  def _checks_exhaustion(self):
    """Whether each draw checks for the end of `dataset`: only when it can
    end (its cardinality is finite or unknown). A repeated dataset
    (infinite cardinality) cannot run out, and its draws skip the optional
    and the assertion (benchmarks/dataset_draw.py measures that check)."""
    return self._cardinality != tf.data.INFINITE_CARDINALITY

  def _next_batch_checked(self):
    """The next batch, or a clear error when `dataset` is exhausted."""
    optional = self._iterator.get_next_as_optional()
    message = ("`dataset` is exhausted: DatasetTarget takes one batch per "
               "gradient evaluation, so a chain longer than the dataset needs "
               "it repeated (dataset.repeat()).")
    checks = []
    if tf.executing_eagerly():
      if not bool(optional.has_value()):
        raise ValueError(message)
    else:
      # An explicit dependency: OptionalGetValue is not ordered after the
      # assertion otherwise, and fails first with TF's "The given optional
      # does not have a value".
      checks.append(tf.debugging.Assert(optional.has_value(), [message]))
    with tf.control_dependencies(checks):
      return optional.get_value()

  def minibatch_energy(self, state, seed):
    del seed  # The pipeline chooses the batch.
    batch, _ = self._next_batch()
    return self._energy_from_batch(state, batch, None)

  def minibatch_energies(self, states, seed):
    del seed  # One batch from the pipeline, shared by all states.
    batch, _ = self._next_batch()
    return [self._energy_from_batch(state, batch, None) for state in states]

  def gradient_noise_variance(self, state, seed):
    del seed
    batch, _ = self._next_batch()
    return self._noise_variance_from_batch(state, batch, None)

  def non_finite_data(self):
    """The first batch with NaN or inf, read from the start of
    `full_dataset` (all of it) or else of `dataset` (up to N examples; a
    new iterator, so a shuffling pipeline gives other batches than the
    chain saw): a phrase, or "" (see `MinibatchTarget.non_finite_data`)."""
    if self._full_dataset is not None:
      source, name = self._full_dataset, "full_dataset"
    else:
      source, name = self._dataset, "dataset"
    seen = 0
    for number, batch in enumerate(source):
      phrase = non_finite_examples(batch, name)
      if phrase:
        return f"{phrase}, in its batch {number} (counted from its start)"
      seen += int(np.shape(tf.nest.flatten(batch)[0])[0])
      if seen >= self.num_examples and self._full_dataset is None:
        break
    return ""

  def energy(self, state):
    if self._full_dataset is None:
      return super().energy(state)
    return self._energy_from_total(state, self._full_log_likelihood(state))

  def exact_energy_and_gradient(self, state):
    """(U, grad U) from one pass over `full_dataset` (`energy` under a
    tape reads it twice: once for U, once for its gradient)."""
    if self._full_dataset is None:
      return super().exact_energy_and_gradient(state)
    parts = tf.nest.flatten(state)
    fixed = [tf.stop_gradient(p) for p in parts]

    def batch(data):
      with tf.GradientTape() as tape:
        tape.watch(fixed)
        total = self._batch_log_likelihood(fixed, state, data)
      return total, tape.gradient(total, fixed, unconnected_gradients=_ZERO)
    total, grads = self._full_pass(batch)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      energy = self._energy_from_total(pack_like(state, parts),
                                       tf.stop_gradient(total))
    # The prior's part of grad U; the likelihood's is -grads (chains are
    # independent, so each chain's gradient of the summed total is its own).
    prior = tape.gradient(energy, parts, unconnected_gradients=_ZERO)
    return energy, pack_like(state, [p - g for p, g in zip(prior, grads)])

  def _batch_log_likelihood(self, parts, state, data):
    return energy_lib.sum_of_examples(
        self._log_likelihood(pack_like(state, parts), data, None))

  def _full_log_likelihood(self, state):
    """sum_i log p(x_i | theta) over `full_dataset`, per chain, in float64:
    a pass over the data, as are its gradient and second derivatives, each
    a `_full_pass` over the batches' own derivatives (TensorFlow cannot
    differentiate `Dataset.reduce`, nor twice a loop over an iterator)."""
    def value(parts, data):
      return self._batch_log_likelihood(parts, state, data)

    @tf.custom_gradient
    def total(*parts):
      fixed = [tf.stop_gradient(p) for p in parts]
      def gradient(weights, variables=None):
        return _vjp_pass(self._full_pass, value, parts, weights, variables)
      return self._full_pass(lambda data: value(fixed, data)), gradient
    return total(*map(tf.convert_to_tensor, tf.nest.flatten(state)))

  def _full_pass(self, per_batch):
    """The sum of `per_batch(batch)` (tensors) over `full_dataset`, added
    in the data's order: the first batch's, then each next one's in a
    `tf.while_loop`, whose one traced body serves any N (written out, the
    graph held a copy of the likelihood per batch)."""
    refuse_under_xla("DatasetTarget computes the exact energy from its "
                      "`full_dataset`")
    batches = iter(self._full_dataset)
    total = per_batch(_get_next(batches))
    count = self._full_batches()
    if count == 1:
      return total

    def body(i, accumulated):
      return i + 1, tf.nest.map_structure(tf.add, accumulated,
                                          per_batch(_get_next(batches)))
    return tf.while_loop(lambda i, _: i < count, body, (tf.constant(1), total),
                         maximum_iterations=count - 1)[1]

  def _full_batches(self):
    """The number of batches in `full_dataset`, counted once (outside any
    trace) where its cardinality is unknown (e.g. a TFRecord pipeline or a
    `.filter`), with its examples, which must be N: the construction could
    not count them without a pass of its own, and a wrong N scales the
    minibatch energies, not this exact one, so the two would disagree."""
    if self._full_count is None:
      with tf.init_scope():   # Eagerly, also when first called in a trace.
        count = int(self._full_dataset.cardinality())
        if count < 0:
          count, examples = (int(c) for c in self._full_dataset.reduce(
              (tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
              lambda acc, batch: (acc[0] + 1, acc[1] + _examples(batch))))
          _check_full_count(self.num_examples, examples)
      self._full_count = count
    return self._full_count


def _vjp_pass(full_pass, value, parts, weights, variables):
  """The gradient of sum_chains `weights` x `value`(parts, batch), summed
  over the batches (one `full_pass`), with respect to `parts` and to the
  `variables` the likelihood reads (None: reads none), returned as a custom
  gradient wants it. Itself a custom gradient, so that a Hessian-vector
  product (Newton's start) is one more pass, each batch's second
  derivatives taken inside the loop's body."""
  fixed = [tf.stop_gradient(p) for p in parts]
  read = list(variables or [])

  def batch(data, weights, directions=None):
    with tf.GradientTape() as outer:
      outer.watch([weights] + fixed + read)
      with tf.GradientTape() as tape:
        tape.watch(fixed + read)
        total = value(fixed, data)
      grads = tape.gradient(total, fixed + read, output_gradients=weights,
                            unconnected_gradients=_ZERO)
      if directions is None:
        return grads
      along = tf.add_n([tf.reduce_sum(tf.cast(g * d, tf.float64))
                        for g, d in zip(grads, directions)])
    return outer.gradient(along, [weights] + fixed + read,
                          unconnected_gradients=_ZERO)

  def split(grads, inputs, variables):
    return grads[:inputs] if variables is None else (grads[:inputs],
                                                      grads[inputs:])

  @tf.custom_gradient
  def gradient(weights, *parts):
    del parts  # Read as `fixed`; `second` gives their derivatives.
    fixed_weights = tf.stop_gradient(weights)

    def second(*directions, variables=None):
      return split(full_pass(lambda data: batch(data, fixed_weights, list(
          directions))), 1 + len(fixed), variables)
    return full_pass(lambda data: batch(data, fixed_weights)), second
  return split(gradient(weights, *parts), len(parts), variables)


def _get_next(iterator):
  """The iterator's next element, as `get_next` gives it, but without
  `get_next`'s count of its calls in graphs traced without AutoGraph (TF's
  guard against a Python `for` over a dataset), which refuses the 33rd:
  our runs trace without AutoGraph, so an exact energy over a
  `full_dataset` of more than 32 batches (a `TFRecordTarget` beyond about
  135,000 examples), or the 33rd trace drawing from one `dataset`,
  failed."""
  return iterator.get_next_as_optional().get_value()


def streamed_target(target):
  """The `DatasetTarget` under any wrappers of `target`, or None."""
  while hasattr(target, "base_target"):
    target = target.base_target
  return target if isinstance(target, DatasetTarget) else None


def reads_pipelines(target):
  """Whether `target` (through any wrappers) is a `DatasetTarget`, whose
  minibatches and exact energy come from tf.data iterators: XLA cannot
  compile them, and `tf.vectorized_map` cannot replicate them."""
  return streamed_target(target) is not None


def hessian_vector_products(energy, point, vectors):
  """The rows H v of the energy's Hessian at `point` for the rows v of
  `vectors` [k, dim]: the gradient, with respect to k copies of `point`
  taken as k chains, of sum_k v_k . grad U(copy k). Three passes over the
  data (U, its gradient, and the products), whatever k: TensorFlow cannot
  vectorise a jacobian over the loop that reads the data (as it does for
  an `InMemoryTarget`)."""
  copies = tf.tile(point[tf.newaxis], [vectors.shape[0], 1])
  with tf.GradientTape() as outer:
    outer.watch(copies)
    with tf.GradientTape() as inner:
      inner.watch(copies)
      u = energy(copies)
    along = tf.reduce_sum(vectors * inner.gradient(u, copies))
  return outer.gradient(along, copies)


def _check_batched_spec(name, dataset):
  for spec in tf.nest.flatten(dataset.element_spec):
    if spec.shape.rank == 0:
      raise ValueError(
          f"`{name}` yields unbatched elements (a part of shape "
          f"{spec.shape}); it must yield minibatches with a leading example "
          f"axis: use {name}.batch(batch_size).")


def _check_full_dataset(dataset, full_dataset, num_examples):
  """`full_dataset` must be finite, batched like `dataset` and hold exactly
  `num_examples` examples (counted once, here, when its size is finite)."""
  if not isinstance(full_dataset, tf.data.Dataset):
    raise TypeError(f"`full_dataset` must be a tf.data.Dataset or None; got "
                    f"{type(full_dataset).__name__}.")
  cardinality = int(full_dataset.cardinality())
  if cardinality == tf.data.INFINITE_CARDINALITY:
    raise ValueError(
        "`full_dataset` is infinite (e.g. repeated): it must cover the "
        "training set exactly once, for the exact energy; drop the "
        ".repeat() from it.")
  if cardinality == 0:
    raise ValueError("`full_dataset` is empty (cardinality 0).")
  ranks = [s.shape.rank for s in tf.nest.flatten(dataset.element_spec)]
  full_ranks = [s.shape.rank for s in
                tf.nest.flatten(full_dataset.element_spec)]
  if len(ranks) != len(full_ranks) or any(
      a is not None and b is not None and a != b
      for a, b in zip(ranks, full_ranks)):
    raise ValueError(
        f"`full_dataset` yields elements of rank {full_ranks} but `dataset` "
        f"of rank {ranks}: both must yield batches of the same structure "
        "(is one of them unbatched? use .batch(batch_size)).")
  if cardinality > 0:  # Unknown: counted on the first exact energy.
    _check_full_count(num_examples, int(full_dataset.reduce(
        tf.constant(0, tf.int64), lambda acc, batch: acc + _examples(batch))))


def _examples(batch):
  return tf.cast(tf.shape(tf.nest.flatten(batch)[0])[0], tf.int64)


def _check_full_count(num_examples, count):
  if count != num_examples:
    raise ValueError(
        f"`num_examples` = {num_examples} but `full_dataset` holds {count} "
        "examples: N must be the size of the training set that "
        "`full_dataset` covers once (the minibatch energy is scaled by "
        "N / n).")
