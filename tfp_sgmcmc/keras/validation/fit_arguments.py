"""The arguments of the running `model.fit`, for the checks that need them.

Keras hands a callback the model and `params` (epochs, steps), not what
`fit` was called with; the checks of `SamplingCallback` need more (its
other callbacks, `class_weight`, `sample_weight`, `x`, `steps_per_epoch`,
`validation_split`, `initial_epoch`). `of(model)`, called from a callback
hook that `fit` runs, reads them from the frame of that `fit` call: its
local variables, as `fit` holds them when it calls the callbacks (after
`validation_split` has split `x`, `y` and `sample_weight` into their
training parts and `validation_data`; `callbacks` as the `CallbackList`
`fit` built). Nothing of Keras is changed or wrapped for this. A training
loop that calls the callbacks itself has no such frame, and the checks that
need one are skipped.
"""

import math
import sys

__all__ = ["FitArguments", "of"]

# The arguments of Keras' `Model.fit` the checks read: a frame whose code
# has them all (and whose `self` is the model) is `fit`'s.
_FIT_ARGUMENTS = frozenset(("x", "y", "callbacks", "class_weight",
                            "sample_weight", "validation_split",
                            "validation_data", "steps_per_epoch",
                            "initial_epoch"))


class FitArguments:
  """The arguments of one running `fit` call, as `fit` holds them when it
  calls the callbacks.

  `x` is the training input; `examples()` counts the examples `fit` trains
  on after `validation_split` held out its part.
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


def of(model):
  """The arguments of `model`'s running `fit` (the innermost one), or None
  when no `fit` of `model` is running on this thread's stack."""
  frame = sys._getframe(1)  # pylint: disable=protected-access
  try:
    while frame is not None:
      if (frame.f_code.co_name == "fit" and
          frame.f_locals.get("self") is model and
          _FIT_ARGUMENTS <= set(frame.f_code.co_varnames)):
        values = frame.f_locals
        return FitArguments({name: values.get(name) for name in
                             frame.f_code.co_varnames[
                                 :frame.f_code.co_argcount +
                                 frame.f_code.co_kwonlyargcount]
                             if name != "self"})
      frame = frame.f_back
    return None
  finally:
    del frame  # A frame reference would keep the stack's locals alive.
