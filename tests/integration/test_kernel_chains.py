"""Kernels' chains on small targets, compiled or run in graph mode as users
run them: AMAGOLD's minibatch acceptance test (one minibatch for both
energies, then the chain under XLA; and on a DatasetTarget), its SGD
parameterisation giving the same chain, and a diverging SGHMC chain flagged
and frozen at its last finite state. (Their single steps against their
formulas: tests/unit/kernels/.)
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import random
from support.amagold_targets import accept_trace, noisy_gaussian
from support.helpers import assert_diverged_chain_frozen, sample
from support.linear_regression import LinearRegression


def test_minibatch_acceptance_uses_one_minibatch_for_both_energies():
  problem = LinearRegression(num_examples=200, dim=2, seed=3)
  target = problem.in_memory_target(batch_size=20)
  sigma = float(np.sqrt(np.max(np.linalg.eigvalsh(problem.precision))))
  kernel = sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=5,
                      friction=1., momentum_std=sigma,
                      acceptance_energy="minibatch")
  assert not kernel.is_calibrated
  state = tf.constant(np.tile(problem.posterior_mean, (3, 1)), tf.float32)
  seed = tf.constant([5, 6])
  _, results = kernel.one_step(state, kernel.bootstrap_results(state), seed)
  energy_seed = random.split_seed(seed, 3)[1]
  u = target.minibatch_energy(state, energy_seed)
  u_star = target.minibatch_energy(results.proposed_state, energy_seed)
  rho = results.proposed_results.log_acceptance_correction
  np.testing.assert_allclose(results.log_accept_ratio, u - u_star + rho,
                             rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(results.proposed_energy, u_star, rtol=1e-5)
  # And it compiles with XLA.
  draws = sample(kernel, state, 20, seed=[1, 2])
  assert np.all(np.isfinite(draws))


def test_minibatch_acceptance_runs_on_a_dataset_target():
  problem = LinearRegression(num_examples=100, dim=2, seed=4)
  dataset = tf.data.Dataset.from_tensor_slices(problem.data).shuffle(
      100, seed=0).repeat().batch(10)
  target = sg.DatasetTarget(problem.log_likelihood, dataset, 100,
                            log_prior_fn=problem.log_prior)
  kernel = sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=3,
                      friction=1., momentum_std=10.,
                      acceptance_energy="minibatch")
  init = tf.constant(np.tile(problem.posterior_mean, (2, 1)), tf.float32)
  draws, accepted = sample(kernel, init, 5, seed=[1, 2], jit=False,
                           trace_fn=accept_trace)
  assert draws.shape == (5, 2, 2) and np.all(np.isfinite(draws))


def test_sgd_parameterisation_is_the_same_chain():
  # v = eps sigma^-2 r, b = eps beta, h = eps^2 sigma^-2 (Appendix F): the
  # (h, b) kernel and the (eps, sigma = 1, beta) kernel are one chain.
  h, b = 0.01, 0.05
  target = noisy_gaussian()
  sgd = sg.AMAGOLD.from_sgd_parameters(target, learning_rate=h,
                                       momentum_decay=b, num_leapfrog_steps=5)
  direct = sg.AMAGOLD(target, step_size=np.sqrt(h), num_leapfrog_steps=5,
                      friction=b / np.sqrt(h))
  assert sgd.step_size == pytest.approx(0.1)
  assert sgd.friction == pytest.approx(0.5)
  a = sample(sgd, tf.zeros([2, 2]), 20, seed=[1, 2], jit=False)
  c = sample(direct, tf.zeros([2, 2]), 20, seed=[1, 2], jit=False)
  np.testing.assert_allclose(a, c, rtol=1e-6)
  # And the SGD-form update is what the docstring says, in v units.
  rng = np.random.default_rng(1)
  v, g, xi = rng.normal(size=(3, 5))
  eps, beta = np.sqrt(h), b / np.sqrt(h)
  r_new = sg.dynamics.amagold_momentum(tf.constant(v / eps), tf.constant(g),
                                       eps, beta, tf.constant(xi)).numpy()
  v_new = ((1 - b) * v - h * g + 2 * np.sqrt(b * h) * xi) / (1 + b)
  np.testing.assert_allclose(eps * r_new, v_new, rtol=1e-10)


def test_diverging_chain_is_flagged_and_frozen_at_its_last_finite_state():
  # U = x^4 / 4 is stiff far out: from x = 20 a step of 0.2 overshoots
  # further each step until float32 overflows. Chain 1 starts in the well,
  # where h * sqrt(U'') < 2, and must not diverge.
  target = sg.NoisyGradientTarget(
      lambda x: tf.reduce_sum(0.25 * x ** 4, -1), gradient_noise_variance=0.)
  kernel = sg.SGHMC(target, step_size=0.2, friction=0.1)
  # Once diverged the chain stays flagged and stays put.
  assert_diverged_chain_frozen(kernel, tf.constant([[20.], [0.]]))


