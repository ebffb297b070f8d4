"""benchmarks/golden_streams.py and golden_compare.py: the record of the
random streams that a refactor checks it leaves alone is the same run to
run, and the comparison flags one changed bit."""

import os
import subprocess
import sys

import numpy as np

from support import paths


def _record(path):
  env = dict(os.environ, PYTHONPATH=paths.REPO)
  subprocess.run([sys.executable, os.path.join(
      paths.BENCHMARKS, "golden_streams.py"), str(path), "--only",
                  "random/,target/InMemory"], check=True, env=env,
                 capture_output=True)


def test_a_record_is_the_same_run_to_run_and_a_changed_bit_is_flagged(
    tmp_path):
  first, second = tmp_path / "a.npz", tmp_path / "b.npz"
  _record(first)
  _record(second)
  compare = paths.benchmark("golden_compare")
  assert compare.main([str(first), str(second), "--quiet"]) == 0
  with np.load(first) as f:
    arrays = dict(f)
  key = next(k for k, v in arrays.items() if v.dtype.kind == "f" and v.size)
  flipped = arrays[key].copy()
  flat = flipped.reshape(-1)
  flat[0] = np.nextafter(flat[0], np.inf)
  arrays[key] = flipped
  np.savez(tmp_path / "c.npz", **arrays)
  assert compare.main([str(first), str(tmp_path / "c.npz"), "--quiet"]) != 0
