"""The benchmark scripts (accuracy per second, chains, data scale, Keras
epoch) run at tiny sizes.

The scripts measure wall-clock ratios; CI machines are shared and noisy, so
no timing claim is asserted here (the scripts themselves report medians and
spreads). This test runs each script's `main(smoke=True)` at tiny sizes and
checks that every measurement it reports is there and is a finite positive
number, that the JSON and the figure are written, and that the samplers in
the accuracy script are sampling (acceptance in (0, 1], moments finite).
"""

import json
import math
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "benchmarks")
MNIST = os.path.join(os.path.dirname(BENCH), "..", "shared", "data", "mnist")


def _positive(x):
  return isinstance(x, float) and math.isfinite(x) and x > 0


def test_benchmark_scripts_run_at_tiny_sizes(tmp_path):
  sys.path.insert(0, BENCH)
  try:
    import accuracy_per_second  # pylint: disable=import-outside-toplevel
    import chains  # pylint: disable=import-outside-toplevel
    import data_scale  # pylint: disable=import-outside-toplevel
    import keras_epoch  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.remove(BENCH)

  rows = chains.main(smoke=True, n=2000, out=str(tmp_path))
  assert {(r["batches"], r["chains"]) for r in rows} == {
      ("per-chain", 1), ("per-chain", 4)}
  assert all(_positive(r["us_per_gradient"]["median"]) for r in rows)
  assert json.load(open(tmp_path / "chains.json"))["rows"]

  rows = data_scale.main(smoke=True, out=str(tmp_path))
  assert [(r["sampler"], r["n"]) for r in rows] == [("SGLD", 1000),
                                                    ("SGLD", 2000)]
  assert all(_positive(r["us_per_gradient"]["median"]) for r in rows)
  assert all(math.isfinite(r["loglog_slope"]) for r in rows)

  results = accuracy_per_second.main(
      smoke=True, n=2000, out=str(tmp_path),
      figure_path=str(tmp_path / "acc.png"))
  assert os.path.getsize(tmp_path / "acc.png") > 0
  for name, r in results.items():
    assert 0. < r["acceptance"] <= 1., name
    assert _positive(r["ess_min"]) and _positive(r["ess_per_second"]), name
    assert math.isfinite(r["mean_error"]) and math.isfinite(r["sd_error"])

  if not os.path.isdir(MNIST):
    pytest.skip(f"keras_epoch part needs the MNIST files in {MNIST}")
  rows = keras_epoch.main(smoke=True, out=str(tmp_path))
  assert [r["method"] for r in rows] == ["SGD", "SGHMC"]
  assert all(_positive(r["ratio"]["median"]) for r in rows)


@pytest.mark.slow
def test_full_batch_energy_script_runs_at_a_tiny_size(tmp_path):
  sys.path.insert(0, BENCH)
  try:
    import full_batch_energy  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.remove(BENCH)
  rows = full_batch_energy.main(smoke=True, out=str(tmp_path))
  assert {r["compiled"] for r in rows} == {
      "XLA, results unread", "XLA, results traced", "graph, results traced"}
  assert all(_positive(r["ms_per_gradient"]["median"]) for r in rows)
  assert json.load(open(tmp_path / "full_batch_energy.json"))["rows"]
