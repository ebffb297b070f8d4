"""The checks of a run's arguments that `sample_moments` and
`sample_chain_with_progress` share: counts of steps and reports, and a
finite start (checked once before a compiled run, which cannot report)."""

import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc.chains import diagnostics
from tfp_sgmcmc.targets.checks import check_finite_state

__all__ = ["count", "check_start", "non_finite_data_of"]


def count(name, value, minimum=0):
  """A Python integer >= minimum (number of steps, reports, ...)."""
  return arguments.check_integer(name, value, minimum)


def check_start(state, previous_kernel_results):
  """What a compiled run cannot report (XLA drops assertions), checked once
  here, before it starts: a finite initial state and finite results."""
  if not tf.executing_eagerly():
    return
  check_finite_state(state)
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
