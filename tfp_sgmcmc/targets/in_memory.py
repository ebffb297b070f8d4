"""`InMemoryTarget`: a posterior over data held in memory, with minibatches
drawn (with replacement) from the kernel's seed, so that every step is
reproducible and compiles under XLA."""

import copy

import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import describe_structure, pack_like
from tfp_sgmcmc.targets import energy as energy_lib
from tfp_sgmcmc.targets.energy import (  # noqa: F401 (their home was here)
    ENERGY_CHUNK_BYTES, MIN_ENERGY_CHUNK, default_energy_chunk_size)
from tfp_sgmcmc.targets.base import DataLikelihoodTarget
from tfp_sgmcmc.targets.checks import (
    PROBE_ERRORS, call_traced_first, check_batch_size, check_finite_data,
    check_keeps_chain_axes, parse_parameter_shapes)

__all__ = ["InMemoryTarget", "default_energy_chunk_size"]


class _PerChainBatch(tuple):
  """(n, chain_batch_shape): stands in for the batch size `n` in
  `DataLikelihoodTarget`'s helpers when the batch holds one minibatch per
  chain, so that `InMemoryTarget._log_likelihood` calls the user's function
  on per-chain batches while the energy and noise-variance formulas stay in
  one place."""
  __slots__ = ()


def _flatten_chains(x, num_chain_dims):
  """Reshapes x's leading `num_chain_dims` axes into one."""
  shape = tf.shape(x)
  return tf.reshape(x, tf.concat([[-1], shape[num_chain_dims:]], axis=0))


class InMemoryTarget(DataLikelihoodTarget):
  """A posterior over data held in memory, with minibatches drawn by seed.

  Args:
    log_likelihood_fn: `(params, batch) -> log p(x_i | params)`, one value per
      example in the last axis (shape `batch_shape + [n]`). `params` has the
      structure of the chain state; `batch` has the structure of `data`.
    data: a nested structure of tensors (or arrays) with a common leading
      axis N, e.g. `(x, y)`.
    batch_size: n, the minibatch size, 1 <= n <= N.
    log_prior_fn: `params -> log p(params)` of shape `batch_shape`, or None
      for a flat prior.
    energy_chunk_size: number of examples per chunk when the exact energy is
      accumulated (default: as many examples as fit in 16 MiB of `data`,
      at least 4096 and at most N; so a small data set, e.g. N = 1e5
      examples of 20 floats, is one pass over the data as stored, with no
      copy, which is faster than chunks). Lower it if a model's
      activations for [chains, chunk] examples do not fit in memory.
    parameter_shapes: optional per-chain shape of the state (`[d]`) or of
      each part of a list state (`[[d], [1]]`); when given, a state that does
      not fit is rejected before any computation. Required with
      `independent_minibatches=True`, where it tells the chain dimensions of
      the state from the parameter's own.
    independent_minibatches: False (default): all chains batched along the
      state's leading dimensions share one minibatch per step. True: every
      chain draws its own minibatch (see below).
    full_batch: True for every example once, in order, at every step (no
      `batch_size`); exact energies and gradients.

  Minibatch indices are drawn uniformly with replacement from a stateless
  seed, which makes U~ unbiased and keeps every step compilable with XLA.
  (So `batch_size=N` is still a random minibatch: about 63% of the
  examples appear in one.) `full_batch=True` instead uses every example
  once, in order, at every step: exact energies and gradients, and the
  kernels' `target_log_prob` is then the exact log density, which TFP's
  `MetropolisHastings` and `ReplicaExchangeMC` may compare.

  By default one step draws ONE set of n indices and every chain in the
  state's leading (chain) dimensions evaluates its gradient on that batch:
  the chains' injected noise is independent, but their gradient noise is one
  realisation shared by all, so they are not independent chains and
  cross-chain diagnostics (R-hat, the spread of chain means) are optimistic.
  With `independent_minibatches=True` each chain draws its own n indices,
  shape `chain_batch_shape + [n]` (the state's shape less
  `parameter_shapes`), and the chains are independent. `log_likelihood_fn`
  is then called with `params` of shape `chain_batch_shape +
  parameter_shape` and a batch of shape `chain_batch_shape + [n] +
  example_shape`, and should broadcast over the chain dimensions (e.g.
  `tf.linalg.matvec(xb, w)`, or `xb @ w1 + b1[..., None, :]` with `w1` of
  shape `chains + [d_in, d_out]`). A function that raises on such inputs or
  returns another shape than `chain_batch_shape + [n]` is called once per
  chain instead, through `tf.vectorized_map` (one chain's `params`, a batch
  of n examples; as fast on a logistic regression), so a function written
  for one chain works too; when that fails as well the error reports both.
  (A function that broadcasts wrongly but returns the expected shape, e.g.
  `xb * w` with as many chains as examples, cannot be detected.)
  `minibatch_energies` evaluates every state on the same per-chain batches,
  and the exact `energy` still sums over shared chunks of the data. The
  cost: each step gathers n examples per chain, n x chains in all, so a
  step costs several times a step with shared batches (docs/performance.md).

  #### Example

  A linear regression with N = 5,000 examples and d = 3 weights, sampled by
  SGLD with minibatches of 32:

  ```python
  rng = np.random.default_rng(0)
  N, d = 5000, 3
  x = rng.normal(size=(N, d)).astype(np.float32)
  y = (x @ np.float32([1., -2., .5]) + rng.normal(size=N)).astype(np.float32)

  def log_likelihood(w, batch):    # one value per example: [chains..., n]
    xb, yb = batch
    return tfd.Normal(tf.linalg.matvec(xb, w), 1.).log_prob(yb)
  log_prior = lambda w: tf.reduce_sum(tfd.Normal(0., 1.).log_prob(w), -1)

  target = tfp_sgmcmc.InMemoryTarget(
      log_likelihood, (x, y), batch_size=32, log_prior_fn=log_prior)
  energy, gradient = target.energy_and_gradient(tf.zeros([d]), seed=[0, 1])
  draws = tf.function(lambda: tfp.mcmc.sample_chain(   # one XLA program
      500, tf.zeros([4, d]), kernel=tfp_sgmcmc.SGLD(target, step_size=2e-5),
      num_burnin_steps=200, trace_fn=None, seed=[1, 2]), jit_compile=True)()
  print(tf.reduce_mean(draws, [0, 1]))          # about [1, -2, 0.5]

  # Independent chains (e.g. for R-hat) over a state of shape [4, d]:
  independent = tfp_sgmcmc.InMemoryTarget(
      log_likelihood, (x, y), batch_size=32, log_prior_fn=log_prior,
      parameter_shapes=[d], independent_minibatches=True)
  ```
  """

  def __init__(self, log_likelihood_fn, data, batch_size=None,
               log_prior_fn=None, energy_chunk_size=None,
               parameter_shapes=None, independent_minibatches=False,
               full_batch=False):
    def convert(x):
      try:
        return tf.convert_to_tensor(x)
      except (ValueError, TypeError) as e:
        raise ValueError(
            "`data` must be a nested structure (tuple, dict) of arrays with "
            f"a common leading axis N; a part could not be converted to a "
            f"tensor ({type(e).__name__}: {e}). Are its rows of unequal "
            "length (ragged)? Pad them or use one array per field.") from e
    data = tf.nest.map_structure(convert, data)
    leaves = tf.nest.flatten(data)
    for i, leaf in enumerate(leaves):
      if not (leaf.dtype.is_floating or leaf.dtype.is_integer or
              leaf.dtype == tf.bool):
        raise TypeError(f"`data` part {i} has dtype {leaf.dtype.name}; "
                        "expected numbers (float, int or bool): encode "
                        "text or categories as numbers first.")
    if not leaves:
      raise ValueError("`data` is empty: expected a nested structure of "
                       "tensors with a common leading axis N.")
    lengths = []
    for leaf in leaves:
      if leaf.shape.rank is None or leaf.shape.rank == 0:
        raise ValueError(f"every part of `data` needs a leading example "
                         f"axis; got a part of shape {leaf.shape}.")
      lengths.append(leaf.shape[0])
    if len(set(lengths)) != 1:
      raise ValueError(f"the parts of `data` have different lengths "
                       f"{lengths}; expected one common leading axis N.")
    num_examples = int(lengths[0])
    if num_examples < 1:
      raise ValueError("`data` is empty (N = 0): expected at least one "
                       "example.")
    arguments.check_bool("full_batch", full_batch)
    if full_batch:
      if batch_size is not None and batch_size != num_examples:
        raise ValueError(
            f"`full_batch=True` uses all N = {num_examples} examples at every "
            f"step; got batch_size={batch_size!r} too. Drop `batch_size`.")
      if independent_minibatches:
        raise ValueError("`full_batch=True` and `independent_minibatches="
                         "True` contradict each other: every chain sees all "
                         "the data.")
      batch_size = num_examples
    elif batch_size is None:
      raise TypeError(
          "`batch_size` is required: the minibatch size n (drawn with "
          "replacement from the seed), or pass full_batch=True for exact "
          "full-data energies and gradients (every example once, in order).")
    check_finite_data(data)
    batch_size = check_batch_size(batch_size, num_examples)
    self._full_batch = bool(full_batch)
    arguments.check_bool("independent_minibatches", independent_minibatches)
    super().__init__(log_likelihood_fn, num_examples, log_prior_fn,
                     parameter_shapes)
    if independent_minibatches and self.parameter_shapes is None:
      raise ValueError(
          "`independent_minibatches=True` needs `parameter_shapes`, the "
          "per-chain shape of the state (e.g. parameter_shapes=[d] for a "
          "state of shape [chains, d], or [[d_in, d_out], [d_out]] for a "
          "list state), to tell the chain dimensions from the parameter's "
          "own; got parameter_shapes=None.")
    self._data, self._batch_size = data, batch_size
    self._independent = bool(independent_minibatches)
    # Whether log_likelihood_fn broadcasts over per-chain batches: None
    # until first tried; False after a failure, which is then not retried.
    self._log_likelihood_broadcasts = None
    self._broadcast_problem = None
    if energy_chunk_size is None:
      energy_chunk_size = default_energy_chunk_size(data, num_examples)
    energy_chunk_size = int(energy_chunk_size)
    if energy_chunk_size < 1:
      raise ValueError(f"`energy_chunk_size` must be >= 1; got "
                       f"{energy_chunk_size}.")
    self._chunk = min(energy_chunk_size, num_examples)

  @property
  def batch_size(self):
    return self._batch_size

  def check_functions(self, state):
    """Calls the log-likelihood and log-prior once on a probe batch of m
    examples, m chosen unlike the batch size and every state dimension, so
    that a function that sums over the batch, or returns a shape that only
    matches by coincidence, is caught at trace time (once, at bootstrap)."""
    if self._independent or self._full_batch:
      # Per-chain batches check their shape against the chains. A full
      # batch: every step sees all N examples, in order, so a model with
      # its N observations built in (e.g. a JointDistribution) cannot take
      # a probe batch of another size, and needs none.
      return
    dims = {d for p in tf.nest.flatten(state) for d in (p.shape.as_list()
                                                  if p.shape.rank else [])}
    m = self._batch_size + 1
    while m in dims:
      m += 1
    batch = self._gather(tf.range(m) % self.num_examples)
    try:
      self._energy_from_batch(state, batch, m)
    except ValueError as e:
      raise ValueError(
          f"{e} (`bootstrap_results` checks the functions once on a probe "
          f"batch of {m} examples, a size unlike `batch_size` = "
          f"{self._batch_size} and the state's dimensions, so that a shape "
          "that fits only by coincidence is caught.)") from e

  @property
  def data(self):
    return self._data

  @property
  def independent_minibatches(self):
    """Whether each chain draws its own minibatch (else all share one)."""
    return self._independent

  def with_independent_minibatches(self, parameter_shapes=None):
    """This target with one minibatch per chain (a copy; `self` unchanged).

    Same data, functions, batch size and chunking as `self`; each chain then
    draws its own minibatch, as `independent_minibatches=True` gives.
    `parameter_shapes` (as for `InMemoryTarget`) may be omitted when `self`
    has them. Raises `ValueError` for a full-batch `self` (every chain sees
    all the data) or when no `parameter_shapes` are known.

    ```python
    independent = target.with_independent_minibatches(parameter_shapes=[d])
    print(independent.independent_minibatches)   # True
    ```
    """
    if self._full_batch:
      raise ValueError("a full-batch target has no minibatches to make "
                       "independent: every chain sees all the data.")
    shapes = (self.parameter_shapes if parameter_shapes is None else
              parse_parameter_shapes(parameter_shapes))
    if shapes is None:
      raise ValueError(
          "`parameter_shapes` is required: the per-chain shape of the state "
          "(e.g. [d] for a state of shape [chains, d]), to tell the chain "
          "dimensions from the parameter's own; got None, and the target "
          "has none.")
    return self._variant(parameter_shapes=shapes, independent=True)

  def with_full_batch(self):
    """This target with full-batch gradients (a copy; `self` unchanged).

    Same data, functions and chunking; every step uses all N examples once,
    in order, as `full_batch=True` gives: exact energies and gradients
    (`tfp_sgmcmc.sample` uses this up to `FULL_BATCH_MAX_EXAMPLES`, where a
    full-data gradient costs about a minibatch's). Returns an
    `InMemoryTarget` of `self`'s class; a full-batch `self` as it is.

    ```python
    exact = target.with_full_batch()
    print(exact.is_full_batch, exact.batch_size)   # True, N
    ```
    """
    if self._full_batch:
      return self
    return self._variant(full_batch=True, batch_size=self.num_examples,
                         independent=False)

  def with_batch_size(self, batch_size):
    """This target with minibatches of `batch_size` examples (a copy; a
    full-batch `self` becomes a minibatch target), e.g. for the large
    minibatches of `kernel_stein_discrepancy(..., score_examples=...)`."""
    return self._variant(
        batch_size=check_batch_size(batch_size, self.num_examples),
        full_batch=False)

  def _variant(self, **fields):
    # Whether the log-likelihood broadcasts over per-chain batches is found
    # out again for the copy.
    variant = copy.copy(self)
    variant.__dict__.update({"_" + name: value for name, value in dict(
        fields, log_likelihood_broadcasts=None,
        broadcast_problem=None).items()})
    return variant

  def _gather(self, indices):
    return tf.nest.map_structure(lambda d: tf.gather(d, indices), self._data)

  def _chain_batch_shape(self, state):
    """The chain dimensions of `state`: its shape less `parameter_shapes`.

    A Python list where static, else an int32 tensor. Needs
    `parameter_shapes`."""
    if self.parameter_shapes is None:
      raise ValueError(
          "the chain dimensions of a state are its shape less the "
          "parameter's; give the target `parameter_shapes` to find them.")
    self.check_state(state)
    parts = tf.nest.flatten(state)
    shapes = tf.nest.flatten(self.parameter_shapes)
    chain_shapes = []
    for i, (part, shape) in enumerate(zip(parts, shapes)):
      if part.shape.rank is None:
        raise ValueError(
            f"`current_state` part {i} has unknown rank; per-chain "
            "minibatches need the number of chain dimensions.")
      chain_shapes.append(part.shape[:part.shape.rank - len(shape)])
    for i, s in enumerate(chain_shapes[1:], 1):
      if s.rank != chain_shapes[0].rank or not s.is_compatible_with(
          chain_shapes[0]):
        raise ValueError(
            f"the state's parts have different chain dimensions "
            f"({[tuple(c) for c in chain_shapes]}, after removing "
            f"`parameter_shapes`); per-chain minibatches need one chain "
            f"batch shape (part {i} differs from part 0).")
    static = chain_shapes[0]
    for s in chain_shapes[1:]:
      static = static.merge_with(s)
    if static.is_fully_defined():
      return static.as_list()
    part, shape = parts[0], shapes[0]
    return tf.shape(part)[:part.shape.rank - len(shape)]

  def minibatch_indices(self, seed, state=None):
    """The example indices used by the step with this `seed`.

    Shape [n] (shared by all chains), or, with `independent_minibatches`,
    the chain dimensions of `state` + [n] (one row of n per chain), which
    needs the `state`."""
    if not self._independent:
      return self._shared_indices(seed)
    if state is None:
      raise ValueError("with `independent_minibatches=True` the indices "
                       "depend on the chain dimensions: pass `state`.")
    return self._per_chain_indices(seed, self._chain_batch_shape(state))

  @property
  def is_full_batch(self):
    """Whether every step uses all N examples once, in order (exact
    energies and gradients), rather than n drawn with replacement."""
    return self._full_batch

  def _shared_indices(self, seed):
    if self._full_batch:
      return tf.range(self.num_examples)
    return random.uniform_indices(seed, [self._batch_size],
                                    self.num_examples)

  def _per_chain_indices(self, seed, chain_batch_shape):
    if isinstance(chain_batch_shape, list):
      shape = chain_batch_shape + [self._batch_size]
    else:
      shape = tf.concat([chain_batch_shape, [self._batch_size]], axis=0)
    # The shared draw's call with a larger shape: one draw for every chain's
    # indices (`random.uniform_indices`; TF's Philox integers cost more
    # than the gather itself on XLA:CPU at [chains, n]).
    return random.uniform_indices(seed, shape, self.num_examples)

  def _minibatch(self, state, seed):
    """(batch, n) for the step with this seed: a shared batch with its size,
    or per-chain batches with a `_PerChainBatch` in place of the size."""
    if not self._independent:
      # Through the public method, so that subclasses choose the batch; a
      # full batch is all N as stored (a gather would copy it every step).
      return (self._data if self._full_batch else self._gather(
          self.minibatch_indices(seed)), self._batch_size)
    chain_shape = self._chain_batch_shape(state)
    batch = self._gather(self._per_chain_indices(seed, chain_shape))
    return batch, _PerChainBatch((self._batch_size, chain_shape))

  def _log_likelihood(self, state, batch, n):
    if not isinstance(n, _PerChainBatch):
      return super()._log_likelihood(state, batch, n)
    return self._per_chain_log_likelihood(state, batch, n)

  def _per_chain_log_likelihood(self, state, batch, spec):
    """The user's log-likelihood on per-chain batches, chain_shape + [n].

    First called once on all chains (the documented broadcasting contract);
    if that raises or returns the wrong shape, called once per chain through
    `tf.vectorized_map`, where it sees one chain's parameters and a batch
    [n] + example_shape, as for a single chain (`tf.vectorized_map`
    vectorises the per-chain calls)."""
    n, chain_shape = spec
    static_chains = isinstance(chain_shape, list)
    num_chain_dims = (len(chain_shape) if static_chains
                      else int(chain_shape.shape[0]))
    expected = tf.TensorShape(
        (chain_shape if static_chains else [None] * num_chain_dims) + [n])
    first = self._log_likelihood_broadcasts is None  # The probe.
    if self._log_likelihood_broadcasts is not False:
      try:
        values = call_traced_first(self._log_likelihood_fn, state, batch,
                                   trace=first)
        problem = (None if values.shape.is_compatible_with(expected) else
                   f"returned shape {list(values.shape)}")
      except PROBE_ERRORS as e:
        problem = f"raised {type(e).__name__}: {e}"
      if problem is None:
        if first:
          check_keeps_chain_axes(self._log_likelihood_fn, state, batch,
                                 num_chain_dims)
        self._log_likelihood_broadcasts = True
        return values
      self._log_likelihood_broadcasts = False
      self._broadcast_problem = problem

    def one_chain(args):
      return self._log_likelihood_fn(*args)

    flatten = lambda x: _flatten_chains(x, num_chain_dims)
    try:
      values = tf.vectorized_map(one_chain, (
          tf.nest.map_structure(flatten, state),
          tf.nest.map_structure(flatten, batch)))
      values = tf.convert_to_tensor(values)
      if not values.shape.is_compatible_with([None, n]):
        raise ValueError(
            f"it returned shape {list(values.shape[1:])} for one chain and "
            f"{n} examples; expected [{n}], one value per example")
    except PROBE_ERRORS as e:
      raise ValueError(
          "with `independent_minibatches=True`, `log_likelihood_fn` is "
          "called with params "
          f"{describe_structure(state)} and a batch "
          f"{describe_structure(batch)}: one minibatch of "
          f"{n} examples per chain, chain dimensions first, and must return "
          f"shape {expected}; it {self._broadcast_problem}. Calling it once "
          "per chain (tf.vectorized_map: one chain's params and a batch of "
          f"{n} examples) failed too: {type(e).__name__}: {e}. Write it to "
          "broadcast over leading chain dimensions (e.g. "
          "tf.linalg.matvec(xb, w) for a linear model, xb @ w1 + "
          "b1[..., None, :] for a layer), or for one chain.") from e
    return tf.reshape(values, tf.concat([chain_shape, [n]], axis=0))

  def minibatch_energy(self, state, seed):
    batch, n = self._minibatch(state, seed)
    return self._energy_from_batch(state, batch, n)

  def gradient_noise_variance(self, state, seed):
    if self._full_batch:  # The full-data gradient has no noise.
      return pack_like(state, [tf.zeros_like(p) for p in tf.nest.flatten(state)])
    if self._batch_size < 2:
      raise ValueError("a per-example gradient-noise estimate needs "
                       f"`batch_size` >= 2; got {self._batch_size}.")
    batch, n = self._minibatch(state, seed)
    return self._noise_variance_from_batch(state, batch, n)

  @property
  def energy_chunk_size(self):
    """Examples per chunk of the exact-energy pass (N: one pass)."""
    return self._chunk

  def energy(self, state):
    """Exact U(theta), summing the log-likelihood over chunks of the data
    (one pass over the data as stored when one chunk holds all N)."""
    n = self.num_examples

    def chunk_sum(start, size):
      # All N: the data as stored. Written out (`start` a Python int): a
      # static slice (through a gather, second derivatives under
      # `tf.vectorized_map`, the Newton start's Hessian, changed from run
      # to run). In the loop: a gather (under XLA on CPU, beats tf.slice).
      batch = (self._data if size == n else tf.nest.map_structure(
          lambda d: d[start:start + size], self._data)
               if isinstance(start, int) else
               self._gather(start + tf.range(size)))
      return energy_lib.sum_of_examples(
          self._log_likelihood(state, batch, size))

    total = energy_lib.sum_over_chunks(
        chunk_sum, n, self._chunk,
        unroll=n // self._chunk <= energy_lib.MAX_UNROLLED_CHUNKS)
    return self._energy_from_total(state, total)
