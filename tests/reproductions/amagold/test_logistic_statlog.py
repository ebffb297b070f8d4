"""AMAGOLD paper, Fig. 4 (logistic regression on Statlog) at CI size.

`examples/papers/amagold/logistic_statlog.py` runs the experiment: a full-batch NUTS
reference, then HMC, L2MC, SGHMC and AMAGOLD over step sizes 1e-6 to 5e-3
and their wall clock. These tests run the same code on Australian (N = 690,
minibatch 32) with short chains and check the claims of the paper's Sec. 6.2
that our runs reproduce:

* AMAGOLD's acceptance rate falls at the large step sizes ("AMAGOLD's large
  error using a large step size is due to a drop in M-H acceptance
  probability"), and the drop comes from the minibatch noise: the
  full-batch L2MC, the same chain with exact gradients, keeps accepting.

The paper's speed claim (AMAGOLD "significantly faster due to
minibatching" than the full-batch baselines) is a timing: the example
measures it (docs/results.md), and it is not asserted here, since a unit
test's wall clock on a shared machine measures the machine.

The claim that AMAGOLD's MSE is below SGHMC's at every step size is not
asserted: in our runs it does not hold over the paper's grid (SGHMC's bias
in the posterior mean is below the Monte Carlo error up to eps = 5e-3 and
shows from eps = 1e-2 on; see docs/results.md, AMAGOLD Fig. 4). The slow
test checks that SGHMC's bias grows with the step size, against the NUTS
reference.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import load_example

ex = load_example("papers/amagold/logistic_statlog")


def test_heart_loader_reads_the_libsvm_file(shared_data):
  x, y = sg.datasets.load_statlog_heart(shared_data)
  assert x.shape == (270, 13) and y.shape == (270,)
  assert set(np.unique(y)) == {0., 1.}
  # heart_scale's features are scaled to [-1, 1] and every column is used.
  assert x.min() >= -1. and x.max() <= 1.
  assert np.all(x.std(0) > 0.)
  x2, y2 = sg.datasets.load_statlog_heart(os.path.join(shared_data, "statlog"))
  np.testing.assert_array_equal(x, x2)
  np.testing.assert_array_equal(y, y2)
  problem = ex.load_problem("heart", shared_data)
  # Standardised features and an intercept: the paper's 14 covariates.
  assert problem.x.shape == (270, 14) and problem.batch_size == 16
  np.testing.assert_allclose(problem.x[:, :-1].mean(0), 0., atol=1e-12)
  np.testing.assert_allclose(problem.x[:, -1], 1.)

SMALL, LARGE = 1e-4, 5e-3  # The paper's runtime step size; its largest.
CHAINS = 4                 # per step size
NUM_GRADIENTS = 20_000     # per chain: 2,000 M-H tests


def _run(fn, problem, eps, seed):
  init = tf.zeros([len(eps), problem.dim], ex.DTYPE)
  num_steps, num_burnin = ex.steps_for("amagold", NUM_GRADIENTS)
  _, accept, diverged = fn(init, tf.constant(eps), tf.constant(num_steps),
                           tf.constant(num_burnin), tf.constant(seed))
  return np.asarray(accept), np.asarray(diverged)


@pytest.fixture(scope="module")
def short_runs():
  """AMAGOLD and L2MC, 4 chains at each of eps = 1e-4 and 5e-3, 2e4
  gradient steps per chain, one seed (the binomial error of a rate over
  its 8,000 tests is 0.005, the bounds checked are 0.05 to 0.2 from the
  rates seen over 4 seeds). (The speed claim, AMAGOLD much
  faster than full-batch L2MC, is measured by `examples/papers/amagold/logistic_statlog.py`
  and not asserted here: timings are benchmarks, not unit tests.)"""
  from support.paths import SHARED_DATA  # pylint: disable=g-import-not-at-top
  if not os.path.isdir(SHARED_DATA):
    pytest.skip(f"real data not found at {SHARED_DATA} (../shared/data)")
  problem = ex.load_problem("australian", SHARED_DATA)
  eps = np.repeat(np.asarray([SMALL, LARGE], ex.DTYPE), CHAINS)[:, None]
  fns = {m: ex.compiled_run(m, problem) for m in ("amagold", "l2mc")}
  out = {m: dict(accept=[]) for m in fns}
  for i, (m, fn) in enumerate(fns.items()):
    accept, diverged = _run(fn, problem, eps, [1, i])
    assert not diverged.any()
    out[m]["accept"].append(accept.reshape(2, CHAINS))
  return out


def test_amagold_acceptance_drops_at_large_step_sizes_from_minibatch_noise(
    short_runs):
  amagold = np.concatenate(short_runs["amagold"]["accept"], axis=1)
  l2mc = np.concatenate(short_runs["l2mc"]["accept"], axis=1)
  # Observed (4 chains x 2,000 M-H tests, 4 seeds): AMAGOLD's per-chain
  # acceptance 0.973-0.976 at eps = 1e-4 and 0.274-0.294 at 5e-3 (0.29 in
  # the 2e5-step sweep of the example). L2MC, the same proposal with exact
  # gradients, accepts 1.00 at both. The bounds 0.9 and 0.5 are far outside
  # that spread.
  assert amagold[0].mean() > 0.9, amagold
  assert amagold[1].mean() < 0.5, amagold
  assert l2mc[1].min() > 0.95, l2mc


@pytest.mark.slow
def test_sghmc_bias_in_the_mean_grows_with_the_step_size(shared_data):
  # 16 SGHMC chains per step size started at the NUTS mean, 2e5 steps each,
  # pooled. Observed over two seeds: bias MSE 1.4e-5 and 8.7e-5 at
  # eps = 5e-3 (Monte Carlo part 2e-5 to 3e-5: at most a small bias),
  # 5.9e-5 and 8.8e-5 at 1e-2, 2.65e-3 and 2.7e-3 at 2e-2 (Monte Carlo part
  # under 2e-4). Asserted: 2e-2's at least 10 times 5e-3's (seen: 30 to
  # 200 times).
  problem = ex.load_problem("australian", shared_data)
  reference = ex.nuts_reference(problem, chains=4, draws=2000, warmup=500)
  assert reference["rhat"].max() < 1.01 and reference["ess"].min() > 4000
  probe = ex.sghmc_bias(problem, reference, step_sizes=(5e-3, 2e-2))
  small, large = probe["bias_mse"]
  assert large > 10. * max(small, probe["mc_mse"][1]), probe


def test_amagold_and_sghmc_posterior_means_match_nuts_at_ci_size(
    shared_data):
  # The experiment's claim at CI size: at the paper's largest step size
  # (5e-3) the minibatch samplers' posterior means agree with the
  # full-batch NUTS reference, on Statlog heart (N = 270, d = 14, minibatch
  # 16), from chains started at w = 0 (the posterior mean has norm 1.8). Each
  # coefficient within 4 combined Monte Carlo standard errors of NUTS's
  # (NUTS 4 x 500 draws; each sampler 16 chains x 20,000 gradient steps,
  # pooled, its error from the chain means' spread, the chains being
  # independent apart from shared minibatches, whose correlation the
  # between-chain spread includes). With 8 chains the error estimate had
  # 7 degrees of freedom, so each z was t-distributed with heavy tails and
  # the max over 14 coefficients passed 4 by chance for about one noise
  # stream in ten (SGHMC, seeds 1-40: 4/40 with the SplitMix64 noise, 0/40
  # with Philox, the seed-to-seed spread of the pooled mean matching the
  # estimated error in both: no bias). With 16 chains (batched, little
  # extra cost) the error is sqrt(2) smaller, so the check is stronger, and
  # over seeds 1-30 the max passed 4 for 0/30 SGHMC and 1/30 AMAGOLD runs.
  problem = ex.load_problem("heart", shared_data)
  reference = ex.nuts_reference(problem, chains=4, draws=500, warmup=300)
  assert reference["rhat"].max() < 1.05
  chains = 16
  # Started at w = 0, away from the posterior (mean norm about 2).
  init = tf.zeros([chains, problem.dim], ex.DTYPE)
  eps = np.full([chains, 1], LARGE, ex.DTYPE)
  for method in ("amagold", "sghmc"):
    num_steps, num_burnin = ex.steps_for(method, 20_000)
    means, _, diverged = ex.compiled_run(method, problem)(
        init, tf.constant(eps), tf.constant(num_steps),
        tf.constant(num_burnin), tf.constant([3, 4]))
    assert not np.asarray(diverged).any()
    chain_means = np.asarray(means)[-1]
    se = chain_means.std(0, ddof=1) / np.sqrt(chains)
    z = (chain_means.mean(0) - reference["mean"]) / np.sqrt(
        se ** 2 + reference["mcse"] ** 2)
    print(method, "max |z|", np.abs(z).max())
    assert np.all(np.abs(z) < 4.), (method, z)
