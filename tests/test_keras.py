"""The Keras adapter: the same posterior as the TFP kernels, through `fit`.

Bayesian linear regression (tests/linear_regression.py) written as a Keras
model: Dense(1, no bias) with the Gaussian log-likelihood and a N(0, 1)
prior. The minibatches are i.i.d. draws with replacement (as the TFP
`InMemoryTarget` draws them), so the Lyapunov prediction of the stationary
covariance (tests/helpers.py) holds for the Keras chain as for the kernel.
Tolerances: 4 Monte Carlo standard errors from the ESS, nothing else.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
import tfp_sgmcmc.keras as sgk
from support.helpers import NUM_SE, mean_and_se, sample, stationary_covariance
from support.helpers import variance_and_se
from support.linear_regression import LinearRegression
from support.paths import WORKERS

BATCH = 50


@pytest.fixture(scope="module")
def problem():
  return LinearRegression(num_examples=500, dim=2, seed=1)


def regression_model(init):
  return keras.Sequential([
      keras.Input((len(init),)),
      keras.layers.Dense(1, use_bias=False,
                         kernel_initializer=keras.initializers.Constant(
                             np.reshape(init, (-1, 1))))])


def iid_batches(problem, num_batches, seed, batch_size=BATCH):
  """Minibatches drawn with replacement, independently at every step."""
  x, y = problem.data
  idx = np.random.default_rng(seed).integers(
      0, problem.num_examples, size=(num_batches, batch_size)).astype(np.int32)
  return tf.data.Dataset.from_tensor_slices(idx).map(
      lambda i: (tf.gather(x, i), tf.gather(y, i)))


def fit_regression(problem, sampler, num_steps, steps_per_execution=1,
                   jit_compile=False, thinning=None, seed=0, **kwargs):
  model = regression_model(problem.posterior_mean)
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(problem.noise_scale),
                steps_per_execution=steps_per_execution,
                jit_compile=jit_compile)
  callback = sgk.SamplingCallback(
      sampler, num_examples=problem.num_examples, prior=problem.prior_scale,
      thinning=thinning or steps_per_execution, max_samples=10 ** 6,
      **kwargs)
  epochs = 10
  model.fit(iid_batches(problem, num_steps, seed), epochs=epochs,
            steps_per_epoch=num_steps // epochs, shuffle=False, verbose=0,
            callbacks=[callback])
  return model, callback


def kept_draws(callback):
  """The kept samples as [num_samples, 1 chain, dim] float64."""
  return callback.posterior.samples[0][:, None, :, 0].astype(np.float64)


# --- the posterior: Keras and tfp.mcmc agree with each other and the truth --


def test_keras_sghmc_matches_tfp_sghmc_and_the_predicted_posterior(problem):
  # Splitting SGHMC, XLA-compiled train steps (jit_compile=True), 20 steps
  # per execution. Reference: the exact stationary covariance of the
  # discretised chain with this minibatch noise (Lyapunov equation).
  h, c = 3e-3, 30.
  predicted = stationary_covariance(
      "splitting", problem.precision, h, c,
      gradient_noise=problem.minibatch_gradient_covariance(BATCH))
  _, callback = fit_regression(
      problem, sgk.SGHMC(step_size=h, friction=c, integrator="splitting",
                         seed=1),
      num_steps=60000, steps_per_execution=20, jit_compile=True)
  keras_draws = kept_draws(callback)
  target = problem.in_memory_target(batch_size=BATCH)
  kernel = sg.SGHMC(target, step_size=h, friction=c, integrator="splitting")
  init = tf.constant(np.tile(problem.posterior_mean, (8, 1)), tf.float32)
  tfp_draws = np.asarray(sample(kernel, init, 20000, seed=[1, 2],
                                num_burnin_steps=500), np.float64)

  estimates = {}
  for name, draws in (("keras", keras_draws), ("tfp", tfp_draws)):
    mean, mean_se = mean_and_se(draws)
    assert np.all(np.abs(mean - problem.posterior_mean) < NUM_SE * mean_se)
    var, var_se = variance_and_se(draws, mean=problem.posterior_mean)
    assert np.all(np.abs(var - np.diag(predicted)) < NUM_SE * var_se), name
    # The minibatch-noise bias is predicted and seen, not hidden.
    assert np.all(var - np.diag(problem.posterior_cov) > NUM_SE * var_se)
    estimates[name] = (var, var_se)
  (var_k, se_k), (var_t, se_t) = estimates["keras"], estimates["tfp"]
  assert np.all(np.abs(var_k - var_t) < NUM_SE * np.hypot(se_k, se_t))

  # The running moments (every step, in the train step) see the same chain.
  posterior = callback.posterior
  assert posterior.num_transitions == 60000
  running_var = posterior.variance[0].ravel()
  assert np.all(np.abs(running_var - np.diag(predicted)) < NUM_SE * se_k)


def test_keras_amagold_and_tfp_amagold_are_exact(problem):
  # Real minibatch noise and a step size at which acceptance is about one
  # half: both front ends sample the analytic posterior.
  sigma = float(np.sqrt(np.max(np.linalg.eigvalsh(problem.precision))))
  x, y = problem.data
  _, callback = fit_regression(
      problem, sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=10, friction=1.,
                           momentum_std=sigma, seed=2),
      num_steps=30000, steps_per_execution=10, thinning=1,
      jit_compile=True, energy_data=(x, y), energy_batch_size=128)
  assert callback.num_tests == 3000
  assert 0.3 < callback.acceptance_rate < 0.99
  target = problem.in_memory_target(batch_size=BATCH, energy_chunk_size=128)
  kernel = sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=10,
                      friction=1., momentum_std=sigma)
  init = tf.constant(np.tile(problem.posterior_mean, (8, 1)), tf.float32)
  tfp_draws = np.asarray(sample(kernel, init, 1500, seed=[7, 8],
                                num_burnin_steps=100), np.float64)
  for draws in (kept_draws(callback), tfp_draws):
    mean, mean_se = mean_and_se(draws)
    assert np.all(np.abs(mean - problem.posterior_mean) < NUM_SE * mean_se)
    var, var_se = variance_and_se(draws, mean=problem.posterior_mean)
    assert np.all(np.abs(var - np.diag(problem.posterior_cov)) <
                  NUM_SE * var_se)


@pytest.mark.parametrize("name", ["sgnht", "psgld"])
def test_other_samplers_run_in_keras_and_find_the_posterior_mean(problem,
                                                                 name):
  sampler = (sgk.SGNHT(step_size=3e-3, diffusion=10., seed=3)
             if name == "sgnht" else
             sgk.PreconditionedSGLD(step_size=1e-4, decay=0.99, seed=3))
  _, callback = fit_regression(problem, sampler, num_steps=20000,
                               steps_per_execution=20)
  draws = kept_draws(callback)
  mean, mean_se = mean_and_se(draws)
  assert np.all(np.abs(mean - problem.posterior_mean) < NUM_SE * mean_se)
  # The chain moves: its spread is of the posterior's order, not zero.
  assert np.all(draws.std(axis=0) > 0.2 * np.sqrt(
      np.diag(problem.posterior_cov)))


# --- the update rule ---------------------------------------------------------


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


def test_a_second_fit_continues_the_chain_from_its_position(problem):
  # Splitting SGHMC keeps its variables half a drift ahead during fit; at
  # the end of fit they hold the chain's position (the last kept sample),
  # the compiled optimizer is back, and a second fit with the same callback
  # continues the same chain (step count, momentum, samples).
  model = regression_model(problem.posterior_mean)
  sgd = keras.optimizers.SGD(1e-3)
  model.compile(optimizer=sgd, loss=sgk.GaussianNegativeLogLikelihood(1.))
  sampling = sgk.SamplingCallback(
      sgk.SGHMC(step_size=3e-3, friction=30., integrator="splitting",
                momentum_resampling_period=7, seed=9),
      num_examples=problem.num_examples, prior=1., thinning=10)
  data = iid_batches(problem, 200, seed=3)
  model.fit(data.take(100), epochs=1, shuffle=False, verbose=0,
            callbacks=[sampling])
  np.testing.assert_array_equal(model.get_weights()[0],
                                sampling.samples[-1][0])
  assert model.optimizer is sgd
  momentum = [np.array(r) for r in sampling.sampler.momentum]
  model.fit(data.skip(100), epochs=1, shuffle=False, verbose=0,
            callbacks=[sampling])
  assert sampling.sampler.step_count == 200
  assert len(sampling.samples) == 20
  assert sampling.posterior.num_transitions == 200
  np.testing.assert_array_equal(model.get_weights()[0],
                                sampling.samples[-1][0])
  assert not np.array_equal(sampling.samples[-1][0], sampling.samples[9][0])
  assert not np.array_equal(momentum[0], sampling.sampler.momentum[0])


def count_train_step_traces(model):
  """A list that gets the optimizer's class name each time `model`'s train
  step is traced (the appending runs only while tracing)."""
  traces = []
  train_step = model.train_step

  def counting_train_step(data):
    traces.append(type(model.optimizer).__name__)
    return train_step(data)
  model.train_step = counting_train_step
  return traces


def test_later_fits_retrace_no_train_step(problem):
  # Each optimizer's train step is traced once per compile: the burn-in
  # optimizer's and the sampler's train functions are swapped in with their
  # optimizers, not rebuilt, so a second and third `fit` trace nothing. A
  # new `compile` (possibly a new loss) makes them anew (here only the
  # sampler's runs: the burn-in is over).
  model = regression_model(problem.posterior_mean)
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(1.))
  traces = count_train_step_traces(model)
  sampling = sgk.SamplingCallback(
      sgk.SGHMC(step_size=3e-3, friction=30., seed=9),
      num_examples=problem.num_examples, prior=1., burnin_steps=5)
  data = iid_batches(problem, 20, seed=3)
  for _ in range(3):
    model.fit(data, epochs=1, verbose=0, callbacks=[sampling])
    assert traces == ["SGD", "SGHMC"]
  assert sampling.sampler.step_count == 55
  model.compile(optimizer=model.optimizer,
                loss=sgk.GaussianNegativeLogLikelihood(1.))
  model.fit(data, epochs=1, verbose=0, callbacks=[sampling])
  assert traces == ["SGD", "SGHMC", "SGHMC"]
  assert sampling.sampler.step_count == 75


def test_amagold_test_is_one_call_traced_once_over_fits(problem,
                                                        monkeypatch):
  # AMAGOLD's M-H test (full-data energy, test, health check) is one
  # compiled function, under XLA here as the train step is, traced once:
  # later fits with the same callback retrace neither it nor the train step.
  x, y = problem.data
  model = regression_model(problem.posterior_mean)
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(problem.noise_scale),
                jit_compile=True)
  traces = count_train_step_traces(model)
  test_function = sgk.AMAGOLD.test_function

  def counting_test_function(self, energy_fn, after_fn, jit_compile=False):
    def counting_energy_fn(*args):
      traces.append("M-H test")  # Runs while tracing.
      return energy_fn(*args)
    return test_function(self, counting_energy_fn, after_fn, jit_compile)
  monkeypatch.setattr(sgk.AMAGOLD, "test_function", counting_test_function)
  sampling = sgk.SamplingCallback(
      sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=5, friction=1.,
                  momentum_std=20., seed=4),
      num_examples=problem.num_examples, prior=problem.prior_scale,
      energy_data=(x, y), energy_batch_size=128)
  for _ in range(3):
    model.fit(iid_batches(problem, 20, seed=5), epochs=1, verbose=0,
              callbacks=[sampling])
  assert traces == ["AMAGOLD", "M-H test"]
  assert sampling.num_tests == 12


def test_amagold_energy_data_as_a_dataset_gives_the_chain_of_arrays(problem):
  # The exact test's U over a tf.data.Dataset (summed from Python, then
  # handed to the compiled test) equals U over the same arrays in the same
  # batches (summed inside the compiled test): the same chain.
  x, y = problem.data
  chains = []
  for energy_data in ((x, y), tf.data.Dataset.from_tensor_slices(
      (x, y)).batch(128)):
    _, callback = fit_regression(
        problem, sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=5,
                             friction=1., momentum_std=20., seed=3),
        num_steps=100, thinning=1, energy_data=energy_data,
        energy_batch_size=128)
    chains.append((kept_draws(callback), callback.num_accepted))
  (a, accepted_a), (b, accepted_b) = chains
  assert len(a) == 20 and 0 < accepted_a < 20
  assert accepted_a == accepted_b
  np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_minibatch_acceptance_on_the_whole_data_is_the_exact_test(problem):
  # acceptance_energy="minibatch" estimates U(theta) (via stateless_call,
  # the weights untouched) and U(theta*) on one batch; with a "batch" of
  # all N examples the estimates are the exact energies, so the chain must
  # be the exact chain (same seed, same data).
  x, y = problem.data
  chains = []
  for acceptance in ("exact", "minibatch"):
    _, callback = fit_regression(
        problem, sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=5,
                             friction=1., momentum_std=20.,
                             acceptance_energy=acceptance, seed=3),
        num_steps=400, thinning=1, energy_data=(x, y),
        energy_batch_size=problem.num_examples)
    chains.append((kept_draws(callback), callback.num_accepted))
  (exact, accepted_exact), (minibatch, accepted_minibatch) = chains
  assert accepted_exact == accepted_minibatch
  assert 0 < accepted_exact < 80
  np.testing.assert_allclose(minibatch, exact, rtol=1e-5, atol=1e-6)


# --- MirroredStrategy: identical replicas, the same chain --------------------


def test_mirrored_strategy_replicas_stay_identical_and_match_one_device():
  worker = os.path.join(WORKERS, "keras_mirrored_worker.py")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run([sys.executable, worker, "sghmc", "amagold"],
                       capture_output=True, text=True, env=env, timeout=300,
                       check=False)
  assert out.returncode == 0, out.stderr[-3000:]
  results = json.loads(out.stdout.strip().splitlines()[-1])
  assert results["num_replicas"] == 2
  for name in ("sghmc", "amagold"):
    r = results[name]
    # Same noise and the same all-reduced gradient on both replicas: their
    # copies of every variable are bitwise equal ...
    assert r["replicas_equal"], r
    # ... and the chain is the single-device chain up to float rounding of
    # the gradient's all-reduce (differences of ~1e-7 on weights of ~1).
    assert r["max_difference"] < 1e-5, r
    assert r["moved_from_first_sample"] > 0.05, r
    assert r["kept"][0] == r["kept"][1] > 0, r
    assert r["accepted"][0] == r["accepted"][1], r
    assert r["tests"][0] == r["tests"][1], r


# --- kept samples: Bayesian model average, disk -----------------------------


def logistic_setup(seed=0, n=200):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, 3)).astype(np.float32)
  y = (rng.uniform(size=n) < 1. / (1. + np.exp(-(x @ [2., -1., .5])))
       ).astype(np.float32)

  def make():
    return keras.Sequential([
        keras.Input((3,)),
        keras.layers.Dense(1, kernel_initializer="zeros")])
  return x, y, make


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


# --- bad inputs --------------------------------------------------------------


def tiny_fit(loss=None, sampler=None, model=None, steps_per_execution=1,
             steps=8, **kwargs):
  x, y, make = logistic_setup(n=40)
  model = model or make()
  model.compile(optimizer="sgd", steps_per_execution=steps_per_execution,
                loss=loss or keras.losses.BinaryCrossentropy(
                    from_logits=True))
  callback = sgk.SamplingCallback(
      sampler or sgk.SGLD(step_size=1e-3),
      **{"num_examples": 40, "prior": 1., **kwargs})
  model.fit(x, y, batch_size=5, epochs=1, steps_per_epoch=steps, verbose=0,
            callbacks=[callback])
  return callback


@pytest.mark.parametrize("loss, message", [
    ("mse", "not a supported negative log-likelihood.*Gaussian"),
    (keras.losses.MeanSquaredError(), "not a supported"),
    (lambda y, p: tf.square(y - p), "not a supported"),
    (keras.losses.BinaryFocalCrossentropy(), "not a supported"),
    (keras.losses.BinaryCrossentropy(label_smoothing=0.1), "label_smoothing"),
    (keras.losses.BinaryCrossentropy(reduction="sum"), "reduction='sum'"),
    ("crossentropy", "name it"),
])
def test_losses_that_are_not_a_mean_negative_log_likelihood_are_refused(
    loss, message):
  with pytest.raises(ValueError, match=message):
    tiny_fit(loss=loss)


def test_other_refused_losses():
  with pytest.raises(ValueError, match="ignore_class"):
    sgk.resolve_likelihood(keras.losses.SparseCategoricalCrossentropy(
        ignore_class=0))
  with pytest.raises(ValueError, match="one negative log-likelihood"):
    sgk.resolve_likelihood(["mse", "mse"])
  three_units = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3)])
  with pytest.raises(ValueError, match="3 output units"):
    tiny_fit(model=three_units)
  for ok in ("sparse_categorical_crossentropy",
             keras.losses.CategoricalCrossentropy(from_logits=True),
             sgk.NegativeLogLikelihood(lambda y, p: tf.square(y - p))):
    sgk.resolve_likelihood(ok)


def test_missing_or_bad_number_of_examples_is_refused():
  sampler = sgk.SGLD(step_size=1e-3)
  with pytest.raises(TypeError, match="num_examples"):
    sgk.SamplingCallback(sampler, prior=1.)  # pylint: disable=missing-kwoa
  with pytest.raises(ValueError, match="num_examples.*required"):
    sgk.SamplingCallback(sampler, num_examples=None, prior=1.)
  with pytest.raises(ValueError, match="num_examples.*>= 1.*0"):
    sgk.SamplingCallback(sampler, num_examples=0, prior=1.)
  with pytest.raises(TypeError, match="num_examples.*2.5"):
    sgk.SamplingCallback(sampler, num_examples=2.5, prior=1.)
  with pytest.raises(ValueError, match="prior.*None"):
    sgk.SamplingCallback(sampler, num_examples=10, prior=None)


@pytest.mark.parametrize("option", [
    dict(clipnorm=1.), dict(clipvalue=1.), dict(global_clipnorm=1.),
    dict(weight_decay=1e-4), dict(use_ema=True),
    dict(gradient_accumulation_steps=2), dict(learning_rate=0.1)])
def test_options_that_bias_a_sampler_are_refused(option):
  key = next(iter(option))
  with pytest.raises(ValueError, match=key):
    sgk.SGHMC(step_size=1e-2, friction=1., **option)


def test_biasing_options_set_after_construction_are_refused():
  sampler = sgk.SGLD(step_size=1e-3)
  sampler.clipnorm = 1.
  with pytest.raises(ValueError, match="clipnorm"):
    sgk.SamplingCallback(sampler, num_examples=10, prior=1.)
  with pytest.raises(TypeError, match="Keras optimizers do not sample"):
    sgk.SamplingCallback(keras.optimizers.SGD(0.1), num_examples=10,
                         prior=1.)


@pytest.mark.parametrize("kwargs, message", [
    (dict(steps_per_execution=4, thinning=6), "thinning=6"),
    (dict(steps_per_execution=2, burnin_steps=3), "burnin_steps=3"),
    (dict(steps_per_execution=3, thinning=3, steps=8),
     "steps per epoch=8"),
    (dict(steps_per_execution=4, sampler=sgk.AMAGOLD(
        step_size=0.1, num_leapfrog_steps=10, friction=1.),
          thinning=4), "num_leapfrog_steps=10"),
])
def test_steps_per_execution_that_would_skip_the_callback_is_refused(
    kwargs, message):
  kwargs = dict(kwargs)
  if isinstance(kwargs.get("sampler"), sgk.AMAGOLD):
    x, y, _ = logistic_setup(n=40)
    kwargs["energy_data"] = (x, y)
  with pytest.raises(ValueError, match=f"steps_per_execution.*{message}"):
    tiny_fit(**kwargs)


def test_models_that_would_count_the_prior_twice_are_refused():
  regularized = keras.Sequential([
      keras.Input((3,)),
      keras.layers.Dense(1, kernel_regularizer=keras.regularizers.L2(1e-3))])
  with pytest.raises(ValueError, match="regularizer.*N times"):
    tiny_fit(model=regularized)
  activity = keras.Sequential([
      keras.Input((3,)),
      keras.layers.Dense(1, activity_regularizer=keras.regularizers.L2(1.))])
  with pytest.raises(ValueError, match="activity_regularizer"):
    tiny_fit(model=activity)
  constrained = keras.Sequential([
      keras.Input((3,)),
      keras.layers.Dense(1, kernel_constraint=keras.constraints.MaxNorm(1.))])
  with pytest.raises(ValueError, match="constraint"):
    tiny_fit(model=constrained)
  uncompiled = logistic_setup()[2]()
  callback = sgk.SamplingCallback(sgk.SGLD(step_size=1e-3), num_examples=40,
                                  prior=1.)
  callback.set_model(uncompiled)
  with pytest.raises(ValueError, match="compile the model"):
    callback.on_train_begin()


def test_amagold_needs_the_whole_training_set_for_its_test():
  amagold = sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=2, friction=1.)
  with pytest.raises(ValueError, match="energy_data"):
    sgk.SamplingCallback(amagold, num_examples=40, prior=1.)
  x, y, _ = logistic_setup(n=40)
  with pytest.raises(ValueError, match="holds 30 examples.*num_examples=40"):
    tiny_fit(sampler=amagold, energy_data=(x[:30], y[:30]))
  with pytest.raises(ValueError, match="not both"):
    sgk.SamplingCallback(amagold, num_examples=40, prior=1.,
                         burnin_epochs=1, burnin_steps=5,
                         energy_data=(x, y))


# --- real data ---------------------------------------------------------------


def test_mnist_and_fashion_loaders_read_the_original_files(shared_data):
  images, labels = sg.datasets.load_mnist(shared_data, "test")
  assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
  np.testing.assert_array_equal(labels[:10], [7, 2, 1, 0, 4, 1, 4, 9, 5, 9])
  assert np.bincount(labels).min() > 800
  ood = sg.datasets.load_fashion_mnist_sprite(shared_data)
  assert ood.shape == (900, 28, 28) and ood.max() > 200
  with pytest.raises(FileNotFoundError, match="t10k-images"):
    sg.datasets.load_mnist(os.path.join(shared_data, "statlog"), "test")


def test_keras_modules_are_small_and_create_attributes_in_init():
  # One job per module: none over about 400 lines, and every attribute a
  # class sets is created in an `__init__` of the adapter (no state that
  # appears later, half-initialised).
  import ast  # pylint: disable=import-outside-toplevel
  import pathlib  # pylint: disable=import-outside-toplevel
  folder = pathlib.Path(sgk.__file__).parent
  trees = {p.name: ast.parse(p.read_text()) for p in folder.glob("*.py")}
  for name, tree in trees.items():
    lines = len((folder / name).read_text().splitlines())
    assert lines <= 420, f"{name}: {lines} lines"

  def self_targets(node):
    for n in ast.walk(node):
      targets = (n.targets if isinstance(n, ast.Assign) else
                 [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign))
                 else [])
      for t in targets:
        for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
          if (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name)
              and e.value.id == "self"):
            yield e.attr
  methods = [(c.name, m) for tree in trees.values() for c in ast.walk(tree)
             if isinstance(c, ast.ClassDef) for m in c.body
             if isinstance(m, ast.FunctionDef)]
  created = {a for _, m in methods if m.name == "__init__"
             for a in self_targets(m)}
  late = sorted(f"{c}.{m.name}: self.{a}" for c, m in methods
                if m.name != "__init__" for a in self_targets(m)
                if a not in created)
  assert not late, late
