"""The targets that the AMAGOLD tests sample, and the trace of its M-H test.

* A 2-D Gaussian N(0, diag(1, 1/4)) with grad U~ = grad U + N(0, 4 I)
  (`noisy_gaussian`), with the step size, friction and number of leapfrog
  steps the tests run AMAGOLD at on it.
* A skewed, non-Gaussian 2-D energy (`quartic_energy`), sampled with exact
  gradients (`exact_gradient_target`).
"""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg

PRECISION = np.array([1., 4.], np.float32)
NOISE_VARIANCE = 4.
STEP_SIZE = 0.1
FRICTION = 0.5  # beta; SGHMC's matching friction is C = 2 beta (Alg. 1).
NUM_LEAPFROG_STEPS = 10


def gaussian_energy(x):
  return 0.5 * tf.reduce_sum(PRECISION * tf.square(x), -1)


def noisy_gaussian(noise_variance=NOISE_VARIANCE):
  return sg.NoisyGradientTarget(gaussian_energy,
                                gradient_noise_variance=noise_variance)


def accept_trace(_, pkr):
  return pkr.is_accepted


def quartic_energy(x):
  """A skewed, non-Gaussian 2-D energy (exact gradients in these tests)."""
  x0, x1 = x[..., 0], x[..., 1]
  return (0.5 * x0 ** 2 + 0.1 * x0 ** 4 + 0.3 * x0 ** 3 / (1. + x0 ** 2)
          + (x1 - 0.5 * x0) ** 2)


def exact_gradient_target(energy_fn):
  return sg.NoisyGradientTarget(energy_fn, gradient_noise_variance=0.)
