"""Every kernel runs in float64 end to end (state, results, trace) and samples
the linear-regression posterior: the mean within 4 Monte Carlo standard
errors, and the variance its exact prediction where one exists.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, sample, stationary_covariance
from support.helpers import variance_and_se


# Step sizes for a posterior of precision about N = 200. The scheme names a
# closed-form prediction of the stationary covariance (helpers), or None.
@pytest.mark.parametrize("make,scheme", [
    (lambda t: sg.SGLD(t, 1e-3), ("sgld", 1e-3, 0.)),
    (lambda t: sg.SGHMC(t, 0.01, 10., integrator="splitting"),
     ("splitting", 0.01, 10.)),
    (lambda t: sg.SGNHT(t, 0.01), None),
    (lambda t: sg.PreconditionedSGLD(t, 1e-3), None),
    (lambda t: sg.AMAGOLD(t, 0.02, num_leapfrog_steps=5, friction=1.), None),
    (lambda t: sg.SGNUTS(t, 0.01, 1., max_tree_depth=5), None),
], ids=["sgld", "sghmc", "sgnht", "psgld", "amagold", "sgnuts"])
def test_float64_end_to_end(make, scheme):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 2))
  y = x @ [1., -1.] + rng.normal(size=200)
  target = sg.InMemoryTarget(
      lambda w, b: -0.5 * (b[1] - tf.einsum("nd,...d->...n", b[0], w)) ** 2,
      (x, y), batch_size=100,
      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1))
  kernel = make(target)
  # 16 batched chains (they cost little more than 4): with 4 the variance's
  # standard error, from 4 x 300 correlated draws, was itself so noisy that
  # SGHMC's z-score spread over seeds 1-12 had sd 1.55 (one seed at -4.5);
  # with 16, seeds 1-6 gave |z| <= 1.5.
  draws, trace = sample(kernel, tf.zeros([16, 2], tf.float64), 400,
                        seed=[1, 2], trace_fn=lambda _, r: r)
  assert draws.dtype == tf.float64
  for leaf in tf.nest.flatten(trace):
    if leaf.dtype.is_floating:
      assert leaf.dtype == tf.float64, leaf
  assert np.all(np.isfinite(draws))
  # The float64 chain samples the posterior N(w_hat, P^-1), P = X'X + I
  # (sd about 0.07): the mean within 4 Monte Carlo standard errors (every
  # kernel's stationary mean is exact on a Gaussian target).
  precision = x.T @ x + np.eye(2)
  w_hat = np.linalg.solve(precision, x.T @ y)
  kept = np.asarray(draws)[100:]
  mean, se = mean_and_se(kept)
  assert np.all(np.abs(mean - w_hat) < NUM_SE * se), (mean, w_hat, se)
  if scheme is None:
    return
  # Where the discretised chain's covariance has a closed form, the
  # variance too: the minibatch gradient's noise (batches of 100 drawn with
  # replacement) is N^2 / n times the per-example gradients' covariance at
  # w_hat, nearly constant over a posterior this narrow.
  name, h, c = scheme
  g = -x * (y - x @ w_hat)[:, None]
  noise = 200. ** 2 / 100. * np.cov(g.T, bias=True)
  predicted = np.diag(stationary_covariance(name, precision, h, c,
                                            gradient_noise=noise))
  var, var_se = variance_and_se(kept, mean)
  print(name, "variance", var, "predicted", predicted, "se", var_se)
  assert np.all(np.abs(var - predicted) < NUM_SE * var_se), (
      var, predicted, var_se)
