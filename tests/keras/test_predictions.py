"""Predictions from kept samples: per-sample outputs, averages, regression
spread, classification scores, non-trainable state, subclassed models, the
Bayesian model average of a fit saved and loaded.

Known answers: the scores on small hand-computed arrays; the mixture's
variance on constructed samples against E[y^2] - E[y]^2 computed the other
way round; predictions after save/load equal to those before, BatchNorm
statistics included.
"""

import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc.keras as sgk
from tfp_sgmcmc.keras.fit import backup as backup_lib
from tfp_sgmcmc.keras import evaluation
from support.keras_fits import logistic_setup


# --- scores on hand-computed arrays -----------------------------------------

PROBS = np.array([[0.7, 0.2, 0.1],     # confidence 0.7, correct
                  [0.1, 0.6, 0.3],     # confidence 0.6, wrong (label 2)
                  [0.25, 0.25, 0.5],   # confidence 0.5, correct
                  [0.05, 0.9, 0.05]])  # confidence 0.9, correct
LABELS = np.array([0, 2, 2, 1])


def test_nll_entropy_accuracy_by_hand():
  want_nll = -(math.log(0.7) + math.log(0.3) + math.log(0.5) +
               math.log(0.9)) / 4
  assert evaluation.negative_log_likelihood(PROBS, LABELS) == pytest.approx(
      want_nll, rel=1e-12)
  # One-hot labels give the same.
  assert sgk.negative_log_likelihood(PROBS, np.eye(3)[LABELS]) == (
      pytest.approx(want_nll, rel=1e-12))
  h = -np.array([0.7 * math.log(0.7) + 0.2 * math.log(0.2) +
                 0.1 * math.log(0.1),
                 0.1 * math.log(0.1) + 0.6 * math.log(0.6) +
                 0.3 * math.log(0.3),
                 2 * 0.25 * math.log(0.25) + 0.5 * math.log(0.5),
                 0.9 * math.log(0.9) + 2 * 0.05 * math.log(0.05)])
  np.testing.assert_allclose(sgk.predictive_entropy(PROBS), h, rtol=1e-12)
  # 0 log 0 = 0, and the maximum log k.
  np.testing.assert_allclose(
      sgk.predictive_entropy([[1., 0., 0.], [1 / 3, 1 / 3, 1 / 3]]),
      [0., math.log(3)], rtol=1e-12, atol=1e-15)
  assert sgk.accuracy(PROBS, LABELS) == 0.75
  # Binary: one sigmoid column p(y = 1).
  p = np.array([0.8, 0.3, 0.6])
  assert sgk.negative_log_likelihood(p[:, None], [1, 0, 0]) == (
      pytest.approx(-(math.log(0.8) + math.log(0.7) + math.log(0.4)) / 3))
  np.testing.assert_allclose(
      sgk.predictive_entropy(p), -(p * np.log(p) + (1 - p) * np.log(1 - p)))


def test_expected_calibration_error_by_hand():
  # 10 bins: 0.7 -> (0.6, 0.7], 0.6 -> (0.5, 0.6], 0.5 -> (0.4, 0.5],
  # 0.9 -> (0.8, 0.9]; one input each: sum of |correct - confidence| / 4.
  want = (abs(1 - 0.7) + abs(0 - 0.6) + abs(1 - 0.5) + abs(1 - 0.9)) / 4
  assert sgk.expected_calibration_error(PROBS, LABELS, num_bins=10) == (
      pytest.approx(want, rel=1e-12))
  # One bin: |accuracy - mean confidence| = |0.75 - 0.675|.
  assert sgk.expected_calibration_error(PROBS, LABELS, num_bins=1) == (
      pytest.approx(0.075, rel=1e-12))
  # Two bins: (0, 0.5] holds 0.5 (correct); (0.5, 1] holds 0.7, 0.6, 0.9
  # with 2 of 3 correct: 1/4 * 0.5 + 3/4 * |2/3 - 2.2/3|.
  assert sgk.expected_calibration_error(PROBS, LABELS, num_bins=2) == (
      pytest.approx(0.25 * 0.5 + 0.75 * abs(2 / 3 - 2.2 / 3), rel=1e-12))


def test_scores_refuse_logits_and_bad_labels():
  with pytest.raises(ValueError, match="not probabilities.*logits"):
    sgk.negative_log_likelihood(np.log(PROBS) + 3., LABELS)
  with pytest.raises(ValueError, match="not probabilities"):
    sgk.expected_calibration_error(PROBS * 2., LABELS)
  with pytest.raises(ValueError, match=r"labels must be integer classes in "
                     r"\[0, 3\)"):
    sgk.accuracy(PROBS, [0, 1, 2, 3])
  with pytest.raises(ValueError, match="3 labels for 4 predictions"):
    sgk.negative_log_likelihood(PROBS, [0, 1, 2])
  with pytest.raises(ValueError, match="num_bins"):
    sgk.expected_calibration_error(PROBS, LABELS, num_bins=0)


# --- regression: per-sample outputs and the mixture's moments ---------------

def line_model(units=1):
  return keras.Sequential([keras.Input((1,)), keras.layers.Dense(units)])


def constructed_posterior(units=1, num_samples=7, seed=0):
  rng = np.random.default_rng(seed)
  kernels = rng.normal(size=(num_samples, 1, units)).astype(np.float32)
  biases = rng.normal(size=(num_samples, units)).astype(np.float32)
  model = line_model(units)
  return sgk.Posterior([kernels, biases], ["k", "b"], model=model), (
      kernels, biases)


def test_mixture_variance_is_mean_of_variances_plus_variance_of_means():
  x = np.array([[-1.], [0.], [0.5], [2.]], np.float32)
  posterior, (k, b) = constructed_posterior()
  mu = k[:, 0, 0][:, None] * x[:, 0][None] + b[:, 0][:, None]   # [S, n]
  per_sample = posterior.predict_samples(x, batch_size=3)
  assert per_sample.shape == (7, 4, 1)
  np.testing.assert_allclose(per_sample[..., 0], mu, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(posterior.predict(x), per_sample.mean(0),
                             rtol=1e-12)
  sigma = 0.3
  pred = posterior.predict_mean_and_variance(x, noise_scale=sigma)
  # E[y^2] - E[y]^2 of the mixture, the other way round.
  second_moment = np.mean(np.square(mu) + sigma ** 2, axis=0)
  np.testing.assert_allclose(pred.mean[:, 0], mu.mean(0), rtol=1e-5)
  np.testing.assert_allclose(pred.variance[:, 0],
                             second_moment - np.square(mu.mean(0)),
                             rtol=1e-4)
  np.testing.assert_allclose(pred.epistemic_variance[:, 0], mu.var(0),
                             rtol=1e-4)
  np.testing.assert_allclose(pred.noise_variance, sigma ** 2)
  np.testing.assert_allclose(pred.stddev, np.sqrt(pred.variance))
  # noise_scale=0: the spread of the mean alone.
  np.testing.assert_allclose(
      posterior.predict_mean_and_variance(x, noise_scale=0.).variance[:, 0],
      mu.var(0), rtol=1e-4)
  with pytest.raises(ValueError, match="noise of the Gaussian head is not "
                     "known.*noise_scale=sigma"):
    posterior.predict_mean_and_variance(x)
  with pytest.raises(ValueError, match="noise_scale.*>= 0"):
    posterior.predict_mean_and_variance(x, noise_scale=-1.)


def test_heteroscedastic_head_mixture_variance():
  x = np.array([[-1.], [0.], [1.5]], np.float32)
  posterior, (k, b) = constructed_posterior(units=2, num_samples=5, seed=3)
  raw = (x[None, :, :] @ k) + b[:, None, :]                     # [S, n, 2]
  mu, sigma = raw[..., 0], np.log1p(np.exp(raw[..., 1]))
  np.testing.assert_allclose(posterior.predict_samples(x, transform=False),
                             raw, rtol=1e-5, atol=1e-6)
  import tensorflow as tf
  pred = posterior.predict_mean_and_variance(
      x, head=lambda out: (out[..., 0], tf.math.softplus(out[..., 1])))
  np.testing.assert_allclose(pred.mean, mu.mean(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(
      pred.variance,
      np.mean(mu ** 2 + sigma ** 2, 0) - mu.mean(0) ** 2, rtol=1e-4)
  np.testing.assert_allclose(pred.noise_variance, np.mean(sigma ** 2, 0),
                             rtol=1e-5)
  with pytest.raises(ValueError, match="not both"):
    posterior.predict_mean_and_variance(x, noise_scale=1., head=lambda o: o)


def test_regression_fit_records_the_noise_scale(tmp_path):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 1)).astype(np.float32)
  y = (2. * x[:, 0] + 0.5 * rng.normal(size=64)).astype(np.float32)
  model = line_model()
  model.compile(optimizer="sgd", loss=sgk.GaussianNegativeLogLikelihood(0.5))
  sampling = sgk.SamplingCallback(sgk.SGLD(1e-4, seed=1), num_examples=64,
                                  prior=1., thinning=2)
  model.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[sampling])
  posterior = sampling.posterior
  assert posterior.metadata["noise_scale"] == 0.5
  pred = posterior.predict_mean_and_variance(x[:5])
  np.testing.assert_allclose(pred.noise_variance, 0.25)
  per_sample = posterior.predict_samples(x[:5])
  np.testing.assert_allclose(pred.epistemic_variance,
                             per_sample.var(0), rtol=1e-4, atol=1e-12)
  loaded = sgk.Posterior.load(sampling.save(tmp_path / "p.npz"),
                              model=line_model())
  np.testing.assert_allclose(
      loaded.predict_mean_and_variance(x[:5]).variance, pred.variance,
      rtol=1e-6)


# --- classification through fit: scores and BatchNorm state ----------------

def blobs(n=240, seed=0):
  rng = np.random.default_rng(seed)
  y = rng.integers(0, 3, n)
  centres = np.array([[2., 0.], [-1., 1.7], [-1., -1.7]])
  # An offset and scale far from BatchNorm's initial statistics (0, 1), so
  # that a model predicting with them is visibly wrong.
  x = 5. + 4. * (centres[y] + 0.6 * rng.normal(size=(n, 2)))
  return x.astype(np.float32), y.astype(np.int32)


def bn_model():
  return keras.Sequential([
      keras.Input((2,)), keras.layers.BatchNormalization(),
      keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])


def test_batchnorm_statistics_are_kept_per_sample_and_saved(tmp_path):
  keras.utils.set_random_seed(0)
  x, y = blobs()
  model = bn_model()
  model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
  sampling = sgk.SamplingCallback(
      sgk.SGHMC.from_sgd_momentum(learning_rate=0.01 / len(x),
                                  momentum_decay=0.1, seed=2),
      num_examples=len(x), prior=1., burnin_epochs=4, thinning=6)
  model.fit(x, y, batch_size=24, epochs=7, verbose=0, callbacks=[sampling])
  posterior = sampling.posterior
  assert posterior.num_samples == 5
  moving = [j for j, p in enumerate(posterior.non_trainable_paths)
            if "moving_mean" in p]
  assert len(moving) == 1
  means = posterior.non_trainable_samples[moving[0]]
  assert means.shape == (5, 2)
  # Sampling moves the statistics: each sample has its own.
  assert np.all(np.ptp(means, axis=0) > 0)
  scores = posterior.evaluate_classification(x, y, num_bins=10)
  assert scores["accuracy"] > 0.9, scores
  probs = posterior.predict(x)
  assert scores["nll"] == pytest.approx(
      sgk.negative_log_likelihood(probs, y))

  # The backup beside BackupAndRestore carries them too.
  sampling.backup_dir = str(tmp_path / "backup")
  backup_lib.save_backup(sampling, 7)
  # What BackupAndRestore would have written after it.
  model.save_weights(str(tmp_path / "backup" / "latest.weights.h5"))
  with open(tmp_path / "backup" / "training_metadata.json", "w") as f:
    json.dump({"epoch": 7}, f)
  sampling._sample_states.clear()  # pylint: disable=protected-access
  assert backup_lib.restore_backup(sampling)
  np.testing.assert_array_equal(
      sampling.posterior.non_trainable_samples[moving[0]], means)

  path = posterior.save(tmp_path / "bn.npz")
  fresh = bn_model()   # moving statistics 0 and 1
  loaded = sgk.Posterior.load(path, model=fresh)
  np.testing.assert_allclose(loaded.predict(x), probs, rtol=1e-5, atol=1e-7)
  assert loaded.evaluate_classification(x, y, num_bins=10) == (
      pytest.approx(scores))
  # What was lost before: the fresh model's statistics with the samples.
  without = sgk.Posterior(loaded.samples, loaded.variable_paths,
                          predictive="softmax", model=fresh)
  assert sgk.accuracy(without.predict(x), y) < scores["accuracy"] - 0.1


def test_version_1_file_without_statistics_warns(tmp_path):
  model = bn_model()
  posterior = sgk.Posterior([v.numpy()[None] for v in
                             model.trainable_variables],
                            [v.path for v in model.trainable_variables],
                            predictive="softmax")
  path = posterior.save(tmp_path / "old.npz")
  with pytest.warns(UserWarning, match="without the non-trainable "
                    "variables.*BatchNormalization"):
    sgk.Posterior.load(path, model=bn_model())


# --- subclassed models --------------------------------------------------------

class NoTrainingArg(keras.Model):

  def __init__(self):
    super().__init__()
    self.hidden = keras.layers.Dense(8, activation="relu")
    self.out = keras.layers.Dense(3)

  def call(self, x):   # no `training` argument
    return self.out(self.hidden(x))


def test_subclassed_model_without_training_argument():
  x, y = blobs(96)
  x = (x - 5.) / 4.
  model = NoTrainingArg()
  model(x[:1])
  model.compile(optimizer="sgd",
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
  sampling = sgk.SamplingCallback(sgk.SGLD(1e-5, seed=1), num_examples=96,
                                  prior=1., thinning=2)
  model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[sampling])
  probs = sampling.predict(x)
  assert probs.shape == (96, 3)
  np.testing.assert_allclose(probs.sum(1), 1., rtol=1e-6)
  assert sampling.posterior.predict_samples(x[:4]).shape == (
      sampling.posterior.num_samples, 4, 3)

  unbuilt = NoTrainingArg()
  unbuilt.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
  with pytest.raises(ValueError, match=r"no variables yet.*model\(x\[:1\]\)"):
    unbuilt.fit(x, y, epochs=1, verbose=0, callbacks=[sgk.SamplingCallback(
        sgk.SGLD(1e-5, seed=1), num_examples=96, prior=1.)])
  with pytest.raises(ValueError, match="no variables yet"):
    sampling.posterior.predict(x, model=NoTrainingArg())


# --- the Bayesian model average of a fit, saved and loaded ------------------


def test_predict_is_the_average_of_sample_probabilities_and_saves(tmp_path):
  x, y, make = logistic_setup()
  model = make()
  model.compile(optimizer="sgd", loss=keras.losses.BinaryCrossentropy(
      from_logits=True))
  sampling = sgk.SamplingCallback(
      sgk.SGHMC.from_sgd_momentum(learning_rate=1e-3, momentum_decay=0.1,
                                  seed=8),
      num_examples=len(x), prior=sgk.GaussianPrior(2.), burnin_epochs=1,
      thinning=5, max_samples=7)
  history = model.fit(x, y, batch_size=20, epochs=6, verbose=0,
                      callbacks=[sampling])
  for key in ("energy", "step_size"):
    assert len(history.history[key]) == 6  # In History from epoch 0 on.
  assert np.isnan(history.history["step_size"][0])
  assert history.history["step_size"][-1] == pytest.approx(np.sqrt(1e-3))
  posterior = sampling.posterior
  assert posterior.num_samples == 7
  probs = sampling.predict(x, batch_size=64)
  manual = []
  for s in range(posterior.num_samples):
    kernel = posterior.samples[0][s]
    bias = posterior.samples[1][s]
    manual.append(1. / (1. + np.exp(-(x @ kernel + bias))))
  np.testing.assert_allclose(probs, np.mean(manual, 0), rtol=1e-5)

  path = sampling.save(tmp_path / "posterior.npz")
  loaded = sgk.Posterior.load(path, model=make())
  for a, b in zip(loaded.samples, posterior.samples):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(loaded.mean + loaded.variance,
                  posterior.mean + posterior.variance):
    np.testing.assert_array_equal(a, b)
  assert loaded.num_transitions == posterior.num_transitions > 0
  assert loaded.metadata["sampler"] == "SGHMC"
  np.testing.assert_allclose(loaded.predict(x, batch_size=50), probs,
                             rtol=1e-6)
  with pytest.raises(ValueError, match="shapes"):
    sgk.Posterior.load(path, model=keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(1)]))


def test_predict_reads_a_finite_dataset_and_refuses_an_infinite_one():
  x, y, make = logistic_setup(n=60)
  model = make()
  model.compile(optimizer="sgd", loss=keras.losses.BinaryCrossentropy(
      from_logits=True))
  sampling = sgk.SamplingCallback(sgk.SGLD(step_size=1e-3, seed=2),
                                  num_examples=len(x), prior=1., thinning=3)
  model.fit(x, y, batch_size=20, epochs=3, verbose=0, callbacks=[sampling])
  batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(25)
  np.testing.assert_array_equal(sampling.predict(batches),
                                sampling.predict(x))
  # The training pipeline with .repeat() was read into memory without
  # end (the call never returned). A counter stops the old reading.
  read = []

  def count(batch):
    read.append(1)
    if len(read) > 50:
      raise RuntimeError("read 50 batches of an infinite dataset")
    return batch
  infinite = batches.repeat().map(
      lambda a, b: (tf.py_function(count, [a], tf.float32), b))
  with pytest.raises(ValueError, match=r"infinite tf.data.Dataset.*never "
                     r"end.*take\(num_batches\)"):
    sampling.predict(infinite)
  assert not read
