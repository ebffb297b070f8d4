"""AMAGOLD and the amortized M-H wrapper are exact, not just running: unbiased
with noisy gradients where SGHMC is not, on minibatched linear regression,
agreeing with TFP's HMC at full batch (HMC and L2MC), skew-reversible with
little friction, after step-size adaptation, on list states with two batch
dimensions; the uncorrected proposal is biased like SGHMC.

Every statistical tolerance is NUM_SE = 4 Monte Carlo standard errors,
sqrt(var / ESS) with the ESS of the very quantity averaged (theta for means,
(theta - mean)^2 for variances; see support/helpers.py). For a Gaussian the
second is the usual Var[sample variance] = 2 sigma^4 / ESS, estimated rather
than assumed. Differences of two independent chains use the combined error
sqrt(se_1^2 + se_2^2). Contrasts (SGHMC is biased) are asserted with the
same 4 standard errors in the other direction.
"""

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.amagold_targets import FRICTION, NUM_LEAPFROG_STEPS, PRECISION
from support.amagold_targets import STEP_SIZE, accept_trace
from support.amagold_targets import exact_gradient_target, noisy_gaussian
from support.amagold_targets import quartic_energy
from support.gaussian_targets import gaussian_target
from support.helpers import NUM_SE, ess, mean_and_se, sample, variance_and_se
from support.linear_regression import LinearRegression


def check_gaussian_moments(draws, precision=PRECISION):
  """Mean 0 and variance 1 / precision, each within 4 standard errors."""
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert np.all(np.abs(mean) < NUM_SE * mean_se), (mean, mean_se)
  assert np.all(np.abs(var - 1. / precision) < NUM_SE * var_se), (var, var_se)
  return var, var_se


@pytest.fixture(scope="module")
def sghmc_variance():
  """SGHMC at the same step size: visibly hotter than the target."""
  kernel = sg.SGHMC(noisy_gaussian(), step_size=STEP_SIZE,
                    friction=2. * FRICTION)
  draws = sample(kernel, tf.zeros([16, 2]), 20000, seed=[1, 2],
                 num_burnin_steps=500)
  return variance_and_se(draws)


@pytest.mark.parametrize("resample_momentum", [True, False],
                         ids=["reversible", "skew_reversible"])
def test_amagold_is_unbiased_where_sghmc_is_not(resample_momentum,
                                                  sghmc_variance):
  kernel = sg.AMAGOLD(noisy_gaussian(), step_size=STEP_SIZE,
                      num_leapfrog_steps=NUM_LEAPFROG_STEPS,
                      friction=FRICTION, resample_momentum=resample_momentum)
  draws, accepted = sample(kernel, tf.zeros([16, 2]), 2000, seed=[3, 4],
                           num_burnin_steps=100, trace_fn=accept_trace)
  var, var_se = check_gaussian_moments(draws)
  rate = np.mean(accepted)
  assert 0.3 < rate < 0.99  # The test is doing work: some rejections.
  # The contrast: SGHMC's variance is off by many of its own standard errors
  # (gradient noise heats it by about h V / (2 C) = 20%).
  sghmc_var, sghmc_se = sghmc_variance
  assert np.all(sghmc_var - 1. / PRECISION > NUM_SE * sghmc_se)
  assert np.all(sghmc_var - 1. / PRECISION >
                NUM_SE * np.sqrt(sghmc_se ** 2 + var_se ** 2))


def test_uncorrected_proposal_is_biased_like_sghmc():
  # Used alone, the stochastic leapfrog is an SGHMC variant: biased.
  kernel = sg.UncalibratedAMAGOLD(noisy_gaussian(), step_size=STEP_SIZE,
                                  num_leapfrog_steps=NUM_LEAPFROG_STEPS,
                                  friction=FRICTION, resample_momentum=False)
  draws = sample(kernel, tf.zeros([16, 2]), 2000, seed=[5, 6],
                 num_burnin_steps=100)
  var, var_se = variance_and_se(draws)
  assert np.all(var - 1. / PRECISION > NUM_SE * var_se)


def test_amagold_is_exact_on_minibatched_linear_regression():
  # Real minibatch noise (InMemoryTarget, batch 50 of 500) and the chunked
  # exact energy: the analytic posterior, within Monte Carlo error.
  problem = LinearRegression(num_examples=500, dim=2, seed=1)
  target = problem.in_memory_target(batch_size=50, energy_chunk_size=128)
  sigma = float(np.sqrt(np.max(np.linalg.eigvalsh(problem.precision))))
  kernel = sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=10,
                      friction=1., momentum_std=sigma)
  init = tf.constant(np.tile(problem.posterior_mean, (8, 1)), tf.float32)
  draws, accepted = sample(kernel, init, 1500, seed=[7, 8],
                           num_burnin_steps=100, trace_fn=accept_trace)
  assert 0.3 < np.mean(accepted) < 0.99
  mean, mean_se = mean_and_se(draws)
  assert np.all(np.abs(mean - problem.posterior_mean) < NUM_SE * mean_se)
  var, var_se = variance_and_se(draws, mean=problem.posterior_mean)
  assert np.all(np.abs(var - np.diag(problem.posterior_cov)) <
                NUM_SE * var_se)


@pytest.fixture(scope="module")
def hmc_draws():
  kernel = tfp.mcmc.HamiltonianMonteCarlo(
      lambda x: -quartic_energy(x), step_size=0.65, num_leapfrog_steps=10)
  return np.asarray(sample(kernel, tf.zeros([16, 2]), 3000, seed=[9, 10],
                           num_burnin_steps=100))


def moments(draws):
  """Per chain-and-draw statistics E[x0], E[x1], E[x0^2], E[x1^2], E[x0 x1]."""
  x0, x1 = draws[..., 0], draws[..., 1]
  return np.stack([x0, x1, x0 ** 2, x1 ** 2, x0 * x1], -1)


@pytest.mark.parametrize("friction,resample_momentum", [
    (0., True),    # HMC with T leapfrog steps (position-Verlet form).
    (0.5, False),  # L2MC with amortized M-H, skew-reversible.
], ids=["hmc", "l2mc"])
def test_full_batch_amagold_agrees_with_tfp_hmc(friction, resample_momentum,
                                                hmc_draws):
  kernel = sg.AMAGOLD(exact_gradient_target(quartic_energy), step_size=0.65,
                      num_leapfrog_steps=10, friction=friction,
                      resample_momentum=resample_momentum)
  draws = np.asarray(sample(kernel, tf.zeros([16, 2]), 3000, seed=[11, 12],
                            num_burnin_steps=100))
  ours, ours_se = mean_and_se(moments(draws))
  hmc, hmc_se = mean_and_se(moments(hmc_draws))
  assert np.all(np.abs(ours - hmc) < NUM_SE * np.sqrt(ours_se ** 2 +
                                                       hmc_se ** 2))
  # Kolmogorov-Smirnov on draws thinned to about one per effective sample.
  for coordinate in range(2):
    samples = []
    for d in (draws, hmc_draws):
      x = d[..., coordinate]
      thin = int(np.ceil(x.size / ess(x)))
      samples.append(x[::thin].ravel())
    assert scipy.stats.ks_2samp(*samples).pvalue > 1e-3


def test_skew_reversible_chain_with_little_friction_is_exact():
  # With beta small the momentum persists across outer steps, so the flip
  # on rejection (r <- -r) matters: without it this chain's E[x0^2] is off
  # by about 20 standard errors. Truth: x1 | x0 ~ N(x0 / 2, 1/2), so the
  # x0 marginal is exp(-(x0^2/2 + x0^4/10 + 0.3 x0^3 / (1 + x0^2))), by
  # quadrature.
  grid = np.linspace(-8., 8., 160001)
  density = np.exp(-(0.5 * grid ** 2 + 0.1 * grid ** 4 +
                     0.3 * grid ** 3 / (1. + grid ** 2)))
  density /= density.sum()
  truth = np.array([np.sum(density * grid), np.sum(density * grid ** 2)])
  kernel = sg.AMAGOLD(exact_gradient_target(quartic_energy), step_size=0.6,
                      num_leapfrog_steps=5, friction=0.02,
                      resample_momentum=False)
  draws, accepted = sample(kernel, tf.zeros([32, 2]), 3000, seed=[17, 18],
                           num_burnin_steps=100, trace_fn=accept_trace)
  assert 0.6 < np.mean(accepted) < 0.97
  x0 = np.asarray(draws)[..., 0]
  estimate, se = mean_and_se(np.stack([x0, x0 ** 2], -1))
  assert np.all(np.abs(estimate - truth) < NUM_SE * se), (estimate, truth, se)


@pytest.mark.parametrize("adaptation", ["simple", "dual_averaging"])
def test_adapted_step_size_reaches_target_acceptance_and_stays_exact(
    adaptation):
  target_rate, num_adaptation = 0.85, 1000
  inner = sg.AMAGOLD(noisy_gaussian(), step_size=0.01,
                     num_leapfrog_steps=NUM_LEAPFROG_STEPS, friction=FRICTION)
  if adaptation == "simple":
    kernel = tfp.mcmc.SimpleStepSizeAdaptation(
        inner, num_adaptation_steps=num_adaptation,
        target_accept_prob=target_rate)
  else:
    kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
        inner, num_adaptation_steps=num_adaptation,
        target_accept_prob=target_rate)

  def trace(_, pkr):
    return (pkr.inner_results.log_accept_ratio,
            pkr.inner_results.accepted_results.step_size,
            pkr.inner_results.proposed_results.step_size)

  draws, (log_ratio, step_size, used_step_size) = sample(
      kernel, tf.zeros([16, 2]), 3000, seed=[13, 14], trace_fn=trace)
  draws, log_ratio = np.asarray(draws), np.asarray(log_ratio)
  after = slice(num_adaptation + 200, None)
  # The step size moved from 0.01 and is constant once adaptation stops,
  # and the proposal used the adapted value (so its noise variance
  # 4 eps beta sigma^2 followed it too).
  assert step_size[-1] > 0.03
  assert np.all(step_size[num_adaptation + 1:] == step_size[-1])
  np.testing.assert_array_equal(used_step_size, step_size)
  # Mean acceptance probability after adaptation: within 0.03 of 85%. The
  # adaptation's own error dominates (Simple's final step size is one point
  # of its +-1% oscillation); over 7 seeds |rate - 0.85| <= 0.009 was seen.
  rate = np.mean(np.exp(np.minimum(log_ratio[after], 0.)))
  assert abs(rate - target_rate) < 0.03, rate
  # The adapted chain (a fixed step size from then on) is exact.
  check_gaussian_moments(draws[after])


def test_list_state_and_two_batch_dimensions():
  # theta = [a, b]: a of shape [2, 4, 2] (chains [2, 4]), b of shape [2, 4].
  def energy(parts):
    a, b = parts
    return 0.5 * tf.reduce_sum(PRECISION * tf.square(a), -1) + 2. * b ** 2
  target = sg.NoisyGradientTarget(energy, gradient_noise_variance=1.)
  kernel = sg.AMAGOLD(target, step_size=STEP_SIZE, num_leapfrog_steps=10,
                      friction=FRICTION, resample_momentum=False)
  init = [tf.zeros([2, 4, 2]), tf.zeros([2, 4])]
  (a, b), accepted = sample(kernel, init, 1500, seed=[15, 16],
                            num_burnin_steps=100, trace_fn=accept_trace)
  assert accepted.shape == (1500, 2, 4)
  a = np.reshape(np.asarray(a), (1500, 8, 2))
  b = np.reshape(np.asarray(b), (1500, 8, 1))
  check_gaussian_moments(a)
  check_gaussian_moments(b, precision=np.array([4.]))


# --- a mass matrix ------------------------------------------------------------


# Posterior sds 1000x apart (0.03 and 30), rotated by 30 degrees for the
# dense case; gradient noise N(0, 0.5 P), scaled with the posterior as a
# minibatch's would be.
MASS_SCALES = np.array([0.03, 30.])


def _rotated_covariance():
  angle = np.pi / 6.
  rot = np.array([[np.cos(angle), -np.sin(angle)],
                  [np.sin(angle), np.cos(angle)]])
  return rot @ np.diag(MASS_SCALES ** 2) @ rot.T


@pytest.mark.parametrize("kind", ["diagonal", "dense"])
def test_amagold_with_a_mass_matrix_is_exact_where_scales_differ_1000x(kind):
  # The mass M = Sigma^{-1} (diagonal: its diagonal inverse; dense: the
  # precision, as tfd.MultivariateNormalTriL) makes one step size fit both
  # scales; with M = I the same eps is 5x the sd-0.03 coordinate's stable
  # limit and no proposal would be accepted. Exactness: means, variances
  # (and the covariance) within 4 Monte Carlo standard errors of the
  # target's, at an acceptance that shows the test at work.
  cov = np.diag(MASS_SCALES ** 2) if kind == "diagonal" else \
      _rotated_covariance()
  precision = np.linalg.inv(cov)
  target = gaussian_target([0., 0.], precision, 0.5 * precision)
  init = tf.zeros([16, 2])
  if kind == "diagonal":
    mass = sg.diagonal_momentum_distribution(
        init, batch_ndims=1, inverse_mass=MASS_SCALES ** 2)
  else:
    mass = tfp.distributions.MultivariateNormalTriL(
        scale_tril=tf.linalg.cholesky(tf.constant(precision, tf.float32)))
  kernel = sg.AMAGOLD(target, step_size=0.3, num_leapfrog_steps=5,
                      friction=0.5, momentum_distribution=mass)
  draws, accepted = sample(kernel, init, 3000, seed=[31, 32],
                           num_burnin_steps=100, trace_fn=accept_trace)
  draws = np.asarray(draws, np.float64)
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws, mean=0.)
  assert np.all(np.abs(mean) < NUM_SE * mean_se), (mean, mean_se)
  assert np.all(np.abs(var - np.diag(cov)) < NUM_SE * var_se), (
      var, np.diag(cov), var_se)
  cross, cross_se = mean_and_se(draws[..., :1] * draws[..., 1:])
  assert abs(cross[0] - cov[0, 1]) < NUM_SE * cross_se[0] + 1e-9
  assert 0.3 < np.mean(accepted) < 0.99


# Six coordinates with sds from 0.03 to 30 whose correlation matrix is
# I + V (Lambda - I) V^T, V two random orthonormal directions, Lambda 40
# and 0.02: a rotated Gaussian whose correlations have condition number
# 2,000, which a diagonal mass cannot undo. Its covariance is exactly the
# low-rank-plus-diagonal form.
LOW_RANK_SD = np.array([0.03, 0.3, 1., 3., 10., 30.])
LOW_RANK_EIGENVALUES = np.array([40., 0.02])


def _low_rank_basis():
  basis, _ = np.linalg.qr(np.random.default_rng(5).normal(size=(6, 2)))
  return basis


def test_amagold_with_a_low_rank_mass_is_exact_on_a_rotated_gaussian():
  # M^{-1} = the covariance, as low_rank_momentum_distribution builds it.
  # Exactness: every mean, variance and cross moment within 4 Monte Carlo
  # standard errors of the target's, at an acceptance that shows the test
  # at work (gradient noise N(0, 0.5 P) as a minibatch's would be).
  basis = _low_rank_basis()
  s = np.diag(LOW_RANK_SD)
  cov = s @ (np.eye(6) + basis @ np.diag(LOW_RANK_EIGENVALUES - 1.) @
             basis.T) @ s
  precision = np.linalg.inv(cov)
  target = gaussian_target(np.zeros(6), precision, 0.5 * precision)
  mass = sg.dynamics.mass.low_rank_momentum_distribution(
      tf.constant(LOW_RANK_SD, tf.float32), tf.constant(basis, tf.float32),
      tf.constant(LOW_RANK_EIGENVALUES, tf.float32))
  init = tf.zeros([16, 6])
  kernel = sg.AMAGOLD(target, step_size=0.3, num_leapfrog_steps=5,
                      friction=0.5, momentum_distribution=mass)
  draws, accepted = sample(kernel, init, 3000, seed=[33, 34],
                           num_burnin_steps=100, trace_fn=accept_trace)
  draws = np.asarray(draws, np.float64)
  mean, mean_se = mean_and_se(draws)
  assert np.all(np.abs(mean) < NUM_SE * mean_se), (mean / mean_se)
  rows, cols = np.triu_indices(6)
  products = draws[..., rows] * draws[..., cols]
  moment, moment_se = mean_and_se(products)
  assert np.all(np.abs(moment - cov[rows, cols]) < NUM_SE * moment_se), (
      (moment - cov[rows, cols]) / moment_se)
  assert 0.3 < np.mean(accepted) < 0.99, np.mean(accepted)
