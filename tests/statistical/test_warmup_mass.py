"""The mass `warm_up` estimates: M^{-1} near the posterior variances where
they span twelve decades in one state."""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd = tfp.distributions

# One coordinate per two decades of posterior variance, 1e-8 to 1e4.
VARIANCES = 10. ** np.arange(-8., 5., 2.)


def test_warm_up_mass_tracks_variances_from_1e_8_to_1e4_in_one_state():
  # AMAGOLD (exact gradients) from the identity mass and a step size that
  # suits none of the coordinates. Over 3 seeds the estimates ended within
  # 0.95-1.10x of the variances; Stan's regularisation (towards 1e-3 with
  # weight 5 / (n + 5)) ends 250x above the smallest and 1e-4x below the
  # largest. Within 2x of each variance.
  posterior = tfd.MultivariateNormalDiag(
      tf.zeros(len(VARIANCES)), tf.constant(np.sqrt(VARIANCES), tf.float32))
  kernel = sg.AMAGOLD(sg.LogProbFnTarget(posterior.log_prob),
                      step_size=1e-3, num_leapfrog_steps=10, friction=0.5)
  # The diagonal mass and AMAGOLD's own T (the default picks a dense mass
  # and a tuned T for this full-batch 7-vector): the diagonal estimate is
  # the subject. Graph mode: the estimate, not XLA, is the subject (XLA
  # compiles each window at more cost than it runs).
  warm = sg.warm_up(kernel, tf.zeros([4, len(VARIANCES)]), num_steps=1000,
                    seed=[0, 7], mass="diagonal",
                    adapt_num_leapfrog_steps=False, jit_compile=False)
  relative = warm.report.variance[0] / VARIANCES
  assert np.all(np.abs(np.log(relative)) < np.log(2.)), relative
  assert abs(warm.report.acceptance - 0.75) < 0.1, warm.report.acceptance


def test_warm_up_low_rank_mass_finds_the_correlated_directions():
  # 20 coordinates with sds 0.01 to 100 whose correlations lie in two
  # directions V (correlation eigenvalues about 40 and 0.02). A diagonal
  # mass leaves them: its step size measured 0.11, the dense mass's 0.59
  # and the rank-2 mass's 0.34, which found both directions (|V^T V_hat|
  # 0.96 and 0.96). The rank-2 step size must be at least twice the
  # diagonal's, at the target acceptance, with each estimated direction
  # within 25 degrees of one of V's.
  rng = np.random.default_rng(5)
  d = 20
  basis, _ = np.linalg.qr(rng.normal(size=(d, 2)))
  sd = np.diag(10. ** np.linspace(-2., 2., d))
  cov = sd @ (np.eye(d) + basis @ np.diag([39., -0.98]) @ basis.T) @ sd
  posterior = tfd.MultivariateNormalTriL(
      tf.zeros(d), tf.constant(np.linalg.cholesky(cov), tf.float32))
  kernel = sg.AMAGOLD(sg.LogProbFnTarget(posterior.log_prob),
                      step_size=1e-2, num_leapfrog_steps=10, friction=0.5)
  # AMAGOLD's own T (measured so; the default would tune it here). Graph
  # mode, as above.
  warm = {mass: sg.warm_up(kernel, tf.zeros([4, d]), num_steps=1000,
                           seed=[0, 7], mass=mass, mass_rank=2,
                           adapt_num_leapfrog_steps=False,
                           jit_compile=False)
          for mass in ("diagonal", "low_rank")}
  steps = {k: w.report.step_size for k, w in warm.items()}
  assert steps["low_rank"] > 2. * steps["diagonal"], steps
  assert abs(warm["low_rank"].report.acceptance - 0.75) < 0.1
  factor = warm["low_rank"].report.momentum_distribution.precision_factor
  found = factor.operators[1].u.numpy()
  overlap = np.max(np.abs(found.T @ basis), axis=1)
  assert np.all(overlap > np.cos(np.radians(25.))), overlap
