"""The multi-step Barker proposal and its amortized M-H correction
(tfp_sgmcmc/kernels/barker.py): the log proposal ratio against the Barker
density written out in NumPy, single moves with the Barker probability, one
step's log acceptance ratio on a minibatched target (same or independent
reverse minibatch) in float64, a diverged proposal rejected.
"""

import numpy as np
import pytest
import scipy.special
import scipy.stats
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc import random
from support.helpers import NUM_SE
from support.linear_regression import LinearRegression


def test_barker_log_proposal_ratio_is_log_reverse_over_forward_density():
  # The Barker density, written out with mu_sigma (bimodal) and the factor
  # 2: q(x -> y) = prod_j 2 mu_sigma(y_j - x_j) p(-dU/dx_j(x), y_j - x_j).
  rng = np.random.default_rng(0)
  x, y, g, g_new = rng.normal(size=(4, 3, 5))
  sigma = 0.7

  def log_mu(z):
    s = 0.1 * sigma
    return np.log(0.5 * (scipy.stats.norm.pdf(z, sigma, s) +
                         scipy.stats.norm.pdf(z, -sigma, s)))

  def log_q(a, b, grad_a):
    z = b - a
    return np.sum(np.log(2.) + log_mu(z) + np.log(scipy.special.expit(
        -z * grad_a)), -1)
  y = x + sigma * np.sign(y)  # A move the proposal can make.
  expected = log_q(y, x, g_new) - log_q(x, y, g)
  got = sg.dynamics.barker_log_proposal_ratio(
      tf.constant(x), tf.constant(y), tf.constant(g), tf.constant(g_new),
      batch_ndims=1).numpy()
  np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_barker_move_has_the_barker_density():
  # Many single moves from one point: the fraction that go up by ~w matches
  # E[p(delta, w)] = E[sigmoid(-w dU/dx)] within binomial error.
  n = 200000
  grad = tf.fill([n], 0.8)
  increment = sg.dynamics.barker_increment_like(grad, 0.5, [1, 2])
  prob = sg.dynamics.barker_probability(grad, increment)
  moved = sg.dynamics.barker_move(tf.zeros([n]), increment, prob,
                                  sg.dynamics.uniform_like(grad, [3, 4]))
  w = np.abs(np.asarray(increment))
  up = np.mean(np.asarray(moved) > 0)
  expected = np.mean(scipy.special.expit(-0.8 * w))
  assert abs(up - expected) < NUM_SE * np.sqrt(expected * (1 - expected) / n)
  # |move| = |w|, with |w| ~ N(0.5, 0.05^2).
  np.testing.assert_allclose(np.abs(moved), w)
  assert abs(w.mean() - 0.5) < NUM_SE * 0.05 / np.sqrt(n)


@pytest.mark.parametrize("reverse_minibatch", ["same", "independent"])
def test_one_step_log_accept_ratio_on_a_minibatched_target(reverse_minibatch):
  # T = 1 on a minibatched linear regression: the log ratio must be
  # U(x) - U(y) + log q'(y -> x) - log q(x -> y), with q on the minibatch
  # that made the move and q' on that same minibatch ("same") or on the
  # step's second one ("independent"), checked in float64 NumPy.
  problem = LinearRegression(num_examples=200, dim=2, seed=4)
  x64 = tuple(a.astype(np.float64) for a in problem.data)
  target = sg.InMemoryTarget(
      problem.log_likelihood, x64, batch_size=20,
      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1)
      / problem.prior_scale ** 2)
  sigma = 0.05
  kernel = sg.AmortizedBarker(target, step_size=sigma, num_steps=1,
                              reverse_minibatch=reverse_minibatch)
  state = tf.constant(problem.posterior_mean[None] + [[0.02, -0.03]])
  results = kernel.bootstrap_results(state)
  seed = tf.constant([5, 6])
  _, results = kernel.one_step(state, results, seed=seed)
  # The seeds the kernels derive: the wrapper's proposal seed, then the
  # proposal's per-step split (batch, increment, direction, reverse, next).
  proposal_seed = random.split_seed(seed, 3)[0]
  step_seeds = random.split_seed(tfp.random.sanitize_seed(proposal_seed), 5)
  forward = np.asarray(target.minibatch_indices(step_seeds[0]))
  reverse = (forward if reverse_minibatch == "same" else
             np.asarray(target.minibatch_indices(step_seeds[3])))
  assert reverse_minibatch == "same" or not np.array_equal(forward, reverse)

  def minibatch_grad(w, idx):
    return (200. / 20. * problem.per_example_gradients(w)[idx].sum(0) +
            w / problem.prior_scale ** 2)
  x = problem.posterior_mean + np.array([0.02, -0.03])
  y = np.asarray(results.proposed_state)[0]
  z = y - x
  assert np.allclose(np.abs(z), sigma, rtol=0.5)
  softplus = lambda v: np.logaddexp(0., v)  # noqa: E731
  log_q_ratio = np.sum(softplus(z * minibatch_grad(x, forward)) -
                       softplus(-z * minibatch_grad(y, reverse)))
  np.testing.assert_allclose(
      results.proposed_results.log_acceptance_correction[0], log_q_ratio,
      rtol=1e-8)
  np.testing.assert_allclose(
      results.log_accept_ratio[0],
      problem.energy(x) - problem.energy(y) + log_q_ratio, rtol=1e-8,
      atol=1e-8)


def test_diverged_proposal_is_flagged_and_rejected():
  def energy(x):
    x = x[..., 0]
    return tf.where(x < 3., -10. * x, tf.fill(tf.shape(x), np.nan))
  target = sg.NoisyGradientTarget(energy, gradient_noise_variance=0.)
  kernel = sg.AmortizedBarker(target, step_size=1., num_steps=10)
  state = tf.constant([[2.5]])
  new_state, results = kernel.one_step(state, kernel.bootstrap_results(state),
                                       seed=[1, 2])
  assert results.proposed_results.diverged.numpy().all()
  assert np.isneginf(results.log_accept_ratio.numpy()).all()
  assert not results.is_accepted.numpy().any()
  assert not results.accepted_results.diverged.numpy().any()
  np.testing.assert_array_equal(new_state, state)
