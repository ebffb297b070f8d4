"""Whether outputs read as probabilities by a cross-entropy are
probabilities. Used by the checks at the start of `fit` (`fit_checks`), by
the fit's outcome (which records the loss to check) and by
`Posterior.predict` (which checks its averages); it imports neither, so
all of them can import it."""

import numpy as np

__all__ = ["crossentropy", "probabilities_loss", "check_probabilities"]

_CROSSENTROPIES = ("sparse_categorical_crossentropy",
                   "categorical_crossentropy", "binary_crossentropy")


def crossentropy(likelihood):
  """(name, from_logits) of a Keras cross-entropy loss, else None."""
  loss = likelihood.loss
  fn = getattr(loss, "fn", None)
  kwargs = getattr(loss, "_fn_kwargs", None)
  name = getattr(fn, "__name__", None)
  if name not in _CROSSENTROPIES or kwargs is None:
    return None
  return name, bool(kwargs.get("from_logits", False))


def probabilities_loss(likelihood):
  """The name of the loss if it is a cross-entropy on probabilities
  (from_logits=False), whose averaged predictions `Posterior.predict` then
  checks; else None."""
  ce = None if likelihood is None else crossentropy(likelihood)
  return ce[0] if ce is not None and not ce[1] else None


def check_probabilities(outputs, loss_name, where):
  """Raises if `outputs` of a cross-entropy with from_logits=False are not
  probabilities (in [0, 1]; rows summing to 1 for a categorical one)."""
  outputs = np.asarray(outputs, dtype=np.float64)
  lo, hi = float(np.min(outputs)), float(np.max(outputs))
  problem = None
  if lo < -1e-6 or hi > 1. + 1e-6:
    problem = f"range from {lo:.4g} to {hi:.4g}"
  elif loss_name != "binary_crossentropy" and outputs.ndim >= 2 and (
      outputs.shape[-1] > 1):
    sums = outputs.sum(axis=-1)
    worst = float(np.max(np.abs(sums - 1.)))
    if worst > 1e-3:
      problem = (f"rows sum to between {float(np.min(sums)):.4g} and "
                 f"{float(np.max(sums)):.4g}, not 1")
  if problem:
    raise ValueError(
        f"the loss {loss_name} has from_logits=False, so the model's "
        f"outputs must be probabilities, but {where} {problem}: they look "
        "like logits. Use from_logits=True in the loss, or end the model "
        "with a softmax (sigmoid for one unit).")
