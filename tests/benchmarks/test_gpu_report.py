"""benchmarks/gpu_report.py, the report a GPU session runs, keeps working on
the CPU: its `--quick` mode runs every row's code at tiny sizes (the
mirrored row over two logical CPU devices), writes the JSON that
docs/gpu_report.md describes and prints the table; a row that fails records
its error while the others run, and a spent budget skips what is left with
the reason.

No timing is asserted (CI machines are shared and noisy); what is checked
is that every row is there with its fields, and that its numbers are
finite and positive.
"""

import json
import math
import os
import subprocess
import sys

import pytest
import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benchmarks")
SCRIPT = os.path.join(BENCH, "gpu_report.py")

# Every row of a --quick run, in order (docs/gpu_report.md lists them).
QUICKSTART = ["gradient only (floor)", "SGLD h=0.1", "SGHMC eps=0.25",
              "AMAGOLD eps=0.25 T=10"]
CHAIN_KERNELS = ["gradient only (floor)", "SGLD", "SGHMC",
                 "AMAGOLD T=10 minibatch M-H"]
QUICK_CHAINS = [1, 64]
KERAS = ["SGD", "SGHMC", "SGLD", "AMAGOLD T=10 exact M-H",
         "AMAGOLD T=10 minibatch M-H", "SGD mixed_float16",
         "SGHMC mixed_float16", "SGD mixed_bfloat16", "SGHMC mixed_bfloat16"]
MIRRORED = ["SGD, MirroredStrategy", "SGHMC, MirroredStrategy"]


def quick_rows():
  return ([("device", "device")] +
          [("quickstart", n) for n in QUICKSTART] +
          [("chains", f"{k}, {c} chain{'' if c == 1 else 's'}")
           for k in CHAIN_KERNELS for c in QUICK_CHAINS] +
          [("keras", n) for n in KERAS] +
          [("mirrored", n) for n in MIRRORED])


def _spread(s):
  assert set(s) == {"median", "min", "max", "n"}, s
  assert s["n"] >= 1
  assert all(math.isfinite(s[k]) and s[k] > 0
             for k in ("median", "min", "max")), s
  assert s["min"] <= s["median"] <= s["max"], s


def _check_timed_row(row):
  _spread(row["time"])
  assert row["time_unit"] in ("us per gradient", "us per step",
                              "ms per epoch"), row
  assert "peak_memory_bytes" in row, row
  peak = row["peak_memory_bytes"]
  assert peak is None or (isinstance(peak, int) and peak > 0), row
  assert "goal" in row and "goal_met" in row, row
  if row["ratio"] is None:
    assert row["ratio_to"] is None, row
  else:
    _spread(row["ratio"])
    assert isinstance(row["ratio_to"], str), row
  if row["goal"] is not None:
    assert row["goal_met"] == (row["ratio"]["median"] <= row["goal"]), row


def test_quick_report_writes_every_row_and_prints_the_table(tmp_path):
  out = tmp_path / "report.json"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [REPO, os.environ.get("PYTHONPATH", "")]))
  # No budget here: a loaded CI machine must not skip rows (the budget has
  # its own test below).
  run = subprocess.run([sys.executable, SCRIPT, "--quick", "--out", str(out),
                        "--budget-s", "1e9"],
                       capture_output=True, text=True, env=env, timeout=600,
                       cwd=str(tmp_path))
  assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
  report = json.loads(out.read_text())
  assert report["complete"] is True and report["settings"]["quick"] is True
  for key in ("device", "data", "goals", "settings", "rows",
              "table_markdown", "machine", "date", "elapsed_s", "cpu_s"):
    assert key in report, key
  assert report["goals"] == {"keras: SGHMC": 1.05,
                             "keras: AMAGOLD T=10 exact M-H": 1.3,
                             "chains: 4096": 2.0}
  rows = report["rows"]
  assert [(r["section"], r["name"]) for r in rows] == quick_rows()
  # At tiny sizes on the CPU nothing is skipped and nothing fails.
  problems = [(r["name"], r.get("error") or r.get("reason")) for r in rows
              if r["status"] != "ok"]
  assert not problems, problems
  assert all(r["elapsed_s"] >= 0 for r in rows)

  device = rows[0]
  for key in ("device_name", "gpus", "tensorflow", "tfp", "keras",
              "gpu_details", "memory_info", "build", "summary"):
    assert key in device, key
  assert device["tensorflow"] == tf.__version__
  assert device["xla"]["compiled"] is True, device["xla"]
  assert report["device"]["device_name"] == device["device_name"]

  by = {(r["section"], r["name"]): r for r in rows}
  for row in rows[1:]:
    _check_timed_row(row)
  # Baselines have no ratio; every other row is divided by its baseline.
  for (section, name), row in by.items():
    baseline = (section == "device" or name == "gradient only (floor)" and
                section == "quickstart" or name.endswith(", 1 chain") or
                name in ("SGD", "SGD, MirroredStrategy"))
    if section != "device":
      assert (row["ratio"] is None) == baseline, (section, name)
  for k in CHAIN_KERNELS:
    assert by[("chains", f"{k}, 64 chains")]["ratio_to"] == "1 chain"
    assert by[("chains", f"{k}, 64 chains")]["chains"] == 64
  for name in QUICKSTART[1:]:
    assert by[("quickstart", name)]["ratio_to"] == "gradient-only floor"
  assert by[("quickstart", "AMAGOLD eps=0.25 T=10")]["gradients_per_step"] == 10
  for name in KERAS:
    row = by[("keras", name)]
    assert row["jit_compile"] is True, row
    assert row["first_epoch_s"] > 0
    assert row["policy"] == (name.split()[-1] if "mixed" in name
                             else "float32"), row
    if name != "SGD":
      assert row["ratio_to"] == "SGD"
  for policy in ("mixed_float16", "mixed_bfloat16"):
    row = by[("keras", f"SGHMC {policy}")]
    assert row["same_policy_sgd"] == f"SGD {policy}"
    _spread(row["ratio_to_same_policy_sgd"])
  for name in ("AMAGOLD T=10 exact M-H", "AMAGOLD T=10 minibatch M-H"):
    row = by[("keras", name)]
    assert 0. <= row["acceptance"] <= 1. and row["mh_tests"] >= 1, row
  assert by[("keras", "SGHMC")]["goal"] == 1.05
  assert by[("keras", "AMAGOLD T=10 exact M-H")]["goal"] == 1.3
  mirrored = by[("mirrored", "SGHMC, MirroredStrategy")]
  assert mirrored["ratio_to"] == "SGD, MirroredStrategy"
  assert len(mirrored["devices"]) == 2

  # The table: printed at the end, the same as the JSON's, one line a row.
  table = report["table_markdown"]
  assert table in run.stdout
  lines = table.splitlines()
  assert lines[0].startswith("| section | row | time |")
  assert len(lines) == 2 + len(rows)
  for line, row in zip(lines[2:], rows):
    assert line.startswith(f"| {row['section']} | {row['name']} |"), line
  # Progress: one line per row, with the elapsed time.
  for row in rows:
    assert f"] {row['section']}: {row['name']}: ok" in run.stdout, row


@pytest.fixture
def gpu_report():
  sys.path.insert(0, BENCH)
  try:
    import gpu_report as module  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.remove(BENCH)
  return module


class _Broken:
  """A kernel whose step cannot be built."""

  def bootstrap_results(self, state):
    del state
    return ()

  def one_step(self, state, results, seed):
    raise ValueError("this kernel is broken on purpose")


def test_a_failing_row_records_its_error_and_the_others_run(gpu_report,
                                                            tmp_path):
  import common  # pylint: disable=import-outside-toplevel
  problem = common.synthetic_logistic(n=200, d=3, batch_size=10)
  report = gpu_report.Report(str(tmp_path / "r.json"), {}, budget_s=600.)
  init = problem.init(2)
  gpu_report.timed_group(
      report, "chains", {
          "floor": (common.GradientOnly(problem.target()), init, 1, {}),
          "broken": (_Broken(), init, 1, {}),
          "floor again": (common.GradientOnly(problem.target()), init, 1, {}),
      }, target_s=0.002, repeats=1,
      ratio_of=lambda name: None if name == "floor" else "floor")
  rows = {r["name"]: r for r in report.rows}
  assert rows["broken"]["status"] == "error"
  assert "broken on purpose" in rows["broken"]["error"]
  assert rows["floor"]["status"] == rows["floor again"]["status"] == "ok"
  _spread(rows["floor again"]["ratio"])
  # The file on disk already holds the rows, marked incomplete.
  saved = json.loads((tmp_path / "r.json").read_text())
  assert saved["complete"] is False and len(saved["rows"]) == 3


def test_a_spent_budget_skips_the_rows_left_with_the_reason(gpu_report,
                                                            tmp_path, capsys):
  out = tmp_path / "r.json"
  payload = gpu_report.main(["--budget-s", "0", "--out", str(out),
                             "--sections", "quickstart,keras"])
  rows = payload["rows"]
  assert rows[0]["section"] == "device" and rows[0]["status"] == "ok"
  cfg = gpu_report.FULL
  assert [(r["section"], r["name"]) for r in rows[1:]] == [
      rc for rc in gpu_report.expected_rows(cfg)]
  for r in rows[1:]:
    assert r["status"] == "skipped", r
    if r["section"] in ("quickstart", "keras"):
      assert r["reason"].startswith("budget of 0 s spent"), r
    else:
      assert r["reason"] == "not in --sections", r
  assert json.loads(out.read_text())["complete"] is True
  assert "| keras | SGHMC | - | - | - | - | skipped: budget of 0 s" in (
      capsys.readouterr().out)
