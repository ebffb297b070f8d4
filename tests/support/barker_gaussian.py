"""The noisy Gaussian that the SGBD and amortized Barker tests sample, with
the stationary variance that quadrature predicts for it.

N(MEAN, I) in 2-D with grad U~ = grad U + N(0, TAU^2 I): both coordinates
are independent copies of the 1-D problem support/barker_stationary.py
solves. At sigma = 0.4, sigma tau = 1.2: Proposition 1's shrinkage factor is
c = 1.702 / sqrt(1.702^2 + 1.2^2) ~ 0.82, a large effect, while
tau |w| < 1.702 for nearly all w, where c-SGBD's correction is defined.
"""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.barker_stationary import stationary_moments

MEAN = np.array([1., -2.], np.float32)
TAU = 3.
SIGMA = 0.4
# The chains of the statistical tests on it.
NUM_CHAINS, NUM_RESULTS, NUM_BURNIN = 16, 20000, 500


def gaussian_energy(x):
  return 0.5 * tf.reduce_sum(tf.square(x - MEAN), -1)


def noisy_gaussian(tau=TAU):
  return sg.NoisyGradientTarget(gaussian_energy,
                                gradient_noise_variance=tau ** 2)


def unit_gaussian_grad_log_pi(x):
  return -x


def predicted_variance(variant, distribution="bimodal", sigma=SIGMA,
                       tau=TAU):
  """The stationary variance of one coordinate, by quadrature."""
  return stationary_moments(unit_gaussian_grad_log_pi, sigma, tau, variant,
                            distribution)[1]
