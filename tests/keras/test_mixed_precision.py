"""Under mixed_float16 the sampler's state stays float32 and the posterior of
a Bayesian linear regression is that of float32; a static loss scale is
exactly undone; dynamic loss scaling and float16 variables are refused.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc.keras as sgk
from support.helpers import NUM_SE, mean_and_se, stationary_covariance
from support.helpers import variance_and_se
from support.keras_fits import regression_fit
from support.linear_regression import LinearRegression


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
