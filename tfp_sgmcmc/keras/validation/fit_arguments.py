"""The arguments of the running `model.fit`, for the checks that need them.

Keras hands a callback the model and `params` (epochs, steps), not what
`fit` was called with; the checks of `SamplingCallback` need more (its
other callbacks, `class_weight`, `sample_weight`, `x`, `steps_per_epoch`,
`validation_split`, `initial_epoch`). `install()` wraps `keras.Model.fit`
(once, when `tfp_sgmcmc.keras` is imported) so that each call records its
bound arguments for the model while it runs; `of(model)` reads them.
Nothing else about `fit` changes. A training loop that calls the callbacks
itself has no record, and the checks that need one are skipped.
"""

import collections
import functools
import inspect
import math

import keras

__all__ = ["FitArguments", "install", "of"]

# id(model) -> the arguments of its running `fit` (a stack, for a `fit`
# called inside another).
_RUNNING = collections.defaultdict(list)
_INSTALLED = "_tfp_sgmcmc_records_arguments"


class FitArguments:
  """The bound arguments of one `fit` call, with Keras' defaults filled in.

  `x` is the training input as `fit` got it; `examples()` counts the
  examples `fit` trains on after `validation_split` held out its part.
  """

  def __init__(self, arguments):
    self._arguments = arguments

  def get(self, name, default=None):
    return self._arguments.get(name, default)

  def callbacks(self):
    """The callbacks passed to `fit` (a list; a `CallbackList`'s own)."""
    cbs = self._arguments.get("callbacks")
    return list(getattr(cbs, "callbacks", cbs) or [])

  def examples(self, count):
    """`count(x)` examples in `x` (None when not arrays), less what
    `validation_split` holds out (Keras keeps the first
    floor(n (1 - split)) examples for training)."""
    n = count(self._arguments.get("x"))
    split = self._arguments.get("validation_split") or 0.
    if n is None or not split or self._arguments.get(
        "validation_data") is not None:
      return n
    return int(math.floor(n * (1.0 - split)))


def install():
  """Makes `keras.Model.fit` record its arguments (idempotent)."""
  fit = keras.Model.fit
  if getattr(fit, _INSTALLED, False):
    return
  signature = inspect.signature(fit)

  @functools.wraps(fit)
  def recording_fit(self, *args, **kwargs):
    try:
      bound = signature.bind(self, *args, **kwargs)
    except TypeError:
      return fit(self, *args, **kwargs)  # Keras reports the bad call.
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    arguments.pop("self", None)
    stack = _RUNNING[id(self)]
    stack.append(FitArguments(arguments))
    try:
      return fit(self, *args, **kwargs)
    finally:
      stack.pop()
      if not stack:
        del _RUNNING[id(self)]

  setattr(recording_fit, _INSTALLED, True)
  keras.Model.fit = recording_fit


def of(model):
  """The arguments of `model`'s running `fit`, or None."""
  stack = _RUNNING.get(id(model))
  return stack[-1] if stack else None
