"""Whether `fit`'s training data is finite, asked after a divergence.

A NaN or inf in an input or a target makes the loss of every batch holding
it non-finite whatever the step size, and the chain diverges there. The
data is not checked while the chain runs (nothing per step): when the
callback's health check finds the chain diverged, it asks `non_finite_data`
whether the data is the cause, and the divergence message names the data
instead of the step size. Arrays are checked whole (one host pass); a
`tf.data.Dataset` or a `keras.utils.PyDataset` is read for one epoch of
batches from the start (the batch that diverged may come from another
shuffle); a generator cannot be read again and is not checked.
"""

import itertools

import keras
import tensorflow as tf

from tfp_sgmcmc.targets.checks import non_finite_examples

__all__ = ["non_finite_data"]


def _in_arrays(parts):
  """The phrase for arrays `parts` ({'x': ..., 'y': ...}), or ""."""
  for name, part in parts.items():
    phrase = "" if part is None else non_finite_examples(part, name)
    if phrase:
      return phrase
  return ""


def _in_batches(batches, limit, source):
  """The phrase for the first of `limit` (x, y, ...) batches with a NaN or
  inf, or ""."""
  for number, batch in enumerate(itertools.islice(batches, limit)):
    if not isinstance(batch, (tuple, list)):
      batch = (batch,)
    phrase = _in_arrays({name: part for name, part in zip(("x", "y"), batch)})
    if phrase:
      return f"batch {number} of {source}: {phrase}"
  return ""


def _in_data(x, y, steps, given_to):
  try:
    if isinstance(x, tf.data.Dataset):
      return _in_batches(x.as_numpy_iterator(), steps or None,
                         f"a new pass over the dataset {given_to}")
    if isinstance(x, keras.utils.PyDataset):
      limit = min(len(x), steps) if steps else len(x)
      return _in_batches((x[i] for i in range(limit)), limit,
                         f"the PyDataset {given_to}")
    return _in_arrays({"x": x, "y": y})
  except Exception:  # pylint: disable=broad-except
    # Data that cannot be read again here (a one-shot pipeline, strings):
    # the divergence is reported without it.
    return ""


def non_finite_data(arguments, steps=None, energy_data=None):
  """A phrase naming training data that is not finite (which part, how
  many examples, the first), or "" when it is finite or cannot be read
  again (a generator; no record of fit's arguments).

  Args:
    arguments: `fit_arguments.of(model)` (None: fit's data is not checked).
    steps: the batches of an epoch (`params["steps"]`), the most read from
      a dataset.
    energy_data: AMAGOLD's `energy_data` (arrays (x, y) or a dataset),
      whose energy its M-H test compares.
  """
  phrase = ""
  if arguments is not None:
    phrase = _in_data(arguments.get("x"), arguments.get("y"), steps,
                      "given to fit")
  if not phrase and energy_data is not None:
    if isinstance(energy_data, (tuple, list)) and len(energy_data) == 2:
      phrase = _in_data(*energy_data, None, "given as energy_data")
      if phrase and not phrase.startswith("batch"):
        phrase = "`energy_data`'s " + phrase
    else:
      phrase = _in_data(energy_data, None, None, "given as energy_data")
  return phrase
