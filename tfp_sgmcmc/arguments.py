"""Checks of hyperparameters and the record of constructor arguments, shared
by every front end (the `tfp.mcmc` kernels and the Keras samplers).

An argument error names the argument, the value received and what was
expected; it is raised when the kernel or sampler is built, not at the
first step.
"""

import numbers

import numpy as np
import tensorflow as tf

__all__ = ["static_value", "check_noise_within_friction",
           "check_fits_state", "check_integer", "check_bool",
           "describe", "check_positive", "check_number",
           "parameter_property", "is_schedule", "is_per_part",
           "check_step_size", "check_step_size_matches", "scale_step",
           "in_xla_context", "assert_in_graph"]


def static_value(value, read_variable=False):
  """The value of a Python number, array or constant tensor (as a float64
  array), else None; with `read_variable`, eagerly also the current value
  of a `tf.Variable` (a value that may change: for checks made now)."""
  if isinstance(value, tf.Variable):
    value = (value.numpy() if read_variable and tf.executing_eagerly() else
             None)
  elif tf.is_tensor(value):
    value = tf.get_static_value(value)
  elif not isinstance(value, (numbers.Number, np.ndarray, np.generic, list,
                              tuple)):
    return None  # Also a string: not a number.
  try:
    return None if value is None else np.asarray(value, dtype=np.float64)
  except (TypeError, ValueError):
    return None


def in_xla_context():
  """Whether the graph being built (or one it is nested in) is compiled with
  XLA, e.g. traced by `tf.function(jit_compile=True)`."""
  if tf.executing_eagerly():
    return False
  from tensorflow.python.ops import control_flow_util  # pylint: disable=g-import-not-at-top
  return control_flow_util.GraphOrParentsInXlaContext(
      tf.compat.v1.get_default_graph())


def assert_in_graph(condition, data):
  """`tf.debugging.Assert(condition, data)` in a graph that runs it; nothing
  in an XLA-compiled one, which cannot run an Assert (XLA drops it and logs
  "Ignoring Assert operator" on every compilation). Callers keep a check
  that holds under XLA: e.g. a non-finite value makes the chain's energy
  non-finite, so it is flagged `diverged` at its first step. Returns the
  op, or None."""
  if in_xla_context():
    return None
  return tf.debugging.Assert(condition, data)


def check_noise_within_friction(friction, noise_estimate, temperature,
                                dtype=None):
  """The rule C T >= B-hat: the injected noise has variance
  2 (C T - B-hat) h, and below zero the update would be clipped to
  noiseless SGD with momentum, silently.

  At construction (`dtype` None): raises a `ValueError` where every value
  is known (a number, a constant tensor, eagerly a `tf.Variable`'s current
  value); returns None.

  At a step (`dtype` the state's): returns None when every value is static
  (checked at construction); otherwise a scalar that is 0 when the rule
  holds and NaN when it fails, for the transition's `checked` values: the
  chains are then flagged `diverged` and keep their state, in every
  compilation mode (XLA drops assertions). Eagerly a failure also raises a
  `ValueError`; in a graph it is also asserted (the message, where
  assertions run).
  """
  if dtype is None:
    c, t = (static_value(friction, read_variable=True),
            static_value(temperature, read_variable=True))
    for value in tf.nest.flatten(noise_estimate):
      b = static_value(value, read_variable=True)
      if b is not None and c is not None and t is not None and (
          b > c * t).any():
        raise ValueError(
            f"`friction` C = {friction!r} must be >= `noise_estimate` "
            f"B-hat = {value!r} (times the temperature): the injected "
            "noise has variance 2 (C T - B-hat) h.")
    return None
  noise = tf.nest.flatten(noise_estimate)
  if all(static_value(v) is not None
         for v in [friction, temperature] + noise):
    return None
  c = tf.cast(friction, dtype) * tf.cast(temperature, dtype)
  ok = tf.reduce_all(tf.stack(
      [tf.reduce_all(c >= tf.cast(b, dtype)) for b in noise]))
  message = ("`friction` C (times the temperature T) must be >= "
             "`noise_estimate` B-hat at every step: the injected noise has "
             "variance 2 (C T - B-hat) h, and below zero the chain would "
             "run as noiseless SGD with momentum. Raise the friction or "
             "lower the noise estimate (a tf.Variable's new value is "
             "checked at each step).")
  if tf.executing_eagerly():
    if not bool(ok):
      raise ValueError(
          f"{message} Got C = {describe(friction)}, T = "
          f"{describe(temperature)}, B-hat = "
          f"{[describe(b) for b in noise]}.")
  else:
    assert_in_graph(ok, [message, "C T =", c])
  return tf.where(ok, tf.constant(0., dtype), tf.constant(np.nan, dtype))


def check_fits_state(name, value, state):
  """A hyperparameter given per coordinate (or per chain) must broadcast to
  the state part it scales without changing its shape: one value, one per
  coordinate (the part's trailing shape), or one per chain (trailing axes of
  size 1). A list or tuple with one entry per state part (TFP's per-part
  step sizes, for list, tuple and dict states) is checked part by part.
  Raises a `ValueError` naming the argument, the shape seen and the state's
  shape, before any step runs (a broadcasting error deep in the update, or
  a silently larger state, otherwise)."""
  parts = tf.nest.flatten(state)
  per_part = isinstance(value, (list, tuple)) and len(value) == len(parts)
  keys = _unsorted_keys(state) if per_part else None
  if keys:
    # tf.nest reads a dict in sorted-key order, whatever order it was
    # written in: a list written in the dict's own order would silently
    # give each part another part's value.
    raise ValueError(
        f"`{name}` is a list, read as one entry per state part in "
        f"tf.nest's order, which sorts a dict's keys ({sorted(keys)}); the "
        f"state's dict lists them as {keys}, so the list's order is "
        "ambiguous. Write the state's dict in sorted-key order (e.g. "
        "dict(sorted(state.items()))) and the list in that order.")
  for i, part in enumerate(parts):
    label, v = (f"{name}[{i}]", value[i]) if per_part else (name, value)
    # The static shape of a number, array (not a tuple), tensor or variable;
    # None for anything else (e.g. a schedule or a string).
    shape = (v.shape if tf.is_tensor(v) or isinstance(v, tf.Variable) else
             None if isinstance(v, tuple) else
             getattr(static_value(v), "shape", None))
    shape, part_shape = tf.TensorShape(shape), tf.TensorShape(part.shape)
    if not shape.rank or part_shape.rank is None:
      continue  # One value (or not a static shape), or an unknown rank.
    # Broadcasts to the part without changing its shape: each trailing
    # axis 1 or the part's.
    if shape.rank > part_shape.rank or any(
        a not in (1, None, b) and b is not None for a, b in zip(
            shape.as_list()[::-1], part_shape.as_list()[::-1])):
      trailing = list(part_shape[-1:]) if part_shape.rank else []
      raise ValueError(
          f"`{label}` has shape {shape.as_list()}, which does not fit "
          f"`current_state`{'' if len(parts) == 1 else f' part {i}'} of "
          f"shape {part_shape.as_list()}: give one value, one per "
          f"coordinate (shape {trailing} or the part's trailing shape), or"
          " one per chain (the chain shape followed by axes of size 1).")


def _unsorted_keys(structure):
  """The keys of the first dict in `structure` whose own order is not the
  sorted order in which tf.nest reads it, else None."""
  if isinstance(structure, dict):
    if list(structure) != sorted(structure):
      return list(structure)
    structure = list(structure.values())
  if isinstance(structure, (list, tuple)):
    for keys in map(_unsorted_keys, structure):
      if keys:
        return keys
  return None


def describe(value):
  if isinstance(value, tf.Variable):
    return f"tf.Variable {value.name!r} = {value.numpy()!r}"
  return repr(value)


def check_positive(name, value, allow_zero=False):
  """Checks a numeric argument: its type always, its value where known.

  Strings, booleans and other non-numbers are rejected; the value of a
  Python number, array or constant tensor is checked now; a `tf.Variable`'s
  current value is checked now (eagerly) and a non-constant tensor's is
  asserted in the graph being built (once, where the kernel is built, not
  per step).
  """
  want = ">= 0" if allow_zero else "> 0"
  tensor = tf.is_tensor(value) or isinstance(value, tf.Variable)
  real = not tensor or value.dtype.is_floating or value.dtype.is_integer
  v = static_value(value, read_variable=True) if real else None
  if isinstance(value, (bool, np.bool_)) or not real or (
      v is None and not tensor):
    raise TypeError(f"`{name}` must be a real number (or a float tensor) "
                    f"{want}; got {value!r} of type {type(value).__name__}. "
                    f"Pass e.g. {name}=0.1.")
  if v is None:
    # A tensor whose value is not known while tracing: asserted once, in
    # the graph that builds the kernel (not in every step).
    x = tf.cast(value, tf.float64)
    assert_in_graph(tf.reduce_all(
        ((x >= 0) if allow_zero else (x > 0)) & tf.math.is_finite(x)),
                    [f"`{name}` must be {want} and finite; got", x])
    return
  if not np.all((v >= 0) if allow_zero else (v > 0)) or not np.all(
      np.isfinite(v)):
    raise ValueError(f"`{name}` must be {want} and finite; got "
                     f"{describe(value)}.")


def check_integer(name, value, minimum=1, maximum=None, hint=""):
  """`value` as a Python int, where it is an integer (Python, numpy, or an
  integer tensor of known value; not a bool) in [minimum, maximum]; else a
  `TypeError` (not an integer) or `ValueError` (out of range) naming `name`,
  the value seen and the range, then `hint` (the fix, or what it counts)."""
  v = (tf.get_static_value(value) if tf.is_tensor(value) and
       value.dtype.is_integer else value)
  v = v.item() if isinstance(v, (np.ndarray, np.generic)) and not np.ndim(
      v) else v
  span = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
  message = f"`{name}` must be an integer {span}; got {value!r}.{hint}"
  if isinstance(v, bool) or not isinstance(v, numbers.Integral):
    raise TypeError(message)
  if v < minimum or maximum is not None and v > maximum:
    raise ValueError(message)
  return int(v)


def check_bool(name, value, hint=""):
  """A Python (or numpy) bool; else a `TypeError` naming `name`, the value
  seen and `hint` (what each choice does)."""
  if not isinstance(value, (bool, np.bool_)):
    raise TypeError(f"`{name}` must be True or False; got {value!r} of type "
                    f"{type(value).__name__}.{hint}")


def check_number(name, value, allow_zero=False):
  """A Python number (not a bool, tensor or string), > 0 (or >= 0), finite:
  the check of a hyperparameter that must be known when the sampler is
  built (the Keras samplers' constructor arguments)."""
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise TypeError(f"`{name}` must be a number; got {value!r}.")
  check_positive(name, value, allow_zero=allow_zero)


def parameter_property(name):
  """A read-only property returning `self._parameters[name]`: every kernel
  and sampler keeps its constructor arguments there (TFP's convention, so
  `copy` works)."""
  # pylint: disable-next=protected-access
  return property(lambda self: self._parameters[name],
                  doc=f"The `{name}` argument the kernel was built with.")


def is_schedule(step_size):
  return callable(step_size) and not tf.is_tensor(step_size)


def is_per_part(step_size):
  """A list/tuple of step sizes: one per state part, as TFP's HMC takes."""
  return isinstance(step_size, (list, tuple))


def check_step_size(step_size, per_part=True):
  """A positive constant, a schedule, or (where `per_part`) one positive
  constant per state part (each checked by `check_positive`)."""
  if step_size is None:
    raise TypeError("`step_size` is required; got None. Give a positive "
                    "float, a schedule, or a list with one per state part.")
  if is_schedule(step_size):
    return
  if not is_per_part(step_size):
    return check_positive("step_size", step_size)
  if not per_part or not step_size:
    raise ValueError(
        "`step_size` is an empty list; give one step size per state part."
        if per_part else f"`step_size` {step_size!r}: one step size per "
        "state part is not supported by this kernel; give one step size.")
  for i, h in enumerate(step_size):
    try:
      check_positive(f"step_size[{i}]", h)
    except (TypeError, ValueError) as e:
      raise type(e)(f"`step_size` (a list: one per state part): {e}"
                    ) from None


def check_step_size_matches(step_size, state):
  """A per-part step size needs one entry per part of the state: a list or
  tuple is read as one step size per part (TFP's convention), so a list of
  d values for a one-part state of d coordinates is refused here, before a
  step fails deep in tf.nest."""
  if is_per_part(step_size):
    n = len(tf.nest.flatten(state))
    if len(step_size) != n:
      raise ValueError(f"`step_size` has {len(step_size)} entries but the "
                       f"state has {n} parts; give one step size per part "
                       "(or one for all). A list or tuple is read as one "
                       "step size per state part (TFP's convention); for "
                       "one per coordinate of a part, give an array, e.g. "
                       f"np.array({list(step_size)!r:.60}, np.float32).")


def scale_step(factor, step_size):
  """factor * step_size, part by part for per-part step sizes."""
  if is_per_part(step_size):
    return [factor * h for h in step_size]
  return factor * step_size
