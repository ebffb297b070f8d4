"""NoisyGradientTarget: the gradient noise has the requested covariance and
the target reports its variance.
"""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE


def test_noisy_gradient_target_has_the_requested_noise_covariance():
  cov = np.array([[1., 0.5], [0.5, 2.]])
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2, -1),
      gradient_noise_covariance=cov)
  x = tf.ones([20000, 2])  # 20,000 independent "chains" at the same point.
  energy, grad = target.energy_and_gradient(x, [7, 8])
  noise = grad.numpy().astype(np.float64) - 1.
  emp = np.cov(noise.T)
  # Var of an empirical covariance entry: (S_ij^2 + S_ii S_jj) / n.
  se = np.sqrt((cov ** 2 + np.outer(np.diag(cov), np.diag(cov))) / 20000)
  assert np.all(np.abs(emp - cov) < NUM_SE * se)
  np.testing.assert_allclose(energy, 1.)
  var = target.gradient_noise_variance(x[:2], None)
  np.testing.assert_allclose(var, [[1., 2.], [1., 2.]])
