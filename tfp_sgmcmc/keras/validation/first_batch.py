"""What `SamplingCallback` checks on a first batch at the start of `fit`,
for every kind of model (Sequential, functional, subclassed, nested):

* the model has one output: Keras applies one loss to each output of a
  multi-output model and sums them, and the predictions would stack them;
* the loss, evaluated unreduced on the batch, has exactly one value per
  example (shape (n,), or (n, 1) as a per-unit formula gives on one
  unit). The energy is N times Keras' mean of the loss values, which is
  -sum log p over the data only when the mean runs over examples: values
  per time step or output unit ([n, T], [n, k]) divide the log-likelihood
  by T or k, values broadcast from mismatched shapes ([n, n]) are not a
  likelihood, one value for the batch may be a sum. A binary cross-entropy
  must also see one unit per example, since Keras averages it over the
  units before this check could see them;
* no layer draws random numbers when called with `training=True`
  (dropout, noise, augmentation): the sampler would follow the gradient of
  a randomly perturbed network, another posterior than the one whose
  predictions (`training=False`) are averaged. Known layers (found in
  nested models too) are named; any other source of randomness is found
  by calling the model twice with `training=True` and the same weights
  (`stateless_call`, so that nothing in the model changes).

The batch: the first examples of `fit`'s arrays, the first batch of a
`keras.utils.PyDataset`; for a `tf.data.Dataset`, one synthesized from its
`element_spec` (standard normal floats, zero integers), since iterating
the pipeline would advance its reshuffling. A generator is not read; the
checks are then skipped, as they are when the model cannot be called on
the batch (`fit` itself reports that).
"""

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.keras import losses

# The checks read the callback's likelihood (its private state) by design.
# pylint: disable=protected-access

__all__ = ["check_first_batch", "check_random_layers", "first_batch",
           "first_element"]

# Examples in the batch taken from arrays: more than one, so that values
# broadcast to [n, n] are not mistaken for [n].
BATCH = 4
# What a dimension of unknown size (other than the batch axis) becomes in a
# batch synthesized from a dataset's element_spec.
UNKNOWN_DIM = 3

_BINARY = "binary_crossentropy"
_CROSSENTROPIES = ("sparse_categorical_crossentropy",
                   "categorical_crossentropy", _BINARY)


def _shape(t):
  return tuple(getattr(t, "shape", ()))


def _synthesized(spec, rng):
  if not isinstance(spec, tf.TensorSpec):
    raise TypeError(spec)
  shape = [BATCH if d is None and i == 0 else UNKNOWN_DIM if d is None
           else d for i, d in enumerate(spec.shape.as_list())]
  dtype = spec.dtype
  if dtype.is_floating:
    return tf.constant(rng.normal(size=shape), dtype)
  if dtype.is_integer or dtype.is_bool:
    return tf.zeros(shape, dtype)
  raise TypeError(dtype)


def first_element(dataset):
  """A `keras.utils.PyDataset`'s first batch, or None if it cannot be read."""
  try:
    return dataset[0]
  except Exception:  # pylint: disable=broad-except
    return None


def first_batch(x, y):
  """(x, y) of a first batch of `fit`'s input, or None (see the module)."""
  if isinstance(x, tf.data.Dataset):
    spec = x.element_spec
    if not isinstance(spec, tuple) or len(spec) != 2:
      return None
    rng = np.random.default_rng(0)
    try:
      return tuple(tf.nest.map_structure(lambda s: _synthesized(s, rng), part)
                   for part in spec)
    except TypeError:  # Strings, ragged or sparse inputs: not synthesized.
      return None
  if isinstance(x, keras.utils.PyDataset):
    batch = first_element(x)
    return tuple(batch[:2]) if isinstance(batch, (tuple, list)) and len(
        batch) >= 2 else None
  if x is None or y is None:
    return None
  try:
    leaves = keras.tree.flatten(x) + keras.tree.flatten(y)
  except Exception:  # pylint: disable=broad-except
    return None
  if not leaves or not all(hasattr(a, "shape") and len(a.shape) >= 1
                           for a in leaves):
    return None
  return tuple(keras.tree.map_structure(lambda a: a[:BATCH], part)
               for part in (x, y))


def _crossentropy_name(loss):
  name = getattr(getattr(loss, "fn", None), "__name__", None)
  return name if name in _CROSSENTROPIES else None


def _fix(likelihood, values_shape, y_true, y_pred):
  """The fix for a loss whose values are not one per example."""
  loss = likelihood.loss
  true_shape, pred_shape = _shape(y_true), _shape(y_pred)
  extra = len(values_shape) - 1
  try:
    broadcast = tuple(np.broadcast_shapes(true_shape, pred_shape))
  except ValueError:
    broadcast = None
  if (extra > 0 and true_shape != pred_shape and
      broadcast == values_shape and broadcast not in (true_shape,
                                                      pred_shape)):
    return ("y_true and the output broadcast against each other instead "
            "of pairing each target with its prediction: give y the "
            f"output's shape {pred_shape} (or reshape the output)")
  if extra < 0:
    return ("the loss reduced over the batch axis itself: return one value "
            "per example (no mean or sum over axis 0); for a binary "
            "cross-entropy, give the model outputs of shape (n, 1)")
  name = _crossentropy_name(loss)
  if name is not None:
    return (f"each example has {int(np.prod(values_shape[1:]))} terms "
            f"(values {values_shape}); Keras' {name} gives one per position,"
            " so sum them per example: loss=tfp_sgmcmc.keras."
            "NegativeLogLikelihood(lambda y, p: keras.losses."
            f"{name}(y, p, from_logits=...), event_ndims={extra}, "
            "predictive='softmax' (or 'sigmoid', 'identity' for "
            "probabilities)), with num_examples the number of examples "
            "(sequences), not of terms")
  event = getattr(loss, "event_ndims", None)
  if event is not None:
    return (f"each example has {int(np.prod(values_shape[1:]))} terms "
            f"(time steps, output units): sum them per example with "
            f"NegativeLogLikelihood(fn, event_ndims={event + extra}), and "
            "keep num_examples the number of examples")
  return ("make the loss return one negative log-likelihood per example "
          "(wrap it in tfp_sgmcmc.keras.NegativeLogLikelihood(fn, "
          "event_ndims=...) to sum the terms of one example)")


def check_first_batch(callback, x, y):
  """Runs the checks of the module on `fit`'s input (`x`, `y`)."""
  model = callback.model
  batch = first_batch(x, y)
  if batch is None:
    return
  bx, by = batch
  try:
    with model.distribute_strategy.scope():
      y_pred = model(bx, training=False)
  except Exception:  # pylint: disable=broad-except
    return  # Not this check's business; fit itself will say.
  outputs = keras.tree.flatten(y_pred)
  if len(outputs) != 1:
    shapes = keras.tree.map_structure(_shape, y_pred)
    raise ValueError(
        f"the model {model.name!r} has {len(outputs)} outputs (shapes "
        f"{shapes} on a batch of {len(outputs[0])} examples) and "
        "one loss: Keras applies the loss to each output and adds them, "
        "and the Bayesian model average would stack them. The samplers "
        "take one output with one negative log-likelihood: concatenate "
        "the outputs into one (keras.layers.Concatenate) and write their "
        "joint negative log-likelihood as one "
        "tfp_sgmcmc.keras.NegativeLogLikelihood(fn).")
  y_pred = outputs[0]
  if isinstance(by, (list, tuple, dict)) and len(keras.tree.flatten(by)) == 1:
    by = keras.tree.flatten(by)[0]
  n = _shape(y_pred)[0] if _shape(y_pred) else None
  likelihood = callback._likelihood
  name = _crossentropy_name(likelihood.loss)
  if name == _BINARY and len(_shape(y_pred)) >= 2 and (
      _shape(y_pred)[-1] != 1):
    raise ValueError(
        f"binary cross-entropy on outputs of shape {_shape(y_pred)} "
        f"({_shape(y_pred)[-1]} units per position): Keras averages it over "
        "the units, which divides the log-likelihood by "
        f"{_shape(y_pred)[-1]}. Use one output unit, or "
        "tfp_sgmcmc.keras.NegativeLogLikelihood(lambda y, p: "
        "keras.losses.binary_crossentropy(y, p, from_logits=...), "
        f"event_ndims=...) summing the {_shape(y_pred)[-1]} units "
        "(predictive='sigmoid' for logits).")
  if name in _CROSSENTROPIES[:2] and _shape(y_pred)[-1:] == (1,):
    raise ValueError(losses.one_class_message(name))
  try:
    values = likelihood.values(by, y_pred)
  except ValueError:
    raise  # The loss' own refusal (e.g. shapes that would broadcast).
  except Exception:  # pylint: disable=broad-except
    return  # Not this check's business; fit itself will say.
  values_shape = _shape(values)
  if values_shape[:1] == (n,) and all(d == 1 for d in values_shape[1:]):
    # One value per example (a Dense(1) output and labels (n, 1) give
    # (n, 1)): Keras' mean over them is the mean over examples.
    return
  if name == _BINARY and values_shape == () and len(_shape(y_pred)) == 1:
    return  # Keras' mean over the last axis is here the mean over examples.
  raise ValueError(
      f"the loss {likelihood.loss.name!r} gives values of shape "
      f"{values_shape} on a batch of {n} examples (y_true "
      f"{_shape(by)}, model output {_shape(y_pred)}); the samplers need "
      f"exactly one value per example, shape ({n},): the energy is "
      "num_examples times Keras' mean of these values, which is the "
      "log-likelihood of the data only when the mean runs over examples. "
      f"Fix: {_fix(likelihood, values_shape, by, y_pred)}.")


# Layers whose output with training=True is random, by their switch.
def _random_by_class(layer):
  layers = keras.layers
  if isinstance(layer, (layers.Dropout, layers.SpatialDropout1D,
                        layers.SpatialDropout2D, layers.SpatialDropout3D,
                        layers.GaussianDropout, layers.AlphaDropout)):
    return float(getattr(layer, "rate", 0.)) > 0.
  if isinstance(layer, layers.GaussianNoise):
    return float(getattr(layer, "stddev", 0.)) > 0.
  return False


def check_random_layers(callback, x, y):
  """Refuses a model whose `training=True` outputs are random."""
  model = callback.model
  named = [layer for layer in model._flatten_layers(include_self=False)
           if _random_by_class(layer)]
  differs = None
  batch = first_batch(x, y) if not named else None
  if batch is not None:
    try:
      with model.distribute_strategy.scope():
        trainable = [v.value for v in model.trainable_variables]
        non_trainable = [v.value for v in model.non_trainable_variables]
        first, after = model.stateless_call(trainable, non_trainable,
                                            batch[0], training=True)
        second, _ = model.stateless_call(trainable, after, batch[0],
                                         training=True)
      differs = any(
          not np.array_equal(np.asarray(a), np.asarray(b))
          for a, b in zip(keras.tree.flatten(first),
                          keras.tree.flatten(second)))
    except Exception:  # pylint: disable=broad-except
      differs = None  # Not this check's business; fit itself will say.
  if not named and not differs:
    return
  what = (", ".join(f"{type(layer).__name__} {layer.name!r}"
                    for layer in named) if named else
          "its outputs with training=True differ between two calls with the "
          "same weights on the same inputs: a layer draws random numbers "
          "in training (dropout, noise, augmentation)")
  raise ValueError(
      f"the model {model.name!r} is random in training: {what}. The "
      "sampler would follow the gradient of a randomly perturbed network "
      "(another likelihood, and extra gradient noise it does not correct "
      "for), while the predictions it averages use the network without "
      "the noise (training=False): the samples are not of the model's "
      "posterior. Remove the layer for sampling (or set its rate / stddev "
      "to 0; the prior given to SamplingCallback is the regulariser); to "
      "burn in with it, burn in with a model that has it, then copy the "
      "weights into one without it (model.set_weights) and sample that "
      "one.")
