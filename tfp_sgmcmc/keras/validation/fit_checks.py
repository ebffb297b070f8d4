"""What `fit` is given around `SamplingCallback`, checked when it starts:
the other callbacks, a classifier's output activation against the loss'
`from_logits`, and outputs that must be probabilities (read by
`probabilities.py`). Used by `traps.FitTraps` (see traps.py for when each
check runs). It does not import the callback: `SamplingCallback` imports
it."""

import os
import warnings

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.keras.validation import probabilities as probabilities_lib
from tfp_sgmcmc.keras.validation.probabilities import check_probabilities
from tfp_sgmcmc.keras.validation.probabilities import probabilities_loss

# The checks read the callback's likelihood (its private state) by design.
# pylint: disable=protected-access

__all__ = ["check_callbacks", "check_outputs", "probabilities_loss",
           "check_probabilities", "examples_in", "check_same_model"]

# Keras activations whose outputs are not probabilities (negative, or
# unbounded, or rows not summing to 1).
_NOT_PROBABILITIES = frozenset([
    "linear", "relu", "relu6", "tanh", "elu", "selu", "gelu", "silu",
    "swish", "leaky_relu", "softplus", "softsign", "exponential", "mish",
    "log_softmax", "log_sigmoid", "hard_silu", "hard_swish", "celu", "glu",
    "sparse_plus", "squareplus", "soft_shrink", "hard_shrink",
    "tanh_shrink", "hard_tanh", "sparsemax", "threshold"])


def examples_in(x):
  """The number of examples in array inputs, or None for a dataset,
  generator or PyDataset."""
  if x is None or isinstance(x, (tf.data.Dataset, keras.utils.PyDataset)):
    return None
  try:
    leaves = keras.tree.flatten(x)
  except Exception:  # pylint: disable=broad-except
    return None
  for leaf in leaves:
    shape = getattr(leaf, "shape", None)
    if shape is not None and len(shape) >= 1 and shape[0] is not None:
      if isinstance(leaf, (np.ndarray, tf.Tensor)) or hasattr(
          leaf, "__array__"):
        return int(shape[0])
    return None
  return None


def _same_path(a, b):
  try:
    return (os.path.abspath(os.fspath(a)) ==
            os.path.abspath(os.fspath(b)))
  except TypeError:
    return None  # Not local paths (e.g. a remote URL object): not judged.


def _output_layer(model):
  try:
    history = model.outputs[0]._keras_history
    return history[0]
  except (AttributeError, IndexError, TypeError, ValueError):
    pass
  if isinstance(model, keras.Sequential) and model.layers:
    return model.layers[-1]
  return None


def check_callbacks(callback, cbs):
  """The other callbacks of `fit` that would bias or break the chain."""
  mine = cbs.index(callback) if callback in cbs else None
  sampling = [cb for cb in cbs if callback._is_sampling_callback(cb)]
  if len(sampling) > 1:
    same = len({id(cb) for cb in sampling}) < len(sampling)
    raise ValueError(
        f"fit got {len(sampling)} SamplingCallbacks"
        + (" (the same one listed more than once)" if same else "")
        + ": each installs its own sampler as model.optimizer, so the "
        "model's weights follow one chain while every callback keeps "
        "samples of it as if it were its own (and a callback listed twice "
        "runs each step's bookkeeping twice). Give fit one "
        "SamplingCallback; for several chains, fit one model per chain, "
        "each with its own SamplingCallback.")
  if mine is not None:
    _check_readers_listed_after(callback, cbs[:mine])
  for i, cb in enumerate(cbs):
    if isinstance(cb, (keras.callbacks.ReduceLROnPlateau,
                       keras.callbacks.LearningRateScheduler)):
      raise ValueError(
          f"{type(cb).__name__} is among fit's callbacks beside "
          "SamplingCallback: it sets `model.optimizer.learning_rate`, "
          "which after burn-in is the sampler's step size, so it would "
          "change the chain's step size mid-run (and the History "
          "`learning_rate` column would change meaning). Remove it; to "
          "schedule the burn-in, run the burn-in as its own fit with the "
          "scheduler, then fit with SamplingCallback(burnin_epochs=0); "
          "AMAGOLD can adapt its step size with step_size_adaptation=.")
    if isinstance(cb, keras.callbacks.EarlyStopping):
      if cb.restore_best_weights:
        raise ValueError(
            "EarlyStopping(restore_best_weights=True) is among fit's "
            "callbacks: a sampling epoch's loss is not a minimisation's, "
            "so it stops after `patience` epochs of sampling and puts "
            "back the weights of its best epoch (usually the burn-in's "
            "optimum), not the chain's position. Remove EarlyStopping, "
            "or at least restore_best_weights=True.")
      warnings.warn(
          f"EarlyStopping(monitor={cb.monitor!r}, patience={cb.patience}) "
          "is among fit's callbacks: the loss of a sampling chain does "
          "not keep decreasing as an optimiser's does, so it will likely "
          f"stop fit after {cb.patience} epoch(s) of sampling with few "
          "samples kept. Remove it to run every epoch.", UserWarning,
          stacklevel=4)
    if isinstance(cb, keras.callbacks.BackupAndRestore):
      if callback.backup_dir is None:
        raise ValueError(
            f"BackupAndRestore({cb.backup_dir!r}) is among fit's "
            "callbacks but SamplingCallback has no `backup_dir`: a "
            "resumed fit would restore the weights only and redo the "
            "burn-in, losing the kept samples and the sampler's state. "
            f"Pass SamplingCallback(..., backup_dir={cb.backup_dir!r}).")
      if _same_path(cb.backup_dir, callback.backup_dir) is False:
        raise ValueError(
            f"SamplingCallback(backup_dir={callback.backup_dir!r}) and "
            f"BackupAndRestore({cb.backup_dir!r}) name different "
            "directories; give both the same one.")
      if mine is not None and i < mine:
        raise ValueError(
            "BackupAndRestore is listed before SamplingCallback in "
            "fit's callbacks; list SamplingCallback first, so that both "
            "back up the same (post-swap) state at the end of burn-in "
            "and the sampler is restored before Keras loads the weights.")
      if cb.save_freq != "epoch":
        raise ValueError(
            f"BackupAndRestore(save_freq={cb.save_freq!r}): Keras resumes "
            "a mid-epoch backup from the start of its epoch with the "
            "mid-epoch weights, which repeats steps of the chain. Use "
            "save_freq='epoch' (the default).")


def _check_readers_listed_after(callback, before):
  """The callbacks listed before `callback` do not see the values it adds
  to the epoch logs (it adds them in its own `on_epoch_end`): Keras'
  loggers listed there are refused, other callbacks that read the epoch
  logs warned."""
  keys = set(callback._logs.keys) | {"accept_rate"}
  for cb in before:
    name = type(cb).__name__
    if isinstance(cb, (keras.callbacks.CSVLogger,
                       keras.callbacks.TensorBoard)):
      raise ValueError(
          f"{name} is listed before SamplingCallback in fit's callbacks: "
          "the callback adds its epoch values (energy, step_size, "
          "kept_samples, ...) to the epoch logs in its own on_epoch_end, "
          f"after {name} has written that epoch without them ({name} "
          "would never write them). List SamplingCallback first: "
          f"callbacks=[sampling, ..., {name}(...)].")
    monitor = getattr(cb, "monitor", None)
    if monitor is not None:
      reads_ours = monitor in keys or (
          isinstance(monitor, str) and monitor.startswith("val_") and
          monitor[4:] in keys)
    else:
      reads_ours = (getattr(type(cb), "on_epoch_end", None) is not
                    keras.callbacks.Callback.on_epoch_end)
    if reads_ours and not isinstance(cb, keras.callbacks.BackupAndRestore):
      warnings.warn(
          f"{name} is listed before SamplingCallback in fit's callbacks: "
          "its on_epoch_end runs before the callback adds its epoch values "
          f"({', '.join(sorted(keys))}) to the logs, so it does not see "
          "them. List SamplingCallback first if it reads them.",
          UserWarning, stacklevel=5)


def check_same_model(callback, owner, model):
  """A callback holds one chain, of the model it first ran in (`owner`, a
  weak reference, None before)."""
  first = None if owner is None else owner()
  if owner is None or first is model:
    return
  was = (f"model {first.name!r}" if first is not None else
         "a model that no longer exists")
  raise ValueError(
      f"this SamplingCallback already holds the chain of {was} (its "
      f"sampler's state over that model's weights, {len(callback.samples)} "
      f"kept sample(s), {callback._steps_seen} step(s) seen); a fit of "
      f"model {model.name!r} would continue that chain on other weights. "
      "A callback samples one model: create a new SamplingCallback (with "
      "a new sampler) for each model. Another fit of the same model object "
      "continues its chain.")


def check_outputs(callback, x):
  """A cross-entropy whose `from_logits` disagrees with the outputs (read
  on the first examples of `x`, `fit`'s training input, if needed)."""
  ce = probabilities_lib.crossentropy(callback._likelihood)
  if ce is None:
    return
  name, from_logits = ce
  squash = "sigmoid" if name == "binary_crossentropy" else "softmax"
  layer = _output_layer(callback.model)
  activation = getattr(layer, "activation", None)
  act = getattr(activation, "__name__", None)
  probabilities = (("sigmoid", "hard_sigmoid")
                   if name == "binary_crossentropy" else ("softmax",))
  if act is not None and not from_logits and (
      act in _NOT_PROBABILITIES or (
          act in ("sigmoid", "hard_sigmoid") and act not in probabilities)):
    raise ValueError(
        f"the loss {name} has from_logits=False, so it reads the "
        "model's outputs as probabilities, but the output layer "
        f"{layer.name!r} has activation={act!r}: its outputs are not "
        + ("probabilities" if act not in ("sigmoid", "hard_sigmoid") else
           "a distribution over the classes (rows do not sum to 1)")
        + " (Keras clips and renormalises them, so the likelihood and "
        "the averaged predictions are wrong). Use from_logits=True with a "
        f"linear output, or activation={squash!r} on the output layer.")
  if act is not None and from_logits and act in ("softmax", "sigmoid"):
    raise ValueError(
        f"the loss {name} has from_logits=True, but the output layer "
        f"{layer.name!r} has activation={act!r}: it would apply "
        f"{squash} twice. Use from_logits=False, or a linear output "
        "layer.")
  if act in probabilities or act in _NOT_PROBABILITIES:
    return
  if from_logits:
    return
  # No activation to read (a Softmax layer, a subclassed model) or a
  # custom one: look at the outputs on a few training examples.
  sample = None
  if isinstance(x, tf.data.Dataset):
    return  # Iterating a pipeline may have side effects; see predict.
  if examples_in(x):
    sample = keras.tree.map_structure(lambda a: a[:16], x)
  if sample is None:
    return
  try:
    outputs = np.asarray(callback.model(sample, training=False),
                         dtype=np.float64)
  except Exception:  # pylint: disable=broad-except
    return  # Not this check's business; fit itself will say.
  check_probabilities(outputs, name, where="the model's outputs on the "
                      "first training examples")
