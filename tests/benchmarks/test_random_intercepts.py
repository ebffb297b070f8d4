"""`benchmarks/random_intercepts.py` runs at a tiny size: both warm-ups
(the kernel's T kept, T tuned by ChEES) report R-hat, ESS, T and the step
size, and the JSON is written (no mixing claim is asserted at this size;
docs/warmup.md gives the full run's)."""

import json
import math

from support import paths


def test_random_intercepts_script_reports_both_warm_ups(tmp_path):
  rows = paths.benchmark("random_intercepts").main(
      num_examples=2000, num_steps=40, out=str(tmp_path),
      jit_compile=False)
  assert [r["run"] for r in rows] == ["warm_up, T = 10 kept",
                                      "warm_up, T tuned by ChEES"]
  assert rows[0]["num_leapfrog_steps"] == 10
  for row in rows:
    assert math.isfinite(row["max_rhat"]) and row["min_ess"] > 0
    assert row["step_size"] > 0 and "draws" not in row
  saved = json.load(open(tmp_path / "random_intercepts.json"))
  assert saved["num_examples"] == 2000 and len(saved["rows"]) == 2
