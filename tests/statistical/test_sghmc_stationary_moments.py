"""SGHMC and naive SGHMC against exact stationary predictions: Euler and
splitting integrators on noisy 1-D and correlated 2-D Gaussians, a known
noise estimate removing the gradient-noise bias, splitting measurably less
biased than Euler and stable where Euler explodes, naive SGHMC heated by
the gradient noise.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.gaussian_targets import gaussian_target
from support.helpers import NUM_SE, mean_and_se, sample, stationary_covariance
from support.helpers import variance_and_se


@pytest.mark.parametrize("integrator", ["euler", "splitting"])
def test_sghmc_matches_exact_stationary_moments_on_noisy_1d_gaussian(
    integrator):
  # U = (theta - 1)^2 / 2 with grad U~ = grad U + N(0, 4), B-hat = 0: the
  # chain is biased by the gradient noise and the discretisation, both known
  # exactly for a Gaussian target.
  h, c, v = 0.2, 1.0, 4.0
  target = gaussian_target([1.], [[1.]], v)
  kernel = sg.SGHMC(target, step_size=h, friction=c, integrator=integrator)
  draws = sample(kernel, tf.zeros([8, 1]), 20000, seed=[1, 2],
                 num_burnin_steps=200)
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  predicted = stationary_covariance(integrator, [[1.]], h, c, v)[0, 0]
  assert abs(mean[0] - 1.) < NUM_SE * mean_se[0]
  assert abs(var[0] - predicted) < NUM_SE * var_se[0]
  # The gradient noise visibly inflates the variance (B = h V / 2 != 0).
  assert var[0] - 1. > NUM_SE * var_se[0]


def test_known_noise_estimate_removes_gradient_noise_bias():
  h, c, v = 0.2, 1.0, 4.0
  target = gaussian_target([0.], [[1.]], v)
  kernel = sg.SGHMC(target, step_size=h, friction=c,
                    noise_estimate=0.5 * h * v, integrator="splitting")
  draws = sample(kernel, tf.zeros([8, 1]), 20000, seed=[3, 4],
                 num_burnin_steps=200)
  var, var_se = variance_and_se(draws, mean=0.)
  predicted = stationary_covariance("splitting", [[1.]], h, c, v,
                                    noise_estimate=0.5 * h * v)[0, 0]
  assert abs(predicted - 1.) < 0.01  # Only O(h^2) integrator bias remains.
  assert abs(var[0] - predicted) < NUM_SE * var_se[0]


def test_splitting_is_measurably_less_biased_than_euler():
  # Same step size, same known-noise correction: Euler's stationary variance
  # is O(h) off, the splitting scheme's O(h^2).
  h, c, v = 0.5, 1.0, 1.0
  target = gaussian_target([0.], [[1.]], v)
  results = {}
  for integrator in ("euler", "splitting"):
    kernel = sg.SGHMC(target, step_size=h, friction=c,
                      noise_estimate=0.5 * h * v, integrator=integrator)
    draws = sample(kernel, tf.zeros([8, 1]), 20000, seed=[7, 8],
                   num_burnin_steps=200)
    var, se = variance_and_se(draws, mean=0.)
    predicted = stationary_covariance(integrator, [[1.]], h, c, v,
                                      noise_estimate=0.5 * h * v)[0, 0]
    assert abs(var[0] - predicted) < NUM_SE * se[0], integrator
    results[integrator] = (abs(var[0] - 1.), se[0])
  euler_bias, euler_se = results["euler"]
  split_bias, split_se = results["splitting"]
  assert euler_bias - split_bias > NUM_SE * np.hypot(euler_se, split_se)


@pytest.mark.parametrize("integrator", ["euler", "splitting"])
def test_sghmc_correlated_2d_gaussian_covariance(integrator):
  # Paper 003's correlated Gaussian: rho = 0.9, grad U~ = Sigma^-1 theta +
  # N(0, I).
  cov = np.array([[1., 0.9], [0.9, 1.]])
  prec = np.linalg.inv(cov)
  h, c = 0.1, 1.0
  target = gaussian_target([0., 0.], prec, np.eye(2))
  kernel = sg.SGHMC(target, step_size=h, friction=c, integrator=integrator)
  draws = np.asarray(sample(kernel, tf.zeros([8, 2]), 20000, seed=[9, 10],
                            num_burnin_steps=500))
  predicted = stationary_covariance(integrator, prec, h, c, np.eye(2))
  mean, mean_se = mean_and_se(draws)
  assert np.all(np.abs(mean) < NUM_SE * mean_se)
  cross, cross_se = mean_and_se(draws[..., :1] * draws[..., 1:])
  var, var_se = variance_and_se(draws, mean=0.)
  assert np.all(np.abs(var - np.diag(predicted)) < NUM_SE * var_se)
  assert abs(cross[0] - predicted[0, 1]) < NUM_SE * cross_se[0]


def test_naive_sghmc_is_heated_by_gradient_noise():
  # Chen et al. (2014), Corollary 3.1: without friction the noise has no
  # counterweight and the chain's variance exceeds the target's.
  target = gaussian_target([0.], [[1.]], 4.)
  kernel = sg.NaiveSGHMC(target, step_size=0.1, momentum_resampling_period=50)
  draws = sample(kernel, tf.zeros([8, 1]), 20000, seed=[11, 12])
  var, se = variance_and_se(draws, mean=0.)
  assert var[0] - 1. > NUM_SE * se[0]


def test_splitting_stays_stable_where_euler_explodes():
  # Chen, Ding, Carin (2015), Fig. 1: at a large step size the Euler scheme
  # diverges, the splitting scheme does not. Euler's linear map here has
  # spectral radius > 1 (checked below), so its chain must blow up.
  h, c = 1.9, 1.0
  target = gaussian_target([0.], [[1.]], 1.)
  a_euler = np.array([[1 - h * h, h * (1 - h * c)], [-h, 1 - h * c]])
  assert np.max(np.abs(np.linalg.eigvals(a_euler))) > 1.
  euler = sg.SGHMC(target, h, c, integrator="euler")
  split = sg.SGHMC(target, h, c, integrator="splitting")
  _, div_euler = sample(euler, tf.zeros([4, 1]), 3000, seed=[1, 3],
                        trace_fn=lambda _, r: r.diverged)
  draws, div_split = sample(split, tf.zeros([4, 1]), 3000, seed=[1, 3],
                            trace_fn=lambda _, r: r.diverged)
  assert np.all(np.asarray(div_euler)[-1])
  assert not np.any(div_split)
  assert np.all(np.isfinite(draws))


# Scales 1000x apart: sd 0.03 and 30. The gradient noise is scaled with the
# coordinate, N(0, 2 / s^2), as a minibatch's would be.
MASS_SCALES = np.array([0.03, 30.])


@pytest.mark.parametrize("integrator", ["euler", "splitting"])
def test_sghmc_with_a_diagonal_mass_matches_exact_stationary_moments(
    integrator):
  # M^{-1} = diag(s^2): in velocity units every coordinate moves on the
  # same time scale, so one step size serves both (with M = I this h is
  # 7 times the stable limit of the sd-0.03 coordinate). The stationary
  # variance is predicted exactly with the mass in the drift and the noise
  # N(0, 2 C h M); a drift without M^{-1} or noise without M is far off.
  h, c = 0.2, 1.0
  precision = np.diag(1. / MASS_SCALES ** 2)
  noise = np.diag(2. / MASS_SCALES ** 2)
  target = gaussian_target([0., 0.], precision, noise)
  init = tf.zeros([8, 2])
  kernel = sg.SGHMC(
      target, step_size=h, friction=c, integrator=integrator,
      momentum_distribution=sg.diagonal_momentum_distribution(
          init, batch_ndims=1, inverse_mass=MASS_SCALES ** 2))
  draws = sample(kernel, init, 20000, seed=[21, 22], num_burnin_steps=200)
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws, mean=0.)
  predicted = np.diag(stationary_covariance(
      integrator, precision, h, c, noise,
      inverse_mass=np.diag(MASS_SCALES ** 2)))
  assert np.all(np.abs(mean) < NUM_SE * mean_se), (mean, mean_se)
  assert np.all(np.abs(var - predicted) < NUM_SE * var_se), (
      var, predicted, var_se)
  # The prediction is not the target's: the gradient noise heats both
  # coordinates by the same relative amount, visibly.
  assert np.all(var / MASS_SCALES ** 2 - 1. > NUM_SE * var_se /
                MASS_SCALES ** 2)
