"""Long runs in constant memory, measured in fresh processes: a million-step
chain with running moments (workers/memory_worker.py) and a chain continued
by repeated sample_moments calls (workers/continuation_worker.py, run in
the memory worker's 1e5-step process) do not grow resident memory.
"""

import os
import subprocess
import sys

from support.paths import WORKERS


def run_worker(*args):
  proc = subprocess.run(
      [sys.executable, os.path.join(WORKERS, "memory_worker.py"), *args],
      capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return [dict(f.split("=") for f in line.split())
          for line in proc.stdout.strip().splitlines()]


def test_long_chains_and_continued_chains_have_constant_memory():
  # One test, so that the continued chain runs in the process of the
  # 1e5-step chain (after its peak is read) and the two claims pay for one
  # fresh process less.
  #
  # Peak resident memory of a fresh process running 1e5 and 1e6 steps of
  # 8 chains x 10 parameters. Keeping the 1e6 draws would need 320 MB more;
  # running moments must need (almost) nothing more. Measured on the dev
  # machine: 904 MB and 902 MB peak.
  short, continued = run_worker("1e5", "25")
  (long,) = run_worker("1e6")
  peaks = {"1e5": int(short["peak_kib"]), "1e6": int(long["peak_kib"])}
  for fields in (short, long):
    # The moments are those of a real chain (SGHMC's variance is about 1).
    assert 0.9 < float(fields["mean_variance"]) < 1.2
  print("peak KiB", peaks)
  assert peaks["1e6"] - peaks["1e5"] < 50 * 1024

  # The process continues one chain with 25 calls of
  # sample_moments(previous_kernel_results=...), 200 steps each. Before the
  # fix each call built a new tf.function: RSS grew 923 -> 1,389 MB over 40
  # calls (11.7 MB per call). Now the compiled loop is reused: measured
  # 886,092 -> 886,116 KiB over the same 40 calls.
  growth_mib = (int(continued["rss_last_kib"]) -
                int(continued["rss_first_kib"])) / 1024
  print("RSS growth over 20 calls, MiB:", growth_mib)
  # 20 calls at the old 11.7 MB each would be 234 MB.
  assert growth_mib < 20., growth_mib
  # The moments are those of a real chain (SGHMC's variance is about 1).
  assert 0.85 < float(continued["mean_variance"]) < 1.15
