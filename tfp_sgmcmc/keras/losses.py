"""Which Keras losses are a negative log-likelihood, and what they predict.

The samplers need the minibatch energy

    U~(theta) = N * mean_{i in batch} (-log p(y_i | x_i, theta)) - log p(theta),

so the compiled loss must be a per-example negative log-likelihood reduced by
its mean over the batch (Keras 3's default reduction, "sum_over_batch_size").
Supported, and nothing else:

* `keras.losses.SparseCategoricalCrossentropy`, `CategoricalCrossentropy`
  and `BinaryCrossentropy` (or their string names), with or without
  `from_logits`, no label smoothing, no `ignore_class`, class axis -1. A
  binary cross-entropy must have one output unit (Keras averages it over the
  last axis, which for k labels would divide the log-likelihood by k);
* `GaussianNegativeLogLikelihood(scale)`: regression with known noise scale
  (mean squared error is *not* accepted: it is a Gaussian log-likelihood only
  for sigma = 1/sqrt(2), which is rarely what is meant);
* any `NegativeLogLikelihood(fn)`, where the user vouches that `fn(y_true,
  y_pred)` is -log p(y | x, theta) per example.

Sample or class weights are not detected: they turn the loss into a weighted
(tempered) likelihood. Do not pass them to `fit` while sampling.
"""

import math

import keras
import tensorflow as tf

__all__ = ["NegativeLogLikelihood", "GaussianNegativeLogLikelihood",
           "Likelihood", "resolve_likelihood", "PREDICTIVE_TRANSFORMS"]

MEAN_REDUCTIONS = ("sum_over_batch_size", "mean")

# How a model output becomes the predictive quantity that is averaged over
# posterior samples (probabilities for classifiers, the mean for regression).
PREDICTIVE_TRANSFORMS = {
    "softmax": lambda y: tf.nn.softmax(y, axis=-1),
    "sigmoid": tf.math.sigmoid,
    "identity": lambda y: y,
}

_SUPPORTED = (
    "keras.losses.SparseCategoricalCrossentropy, CategoricalCrossentropy, "
    "BinaryCrossentropy (or the strings 'sparse_categorical_crossentropy', "
    "'categorical_crossentropy', 'binary_crossentropy'), "
    "tfp_sgmcmc.keras.GaussianNegativeLogLikelihood(scale) or "
    "tfp_sgmcmc.keras.NegativeLogLikelihood(fn)")


class NegativeLogLikelihood(keras.losses.Loss):
  """A per-example negative log-likelihood, mean-reduced over the batch.

  Wrap a function `fn(y_true, y_pred)` returning -log p(y_i | x_i, theta),
  one value per example (shape [batch]), to tell the samplers it is one.

  Args:
    fn: the per-example negative log-likelihood.
    predictive: how a model output becomes the quantity the Bayesian model
      average averages: "identity" (default), "softmax", "sigmoid", or a
      callable.
    name: the loss name.
  """

  def __init__(self, fn=None, predictive="identity", name=None):
    super().__init__(name=name or "negative_log_likelihood",
                     reduction="sum_over_batch_size")
    if fn is not None and not callable(fn):
      raise TypeError(f"`fn` must be a callable (y_true, y_pred) -> "
                      f"per-example -log p; got {fn!r}.")
    if not callable(predictive) and predictive not in PREDICTIVE_TRANSFORMS:
      raise ValueError(f"`predictive` must be one of "
                       f"{sorted(PREDICTIVE_TRANSFORMS)} or a callable; got "
                       f"{predictive!r}.")
    self._fn = fn
    self.predictive = predictive

  def call(self, y_true, y_pred):
    if self._fn is None:
      raise NotImplementedError("NegativeLogLikelihood needs `fn`, or a "
                                "subclass overriding `call`.")
    return self._fn(y_true, y_pred)


class GaussianNegativeLogLikelihood(NegativeLogLikelihood):
  """-log N(y | y_pred, scale^2), summed over the output units of an example.

      -log p(y | x, theta) = sum_k (y_k - f_k(x))^2 / (2 scale^2)
                             + log(scale) + log(2 pi) / 2.

  Args:
    scale: the observation noise standard deviation sigma, > 0.
    name: the loss name.
  """

  def __init__(self, scale=1., name=None):
    if not 0. < float(scale) < math.inf:
      raise ValueError(f"`scale` must be > 0; got {scale!r}.")
    super().__init__(predictive="identity",
                     name=name or "gaussian_negative_log_likelihood")
    self.scale = float(scale)

  def call(self, y_true, y_pred):
    y_pred = tf.convert_to_tensor(y_pred)
    y_true = tf.cast(y_true, y_pred.dtype)
    if y_pred.shape.rank is not None and y_pred.shape.rank >= 2 and (
        y_true.shape.rank == y_pred.shape.rank - 1):
      y_true = y_true[..., None]
    z = (y_true - y_pred) / self.scale
    per_unit = 0.5 * tf.square(z) + (
        math.log(self.scale) + 0.5 * math.log(2. * math.pi))
    if per_unit.shape.rank is not None and per_unit.shape.rank >= 2:
      return tf.reduce_sum(per_unit, axis=-1)
    return per_unit

  def get_config(self):
    return {"name": self.name, "scale": self.scale}


class Likelihood:
  """A validated loss: the batch negative log-likelihood and the predictive.

  `batch_nll(y_true, y_pred)` is n times the mean per-example loss of the
  batch (n its number of examples): the batch's -sum log p, consistent with
  the minibatch energy N * mean(loss) that the samplers differentiate.
  """

  def __init__(self, loss, predictive):
    self.loss = loss
    self.predictive_name = (predictive if isinstance(predictive, str)
                            else "custom")
    self.predictive = (PREDICTIVE_TRANSFORMS[predictive]
                       if isinstance(predictive, str) else predictive)

  def batch_nll(self, y_true, y_pred):
    y_pred = tf.convert_to_tensor(y_pred)
    if y_pred.dtype in (tf.float16, tf.bfloat16):
      # Mixed precision computes the outputs in 16 bits; the loss (as Keras'
      # Loss.__call__ does) and the energy sums are taken in float32 or
      # more: U grows with N and AMAGOLD's test needs differences of order 1.
      y_pred = tf.cast(y_pred, tf.float32)
    values = tf.convert_to_tensor(self.loss.call(y_true, y_pred))
    n = tf.cast(tf.shape(y_pred)[0], values.dtype)
    return n * tf.reduce_mean(values)


def _function_kwargs(loss):
  """(fn, kwargs) of a Keras LossFunctionWrapper, else (None, None)."""
  fn = getattr(loss, "fn", None)
  kwargs = getattr(loss, "_fn_kwargs", None)
  if fn is None or kwargs is None:
    return None, None
  return fn, dict(kwargs)


def resolve_likelihood(loss, model=None):
  """The `Likelihood` of a compiled loss, or a ValueError saying why not.

  Args:
    loss: what was passed to `model.compile(loss=...)`.
    model: the model, to check the number of output units of a binary
      cross-entropy.
  """
  if loss is None:
    raise ValueError("the model has no loss: compile it with a "
                     f"negative log-likelihood ({_SUPPORTED}).")
  if isinstance(loss, (list, tuple, dict)):
    raise ValueError(
        f"`loss` is a {type(loss).__name__} of losses ({loss!r}); the "
        "samplers support one negative log-likelihood for one output.")
  original = loss
  if isinstance(loss, str):
    if loss.lower() in ("crossentropy", "ce"):
      raise ValueError(f"`loss={loss!r}` leaves Keras to guess the "
                       "likelihood; name it: 'sparse_categorical_"
                       "crossentropy', 'categorical_crossentropy' or "
                       "'binary_crossentropy'.")
    try:
      loss = keras.losses.get(loss)
    except ValueError as e:
      raise ValueError(f"unknown loss {original!r}: {e}") from e
  if not isinstance(loss, keras.losses.Loss):
    known = {keras.losses.sparse_categorical_crossentropy:
             keras.losses.SparseCategoricalCrossentropy,
             keras.losses.categorical_crossentropy:
             keras.losses.CategoricalCrossentropy,
             keras.losses.binary_crossentropy:
             keras.losses.BinaryCrossentropy}
    if loss in known:
      loss = known[loss]()
    else:
      raise ValueError(_unsupported(original))

  reduction = getattr(loss, "reduction", None)
  if reduction not in MEAN_REDUCTIONS:
    raise ValueError(
        f"the loss {_name(original)} has reduction={reduction!r}; the "
        "samplers need the mean over the batch ('sum_over_batch_size', "
        "Keras' default), since they scale it by N = num_examples.")

  if isinstance(loss, NegativeLogLikelihood):
    return Likelihood(loss, loss.predictive)

  fn, kwargs = _function_kwargs(loss)
  # Exact types: a subclass may override `call` and mean something else.
  wrappers = (keras.losses.SparseCategoricalCrossentropy,
              keras.losses.CategoricalCrossentropy,
              keras.losses.BinaryCrossentropy)
  if (type(loss) not in wrappers and
      type(loss).__name__ != "LossFunctionWrapper") or fn not in (
      keras.losses.sparse_categorical_crossentropy,
      keras.losses.categorical_crossentropy,
      keras.losses.binary_crossentropy):
    raise ValueError(_unsupported(original))
  if kwargs.get("label_smoothing", 0.):
    raise ValueError(
        f"the loss {_name(original)} has label_smoothing="
        f"{kwargs['label_smoothing']!r}: a smoothed cross-entropy is not the "
        "log-likelihood of the labels. Use label_smoothing=0.")
  if kwargs.get("ignore_class") is not None:
    raise ValueError(
        f"the loss {_name(original)} has ignore_class="
        f"{kwargs['ignore_class']!r}, which changes the number of terms the "
        "mean runs over; use ignore_class=None.")
  if kwargs.get("axis", -1) != -1:
    raise ValueError(f"the loss {_name(original)} has axis="
                     f"{kwargs['axis']!r}; the class axis must be -1.")
  from_logits = bool(kwargs.get("from_logits", False))
  if fn is keras.losses.binary_crossentropy:
    units = _output_units(model)
    if units is not None and units != 1:
      raise ValueError(
          f"binary cross-entropy on {units} output units: Keras averages it "
          "over the units, which divides the log-likelihood by "
          f"{units}. Use one output unit, or NegativeLogLikelihood with the "
          "sum over units.")
    return Likelihood(loss, "sigmoid" if from_logits else "identity")
  return Likelihood(loss, "softmax" if from_logits else "identity")


def _output_units(model):
  if model is None:
    return None
  try:
    shape = model.outputs[0].shape
  except (AttributeError, IndexError, TypeError, ValueError):
    return None
  return None if shape is None or shape[-1] is None else int(shape[-1])


def _name(loss):
  if isinstance(loss, str):
    return repr(loss)
  return getattr(loss, "name", None) or type(loss).__name__


def _unsupported(loss):
  return (f"the loss {_name(loss)} is not a supported negative "
          f"log-likelihood. Supported: {_SUPPORTED}. For mean squared error, "
          "use GaussianNegativeLogLikelihood(scale=sigma) with the noise "
          "scale sigma of your model.")
