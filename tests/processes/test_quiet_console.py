"""A user's run prints none of TF's warnings about our code: no "Ignoring
Assert operator" (an assertion inside an XLA program), no retracing warning
from the examples, no "ignore seeds" warning (an unseeded draw under XLA).
Both run in one fresh process with TF's C++ warnings shown (the worker runs
its chain, then the example as `python` would), and each one's stderr is
read."""

import os
import re
import subprocess
import sys

import pytest

from support.paths import REPO, WORKERS

# What workers/quiet_console_worker.py prints to stderr before the script.
SCRIPT_MARK = "quiet_console_worker: running"

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
                        text=True, timeout=600, cwd=tmp_path, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def assert_quiet(stderr):
  heard = {what: [line for line in stderr.splitlines() if text in line]
           for what, text in NOISE.items()}
  heard = {what: lines for what, lines in heard.items() if lines}
  assert not heard, heard


@pytest.fixture(scope="module")
def console(tmp_path_factory):
  """(stdout, stderr) of the JointDistribution chain under XLA and of the
  quickstart run as a user runs it, from one process."""
  tmp_path = tmp_path_factory.mktemp("console")
  proc = run([os.path.join(WORKERS, "quiet_console_worker.py"),
              os.path.join(REPO, "examples", "quickstart.py"), "--out",
              str(tmp_path), "--steps", "2000"], tmp_path)
  assert proc.stderr.count(SCRIPT_MARK) == 1, proc.stderr[-3000:]
  worker_err, quickstart_err = proc.stderr.split(SCRIPT_MARK)
  worker_out, quickstart_out = proc.stdout.split("\n", 1)
  # The C++ log is on (for the whole process): the checks would see the
  # lines they look for.
  assert re.search(r"[WIE]0000", proc.stderr), proc.stderr[-2000:]
  return {"worker": (worker_out, worker_err),
          "quickstart": (quickstart_out, quickstart_err)}


def test_quickstart_prints_no_tf_warnings(console):
  stdout, stderr = console["quickstart"]
  assert "AMAGOLD eps 0.01 -> 85%" in stdout
  assert_quiet(stderr)


def test_joint_distribution_chains_under_xla_print_no_tf_warnings(console):
  stdout, stderr = console["worker"]
  assert stdout.strip() == "ok 1", stdout
  assert_quiet(stderr)
