"""benchmarks/one_call.py (one `tfp_sgmcmc.sample` call with its defaults on
a logistic regression against its Laplace reference) runs at a tiny size
and reports every number. No accuracy or timing claim is asserted here: the
short chains of the tiny size are not converged; docs/performance.md gives
the full size."""

import json
import math
import os
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "benchmarks")


def test_one_call_runs_at_a_tiny_size(tmp_path, monkeypatch):
  # The command line `python benchmarks/one_call.py --tiny --out DIR`, run
  # in this process (which has TensorFlow imported already), as the other
  # benchmark scripts' tests run theirs.
  monkeypatch.syspath_prepend(BENCH)
  monkeypatch.setattr(sys, "argv", ["one_call.py", "--tiny", "--out",
                                    str(tmp_path)])
  import one_call  # pylint: disable=import-outside-toplevel
  one_call.main()
  row = json.load(open(tmp_path / "one_call_tiny.json"))
  assert row["num_examples"] == 20_000 and row["num_chains"] == 4
  for key in ("max_mean_error_sd", "sd_ratio_min", "sd_ratio_max",
              "max_rhat", "min_ess", "seconds", "step_size"):
    assert math.isfinite(row[key]) and row[key] > 0., key
  assert row["minibatches"] == "independent minibatches"
  assert row["control_variates"] and row["arrived"]
  assert set(row["passes"]) == {"means", "sds", "rhat", "independent"}


def test_unstandardised_regression_runs_at_a_tiny_size(tmp_path,
                                                       monkeypatch):
  # `python benchmarks/unstandardised_regression.py --tiny --out DIR`: a
  # JointDistribution regression with its outcome in thousands, against a
  # float64 Laplace reference; every number reported, none asserted.
  monkeypatch.syspath_prepend(BENCH)
  monkeypatch.setattr(sys, "argv", ["unstandardised_regression.py",
                                    "--tiny", "--out", str(tmp_path)])
  import unstandardised_regression  # pylint: disable=import-outside-toplevel
  unstandardised_regression.main()
  row = json.load(open(tmp_path / "unstandardised_regression_tiny.json"))
  assert row["num_examples"] == 20_000 and row["scale"] == 1000.
  for key in ("max_abs_mean_error_sds", "rhat", "step_size", "seconds"):
    assert math.isfinite(row[key]) and row[key] > 0., key
  # The reference's noise scale is the outcome's (500), not softplus'
  # inverse of it.
  assert 400. < row["noise_scale_mode"] < 600.
  assert isinstance(row["holds"], bool) and len(row["sd_ratio_range"]) == 2
