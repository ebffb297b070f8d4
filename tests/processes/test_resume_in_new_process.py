"""Chains resume bit-identically in a new process: workers/resume_worker.py
runs 3k steps and a 2k-step checkpoint, a fresh process loads it and runs k
more, for every kernel (momentum, adaptation state, thermostat, noise
estimates, preconditioner, schedule position all in the saved results).
"""

import os
import subprocess
import sys

import numpy as np

from support.paths import WORKERS


WORKER = os.path.join(WORKERS, "resume_worker.py")


def test_chains_resume_bit_identically_in_a_new_process(tmp_path):
  # Process 1 runs 3k steps and, separately, 2k steps saved to disk;
  # process 2 loads the checkpoint and runs k more. Every kernel's resumed
  # k steps must equal steps 2k..3k of the uninterrupted run, bit for bit:
  # momentum, adaptation state, thermostat, noise estimates, preconditioner
  # and schedule position all live in the saved results.
  for mode in ("first", "resume"):
    proc = subprocess.run([sys.executable, WORKER, mode, str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
  from workers import resume_worker  # pylint: disable=g-import-not-at-top
  k = resume_worker.K
  for name in resume_worker.kernels():
    full = np.load(tmp_path / f"{name}_full.npy")
    resumed = np.load(tmp_path / f"{name}_resumed.npy")
    np.testing.assert_array_equal(resumed, full[2 * k:], err_msg=name)
    # And the chain really moved (the comparison is not between constants).
    assert np.std(full[2 * k:]) > 0, name
