"""SGLD's stationary moments against the exact prediction for a noisy
Gaussian (the bias visible), and a decreasing polynomial schedule whose
step-size-weighted second moment lands far closer to the truth than
constant steps.
"""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, sample, stationary_covariance
from support.helpers import variance_and_se


def gaussian_target(noise, mean=0.):
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x - mean) ** 2, -1),
      gradient_noise_variance=noise)


def test_sgld_matches_exact_stationary_moments():
  # theta' = (1 - h) theta + h mu - h eta + sqrt(2h) xi: the stationary
  # variance is (2h + h^2 V) / (1 - (1 - h)^2), above 1 by O(h).
  h, v = 0.1, 4.
  kernel = sg.SGLD(gaussian_target(v, mean=2.), step_size=h)
  draws = sample(kernel, tf.zeros([8, 1]), 20000, seed=[1, 2],
                 num_burnin_steps=100)
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  predicted = stationary_covariance("sgld", [[1.]], h, gradient_noise=v)
  assert abs(mean[0] - 2.) < NUM_SE * mean_se[0]
  assert abs(var[0] - predicted[0, 0]) < NUM_SE * var_se[0]
  assert var[0] - 1. > NUM_SE * var_se[0]  # The bias is visible.


def test_polynomial_decay_schedule_and_weighted_average():
  schedule = sg.PolynomialDecay(a=0.3, b=1., gamma=0.55)
  kernel = sg.SGLD(gaussian_target(4.), step_size=schedule)
  n = 20000
  draws, step_sizes = sample(kernel, tf.zeros([8, 1]), n, seed=[5, 6],
                             trace_fn=lambda _, r: r.step_size)
  l = np.arange(n)
  np.testing.assert_allclose(step_sizes, 0.3 * (1. + l) ** -0.55, rtol=1e-5)
  # Constant-step SGLD at the starting step size has variance
  # (2h + h^2 V) / (2h - h^2) = 1.41 here. The decreasing schedule's
  # step-size-weighted second moment must land much closer to 1: its bias is
  # sum h^2 / sum h-sized (about 0.1 at this length), far below 0.41.
  const_bias = stationary_covariance("sgld", [[1.]], 0.3,
                                     gradient_noise=4.)[0, 0] - 1.
  second_moment = float(sg.step_size_weighted_mean(
      tf.square(draws[1000:]), step_sizes[1000:])[..., 0].numpy().mean())
  assert abs(second_moment - 1.) < 0.5 * const_bias
