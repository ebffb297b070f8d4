"""Chains on per-chain minibatches (InMemoryTarget(independent_minibatches=
True)) on the linear regression of support/linear_regression.py (N = 500,
d = 2): SGLD's stationary moments match the Lyapunov prediction and the
chains are uncorrelated; with shared minibatches (the default) the chains
are correlated as predicted at large gradient noise. Tolerances are NUM_SE =
4 Monte Carlo standard errors.
"""

import numpy as np
import pytest
import scipy.linalg
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, sample, stationary_covariance
from support.linear_regression import LinearRegression, check_moments
from support.per_chain_minibatches import BATCH, make_target


@pytest.fixture(scope="module")
def problem():
  return LinearRegression(num_examples=500, dim=2, seed=1)


def cross_chain_correlation(draws, mean, variance):
  """Mean correlation of the pairs of chains, per coordinate, and two
  standard errors: one valid when the chains are independent (products of
  different pairs are then uncorrelated, so the ESS adds over pairs), and a
  conservative one that holds for dependent pairs (the mean of the pairs'
  own standard errors)."""
  z = (np.asarray(draws, np.float64) - mean) / np.sqrt(variance)
  chains = z.shape[1]
  pairs = [(a, b) for a in range(chains) for b in range(a + 1, chains)]
  products = np.stack([z[:, a] * z[:, b] for a, b in pairs], axis=1)
  r, se_independent = mean_and_se(products)
  se_pairs = [mean_and_se(products[:, [k]])[1] for k in range(len(pairs))]
  return r, se_independent, np.mean(se_pairs, axis=0)


def run_sgld(problem, independent, batch_size, step_size, seed,
             num_results=20000):
  target = make_target(problem, independent, batch_size=batch_size)
  init = tf.constant(np.tile(problem.posterior_mean, (4, 1)), tf.float32)
  draws = sample(sg.SGLD(target, step_size=step_size), init, num_results,
                 seed=seed, num_burnin_steps=500)
  v = problem.minibatch_gradient_covariance(batch_size)
  predicted = stationary_covariance("sgld", problem.precision, step_size,
                                    gradient_noise=v)
  # Shared minibatches: the common gradient noise alone drives the
  # cross-chain covariance C = A C A^T + h^2 V, A = I - h P.
  a = np.eye(problem.dim) - step_size * problem.precision
  cross = scipy.linalg.solve_discrete_lyapunov(a, step_size ** 2 * v)
  return np.asarray(draws), predicted, np.diag(cross) / np.diag(predicted)


def test_independent_sgld_chains_match_the_predicted_posterior(problem):
  # The setting of test_linear_regression_posterior.py (SGLD, h = 1e-4,
  # n = 50, 20000 draws), with 4 chains on independent minibatches: the
  # same stationary moments, and no correlation between the chains. Over 6
  # seeds the
  # moments' z-scores stayed within 1.9 and the correlations within 2.0
  # standard errors (se about 0.013).
  draws, predicted, _ = run_sgld(problem, True, BATCH, 1e-4, seed=[1, 2])
  check_moments(problem, draws, predicted)
  r, se, _ = cross_chain_correlation(draws, problem.posterior_mean,
                                     np.diag(predicted))
  assert np.all(np.abs(r) < NUM_SE * se)


def test_shared_minibatches_correlate_chains_at_large_gradient_noise(problem):
  # n = 10: the gradient noise makes up about 60% of the stationary variance
  # (predicted cross-chain correlation 0.56 and 0.62 with shared batches).
  # Over 6 seeds at 20000 draws: shared r = 0.52-0.66, within 2.1 (se about
  # 0.035) of the prediction; independent |r| within 2.1 se (se about
  # 0.013). Here 10000 draws, for time.
  step, batch = 1e-4, 10
  shared, predicted, r_pred = run_sgld(problem, False, batch, step, [3, 4],
                                       num_results=10000)
  own, _, _ = run_sgld(problem, True, batch, step, [3, 4],
                       num_results=10000)
  mean, var = problem.posterior_mean, np.diag(predicted)
  r_shared, _, se_shared = cross_chain_correlation(shared, mean, var)
  r_own, se_own, _ = cross_chain_correlation(own, mean, var)
  assert np.all(r_pred > 0.5)
  assert np.all(np.abs(r_shared - r_pred) < NUM_SE * se_shared)
  assert np.all(r_shared > NUM_SE * se_shared)
  assert np.all(np.abs(r_own) < NUM_SE * se_own)
  # Independent chains have the same stationary moments at large noise too.
  check_moments(problem, own, predicted)
