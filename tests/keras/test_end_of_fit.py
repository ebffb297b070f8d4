"""A process killed anywhere in the end of a `fit` with SamplingCallback +
BackupAndRestore: the callback's final state, Keras' clean-up (which
deletes `backup_dir` with `shutil.rmtree`, in the order the file system
lists it, so SamplingCallback's folder can go first or last) and the
user's `save`. Whatever it leaves, the same call again runs no epoch and
ends with the finished run's weights, samples, moments and counters, bit
for bit. Each state a listing order can leave is built here, not only
the order of this machine's file system. A chain stopped by a divergence
is a finished fit too.
"""

import itertools
import os
import shutil
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest

import tfp_sgmcmc.keras as sgk
from support.paths import WORKERS
from workers import keras_resume_worker as worker

KERAS_FILES = ("latest.weights.h5", "training_metadata.json")


def assert_same_run(expected, got):
  assert sorted(expected) == sorted(got)
  for key in expected:
    np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


class _Snapshot(keras.callbacks.BackupAndRestore):
  """BackupAndRestore that copies `backup_dir` and the finished state
  beside it to `into` just before its clean-up."""

  def __init__(self, backup_dir, into):
    super().__init__(backup_dir)
    self.into = into

  def on_train_end(self, logs=None):
    shutil.copytree(self.backup_dir, os.path.join(self.into, "backup"))
    shutil.copy(self.backup_dir + ".sampling_callback.npz",
                os.path.join(self.into, "final.npz"))
    super().on_train_end(logs)


def clean_up_states(epoch_files):
  """The sets of paths (relative to backup_dir) that `rmtree` may have
  removed when killed: any of Keras' two files, and SamplingCallback's
  folder untouched, part of it or all of it removed (its files in either
  order, then the folder); None: backup_dir itself gone."""
  ours = [()] + [(f"sampling_callback/{f}",) for f in epoch_files] + [
      tuple(f"sampling_callback/{f}" for f in epoch_files),
      tuple(f"sampling_callback/{f}" for f in epoch_files) +
      ("sampling_callback",)]
  keras_removed = [c for k in range(3)
                   for c in itertools.combinations(KERAS_FILES, k)]
  return [k + o for k in keras_removed for o in ours] + [None]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
  """A finished 6-epoch SGHMC fit: its result, and copies of its backup
  and final state as they were when Keras' clean-up began."""
  tmp = tmp_path_factory.mktemp("finished")
  backup_dir = str(tmp / "run")
  model, sampling, _ = worker.build("sghmc", backup_dir, seed=5)
  worker.fit(model, [sampling, _Snapshot(backup_dir, str(tmp))])
  return worker.result(model, sampling), tmp


def restart(backup_dir):
  """The same call in a fresh process: a new model and callback."""
  model, sampling, backup = worker.build("sghmc", backup_dir, seed=5)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # Which one: below.
    history = worker.fit(model, [sampling, backup])
  return len(history.history.get("loss", [])), worker.result(model, sampling)


def test_every_state_a_clean_up_order_leaves_hands_back_the_finished_run(
    finished, tmp_path):
  # A copied final state stands for one written by a process that was
  # killed: this process did not write it.
  expected, snapshot = finished
  epoch_files = sorted(os.listdir(snapshot / "backup" / "sampling_callback"))
  assert epoch_files == ["epoch_000005.npz", "epoch_000006.npz"]
  states = clean_up_states(epoch_files)
  assert len(states) == 21
  # And a kill before the final state was written: the backup is whole.
  for k, removed in enumerate(states + ["no final state"]):
    backup_dir = str(tmp_path / f"state{k}" / "backup")
    shutil.copytree(snapshot / "backup", backup_dir)
    if removed != "no final state":
      shutil.copy(snapshot / "final.npz",
                  backup_dir + ".sampling_callback.npz")
    if removed is None:
      shutil.rmtree(backup_dir)
    elif removed != "no final state":
      for path in removed:
        (os.rmdir if path == "sampling_callback" else os.remove)(
            os.path.join(backup_dir, path))
    epochs_run, got = restart(backup_dir)
    assert epochs_run == 0, (removed, epochs_run)
    assert_same_run(expected, got)


def test_a_new_fit_in_the_process_that_finished_starts_over(finished,
                                                            tmp_path):
  # The process that finished a fit had its samples in memory: a new
  # callback on the same backup_dir afterwards starts a new chain, as
  # BackupAndRestore does, and its normal end removes the finished state.
  from tfp_sgmcmc.keras.fit import keras_files  # pylint: disable=g-import-not-at-top
  expected, _ = finished
  backup_dir = str(tmp_path / "backup")
  for runs in (6, 6):
    model, sampling, backup = worker.build("sghmc", backup_dir, seed=5)
    history = worker.fit(model, [sampling, backup])
    assert len(history.history["loss"]) == runs
    assert_same_run(expected, worker.result(model, sampling))
  final = backup_dir + ".sampling_callback.npz"
  assert os.path.exists(final)
  keras_files._remove_finished_states_at_exit()  # pylint: disable=protected-access
  assert not os.path.exists(final)


def _diverging(backup_dir, keras_backup):
  # |theta| > 0.9 counts as divergence: the chain stops in epoch 4.
  model, _, _ = worker.build("sghmc", backup_dir, seed=5)
  sampling = sgk.SamplingCallback(
      worker.make_sampler("sghmc", 5), num_examples=worker.NUM_EXAMPLES,
      prior=1., burnin_epochs=2, thinning=4, max_samples=25,
      backup_dir=backup_dir, max_abs_weight=0.9)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    try:
      worker.fit(model, [sampling, keras_backup(backup_dir)])
    except RuntimeError as e:
      assert "killed during clean-up" in str(e)
  assert "diverged at epoch 4" in sampling.divergence["message"]
  return worker.result(model, sampling), sampling.divergence["message"]


class _CleanUpKilled(keras.callbacks.BackupAndRestore):
  """A clean-up cut short after SamplingCallback's folder went first."""

  def on_train_end(self, logs=None):
    shutil.rmtree(os.path.join(self.backup_dir, "sampling_callback"))
    raise RuntimeError("killed during clean-up")


def test_a_chain_stopped_by_divergence_survives_a_killed_clean_up(tmp_path):
  # on_divergence="stop" ends the fit normally; its clean-up killed after
  # our folder, the same call resumes from the last backup (before the
  # divergence) and stops at the same step with the same samples, where
  # it raised "no readable state" at every restart.
  expected, message = _diverging(str(tmp_path / "ref"),
                                 keras.callbacks.BackupAndRestore)
  backup_dir = str(tmp_path / "backup")
  _diverging(backup_dir, _CleanUpKilled)
  got, again = _diverging(backup_dir, keras.callbacks.BackupAndRestore)
  assert again == message
  assert_same_run(expected, got)


def _script(backup_dir, end):
  return (
      "import sys; sys.path.insert(0, sys.argv[1])\n"
      "from workers import keras_resume_worker as worker\n"
      f"model, sampling, backup = worker.build('sghmc', {backup_dir!r}, 5)\n"
      "worker.fit(model, [sampling, backup])\n" + end)


@pytest.mark.parametrize("end, kept", [("", False),
                                       ("raise RuntimeError('user')", True)])
def test_a_process_ending_normally_removes_the_finished_state(end, kept,
                                                              tmp_path):
  # Without `save`: a normal end (the samples were in memory) removes the
  # finished state, so the script run again starts a new fit; an end by an
  # uncaught exception keeps it for the next fit to hand back.
  backup_dir = str(tmp_path / "backup")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  done = subprocess.run(
      [sys.executable, "-c", _script(backup_dir, end),
       os.path.dirname(WORKERS)], env=env, capture_output=True, text=True,
      timeout=300, check=False)
  assert (done.returncode != 0) == kept, done.stderr[-3000:]
  assert not os.path.exists(backup_dir)
  assert os.path.exists(backup_dir + ".sampling_callback.npz") == kept


def _run_worker(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run(
      [sys.executable, os.path.join(WORKERS, "keras_resume_worker.py"),
       *map(str, args)], env=env, capture_output=True, text=True,
      timeout=300, check=False)


@pytest.mark.parametrize("point", ["replace:never.npz.posterior",
                                   "unlink:backup.sampling_callback.npz"])
def test_a_kill_between_clean_up_and_save_hands_back_the_run(point, finished,
                                                             tmp_path):
  # Killed (SIGKILL) after BackupAndRestore deleted backup_dir, before the
  # user's `save` wrote its file, or after it and before the finished state
  # was removed: the same call afterwards runs no epoch and saves the
  # finished run. It runs here, as restart() does: this process did not
  # write the finished state, as a fresh one would not have.
  expected, _ = finished
  backup_dir = tmp_path / "backup"
  killed = _run_worker("sghmc", backup_dir, tmp_path / "never.npz", "--seed",
                       5, "--kill-point", point, "--arm-epoch", 5)
  assert killed.returncode == -9, killed.stderr[-3000:]
  assert not backup_dir.exists()
  model, sampling, backup = worker.build("sghmc", str(backup_dir), seed=5)
  with pytest.warns(RuntimeWarning,
                    match="finished, and its process ended before `save`"):
    history = worker.fit(model, [sampling, backup])
  sampling.save(str(tmp_path / "resumed.posterior.npz"))  # The user's save.
  assert len(history.history.get("loss", [])) == 0
  assert_same_run(expected, worker.result(model, sampling))
  assert not backup_dir.exists()
  assert not os.path.exists(f"{backup_dir}.sampling_callback.npz")
