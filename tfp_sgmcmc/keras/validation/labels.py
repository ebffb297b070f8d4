"""Whether the labels `fit` trains on are labels of the compiled
cross-entropy's likelihood.

Keras' cross-entropies compute their formula for any numbers: a binary
cross-entropy of labels 1 / 2 (as in the Statlog files) or -1 / +1 is
-y log p - (1 - y) log(1 - p) with a negative weight on one of the terms,
which is not a Bernoulli log-likelihood and has no lower bound, so the
chain runs off towards ever larger logits with no error in sight (the
mean loss turns negative). Soft labels (y between 0 and 1, rows of a
categorical cross-entropy that are not one-hot) are a cross-entropy
against a distribution, which, like `label_smoothing` (refused with the
loss), is not the likelihood of the labels. A sparse cross-entropy casts
its labels to integers, so 1.7 is read as class 1.

* At the start of `fit`, when it got arrays (or a `keras.utils.PyDataset`,
  whose first batch is read), every label is checked (but NaN and inf,
  which the divergence check names as data that is not finite).
* A `tf.data` pipeline is not read (that would advance its reshuffling):
  at every epoch end (burn-in included) the epoch's mean loss is checked
  instead, which is never negative for labels of the likelihood. This
  catches labels that drive the loss below zero, not every wrong label.
"""

import keras
import numpy as np

# The checks read the callback's likelihood (its private state) by design.
# pylint: disable=protected-access

__all__ = ["check_labels", "check_loss_sign"]

_BINARY = "binary_crossentropy"
_CATEGORICAL = "categorical_crossentropy"
_SPARSE = "sparse_categorical_crossentropy"
# How many distinct label values a message lists.
_SHOWN = 6


def _crossentropy(callback):
  likelihood = callback._likelihood
  fn = getattr(getattr(likelihood, "loss", None), "fn", None)
  name = getattr(fn, "__name__", None)
  return name if name in (_BINARY, _CATEGORICAL, _SPARSE) else None


def _labels(x, y):
  """The labels as one array: `y` whole, or the first batch of a
  PyDataset; None when they cannot be read without side effects."""
  if isinstance(x, keras.utils.PyDataset):
    try:
      batch = x[0]
    except Exception:  # pylint: disable=broad-except
      return None
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
      return None
    y = batch[1]
  if y is None:
    return None
  try:
    leaves = keras.tree.flatten(y)
  except Exception:  # pylint: disable=broad-except
    return None
  if len(leaves) != 1 or not hasattr(leaves[0], "shape"):
    return None
  try:
    labels = np.asarray(leaves[0])
  except Exception:  # pylint: disable=broad-except
    return None
  if labels.dtype.kind not in "biuf" or labels.size == 0:
    return None
  return labels


def _values(labels):
  # Formatted first, so that float32 neighbours print once.
  values = list(dict.fromkeys(f"{v:.4g}" for v in np.unique(labels)))
  return ", ".join(values[:_SHOWN]) + (
      f", ... ({len(values)} distinct)" if len(values) > _SHOWN else "")


def _first(bad):
  index = np.argwhere(bad)[0]
  return int(index[0])


def _binary_problem(labels):
  labels = labels.astype(np.float64)
  bad = ~np.isin(labels, (0., 1.)) & np.isfinite(labels)
  if not bad.any():
    return None
  count = int(np.count_nonzero(bad))
  seen = (f"labels taking the values {_values(labels)} ({count} of "
          f"{labels.size} not 0 or 1, the first at example "
          f"{_first(bad)})")
  if np.isin(labels, (1., 2.)).all():
    fix = "y - 1 (the Statlog files' 1 / 2 coding)"
  elif np.isin(labels, (-1., 1.)).all():
    fix = "(y + 1) / 2 (a -1 / +1 coding)"
  elif ((labels >= 0.) & (labels <= 1.)).all():
    fix = ("the observed 0 / 1 labels (soft labels are a cross-entropy "
           "against a distribution, not the likelihood of labels, as "
           "label_smoothing is not)")
  else:
    fix = "the 0 / 1 labels"
  return seen, ("the Bernoulli likelihood needs labels 0 or 1 (a label "
                "outside [0, 1] makes the loss unbounded below)"), fix


def _categorical_problem(labels):
  labels = labels.astype(np.float64)
  rows = (labels.reshape(-1, labels.shape[-1]) if labels.ndim >= 2 else
          labels.reshape(-1, 1))
  bad = ((~np.isin(rows, (0., 1.))).any(-1) | (rows.sum(-1) != 1.)) & (
      np.isfinite(rows).all(-1))
  if not bad.any():
    return None
  count = int(np.count_nonzero(bad))
  sums = rows.sum(-1)
  seen = (f"{count} of {len(rows)} label rows not one-hot (values "
          f"{_values(labels)}, row sums {_values(sums)}; the first at row "
          f"{_first(bad)})")
  if (sums > 1.).any() and np.isin(rows, (0., 1.)).all():
    fix = ("one-hot rows; for several labels per example (multi-hot), a "
           "sigmoid per class: NegativeLogLikelihood(lambda y, p: "
           "keras.losses.binary_crossentropy(y, p, from_logits=True), "
           "event_ndims=1, predictive='sigmoid')")
  else:
    fix = ("one-hot rows of the observed classes (soft labels are a "
           "cross-entropy against a distribution, not the likelihood of "
           "labels, as label_smoothing is not)")
  return seen, "the categorical likelihood needs one-hot labels", fix


def _sparse_problem(labels, classes):
  labels = labels.astype(np.float64)
  bad = (labels != np.round(labels)) | (labels < 0)
  if classes is not None:
    bad |= labels >= classes
  bad &= np.isfinite(labels)
  if not bad.any():
    return None
  count = int(np.count_nonzero(bad))
  within = f" in [0, {classes})" if classes is not None else " >= 0"
  seen = (f"labels taking the values {_values(labels)} ({count} of "
          f"{labels.size} not an integer{within}, the first at index "
          f"{_first(bad.reshape(-1))})")
  if classes is not None and np.isin(labels, np.arange(1, classes + 1)).all():
    fix = f"y - 1 (labels numbered 1 to {classes})"
  else:
    fix = "the class indices 0, 1, ..."
  return (seen, "the sparse categorical likelihood needs class indices "
          "(it casts its labels to integers)", fix)


def _classes(model):
  try:
    shape = model.outputs[0].shape
  except (AttributeError, IndexError, TypeError, ValueError):
    return None
  return None if shape is None or shape[-1] is None else int(shape[-1])


def check_labels(callback, x, y):
  """At fit start: refuses labels outside the compiled cross-entropy's
  likelihood (see the module), read from `fit`'s `x` / `y`."""
  name = _crossentropy(callback)
  if name is None:
    return
  labels = _labels(x, y)
  if labels is None:
    return
  if name == _BINARY:
    problem = _binary_problem(labels)
  elif name == _CATEGORICAL:
    problem = _categorical_problem(labels)
  else:
    problem = _sparse_problem(labels, _classes(callback.model))
  if problem is None:
    return
  seen, need, fix = problem
  raise ValueError(
      f"the loss {name} got {seen}: {need}. Keras computes its formula "
      "for any numbers, but then it is not a negative log-likelihood, so "
      f"the chain samples no posterior of the model. Give fit {fix}.")


def check_loss_sign(callback, epoch, logs):
  """At an epoch end: a cross-entropy whose mean is negative had labels
  outside its likelihood (from a pipeline not read at fit start)."""
  name = _crossentropy(callback)
  loss = None if logs is None else logs.get("loss")
  if name is None or loss is None:
    return
  loss = float(loss)
  if not loss < 0.:
    return
  raise ValueError(
      f"the loss {name} averaged {loss:.4g} over epoch {epoch}: a "
      "cross-entropy of labels of its likelihood (0 / 1 for a binary one, "
      "one-hot rows, class indices) is never negative, so some labels are "
      "not (e.g. a 1 / 2 or -1 / +1 coding of a binary label). Keras "
      "computes its formula for any numbers, but then it is not a negative "
      "log-likelihood and the chain samples no posterior of the model. "
      "Map the labels to 0 / 1, one-hot rows or class indices (e.g. "
      "dataset.map(lambda x, y: (x, y - 1))).")
