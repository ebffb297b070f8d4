"""How two of `SamplingCallback`'s log values read: `kept_samples` as a
count, and `step_size` during a step-size adaptation as the value the
adaptation would freeze at."""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.chains import diagnostics

__all__ = ["Count", "adapted_step_size"]


class Count(float):
  """A number of things, in Keras' logs: a float (what `History`,
  `CSVLogger` and TensorBoard store, and what Keras' progress bar divides
  and formats), shown as an integer, `kept_samples: 12` rather than
  `kept_samples: 12.0000` or, for none, `kept_samples: 0.0000e+00`.

  The progress bar shows a logged value `v` as `v / 1` formatted with
  `.4f` (or `.4e` below 1e-3); the division keeps a `Count` and the format
  shows its integer.
  """

  __slots__ = ()

  def __truediv__(self, other):
    value = float(self) / other
    return Count(value) if value == int(value) else value

  def __format__(self, spec):
    return str(int(self)) if self == int(self) else format(float(self), spec)

  def __repr__(self):
    return str(int(self)) if self == int(self) else float.__repr__(self)

  __str__ = __repr__


def adapted_step_size(sampler):
  """The step size a dual-averaging adaptation would freeze at now, or None.

  While TFP's `DualAveragingStepSizeAdaptation` (the warm-up's, or a
  `step_size_adaptation`) adapts, each M-H test runs at its current iterate,
  which jumps around the target (searching up to 10x above it), and at the
  end the step size is frozen at the iterates' running average,
  exp(`log_averaging_step`). Logged per epoch, the iterate is a noisy point
  of that search, not the value the chain will sample with; the average is.
  None when the sampler is not adapting or its adaptation keeps no average
  (TFP's `SimpleStepSizeAdaptation`: its iterate is what freezes), and
  right after a warm-up window restarted the averaging (its count is 0:
  the step size then is the average it restarted from).
  """
  if not getattr(sampler, "adapting", False):
    return None
  warmup = getattr(sampler, "_warmup", None)  # `SamplingCallback(warmup=n)`
  if warmup is not None:
    averaging = warmup.state().dual_averaging
    if int(np.ravel(averaging.count)[0]) < 1:
      return None
    return float(np.exp(np.ravel(averaging.log_averaging_step)[0]))
  variables = getattr(sampler, "_adaptation_results", None)
  structure = getattr(sampler, "_adaptation_structure", None)
  if not variables or structure is None:
    return None
  results = tf.nest.pack_sequence_as(structure,
                                     [np.asarray(v) for v in variables])
  log_average = diagnostics.find_field(results, "log_averaging_step")
  step = diagnostics.find_field(results, "step")
  if log_average is None or step is None or int(np.ravel(step)[0]) < 1:
    return None
  return float(np.exp(np.ravel(log_average)[0]))
