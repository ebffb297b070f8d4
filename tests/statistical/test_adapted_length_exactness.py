"""AMAGOLD with the trajectory length ChEES tuned, then fixed, is exact:
after `warm_up(adapt_num_leapfrog_steps=True)` the returned kernel (one
integer T, and the dense mass the warm-up picks) keeps a correlated, badly scaled Gaussian's moments with noisy
gradients, at the tuned step size, where the test rejects a fair share.

Tolerances: NUM_SE = 4 Monte Carlo standard errors of the chain's own
averages (support/helpers.py: ESS of theta for means, of (theta - mean)^2
for variances); the target's moments are exact.
"""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, sample, variance_and_se

# A 3-d Gaussian: sds 0.2, 1, 3 rotated by 45 degrees in the first plane.
_ROTATION = np.array([[np.sqrt(.5), -np.sqrt(.5), 0.],
                      [np.sqrt(.5), np.sqrt(.5), 0.],
                      [0., 0., 1.]])
COVARIANCE = (_ROTATION @ np.diag([0.2, 1., 3.]) ** 2 @ _ROTATION.T)
_PRECISION = tf.constant(np.linalg.inv(COVARIANCE), tf.float32)


def _energy(x):
  return 0.5 * tf.einsum("...i,ij,...j->...", x, _PRECISION, x)


def test_amagold_with_an_adapted_then_fixed_length_keeps_the_moments():
  target = sg.NoisyGradientTarget(_energy, gradient_noise_variance=1.)
  kernel = sg.AMAGOLD(target, step_size=0.05, num_leapfrog_steps=10,
                      friction=0.5)
  warm = sg.warm_up(kernel, tf.zeros([16, 3]), num_steps=300, seed=[4, 5],
                    adapt_num_leapfrog_steps=True, max_num_leapfrog_steps=64,
                    jit_compile=False)
  steps = warm.kernel.num_leapfrog_steps
  assert isinstance(steps, int) and steps == warm.report.num_leapfrog_steps
  # The mass the warm-up picks for a 3-vector: dense and tuned length
  # together, the pair the default picks on exact gradients (here under
  # gradient noise, the harder case for exactness).
  assert warm.report.mass == "dense"
  draws = sample(warm.kernel, warm.state, 3000, seed=[6, 7])
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert np.all(np.abs(mean) < NUM_SE * mean_se), (steps, mean, mean_se)
  assert np.all(np.abs(var - np.diag(COVARIANCE)) < NUM_SE * var_se), (
      steps, var, var_se)
