"""Every sampler through `fit` samples the posterior it should, within 4 Monte
Carlo standard errors from the ESS: Keras SGHMC matches the Lyapunov
prediction of the discretised chain (running moments included), Keras
AMAGOLD is exact, SGLD, SGHMC (Euler, splitting), pSGLD and SGNHT match
their predicted moments, and skew-reversible AMAGOLD the analytic
posterior. The tfp.mcmc kernels' chains on this problem, with these
settings, are checked against the same predictions in
tests/statistical/test_linear_regression_posterior.py (splitting SGHMC)
and tests/statistical/test_amagold_exactness.py (AMAGOLD), so Keras and
TFP agree through them; that a Keras chain is the kernel's chain, bit for
bit, is tests/keras/test_same_chain_as_kernels.py.

The model is the Bayesian linear regression of support/linear_regression.py
written for Keras (support/keras_fits.py): Dense(1, no bias) with the
Gaussian log-likelihood and a N(0, 1) prior. The minibatches are i.i.d.
draws with replacement (as InMemoryTarget draws them), so the Lyapunov
prediction of the stationary covariance (support/helpers.py) holds for the
Keras chain as for the kernel. Step sizes are chosen so that the chain
mixes in a few steps and the gradient-noise bias is many standard errors
wide.
"""

import numpy as np
import scipy.linalg

import tfp_sgmcmc.keras as sgk
from support.helpers import NUM_SE, mean_and_se, stationary_covariance
from support.helpers import variance_and_se
from support.keras_fits import BATCH, batch_indices, fit, fit_regression
from support.keras_fits import kept_draws


def test_keras_sghmc_matches_the_predicted_posterior(problem):
  # Splitting SGHMC, XLA-compiled train steps (jit_compile=True), 20 steps
  # per execution. Reference: the exact stationary covariance of the
  # discretised chain with this minibatch noise (Lyapunov equation).
  h, c = 3e-3, 30.
  predicted = stationary_covariance(
      "splitting", problem.precision, h, c,
      gradient_noise=problem.minibatch_gradient_covariance(BATCH))
  _, callback = fit_regression(
      problem, sgk.SGHMC(step_size=h, friction=c, integrator="splitting",
                         seed=1),
      num_steps=60000, steps_per_execution=20, jit_compile=True)
  draws = kept_draws(callback)
  mean, mean_se = mean_and_se(draws)
  assert np.all(np.abs(mean - problem.posterior_mean) < NUM_SE * mean_se)
  var, var_se = variance_and_se(draws, mean=problem.posterior_mean)
  assert np.all(np.abs(var - np.diag(predicted)) < NUM_SE * var_se)
  # The minibatch-noise bias is predicted and seen, not hidden.
  assert np.all(var - np.diag(problem.posterior_cov) > NUM_SE * var_se)

  # The running moments (every step, in the train step) see the same chain.
  posterior = callback.posterior
  assert posterior.num_transitions == 60000
  running_var = posterior.variance[0].ravel()
  assert np.all(np.abs(running_var - np.diag(predicted)) < NUM_SE * var_se)


def test_keras_amagold_is_exact(problem):
  # Real minibatch noise and a step size at which acceptance is about one
  # half: the analytic posterior.
  sigma = float(np.sqrt(np.max(np.linalg.eigvalsh(problem.precision))))
  x, y = problem.data
  _, callback = fit_regression(
      problem, sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=10, friction=1.,
                           momentum_std=sigma, seed=2),
      num_steps=15000, steps_per_execution=10, thinning=1,
      jit_compile=True, energy_data=(x, y), energy_batch_size=128)
  assert callback.num_tests == 1500
  assert 0.3 < callback.acceptance_rate < 0.99
  draws = kept_draws(callback)
  mean, mean_se = mean_and_se(draws)
  assert np.all(np.abs(mean - problem.posterior_mean) < NUM_SE * mean_se)
  var, var_se = variance_and_se(draws, mean=problem.posterior_mean)
  assert np.all(np.abs(var - np.diag(problem.posterior_cov)) <
                NUM_SE * var_se)


def check_moments(draws, mean, predicted_cov, bias_from=None):
  m, m_se = mean_and_se(draws)
  assert np.all(np.abs(m - mean) < NUM_SE * m_se), (m, mean, m_se)
  var, var_se = variance_and_se(draws, mean=mean)
  assert np.all(np.abs(var - np.diag(predicted_cov)) < NUM_SE * var_se), (
      var, np.diag(predicted_cov), var_se)
  if bias_from is not None:
    # The gradient-noise bias is predicted and seen, not hidden.
    assert np.all(var - np.diag(bias_from) > NUM_SE * var_se)


def noise(problem):
  return problem.minibatch_gradient_covariance(BATCH)


def test_keras_sgld_matches_its_predicted_moments(problem):
  h = 1e-3
  callback = fit(problem, sgk.SGLD(step_size=h, seed=7),
                 batch_indices(problem, 20000, seed=8), steps_per_execution=10,
                 thinning=10, epochs=4, jit_compile=True)
  predicted = stationary_covariance("sgld", problem.precision, h,
                                    gradient_noise=noise(problem))
  check_moments(kept_draws(callback), problem.posterior_mean, predicted,
                bias_from=problem.posterior_cov)


def test_keras_euler_sghmc_matches_its_predicted_moments(problem):
  # Splitting SGHMC is checked the same way (mean, variance against the
  # prediction, the bias seen) by the first test of this file.
  integrator = "euler"
  h, c = 0.02, 20.
  callback = fit(problem, sgk.SGHMC(step_size=h, friction=c,
                                    integrator=integrator, seed=9),
                 batch_indices(problem, 20000, seed=10),
                 steps_per_execution=10, thinning=10, epochs=4,
                 jit_compile=True)
  predicted = stationary_covariance(integrator, problem.precision, h, c,
                                    gradient_noise=noise(problem))
  check_moments(kept_draws(callback), problem.posterior_mean, predicted,
                bias_from=problem.posterior_cov)


def psgld_prediction(problem, h, regularizer):
  """Stationary covariance of pSGLD with its preconditioner at the fixed
  point G = 1 / (lambda + sqrt(E[g_bar^2])), E[g_bar^2] =
  diag(P S P + V) / N^2 (decay close to 1: G is nearly constant)."""
  p, v, n = problem.precision, noise(problem), problem.num_examples
  s = problem.posterior_cov
  for _ in range(100):
    g = 1. / (regularizer + np.sqrt(np.diag(p @ s @ p + v)) / n)
    gm = np.diag(g)
    a = np.eye(problem.dim) - h * gm @ p
    q = h * h * gm @ v @ gm + 2 * h * gm
    s = scipy.linalg.solve_discrete_lyapunov(a, q)
  return s


def test_keras_psgld_matches_its_predicted_moments(problem):
  h, reg = 2e-4, 1e-5
  callback = fit(problem, sgk.PreconditionedSGLD(step_size=h, decay=0.999,
                                                 regularizer=reg, seed=11),
                 batch_indices(problem, 22000, seed=12),
                 steps_per_execution=10, thinning=10, epochs=4,
                 jit_compile=True, burnin_steps=2000)
  check_moments(kept_draws(callback), problem.posterior_mean,
                psgld_prediction(problem, h, reg),
                bias_from=problem.posterior_cov)


def test_keras_sgnht_matches_its_predicted_moments(problem):
  # At stationarity the thermostat settles where the kinetic energy per
  # dimension is T; around that value xi* SGNHT is Euler SGHMC with
  # friction xi* and injected noise 2 A h T (B-hat = A - xi* in the
  # Euler form's units). xi* is read from the chain.
  h, a = 0.01, 5.
  callback = fit(problem, sgk.SGNHT(step_size=h, diffusion=a, seed=13),
                 batch_indices(problem, 20000, seed=14),
                 steps_per_execution=10, thinning=10, epochs=4,
                 jit_compile=True)
  xi = float(callback.sampler.log_diagnostics()["thermostat"])
  predicted = stationary_covariance("euler", problem.precision, h, xi,
                                    gradient_noise=noise(problem),
                                    noise_estimate=xi - a)
  check_moments(kept_draws(callback), problem.posterior_mean, predicted)


def test_keras_skew_reversible_amagold_samples_the_posterior(problem):
  # Reversible AMAGOLD: test_keras_amagold_is_exact.
  sigma = float(np.sqrt(np.max(np.linalg.eigvalsh(problem.precision))))
  x, y = problem.data
  callback = fit(problem, sgk.AMAGOLD(
      step_size=0.15, num_leapfrog_steps=5, friction=1., momentum_std=sigma,
      resample_momentum=False, seed=15),
                 batch_indices(problem, 6000, seed=16), steps_per_execution=5,
                 epochs=4, jit_compile=True, energy_data=(x, y),
                 energy_batch_size=500)
  assert 0.3 < callback.acceptance_rate < 0.99
  check_moments(kept_draws(callback), problem.posterior_mean,
                problem.posterior_cov)
