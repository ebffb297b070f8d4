"""The checks of a run's arguments that `sample_moments` and
`sample_chain_with_progress` share: counts of steps and reports, and a
finite start (checked once before a compiled run, which cannot report)."""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.chains import diagnostics

__all__ = ["count", "check_start", "non_finite_data_of"]


def count(name, value, minimum=0):
  """A Python integer >= minimum (number of steps, reports, ...)."""
  if (isinstance(value, (bool, np.bool_)) or not isinstance(
      value, (int, np.integer)) and not (
          tf.is_tensor(value) and value.dtype.is_integer and
          tf.get_static_value(value) is not None)):
    raise TypeError(f"`{name}` must be an integer >= {minimum}; got "
                    f"{value!r}.")
  v = int(tf.get_static_value(value)) if tf.is_tensor(value) else int(value)
  if v < minimum:
    raise ValueError(f"`{name}` must be an integer >= {minimum}; got "
                     f"{value!r}.")
  return v


def check_start(state, previous_kernel_results):
  """What a compiled run cannot report (XLA drops assertions), checked once
  here, before it starts: a finite initial state and finite results."""
  if not tf.executing_eagerly():
    return
  for i, part in enumerate(tf.nest.flatten(state)):
    if part.dtype.is_floating and not bool(
        tf.reduce_all(tf.math.is_finite(part))):
      raise ValueError(f"`current_state` part {i} has non-finite values; "
                       "start the chain from a finite state.")
  if previous_kernel_results is not None:
    diverged = diagnostics.find_field(previous_kernel_results, "diverged")
    if diverged is not None and bool(tf.reduce_all(diverged)):
      raise ValueError("`previous_kernel_results` has every chain flagged "
                       "`diverged`: the run it continues has failed; start "
                       "again from a finite state.")


def non_finite_data_of(kernel):
  """What `kernel`'s target says of its data after chains diverged
  (`MinibatchTarget.non_finite_data`): a phrase naming data that holds NaN
  or inf, or "". The target is found through TFP's wrappers
  (`inner_kernel`) and ours (`target`)."""
  for _ in range(16):  # Nested wrappers; a cycle cannot hang the check.
    target = getattr(kernel, "target", None)
    if hasattr(target, "non_finite_data"):
      return target.non_finite_data()
    kernel = getattr(kernel, "inner_kernel", None)
    if kernel is None:
      return ""
  return ""
