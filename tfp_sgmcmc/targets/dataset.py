"""`DatasetTarget`: a posterior whose minibatches stream from a
`tf.data.Dataset`, for data that does not fit on the device."""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.targets import energy as energy_lib
from tfp_sgmcmc.targets.base import DataLikelihoodTarget
from tfp_sgmcmc.targets.checks import non_finite_examples, refuse_under_xla
from tfp_sgmcmc.targets.wrappers import FullBatchTarget

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
      examples copies them one by one on every pass.
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
    refuse_under_xla("DatasetTarget computes the exact energy from its "
                      "`full_dataset`")
    # One `get_next` per batch, written out: `Dataset.reduce` has no
    # gradient, so tf.GradientTape gave the prior's alone, silently (Newton's
    # start in `sample` stopped at zeros, 180 sds from the posterior), and a
    # tf.while_loop over an iterator has no second derivative. The terms
    # are added in the data's order, as `reduce` added them.
    batches = iter(self._full_dataset)
    total = energy_lib.sum_of_examples(
        self._log_likelihood(state, _get_next(batches), None))
    for _ in range(self._full_batches() - 1):
      total = total + energy_lib.sum_of_examples(
          self._log_likelihood(state, _get_next(batches), None))
    return self._energy_from_total(state, total)

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
  `vectors` [k, dim], from one pass over the data: the jacobian of the
  k products g . v, vectorised over the backward pass only, whose data
  were read by the forward pass (vectorising the whole pass, as for an
  `InMemoryTarget`, would replicate the iterator, which fails)."""
  with tf.GradientTape() as outer:
    outer.watch(point)
    with tf.GradientTape() as inner:
      inner.watch(point)
      u = energy(point)
    products = tf.linalg.matvec(vectors, inner.gradient(u, point))
  return outer.jacobian(products, point)

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
