"""Scores of predicted class probabilities (numpy, no model needed).

Probabilities are either [n, k] (one row per input, k >= 2 classes, rows
summing to 1: a softmax or the Bayesian average of softmaxes) or, for a
binary classifier with one sigmoid output, [n] or [n, 1] holding p(y = 1).
Labels are integer classes [n] (or one-hot [n, k]).

* `predictive_entropy`: H[p] = -sum_c p_c log p_c per input, in nats;
* `negative_log_likelihood`: the mean of -log p(y_i | x_i);
* `expected_calibration_error`: sum over equal-width bins b of the top-class
  confidence of (n_b / n) |accuracy_b - mean confidence_b| (Guo et al.
  2017); the bins are (0, 1/B], (1/B, 2/B], ..., ((B-1)/B, 1];
* `accuracy`.

Values that are not probabilities (logits, say) raise a ValueError: pass the
averaged probabilities (`Posterior.predict` of a model compiled with
`from_logits=True` applies the softmax itself).
"""

import numpy as np

from tfp_sgmcmc import arguments

__all__ = ["predictive_entropy", "negative_log_likelihood",
           "expected_calibration_error", "accuracy"]

_TOLERANCE = 1e-4


def _as_probabilities(probs):
  """[n, k] class probabilities (a binary [n] or [n, 1] becomes [n, 2])."""
  p = np.asarray(probs, np.float64)
  if p.ndim == 2 and p.shape[1] == 1:
    p = p[:, 0]
  if p.ndim == 1:
    p = np.stack([1. - p, p], axis=1)
  if p.ndim != 2:
    raise ValueError(f"`probs` must be [n, k] class probabilities or [n] "
                     f"binary probabilities; got shape {np.shape(probs)}.")
  if not np.all(np.isfinite(p)):
    raise ValueError("`probs` holds non-finite values.")
  low, high = float(p.min(initial=0.)), float(p.max(initial=0.))
  sums = p.sum(axis=1)
  if low < -_TOLERANCE or high > 1. + _TOLERANCE or (
      len(sums) and np.max(np.abs(sums - 1.)) > _TOLERANCE * p.shape[1]):
    raise ValueError(
        f"`probs` are not probabilities (values from {low:.4g} to "
        f"{high:.4g}, row sums up to {np.max(np.abs(sums - 1.)):.3g} away "
        "from 1): pass probabilities, not logits (Posterior.predict of a "
        "model compiled with from_logits=True returns probabilities).")
  return np.clip(p, 0., 1.)


def _as_labels(labels, num_classes, n):
  y = np.asarray(labels)
  if y.ndim == 2 and y.shape[1] == num_classes and num_classes > 1 and (
      y.shape[0] == n) and not (num_classes == 2 and y.shape[1] == 1):
    y = np.argmax(y, axis=1)  # one-hot
  y = y.reshape(-1)
  if y.shape[0] != n:
    raise ValueError(f"{y.shape[0]} labels for {n} predictions.")
  if not np.all(np.equal(np.mod(y, 1), 0)) or (
      len(y) and (y.min() < 0 or y.max() >= num_classes)):
    raise ValueError(f"labels must be integer classes in [0, {num_classes})"
                     f"; got values from {y.min()} to {y.max()}.")
  return y.astype(np.int64)


def predictive_entropy(probs):
  """The predictive entropy -sum_c p_c log p_c of each input, in nats.

  Args:
    probs: class probabilities [n, k] (rows summing to 1), or a binary
      classifier's p(y = 1), [n] or [n, 1]; not logits (a ValueError).

  Returns:
    A numpy array [n] (0 log 0 counts as 0).

  #### Example

  ```python
  probs = np.array([[0.5, 0.5], [1., 0.]])
  print(sgk.predictive_entropy(probs))      # [log 2, 0] = [0.693, 0.]
  print(sgk.predictive_entropy([0.5, 1.]))  # binary p(y = 1): the same
  ```
  """
  p = _as_probabilities(probs)
  with np.errstate(divide="ignore", invalid="ignore"):
    terms = np.where(p > 0., -p * np.log(p), 0.)
  return terms.sum(axis=1)


def negative_log_likelihood(probs, labels, eps=1e-12):
  """The mean over inputs of -log p(y_i), p the probability of the label.

  Args:
    probs: class probabilities [n, k] (rows summing to 1), or a binary
      classifier's p(y = 1), [n] or [n, 1]; not logits (a ValueError).
    labels: integer classes [n] in [0, k), or one-hot [n, k].
    eps: probabilities are clipped below at `eps`, so that a label given
      probability 0 costs -log(eps) rather than infinity.

  Returns:
    A float.

  #### Example

  ```python
  probs = np.array([[0.9, 0.1], [0.2, 0.8]])
  print(sgk.negative_log_likelihood(probs, [0, 1]))  # -(log .9 + log .8) / 2
  ```
  """
  p = _as_probabilities(probs)
  y = _as_labels(labels, p.shape[1], p.shape[0])
  picked = p[np.arange(len(y)), y]
  return float(-np.mean(np.log(np.maximum(picked, eps))))


def accuracy(probs, labels):
  """The fraction of inputs whose most probable class is the label.

  Args:
    probs: class probabilities [n, k] (rows summing to 1), or a binary
      classifier's p(y = 1), [n] or [n, 1]; not logits (a ValueError).
    labels: integer classes [n] in [0, k), or one-hot [n, k].

  Returns:
    A float in [0, 1].

  #### Example

  ```python
  print(sgk.accuracy([[0.9, 0.1], [0.6, 0.4]], [0, 1]))  # 0.5
  print(sgk.accuracy([0.2, 0.7], [0, 1]))  # binary p(y = 1): 1.0
  ```
  """
  p = _as_probabilities(probs)
  y = _as_labels(labels, p.shape[1], p.shape[0])
  return float(np.mean(np.argmax(p, axis=1) == y))


def expected_calibration_error(probs, labels, num_bins=15):
  """The expected calibration error (Guo et al. 2017),

      ECE = sum_b (n_b / n) |accuracy_b - confidence_b|,

  over B = `num_bins` equal-width bins of the top-class confidence (bin b
  holds the n_b inputs with confidences in (b/B, (b+1)/B]; a confidence of
  0 falls in the first), accuracy_b and confidence_b their means.

  Args:
    probs: class probabilities [n, k] (rows summing to 1), or a binary
      classifier's p(y = 1), [n] or [n, 1]; not logits (a ValueError).
    labels: integer classes [n] in [0, k), or one-hot [n, k].
    num_bins: B, an integer >= 1.

  Returns:
    A float in [0, 1].

  #### Example

  ```python
  probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]])
  # Confidences 0.9 (right), 0.8 (wrong), 0.7 (right), each alone in its bin:
  print(sgk.expected_calibration_error(probs, [0, 1, 1], num_bins=10))
  # (0.1 + 0.8 + 0.3) / 3 = 0.4
  ```
  """
  arguments.check_integer("num_bins", num_bins)
  p = _as_probabilities(probs)
  y = _as_labels(labels, p.shape[1], p.shape[0])
  confidence = p.max(axis=1)
  correct = (np.argmax(p, axis=1) == y).astype(np.float64)
  bins = np.clip(np.ceil(confidence * num_bins).astype(np.int64) - 1, 0,
                 num_bins - 1)
  ece = 0.
  for b in np.unique(bins):
    members = bins == b
    ece += members.mean() * abs(correct[members].mean() -
                                confidence[members].mean())
  return float(ece)
