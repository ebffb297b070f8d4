"""Kept posterior samples of a Keras model: Bayesian model averages, disk.

A `Posterior` holds thinned samples of the model's trainable weights (one
array per variable, samples along the first axis), the running moments of
the chain's position over every transition, and how a model output becomes
the averaged predictive quantity. `predict` evaluates the model at each
sample with `model.stateless_call` (the model's own variables are not
touched, so it is safe in the middle of `fit`) and averages the predictive
probabilities (or, for regression, the predicted means) in batches.
"""

import json
import os

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.keras import losses as losses_lib

__all__ = ["Posterior", "from_kept_samples", "variable_paths"]

_FORMAT_VERSION = 1


class Posterior:
  """Posterior samples of a Keras model's weights.

  Attributes:
    samples: list, per trainable variable, of arrays [num_samples, ...].
    variable_paths: the variables' paths (`variable.path`), to check that a
      model fits the samples.
    mean, variance: per variable, the running mean and variance of the
      chain's position over `num_transitions` transitions (None if not
      tracked).
    metadata: a JSON-serialisable dict (sampler, N, thinning, acceptance).

  Args:
    samples, variable_paths, mean, variance, num_transitions, metadata: as
      above.
    predictive: "softmax", "sigmoid", "identity" or a callable (applied to
      the model output before averaging).
    model: the Keras model the samples are for (needed by `predict`).
  """

  def __init__(self, samples, variable_paths, predictive="identity",
               mean=None, variance=None, num_transitions=0, metadata=None,
               model=None):
    self.samples = [np.asarray(s) for s in samples]
    self.variable_paths = list(variable_paths)
    if len(self.samples) != len(self.variable_paths):
      raise ValueError(f"{len(self.samples)} sample arrays for "
                       f"{len(self.variable_paths)} variables.")
    counts = {s.shape[0] for s in self.samples}
    if len(counts) > 1:
      raise ValueError(f"sample arrays disagree on the number of samples: "
                       f"{sorted(counts)}.")
    self.mean = None if mean is None else [np.asarray(m) for m in mean]
    self.variance = (None if variance is None
                     else [np.asarray(v) for v in variance])
    self.num_transitions = int(num_transitions)
    self.metadata = dict(metadata or {})
    self._predictive_name = (predictive if isinstance(predictive, str)
                             else "custom")
    if isinstance(predictive, str):
      if predictive not in losses_lib.PREDICTIVE_TRANSFORMS:
        raise ValueError(f"`predictive` must be one of "
                         f"{sorted(losses_lib.PREDICTIVE_TRANSFORMS)} or a "
                         f"callable; got {predictive!r}.")
      predictive = losses_lib.PREDICTIVE_TRANSFORMS[predictive]
    self._predictive = predictive
    self.model = model
    self._predict_function = None
    self._predict_model = None

  @property
  def num_samples(self):
    return self.samples[0].shape[0] if self.samples else 0

  def sample(self, index):
    """The weights of sample `index`, one array per trainable variable."""
    return [s[index] for s in self.samples]

  def _check_model(self, model):
    if model is None:
      raise ValueError("no model: pass `model=` (a Posterior loaded from "
                       "disk does not hold one).")
    variables = model.trainable_variables
    shapes = [tuple(v.shape) for v in variables]
    want = [s.shape[1:] for s in self.samples]
    if shapes != want:
      raise ValueError(
          f"the model's trainable variables have shapes {shapes}; the "
          f"samples are for {want} ({self.variable_paths}).")

  def predict(self, x, batch_size=256, model=None):
    """The Bayesian model average: the predictive averaged over samples.

        p(y | x, D) ~= (1/S) sum_s p(y | x, theta_s),

    with p(y | x, theta) the model output passed through the predictive
    transform (softmax for logits, ...).

    Args:
      x: an array (or a structure of arrays) of inputs, or a
        `tf.data.Dataset` of input batches (or of (x, y) batches).
      batch_size: batch size for arrays.
      model: the model; default the one the samples came from.

    Returns:
      A numpy array [num_inputs, ...].
    """
    model = self.model if model is None else model
    self._check_model(model)
    if self.num_samples == 0:
      raise ValueError("no samples kept yet (is sampling past burn-in, and "
                       "thinning smaller than the sampling steps?).")
    if isinstance(x, tf.data.Dataset):
      batches = list(x)
      batches = [b[0] if isinstance(b, tuple) else b for b in batches]
    else:
      n = len(tf.nest.flatten(x)[0])
      batches = [tf.nest.map_structure(lambda a, i=i: a[i:i + batch_size], x)
                 for i in range(0, n, batch_size)]
    if self._predict_function is None or self._predict_model is not model:
      predictive = self._predictive

      def one(weights, non_trainable, inputs):
        outputs, _ = model.stateless_call(weights, non_trainable, inputs,
                                          training=False)
        # Mixed precision: the softmax / sigmoid in float32, not float16.
        outputs = tf.nest.map_structure(
            lambda o: tf.cast(o, tf.float32)
            if o.dtype in (tf.float16, tf.bfloat16) else o, outputs)
        return tf.cast(predictive(outputs), tf.float64)
      self._predict_function = tf.function(one, reduce_retracing=True,
                                           autograph=False)
      self._predict_model = model
    non_trainable = [v.value for v in model.non_trainable_variables]
    total = None
    for s in range(self.num_samples):
      weights = [tf.convert_to_tensor(w, v.dtype)
                 for w, v in zip(self.sample(s), model.trainable_variables)]
      out = np.concatenate([
          self._predict_function(weights, non_trainable, b).numpy()
          for b in batches])
      total = out if total is None else total + out
    return total / self.num_samples

  def save(self, path):
    """Writes the samples, moments and metadata to one `.npz` file."""
    path = os.fspath(path)
    arrays = {f"sample_{j}": s for j, s in enumerate(self.samples)}
    if self.mean is not None:
      arrays.update({f"mean_{j}": m for j, m in enumerate(self.mean)})
      arrays.update({f"variance_{j}": v for j, v in enumerate(self.variance)})
    header = dict(format_version=_FORMAT_VERSION,
                  variable_paths=self.variable_paths,
                  predictive=self._predictive_name,
                  num_transitions=self.num_transitions,
                  has_moments=self.mean is not None,
                  metadata=self.metadata)
    arrays["header"] = np.array(json.dumps(header))
    directory = os.path.dirname(path)
    if directory:
      os.makedirs(directory, exist_ok=True)
    with open(path, "wb") as f:
      np.savez(f, **arrays)
    return path

  @classmethod
  def load(cls, path, model=None, predictive=None):
    """Reads a `Posterior` written by `save`.

    Args:
      path: the file.
      model: the Keras model (same architecture) for `predict`.
      predictive: needed only if the saved predictive was a custom callable.
    """
    with np.load(os.fspath(path), allow_pickle=False) as data:
      header = json.loads(str(data["header"]))
      if header.get("format_version") != _FORMAT_VERSION:
        raise ValueError(f"{path!r}: unknown format version "
                         f"{header.get('format_version')!r}.")
      n = len(header["variable_paths"])
      samples = [data[f"sample_{j}"] for j in range(n)]
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
                    metadata=header["metadata"], model=model)
    if model is not None:
      posterior._check_model(model)
    return posterior

  def __repr__(self):
    return (f"Posterior(num_samples={self.num_samples}, "
            f"variables={len(self.samples)}, "
            f"num_transitions={self.num_transitions})")


def variable_paths(model):
  return [getattr(v, "path", v.name) for v in model.trainable_variables]


def from_kept_samples(model, kept, likelihood, num_transitions, mean,
                      variance, metadata):
  """A `Posterior` of `model` from kept samples (a sequence, oldest first, of
  lists of arrays, one per trainable variable), the running moments and the
  likelihood that gives the predictive (None: identity)."""
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
  return Posterior(samples, variable_paths(model), predictive=predictive,
                   mean=mean, variance=variance,
                   num_transitions=int(num_transitions), metadata=metadata,
                   model=model)
