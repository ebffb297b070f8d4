"""Resumable chains, health reporting, float64 end to end."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import (NUM_SE, mean_and_se, sample,
                             stationary_covariance, variance_and_se)
from support.paths import WORKERS

WORKER = os.path.join(WORKERS, "resume_worker.py")


def test_chains_resume_bit_identically_in_a_new_process(tmp_path):
  # Process 1 runs 3k steps and, separately, 2k steps saved to disk;
  # process 2 loads the checkpoint and runs k more. Every kernel's resumed
  # k steps must equal steps 2k..3k of the uninterrupted run, bit for bit:
  # momentum, adaptation state, thermostat, noise estimates, preconditioner
  # and schedule position all live in the saved results.
  for mode in ("first", "resume"):
    proc = subprocess.run([sys.executable, WORKER, mode, str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
  from workers import resume_worker  # pylint: disable=g-import-not-at-top
  k = resume_worker.K
  for name in resume_worker.kernels():
    full = np.load(tmp_path / f"{name}_full.npy")
    resumed = np.load(tmp_path / f"{name}_resumed.npy")
    np.testing.assert_array_equal(resumed, full[2 * k:], err_msg=name)
    # And the chain really moved (the comparison is not between constants).
    assert np.std(full[2 * k:]) > 0, name


def test_summary_reports_divergence_acceptance_and_unbounded_energy():
  target = sg.NoisyGradientTarget(
      lambda x: tf.reduce_sum(0.25 * x ** 4, -1), gradient_noise_variance=0.)
  kernel = sg.SGHMC(target, step_size=0.2, friction=0.1)
  draws, trace = sample(kernel, tf.constant([[20.], [0.], [0.5], [-0.5]]),
                        300, seed=[1, 2], trace_fn=lambda _, r: r)
  with pytest.warns(sg.UnhealthyChainWarning, match="1 of 4 chains diverged"):
    health = sg.summarize(draws, trace, print_report=False)
  assert health.divergences[0] > 0 and not health.divergences[1:].any()

  # A healthy AMAGOLD run: no warning, acceptance and step size reported.
  gauss = sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x ** 2, -1),
                                 gradient_noise_variance=1.)
  kernel = sg.AMAGOLD(gauss, 0.3, num_leapfrog_steps=5, friction=0.5)
  draws, trace = sample(kernel, tf.zeros([4, 2]), 1000, seed=[3, 4],
                        trace_fn=lambda _, r: r)
  with warnings.catch_warnings():
    warnings.simplefilter("error", sg.UnhealthyChainWarning)
    health = sg.summarize(draws, trace, print_report=False)
  assert not health.problems
  assert np.all((health.acceptance_rate > 0.3) & (health.acceptance_rate < 1))
  assert np.allclose(health.step_size, 0.3)
  report = sg.diagnostics.format_report(health)
  assert "healthy" in report and "accept" in report

  # SGLD at h = 2.02 on U = x^2 / 2: theta' = (1 - h) theta + noise grows
  # by 2% a step, so the energy climbs for hundreds of steps before any
  # overflow. Flagged as growing energy while every value is still finite.
  draws, trace = sample(sg.SGLD(gauss, 2.02), tf.ones([2, 1]), 400,
                        seed=[5, 6], trace_fn=lambda _, r: r)
  assert np.all(np.isfinite(draws)) and not np.any(trace.diverged)
  with pytest.warns(sg.UnhealthyChainWarning, match="energy grows"):
    sg.summarize(draws, trace, print_report=False)


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


def test_million_step_chain_with_running_moments_has_constant_memory():
  # Peak resident memory of a fresh process running 1e5 and 1e6 steps of
  # 8 chains x 10 parameters. Keeping the 1e6 draws would need 320 MB more;
  # running moments must need (almost) nothing more. Measured on the dev
  # machine: 904 MB and 902 MB peak.
  peaks = {}
  worker = os.path.join(WORKERS, "memory_worker.py")
  for n in ("1e5", "1e6"):
    proc = subprocess.run([sys.executable, worker, n], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    fields = dict(f.split("=") for f in line.split())
    peaks[n] = int(fields["peak_kib"])
    # The moments are those of a real chain (SGHMC's variance is about 1).
    assert 0.9 < float(fields["mean_variance"]) < 1.2
  print("peak KiB", peaks)
  assert peaks["1e6"] - peaks["1e5"] < 50 * 1024
