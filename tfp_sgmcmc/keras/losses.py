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
* `GaussianNegativeLogLikelihood(scale)`: regression with known noise scale,
  summed over everything one example outputs (units, time steps) (mean
  squared error is *not* accepted: it is a Gaussian log-likelihood only
  for sigma = 1/sqrt(2), which is rarely what is meant);
* any `NegativeLogLikelihood(fn)`, where the user vouches that `fn(y_true,
  y_pred)` is -log p(y | x, theta) per example, or per time step / output
  unit with `event_ndims=` saying how many trailing axes one example spans.

Whatever the loss, `SamplingCallback` evaluates it unreduced on a first
batch at the start of `fit` and refuses it unless it gives exactly one value
per example (`validation.first_batch`): Keras' mean runs over every value,
so k values per example would divide the log-likelihood by k.

Sample or class weights turn the loss into a weighted (tempered)
likelihood: `SamplingCallback` refuses them in `fit`'s arguments and in a
`tf.data.Dataset` or `PyDataset` (not in a Python generator).
"""

import math
import numbers

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
  When one example has several terms (time steps of a sequence, independent
  output units), `fn` may return them all, shape [batch, *event], and
  `event_ndims = len(event)` says so: the loss sums them, so that the mean
  over the batch runs over examples and N stays the number of examples:

      # outputs [n, T, k] logits, labels [n, T]: one sequence per example
      NegativeLogLikelihood(
          lambda y, p: keras.losses.sparse_categorical_crossentropy(
              y, p, from_logits=True),
          event_ndims=1, predictive="softmax")

  Args:
    fn: the negative log-likelihood, per example (or per term of one, see
      `event_ndims`).
    predictive: how a model output becomes the quantity the Bayesian model
      average averages: "identity" (default), "softmax", "sigmoid", or a
      callable.
    event_ndims: how many trailing axes of `fn`'s values belong to one
      example (summed); 0 (default): `fn` returns one value per example.
    name: the loss name.

  #### Example

  A logistic regression's likelihood written out:

  ```python
  def bernoulli_nll(y, logits):  # -log p(y | x, theta), one value per example
    return -tfd.Bernoulli(logits=logits[:, 0]).log_prob(tf.reshape(y, [-1]))
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd", loss=sgk.NegativeLogLikelihood(
      bernoulli_nll, predictive="sigmoid"))
  sampling = sgk.SamplingCallback(sgk.SGLD(step_size=1e-4), num_examples=len(x),
                                  prior=1.)
  model.fit(x, y, batch_size=32, epochs=1, callbacks=[sampling], verbose=0)
  print(sampling.predict(x[:3]))  # [3, 1]: the averaged p(y = 1 | x)
  ```
  """

  def __init__(self, fn=None, predictive="identity", event_ndims=0,
               name=None):
    super().__init__(name=name or "negative_log_likelihood",
                     reduction="sum_over_batch_size")
    if fn is not None and not callable(fn):
      raise TypeError(f"`fn` must be a callable (y_true, y_pred) -> "
                      f"per-example -log p; got {fn!r}.")
    if not callable(predictive) and predictive not in PREDICTIVE_TRANSFORMS:
      raise ValueError(f"`predictive` must be one of "
                       f"{sorted(PREDICTIVE_TRANSFORMS)} or a callable; got "
                       f"{predictive!r}.")
    if isinstance(event_ndims, bool) or not isinstance(
        event_ndims, numbers.Integral) or event_ndims < 0:
      raise ValueError("`event_ndims` must be an integer >= 0 (the trailing "
                       "axes of fn's values that one example spans); got "
                       f"{event_ndims!r}.")
    self._fn = fn
    self.predictive = predictive
    self.event_ndims = int(event_ndims)

  def call(self, y_true, y_pred):
    if self._fn is None:
      raise NotImplementedError("NegativeLogLikelihood needs `fn`, or a "
                                "subclass overriding `call`.")
    values = self._fn(y_true, y_pred)
    if self.event_ndims:
      values = tf.convert_to_tensor(values)
      # The rank check itself is the first-batch check's (it names the
      # shapes); here only what can be summed is.
      rank = values.shape.rank
      if rank is not None and rank > self.event_ndims:
        values = tf.reduce_sum(values, axis=list(range(-self.event_ndims,
                                                       0)))
    return values


class GaussianNegativeLogLikelihood(NegativeLogLikelihood):
  """-log N(y | y_pred, scale^2), summed over everything one example outputs.

      -log p(y | x, theta) = sum_k (y_k - f_k(x))^2 / (2 scale^2)
                             + log(scale) + log(2 pi) / 2,

  k running over every axis of the output after the batch axis (units, time
  steps): an output [n, T, 1] gives one value per sequence, and N counts
  sequences. `y` must have the output's shape, up to a trailing axis of
  size 1 (`(n,)` against `(n, 1)` either way); other shapes are refused
  rather than broadcast.

  Args:
    scale: the observation noise standard deviation sigma, > 0.
    name: the loss name.

  #### Example

  A linear regression with noise scale 0.5:

  ```python
  t = (x @ [1., -1.] + 0.5 * np.random.normal(size=len(x))).astype("float32")
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd", loss=sgk.GaussianNegativeLogLikelihood(0.5))
  sampling = sgk.SamplingCallback(sgk.SGLD(step_size=1e-4), num_examples=len(x),
                                  prior=1., thinning=8)
  model.fit(x, t, batch_size=32, epochs=1, callbacks=[sampling], verbose=0)
  prediction = sampling.posterior.predict_mean_and_variance(x[:3])
  print(prediction.mean, prediction.stddev)  # stddev >= the noise scale 0.5
  ```
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
    pred_rank, true_rank = y_pred.shape.rank, y_true.shape.rank
    if pred_rank is not None and true_rank is not None:
      # Align a trailing axis of size 1, as Keras' own losses do (a (n, 1)
      # against a (n,) would otherwise broadcast to (n, n)).
      if true_rank == pred_rank - 1 and y_pred.shape[-1] in (1, None):
        y_true = y_true[..., None]
      elif true_rank == pred_rank + 1 and y_true.shape[-1] == 1:
        y_true = y_true[..., 0]
      if not y_true.shape.is_compatible_with(y_pred.shape):
        raise ValueError(
            f"{self.name}: y_true has shape {tuple(y_true.shape)} and the "
            f"model's output {tuple(y_pred.shape)}; they would broadcast "
            "against each other instead of pairing each target with its "
            "prediction. Give y the output's shape (one target per output "
            "value).")
    z = (y_true - y_pred) / self.scale
    per_unit = 0.5 * tf.square(z) + (
        math.log(self.scale) + 0.5 * math.log(2. * math.pi))
    rank = per_unit.shape.rank
    if rank is not None and rank >= 2:
      return tf.reduce_sum(per_unit, axis=list(range(1, rank)))
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

  def values(self, y_true, y_pred):
    """The loss unreduced, as Keras' mean sees it: one value per example
    for a likelihood the samplers accept."""
    y_true, y_pred = single_output(y_true), single_output(y_pred)
    y_pred = tf.convert_to_tensor(y_pred)
    if y_pred.dtype in (tf.float16, tf.bfloat16):
      # Mixed precision computes the outputs in 16 bits; the loss (as Keras'
      # Loss.__call__ does) and the energy sums are taken in float32 or
      # more: U grows with N and AMAGOLD's test needs differences of order 1.
      y_pred = tf.cast(y_pred, tf.float32)
    return tf.convert_to_tensor(self.loss.call(y_true, y_pred))

  def batch_nll(self, y_true, y_pred):
    y_pred = single_output(y_pred)
    values = self.values(y_true, y_pred)
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

  `SamplingCallback` calls it when `fit` starts; call it to check a loss
  beforehand.

  Args:
    loss: what was passed to `model.compile(loss=...)`.
    model: the model, to check the number of output units of a binary
      cross-entropy.

  Returns:
    A `Likelihood`: `batch_nll(y_true, y_pred)`, the batch's -sum log p,
    and `predictive` / `predictive_name`, how an output becomes the
    averaged quantity ("softmax", "sigmoid", "identity" or "custom").

  Raises:
    ValueError: the loss is not a mean-reduced negative log-likelihood
      (docs/keras_refusals.md lists them), saying which loss to use.

  #### Example

  ```python
  likelihood = sgk.resolve_likelihood(
      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  print(likelihood.predictive_name)              # softmax
  logits = tf.constant([[2., 0.], [0., 1.]])
  print(likelihood.batch_nll(tf.constant([0, 1]), logits))  # -sum log p
  try:
    sgk.resolve_likelihood("mse")                # refused: say the noise scale
  except ValueError as error:
    print(error)
  ```
  """
  if loss is None:
    raise ValueError("the model has no loss: compile it with a "
                     f"negative log-likelihood ({_SUPPORTED}).")
  if isinstance(loss, (list, tuple, dict)):
    raise ValueError(_structured_message(loss))
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
          f"{units}. Use one output unit, or "
          "tfp_sgmcmc.keras.NegativeLogLikelihood(lambda y, p: "
          "keras.losses.binary_crossentropy(y, p, from_logits=...), "
          "event_ndims=...) summing the units (predictive='sigmoid' for "
          "logits).")
    return Likelihood(loss, "sigmoid" if from_logits else "identity")
  if _output_units(model) == 1:
    raise ValueError(one_class_message(fn.__name__))
  return Likelihood(loss, "softmax" if from_logits else "identity")


def single_output(outputs):
  """The tensor of one output in a dict or list (`{"p": logits}`), which
  Keras' compiled loss hands the loss; other `outputs` as they are."""
  leaves = keras.tree.flatten(outputs)
  return leaves[0] if len(leaves) == 1 else outputs


def _structured_message(loss):
  kind = "dict" if isinstance(loss, dict) else "list"
  entries = keras.tree.flatten(loss)
  if len(entries) == 1:
    one = entries[0]
    return (f"`loss` is a {kind} of 1 loss ({loss!r}); the samplers take "
            "one negative log-likelihood for one output: compile with the "
            "loss itself, loss=" + (repr(one) if isinstance(one, str) else
                                    f"{type(one).__name__}(...)") +
            f", not in a {kind} (the model's one output may be in one).")
  return (f"`loss` is a {kind} of {len(entries)} losses ({loss!r}); the "
          "samplers take one negative log-likelihood for one output: "
          "concatenate the outputs into one (keras.layers.Concatenate) and "
          "write their joint negative log-likelihood as one "
          "tfp_sgmcmc.keras.NegativeLogLikelihood(fn).")


def one_class_message(name):
  """Why a categorical cross-entropy on one output unit is refused."""
  return (f"{name} on 1 output unit: a distribution over one class (a "
          "softmax, or Keras' renormalised probabilities) is 1 whatever "
          "the weights, so the loss is constant (0) and the chain samples "
          "the prior, not the posterior. For two classes with one unit (a "
          "logit), use keras.losses.BinaryCrossentropy with 0 / 1 labels; "
          "for k classes, k output units.")


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
