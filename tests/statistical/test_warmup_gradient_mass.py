"""The mass `warm_up(mass_estimate="gradients")` estimates: 1 / the mean of
two independent gradient estimates' product at the window's draws
(`window_adaptation.gradient_variance`), the posterior variances from
1e-8 to 1e4 in one state, with exact and with minibatch gradients. That
AMAGOLD with that mass frozen is exact is
tests/statistical/test_warmup_exactness.py.

Factors: for a Gaussian posterior (d_i U)^2 / P_ii is chi^2_1 (mean 1, sd
sqrt 2), and a product of two estimates with independent noise of
variance s^2 has mean P_ii and variance 2 P_ii^2 + 2 P_ii s^2 + s^4; the
estimate over n_eff draws is off by a relative sd of that sd / sqrt(n_eff),
and each test allows 4 of them.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import window_adaptation as adaptation

tfd = tfp.distributions

# One coordinate per two decades of posterior variance, 1e-8 to 1e4.
VARIANCES = 10. ** np.arange(-8., 5., 2.)


def _estimate(first, second):
  """gradient_variance of one window holding the products first * second
  (draws on axis 0, float64)."""
  window = adaptation.begin_window([tf.zeros_like(first)], batch_ndims=1)
  window = adaptation.gradient_window_update(
      window, [tf.constant(first)], [tf.constant(second)], batch_ndims=1)
  return adaptation.gradient_variance(window)[0].numpy()


def test_gradient_variance_is_the_variance_from_independent_draws():
  # 2,000 independent posterior draws: exact gradients x / V give a
  # relative sd of sqrt(2 / 2000) = 0.032 (4 sd: 13%); two minibatch
  # estimates with independent noise of variance 4 P (N / n = 4) give
  # sqrt(26 / 2000) = 0.11 (4 sd: 1.58x). The square of one noisy gradient
  # (the RMSprop statistic) is 1 / (5 P): 5x too small.
  n = 2000
  rng = np.random.default_rng(3)
  x = rng.normal(size=(n, len(VARIANCES))) * np.sqrt(VARIANCES)
  exact = x / VARIANCES
  relative = _estimate(exact, exact) / VARIANCES
  assert np.all(np.abs(np.log(relative)) < 4. * np.sqrt(2. / n)), relative
  noise_sd = np.sqrt(4. / VARIANCES)
  first = exact + noise_sd * rng.normal(size=x.shape)
  second = exact + noise_sd * rng.normal(size=x.shape)
  relative = _estimate(first, second) / VARIANCES
  bound = 4. * np.sqrt(26. / n)
  assert np.all(np.abs(np.log(relative)) < bound), relative
  squared = _estimate(first, first) / VARIANCES
  assert np.all(np.abs(np.log(squared)) > bound), squared


def test_minibatch_noise_lowers_the_mass_by_the_bound_factor():
  # The confidence bound reads a resolved coordinate's mean m = P_ii
  # through m + 2 sd / sqrt(n); with minibatch noise of variance r P_ii
  # in each estimate the products' sd is P_ii sqrt(2 + 2 r + r^2), so
  # M^{-1} P_ii has its median at 1 / (1 + 2 sqrt(2 + 2 r + r^2) /
  # sqrt(n)): 0.50 at r = 10 and n = 500 (Keras's one chain over the last
  # slow window of warmup=1000 with energy_batch_size 1,000 of N =
  # 10,000), 0.67 at n = 2,000 (warm_up's 4 chains), 0.94 with exact
  # gradients (r = 0). No scaling error: the fraction of 4,000 windows
  # below that factor is 1/2 within 4 binomial standard errors (0.032);
  # seen 0.482-0.503 over seeds 0-3.
  rng = np.random.default_rng(0)
  k = 4000
  for r, n in [(10., 500), (10., 2000), (0., 2000)]:
    exact = rng.normal(size=(n, k))  # P_ii = 1 in each of k windows.
    first = exact + np.sqrt(r) * rng.normal(size=(n, k))
    second = exact + np.sqrt(r) * rng.normal(size=(n, k))
    factor = 1. / (1. + 2. * np.sqrt(2. + 2. * r + r * r) / np.sqrt(n))
    below = np.mean(_estimate(first, second) < factor)
    assert abs(below - 0.5) < 4. * np.sqrt(0.25 / k), (r, n, below)


def test_unresolved_products_give_their_bound_not_the_noise():
  # Draws at the mode (grad U = 0) with minibatch noise of sd sigma: the
  # products' mean m is 0 within its standard error, about
  # sigma^2 / sqrt(n), so 1 / m is the noise's: <= 0 (undefined) for about
  # half the coordinates, anything up to infinity for the rest. Read as
  # max(m, 0) + 2 standard errors, every coordinate gets
  # sqrt(n) / sigma^2 times 1 / (max(z, 0) + 2), z = m / se: at most 0.5,
  # and above 0.2 while z < 3 (all 60 here); the products' sd estimates
  # sigma^2 with a relative sd of about 0.1 at n = 200 (their kurtosis is
  # 9), so the top is 0.5 / (1 - 3 x 0.1) = 0.71 (seen: 0.22-0.63).
  # Without the bound (1 / m) 23 of these 60 were <= 0 and 25 above 1 (up
  # to 7.9).
  n, sigma = 200, 3.
  rng = np.random.default_rng(5)
  first = sigma * rng.normal(size=(n, 60))
  second = sigma * rng.normal(size=(n, 60))
  v = _estimate(first, second) * sigma ** 2 / np.sqrt(n)
  assert np.all((v > 0.2) & (v < 0.71)), np.sort(v)
  # A coordinate no gradient reaches (every product 0) is not estimated:
  # 0, which keeps the previous M^{-1} in `regularized_variance`.
  assert _estimate(np.zeros((n, 1)), np.zeros((n, 1)))[0] == 0.


def test_warm_up_gradient_mass_tracks_variances_from_1e_8_to_1e4():
  # Exact gradients (a full-batch target), from the identity mass. The last
  # slow window holds 500 tests x 4 chains; the estimate allows 1.25x
  # (4 sd for n_eff >= 640 of its 2,000 draws; the confidence bound of
  # `gradient_variance` costs about 0.94x). Measured over seeds [0, 7] and
  # [1, 7]: 0.88-0.99x.
  posterior = tfd.MultivariateNormalDiag(
      tf.zeros(len(VARIANCES)), tf.constant(np.sqrt(VARIANCES), tf.float32))
  kernel = sg.AMAGOLD(sg.LogProbFnTarget(posterior.log_prob),
                      step_size=1e-3, num_leapfrog_steps=10, friction=0.5)
  warm = sg.warm_up(kernel, tf.zeros([4, len(VARIANCES)]), num_steps=1000,
                    seed=[0, 7], mass_estimate="gradients",
                    adapt_num_leapfrog_steps=False)
  relative = warm.report.variance[0] / VARIANCES
  assert np.all(np.abs(np.log(relative)) < np.log(1.25)), relative
  assert abs(warm.report.acceptance - 0.75) < 0.1, warm.report.acceptance
  # One gradient more per test (exact: one evaluation serves as both).
  assert warm.report.num_gradients == 1000 * 11


def minibatch_gaussian(num_examples=400, batch_size=100):
  """x_i ~ N(mu, s^2) with s^2 = V N, a flat prior: the posterior of the
  mean is N(x-bar, V) exactly; the minibatch gradient's noise variance
  is (N^2 / n) / s^2 = (N / n) / V (with replacement)."""
  rng = np.random.default_rng(4)
  scale = np.sqrt(VARIANCES * num_examples)
  data = (rng.normal(size=(num_examples, len(VARIANCES))) * scale).astype(
      np.float32)

  def log_likelihood(w, batch):
    return tf.reduce_sum(tfd.Normal(w[..., None, :], scale.astype(
        np.float32)).log_prob(batch), -1)
  return sg.InMemoryTarget(log_likelihood, data, batch_size=batch_size)


def test_warm_up_gradient_mass_with_minibatches_removes_their_noise():
  # N / n = 4: the noise variance is 4 P_ii, so the products' relative sd
  # is sqrt(26 / n_eff), 0.11 for the last window's 2,000 products were
  # they independent; over seeds [2, 7], [3, 7], [4, 7] the log ratios
  # spread with sd 0.21 (the draws are autocorrelated; n_eff about 600),
  # ending 0.63-1.15x with the confidence bound (1 + 2 x 0.11 = 1.23x lower
  # at 2,000 products; 0.73-1.46x without it). Within 2x: 3.3 of those sds. The square of one
  # minibatch gradient (both on one seed, a scratch copy) ended at
  # 0.18-0.23x on the same seeds, 1 / (1 + N / n) as predicted.
  kernel = sg.AMAGOLD(minibatch_gaussian(), step_size=1e-3,
                      num_leapfrog_steps=10, friction=0.5)
  warm = sg.warm_up(kernel, tf.zeros([4, len(VARIANCES)]), num_steps=1000,
                    seed=[2, 7], mass_estimate="gradients")
  relative = warm.report.variance[0] / VARIANCES
  assert np.all(np.abs(np.log(relative)) < np.log(2.)), relative
  assert warm.report.num_gradients == 1000 * 12


def test_gradient_mass_options_are_refused_with_their_fix():
  kernel = sg.AMAGOLD(minibatch_gaussian(), step_size=1e-3,
                      num_leapfrog_steps=10, friction=0.5)
  state = tf.zeros([4, len(VARIANCES)])
  for kwargs, match in [(dict(mass_estimate="fisher"), "must be one of"),
                        (dict(mass_estimate="gradients", mass="dense"),
                         "estimates a diagonal mass"),
                        (dict(mass_estimate="gradients", adapt_mass=False),
                         "estimates a diagonal mass")]:
    try:
      sg.warm_up(kernel, state, num_steps=40, **kwargs)
    except ValueError as e:
      assert match in str(e), e
    else:
      raise AssertionError(kwargs)
