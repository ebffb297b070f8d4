"""The scale-heterogeneity experiment (SGBD paper, Fig. 2) at CI size.

Bayesian logistic regression on Statlog Australian with unscaled covariates
(reference posterior sds from 1.6e-4 to 1.1). `examples/papers/sgbd/sgbd_logistic.py`
runs it at full size; here the same code runs a smaller grid and shorter
chains, against a shorter NUTS reference.

Tolerances. A sampler is "within" at a step size when its estimated mean
lies in the reference mean +- 2 reference sd (the paper's black lines). The
short reference (4 x 500 NUTS draws, ESS > 2000 per coefficient) has a Monte
Carlo error in its means of sd / sqrt(ESS) < 0.03 sd, and in its sds of
about 2%: against a +-2 sd interval it moves the boundaries by under 2%
(measured against the 8 x 2000 reference: means within 0.04 sd, sds within
5%). The claims below are margins of several grid points (half a decade
each) between samplers, not a boundary case: observed with 100,000 steps
per chain, SGLD was within for 3 of 9 step sizes on the smallest-sd
coefficient, v-SGBD for 7, and summed over the coefficients whose interval
excludes the start, 10 vs 20 grid points.
"""

import os

import numpy as np
import pytest

from support.helpers import load_example


@pytest.fixture(scope="module")
def experiment():
  # A module-scoped fixture cannot take `shared_data` (function-scoped), so
  # it makes the same check.
  from support.paths import SHARED_DATA  # pylint: disable=g-import-not-at-top
  if not os.path.isdir(SHARED_DATA):
    pytest.skip(f"real data not found at {SHARED_DATA} (../shared/data)")
  ex = load_example("papers/sgbd/sgbd_logistic")
  config = ex.Config(
      log10_scales=tuple(np.arange(-5., -0.99, 0.5)), reps=4,
      num_steps=100_000, batch_size=138,
      methods=("sgld", "vanilla", "extreme"), reference_chains=4,
      reference_draws=500, reference_warmup=300, seed=1)
  problem = ex.load_problem(SHARED_DATA)
  reference, results = ex.run_experiment(problem, config,
                                         log=lambda *_: None)
  return ex, problem, config, reference, results


def grid_points_within(results, method, coefficient):
  _, (_, inside, _) = results[method]
  return int(inside[:, coefficient].sum())


def test_short_reference_is_converged(experiment):
  _, _, _, reference, _ = experiment
  assert reference["ess"].min() > 1000
  assert reference["rhat"].max() < 1.01
  # The heterogeneity the experiment is about.
  assert reference["sd"].max() / reference["sd"].min() > 1000.


def test_sgbd_stays_within_over_a_wider_range_of_step_sizes(experiment):
  ex, problem, config, reference, results = experiment
  smallest = int(np.argmin(reference["sd"]))
  # The paper's Fig. 2a, smallest posterior sd: SGLD leaves the interval
  # once h exceeds the stiff direction's stability limit; v-SGBD's moves
  # stay bounded by sigma and its mean stays within far longer.
  sgld = grid_points_within(results, "sgld", smallest)
  vanilla = grid_points_within(results, "vanilla", smallest)
  assert vanilla >= sgld + 2, (vanilla, sgld)  # At least one more decade.
  # Over every coefficient whose interval excludes the start b = 0 (where
  # "within" needs the chain to have found the posterior): v-SGBD's grid
  # points within at least 1.5 times SGLD's.
  start_outside = np.abs(reference["mean"]) > 2. * reference["sd"]
  assert start_outside.sum() >= 5
  total = {m: sum(grid_points_within(results, m, j)
                  for j in np.flatnonzero(start_outside))
           for m in ("sgld", "vanilla")}
  assert total["vanilla"] >= 1.5 * total["sgld"], total
  # All 15 means at once: SGLD is within at no step size (any h small enough
  # for the stiffest coefficient leaves the widest where it started), while
  # e-SGBD, which moves every coordinate by sigma towards the stochastic
  # gradient, is within over a range of step sizes.
  assert not results["sgld"][1][2].any()
  extreme = ex.longest_run(results["extreme"][1][2], config.log10_scales)
  assert extreme is not None and extreme[2] >= 0.5, extreme
  del problem


def test_sgld_is_off_by_orders_of_magnitude_at_large_step_sizes(experiment):
  # The contrast behind the robust range: at s = 0.01 (h = 5e-5) SGLD's
  # stiffest coefficient is thousands of sds off; SGBD's increments are
  # bounded by sigma and its error stays within tens of sds.
  ex, _, config, _, results = experiment
  i = int(np.argmin(np.abs(np.asarray(config.log10_scales) + 2.)))
  sgld_error = np.max(np.abs(results["sgld"][1][0][i]))
  sgbd_error = np.max(np.abs(results["vanilla"][1][0][i]))
  assert sgld_error > 1000. and sgbd_error < 100., (sgld_error, sgbd_error)
  del ex


# --- The row's verdict under both readings of the caption, from the
# committed default run (docs/figures/sgbd/sgbd_logistic.json: 4 chains of
# 300,000 steps at 11 step sizes, minutes of the shared cores).

ROW = "SG Barker, Fig. 2 (scale heterogeneity), on Statlog"


def _decades(run):
  return -1. if run is None else run


def check_statlog_verdict(run, text):
  """'Holds partly, on e-SGBD only' under +-2 sd and +-1 sd: e-SGBD has a
  robust range, SGLD and v-SGBD none; v-SGBD's per-coefficient range at
  least SGLD's on all 15 under both, and its worst error below SGLD's from
  10^-3.5 up; the row quotes the ranges."""
  from support import results_rows  # pylint: disable=g-import-not-at-top
  quoted = ["**holds partly, on e-SGBD only**", "`--full` **not run here**"]
  for reading, label in (("2sd", "± 2 sd"), ("1sd", "± 1 sd")):
    ranges = run["robust_ranges"][reading]
    assert ranges["sgld"]["overall"] is None, (reading, ranges["sgld"])
    assert ranges["vanilla"]["overall"] is None, (reading, ranges)
    extreme = ranges["extreme"]["overall"]
    assert extreme is not None and extreme[2] >= 0.5, (reading, extreme)
    per = {m: np.asarray([_decades(v) for v in ranges[m]["per_coefficient"]])
           for m in ("sgld", "vanilla")}
    assert np.all(per["vanilla"] >= per["sgld"]), (reading, per)
    quoted.append(f"**{label}**: e-SGBD {extreme[2]:.1f} decade, v-SGBD and "
                  "SGLD none")
  scales = np.asarray(run["config"]["log10_scales"])
  z = {m: np.asarray(run["samplers"][m]["max_abs_z"])
       for m in ("sgld", "vanilla")}
  assert np.all(z["vanilla"][scales >= -3.5] < z["sgld"][scales >= -3.5]), z
  i = int(np.argmin(np.abs(scales + 3.)))
  quoted.append(f"{z['vanilla'][i]:.2f} against {z['sgld'][i]:,.0f} sd at "
                "10^-3")
  results_rows.assert_quoted(text, *quoted)


def test_statlog_row_states_its_runs_verdict_under_both_readings():
  from support import results_rows  # pylint: disable=g-import-not-at-top
  check_statlog_verdict(results_rows.load_json("sgbd", "sgbd_logistic.json"),
                        results_rows.results_row(ROW))


def test_the_statlog_check_fails_if_sgld_were_more_robust():
  # Able to fail: an SGLD whose per-coefficient range exceeded v-SGBD's
  # on one coefficient (the old row's "no more robust than SGLD") is
  # rejected, and so is an e-SGBD within nowhere under +-1 sd.
  from support import results_rows  # pylint: disable=g-import-not-at-top
  text = results_rows.results_row(ROW)
  run = results_rows.load_json("sgbd", "sgbd_logistic.json")
  run["robust_ranges"]["1sd"]["sgld"]["per_coefficient"][1] = 3.
  with pytest.raises(AssertionError):
    check_statlog_verdict(run, text)
  run = results_rows.load_json("sgbd", "sgbd_logistic.json")
  run["robust_ranges"]["1sd"]["extreme"]["overall"] = None
  with pytest.raises(AssertionError):
    check_statlog_verdict(run, text)
