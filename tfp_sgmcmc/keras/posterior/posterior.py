"""Kept posterior samples of a Keras model: Bayesian model averages, disk.

Predictions evaluate the model at each sample with `model.stateless_call`
(the model's variables are not touched, so it is safe during `fit`).
"""

import collections
import warnings

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.keras import losses as losses_lib
from tfp_sgmcmc.keras.posterior import evaluation
from tfp_sgmcmc.keras.posterior import inputs as inputs_lib
from tfp_sgmcmc.keras.posterior import io as posterior_io
from tfp_sgmcmc.keras.validation import probabilities as probabilities_lib

__all__ = ["Posterior", "RegressionPrediction"]

class RegressionPrediction(collections.namedtuple(
    "RegressionPrediction",
    ["mean", "variance", "epistemic_variance", "noise_variance"])):
  """The predictive mixture's moments (numpy arrays [n, ...]) of
  `Posterior.predict_mean_and_variance`; `stddev` is sqrt(variance).

  Args:
    mean: (1/S) sum_s mu_s over the S samples' predicted means.
    variance: epistemic_variance + noise_variance.
    epistemic_variance: (1/S) sum_s (mu_s - mean)^2, the samples' spread.
    noise_variance: (1/S) sum_s sigma_s^2, the mean noise variance.

  #### Example

  ```python
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  weights = [np.random.normal(size=(10, 2, 1)), np.zeros((10, 1))]  # S = 10
  posterior = sgk.Posterior(weights, [v.path for v in model.weights],
                            model=model)
  prediction = posterior.predict_mean_and_variance(x[:5], noise_scale=0.5)
  print(prediction.stddev.shape, prediction.noise_variance[0])  # (5, 1) [0.25]
  ```
  """

  @property
  def stddev(self):
    return np.sqrt(self.variance)


def _call_kwargs(model):
  # A subclassed model's `call(self, x)` may take no `training` argument;
  # `stateless_call` passes keyword arguments straight to `call`.
  return ({"training": False}
          if getattr(model, "_call_has_training_arg", True) else {})


class Posterior:
  """Posterior samples of a Keras model's weights.

  Each argument is an attribute (`predictive` gives `predictive_name`).

  Args:
    samples: list, per trainable variable, of arrays [num_samples, ...].
    variable_paths: their `variable.path`s, checked against a model.
    predictive: "softmax", "sigmoid", "identity" or a callable on outputs.
    mean, variance: per variable, the running mean and variance of the
      position over `num_transitions` transitions (None: not tracked, or
      no transition yet).
    num_transitions: the number of transitions the moments cover.
    metadata: a JSON-serialisable dict (sampler, N, thinning, acceptance,
      and `noise_scale` for a `GaussianNegativeLogLikelihood` model).
    model: the Keras model the samples are for (needed by `predict`).
    non_trainable_samples: list, per non-trainable variable (a
      BatchNormalization's statistics, ...), of arrays [num_samples, ...]
      (their values at each sample); None: the model's current values.
    non_trainable_paths: their paths.

  #### Example

  ```python
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd",
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampling = sgk.SamplingCallback(sgk.SGLD(step_size=1e-4, seed=1),
                                  num_examples=len(x), prior=1., thinning=8)
  model.fit(x, y, batch_size=32, epochs=2, callbacks=[sampling], verbose=0)
  posterior = sampling.posterior               # 8 samples
  print(posterior.predict(x[:3]))              # [3, 1]: the averaged p(y = 1)
  print(posterior.evaluate_classification(x, y))  # accuracy, nll, ece, ...
  posterior.save("posterior.npz")
  posterior = sgk.Posterior.load("posterior.npz", model=model)
  ```
  """

  def __init__(self, samples, variable_paths, predictive="identity",
               mean=None, variance=None, num_transitions=0, metadata=None,
               model=None, non_trainable_samples=None,
               non_trainable_paths=None):
    self.samples = [np.asarray(s) for s in samples]
    self.variable_paths = list(variable_paths)
    if len(self.samples) != len(self.variable_paths):
      raise ValueError(f"{len(self.samples)} sample arrays for "
                       f"{len(self.variable_paths)} variables.")
    self.non_trainable_samples = (
        None if non_trainable_samples is None
        else [np.asarray(s) for s in non_trainable_samples])
    if self.non_trainable_samples is not None:
      paths = (list(non_trainable_paths) if non_trainable_paths is not None
               else [f"non_trainable_{j}"
                     for j in range(len(self.non_trainable_samples))])
      if len(paths) != len(self.non_trainable_samples):
        raise ValueError(f"{len(self.non_trainable_samples)} non-trainable "
                         f"sample arrays for {len(paths)} paths.")
      self.non_trainable_paths = paths
    else:
      self.non_trainable_paths = None
    counts = {s.shape[0] for s in self.samples +
              (self.non_trainable_samples or [])}
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
    self._functions = {}

  @property
  def num_samples(self):
    return self.samples[0].shape[0] if self.samples else 0

  @property
  def predictive_name(self):
    """"softmax", "sigmoid", "identity" or "custom"."""
    return self._predictive_name

  def sample(self, index):
    """The weights of sample `index`, one array per trainable variable."""
    return [s[index] for s in self.samples]

  def non_trainable_sample(self, index):
    """The non-trainable variables of sample `index` (None: not kept)."""
    if self.non_trainable_samples is None:
      return None
    return [s[index] for s in self.non_trainable_samples]

  def _check_model(self, model):
    if model is None:
      raise ValueError("no model: pass `model=` (a Posterior loaded from "
                       "disk does not hold one).")
    variables = model.trainable_variables
    if not variables and not model.variables:
      raise ValueError(
          f"the model {model.name!r} has no variables yet: a subclassed "
          "model creates them on its first call. Build it with the inputs' "
          "shape first, e.g. `model(x[:1])` or `model.build(input_shape)`.")
    shapes = [tuple(v.shape) for v in variables]
    want = [s.shape[1:] for s in self.samples]
    if shapes != want:
      raise ValueError(
          f"the model's trainable variables have shapes {shapes}; the "
          f"samples are for {want} ({self.variable_paths}).")
    if self.non_trainable_samples is not None:
      shapes = [tuple(v.shape) for v in model.non_trainable_variables]
      want = [s.shape[1:] for s in self.non_trainable_samples]
      if shapes != want:
        raise ValueError(
            f"the model's non-trainable variables have shapes {shapes}; "
            f"the samples hold {want} ({self.non_trainable_paths}).")

  def _function(self, model, transform):
    key = (id(model), transform)
    cached = self._functions.get(key)
    if cached is not None and cached[0] is model:
      return cached[1]
    predictive = self._predictive if transform else (lambda y: y)
    kwargs = _call_kwargs(model)

    def one(weights, non_trainable, inputs):
      outputs, _ = model.stateless_call(weights, non_trainable, inputs,
                                        **kwargs)
      outputs = losses_lib.single_output(outputs)  # As the loss reads it.
      # Mixed precision: the softmax / sigmoid in float32, not float16.
      outputs = tf.nest.map_structure(
          lambda o: tf.cast(o, tf.float32)
          if o.dtype in (tf.float16, tf.bfloat16) else o, outputs)
      return tf.nest.map_structure(lambda o: tf.cast(o, tf.float64),
                                   predictive(outputs))
    function = tf.function(one, reduce_retracing=True, autograph=False)
    self._functions[key] = (model, function)
    return function

  def _per_sample(self, x, batch_size, model, transform=True):
    """Yields, for each sample, its (transformed) outputs on all of x."""
    model = self.model if model is None else model
    self._check_model(model)
    if self.num_samples == 0:
      raise ValueError("no samples kept yet (is sampling past burn-in, and "
                       "thinning smaller than the sampling steps?).")
    batches = inputs_lib.input_batches(x, batch_size)
    function = self._function(model, transform)
    current = [v.value for v in model.non_trainable_variables]
    for s in range(self.num_samples):
      weights = [tf.convert_to_tensor(w, v.dtype)
                 for w, v in zip(self.sample(s), model.trainable_variables)]
      if self.non_trainable_samples is None:
        non_trainable = current
      else:
        non_trainable = [
            tf.convert_to_tensor(w, v.dtype) for w, v in zip(
                self.non_trainable_sample(s), model.non_trainable_variables)]
      outs = [function(weights, non_trainable, b) for b in batches]
      yield tf.nest.map_structure(
          lambda *parts: np.concatenate([p.numpy() for p in parts]), *outs)

  def predict_samples(self, x, batch_size=256, model=None, transform=True):
    """Every sample's prediction: [num_samples, num_inputs, ...].

    Args:
      x, batch_size, model: as in `predict`.
      transform: apply the predictive transform (softmax, sigmoid, ...;
        default), or False for the model's raw outputs.
    """
    per_sample = list(self._per_sample(x, batch_size, model, transform))
    return tf.nest.map_structure(lambda *a: np.stack(a), *per_sample)

  def predict(self, x, batch_size=256, model=None):
    """The Bayesian model average: the predictive averaged over samples.

        p(y | x, D) ~= (1/S) sum_s p(y | x, theta_s),

    with p(y | x, theta) the model output passed through the predictive
    transform (softmax for logits, ...). For a classifier this is the
    averaged class probabilities; for regression the mean of the samples'
    predicted means (`predict_mean_and_variance` adds the spread).

    Args:
      x: an array (or a structure of arrays) of inputs, or a
        finite `tf.data.Dataset` of input batches (or of (x, y) batches).
      batch_size: batch size for arrays.
      model: the model; default the one the samples came from.

    Returns:
      A numpy array [num_inputs, ...].
    """
    total = None
    for out in self._per_sample(x, batch_size, model):
      total = out if total is None else tf.nest.map_structure(
          np.add, total, out)
    average = tf.nest.map_structure(lambda t: t / self.num_samples, total)
    loss_name = self.metadata.get("probabilities_loss")
    if loss_name:  # fitted with a cross-entropy on probabilities
      probabilities_lib.check_probabilities(
          average, loss_name, where="the averaged predictions")
    return average

  def predict_mean_and_variance(self, x, noise_scale=None, head=None,
                                batch_size=256, model=None):
    """Regression: the moments of the predictive mixture.

        p(y | x, D) ~= (1/S) sum_s N(y | mu_s(x), sigma_s(x)^2),
        mean = (1/S) sum_s mu_s,
        variance = (1/S) sum_s sigma_s^2 + (1/S) sum_s (mu_s - mean)^2

    (the mean of the variances plus the variance of the means).

    How the Gaussian head is declared: a model that outputs the mean with
    a known noise scale sigma (loss `GaussianNegativeLogLikelihood(scale)`):
    `noise_scale=sigma`, or nothing after such a fit
    (`metadata["noise_scale"]`; `noise_scale=0.` gives the spread of the
    mean alone); a model that outputs the noise too (trained with
    `NegativeLogLikelihood(fn)`): `head`, a function of the raw output
    returning (mu, sigma) as tensors, the split `fn` makes, e.g.
    `lambda out: (out[..., :1], tf.math.softplus(out[..., 1:]))`.

    Args:
      x, batch_size, model: as in `predict`.
      noise_scale: sigma (a number, or an array broadcasting against the
        outputs); with `head`, leave it None.
      head: a function output -> (mu, sigma); None: the transformed output
        is mu.

    Returns:
      A `RegressionPrediction(mean, variance, epistemic_variance,
      noise_variance)` of numpy arrays; `.stddev` is sqrt(variance).
    """
    if head is not None and noise_scale is not None:
      raise ValueError("give `noise_scale` (the model outputs the mean) or "
                       "`head` (the model outputs mean and scale), not both;"
                       f" got noise_scale={noise_scale!r}.")
    if head is None and noise_scale is None:
      noise_scale = self.metadata.get("noise_scale")
      if noise_scale is None:
        raise ValueError(
            "the noise of the Gaussian head is not known: pass "
            "`noise_scale=sigma` (the scale of your Gaussian likelihood; 0. "
            "for the spread of the mean alone) or `head=fn` returning "
            "(mean, scale) from the model's output.")
    if noise_scale is not None:
      noise_scale = np.asarray(noise_scale, np.float64)
      if np.any(~np.isfinite(noise_scale)) or np.any(noise_scale < 0):
        raise ValueError(f"`noise_scale` must be finite and >= 0; got "
                         f"{noise_scale!r}.")
    if head is not None and not callable(head):
      raise TypeError(f"`head` must be a function of the model output "
                      f"returning (mean, scale); got {head!r}.")
    count, mean_sum, square_sum, noise_sum = 0, 0., 0., 0.
    for out in self._per_sample(x, batch_size, model,
                                transform=head is None):
      if head is None:
        mu = np.asarray(out, np.float64)
        noise = np.broadcast_to(np.square(noise_scale), mu.shape)
      else:
        mu, sigma = head(tf.convert_to_tensor(out))
        mu = np.asarray(mu, np.float64)
        noise = np.square(np.asarray(sigma, np.float64))
      count += 1
      mean_sum = mean_sum + mu
      square_sum = square_sum + np.square(mu)
      noise_sum = noise_sum + noise
    mean = mean_sum / count
    epistemic = np.maximum(square_sum / count - np.square(mean), 0.)
    noise = noise_sum / count
    return RegressionPrediction(mean, epistemic + noise, epistemic, noise)

  def evaluate_classification(self, x, labels, num_bins=15, batch_size=256,
                              model=None):
    """Scores the averaged probabilities on labelled inputs.

    Returns a dict: `accuracy`, `nll` (mean -log p(label)), `ece` (expected
    calibration error, `num_bins` equal-width confidence bins) and
    `mean_entropy` (mean predictive entropy, nats), from the functions of
    `tfp_sgmcmc.keras.evaluation`.
    """
    if self._predictive_name not in ("softmax", "sigmoid", "identity"):
      warnings.warn("the posterior has a custom predictive transform; its "
                    "averaged output is scored as probabilities.",
                    UserWarning, stacklevel=2)
    probs = self.predict(x, batch_size=batch_size, model=model)
    return dict(
        accuracy=evaluation.accuracy(probs, labels),
        nll=evaluation.negative_log_likelihood(probs, labels),
        ece=evaluation.expected_calibration_error(probs, labels, num_bins),
        mean_entropy=float(np.mean(evaluation.predictive_entropy(probs))))

  def to_inference_data(self, dims=None, coords=None):
    """The kept samples as an ArviZ `InferenceData` (one chain).

    Args:
      dims: {variable path: [dimension names]} for each sample's axes, as
        ArviZ takes them.
      coords: {dimension name: values}.

    Returns:
      `arviz.InferenceData` whose `posterior` group has one variable per
      trainable variable, named by its path (e.g. "dense/kernel"), of shape
      [1 chain, num_samples, *variable shape]. A `fit` run is one chain, so
      R-hat needs several runs: `arviz.concat(..., dim="chain")`.

    #### Example

    ```python
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss=sgk.GaussianNegativeLogLikelihood(1.))
    sampling = sgk.SamplingCallback(sgk.SGLD(step_size=1e-4),
                                    num_examples=len(x), prior=1.)
    model.fit(x, y * 1., batch_size=64, epochs=2, callbacks=[sampling])
    idata = sampling.posterior.to_inference_data()   # then arviz.summary(idata)
    ```
    """
    from tfp_sgmcmc.chains import inference_data  # pylint: disable=g-import-not-at-top
    return inference_data.to_inference_data(
        list(self.samples), chain_axis=None, var_names=self.variable_paths,
        dims=dims, coords=coords)

  def save(self, path):
    """Writes the samples (trainable and non-trainable variables), moments
    and metadata to one `.npz` file."""
    return posterior_io.save(self, path)

  @classmethod
  def load(cls, path, model=None, predictive=None):
    """Reads a `Posterior` written by `save`.

    Args:
      path: the file.
      model: the Keras model (same architecture) for `predict`.
      predictive: needed only if the saved predictive was a custom callable.
    """
    return posterior_io.load(cls, path, model=model, predictive=predictive)

  @classmethod
  def from_kept_samples(cls, model, kept, kept_states, likelihood,
                        num_transitions, mean, variance, metadata):
    """The posterior of `SamplingCallback`'s kept samples (see
    `posterior_io.kept_samples_arguments`)."""
    return cls(**posterior_io.kept_samples_arguments(
        model, kept, kept_states, likelihood, num_transitions, mean,
        variance, metadata))

  def __repr__(self):
    return (f"Posterior(num_samples={self.num_samples}, "
            f"variables={len(self.samples)}, "
            f"num_transitions={self.num_transitions})")
