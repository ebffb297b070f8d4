"""`tfp_sgmcmc.sample` end to end (start, warm-up, sampling, report): one
call from a model (a target, a log density or a JointDistribution) to draws
in its structure, InferenceData, the frozen kernel and one report; chains
with their own minibatches; full-batch gradients on a small data set; a
cold start reported. The rules `sample` applies on the way are checked
without a run in tests/unit/chains/test_sample.py.

Each `sample` call costs seconds of tracing whatever its length, so the
tests share calls (module fixtures) and each reads its own part of the
report; SGLD runs where the claim is not about the kernel (it traces
several times faster than AMAGOLD).
"""

import importlib
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import sample as sample_lib
from tfp_sgmcmc.chains import start as start_lib

from support.sample_problems import FAST, logistic, normal_model
from support.sample_problems import random_intercepts

tfd = tfp.distributions
# AMAGOLD's warning where its batches are not drawn from its seed.
_NOT_EXACT = "not guaranteed exact"


@pytest.fixture(scope="module")
def minibatch_fit():
  """One `sample` call on the minibatch target, kept on its minibatches
  (N = 2,000 is below `FULL_BATCH_MAX_EXAMPLES`), which several tests
  read."""
  target, _, _ = logistic()
  assert not target.independent_minibatches
  fit = sg.sample(target, seed=[0, 1], parameter_shapes=[3],
                  full_batch=False, **FAST)
  return target, fit


def test_target_gives_draws_idata_kernel_and_report(minibatch_fit):
  _, fit = minibatch_fit
  assert fit.draws.shape == (60, 4, 3)
  assert fit.final_state.shape == (4, 3)
  assert isinstance(fit.kernel, sg.AMAGOLD)
  assert fit.kernel.step_size == fit.report.warmup.step_size
  posterior = fit.inference_data.posterior
  assert posterior["x"].shape == (4, 60, 3)
  assert "acceptance_rate" in fit.inference_data.sample_stats
  report = fit.report
  assert report.control_variates          # N / n = 40 >= 10
  assert isinstance(fit.target, sg.ControlVariateTarget)
  assert report.minibatches == "independent minibatches"
  assert report.start.startswith("around the mode")
  assert report.arrived and not report.extended
  # 60 warm-up steps: too few for a dense mass; control variates: AMAGOLD
  # at the low friction.
  assert report.mass == "diagonal" and report.warmup.covariance is None
  # Minibatch gradients (through control variates): AMAGOLD's own T.
  assert report.warmup.num_leapfrog_steps is None
  assert fit.kernel.num_leapfrog_steps == 10
  assert fit.kernel.friction == sample_lib.AMAGOLD_EXACT_GRADIENT_FRICTION
  assert len(report.divergences) == 4 and len(report.acceptance) == 4
  assert np.isfinite(report.max_rhat) and report.min_ess > 0
  assert set(report.seconds) == {"mode", "warmup", "sampling", "total"}
  assert report.ksd is None and "Stein" not in str(report)
  # An exact kernel: nothing said about approximate draws.
  assert report.approximate is None and "approximate" not in str(report)
  text = str(report)
  for word in ("warm-up", "arrived", "R-hat", "ESS", "divergences",
               "heating", "acceptance"):
    assert word in text
  # The mode-centred draws are near the data's posterior.
  assert np.all(np.abs(fit.draws.mean((0, 1)) - [1., -1., .5]) < 0.3)


def test_chains_draw_their_own_minibatches(minibatch_fit):
  target, fit = minibatch_fit
  sampled = fit.target.base_target
  assert sampled.independent_minibatches and not sampled.is_full_batch
  indices = sampled.minibatch_indices([3, 4], tf.zeros([4, 3])).numpy()
  assert indices.shape == (4, 50)
  assert len({tuple(row) for row in indices}) == 4
  # Only the target and the report are read: the shortest run.
  short = dict(FAST, num_results=10, num_adaptation_steps=20,
               num_mode_steps=20)
  shared = sg.sample(target, seed=[0, 1], parameter_shapes=[3],
                     independent_chains=False, control_variates=False,
                     full_batch=False, **short)
  assert not shared.target.independent_minibatches
  assert not shared.report.control_variates
  assert shared.kernel.friction == 0.5    # raw minibatch gradients
  assert "shared" in shared.report.minibatches


@pytest.fixture(scope="module")
def cold_fit():
  """SGHMC by name on a log density 1,000 sds from the Stan-like start,
  with 30 warm-up steps (and 30 more): one call read by two tests."""
  far = tfd.MultivariateNormalDiag([1000., -1000.], [1., 1.])
  return sg.sample(target_log_prob_fn=far.log_prob, seed=[0, 1],
                   parameter_shapes=[2], kernel="sghmc",
                   **dict(FAST, num_adaptation_steps=30, num_results=10))


def test_target_log_prob_fn_starts_as_stan(cold_fit):
  fit = cold_fit
  assert fit.draws.shape == (10, 4, 2)
  assert fit.report.start.startswith("uniform(-2, 2)")
  assert not fit.report.control_variates
  assert fit.report.minibatches.startswith("exact gradients")
  assert isinstance(fit.kernel, sg.SGHMC)
  # A kernel with no exact test: the report says its draws are biased, and
  # how to measure and avoid it (R-hat and ESS cannot show it).
  assert "approximate draws: SGHMC has no exact Metropolis-Hastings test" in (
      str(fit.report))
  assert "`ksd=True` measures" in fit.report.approximate
  assert "kernel='amagold' draws exactly." in fit.report.approximate


def test_a_cold_start_that_does_not_arrive_starts_again_at_the_mode(
    cold_fit):
  # 30 warm-up steps (and 30 more) from 1,000 sds away do not arrive; the
  # warm-up runs again from around the mode (Newton's method: one step on
  # a Gaussian), and arrives. A uniform start once stranded chains this way
  # (a regression's noise scale started tiny) and was only reported.
  fit = cold_fit
  assert fit.report.start.startswith(
      "uniform(-2, 2) in the unconstrained space (as Stan), which did not "
      "arrive; then around the mode (Newton's method"), fit.report.start
  assert fit.report.arrived and fit.report.extended


def test_a_tiny_posterior_sd_from_a_uniform_start_arrives():
  # One latent mean of N = 5,000 unit-noise examples (posterior sd 0.014),
  # full batch, so started uniform(-2, 2). With T tuned by ChEES on its
  # diagonal mass one chain of four stayed where it started, 72 sds away
  # (the report once said "arrived" with R-hat 1,784; then the stranded-
  # chain rule sent the warm-up again from around the mode). With the
  # kernel's T kept, every chain arrives from the uniform start.
  n = 5000
  y = np.random.default_rng(0).normal(1., 1., n).astype(np.float32)
  model = tfd.JointDistributionNamed(dict(
      m=tfd.Normal(0., 10.),
      y=lambda m: tfd.Independent(tfd.Normal(
          m[..., None] * tf.ones([n]), 1.), 1)))
  fit = sg.sample(model, observed={"y": y}, num_results=100,
                  num_adaptation_steps=200, seed=[0, 1], progress=False,
                  print_report=False)
  assert fit.report.start.startswith("uniform(-2, 2)"), fit.report.start
  assert fit.report.arrived
  # Posterior N(sum y / (n + 0.01), 1 / (n + 0.01)). Each chain's mean of
  # 100 draws has an ESS of at least 25, so a Monte Carlo sd of at most 0.2
  # posterior sds: 2 sds is 10 of those (the stranded chain was 72 off).
  exact, sd = y.sum() / (n + 0.01), (n + 0.01)**-0.5
  chain_means = np.mean(fit.draws["m"], axis=0)
  assert np.all(np.abs(chain_means - exact) < 2. * sd), chain_means


def test_a_data_target_sampled_on_its_full_batch_starts_around_its_mode():
  # A logistic regression of 50 correlated coefficients on 2,000 examples:
  # `sample` samples its full batch (N <= 10,000) and, taking it for a
  # target without minibatches, started it at uniform(-2, 2). The warm-up
  # "arrived", tuned T = 1 and the chains never met (R-hat 19 with 1,000
  # warm-up steps at N = 5,000). A minibatch target starts around its
  # mode, here too.
  rng = np.random.default_rng(0)
  n, d = 2000, 50
  x = (0.6 * rng.normal(size=(n, d)) + 0.4 * rng.normal(size=(n, 1))
       ).astype(np.float32)
  y = (rng.uniform(size=n) < 1 / (1 + np.exp(
      -x @ (rng.normal(size=d) / np.sqrt(d))))).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Bernoulli(logits=tf.linalg.matvec(b[0], w)).log_prob(
          b[1]), (x, y), batch_size=100, parameter_shapes=[d],
      log_prior_fn=lambda w: tf.reduce_sum(tfd.Normal(0., 1.).log_prob(w),
                                           -1))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    fit = sg.sample(target, num_results=200, num_adaptation_steps=1000,
                    seed=[0, 1], progress=False, print_report=False)
  assert fit.report.minibatches.startswith("full batch: N = 2,000")
  assert fit.report.start.startswith("around the mode (Newton's method")
  # 800 draws of chains that mix: R-hat near 1 (the rank-normalised one,
  # the worst of 50 coordinates on 200 draws a chain, came out 1.035);
  # the uniform start's chains gave 2.6 (rank-normalised 1.73).
  assert fit.report.max_rhat < 1.05, str(fit.report)
  assert fit.report.max_rank_rhat < 1.1, str(fit.report)


def test_minibatch_noise_that_holds_the_step_down_switches_to_full_batch():
  # N = 12,000 examples (above FULL_BATCH_MAX_EXAMPLES), d = 30, minibatches
  # of 50: control variates, yet the gradient noise holds the warm-up's
  # step size near 0.03. The warm-up runs again on full-data gradients, at
  # AMAGOLD's exact-gradient friction; full_batch=False keeps the
  # minibatches.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(12_000, 30)).astype(np.float32)
  y = (rng.uniform(size=12_000) < 1 / (1 + np.exp(
      -x @ rng.normal(size=30)))).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Bernoulli(logits=tf.linalg.matvec(b[0], w)).log_prob(
          b[1]), (x, y), batch_size=50, parameter_shapes=[30],
      log_prior_fn=lambda w: tf.reduce_sum(tfd.Normal(0., 1.).log_prob(w),
                                           -1))
  fit = sg.sample(target, seed=[0, 1], **FAST)
  assert fit.report.minibatches.startswith(
      "full batch: on minibatches the warm-up's step size was 0.0"), (
          fit.report.minibatches)
  assert fit.target.is_full_batch and not fit.report.control_variates
  assert fit.kernel.friction == sample_lib.AMAGOLD_EXACT_GRADIENT_FRICTION
  assert fit.report.warmup.step_size > start_lib.MINIBATCH_MIN_STEP_SIZE
  kept = sg.sample(target, seed=[0, 1], full_batch=False, **FAST)
  assert kept.report.control_variates
  assert kept.report.minibatches == "independent minibatches"
  assert kept.report.warmup.step_size < start_lib.MINIBATCH_MIN_STEP_SIZE


def test_a_warm_up_that_never_arrives_is_reported():
  # Beyond FULL_HESSIAN_MAX coordinates the mode is Adam's, whose 200 steps
  # of 0.05 move 10 of the 1,000 sds: the warm-up has not arrived from
  # either start, and says so.
  d = start_lib.FULL_HESSIAN_MAX + 1
  far = tfd.MultivariateNormalDiag(tf.fill([d], 1000.), tf.ones([d]))
  with pytest.warns(sg.WarmupNotConvergedWarning, match="find_mode"):
    fit = sg.sample(target_log_prob_fn=far.log_prob, seed=[0, 1],
                    parameter_shapes=[d], kernel="sghmc",
                    **dict(FAST, num_adaptation_steps=30, num_results=10))
  assert "then around the mode (find_mode, 200 Adam steps)" in (
      fit.report.start)
  assert not fit.report.arrived and fit.report.extended
  assert fit.report.problems[0] == "warm-up did not arrive"
  assert "NOT ARRIVED" in str(fit.report)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_density_without_a_mode_starts_as_stan_without_control_variates():
  # The chains started at the point Newton's method stopped, in a
  # funnel's neck (log tau about -11), with control variates around it,
  # and never left: at N = 100,000 the report said "heats up", naming the
  # step size. Now they start uniform, on the raw minibatches.
  target, shapes = random_intercepts()
  fit = sg.sample(target, seed=[0, 1], full_batch=False, kernel="sgld",
                  **FAST)
  assert fit.report.start.startswith(
      "no mode (find_mode, 200 Adam steps, then Newton's method, 10 steps, "
      "not converged: "), fit.report.start
  assert fit.report.start.endswith(
      "uniform(-2, 2) in the unconstrained space (as Stan)")
  assert not fit.report.control_variates
  assert np.min(fit.draws[1]) > -3.


def test_a_rough_float32_energy_is_named_as_the_cause():
  # Counts near 4e5 in float32: each y log(rate) - rate is rounded by about
  # 0.1 nat, so the exact energy is rough by several nats between nearby
  # points and AMAGOLD's exact test sticks. The report names that, and the
  # fix, beside the R-hat it explains.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(500, 2)).astype(np.float32)
  y = rng.poisson(np.exp(13. + x @ [0.3, -0.2])).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Poisson(log_rate=w[..., :1] + tf.einsum(
          "nd,...d->...n", b[0], w[..., 1:])).log_prob(b[1]),
      (x, y), batch_size=50, parameter_shapes=[3])
  with pytest.warns(sg.UnhealthyChainWarning, match="float64"):
    fit = sg.sample(target, seed=[0, 1],
                    **dict(FAST, num_adaptation_steps=30, num_results=20))
  rough = [p for p in fit.report.problems if "rough" in p]
  assert len(rough) == 1 and "build the model in float64" in rough[0]
  assert fit.report.max_rhat > 1.05


def test_a_step_size_held_down_by_a_rough_energy_is_not_blamed_on_noise():
  # N = 12,000 (above FULL_BATCH_MAX_EXAMPLES): minibatches through control
  # variates. Counts near 1e5 in float32 make the exact energy rough, so
  # the warm-up's step size ends far below MINIBATCH_MIN_STEP_SIZE. The
  # report said "held down by the gradient noise" and warmed up again on
  # full-data gradients, which the rounding holds down as much (the same
  # model at N = 50,000: 0.0037 there, R-hat 8,700). Now the cause is
  # measured: the minibatches are kept and the note names the rounding
  # and float64, as the problems line does.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(12_000, 2)).astype(np.float32)
  y = rng.poisson(np.exp(11.5 + x @ [0.3, -0.2])).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Poisson(log_rate=w[..., :1] + tf.einsum(
          "nd,...d->...n", b[0], w[..., 1:])).log_prob(b[1]),
      (x, y), batch_size=100, parameter_shapes=[3])
  with pytest.warns(sg.UnhealthyChainWarning, match="float64"):
    fit = sg.sample(target, seed=[0, 1],
                    **dict(FAST, num_adaptation_steps=30, num_results=20))
  report = fit.report
  assert report.warmup.step_size < start_lib.MINIBATCH_MIN_STEP_SIZE
  assert report.control_variates and isinstance(fit.target,
                                                sg.ControlVariateTarget)
  assert "gradient noise, so full-data" not in report.minibatches
  assert "held down by float rounding" in report.minibatches, (
      report.minibatches)
  assert report.minibatches.endswith("build the model in float64 (its "
                                     "data, parameters and constants)")


def test_the_rough_energy_model_built_in_float64_samples_in_float64():
  # The report's fix for the model above: build it in float64. The target
  # says its shapes, so the call is the same; `sample` made a float32 state
  # from them and the model's functions refused it ("give the target data
  # and state of one float dtype", which the user had done).
  rng = np.random.default_rng(0)
  x = rng.normal(size=(500, 2))
  y = rng.poisson(np.exp(13. + x @ [0.3, -0.2])).astype(np.float64)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Poisson(log_rate=w[..., :1] + tf.einsum(
          "nd,...d->...n", b[0], w[..., 1:])).log_prob(b[1]),
      (x, y), batch_size=50, parameter_shapes=[3])
  fit = sg.sample(target, seed=[0, 1],
                  **dict(FAST, num_adaptation_steps=200, num_results=100))
  assert fit.draws.dtype == np.float64
  assert not any("rough" in p for p in fit.report.problems)
  # Against the Laplace approximation (counts near 4e5: the posterior is
  # Gaussian to far below the Monte Carlo error), within 5 MCSE at the
  # run's smallest ESS.
  features = np.concatenate([np.ones((500, 1)), x], 1)
  mode = np.array([13., 0., 0.])
  for _ in range(30):
    rate = np.exp(features @ mode)
    hessian = (features * rate[:, None]).T @ features
    mode = mode + np.linalg.solve(hessian, features.T @ (y - rate))
  sd = np.sqrt(np.diag(np.linalg.inv(hessian)))
  error = np.abs(fit.draws.reshape(-1, 3).mean(0) - mode)
  assert np.all(error < 5 * sd / np.sqrt(fit.report.min_ess)), (
      error / sd, fit.report)


def test_joint_distribution_draws_are_constrained():
  # SGLD by name: the structure and the constraint are the claims, not the
  # kernel.
  model, y = normal_model()
  fit = sg.sample(model, observed={"y": y}, batch_size=20, seed=[0, 1],
                  full_batch=False, kernel="sgld", **FAST)
  assert isinstance(fit.kernel, sg.SGLD)
  assert fit.report.minibatches == "independent minibatches"
  assert set(fit.draws) == {"loc", "scale"}
  assert fit.draws["scale"].shape == (60, 4)
  assert np.all(fit.draws["scale"] > 0)
  assert set(fit.inference_data.posterior.data_vars) == {"loc", "scale"}
  assert abs(fit.draws["loc"].mean() - y.mean()) < 0.2


def test_kernel_by_instance_keeps_its_class_and_arguments():
  # Also the full-batch rule at its defaults: N = 2,000 examples, at most
  # FULL_BATCH_MAX_EXAMPLES, are sampled with full-batch gradients.
  target, _, _ = logistic()
  # And, asked for, the kernel Stein discrepancy of the (biased) draws.
  mine = sg.SGHMC(target, step_size=1e-3, friction=2.)
  fit = sg.sample(target, kernel=mine, seed=[0, 1], parameter_shapes=[3],
                  ksd=True, **FAST)
  # In the draws' sds (tests/unit/chains/test_stein.py says why).
  np.testing.assert_allclose(fit.report.ksd, sg.ksd(
      fit.states, fit.target, pool_chains=True, jit_compile=False,
      scale="diagonal"), rtol=1e-6)
  assert "ksd" in fit.report.seconds
  assert "kernel Stein discrepancy" in str(fit.report)
  assert isinstance(fit.kernel, sg.SGHMC)
  # Approximate draws, whose KSD the report already gives: no advice to
  # ask for it.
  assert "SGHMC has no exact" in fit.report.approximate
  assert "ksd=True" not in fit.report.approximate
  assert fit.kernel.friction == 2.
  assert fit.kernel.target is fit.target
  assert fit.target.is_full_batch and not target.is_full_batch
  assert fit.report.minibatches.startswith(
      f"full batch: N = 2,000 <= {start_lib.FULL_BATCH_MAX_EXAMPLES:,}")
  assert not fit.report.control_variates


def test_dense_mass_where_the_state_is_one_short_vector():
  # A 0.95 correlation, which a diagonal mass leaves slow: with a warm-up
  # long enough for a 2 x 2 covariance, sample adapts a dense mass, the
  # window draws' covariance, which is the posterior's; with exact
  # gradients AMAGOLD runs at the low friction.
  covariance = np.array([[1., 2.85], [2.85, 9.]], np.float32)
  posterior = tfd.MultivariateNormalTriL([1., -1.],
                                         tf.linalg.cholesky(covariance))
  fit = sg.sample(target_log_prob_fn=posterior.log_prob, seed=[0, 1],
                  parameter_shapes=[2],
                  **dict(FAST, num_adaptation_steps=300, num_chains=8))
  assert fit.report.mass == "dense"
  assert "dense mass" in str(fit.report)
  estimate = fit.report.warmup.covariance
  assert estimate.shape == (2, 2)
  np.testing.assert_allclose(estimate, covariance, rtol=0.3)
  assert estimate[0, 1] / np.sqrt(estimate[0, 0] * estimate[1, 1]) > 0.85
  np.testing.assert_allclose(fit.report.warmup.variance[0],
                             np.diag(estimate))
  # The frozen kernel moves with velocity M^-1 r = covariance r.
  velocity = sg.dynamics.velocity(
      tf.ones([2]), fit.kernel.momentum_distribution).numpy()
  np.testing.assert_allclose(velocity, estimate.sum(1), rtol=1e-5)
  assert fit.kernel.friction == sample_lib.AMAGOLD_EXACT_GRADIENT_FRICTION
  # Exact gradients: the warm-up tuned the trajectory length too, and the
  # report says so.
  steps = fit.report.warmup.num_leapfrog_steps
  assert isinstance(steps, int) and fit.kernel.num_leapfrog_steps == steps
  assert f"T = {steps} (tuned)" in str(fit.report)
  assert "tuned by ChEES" in fit.report.warmup.choices


def test_beyond_a_dense_windows_reach_the_mass_is_the_laplace_covariance():
  # d = 201 coordinates, one more than a warm-up's windows estimate a dense
  # mass for, features sharing one factor (a direction 12x narrower than
  # the marginal sds), N = 12,000: the start's Newton Hessian gives the
  # mass. A linear-Gaussian posterior is the Laplace approximation itself,
  # so its mean and covariance are exact: whitened by them, the draws'
  # means and variances are checked against their Monte Carlo error.
  d, n = sample_lib.DENSE_MASS_MAX + 1, 12_000
  rng = np.random.default_rng(0)
  x = 0.6 * rng.normal(size=(n, d)) + 0.4 * rng.normal(size=(n, 1)) * (
      rng.uniform(0.5, 1.5, size=d))
  y = x @ rng.normal(size=d) + rng.normal(size=n)
  precision = x.T @ x + np.eye(d)
  mean = np.linalg.solve(precision, x.T @ y)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Normal(tf.linalg.matvec(b[0], w), 1.).log_prob(b[1]),
      (x.astype(np.float32), y.astype(np.float32)), batch_size=200,
      parameter_shapes=[d], log_prior_fn=lambda w: tf.reduce_sum(
          tfd.Normal(0., 1.).log_prob(w), -1))
  fit = sg.sample(target, seed=[0, 1], **dict(
      FAST, num_adaptation_steps=100, num_results=200))
  assert fit.report.mass == "dense Laplace"
  # The warm-up ran with adapt_mass=False, which the user did not pass: its
  # report names the mass it kept.
  assert fit.report.warmup.choices.startswith("dense Laplace mass, fixed")
  assert "dense Laplace mass" in str(fit.report)
  kernel_covariance = fit.kernel.momentum_distribution.precision.to_dense()
  np.testing.assert_allclose(kernel_covariance, np.linalg.inv(precision),
                             rtol=0.02, atol=1e-6)
  factor = np.linalg.cholesky(np.linalg.inv(precision))
  white = np.linalg.solve(factor, (np.asarray(fit.draws, np.float64) -
                                   mean).reshape(-1, d).T).T.reshape(
                                       np.shape(fit.draws))
  ess = tfp.mcmc.effective_sample_size(white, cross_chain_dims=1).numpy()
  chi2 = np.sum(white.mean((0, 1))**2 * ess)   # ~ chi-square(d)
  assert chi2 < d + 5 * np.sqrt(2 * d), (chi2, ess.min())
  # Each whitened variance ~ 1, with sd sqrt(2 / ESS of the squares).
  squares = tfp.mcmc.effective_sample_size(white**2, cross_chain_dims=1)
  variance = white.reshape(-1, d).var(0)
  assert abs(variance.mean() - 1) < 5 * np.sqrt(2 / squares.numpy()).mean(
      ) / np.sqrt(d), variance.mean()


def test_a_large_dataset_target_samples_from_its_newton_mode_without_xla():
  # A tf.data pipeline cannot run under XLA, so the default compiles
  # without it. The exact energy's gradient reaches the data (through
  # Dataset.reduce it was the prior's alone: Newton stopped at zeros, and
  # the chains ended 180 posterior sds away), and where the minibatch
  # noise holds the step size down the chains move on to full-data
  # gradients, as an InMemoryTarget's do (on raw minibatches the chains
  # barely moved: R-hat 10 at N = 50,000).
  target, x, y = logistic(num_examples=12_000)   # > FULL_BATCH_MAX_EXAMPLES
  batches = tf.data.Dataset.from_tensor_slices((x, y)).repeat().shuffle(
      12_000, seed=0).batch(50)
  streamed = sg.DatasetTarget(
      target._log_likelihood_fn, batches, num_examples=12_000,
      log_prior_fn=target._log_prior_fn,
      # Batches already cut, as docs/warmup.md advises: `.batch` over the
      # examples copies them one by one on every pass.
      full_dataset=tf.data.Dataset.from_tensor_slices(
          (x.reshape(6, 2000, 3), y.reshape(6, 2000))))
  fast = {k: v for k, v in FAST.items() if k != "jit_compile"}
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fit = sg.sample(streamed, seed=[0, 1], parameter_shapes=[3], **fast)
  # AMAGOLD on the pipeline's minibatches is not exact, but the chains
  # run on full-data gradients, where it is: no warning that it is not
  # (it came four times, from the kernel's builds in the warm-up).
  assert fit.kernel.is_calibrated
  assert not [w for w in caught if _NOT_EXACT in str(w.message)]
  report = fit.report
  assert report.start.startswith("around the mode (Newton's method")
  assert "Newton's method, 0 steps" not in report.start
  assert report.minibatches.startswith(
      "full batch: on minibatches the warm-up's step size was")
  assert report.minibatches.endswith(
      "; without XLA (a tf.data pipeline runs on the host)")
  assert fit.target.is_full_batch and fit.target.base_target is streamed
  mode, covariance = _laplace(x, y)
  sd = np.sqrt(np.diag(covariance))
  mcse = sd / np.sqrt(report.min_ess)
  error = np.abs(fit.draws.reshape(-1, 3).mean(0) - mode)
  # Monte Carlo error, and the Laplace approximation's own (small at
  # N = 12,000).
  assert np.all(error < 4 * mcse + 0.1 * sd), (error / sd, report)
  assert np.all(np.abs(fit.draws.reshape(-1, 3).std(0) / sd - 1.) < 0.3)


def test_amagold_kept_on_a_pipelines_minibatches_says_once_it_is_not_exact():
  # full_batch=False keeps AMAGOLD on the batches a DatasetTarget's
  # pipeline chooses, so its chains are not guaranteed exact: one warning
  # (each build of the kernel on the way gave one, four in all), and the
  # report's approximate-draws line.
  target, x, y = logistic()
  streamed = sg.DatasetTarget(
      target._log_likelihood_fn,
      tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(50),
      num_examples=len(x), log_prior_fn=target._log_prior_fn,
      full_dataset=tf.data.Dataset.from_tensor_slices((x, y)).batch(1000))
  fast = {k: v for k, v in FAST.items() if k != "jit_compile"}
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fit = sg.sample(streamed, seed=[0, 1], parameter_shapes=[3],
                    full_batch=False, **dict(fast, num_adaptation_steps=20,
                                             num_results=10))
  not_exact = [w for w in caught if _NOT_EXACT in str(w.message)]
  assert len(not_exact) == 1 and not fit.kernel.is_calibrated
  assert not_exact[0].filename == __file__   # The user's call.
  assert fit.report.approximate.startswith(fit.kernel.calibration_note)


def _laplace(x, y):
  """The float64 Laplace approximation of `logistic`'s posterior."""
  x, y = x.astype(np.float64), y.astype(np.float64)
  w = np.zeros(x.shape[1])
  for _ in range(50):
    p = 1. / (1. + np.exp(-x @ w))
    hessian = (x * (p * (1. - p))[:, None]).T @ x + np.eye(x.shape[1])
    w = w + np.linalg.solve(hessian, x.T @ (y - p) - w)
  return w, np.linalg.inv(hessian)


def test_biased_kernels_keep_the_posteriors_sds():
  # A 3-coordinate logistic regression on its full batch: the warm-up's
  # test let SGHMC's own chain settle with sds 1.27-1.32x the posterior's,
  # SGNHT's diverge and SGLD's 1.17-1.22x; capped by their stationary
  # bound (5% on a Gaussian) they stay within it, up to the posterior's
  # departure from a Gaussian of its sds and Monte Carlo error.
  target, _, _ = logistic()
  options = dict(num_results=1000, seed=[0, 1], progress=False,
                 print_report=False, initial_state=tf.zeros([3]))
  reference = sg.sample(target, **options).draws.std(axis=(0, 1))
  for kernel in ("sghmc", "sgnht", "sgld"):
    with sg.chains.quiet.expected_warnings_silenced():
      fit = sg.sample(target, kernel=kernel, **options)
    ratio = fit.draws.std(axis=(0, 1)) / reference
    assert np.all(abs(ratio - 1.) < 0.12), (kernel, ratio)


def test_a_matrix_state_that_mixes_slowly_is_told_to_be_a_vector():
  # Four entries of a 2 x 2 matrix share one direction of sd 1, the others
  # sd 0.01: a diagonal mass mixes along it by a random walk, and the
  # report names the state's shape as the cause (as one vector, the mass
  # is dense).
  v = np.full(4, 0.5)
  cov = (np.eye(4) - np.outer(v, v)) * 1e-4 + np.outer(v, v)
  normal = tfd.MultivariateNormalTriL(
      tf.zeros(4), tf.linalg.cholesky(tf.constant(cov, tf.float32)))
  log_prob = lambda w: normal.log_prob(
      tf.reshape(w, tf.concat([tf.shape(w)[:-2], [4]], 0)))
  fast = dict(FAST, num_adaptation_steps=200)
  with pytest.warns(sg.UnhealthyChainWarning, match="not one vector"):
    fit = sg.sample(target_log_prob_fn=log_prob, parameter_shapes=[2, 2],
                    seed=[0, 1], **fast)
  assert fit.report.mass == "diagonal"
  assert any("parameter_shapes=[4]" in p for p in fit.report.problems)


def test_a_joint_distributions_nodes_share_one_dense_mass(monkeypatch):
  # `sample` builds a JointDistribution's target with one vector per chain
  # ([scale, w] unconstrained, flattened in the nodes' order), so that the
  # warm-up's dense mass couples the coordinates of different nodes; the
  # draws keep the model's nodes and constraints. The README's model, as
  # benchmarks/joint_distribution_one_call.py runs it at N = 200,000.
  monkeypatch.syspath_prepend(os.path.join(os.path.dirname(os.path.dirname(
      os.path.dirname(os.path.abspath(__file__)))), "benchmarks"))
  bench = importlib.import_module("joint_distribution_one_call")
  x, y = bench.data(500)
  model = bench.model
  fit = sg.sample(model, observed={"y": y}, covariates=x, num_results=20,
                  num_adaptation_steps=200, seed=[0, 1], progress=False,
                  print_report=False, jit_compile=False)
  assert fit.report.warmup.mass == "dense", fit.report
  # The kernel's state is one vector; the draws and states keep the nodes.
  assert fit.final_state.shape == (4, 4)
  assert fit.draws["w"].shape == fit.states["w"].shape == (20, 4, 3)
  np.testing.assert_allclose(fit.draws["scale"],
                             tf.math.softplus(fit.states["scale"]), rtol=1e-5)
  np.testing.assert_array_equal(fit.draws["w"], fit.states["w"])
  np.testing.assert_array_equal(fit.final_state[:, 1:], fit.states["w"][-1])


def test_a_higher_target_acceptance_tunes_a_smaller_step_size():
  # The report's fix for divergent transitions: on the banana of a
  # new-user trial (x2 | x1 ~ N(100 B - B x1^2, 1)) the default 0.75 gave
  # 13-60 divergences and x2's sd 0.56-0.71x the exact one; 0.95 gave none
  # and 0.87-0.94x. Here the warm-up reaches each target it is given.
  def log_prob(x):
    return -0.5 * tf.reduce_sum(x**2, -1)
  fits = {accept: sg.sample(
      target_log_prob_fn=log_prob, parameter_shapes=[2], num_results=50,
      num_adaptation_steps=300, seed=[1, 2], progress=False,
      print_report=False, target_accept_prob=accept)
          for accept in (0.6, 0.95)}
  for accept, fit in fits.items():
    assert abs(fit.report.warmup.acceptance - accept) < 0.1, (
        accept, fit.report.warmup)
  assert (fits[0.95].report.warmup.step_size <
          0.7 * fits[0.6].report.warmup.step_size)
  with pytest.raises(ValueError, match="target_accept_prob"):
    sg.sample(target_log_prob_fn=log_prob, parameter_shapes=[2],
              target_accept_prob=95, **FAST)


@pytest.mark.slow
def test_the_same_seed_gives_the_same_draws_at_a_large_size(monkeypatch):
  # At N = 200,000 and d = 200 the exact energy is summed in ten chunks,
  # and in a TensorFlow graph (not XLA) its gradient and Hessian changed
  # in their last bits from one tracing to the next (with grappler's
  # constant folding on; not at the sizes of the other tests): Newton's start, then
  # every draw, differed between two calls with one seed (step sizes 0.25
  # and 0.33 after 100 warm-up steps). `sample` compiles its start with
  # XLA, as it does the chains.
  monkeypatch.syspath_prepend(os.path.join(os.path.dirname(os.path.dirname(
      os.path.dirname(os.path.abspath(__file__)))), "benchmarks"))
  bench = importlib.import_module("one_call")
  x, y = bench.logistic_data(200_000, 200)
  target = bench.target_for(x, y, 1000)
  fits = [sg.sample(target, num_results=20, num_adaptation_steps=100,
                    seed=[0, 1], progress=False, print_report=False)
          for _ in range(2)]
  np.testing.assert_array_equal(fits[0].draws, fits[1].draws)
