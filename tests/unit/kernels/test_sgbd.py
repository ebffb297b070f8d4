"""SGBD's kernel (tfp_sgmcmc/kernels/sgbd.py) and its probability functions:
Propositions 1 and 2 and equation 5 checked against their formulas, the
online noise estimate tau-hat against NumPy on the step's minibatch, step
sizes from the results, per chain and from a schedule. (A diverging chain,
and the same seed giving the same chain under XLA: tests/integration/
test_seeded_chains.py.)
"""

import numpy as np
import pytest
import scipy.special
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc import random
from support.barker_gaussian import SIGMA, TAU, gaussian_energy, noisy_gaussian
from support.barker_stationary import PROBIT_LOGIT
from support.helpers import NUM_SE, sample
from support.linear_regression import LinearRegression


def test_propositions_1_and_2_bound_the_expected_move_probability():
  # With delta-hat ~ N(d, tau^2), expectations of the kernel's probability
  # functions (the code under test), by the trapezoid rule on a fine grid of
  # the noise (Gauss-Hermite is poor for the steep sigmoids at large w tau):
  #   Proposition 1: |E p(delta-hat, w) - p(c d, w)| < 0.019,
  #   Proposition 2: |E p~(delta-hat, w) - p(d, w)| < 0.019 for small tau
  #                  (here tau |w| <= 1).
  # (The maxima over this grid are 0.011 and 0.008.)
  d, w, tau = np.meshgrid(np.linspace(-10., 10., 21),
                          np.linspace(0.05, 3., 16),
                          np.linspace(0., 5., 11), indexing="ij")
  eps = np.linspace(-9., 9., 2001)
  weights = np.exp(-0.5 * eps ** 2)
  weights /= weights.sum()
  delta_hat = tf.constant(d[..., None] + tau[..., None] * eps)
  w_b = tf.constant(np.broadcast_to(w[..., None], delta_hat.shape))
  tau_b = tf.constant(np.broadcast_to(tau[..., None], delta_hat.shape))
  # The dynamics functions take the energy gradient, grad U~ = -delta.
  vanilla = sg.dynamics.barker_probability(-delta_hat, w_b).numpy() @ weights
  corrected = sg.dynamics.corrected_barker_probability(
      -delta_hat, w_b, tau_b).numpy() @ weights
  p = scipy.special.expit
  c = PROBIT_LOGIT / np.sqrt(PROBIT_LOGIT ** 2 + (w * tau) ** 2)
  assert np.max(np.abs(vanilla - p(c * d * w))) < 0.019
  small = tau * w <= 1.
  assert np.max(np.abs(corrected - p(d * w))[small]) < 0.019
  # And the vanilla bias is real (the bound is not vacuous).
  assert np.max(np.abs(vanilla - p(d * w))) > 0.1


def test_corrected_probability_is_equation_5():
  w = tf.constant([0.3, -0.3, 1., -1., 2., -2., 0.5], tf.float64)
  grad = tf.constant([-1., -1., 2., 2., -0.1, -0.1, 0.], tf.float64)
  tau = tf.constant(1.2, tf.float64)
  got = sg.dynamics.corrected_barker_probability(grad, w, tau).numpy()
  delta, z, t = -grad.numpy(), w.numpy(), 1.2
  inside = np.abs(z) < PROBIT_LOGIT / t
  expected = np.where(
      inside,
      scipy.special.expit(PROBIT_LOGIT / np.sqrt(np.where(
          inside, PROBIT_LOGIT ** 2 - t ** 2 * z ** 2, 1.)) * delta * z),
      (delta * z > 0).astype(float))
  np.testing.assert_allclose(got, expected, rtol=1e-12)
  # The indicator branch, 1(delta z > 0), where tau |z| >= 1.702.
  assert not inside[4] and got[4] == 1. and got[5] == 0.
  # tau = 0 gives the vanilla probability.
  np.testing.assert_allclose(
      sg.dynamics.corrected_barker_probability(grad, w, 0.).numpy(),
      sg.dynamics.barker_probability(grad, w).numpy(), rtol=1e-12)


def test_noise_estimate_is_the_std_of_the_scaled_minibatch_estimator():
  # tau-hat estimates the standard deviation of the N/n-scaled minibatch
  # gradient, (N / sqrt(n)) x the per-example standard deviation: one step
  # of the EMA is checked exactly against NumPy on the step's minibatch.
  problem = LinearRegression(num_examples=500, dim=2, seed=1)
  target = problem.in_memory_target(batch_size=50)
  n, big_n, beta = 50, 500, 0.3
  kernel = sg.SGBD(target, step_size=1e-3, variant="corrected",
                   noise_ema_weight=beta)
  state = tf.constant(problem.posterior_mean[None], tf.float32)

  def std_on_batch(seed, w):
    idx = np.asarray(target.minibatch_indices(seed))
    g = problem.per_example_gradients(w)[idx]
    return big_n / np.sqrt(n) * g.std(axis=0, ddof=1)

  results = kernel.bootstrap_results(state)
  w0 = problem.posterior_mean
  tau0 = std_on_batch(tfp.random.sanitize_seed(random.BOOTSTRAP_SEED), w0)
  np.testing.assert_allclose(results.noise_std[0], tau0, rtol=1e-4)
  seed = tf.constant([3, 4])
  _, results = kernel.one_step(state, results, seed=seed)
  batch_seed = random.derive_seeds(seed, 3)[0]
  expected = (1. - beta) * tau0 + beta * std_on_batch(batch_seed, w0)
  np.testing.assert_allclose(results.noise_std[0], expected, rtol=1e-4)
  # Not the per-example scale: that is N / sqrt(n) ~ 71 times smaller.
  per_example = problem.per_example_gradients(w0).std(axis=0)
  assert np.all(results.noise_std[0] > 20. * per_example)


def test_given_initial_noise_std_is_broadcast_and_then_averaged():
  target = sg.NoisyGradientTarget(
      lambda parts: gaussian_energy(parts[0]) + 0.5 * parts[1] ** 2,
      gradient_noise_variance=TAU ** 2)
  kernel = sg.SGBD(target, step_size=SIGMA, variant="corrected",
                   initial_noise_std=1., noise_ema_weight=0.25)
  state = [tf.zeros([3, 2]), tf.zeros([3])]
  results = kernel.bootstrap_results(state)
  np.testing.assert_array_equal(results.noise_std[0], np.ones([3, 2]))
  np.testing.assert_array_equal(results.noise_std[1], np.ones([3]))
  _, results = kernel.one_step(state, results, seed=[1, 2])
  # (1 - beta) 1 + beta sqrt(V) with V = 9.
  np.testing.assert_allclose(results.noise_std[0], 0.75 + 0.25 * TAU)


def test_step_size_is_read_from_the_results_under_adaptation():
  # TFP's adaptation kernels rebuild the kernel with
  # store_parameters_in_results=True and set `step_size` in the results;
  # the next move must use it. Bimodal increments have |w| = sigma (1 +
  # 0.1 xi).
  kernel = sg.SGBD(noisy_gaussian(), step_size=SIGMA,
                   store_parameters_in_results=True)
  state = tf.zeros([1000, 2])
  results = kernel.bootstrap_results(state)._replace(
      step_size=tf.constant(5.))
  new_state, results = kernel.one_step(state, results, seed=[1, 2])
  assert float(results.step_size) == 5.
  moves = np.abs(np.asarray(new_state))
  # 2000 draws of N(5, 0.5^2): mean within 4 standard errors (0.011).
  assert abs(moves.mean() - 5.) < NUM_SE * 0.5 / np.sqrt(moves.size)
  assert abs(moves.std() - 0.5) < 0.05
  # A kernel outside an adaptation kernel steps with its own step size
  # (check_kernel_results says that the results' differs).
  plain = sg.SGBD(noisy_gaussian(), step_size=SIGMA)
  results = results._replace(step_size=tf.constant(5.))
  with pytest.warns(sg.StepSizeFromResultsWarning, match=r"5\. differs"):
    sg.check_kernel_results(plain, state, results)
  new_state, _ = plain.one_step(state, results, seed=[1, 2])
  moves = np.abs(np.asarray(new_state))
  assert abs(moves.mean() - SIGMA) < NUM_SE * 0.1 * SIGMA / np.sqrt(
      moves.size)


def test_per_chain_step_sizes():
  kernel = sg.SGBD(noisy_gaussian(), step_size=tf.constant([[0.1], [10.]]))
  state = tf.zeros([2, 2])
  new_state, _ = kernel.one_step(state, kernel.bootstrap_results(state),
                                 seed=[3, 4])
  moves = np.abs(np.asarray(new_state))
  assert np.all((moves[0] > 0.05) & (moves[0] < 0.15))
  assert np.all((moves[1] > 5.) & (moves[1] < 15.))


def test_step_size_schedule():
  schedule = sg.PolynomialDecay(a=0.5, b=1., gamma=0.5)
  kernel = sg.SGBD(noisy_gaussian(), step_size=schedule)
  _, used = sample(kernel, tf.zeros([2, 2]), 4, seed=[1, 2], jit=False,
                   trace_fn=lambda _, r: r.step_size)
  np.testing.assert_allclose(used, 0.5 * np.arange(1., 5.) ** -0.5,
                             rtol=1e-6)
