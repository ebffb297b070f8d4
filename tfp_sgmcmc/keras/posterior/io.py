"""Posteriors in and out: from `SamplingCallback`'s kept samples, and to
and from one `.npz` file (`Posterior.save` / `Posterior.load`)."""

import json
import os
import warnings

import numpy as np

from tfp_sgmcmc import _files as files
from tfp_sgmcmc.keras import losses as losses_lib

__all__ = ["FORMAT_VERSION", "kept_samples_arguments", "likelihood_metadata",
           "load", "non_trainable_paths", "non_trainable_state", "save",
           "stack_states", "variable_paths"]

FORMAT_VERSION = 2


def save(posterior, path):
  """Writes the samples (trainable and non-trainable variables), moments
  and metadata of `posterior` to one `.npz` file, atomically (a temporary
  file beside it, fsync, rename, fsync of the directory)."""
  path = os.fspath(path)
  arrays = {f"sample_{j}": s for j, s in enumerate(posterior.samples)}
  if posterior.non_trainable_samples is not None:
    arrays.update({f"non_trainable_{j}": s
                   for j, s in enumerate(posterior.non_trainable_samples)})
  if posterior.mean is not None:
    arrays.update({f"mean_{j}": m for j, m in enumerate(posterior.mean)})
    arrays.update({f"variance_{j}": v for j, v in enumerate(posterior.variance)})
  header = dict(format_version=FORMAT_VERSION,
                variable_paths=posterior.variable_paths,
                non_trainable_paths=posterior.non_trainable_paths,
                predictive=posterior.predictive_name,
                num_transitions=posterior.num_transitions,
                has_moments=posterior.mean is not None,
                metadata=posterior.metadata)
  arrays["header"] = np.array(json.dumps(header))
  directory = os.path.dirname(path)
  if directory:
    os.makedirs(directory, exist_ok=True)
  # Whole or not at all: a kill or a full disk during the save leaves the
  # previous file at `path`.
  return files.atomic_write(path, lambda f: np.savez(f, **arrays))


def load(cls, path, model=None, predictive=None):
  """Reads a `cls` (a `Posterior`) written by `save` (see
  `Posterior.load`)."""
  with np.load(os.fspath(path), allow_pickle=False) as data:
    header = json.loads(str(data["header"]))
    version = header.get("format_version")
    if version not in (1, FORMAT_VERSION):
      raise ValueError(f"{path!r}: unknown format version {version!r}.")
    n = len(header["variable_paths"])
    samples = [data[f"sample_{j}"] for j in range(n)]
    non_trainable_paths = header.get("non_trainable_paths")
    non_trainable = None
    if non_trainable_paths is not None:
      non_trainable = [data[f"non_trainable_{j}"]
                       for j in range(len(non_trainable_paths))]
    mean = variance = None
    if header["has_moments"]:
      mean = [data[f"mean_{j}"] for j in range(n)]
      variance = [data[f"variance_{j}"] for j in range(n)]
  saved = header["predictive"]
  if saved == "custom":
    if predictive is None:
      raise ValueError(f"{path!r} was saved with a custom predictive "
                       "function; pass it as `predictive=`.")
  else:
    predictive = saved if predictive is None else predictive
  posterior = cls(samples, header["variable_paths"], predictive=predictive,
                  mean=mean, variance=variance,
                  num_transitions=header["num_transitions"],
                  metadata=header["metadata"], model=model,
                  non_trainable_samples=non_trainable,
                  non_trainable_paths=non_trainable_paths)
  if model is not None:
    posterior._check_model(model)  # pylint: disable=protected-access
    if non_trainable is None and model.non_trainable_variables:
      warnings.warn(
          f"{path!r} was written without the non-trainable variables "
          "(format version 1): predictions use the model's current "
          f"values of {len(model.non_trainable_variables)} non-trainable "
          "variable(s) (e.g. BatchNormalization statistics) for every "
          "sample.", UserWarning, stacklevel=2)
  return posterior


def variable_paths(model):
  return [getattr(v, "path", v.name) for v in model.trainable_variables]


def non_trainable_paths(model):
  return [getattr(v, "path", v.name) for v in model.non_trainable_variables]


def non_trainable_state(model):
  """The model's non-trainable variables now: what a kept sample needs
  besides its weights (BatchNormalization statistics, ...)."""
  return [np.array(v.numpy()) for v in model.non_trainable_variables]


def stack_states(states, num_samples, variables):
  """Per non-trainable variable, the kept samples' values stacked
  [num_samples, ...]; None if `states` does not hold one per sample."""
  states = list(states)
  if len(states) != num_samples:
    return None
  return [np.stack([s[j] for s in states]) if states
          else np.zeros((0,) + tuple(v.shape), np.dtype(v.dtype))
          for j, v in enumerate(variables)]


def likelihood_metadata(likelihood):
  """What predictions need to know of the likelihood: the noise scale of a
  `GaussianNegativeLogLikelihood`."""
  loss = getattr(likelihood, "loss", None)
  if isinstance(loss, losses_lib.GaussianNegativeLogLikelihood):
    return dict(noise_scale=float(loss.scale))
  return {}


def kept_samples_arguments(model, kept, kept_states, likelihood,
                           num_transitions, mean, variance, metadata):
  """`Posterior`'s arguments from kept samples (a sequence, oldest first, of
  lists of arrays, one per trainable variable), the non-trainable state at
  each (`non_trainable_state`), the running moments and the likelihood
  that gives the predictive (None: identity)."""
  variables = model.trainable_variables
  if kept:
    samples = [np.stack([s[j] for s in kept]) for j in range(len(variables))]
  else:
    samples = [np.zeros((0,) + tuple(v.shape), v.dtype) for v in variables]
  predictive = "identity"
  if likelihood is not None:
    predictive = (likelihood.predictive_name
                  if likelihood.predictive_name != "custom"
                  else likelihood.predictive)
  return dict(
      samples=samples, variable_paths=variable_paths(model),
      predictive=predictive, mean=mean, variance=variance,
      num_transitions=int(num_transitions),
      metadata=dict(metadata, **likelihood_metadata(likelihood)),
      model=model,
      non_trainable_samples=stack_states(kept_states, len(kept),
                                         model.non_trainable_variables),
      non_trainable_paths=non_trainable_paths(model))
