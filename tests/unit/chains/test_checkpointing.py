"""save_chain is durable (the file, then its directory, fsynced), removes
stale temporaries of killed writers, and a failed write leaves the old
checkpoint and no temporary; load_chain reads back the same state.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import _files as files
from tfp_sgmcmc.chains import checkpointing


def dead_writers_temporary(path):
  """The name a writer that no longer runs gave its temporary of `path`."""
  dead = subprocess.Popen([sys.executable, "-c", ""])
  dead.wait()
  return files.temporary_name(path).replace(
      f"-{os.getpid()}-", f"-{dead.pid}-")


def quadratic(x):
  return 0.5 * tf.reduce_sum(x ** 2, -1)


def test_save_chain_is_durable_and_cleans_up(tmp_path, monkeypatch):
  kernel = sg.SGLD(sg.NoisyGradientTarget(quadratic, 1.), 0.1)
  state = tf.ones([2, 3])
  results = kernel.bootstrap_results(state)
  path = str(tmp_path / "chain.npz")
  # A stale temporary of a killed writer of this host is removed by the
  # next save.
  with open(dead_writers_temporary(path), "wb") as f:
    f.write(b"partial")
  synced = []
  real_fsync = os.fsync
  monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd),
                                               real_fsync(fd)))
  sg.save_chain(path, state, results)
  assert len(synced) >= 2  # The file, then its directory.
  assert sorted(os.listdir(tmp_path)) == ["chain.npz"]
  s2, r2 = sg.load_chain(path, results, state)
  np.testing.assert_array_equal(s2, state)
  # A failed write leaves the old checkpoint and no temporary.
  monkeypatch.setattr(np, "savez", lambda *a, **k: 1 / 0)
  with pytest.raises(ZeroDivisionError):
    sg.save_chain(path, state + 1., results)
  assert sorted(os.listdir(tmp_path)) == ["chain.npz"]
  np.testing.assert_array_equal(sg.load_chain(path, results, state)[0], state)


def test_a_step_seeded_kernel_is_named_as_in_earlier_checkpoints():
  # Files saved with kernel=StepSeeded(...) store this class name; another
  # would refuse them as written by another kernel.
  kernel = sg.StepSeeded(sg.SGLD(sg.NoisyGradientTarget(
      lambda x: tf.reduce_sum(x ** 2, -1), 1.), step_size=0.1), [1, 2])
  assert checkpointing.kernel_summary(kernel)["class"] == (
      "tfp_sgmcmc.chains.checkpointing.StepSeeded")
