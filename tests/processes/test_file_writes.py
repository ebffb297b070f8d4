"""Files survive any crash: a process killed (SIGKILL) before each file
operation of `save_chain` or `Posterior.save` leaves the previous complete
file or the new one, never a torn one, and the next save removes the dead
writer's temporary; two processes saving to one path never delete each
other's temporaries (workers/kill_save_worker.py holds the writer).
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
import tfp_sgmcmc.keras as sgk
from support.paths import WORKERS

WORKER = os.path.join(WORKERS, "kill_save_worker.py")


def run_worker(what, path, spec):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([sys.executable, WORKER, what, str(path), str(spec)],
                        env=env, capture_output=True, text=True, timeout=300)


def version_of(what, path):
  """The version (1 or 2) of the complete file at `path`; raises if torn."""
  if what == "posterior":
    posterior = sgk.Posterior.load(path)
    value = posterior.samples[0]
    assert np.all(value == value.flat[0])
    assert posterior.num_transitions == value.flat[0]
    return int(value.flat[0])
  kernel = sg.StepSeeded(sg.SGLD(sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2, -1), 1.), 0.1), seed=[1, 2])
  init = tf.zeros([2, 3])
  state, _ = sg.load_chain(path, kernel.bootstrap_results(init), init,
                           kernel=kernel)
  return int(state.numpy().flat[0])


def kill_before(what, tmp_path, spec):
  """Kills the second save before operation `spec`; returns what the file
  holds and whether the kill happened."""
  path = tmp_path / f"{what}.npz"
  proc = run_worker(what, path, spec)
  assert proc.returncode in (0, -9), proc.stderr[-3000:]
  return version_of(what, path), proc.returncode == -9


@pytest.mark.parametrize("what", [
    "posterior", pytest.param("chain", marks=pytest.mark.slow)])
def test_a_kill_during_a_save_leaves_the_old_file_whole(what, tmp_path):
  # Killed at the first write of the new data: an in-place rewrite has
  # already truncated the old file; the atomic one has not touched it.
  version, killed = kill_before(what, tmp_path, "write:")
  assert killed
  assert version == 1
  # The dead writer's temporary is removed by the next save, and only it.
  leftovers = [n for n in os.listdir(tmp_path) if ".tmp-" in n]
  assert len(leftovers) == 1
  if what == "posterior":
    sgk.Posterior([np.zeros((1, 2))], ["w"]).save(tmp_path / f"{what}.npz")
  else:
    sg.save_chain(tmp_path / f"{what}.npz", tf.zeros([1]), ())
  assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


@pytest.mark.slow
@pytest.mark.parametrize("what", ["posterior", "chain"])
def test_a_kill_before_any_file_operation_leaves_a_whole_file(what,
                                                               tmp_path):
  # Every file operation of the second save in turn, until one run ends
  # unkilled: each leaves version 1 (before the rename) or 2 (after).
  seen = []
  for k in range(1, 200):
    directory = tmp_path / str(k)
    directory.mkdir()
    version, killed = kill_before(what, directory, k)
    seen.append(version)
    if not killed:
      break
  else:
    pytest.fail("the save never finished")
  assert seen[-1] == 2 and set(seen) == {1, 2}
  # Versions switch once, at the rename.
  assert seen == sorted(seen)


def test_two_writers_of_one_path_keep_each_others_temporaries(tmp_path):
  # Process 2 has written its temporary and is about to rename it when
  # process 1 (this one) saves to the same path: process 1 must not remove
  # the live writer's temporary, and both saves succeed.
  path = tmp_path / "chain.npz"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  other = subprocess.Popen([sys.executable, WORKER, "chain", str(path),
                            "pause"], env=env, stderr=subprocess.PIPE,
                           text=True)
  try:
    deadline = time.time() + 240
    while not os.path.exists(f"{path}.ready"):
      assert other.poll() is None, other.stderr.read()[-3000:]
      assert time.time() < deadline
      time.sleep(0.05)
    sg.save_chain(path, tf.zeros([2, 3]) + 7., ())
    with open(f"{path}.go", "w"):
      pass
    assert other.wait(timeout=120) == 0, other.stderr.read()[-3000:]
  finally:
    if other.poll() is None:
      other.kill()
  assert version_of("chain", path) == 2  # The other writer renamed last.
