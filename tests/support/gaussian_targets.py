"""The noisy Gaussian target whose chains support/helpers.py's
`stationary_covariance` predicts: N(mean, precision^-1) with the gradient
noise N(0, noise) (a variance, or a covariance matrix when 2-D)."""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg


def gaussian_target(mean, precision, noise):
  mean = np.asarray(mean, np.float32)
  precision = np.asarray(precision, np.float32)

  def energy(x):
    z = x - mean
    return 0.5 * tf.reduce_sum(z * tf.linalg.matvec(precision, z), -1)
  if np.ndim(noise) == 2:
    return sg.NoisyGradientTarget(energy, gradient_noise_covariance=noise)
  return sg.NoisyGradientTarget(energy, gradient_noise_variance=noise)
