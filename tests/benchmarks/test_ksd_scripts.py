"""The KSD benchmark scripts run at their quick sizes: every measure they
report is there and finite, so the docs' commands keep working (no timing
or ranking claim is asserted at this size)."""

import json
import math
import os
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "benchmarks")


def test_ksd_step_size_script_reports_every_scale(tmp_path):
  sys.path.insert(0, BENCH)
  try:
    import ksd_step_sizes  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.remove(BENCH)
  results = ksd_step_sizes.main(quick=True, out=str(tmp_path), seed=3)
  assert [r["kernel"] for r in results] == ["SGLD", "SGHMC"]
  for result in results:
    assert set(result["by_scale"]) == {"unit", "diagonal", "dense"}
    for row in result["rows"]:
      assert all(row[f"ksd_{k}"] > 0 for k in ("unit", "diagonal", "dense"))
    assert math.isfinite(result["by_scale"]["diagonal"]["spearman"])
  saved = json.load(open(tmp_path / "ksd_step_sizes_quick.json"))
  assert saved["seed"] == 3 and len(saved["results"]) == 2
