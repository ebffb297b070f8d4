"""SGHMC's kernel (tfp_sgmcmc/kernels/sghmc.py): the empirical-Fisher noise
estimate, the SGD-with-momentum form, momentum resampling and continuation,
the momentum after a refresh step (its exact one-step law). (A diverging
chain flagged and frozen: tests/integration/test_kernel_chains.py.)
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.gaussian_targets import gaussian_target
from support.helpers import NUM_SE, sample


def test_empirical_fisher_noise_estimate_uses_target_noise_variance():
  # NoisyGradientTarget reports its V exactly, so "empirical_fisher" must
  # reproduce the chain with the constant B-hat = h V / 2.
  h, c, v = 0.2, 1.0, 4.0
  target = gaussian_target([0.], [[1.]], v)
  exact = sg.SGHMC(target, h, c, noise_estimate=0.5 * h * v)
  fisher = sg.SGHMC(target, h, c, noise_estimate="empirical_fisher")
  a = sample(exact, tf.zeros([2, 1]), 50, seed=[5, 6], jit=False)
  b = sample(fisher, tf.zeros([2, 1]), 50, seed=[5, 6], jit=False)
  np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_sgd_momentum_form_is_the_same_update():
  eta, alpha = 0.01, 0.1
  target = gaussian_target([0.], [[1.]], 1.)
  kernel = sg.SGHMC.from_sgd_momentum(target, learning_rate=eta,
                                      momentum_decay=alpha)
  h = kernel.step_size
  assert np.isclose(h, 0.1) and np.isclose(kernel.friction, alpha / h)
  v = tf.constant([0.3, -0.2])
  g = tf.constant([1.5, 0.7])
  xi = tf.constant([0.4, -1.1])
  r_new = sg.dynamics.sghmc_euler_momentum(v / h, g, h, kernel.friction, xi)
  v_new = v - eta * g - alpha * v + np.sqrt(2 * alpha * eta) * xi
  np.testing.assert_allclose(h * r_new, v_new, rtol=1e-6)


def test_momentum_resampling_period_and_continuation():
  target = gaussian_target([0.], [[1.]], 0.)
  kernel = sg.SGHMC(target, 0.1, 1.0, momentum_resampling_period=5)
  state = tf.zeros([1])
  results = kernel.bootstrap_results(state)
  seed = tfp.random.sanitize_seed([1, 1])
  momenta = []
  for _ in range(11):
    seed, step_seed = tfp.random.split_seed(seed)
    state, results = kernel.one_step(state, results, seed=step_seed)
    momenta.append(float(results.momentum[0]))
  assert int(results.step_count) == 11
  # A chain continued from its results keeps its momentum: resampling
  # happens only at step counts 0, 5, 10.
  draws, trace = sample(kernel, state, 3, seed=[2, 2], jit=False,
                        previous_kernel_results=results,
                        trace_fn=lambda _, r: r.step_count)
  np.testing.assert_array_equal(trace, [12, 13, 14])


@pytest.mark.parametrize("integrator", ["euler", "splitting"])
@pytest.mark.parametrize("step_count", [3, 4])
def test_momentum_after_a_refresh_step_has_its_exact_distribution(
    integrator, step_count):
  # One step of many chains from theta0 = 1 with carried momentum m0 on
  # U = theta^2 / 2 (no gradient noise), period 3: step 3 starts from a
  # fresh r ~ N(0, T) (Euler folds it into the step's noise), step 4 from
  # m0. r' is Gaussian with a mean and variance known in closed form.
  h, c, temp, theta0, m0, n = 0.5, 1.0, 3.0, 1.0, 3.0, 100000
  kernel = sg.SGHMC(gaussian_target([0.], [[1.]], 0.), h, c,
                    temperature=temp, integrator=integrator,
                    momentum_resampling_period=3)
  state = tf.fill([n, 1], theta0)
  results = kernel.bootstrap_results(state)._replace(
      momentum=tf.fill([n, 1], m0), step_count=tf.constant(step_count))
  _, results = kernel.one_step(state, results, seed=[5, 6])
  r = results.momentum.numpy()[:, 0].astype(np.float64)
  s2 = 2. * c * temp * h  # Injected noise variance.
  fresh = step_count % 3 == 0
  if integrator == "euler":  # r' = (1 - hC) r - h theta0 + N(0, s2).
    a, b, e2 = 1. - h * c, -h * theta0, 1.
  else:  # r' = e (e r - h (theta0 + r h / 2) + N(0, s2)), e = exp(-Ch/2).
    e = np.exp(-0.5 * c * h)
    a, b, e2 = e * (e - 0.5 * h * h), -e * h * theta0, e * e
  mean = b + (0. if fresh else a * m0)
  var = e2 * s2 + (a * a * temp if fresh else 0.)
  var_se = var * np.sqrt(2. / (n - 1))
  assert abs(r.mean() - mean) < NUM_SE * np.sqrt(var / n)
  assert abs(r.var() - var) < NUM_SE * var_se
  # What the test tells apart, by over 3 x NUM_SE: the carried momentum
  # kept on a refresh step or dropped on another (mean); a fresh draw
  # dropped, drawn at temperature 1, or made on another step (variance).
  assert abs(a * m0) > 3 * NUM_SE * np.sqrt(var / n)
  assert a * a * (temp - 1.) > 3 * NUM_SE * var_se
