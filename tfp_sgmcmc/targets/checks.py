"""Checks of what users give a target: data, batch sizes, and the shapes and
dtypes of what their functions return, each with an error that names the
argument, the value seen and the fix. Run once, when a target is built or a
chain bootstrapped (at trace time), never per step."""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc._structure import describe_structure
from tfp_sgmcmc.arguments import (assert_in_graph, check_integer,
                                  in_xla_context)

__all__ = ["check_float_state", "call_with_clear_errors", "check_output",
           "check_batch_shape", "checked_log_prior",
           "likelihood_ignores_chains", "check_keeps_chain_axes",
           "call_traced_first", "PROBE_ERRORS",
           "parse_parameter_shapes",
           "check_functions_callable", "checked_log_likelihood",
           "check_finite_data",
           "non_finite_examples",
           "check_batch_size", "in_xla_context", "refuse_under_xla",
           "check_initial_state", "check_finite_state"]


def check_float_state(state):
  for i, part in enumerate(tf.nest.flatten(state)):
    dtype = tf.as_dtype(part.dtype)
    if not dtype.is_floating:
      raise TypeError(
          f"`current_state` part {i} has dtype {dtype.name}; expected a "
          "floating dtype (float32 or float64). Cast the initial state, e.g. "
          "tf.constant([0.], tf.float32).")


def call_with_clear_errors(what, fn, state, *batch):
  """Calls a user function on `state` (and a `batch`), turning deep TF errors
  into a clear message that shows what it was called with and, where the
  dtypes differ, how to make them agree."""
  try:
    return fn(state, *batch)
  except (ValueError, TypeError, tf.errors.InvalidArgumentError,
          IndexError, KeyError, AttributeError) as e:
    called = f"`state` = {describe_structure(state)}"
    hint = ("does the state structure (one tensor or a list, one per "
            "parameter) match what the function expects")
    if batch:
      called += f" and `batch` = {describe_structure(batch[0])}"
      hint += ", and do the data's shapes (e.g. labels [N], not [N, 1])"
      dtype = tf.as_dtype(tf.nest.flatten(state)[0].dtype).name
      other = sorted({tf.as_dtype(t.dtype).name
                      for t in tf.nest.flatten(batch[0])} - {dtype})
      if other:
        hint = (f"the batch holds {other} data while the state is {dtype}: "
                "cast inside the function (e.g. tf.cast(y, w.dtype) for "
                "integer labels) or give the target data and state of one "
                f"float dtype. Also, {hint}")
    else:
      hint = _dtype_hint(state, e) + hint
    raise ValueError(
        f"{what} failed when called with {called}: {hint}? "
        f"Original error: {type(e).__name__}: {e}") from e


def _dtype_hint(state, error):
  """Where a function without data failed on the other float dtype than
  the state's (a float64 model, float32 state, or a float32 prior beside
  float64 data, from which `sample` makes a float64 state): the fix, else
  ""."""
  dtype = tf.as_dtype(tf.nest.flatten(state)[0].dtype)
  other = {tf.float32: ("float64", "double"), tf.float64: ("float32",)}
  if not any(name in str(error) for name in other.get(dtype, ())):
    return ""
  if dtype == tf.float64:
    # A Python float parameter (tfd.Normal(0., 1.)) makes a float32
    # function, which numpy's default float64 data meet here.
    return ("the function computes in float32 while the state is float64: "
            "give the target's data in float32 (e.g. x.astype('float32'); "
            "`sample` makes a float64 state from float64 data, and an "
            "`initial_state=` in float32 then), or build the function in "
            "float64 (e.g. tfd.Normal(np.float64(0.), 1.)). Also, ")
  return (f"the function computes in another float dtype than the {dtype.name}"
          " state: give the state in the function's dtype (with "
          "tfp_sgmcmc.sample, `initial_state=` one chain's state in it, e.g. "
          "np.zeros(d) for float64), or build the function in "
          f"{dtype.name}. Also, ")


def check_output(name, value, state):
  """Static (trace-time) check of a user function's output: a tensor in the
  state's dtype (its shape is checked by `check_batch_shape`)."""
  value = tf.convert_to_tensor(value)
  want = tf.as_dtype(tf.nest.flatten(state)[0].dtype).name
  if value.dtype.name != want:
    raise TypeError(
        f"`{name}` returned dtype {value.dtype.name} for a {want} state; it "
        f"must return the state's dtype (cast the data to {want}, or the "
        "state to the data's dtype).")
  return value


def likelihood_ignores_chains(returned, state):
  """The error for a `log_likelihood_fn` that drops the chain axes (e.g.
  reads w[0]): it `returned` ... for a state `state`."""
  return ValueError(
      f"`log_likelihood_fn` returned {returned} for a state "
      f"{describe_structure(state)}: the log-likelihood ignores the chain "
      "axes (e.g. it indexes w[0], or reshapes the parameters to one "
      "chain). Make it broadcast over the leading (chain) axes of each "
      "state part, returning shape chain_shape + [n] (e.g. "
      "tf.linalg.matvec(x, w) with w of shape [chains, d] gives "
      "[chains, n]).")


# What a user function called on a probe raises when it does not take it.
PROBE_ERRORS = (ValueError, TypeError, tf.errors.InvalidArgumentError,
                IndexError)


def call_traced_first(fn, *args, trace=True):
  """`fn(*args)` as a tensor, for a probe whose failure the caller handles.
  Eagerly (with `trace`) it is traced first, not run, so that a shape
  error comes from the trace: an op that fails when run eagerly also logs
  the error from TensorFlow's C++ ("OP_REQUIRES failed at ..."), which
  reads as a fault though the caller goes on. In a graph the call is
  symbolic already."""
  if trace and tf.executing_eagerly():
    tf.function(fn, autograph=False).get_concrete_function(*args)
  return tf.convert_to_tensor(fn(*args))


def check_keeps_chain_axes(log_likelihood_fn, state, batch, num_chain_dims):
  """Per-chain batches give a log-likelihood that reads one chain's
  parameters (w[0]) the chain axes it drops; one batch shared by the chains
  does not: then it returns [n]. Checked at its first call (in a graph the
  probe's value is unused, and not computed)."""
  shared = tf.nest.map_structure(lambda b: b[(0,) * num_chain_dims], batch)
  try:
    probe = call_traced_first(log_likelihood_fn, state, shared)
  except PROBE_ERRORS:
    return  # Written for per-chain batches only: nothing to tell.
  if probe.shape.rank == 1:
    raise likelihood_ignores_chains(
        f"shape {list(probe.shape)} on one batch shared by the chains (one "
        "value per example, none per chain)", state)


def checked_log_prior(log_prior_fn, state, batch_shape, parameter_shapes):
  """`log_prior_fn(state)`, checked (at trace time) to give one value per
  chain, `batch_shape` (the log-likelihood's): a function that drops the
  chain axes is named, the likelihood when the prior gives one value per
  chain and the likelihood fewer, else the prior. No function, or a Python
  number (a flat prior), gives a scalar of the state's dtype."""
  value = (0. if log_prior_fn is None else
           call_with_clear_errors("`log_prior_fn`", log_prior_fn, state))
  if (not tf.is_tensor(value) and isinstance(value, (
      int, float, np.integer, np.floating)) and not isinstance(value, bool)):
    # A constant (flat) prior, e.g. `lambda w: 0.`: broadcasts over chains.
    return tf.constant(float(value), tf.nest.flatten(state)[0].dtype)
  value = check_output("log_prior_fn", value, state)
  if (value.shape.rank is not None and batch_shape.rank is not None and
      not (value.shape.rank == batch_shape.rank and
           value.shape.is_compatible_with(batch_shape))):
    if (value.shape.rank > batch_shape.rank and check_batch_shape(
        None, value.shape, state, parameter_shapes, None)):
      # The prior gives one value per chain and the likelihood fewer:
      # the likelihood dropped the chain axes (e.g. it reads w[0]).
      raise likelihood_ignores_chains(
          f"per-example values whose chain (batch) shape is "
          f"{list(batch_shape)}, but `log_prior_fn` returned one value per "
          f"chain, shape {list(value.shape)},", state)
    raise ValueError(
        f"`log_prior_fn` returned shape {list(value.shape)} but the "
        f"log-likelihood's chain (batch) shape is {list(batch_shape)} "
        f"for a state {describe_structure(state)}: the log-prior must "
        "return one value per chain, summed over the parameters (e.g. "
        "lambda w: tf.reduce_sum(-0.5 * w**2, axis=-1)), not one per "
        "parameter or with a trailing axis of 1.")
  return value


def check_batch_shape(name, batch_shape, state, parameter_shapes, what):
  """`batch_shape` (one value per chain) must be the state's chain
  dimensions: for each part, a prefix of its shape that leaves the
  parameter's own dimensions (exactly `parameter_shapes` when declared).
  Raises naming `name` and `what` it returned; with `what` None, returns
  whether it is instead."""
  parts = tf.nest.flatten(state)
  shapes = (parameter_shapes if isinstance(parameter_shapes, list) else
            [parameter_shapes] * len(parts))
  for i, (part, own) in enumerate(zip(parts, shapes)):
    if batch_shape.rank is None or part.shape.rank is None:
      continue
    # Declared: exactly the axes before the parameter's own. Otherwise a
    # prefix leaving at least one parameter axis (a list state may hold
    # scalars).
    chain = part.shape[:part.shape.rank - len(own)] if own is not None else (
        part.shape[:batch_shape.rank] if batch_shape.rank <= part.shape.rank
        - (len(parts) == 1) else None)
    if chain is None or chain.rank != batch_shape.rank or (
        not chain.is_compatible_with(batch_shape)):
      if what is None:
        return False
      raise ValueError(
          f"`{name}` returned {what} of shape {list(batch_shape)}, but the "
          f"state part {i} has shape {list(part.shape)}: it must return one "
          "value per chain, shape = the state's leading (chain) dimensions "
          "(shape [] for a single chain), summed over each parameter's own "
          "axes (e.g. tf.reduce_sum(..., axis=-1)). If the state's leading "
          "axes are not all chain axes, give the target `parameter_shapes`.")
  return True


def parse_parameter_shapes(shapes):
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


def check_functions_callable(log_likelihood_fn, log_prior_fn):
  if not callable(log_likelihood_fn):
    raise TypeError("`log_likelihood_fn` must be callable "
                    f"(params, batch) -> per-example log-likelihoods; got "
                    f"{log_likelihood_fn!r}.")
  if log_prior_fn is not None and not callable(log_prior_fn):
    raise TypeError(f"`log_prior_fn` must be callable or None; got "
                    f"{log_prior_fn!r}.")


def checked_log_likelihood(log_likelihood_fn, state, batch, n,
                           parameter_shapes):
  """`log_likelihood_fn(state, batch)`, checked (at trace time) to return
  the state's dtype and one value per example of the `n` in `batch` (n None:
  not known), in the last axis after the chain axes (`check_batch_shape`)."""
  values = check_output("log_likelihood_fn", call_with_clear_errors(
      "`log_likelihood_fn`", log_likelihood_fn, state, batch), state)
  shape = values.shape
  if shape.rank is not None and (shape.rank == 0 or shape[-1] not in (
      n, None) and n is not None):
    raise ValueError(
        "`log_likelihood_fn` must return one log-likelihood per example, "
        f"with the examples in the last axis (shape batch_shape + [{n}] for a"
        f" batch of {n}); it returned shape {shape}. Do not sum or average "
        "over the batch inside it.")
  if n and n > 1 and shape.rank and shape.rank > 1 and shape[-2] == n and (
      not check_batch_shape(None, shape[:-1], state, parameter_shapes, None)):
    raise ValueError(
        f"`log_likelihood_fn` returned shape {list(shape)} for a batch of {n}"
        f": an axis of {n} before the examples' axis, the examples broadcast "
        f"against each other, e.g. labels of shape [{n}, 1] against "
        f"predictions of shape [{n}]. Give the labels shape [N] "
        "(y.reshape(-1)), or make the shapes agree inside the function.")
  check_batch_shape("log_likelihood_fn", shape[:-1], state, parameter_shapes,
                    "per-example values whose leading (chain) axes are")
  return values


def check_finite_data(data, name="data"):
  """Rejects NaN or infinite values in the floating parts of `data`
  (tensors or numpy arrays; checked once, when the target is built or its
  files written: otherwise every chain just diverges)."""
  for i, leaf in enumerate(tf.nest.flatten(data)):
    if not tf.as_dtype(leaf.dtype).is_floating:
      continue
    value = (leaf if isinstance(leaf, np.ndarray) else
             tf.get_static_value(leaf))
    if value is None:  # Symbolic (built inside tf.function): asserted once.
      assert_in_graph(tf.reduce_all(tf.math.is_finite(leaf)), [
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


def non_finite_examples(data, name):
  """A phrase naming the first floating part of `data` (arrays or eager
  tensors, examples first) that holds NaN or inf: "`name` part i has NaN or
  inf in k of n examples (the first at index j)"; "" when all are finite.
  For reading data after a divergence, once, on the host."""
  leaves = tf.nest.flatten(data)
  for i, leaf in enumerate(leaves):
    array = np.asarray(leaf)
    if array.dtype.kind not in "fc" or array.ndim == 0:
      continue
    bad = np.flatnonzero(
        ~np.isfinite(array).reshape(array.shape[0], -1).all(axis=1))
    if bad.size:
      part = f" part {i}" if len(leaves) > 1 else ""
      return (f"`{name}`{part} has NaN or inf in {bad.size} of "
              f"{array.shape[0]} examples (the first at index {int(bad[0])})")
  return ""


def check_batch_size(batch_size, num_examples):
  return check_integer("batch_size", batch_size, 1, num_examples,
                       hint=f" N = {num_examples} is the number of examples.")


def refuse_under_xla(what, reader="a tf.data iterator",
                     target="a DatasetTarget"):
  """A clear trace-time error in place of XLA's 'unsupported operations:
  IteratorGetNextAsOptional' (or 'PyFuncStateless', for a `reader` in a
  `tf.numpy_function`) at run time."""
  if in_xla_context():
    raise ValueError(
        f"{what}, which XLA cannot compile: {reader} runs on the "
        f"host, outside the compiled function, so {target} cannot be "
        "used inside `tf.function(..., jit_compile=True)`. Use "
        "`tf.function` without jit_compile (tfp_sgmcmc's `warm_up`, "
        "`sample_chain_with_progress`, `sample_moments` and "
        "`step_size_by_ksd` compile with "
        "XLA unless given jit_compile=False; `sample` and `ksd` do not, "
        "on a stream), or put the data in an `InMemoryTarget` (its batches "
        "are drawn by the seed inside the compiled function).")


def check_initial_state(state, target):
  """Checks a chain's initial state (tensors: `kernels.checks.as_state`
  converts and refuses other parts first) once, when the results are
  bootstrapped.

  Structure and float dtypes always, and the shapes and dtypes of what the
  target's user functions return (at trace time). Finite values: raised
  eagerly; asserted in the graph under `tf.function` (one check per run, not
  per step). XLA cannot run assertions, so none is built there: a chain
  started at a non-finite state is flagged `diverged` at its first step and
  stays where it is.
  """
  target.check_state(state)
  target.check_functions(state)
  check_finite_state(state)


def check_finite_state(state):
  """Raises eagerly (asserts in a graph, nothing under XLA) unless every
  floating part of `state` is finite."""
  for i, part in enumerate(tf.nest.flatten(state)):
    if not part.dtype.is_floating:
      continue
    finite = tf.reduce_all(tf.math.is_finite(part))
    message = (f"`current_state` part {i} has non-finite values; start the "
               "chain from a finite state.")
    if not tf.executing_eagerly():
      assert_in_graph(finite, [message])
    elif not bool(finite):
      raise ValueError(message)
