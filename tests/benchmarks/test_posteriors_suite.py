"""benchmarks/posteriors.py at its quick size: eight schools (always
available: the Inference Gym is installed), NUTS and two SG methods, every
number it reports present and finite, the JSON written. No timing or
accuracy claim is asserted here (tests/statistical/test_warmup_exactness.py
asserts the warmed-up AMAGOLD's moments)."""

import json
import math

import pytest

from support import paths



@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
  """One quick run of the suite with every method the tests look at (one
  NUTS reference for them all): (module, rows, output folder)."""
  posteriors = paths.benchmark("posteriors")
  out = tmp_path_factory.mktemp("posteriors")
  rows = posteriors.main(quick=True, out=str(out),
                         models=["eight_schools_noncentred"],
                         methods=["AMAGOLD warmed up", "SGLD", "sample"])
  return posteriors, rows, out


def test_posterior_suite_runs_at_its_quick_size(quick_run):
  posteriors, rows, out = quick_run
  assert [r["method"] for r in rows] == ["NUTS", "AMAGOLD warmed up", "SGLD",
                                         "sample"]
  for r in rows[:3]:
    for key in ("mean_error_sd", "mean_error_mcse", "sd_rel_error"):
      assert math.isfinite(r[key]) and r[key] >= 0., (r["method"], key)
    for key in ("ess_per_1k_gradients", "ess_per_second",
                "gradients_per_chain"):
      assert math.isfinite(r[key]) and r[key] > 0., (r["method"], key)
  warmed = rows[1]
  assert warmed["mass_adapted"] and 0. < warmed["warmup_acceptance"] <= 1.
  # The SG methods ran at NUTS's gradient budget (to within one AMAGOLD
  # test of T = 10 gradients).
  assert abs(warmed["gradients_per_chain"] -
             rows[0]["gradients_per_chain"]) <= 10.
  saved = json.load(open(out / "posteriors_quick.json"))
  assert saved["rows"] == json.loads(json.dumps(rows))
  assert "| eight_schools_noncentred | NUTS |" in posteriors.table(rows)


def test_posterior_suite_has_a_sample_row(quick_run):
  _, rows, _ = quick_run
  row = rows[3]
  assert row["method"] == "sample"
  for key in ("mean_error_sd", "mean_error_mcse", "sd_rel_error",
              "max_rhat"):
    assert math.isfinite(row[key]) and row[key] >= 0., key
  assert isinstance(row["passes"], bool) and isinstance(row["arrived"], bool)
  assert row["minibatches"].startswith("exact gradients")
