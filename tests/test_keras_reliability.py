"""The Keras adapter over long runs: resume, divergence, mixed precision.

* An interrupted `fit` with SamplingCallback + BackupAndRestore, restarted
  with the same call, ends with the same weights, samples, running moments,
  momentum, counters and burn-in optimizer state, bit for bit, as a run
  that never stopped (tests/workers/keras_resume_worker.py holds the run).
* A diverging chain stops with a message naming the sampler, the epoch,
  the step and what went non-finite, and keeps its finite samples.
* Under mixed_float16 the sampler's state stays float32 and the posterior
  of a Bayesian linear regression is that of float32.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from workers import keras_resume_worker as worker
import tfp_sgmcmc.keras as sgk
from support.helpers import NUM_SE, mean_and_se, stationary_covariance
from support.helpers import variance_and_se
from support.linear_regression import LinearRegression
from support.paths import WORKERS


def assert_same_run(expected, got):
  assert sorted(expected) == sorted(got)
  for key in expected:
    np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def reference(name, seed, backup_dir):
  model, sampling, backup = worker.build(name, backup_dir, seed)
  worker.fit(model, [sampling, backup])
  # A healthy run is untouched by the divergence check: every epoch ran
  # and every thinning-th transition was kept.
  assert sampling.divergence is None
  assert len(sampling.samples) == min(
      25, sampling.posterior.num_transitions // sampling.thinning)
  assert not os.path.exists(backup_dir)  # BackupAndRestore cleaned up.
  return worker.result(model, sampling)


# --- resume ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sghmc", "amagold_minibatch"])
def test_fit_interrupted_by_an_exception_resumes_bit_identically(name,
                                                                  tmp_path):
  # Interrupted in the middle of epoch 3 (of 6; burn-in is epochs 0-1), so
  # the callback's memory is 5 steps ahead of the epoch-3 backup and must
  # be rolled back to it, not continued from. SGHMC: splitting integrator
  # (variables half a drift ahead) with momentum resampling; AMAGOLD: the
  # minibatch test, whose host-side batch sampler must resume too, with
  # T = 3 trajectories that cross the epoch boundaries.
  expected = reference(name, 5, str(tmp_path / "reference"))
  backup_dir = str(tmp_path / "backup")
  model, sampling, backup = worker.build(name, backup_dir, seed=5)
  interrupt = worker.Interrupt(3, 4, kill=False)
  with pytest.raises(RuntimeError, match="interrupted"):
    worker.fit(model, [sampling, backup, interrupt])
  ahead = sampling.sampler.step_count
  with np.load(os.path.join(backup_dir, "sampling_callback",
                            "epoch_000003.npz")) as data:
    at_backup = json.loads(str(data["header"]))["sampler_steps"]
  assert ahead == at_backup + 5
  history = worker.fit(model, [sampling, backup, interrupt])
  assert len(history.history["loss"]) == 3  # Epochs 3, 4, 5 only.
  assert_same_run(expected, worker.result(model, sampling))


def _run_worker(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run(
      [sys.executable, os.path.join(WORKERS, "keras_resume_worker.py"),
       *map(str, args)], env=env, capture_output=True, text=True,
      timeout=300, check=False)


def _kill_and_resume(name, tmp_path):
  backup_dir, out = tmp_path / "backup", tmp_path / "resumed.npz"
  seed_file = tmp_path / "seed.json"
  # The sampler is built with seed=None: the seed drawn by the killed
  # process must be the one the resumed process continues with.
  killed = _run_worker(name, backup_dir, tmp_path / "never.npz", "--kill",
                       4, 2, "--seed-file", seed_file)
  assert killed.returncode == -9, killed.stderr[-3000:]
  assert not (tmp_path / "never.npz").exists()
  assert sorted(os.listdir(backup_dir / "sampling_callback")) == [
      "epoch_000003.npz", "epoch_000004.npz"]
  resumed = _run_worker(name, backup_dir, out)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  with open(seed_file) as f:
    seed = json.load(f)["seed"]
  expected = reference(name, seed, str(tmp_path / "reference"))
  with np.load(out) as data:
    got = {k: data[k] for k in data.files}
  assert_same_run(expected, got)
  return got


def test_amagold_killed_with_sigkill_resumes_bit_identically(tmp_path):
  # Exact AMAGOLD, killed (SIGKILL, nothing cleaned up) in epoch 4; a fresh
  # process resumes from the epoch-4 backups. The stored trajectory start,
  # momentum, energy accumulator, cached energy U(theta), test counters and
  # the kept samples come back; the reference run, in this process, ends
  # bit-identical.
  got = _kill_and_resume("amagold", tmp_path)
  assert 0 < int(got["num_accepted"]) < int(got["num_tests"]) == 13


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sghmc", "sgnht"])
def test_other_samplers_killed_with_sigkill_resume_bit_identically(
    name, tmp_path):
  # `_kill_and_resume` asserts the bit-identical match with a reference
  # run; here, also that the resumed run kept samples and moved.
  got = _kill_and_resume(name, tmp_path)
  assert int(got["num_transitions"]) > 0 and "samples_0" in got
  assert "momentum_0" in got and np.any(got["momentum_0"] != 0)


def test_a_backup_from_other_sampler_settings_is_refused(tmp_path):
  backup_dir = str(tmp_path / "backup")
  model, sampling, backup = worker.build("sghmc", backup_dir, seed=1)
  with pytest.raises(RuntimeError, match="interrupted"):
    worker.fit(model, [sampling, backup, worker.Interrupt(3, 0, kill=False)])
  model, _, backup = worker.build("sghmc", backup_dir, seed=1)
  other = sgk.SamplingCallback(
      sgk.SGHMC(step_size=0.03, friction=5., integrator="splitting",
                momentum_resampling_period=7, seed=1),
      num_examples=worker.NUM_EXAMPLES, prior=1., burnin_epochs=2,
      thinning=4, backup_dir=backup_dir)
  with pytest.raises(ValueError, match="other settings.*step_size"):
    worker.fit(model, [other, backup])


# --- divergence --------------------------------------------------------------


def regression_fit(sampler, epochs=3, steps=20, **kwargs):
  x, y = worker.data()
  keras.utils.set_random_seed(1)
  model = keras.Sequential([keras.Input((worker.DIM,)), keras.layers.Dense(1)])
  sgd = keras.optimizers.SGD(1e-2)
  model.compile(optimizer=sgd, loss=sgk.GaussianNegativeLogLikelihood(1.))
  sampling = sgk.SamplingCallback(sampler, num_examples=worker.NUM_EXAMPLES,
                                  prior=1., max_samples=1000, **kwargs)
  data = tf.data.Dataset.from_tensor_slices((x, y)).batch(3).repeat()
  history = model.fit(data, epochs=epochs, steps_per_epoch=steps, verbose=0,
                      shuffle=False, callbacks=[sampling])
  return model, sampling, history, sgd


def test_a_diverging_sghmc_stops_with_a_message_and_keeps_finite_samples():
  # Euler SGHMC at h = 0.5 on a posterior of precision about 60: every step
  # multiplies |theta| by about h^2 * 60 = 15 until float32 overflows, in
  # the first of three epochs of 20 steps.
  with pytest.warns(RuntimeWarning) as record:
    model, sampling, history, sgd = regression_fit(
        sgk.SGHMC(step_size=0.5, friction=0.1, seed=0))
  message = str(record[-1].message)
  info = sampling.divergence
  assert info is not None and model.stop_training
  assert (f"SGHMC diverged at epoch {info['epoch']}, batch {info['batch']} "
          f"(sampler step {info['step']})") in message
  assert "non-finite" in message
  assert "smaller step_size (now 0.5)" in message
  assert "larger friction (now 0.1)" in message
  assert len(history.history["loss"]) == info["epoch"] + 1 < 3
  # Every transition before the divergent one was kept (thinning 1), and
  # they are all finite; the model holds the last of them.
  samples = sampling.samples
  assert len(samples) == info["step"] - 1 >= 5, info
  assert all(np.all(np.isfinite(w)) for s in samples for w in s)
  for w, last in zip(model.get_weights(), samples[-1]):
    np.testing.assert_array_equal(w, last)
  assert np.max(np.abs(samples[-1][0])) > 1e6  # It really was diverging.
  assert model.optimizer is sgd
  assert sampling.posterior.num_samples == len(samples)
  # A diverged chain is not continued by another fit.
  with pytest.raises(sgk.SamplerDivergenceError, match="diverged"):
    model.fit(*worker.data(), epochs=1, verbose=0, callbacks=[sampling])


def test_divergence_can_raise_and_a_weight_bound_catches_growth_early():
  with pytest.raises(sgk.SamplerDivergenceError,
                     match="SGLD diverged.*Try a smaller step_size"):
    regression_fit(sgk.SGLD(step_size=0.5, seed=0), on_divergence="raise")
  # A finite bound stops the same chain long before it overflows.
  with pytest.warns(RuntimeWarning, match="grew to.*max_abs_weight=100"):
    _, sampling, _, _ = regression_fit(sgk.SGLD(step_size=0.5, seed=0),
                                       max_abs_weight=100.)
  assert sampling.divergence["step"] < 10
  with pytest.raises(ValueError, match="on_divergence"):
    sgk.SamplingCallback(sgk.SGLD(step_size=0.1), num_examples=10, prior=1.,
                         on_divergence="ignore")


def test_amagold_rejects_divergent_trajectories_instead_of_stopping():
  # AMAGOLD's M-H test rejects a trajectory whose energy is non-finite and
  # returns to its start, so a huge step size gives zero acceptance, not a
  # divergence; the chain stays finite.
  x, y = worker.data()
  _, sampling, history, _ = regression_fit(
      sgk.AMAGOLD(step_size=5., num_leapfrog_steps=4, friction=0.1, seed=0),
      epochs=2, energy_data=(x, y))
  assert sampling.divergence is None
  assert len(history.history["loss"]) == 2
  assert sampling.num_tests == 10 and sampling.num_accepted == 0
  assert all(np.all(np.isfinite(w)) for s in sampling.samples for w in s)


# --- mixed precision ---------------------------------------------------------


@pytest.fixture
def restore_policy():
  policy = keras.mixed_precision.global_policy()
  try:
    yield
  finally:
    keras.mixed_precision.set_global_policy(policy)


def sample_regression(problem, policy, num_steps, step_size, friction,
                      seed=3, **sampler_kwargs):
  """Full-batch splitting SGHMC on the linear regression, under `policy`."""
  keras.mixed_precision.set_global_policy(policy)
  x, y = problem.data
  model = keras.Sequential([
      keras.Input((problem.dim,)),
      keras.layers.Dense(1, use_bias=False,
                         kernel_initializer=keras.initializers.Constant(
                             problem.posterior_mean.reshape(-1, 1)))])
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(problem.noise_scale),
                steps_per_execution=50, jit_compile=True)
  sampling = sgk.SamplingCallback(
      sgk.SGHMC(step_size=step_size, friction=friction,
                integrator="splitting", seed=seed, **sampler_kwargs),
      num_examples=problem.num_examples, prior=problem.prior_scale,
      thinning=50, max_samples=10 ** 6)
  data = tf.data.Dataset.from_tensors((x, y)).repeat()
  model.fit(data, epochs=10, steps_per_epoch=num_steps // 10, verbose=0,
            shuffle=False, callbacks=[sampling])
  draws = sampling.posterior.samples[0][:, None, :, 0].astype(np.float64)
  return model, sampling, draws


@pytest.mark.parametrize("num_steps", [
    10_000,
    pytest.param(200_000, marks=pytest.mark.slow)])
def test_mixed_float16_keeps_float32_state_and_the_posterior(
    restore_policy, num_steps):
  # Full-batch gradients (no minibatch noise), h = 3e-3, C = 30: the
  # stationary covariance of the discretised chain (Lyapunov equation)
  # differs from the exact posterior's by 0.1%, far inside the Monte Carlo
  # error. Under mixed_float16 the Dense layer computes in float16 (its
  # gradient has relative round-off ~1e-3 per step); the sampler keeps
  # float32 state and noise and a static loss scale of 2^8 is unscaled
  # before its update.
  problem = LinearRegression(num_examples=500, dim=2, seed=1)
  h, c = 3e-3, 30.
  predicted = stationary_covariance("splitting", problem.precision, h, c)
  np.testing.assert_allclose(np.diag(predicted),
                             np.diag(problem.posterior_cov), rtol=2e-3)
  estimates = {}
  for policy, kwargs in (("float32", {}),
                         ("mixed_float16", dict(loss_scale_factor=256.))):
    model, sampling, draws = sample_regression(problem, policy, num_steps, h,
                                               c, **kwargs)
    assert model.layers[0].compute_dtype == (
        "float16" if policy == "mixed_float16" else "float32")
    sampler = sampling.sampler
    assert all(v.dtype in ("float32", "float64", "int32", "int64")
               for v in sampler.variables), [v.dtype for v in sampler.variables]
    assert all(m.dtype == tf.float32 for m in sampler.momentum)
    assert draws.shape[0] == num_steps // 50
    mean, mean_se = mean_and_se(draws)
    var, var_se = variance_and_se(draws, mean=problem.posterior_mean)
    assert np.all(np.abs(mean - problem.posterior_mean) < NUM_SE * mean_se), (
        policy, mean, mean_se)
    assert np.all(np.abs(var - np.diag(problem.posterior_cov)) <
                  NUM_SE * var_se), (policy, var, var_se)
    estimates[policy] = (draws, mean, mean_se, var, var_se)
  (d32, m32, ms32, v32, vs32) = estimates["float32"]
  (d16, m16, ms16, v16, vs16) = estimates["mixed_float16"]
  # The two chains share their seed, hence their noise: they differ only by
  # the float16 round-off of the forward and backward passes (they do
  # differ), and their estimates agree far inside one Monte Carlo error.
  # Measured over seeds 3 to 6 (10,000 steps, ESS 110 to 270): |difference|
  # <= 0.005 standard errors (means and variances); the bound is 0.05.
  assert not np.array_equal(d16, d32)
  assert np.all(np.abs(m16 - m32) < 0.05 * np.minimum(ms16, ms32))
  assert np.all(np.abs(v16 - v32) < 0.05 * np.minimum(vs16, vs32))


def test_a_static_loss_scale_is_exactly_undone(restore_policy):
  # A power-of-two scale multiplies the loss and divides the float32
  # gradient exactly: the chain is bit-identical to the unscaled one.
  runs = [regression_fit(sgk.SGLD(step_size=1e-3, seed=2), epochs=1,
                         **{})[1].samples]
  runs.append(regression_fit(sgk.SGLD(step_size=1e-3, seed=2,
                                      loss_scale_factor=1024.),
                             epochs=1)[1].samples)
  for a, b in zip(*runs):
    np.testing.assert_array_equal(a[0], b[0])
  assert len(runs[0]) == len(runs[1]) == 20


def test_dynamic_loss_scaling_and_float16_variables_are_refused(
    restore_policy):
  with pytest.raises(TypeError, match="LossScaleOptimizer.*biases"):
    sgk.SamplingCallback(
        keras.optimizers.LossScaleOptimizer(sgk.SGLD(step_size=1e-3)),
        num_examples=10, prior=1.)
  with pytest.raises(ValueError, match="loss_scale_factor"):
    sgk.SGLD(step_size=1e-3, loss_scale_factor=-1.)
  keras.mixed_precision.set_global_policy("float16")
  with pytest.raises(TypeError, match="float16.*float32 or float64"):
    regression_fit(sgk.SGLD(step_size=1e-3), epochs=1)
