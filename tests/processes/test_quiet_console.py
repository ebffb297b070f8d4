"""A user's run prints none of TF's warnings about our code: no "Ignoring
Assert operator" (an assertion inside an XLA program), no retracing warning
from the examples, no "ignore seeds" warning (an unseeded draw under XLA).
Each runs in a fresh process with TF's C++ warnings shown, and its stderr is
read."""

import os
import subprocess
import sys

from support.paths import REPO, WORKERS

# TF's messages, as it words them.
NOISE = {
    "an assertion XLA drops": "Ignoring Assert operator",
    "a retracing warning": "triggered tf.function retracing",
    "an unseeded draw under XLA": "will ignore seeds",
    "a numpy runtime warning": "RuntimeWarning",
}


def run(args, tmp_path):
  # This checkout's package, whatever the working directory.
  path = os.pathsep.join([REPO] + [p for p in os.environ.get(
      "PYTHONPATH", "").split(os.pathsep) if p])
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", PYTHONPATH=path)
  proc = subprocess.run([sys.executable] + args, capture_output=True,
                        text=True, timeout=300, cwd=tmp_path, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def assert_quiet(stderr):
  heard = {what: [line for line in stderr.splitlines() if text in line]
           for what, text in NOISE.items()}
  heard = {what: lines for what, lines in heard.items() if lines}
  assert not heard, heard


def test_quickstart_prints_no_tf_warnings(tmp_path):
  proc = run([os.path.join(REPO, "examples", "quickstart.py"), "--out",
              str(tmp_path), "--steps", "2000"], tmp_path)
  assert "AMAGOLD eps 0.01 -> 85%" in proc.stdout
  # The C++ log is on: the check would see the lines it looks for.
  assert "W0000" in proc.stderr or "I0000" in proc.stderr or (
      "E0000" in proc.stderr), proc.stderr[-2000:]
  assert_quiet(proc.stderr)


def test_joint_distribution_chains_under_xla_print_no_tf_warnings(tmp_path):
  proc = run([os.path.join(WORKERS, "quiet_console_worker.py")], tmp_path)
  assert proc.stdout.strip() == "ok 1", proc.stdout
  assert_quiet(proc.stderr)
