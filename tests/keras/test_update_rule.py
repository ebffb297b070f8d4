"""Each Keras step is the update rule, checked weight by weight: burn-in steps
are SGD on the mean loss, then each SGLD step is a Langevin step with fresh
N(0, 1) noise and the gradient of U at the right scale; a cold SGLD step is
-h N / n times the batch gradient; an AMAGOLD rejection restores the weights
and negates the momentum.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc.keras as sgk
from support.helpers import NUM_SE
from support.keras_fits import iid_batches, regression_model
from support.linear_regression import LinearRegression


class Recorder(keras.callbacks.Callback):
  """Weights (and the sampler's momentum) at the start and every batch end."""

  def __init__(self, sampling=None):
    super().__init__()
    self.sampling = sampling
    self.weights, self.momenta = [], []

  def _record(self):
    self.weights.append([np.array(w) for w in self.model.get_weights()])
    sampler = self.sampling.sampler if self.sampling else None
    if sampler is not None and sampler.built and sampler._uses_momentum:
      self.momenta.append([np.array(r) for r in sampler.momentum])
    else:
      self.momenta.append(None)

  def on_train_begin(self, logs=None):
    self._record()

  def on_train_batch_end(self, batch, logs=None):
    self._record()


def test_burnin_is_sgd_then_each_step_is_a_langevin_step_with_fresh_noise():
  # Full-batch gradients, so every step is deterministic but for the
  # injected noise: burn-in steps are exactly SGD on the mean loss; sampling
  # steps are theta' = theta - h grad U + sqrt(2h) xi with
  # grad U = N grad(mean NLL) - grad log p, so the residuals
  # z = (theta' - theta + h grad U) / sqrt(2h) are independent N(0, 1).
  # The chain starts 30 posterior standard deviations from the mode, so the
  # residuals of its first steps, where grad U is large, would show any
  # error in the scale of the gradient.
  problem = LinearRegression(num_examples=100, dim=2, prior_scale=0.2, seed=5)
  x, y = problem.data
  lr, h, burnin, steps = 1e-3, 2e-4, 5, 2000
  model = regression_model(problem.posterior_mean + [3., -3.])
  model.compile(optimizer=keras.optimizers.SGD(lr),
                loss=sgk.GaussianNegativeLogLikelihood(problem.noise_scale))
  sampling = sgk.SamplingCallback(
      sgk.SGLD(step_size=h, seed=4), num_examples=problem.num_examples,
      prior=problem.prior_scale, burnin_steps=burnin, thinning=1,
      max_samples=10)
  recorder = Recorder(sampling)
  compiled = model.optimizer
  full_batch = tf.data.Dataset.from_tensors((x, y)).repeat()
  model.fit(full_batch, epochs=1, steps_per_epoch=burnin + steps,
            shuffle=False, verbose=0, callbacks=[sampling, recorder])
  w = np.array([r[0][:, 0] for r in recorder.weights], np.float64)

  n = problem.num_examples
  for k in range(burnin):
    sgd = w[k] - lr * problem.per_example_gradients(w[k]).sum(0) / n
    np.testing.assert_allclose(w[k + 1], sgd, rtol=1e-6)
  assert model.optimizer is compiled  # Restored after fit.

  grads = np.array([problem.gradient(v) for v in w[burnin:-1]])
  z = (w[burnin + 1:] - w[burnin:-1] + h * grads) / np.sqrt(2. * h)
  m = z.size
  assert abs(z.mean()) < NUM_SE / np.sqrt(m)
  assert abs(z.var() - 1.) < NUM_SE * np.sqrt(2. / m)
  # No part of grad U is mis-scaled: z is uncorrelated with grad U (the
  # regression slope of z on grad U is 0 within 4 standard errors).
  slope = np.sum(z * grads) / np.sum(grads ** 2)
  assert abs(slope) < NUM_SE / np.sqrt(np.sum(grads ** 2))
  # Fresh noise at every step: an integer seed would repeat the same draw.
  lag1 = np.mean(z[1:] * z[:-1])
  assert abs(lag1) < NUM_SE / np.sqrt(m)
  assert len(sampling.samples) == 10  # max_samples bounds the buffer.


def test_a_cold_sgld_step_is_minus_h_times_n_over_n_batch_gradient():
  # At temperature 1e-30 the noise (sd sqrt(2 h T) ~ 1e-17) vanishes in
  # float32, so each Keras SGLD step is theta - h grad U~ exactly, with
  # grad U~ = N / n sum over the batch of g_i + theta / prior_scale^2: a
  # scale error in the minibatch energy (N, n, the prior) of 1e-3 fails.
  problem = LinearRegression(num_examples=100, dim=2, prior_scale=0.5, seed=5)
  x, y = problem.data
  h, n = 1e-4, 20
  idx = np.random.default_rng(0).integers(0, 100, size=(5, n)).astype(
      np.int32)
  model = regression_model(problem.posterior_mean + [1., -1.])
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(problem.noise_scale))
  sampling = sgk.SamplingCallback(
      sgk.SGLD(step_size=h, temperature=1e-30, seed=1),
      num_examples=problem.num_examples, prior=problem.prior_scale)
  recorder = Recorder(sampling)
  data = tf.data.Dataset.from_tensor_slices(idx).map(
      lambda i: (tf.gather(x, i), tf.gather(y, i)))
  model.fit(data, epochs=1, shuffle=False, verbose=0,
            callbacks=[sampling, recorder])
  w = np.array([r[0][:, 0] for r in recorder.weights], np.float64)
  for k in range(len(idx)):
    grad = (problem.num_examples / n *
            problem.per_example_gradients(w[k])[idx[k]].sum(0) +
            w[k] / problem.prior_scale ** 2)
    np.testing.assert_allclose(w[k + 1] - w[k], -h * grad, rtol=1e-4)


def test_amagold_rejection_restores_weights_and_negates_the_momentum():
  # A step size far too large: every trajectory wanders off and is rejected.
  problem = LinearRegression(num_examples=100, dim=2, seed=6)
  x, y = problem.data
  model = regression_model(problem.posterior_mean)
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(1.))
  sampling = sgk.SamplingCallback(
      sgk.AMAGOLD(step_size=2., num_leapfrog_steps=4, friction=0.1,
                  resample_momentum=False, seed=7),
      num_examples=problem.num_examples, prior=1., thinning=1,
      energy_data=(x, y))
  recorder = Recorder(sampling)
  before = [np.array(v) for v in model.get_weights()]
  history = model.fit(iid_batches(problem, 12, seed=0, batch_size=20),
                      epochs=1, shuffle=False, verbose=0,
                      callbacks=[sampling, recorder])
  assert (sampling.num_tests, sampling.num_accepted) == (3, 0)
  assert history.history["accept_rate"] == [0.]
  assert history.history["exact_energy"][0] == pytest.approx(
      problem.energy(before[0][:, 0]), rel=1e-5)
  # The trajectories moved the weights far away ...
  moved = max(np.max(np.abs(r[0] - before[0])) for r in recorder.weights[1:])
  assert moved > 1.
  # ... and every rejection restored them: the chain never left theta_0.
  for s in sampling.samples:
    np.testing.assert_array_equal(s[0], before[0])
  for a, b in zip(model.get_weights(), before):
    np.testing.assert_array_equal(a, b)
  # Skew-reversible rejection: r <- -r0, so the momentum alternates.
  r0 = recorder.momenta[0][0]
  np.testing.assert_array_equal(recorder.momenta[4][0], -r0)
  np.testing.assert_array_equal(recorder.momenta[8][0], r0)
  np.testing.assert_array_equal(recorder.momenta[12][0], -r0)


def test_a_missing_seed_is_drawn_as_keras_draws_one():
  # keras.utils.set_random_seed makes a Keras training run repeatable; a
  # sampler built without a seed follows it, as Keras' own SeedGenerator
  # does (the same seed and data give the same chain).
  def seeds():
    return [sgk.SGLD(step_size=1e-3).seed,
            sgk.SGHMC(step_size=1e-3, friction=1.).seed]
  keras.utils.set_random_seed(0)
  first = seeds()
  keras.utils.set_random_seed(0)
  again = seeds()
  assert first == again and first[0] != first[1]


@pytest.mark.parametrize("sampler", ["sgld", "sghmc", "amagold"])
def test_a_pipeline_of_unknown_length_runs_the_same_chain(sampler):
  # Over a dataset of unknown cardinality (here a `.filter`) Keras ends
  # every epoch with a train call whose get_next fails. The sampler's
  # writes that do not read the data ran in it: the running moments
  # counted 20 transitions for 15 (their variance 8-21% low) and
  # AMAGOLD's leapfrog counter ran ahead (RuntimeError, "3 steps ran").
  rng = np.random.default_rng(0)
  x = rng.normal(size=(60, 3)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.float32)
  runs = []
  for unknown in (False, True):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss=keras.losses.BinaryCrossentropy(
        from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(20)
    if unknown:
      data = data.filter(lambda a, b: True)
    chosen = {"sgld": lambda: sgk.SGLD(1e-3, seed=1),
              "sghmc": lambda: sgk.SGHMC(
                  0.05, 2., integrator="splitting",
                  momentum_resampling_period=2, seed=1),
              "amagold": lambda: sgk.AMAGOLD(0.05, 2, 1., seed=1)}[sampler]
    sampling = sgk.SamplingCallback(
        chosen(), num_examples=60, prior=1., burnin_epochs=1,
        energy_data=(x, y) if sampler == "amagold" else None)
    model.fit(data, epochs=5, verbose=0, shuffle=False,
              callbacks=[sampling])
    count, mean, variance = sampling.sampler.moments()
    runs.append((float(count), mean + variance, model.get_weights()))
  (count, moments, weights), (count_u, moments_u, weights_u) = runs
  assert count_u == count == (12 if sampler != "amagold" else 6)
  for a, b in zip(moments + weights, moments_u + weights_u):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
