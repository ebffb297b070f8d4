"""SGNHT's kernel (tfp_sgmcmc/kernels/sgnht.py): the momentum after the first
and second steps has its exact one-step law (the first momentum folded
into the first step's noise).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import NUM_SE


def isotropic_gaussian(noise, precision=1.):
  precision = np.asarray(precision, np.float32)
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(precision * x ** 2, -1),
      gradient_noise_variance=noise)


@pytest.mark.parametrize("step_count", [0, 1])
def test_sgnht_first_momentum_has_its_exact_distribution(step_count):
  # One step of many chains from theta0 = 1 with carried momentum m0 on
  # U = theta^2 / 2 (no gradient noise), thermostat xi = A: step 0 starts
  # from a fresh r ~ N(0, T) (folded into the step's noise), step 1 from
  # m0. r' = (1 - h xi) r - h theta0 + N(0, 2 A h T) in both cases.
  h, a, temp, theta0, m0, n = 0.5, 1.0, 3.0, 1.0, 3.0, 100000
  kernel = sg.SGNHT(isotropic_gaussian(0.), h, diffusion=a, temperature=temp)
  state = tf.fill([n, 1], theta0)
  results = kernel.bootstrap_results(state)._replace(
      momentum=tf.fill([n, 1], m0), step_count=tf.constant(step_count))
  _, results = kernel.one_step(state, results, seed=[5, 6])
  r = results.momentum.numpy()[:, 0].astype(np.float64)
  decay = 1. - h * a
  fresh = step_count == 0
  mean = -h * theta0 + (0. if fresh else decay * m0)
  var = 2. * a * h * temp + (decay ** 2 * temp if fresh else 0.)
  var_se = var * np.sqrt(2. / (n - 1))
  assert abs(r.mean() - mean) < NUM_SE * np.sqrt(var / n)
  assert abs(r.var() - var) < NUM_SE * var_se
  # Told apart by over 3 x NUM_SE: m0 kept or dropped (mean); the fresh
  # draw dropped or drawn at temperature 1 (variance).
  assert abs(decay * m0) > 3 * NUM_SE * np.sqrt(var / n)
  assert decay ** 2 * (temp - 1.) > 3 * NUM_SE * var_se


def test_sgnht_with_a_step_size_per_chain_runs_each_chain_at_its_own():
  # h of shape [chains, 1]: chain c is the chain of the scalar h_c (same
  # seed, same draws), to rounding; the thermostat stays one per chain.
  # Before, the thermostat took h as it came and became chains x chains,
  # which sample_chain's loop refused in TensorFlow's words.
  h = tf.constant([[0.05], [0.1], [0.2]], tf.float64)
  init = tf.fill([3, 2], tf.constant(1., tf.float64))
  def run(step_size):
    kernel = sg.SGNHT(isotropic_gaussian(1.), step_size, diffusion=0.7)
    return tf.function(lambda: tfp.mcmc.sample_chain(
        30, init, kernel=kernel, seed=[4, 5],
        trace_fn=lambda _, r: r.thermostat))()
  draws, thermostat = run(h)
  assert thermostat.shape == [30, 3]
  for c in range(3):
    alone, alone_thermostat = run(float(h[c, 0]))
    np.testing.assert_allclose(draws[:, c], alone[:, c], rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(thermostat[:, c], alone_thermostat[:, c],
                               rtol=1e-9, atol=1e-12)
