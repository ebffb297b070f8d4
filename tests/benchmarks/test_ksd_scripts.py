"""The KSD benchmark scripts run at their quick sizes: every measure they
report is there and finite, so the docs' commands keep working (no timing
or ranking claim is asserted at this size)."""

import json
import math
import os

import numpy as np

from support import paths


KERNELS = ("unit", "diagonal", "dense", "diagonal_median")


def _script():
  return paths.benchmark("ksd_step_sizes")


def test_ksd_step_size_script_reports_every_scale(tmp_path):
  results = _script().main(quick=True, out=str(tmp_path), seed=3,
                           start="posterior")
  assert [r["kernel"] for r in results] == ["SGLD", "SGHMC"]
  for result in results:
    assert set(result["by_scale"]) == set(KERNELS)
    assert result["start"] == "posterior"
    for row in result["rows"]:
      assert all(row[f"ksd_{k}"] > 0 for k in KERNELS)
      assert row["error_rms"] <= row["error"] and row["mean_error_se"] >= 0
    for measure in ("spearman", "spearman_rms"):
      assert math.isfinite(result["by_scale"]["diagonal"][measure])
  saved = json.load(open(tmp_path / "ksd_step_sizes_posterior_quick.json"))
  assert saved["seed"] == 3 and len(saved["results"]) == 2


def test_posterior_start_has_the_reference_means_and_sds():
  # The start the grid's runs leave from: its own errors are zero, so a
  # run's error is what the step size did to it (2x: overdispersed).
  script = _script()
  problem = script._start_info(script.double_well_problem())  # pylint: disable=protected-access
  for spread in (1., 2.):
    start = script.posterior_start(problem, 16, spread,
                                   np.random.default_rng(0))
    assert start.shape == (16, 1)
    np.testing.assert_allclose(start.mean(), problem.mean[0], atol=1e-5)
    np.testing.assert_allclose(start.std(), spread * problem.sd[0],
                               rtol=1e-5)
  # The two modes start with their weights (14 of 16 in the deeper one).
  assert np.sum(start < 0.) == 14


def test_ksd_cost_script_times_each_score_beside_the_run(tmp_path):
  # Its quick size: every score is timed `repeats` times, interleaved with
  # the run, and the fractions are the medians' ratio.
  result = paths.benchmark("ksd_cost").main(quick=True, out=str(tmp_path),
                                            repeats=3)
  assert len(result["all_sampling_seconds"]) == 3
  assert result["sampling_seconds"] == np.median(
      result["all_sampling_seconds"])
  assert [r["score"] for r in result["scores"]] == [
      "exact", "m = 1,000", "m = 10,000"]
  for row in result["scores"]:
    assert len(row["all_seconds"]) == 3 and row["ksd"] > 0
    assert row["fraction_of_run"] == (
        np.median(row["all_seconds"]) / result["sampling_seconds"])
  assert not os.listdir(tmp_path)  # The quick size writes no file.


def test_double_well_replicates_script_reports_each_length_scale(tmp_path):
  # A small size: every replicate's error and KSD, per kernel and c; the
  # expected error is the RMS of the replicates' errors.
  results = paths.benchmark("ksd_double_well_replicates").main(
      num_steps=200, num_chains=4, max_draws=100, replicates=2,
      out=str(tmp_path), kernels=("SGLD",))
  assert [r["kernel"] for r in results] == ["SGLD"]
  for result in results:
    errors = np.array(result["errors"])
    assert errors.shape == (2, 5)
    np.testing.assert_allclose(result["expected_error"],
                               np.sqrt(np.mean(errors ** 2, 0)))
    assert set(result["by_length_scale"]) == {"1.0", "2.0", "4.0"}
    for v in result["by_length_scale"].values():
      assert len(v["mean_ksd"]) == 5 and len(v["chosen_over_best"]) == 2
      assert all(x >= 1. for x in v["chosen_over_best"])
  saved = json.load(open(tmp_path / "ksd_double_well_replicates.json"))
  assert saved["replicates"] == 2 and len(saved["results"]) == 1
