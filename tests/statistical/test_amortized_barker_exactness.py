"""The amortized exact Barker chain is exact: where v-SGBD is biased (with the
same or an independent reverse minibatch, the latter accepting more often),
with exact gradients on a skewed target (Barker M-H), on minibatched linear
regression, after step-size adaptation, on list states with two batch
dimensions.

Every statistical tolerance is NUM_SE = 4 Monte Carlo standard errors,
sqrt(var / ESS) with the ESS of the very quantity averaged (theta for means,
(theta - mean)^2 for variances; see support/helpers.py), summed over chains;
differences of independent runs use sqrt(se_1^2 + se_2^2).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.barker_gaussian import MEAN, NUM_BURNIN, NUM_CHAINS, NUM_RESULTS
from support.barker_gaussian import noisy_gaussian, predicted_variance
from support.helpers import NUM_SE, mean_and_se, sample, variance_and_se
from support.linear_regression import LinearRegression


AMORTIZED_SIGMA, AMORTIZED_TAU = 0.8, 1.


@pytest.fixture(scope="module")
def amortized_runs():
  """(draws, is_accepted) of AmortizedBarker per `reverse_minibatch`."""
  cache = {}

  def get(reverse_minibatch):
    if reverse_minibatch not in cache:
      kernel = sg.AmortizedBarker(
          noisy_gaussian(AMORTIZED_TAU), step_size=AMORTIZED_SIGMA,
          num_steps=3, reverse_minibatch=reverse_minibatch)
      draws, accepted = sample(kernel, tf.zeros([NUM_CHAINS, 2]), 4000,
                               seed=[9, 10], num_burnin_steps=100,
                               trace_fn=lambda _, r: r.is_accepted)
      cache[reverse_minibatch] = np.asarray(draws), np.asarray(accepted)
    return cache[reverse_minibatch]
  return get


@pytest.mark.parametrize("reverse_minibatch", ["same", "independent"])
def test_amortized_barker_is_exact_where_vanilla_sgbd_is_biased(
    reverse_minibatch, amortized_runs):
  # sigma = 0.8 and tau = 1: v-SGBD is 30% too wide; T = 3 steps per M-H
  # test with the exact energy give 40-50% acceptance and the exact
  # N(MEAN, I).
  draws, accepted = amortized_runs(reverse_minibatch)
  assert 0.2 < np.mean(accepted) < 0.9  # The test does work.
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert np.all(np.abs(mean - MEAN) < NUM_SE * mean_se)
  assert np.all(np.abs(var - 1.) < NUM_SE * var_se), (var, var_se)
  vanilla = sample(sg.SGBD(noisy_gaussian(AMORTIZED_TAU),
                           step_size=AMORTIZED_SIGMA),
                   tf.zeros([NUM_CHAINS, 2]), NUM_RESULTS, seed=[11, 12],
                   num_burnin_steps=NUM_BURNIN)
  vanilla_var, vanilla_se = variance_and_se(vanilla)
  assert np.all(vanilla_var - 1. > NUM_SE * vanilla_se)
  assert np.all(vanilla_var - var > NUM_SE * np.hypot(var_se, vanilla_se))
  # And that bias is the one the quadrature predicts for v-SGBD.
  predicted = predicted_variance("vanilla", sigma=AMORTIZED_SIGMA,
                                 tau=AMORTIZED_TAU)
  assert np.all(np.abs(vanilla_var - predicted) < NUM_SE * vanilla_se)


def test_independent_reverse_minibatch_accepts_more_often(amortized_runs):
  # Both are exact (previous test); with the same minibatch the noise that
  # steered each move also enters the log ratio in full. Observed: 0.41 vs
  # 0.53. The acceptance indicators are averaged over 64,000 proposals each;
  # their standard error, even inflated 10x for autocorrelation, is < 0.02.
  _, same = amortized_runs("same")
  _, independent = amortized_runs("independent")
  assert np.mean(independent) - np.mean(same) > 0.05


def skewed_energy(x):
  """A skewed, non-Gaussian 2-D energy (exact gradients in these tests)."""
  x0, x1 = x[..., 0], x[..., 1]
  return (0.5 * x0 ** 2 + 0.1 * x0 ** 4 + 0.3 * x0 ** 3 / (1. + x0 ** 2)
          + (x1 - 0.5 * x0) ** 2)


def test_barker_metropolis_hastings_with_exact_gradients_is_exact():
  # T = 1 with exact gradients: the Barker M-H of Livingstone & Zanella.
  # Truth: x1 | x0 ~ N(x0 / 2, 1/2); the x0 marginal by quadrature.
  grid = np.linspace(-8., 8., 160001)
  density = np.exp(-(0.5 * grid ** 2 + 0.1 * grid ** 4 +
                     0.3 * grid ** 3 / (1. + grid ** 2)))
  density /= density.sum()
  e0, e00 = np.sum(density * grid), np.sum(density * grid ** 2)
  truth = np.array([e0, e00, 0.5 * e0, 0.5 + 0.25 * e00])
  target = sg.NoisyGradientTarget(skewed_energy, gradient_noise_variance=0.)
  kernel = sg.AmortizedBarker(target, step_size=1.2, num_steps=1)
  draws, accepted = sample(kernel, tf.zeros([NUM_CHAINS, 2]), 5000,
                           seed=[13, 14], num_burnin_steps=100,
                           trace_fn=lambda _, r: r.is_accepted)
  assert 0.3 < np.mean(accepted) < 0.95
  d = np.asarray(draws)
  stats = np.stack([d[..., 0], d[..., 0] ** 2, d[..., 1], d[..., 1] ** 2], -1)
  estimate, se = mean_and_se(stats)
  assert np.all(np.abs(estimate - truth) < NUM_SE * se), (estimate, truth, se)
  # Unadjusted Barker at this step size is visibly off in E[x0^2].
  unadjusted = np.asarray(sample(sg.SGBD(target, step_size=1.2),
                                 tf.zeros([NUM_CHAINS, 2]), 5000,
                                 seed=[15, 16], num_burnin_steps=100))
  u_est, u_se = mean_and_se(unadjusted[..., 0] ** 2)
  assert abs(u_est - truth[1]) > NUM_SE * np.hypot(u_se, se[1])


def test_amortized_barker_is_exact_on_minibatched_linear_regression():
  # Real minibatch noise (batch 50 of 500, gradient-estimator sd ~75 per
  # coordinate) and the chunked exact energy. The log ratio's noise term is
  # about sigma tau sqrt(T d), so sigma is a quarter of the posterior sd
  # (sigma tau ~ 0.85): about a third of the proposals are accepted.
  problem = LinearRegression(num_examples=500, dim=2, seed=1)
  target = problem.in_memory_target(batch_size=50, energy_chunk_size=128)
  sd = np.sqrt(np.diag(problem.posterior_cov))
  kernel = sg.AmortizedBarker(target, step_size=0.25 * float(sd.min()),
                              num_steps=3)
  init = tf.constant(np.tile(problem.posterior_mean, (NUM_CHAINS, 1)),
                     tf.float32)
  draws, accepted = sample(kernel, init, 3000, seed=[17, 18],
                           num_burnin_steps=100,
                           trace_fn=lambda _, r: r.is_accepted)
  assert 0.2 < np.mean(accepted) < 0.95
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws, mean=problem.posterior_mean)
  assert np.all(np.abs(mean - problem.posterior_mean) < NUM_SE * mean_se)
  assert np.all(np.abs(var - np.diag(problem.posterior_cov)) <
                NUM_SE * var_se)


def test_amortized_barker_step_size_adaptation():
  inner = sg.AmortizedBarker(noisy_gaussian(1.), step_size=0.05, num_steps=3)
  kernel = tfp.mcmc.SimpleStepSizeAdaptation(
      inner, num_adaptation_steps=400, target_accept_prob=0.5)

  def trace(_, pkr):
    return (pkr.inner_results.accepted_results.step_size,
            pkr.inner_results.proposed_results.step_size,
            pkr.inner_results.log_accept_ratio)
  _, (step_size, used, log_ratio) = sample(kernel, tf.zeros([NUM_CHAINS, 2]),
                                           1000, seed=[19, 20], trace_fn=trace)
  step_size, log_ratio = np.asarray(step_size), np.asarray(log_ratio)
  assert step_size[-1] > 0.3  # Moved from 0.05 towards ~0.8.
  assert np.all(step_size[401:] == step_size[-1])
  np.testing.assert_array_equal(used, step_size)
  rate = np.mean(np.exp(np.minimum(log_ratio[500:], 0.)))
  assert abs(rate - 0.5) < 0.05, rate


def test_amortized_barker_list_state_with_two_batch_dimensions():
  def energy(parts):
    a, b = parts
    return 0.5 * tf.reduce_sum(tf.square(a - MEAN), -1) + 2. * b ** 2
  target = sg.NoisyGradientTarget(energy, gradient_noise_variance=0.25)
  kernel = sg.AmortizedBarker(target, step_size=0.5, num_steps=3)
  init = [tf.zeros([2, 4, 2]), tf.zeros([2, 4])]
  (a, b), accepted = sample(kernel, init, 3000, seed=[21, 22],
                            num_burnin_steps=100,
                            trace_fn=lambda _, r: r.is_accepted)
  assert accepted.shape == (3000, 2, 4)
  assert 0.2 < np.mean(accepted) < 0.95
  a = np.reshape(np.asarray(a), (3000, 8, 2))
  b = np.reshape(np.asarray(b), (3000, 8, 1))
  for draws, mean, var in ((a, MEAN, 1.), (b, 0., 0.25)):
    m, m_se = mean_and_se(draws)
    v, v_se = variance_and_se(draws, mean=mean)
    assert np.all(np.abs(m - mean) < NUM_SE * m_se)
    assert np.all(np.abs(v - var) < NUM_SE * v_se), (v, var, v_se)
