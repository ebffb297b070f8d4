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
  variance of the minibatch gradient, from per-example gradients (used by noise
  estimates such as SGHMC's B-hat).

The state is one tensor or a list of tensors (one per parameter). Leading
dimensions are independent chains: a log-likelihood returns one value per
example in its last axis, `batch_shape + [n]`, and a log-prior returns
`batch_shape`. By default all chains of one step see the same minibatch
(common random numbers, cheap, but the chains' gradient noise is then
correlated); `InMemoryTarget(independent_minibatches=True)` gives each chain
its own. The injected noise is always independent.

Three sources of data:

* `InMemoryTarget`: a nested structure of tensors with leading axis N. Batch
  indices are drawn (with replacement) from the kernel's stateless seed, so a
  chain is reproducible from its seed and compiles under XLA.
* `DatasetTarget`: a `tf.data.Dataset` of minibatches, for data that does not
  fit on the device. Runs eagerly and inside `tf.function`, not under XLA
  (dataset iterators cannot be compiled).
* `NoisyGradientTarget`: the papers' synthetic targets with an exact energy
  and a gradient corrupted by Gaussian noise, grad U~ = grad U + N(0, V).
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import dynamics
from tfp_sgmcmc import energy as energy_lib

__all__ = [
    "MinibatchTarget",
    "InMemoryTarget",
    "DatasetTarget",
    "NoisyGradientTarget",
    "ControlVariateTarget",
    "TemperedTarget",
    "TargetCapabilityError",
]


class TargetCapabilityError(TypeError):
  """Raised when a kernel asks a target for something it cannot provide."""


def _as_list(state):
  """The state's parts: one tensor, or the leaves of a list, tuple,
  namedtuple or dict state (in `tf.nest` order)."""
  return tf.nest.flatten(state)


def _like(template, parts):
  """`parts` in the structure of `template` (a tuple stays a tuple, a dict a
  dict), as TFP's kernels return the state structure they were given."""
  return tf.nest.pack_sequence_as(template, list(parts))


def _check_float_state(state):
  for i, part in enumerate(_as_list(state)):
    dtype = tf.as_dtype(part.dtype)
    if not dtype.is_floating:
      raise TypeError(
          f"`current_state` part {i} has dtype {dtype.name}; expected a "
          "floating dtype (float32 or float64). Cast the initial state, e.g. "
          "tf.constant([0.], tf.float32).")


def _describe_structure(x):
  return tf.nest.map_structure(
      lambda t: f"{tf.as_dtype(t.dtype).name}{list(t.shape)}", x)


def _call_with_clear_errors(what, fn, *args):
  """Calls a user function, turning deep TF errors into a clear message
  that shows what it was called with and, where the dtypes differ, how to
  make them agree."""
  try:
    return fn(*args)
  except (ValueError, TypeError, tf.errors.InvalidArgumentError,
          IndexError, KeyError, AttributeError) as e:
    if not args:
      raise
    state = args[0]
    hint = ("does the state structure (one tensor or a list, one per "
            "parameter) match what the function expects?")
    called = f"`state` = {_describe_structure(state)}"
    if len(args) > 1:
      batch = args[1]
      called += f" and `batch` = {_describe_structure(batch)}"
      state_dtype = tf.as_dtype(_as_list(state)[0].dtype)
      other = sorted({tf.as_dtype(t.dtype).name
                      for t in tf.nest.flatten(batch)} - {state_dtype.name})
      if other:
        hint = (f"the batch holds {other} data while the state is "
                f"{state_dtype.name}: cast inside the function (e.g. "
                f"tf.cast(y, w.dtype) for integer labels) or give the "
                f"target data and state of one float dtype. Also check the "
                "state structure (one tensor or a list, one per parameter) "
                "and the data's shapes (labels [N], not [N, 1]).")
      else:
        hint = ("does the state structure (one tensor or a list, one per "
                "parameter) match what the function expects, and do the "
                "data's shapes (e.g. labels [N], not [N, 1])?")
    raise ValueError(
        f"{what} failed when called with {called}: {hint} "
        f"Original error: {type(e).__name__}: {e}") from e


def _check_output(name, value, state):
  """Static (trace-time) check of a user function's output: a tensor in the
  state's dtype (its shape is checked by `_check_batch_shape`)."""
  value = tf.convert_to_tensor(value)
  state_dtype = tf.as_dtype(_as_list(state)[0].dtype)
  if tf.as_dtype(value.dtype) != state_dtype:
    raise TypeError(
        f"`{name}` returned dtype {tf.as_dtype(value.dtype).name} for a "
        f"{state_dtype.name} state; it must return the state's dtype (cast "
        f"the data to {state_dtype.name}, or the state to the data's dtype).")
  return value


def _check_batch_shape(name, batch_shape, state, parameter_shapes, what):
  """`batch_shape` (one value per chain) must be the state's chain
  dimensions: a prefix of every part's shape, leaving the parameter's own
  dimensions (exactly `parameter_shapes` when declared)."""
  if batch_shape.rank is None:
    return
  parts = _as_list(state)
  shapes = (None if parameter_shapes is None else
            _as_list(parameter_shapes) if isinstance(parameter_shapes, list)
            else [parameter_shapes])
  for i, part in enumerate(parts):
    if part.shape.rank is None:
      continue
    if shapes is not None:
      chain = part.shape[:part.shape.rank - len(shapes[i])]
      ok = chain.rank == batch_shape.rank and chain.is_compatible_with(
          batch_shape)
    else:
      # Without parameter_shapes: a prefix of the part's shape that leaves
      # at least one parameter axis (a list state may hold scalars).
      limit = part.shape.rank - (1 if len(parts) == 1 else 0)
      ok = batch_shape.rank <= limit and part.shape[:batch_shape.rank
                                                    ].is_compatible_with(
                                                        batch_shape)
    if not ok:
      raise ValueError(
          f"`{name}` returned {what} of shape {list(batch_shape)}, but the "
          f"state part {i} has shape {list(part.shape)}: it must return one "
          "value per chain, shape = the state's leading (chain) dimensions "
          "(shape [] for a single chain), summed over each parameter's own "
          "axes (e.g. tf.reduce_sum(..., axis=-1)). If the state's leading "
          "axes are not all chain axes, give the target `parameter_shapes`.")


class MinibatchTarget:
  """Interface shared by all targets.

  Subclasses implement `_minibatch_log_likelihood(state, seed)` (returning
  per-chain sums over the batch and the batch size) and, where possible,
  `_full_log_likelihood(state)` and `_per_example_log_likelihood`.
  """

  def __init__(self, num_examples, log_prior_fn=None, parameter_shapes=None):
    self._num_examples = num_examples
    self._log_prior_fn = log_prior_fn
    self._parameter_shapes = _parse_parameter_shapes(parameter_shapes)

  @property
  def parameter_shapes(self):
    """Declared per-chain shapes of the state parts (a list for list states,
    one shape for a single tensor), or None when not declared."""
    return self._parameter_shapes

  def check_state(self, state):
    """Raises a clear error if `state` does not fit the target."""
    _check_float_state(state)
    shapes = self._parameter_shapes
    if shapes is None:
      return
    is_list = isinstance(shapes, list)
    if is_list != isinstance(state, (list, tuple)) or (
        is_list and len(shapes) != len(state)):
      want = (f"a list of {len(shapes)} tensors with trailing shapes "
              f"{[list(x) for x in shapes]}" if is_list else
              f"one tensor with trailing shape {list(shapes)}")
      got = tf.nest.map_structure(lambda t: tuple(t.shape), state)
      raise ValueError(f"`current_state` must be {want} (after any leading "
                       f"chain dimensions); got {got}.")
    for i, (part, shape) in enumerate(zip(_as_list(state), _as_list(
        shapes) if is_list else [shapes])):
      k = len(shape)
      if part.shape.rank is not None and (
          part.shape.rank < k or
          not part.shape[part.shape.rank - k:].is_compatible_with(shape)):
        raise ValueError(f"`current_state` part {i} has shape "
                         f"{tuple(part.shape)}; expected trailing shape "
                         f"{list(shape)} (the target's parameter_shapes).")

  def check_functions(self, state):
    """Trace-time checks of the user's functions on `state` (called once by
    every kernel's `bootstrap_results`): shapes and dtypes of what they
    return. The default checks nothing beyond the energy's own checks."""
    del state

  @property
  def num_examples(self):
    """N, the number of examples in the full data set."""
    return self._num_examples

  @property
  def has_exact_energy(self):
    """Whether `energy(state)` computes the exact full-data U(theta)."""
    return True

  def log_prior(self, state):
    if self._log_prior_fn is None:
      return tf.constant(0., dtype=_as_list(state)[0].dtype)
    return self._log_prior_fn(state)

  def minibatch_energy(self, state, seed):
    """U~(theta) on the minibatch chosen by `seed` (no gradient)."""
    raise TargetCapabilityError(
        f"{type(self).__name__} does not provide minibatch energies.")

  def minibatch_energies(self, states, seed):
    """U~ of each state in the list `states`, all on the one minibatch that
    `seed` chooses (for the minibatch M-H test: a difference of energies on
    a shared batch). Seed-determined targets just reuse the seed."""
    return [self.minibatch_energy(state, seed) for state in states]

  def energy_and_gradient(self, state, seed):
    """Returns (U~(state), grad U~(state)) on a fresh minibatch."""
    _check_float_state(state)
    parts = _as_list(state)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      energy = self.minibatch_energy(_like(state, parts), seed)
    # Chains are independent, so the gradient of the summed energy is each
    # chain's own gradient.
    grads = tape.gradient(energy, parts,
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return energy, _like(state, grads)

  def gradient(self, state, seed):
    """grad U~(state) on the minibatch chosen by `seed`, without the energy:
    what a kernel built with `compute_energy=False` evaluates. The same
    values as `energy_and_gradient(state, seed)[1]` (it is that, here);
    under `tf.function(jit_compile=True)` XLA then drops the work only the
    energy needs (e.g. the log1p of a logistic loss). A target with a
    cheaper gradient-only path overrides it."""
    return self.energy_and_gradient(state, seed)[1]

  def energy(self, state):
    """Exact full-data energy U(theta), per chain."""
    raise TargetCapabilityError(
        f"{type(self).__name__} has no exact full-data energy; pass a target "
        "that has one (has_exact_energy=True).")

  def gradient_noise_variance(self, state, seed):
    """Per-coordinate variance of the minibatch gradient estimator.

    For a batch of n examples drawn with replacement, grad U~ = (N/n) sum_i g_i
    with g_i = -grad log p(x_i | theta), so Var[grad U~] = (N^2 / n) Var_i[g_i];
    Var_i is estimated by the sample variance of the per-example gradients of
    the minibatch chosen by `seed`. Returned in the structure of `state`.
    """
    raise TargetCapabilityError(
        f"{type(self).__name__} cannot estimate gradient noise "
        "(it has no per-example gradients).")


def _parse_parameter_shapes(shapes):
  if shapes is None:
    return None
  def is_shape(x):
    return isinstance(x, (tuple, list, tf.TensorShape)) and all(
        isinstance(d, (int, np.integer)) or d is None for d in x)
  if is_shape(shapes):
    return tf.TensorShape(shapes)
  if isinstance(shapes, (list, tuple)) and all(is_shape(x) for x in shapes):
    return [tf.TensorShape(x) for x in shapes]
  raise ValueError("`parameter_shapes` must be one shape (e.g. [3]) for a "
                   "single-tensor state or a list of shapes (e.g. [[3], [1]])"
                   f" for a list state; got {shapes!r}.")


def _validate_log_likelihood_output(values, n, name="log_likelihood_fn"):
  shape = values.shape
  if shape.rank is None:
    return values
  if shape.rank == 0 or (n is not None and shape[-1] is not None and
                         shape[-1] != n):
    raise ValueError(
        f"`{name}` must return one log-likelihood per example, with the "
        f"examples in the last axis (shape batch_shape + [{n}] for a batch "
        f"of {n}); it returned shape {shape}. Do not sum or average over "
        "the batch inside it.")
  return values


class _DataLikelihoodTarget(MinibatchTarget):
  """Shared code for targets defined by a per-example log-likelihood."""

  def __init__(self, log_likelihood_fn, num_examples, log_prior_fn,
               parameter_shapes=None):
    if not callable(log_likelihood_fn):
      raise TypeError("`log_likelihood_fn` must be callable "
                      f"(params, batch) -> per-example log-likelihoods; got "
                      f"{log_likelihood_fn!r}.")
    if log_prior_fn is not None and not callable(log_prior_fn):
      raise TypeError(f"`log_prior_fn` must be callable or None; got "
                      f"{log_prior_fn!r}.")
    super().__init__(num_examples, log_prior_fn, parameter_shapes)
    self._log_likelihood_fn = log_likelihood_fn

  def _log_likelihood(self, state, batch, n):
    if n is None:  # Streamed batches: their static length, where known.
      n = tf.nest.flatten(batch)[0].shape[0]
    values = _call_with_clear_errors("`log_likelihood_fn`",
                                     self._log_likelihood_fn, state, batch)
    values = _check_output("log_likelihood_fn", values, state)
    values = _validate_log_likelihood_output(values, n)
    _check_batch_shape("log_likelihood_fn", values.shape[:-1], state,
                       self.parameter_shapes,
                       "per-example values whose leading (chain) axes are")
    return values

  def _checked_log_prior(self, state, batch_shape):
    """The log-prior, checked (at trace time) to give one value per chain,
    the log-likelihood's batch shape."""
    if self._log_prior_fn is None:
      return self.log_prior(state)
    value = _call_with_clear_errors("`log_prior_fn`", self._log_prior_fn,
                                    state)
    if (not tf.is_tensor(value) and isinstance(value, (
        int, float, np.integer, np.floating)) and not isinstance(value, bool)):
      # A constant (flat) prior, e.g. `lambda w: 0.`: broadcasts over chains.
      return tf.constant(float(value), _as_list(state)[0].dtype)
    value = _check_output("log_prior_fn", value, state)
    if (value.shape.rank is not None and batch_shape.rank is not None and
        not (value.shape.rank == batch_shape.rank and
             value.shape.is_compatible_with(batch_shape))):
      raise ValueError(
          f"`log_prior_fn` returned shape {list(value.shape)} but the "
          f"log-likelihood's chain (batch) shape is {list(batch_shape)} "
          f"for a state {_describe_structure(state)}: the log-prior must "
          "return one value per chain, summed over the parameters (e.g. "
          "lambda w: tf.reduce_sum(-0.5 * w**2, axis=-1)), not one per "
          "parameter or with a trailing axis of 1.")
    return value

  def _energy_from_batch(self, state, batch, n):
    ll = self._log_likelihood(state, batch, n)
    prior = self._checked_log_prior(state, ll.shape[:-1])
    return energy_lib.minibatch_energy(-tf.reduce_mean(ll, axis=-1), prior,
                                       self.num_examples)

  def _noise_variance_from_batch(self, state, batch, n):
    parts = _as_list(state)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      ll = self._log_likelihood(_like(state, parts), batch, n)
      # Sum over chains: chains are independent, so the Jacobian of the
      # per-example sums w.r.t. each part holds each chain's own gradients.
      batch_axes = list(range(len(ll.shape) - 1))
      ll_per_example = tf.reduce_sum(ll, axis=batch_axes)
    jac = tape.jacobian(ll_per_example, parts,
                        unconnected_gradients=tf.UnconnectedGradients.ZERO,
                        experimental_use_pfor=True)
    num = tf.cast(self.num_examples, parts[0].dtype)
    out = []
    for j in jac:
      n_float = tf.cast(tf.shape(j)[0], j.dtype)
      mean = tf.reduce_mean(j, axis=0)
      var = tf.reduce_sum(tf.square(j - mean), axis=0) / (n_float - 1.)
      out.append(num * num / n_float * var)
    return _like(state, out)


def _check_finite_data(data, name="data"):
  """Rejects NaN or infinite values in the floating parts of `data` (checked
  once, when the target is built: otherwise every chain just diverges)."""
  for i, leaf in enumerate(tf.nest.flatten(data)):
    if not leaf.dtype.is_floating:
      continue
    value = tf.get_static_value(leaf)
    if value is None:  # Symbolic (built inside tf.function): asserted once.
      tf.debugging.Assert(tf.reduce_all(tf.math.is_finite(leaf)), [
          f"`{name}` part {i} has non-finite values (NaN or inf): remove or "
          "impute those examples before building the target."])
      continue
    bad = np.logical_not(np.isfinite(value))
    if bad.any():
      where = np.argwhere(bad)
      raise ValueError(
          f"`{name}` part {i} (shape {list(leaf.shape)}) has {int(bad.sum())}"
          f" non-finite values (NaN or inf), the first at index "
          f"{tuple(int(j) for j in where[0])}: remove or impute those "
          "examples before building the target.")


class _PerChainBatch(tuple):
  """(n, chain_batch_shape): stands in for the batch size `n` in
  `_DataLikelihoodTarget`'s helpers when the batch holds one minibatch per
  chain, so that `InMemoryTarget._log_likelihood` calls the user's function
  on per-chain batches while the energy and noise-variance formulas stay in
  one place."""
  __slots__ = ()


def _flatten_chains(x, num_chain_dims):
  """Reshapes x's leading `num_chain_dims` axes into one."""
  shape = tf.shape(x)
  return tf.reshape(x, tf.concat([[-1], shape[num_chain_dims:]], axis=0))


# Default data budget of one chunk of the exact-energy pass (see
# `InMemoryTarget`'s `energy_chunk_size`).
ENERGY_CHUNK_BYTES = 16 * 2**20
MIN_ENERGY_CHUNK = 4096


def default_energy_chunk_size(data, num_examples):
  """As many examples as fit in `ENERGY_CHUNK_BYTES` of `data`, at least
  `MIN_ENERGY_CHUNK`, at most `num_examples`."""
  row_bytes = sum(
      max(1, leaf.shape[1:].num_elements() or 1) * leaf.dtype.size
      for leaf in tf.nest.flatten(data))
  return int(min(num_examples,
                 max(MIN_ENERGY_CHUNK, ENERGY_CHUNK_BYTES // row_bytes)))


class InMemoryTarget(_DataLikelihoodTarget):
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
      examples of 20 floats, is one pass over the data as stored, no copy:
      on that logistic regression with 4 chains one pass took 1.7 ms of
      CPU time against 2.5 ms in chunks of 4096). Lower it if a model's
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
  cost: each step gathers n examples per chain, n x chains in all; SGLD with
  64 chains on a logistic regression (N = 1e5, d = 20, n = 100) took about
  4x the time per step of shared batches.

  #### Example

  ```python
  x, y = ...  # float32 [N, d], [N]
  def log_likelihood(w, batch):
    xb, yb = batch
    return tfd.Normal(tf.linalg.matvec(xb, w), 1.).log_prob(yb)
  log_prior = lambda w: tf.reduce_sum(tfd.Normal(0., 1.).log_prob(w), -1)
  target = tfp_sgmcmc.InMemoryTarget(
      log_likelihood, (x, y), batch_size=32, log_prior_fn=log_prior)
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
    if not isinstance(full_batch, (bool, np.bool_)):
      raise TypeError(f"`full_batch` must be True or False; got "
                      f"{full_batch!r}.")
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
    _check_finite_data(data)
    batch_size = _check_batch_size(batch_size, num_examples)
    self._full_batch = bool(full_batch)
    if not isinstance(independent_minibatches, (bool, np.bool_)):
      raise TypeError(f"`independent_minibatches` must be True or False; "
                      f"got {independent_minibatches!r}.")
    super().__init__(log_likelihood_fn, num_examples, log_prior_fn,
                     parameter_shapes)
    if independent_minibatches and self.parameter_shapes is None:
      raise ValueError(
          "`independent_minibatches=True` needs `parameter_shapes`, the "
          "per-chain shape of the state (e.g. parameter_shapes=[d] for a "
          "state of shape [chains, d], or [[d_in, d_out], [d_out]] for a "
          "list state), to tell the chain dimensions from the parameter's "
          "own; got parameter_shapes=None.")
    self._data = data
    self._batch_size = batch_size
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
    if self._independent:
      return  # Per-chain batches check their shape against the chains.
    if self._full_batch:
      # Every step sees all N examples, in order: a model with its N
      # observations built in (e.g. a JointDistribution) cannot take a
      # probe batch of another size, and needs none.
      return
    dims = {d for p in _as_list(state) for d in (p.shape.as_list()
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
    parts = _as_list(state)
    shapes = _as_list(self.parameter_shapes)
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
    return dynamics.uniform_indices(seed, [self._batch_size],
                                    self.num_examples)

  def _per_chain_indices(self, seed, chain_batch_shape):
    if isinstance(chain_batch_shape, list):
      shape = chain_batch_shape + [self._batch_size]
    else:
      shape = tf.concat([chain_batch_shape, [self._batch_size]], axis=0)
    # The shared draw's call with a larger shape: one draw for every chain's
    # indices (`dynamics.uniform_indices`; TF's Philox integers cost more
    # than the gather itself on XLA:CPU at [chains, n]).
    return dynamics.uniform_indices(seed, shape, self.num_examples)

  def _minibatch(self, state, seed):
    """(batch, n) for the step with this seed: a shared batch with its size,
    or per-chain batches with a `_PerChainBatch` in place of the size."""
    if not self._independent:
      # Through the public method, so subclasses that override it keep
      # choosing the batch.
      return (self._gather(self.minibatch_indices(seed)), self._batch_size)
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
    [n] + example_shape, as for a single chain. On the N = 1e5 logistic
    regression of benchmarks/common.py with 64 chains, SGLD steps through the
    fallback took 0.96-1.07x the time of the broadcasting function's (medians
    of three interleaved runs on a shared 2-core machine), so the fallback
    costs nothing measurable there."""
    n, chain_shape = spec
    static_chains = isinstance(chain_shape, list)
    num_chain_dims = (len(chain_shape) if static_chains
                      else int(chain_shape.shape[0]))
    expected = tf.TensorShape(
        (chain_shape if static_chains else [None] * num_chain_dims) + [n])
    describe = lambda t: f"{tf.as_dtype(t.dtype).name}{list(t.shape)}"
    errors = (ValueError, TypeError, tf.errors.InvalidArgumentError,
              IndexError)
    if self._log_likelihood_broadcasts is not False:
      try:
        values = tf.convert_to_tensor(self._log_likelihood_fn(state, batch))
        problem = (None if values.shape.is_compatible_with(expected) else
                   f"returned shape {list(values.shape)}")
      except errors as e:
        problem = f"raised {type(e).__name__}: {e}"
      if problem is None:
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
    except errors as e:
      raise ValueError(
          "with `independent_minibatches=True`, `log_likelihood_fn` is "
          "called with params "
          f"{tf.nest.map_structure(describe, state)} and a batch "
          f"{tf.nest.map_structure(describe, batch)}: one minibatch of "
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
      return _like(state, [tf.zeros_like(p) for p in _as_list(state)])
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
    n, c = self.num_examples, self._chunk
    num_full, rem = divmod(n, c)

    def chunk_sum(start, size):
      # All N: the data as stored. A chunk: a gather of its rows (on the
      # CPU under XLA a gather of a range took 0.85x the time of
      # tf.slice in this loop).
      batch = (self._data if size == n else
               self._gather(start + tf.range(size)))
      return tf.reduce_sum(self._log_likelihood(state, batch, size), axis=-1)

    total = chunk_sum(0, c)
    if num_full > 1:
      def body(i, acc):
        return i + 1, acc + chunk_sum(i * c, c)
      _, total = tf.while_loop(lambda i, acc: i < num_full, body,
                               (tf.constant(1), total))
    if rem:
      total = total + chunk_sum(num_full * c, rem)
    return -total - tf.cast(self.log_prior(state), total.dtype)


class DatasetTarget(_DataLikelihoodTarget):
  """A posterior whose minibatches stream from a `tf.data.Dataset`.

  Args:
    log_likelihood_fn: as for `InMemoryTarget`.
    dataset: a dataset of minibatches (already batched and, for long chains,
      repeated and shuffled). One element is taken per gradient evaluation.
    num_examples: N, the size of the full training set (needed to scale the
      minibatch log-likelihood by N/n).
    log_prior_fn: as for `InMemoryTarget`.
    full_dataset: a finite dataset of batches covering the training set once,
      used for the exact energy U(theta); without it `energy` is unavailable.
    parameter_shapes: as for `InMemoryTarget`.

  A pipeline that shuffles and batches epoch by epoch samples without
  replacement: the batches of one epoch sum to the full gradient, so their
  noise is anti-correlated within an epoch, not i.i.d. as with
  `InMemoryTarget`'s seed-drawn batches.

  The kernel's seed does not choose the batch here: the pipeline's own
  shuffling does. Works eagerly and inside `tf.function` without XLA; under
  `jit_compile=True` drawing a batch raises a `ValueError` at trace time
  (XLA cannot compile a tf.data iterator; use `InMemoryTarget` there).
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

  @property
  def has_exact_energy(self):
    return self._full_dataset is not None

  def _next_batch(self):
    _refuse_under_xla("DatasetTarget draws a minibatch from its `dataset`")
    if self._checks_exhaustion:
      batch = self._next_batch_checked()
    else:
      batch = self._iterator.get_next()
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

  def energy(self, state):
    if self._full_dataset is None:
      return super().energy(state)
    _refuse_under_xla("DatasetTarget computes the exact energy from its "
                      "`full_dataset`")
    first = self._full_dataset.take(1).get_single_element()
    init = tf.reduce_sum(self._log_likelihood(state, first, None), axis=-1)
    total = self._full_dataset.skip(1).reduce(
        init, lambda acc, batch: acc + tf.reduce_sum(
            self._log_likelihood(state, batch, None), axis=-1))
    return -total - tf.cast(self.log_prior(state), total.dtype)


def _in_xla_context():
  """Whether the graph being built (or one it is nested in) is compiled with
  XLA, e.g. traced by `tf.function(jit_compile=True)`."""
  if tf.executing_eagerly():
    return False
  from tensorflow.python.ops import control_flow_util  # pylint: disable=g-import-not-at-top
  return control_flow_util.GraphOrParentsInXlaContext(
      tf.compat.v1.get_default_graph())


def _refuse_under_xla(what):
  """A clear trace-time error in place of XLA's 'unsupported operations:
  IteratorGetNextAsOptional' at run time."""
  if _in_xla_context():
    raise ValueError(
        f"{what}, which XLA cannot compile: a tf.data iterator runs on the "
        "host, outside the compiled function, so a DatasetTarget cannot be "
        "used inside `tf.function(..., jit_compile=True)`. Use "
        "`tf.function` without jit_compile, or put the data in an "
        "`InMemoryTarget` (its batches are drawn by the seed inside the "
        "compiled function).")


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
  if cardinality > 0:
    count = int(full_dataset.reduce(
        tf.constant(0, tf.int64), lambda acc, batch: acc + tf.cast(
            tf.shape(tf.nest.flatten(batch)[0])[0], tf.int64)))
    if count != num_examples:
      raise ValueError(
          f"`num_examples` = {num_examples} but `full_dataset` holds {count} "
          "examples: N must be the size of the training set that "
          "`full_dataset` covers once (the minibatch energy is scaled by "
          "N / n).")


class NoisyGradientTarget(MinibatchTarget):
  """A synthetic target with exact energy and noisy gradient.

      U~(theta) = U(theta),   grad U~(theta) = grad U(theta) + N(0, V),

  as in the toy experiments of Chen et al. (2014) and Zhang et al. (2020),
  where V is `gradient_noise_variance` (a scalar or one value per coordinate,
  broadcast against each state part) or `gradient_noise_covariance` (a
  [d, d] matrix for a single-tensor state with event size d).

  Args:
    energy_fn: `state -> U(state)` of shape `batch_shape`.
    gradient_noise_variance: V as a scalar or per-coordinate variance.
    gradient_noise_covariance: V as a full covariance matrix.
    num_examples: nominal N (only reported; default 1).

  #### Example

  ```python
  # The double well of the AMAGOLD paper, with grad U~ = grad U + N(0, 1).
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: ((x + 4) * (x + 1) * (x - 1) * (x - 3) / 14 + 0.5)[..., 0],
      gradient_noise_variance=1.)
  ```
  """

  def __init__(self, energy_fn, gradient_noise_variance=None,
               gradient_noise_covariance=None, num_examples=1,
               parameter_shapes=None):
    if not callable(energy_fn):
      raise TypeError(f"`energy_fn` must be callable; got {energy_fn!r}.")
    if (gradient_noise_variance is None) == (gradient_noise_covariance is
                                             None):
      raise ValueError("give exactly one of `gradient_noise_variance` and "
                       "`gradient_noise_covariance`.")
    super().__init__(num_examples, parameter_shapes=parameter_shapes)
    self._energy_fn = energy_fn
    self._chol = None
    self._variance = None
    if gradient_noise_covariance is not None:
      cov = np.asarray(gradient_noise_covariance, dtype=np.float64)
      if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"`gradient_noise_covariance` must be a square "
                         f"matrix; got shape {cov.shape}.")
      try:
        self._chol = np.linalg.cholesky(cov)
      except np.linalg.LinAlgError as e:
        raise ValueError("`gradient_noise_covariance` must be positive "
                         f"definite; got {cov.tolist()}.") from e
      self._variance = np.diag(cov)
    else:
      if isinstance(gradient_noise_variance, (str, bytes, bool)):
        raise TypeError("`gradient_noise_variance` must be a number or an "
                        f"array of numbers; got {gradient_noise_variance!r}.")
      try:
        var = np.asarray(gradient_noise_variance, dtype=np.float64)
      except (TypeError, ValueError) as e:
        raise TypeError("`gradient_noise_variance` must be a number or an "
                        f"array of numbers; got "
                        f"{gradient_noise_variance!r}.") from e
      if np.any(var < 0) or not np.all(np.isfinite(var)):
        raise ValueError(f"`gradient_noise_variance` must be finite and "
                         f">= 0; got {gradient_noise_variance!r}.")
      self._variance = var

  def _checked_energy(self, state):
    value = _call_with_clear_errors("`energy_fn`", self._energy_fn, state)
    value = _check_output("energy_fn", value, state)
    _check_batch_shape("energy_fn", value.shape, state,
                       self.parameter_shapes, "energies")
    return value

  def minibatch_energy(self, state, seed):
    del seed
    return self._checked_energy(state)

  def energy(self, state):
    return self._checked_energy(state)

  def energy_and_gradient(self, state, seed):
    energy, grads = super().energy_and_gradient(state, seed)
    parts = _as_list(grads)
    seeds = tfp.random.split_seed(tfp.random.sanitize_seed(seed),
                                  n=len(parts))
    noisy = []
    for g, s in zip(parts, seeds):
      z = tf.random.stateless_normal(tf.shape(g), seed=s, dtype=g.dtype,
                                     alg=dynamics.RNG_ALG)
      if self._chol is not None:
        if g.shape[-1] != self._chol.shape[0]:
          raise ValueError(
              f"`gradient_noise_covariance` is {self._chol.shape[0]}x"
              f"{self._chol.shape[0]} but the state has event size "
              f"{g.shape[-1]} (shape {g.shape}).")
        noise = tf.linalg.matvec(tf.constant(self._chol, g.dtype), z)
      else:
        noise = tf.sqrt(tf.constant(self._variance, g.dtype)) * z
      noisy.append(g + noise)
    return energy, _like(state, noisy)

  def gradient_noise_variance(self, state, seed):
    del seed
    return _like(state, [
        tf.broadcast_to(tf.constant(self._variance, p.dtype), tf.shape(p))
        for p in _as_list(state)])


def _check_batch_size(batch_size, num_examples):
  if isinstance(batch_size, (bool, np.bool_, str, bytes)):
    raise TypeError(f"`batch_size` must be an integer; got {batch_size!r}.")
  try:
    value = int(batch_size)
  except (TypeError, ValueError):
    raise TypeError(f"`batch_size` must be an integer; got "
                    f"{batch_size!r}.") from None
  if value != batch_size:
    raise TypeError(f"`batch_size` must be an integer; got {batch_size!r}.")
  if value < 1 or value > num_examples:
    raise ValueError(f"`batch_size` must be between 1 and N = {num_examples} "
                     f"(the number of examples); got {value}.")
  return value


class ControlVariateTarget(MinibatchTarget):
  """Control-variate gradients around a mode (Baker, Fearnhead, Fox, Nemeth).

      grad U~_cv(theta) = grad U(theta_hat)
                          + grad U~(theta) - grad U~(theta_hat),

  with both minibatch terms on the same minibatch, so their noise largely
  cancels near theta_hat: the estimator's variance is O(|theta -
  theta_hat|^2) instead of O(1). The minibatch energy is the matching
  unbiased estimate

      U~_cv(theta) = U~(theta) - [U~(theta_hat) + grad U~(theta_hat)^T delta]
                     + [U(theta_hat) + grad U(theta_hat)^T delta],
      delta = theta - theta_hat,

  whose gradient in theta is exactly grad U~_cv. Every kernel uses it
  through the target, unchanged. U(theta_hat) and grad U(theta_hat) are
  computed once, at construction, from the base target's exact energy.

  Args:
    target: a target with an exact energy (e.g. `InMemoryTarget`).
    centre: theta_hat, in the structure of one chain's state (no chain
      dimensions), e.g. from `tfp_sgmcmc.find_mode`.

  #### Example

  ```python
  mode = tfp_sgmcmc.find_mode(target, tf.zeros([d]), num_steps=2000)
  cv_target = tfp_sgmcmc.ControlVariateTarget(target, mode)
  kernel = tfp_sgmcmc.SGLD(cv_target, step_size=1e-4)   # SGLD-CV
  ```

  #### References

  [1] Baker, J., Fearnhead, P., Fox, E. B. and Nemeth, C. Control variates
      for stochastic gradient MCMC. Statistics and Computing, 2019.
  """

  def __init__(self, target, centre):
    if not isinstance(target, MinibatchTarget):
      raise TypeError(f"`target` must be a tfp_sgmcmc target; got "
                      f"{type(target).__name__}.")
    if not target.has_exact_energy:
      raise TargetCapabilityError(
          "ControlVariateTarget needs the base target's exact full-data "
          "energy to compute grad U(theta_hat); this target has none.")
    super().__init__(target.num_examples,
                     parameter_shapes=target.parameter_shapes)
    self._base = target
    centre = tf.nest.map_structure(tf.convert_to_tensor, centre)
    target.check_state(centre)
    parts = _as_list(centre)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      energy = target.energy(_like(centre, parts))
    grads = tape.gradient(energy, parts)
    self._centre = centre
    self._centre_energy = energy
    self._centre_gradient = _like(centre, grads)

  @property
  def base_target(self):
    return self._base

  @property
  def centre(self):
    return self._centre

  @property
  def has_exact_energy(self):
    return True

  def check_state(self, state):
    self._base.check_state(state)

  def check_functions(self, state):
    self._base.check_functions(state)

  def log_prior(self, state):
    return self._base.log_prior(state)

  def energy(self, state):
    return self._base.energy(state)

  def minibatch_energies(self, states, seed):
    return [self.minibatch_energy(state, seed) for state in states]

  def minibatch_energy(self, state, seed):
    centre_parts = _as_list(self._centre)
    if getattr(self._base, "independent_minibatches", False):
      # Each chain has its own minibatch, so each needs the centre's energy
      # and gradient on that batch: one copy of the centre per chain.
      centre_parts = [tf.broadcast_to(tf.cast(c, x.dtype), tf.shape(x))
                      for c, x in zip(centre_parts, _as_list(state))]
    with tf.GradientTape() as tape:
      tape.watch(centre_parts)
      centre_mb = self._base.minibatch_energy(
          _like(self._centre, centre_parts), seed)
    centre_mb_grad = [tf.stop_gradient(g) for g in tape.gradient(
        centre_mb, centre_parts,
        unconnected_gradients=tf.UnconnectedGradients.ZERO)]
    centre_mb = tf.stop_gradient(centre_mb)
    state_mb = self._base.minibatch_energy(state, seed)
    correction = tf.zeros_like(state_mb)
    for x, c, g_mb, g_full in zip(_as_list(state), centre_parts,
                                  centre_mb_grad,
                                  _as_list(self._centre_gradient)):
      delta = x - c
      axes = list(range(len(state_mb.shape), len(x.shape)))
      correction = correction + tf.reduce_sum(
          (tf.cast(g_full, x.dtype) - g_mb) * delta, axis=axes)
    return (state_mb - centre_mb + tf.cast(self._centre_energy,
                                           state_mb.dtype) + correction)


class TemperedTarget(MinibatchTarget):
  """The tempered posterior pi_T(theta) proportional to exp(-U(theta) / T).

  Divides every energy, gradient and gradient-noise estimate of `target` by
  the temperature T (variances by T^2). T < 1 gives a cold posterior, T > 1 a
  warm one. Kernels whose `temperature` argument cannot be expressed through
  their injected noise (the exact AMAGOLD and amortized Barker, and SGBD)
  sample `TemperedTarget(target, temperature)`.
  """

  def __init__(self, target, temperature):
    if not isinstance(target, MinibatchTarget):
      raise TypeError(f"`target` must be a tfp_sgmcmc target; got "
                      f"{type(target).__name__}.")
    if isinstance(temperature, (str, bytes, bool)) or temperature is None:
      raise TypeError(f"`temperature` must be a number > 0; got "
                      f"{temperature!r}.")
    t = float(temperature)
    if not t > 0 or not np.isfinite(t):
      raise ValueError(f"`temperature` must be > 0 and finite; got "
                       f"{temperature!r}.")
    super().__init__(target.num_examples,
                     parameter_shapes=target.parameter_shapes)
    self._base = target
    self._temperature = t

  @property
  def base_target(self):
    return self._base

  @property
  def temperature(self):
    return self._temperature

  @property
  def has_exact_energy(self):
    return self._base.has_exact_energy

  def check_state(self, state):
    self._base.check_state(state)

  def check_functions(self, state):
    self._base.check_functions(state)

  def _cool(self, x):
    return x / tf.cast(self._temperature, x.dtype)

  def log_prior(self, state):
    return self._cool(tf.convert_to_tensor(self._base.log_prior(state)))

  def minibatch_energy(self, state, seed):
    return self._cool(self._base.minibatch_energy(state, seed))

  def minibatch_energies(self, states, seed):
    return [self._cool(e) for e in self._base.minibatch_energies(states, seed)]

  def energy_and_gradient(self, state, seed):
    energy, grads = self._base.energy_and_gradient(state, seed)
    return self._cool(energy), tf.nest.map_structure(self._cool, grads)

  def gradient(self, state, seed):
    return tf.nest.map_structure(self._cool, self._base.gradient(state, seed))

  def energy(self, state):
    return self._cool(self._base.energy(state))

  def gradient_noise_variance(self, state, seed):
    return tf.nest.map_structure(
        lambda v: self._cool(self._cool(v)),
        self._base.gradient_noise_variance(state, seed))
