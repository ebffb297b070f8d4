"""An interrupted `fit` with SamplingCallback + BackupAndRestore, restarted
with the same call, ends with the same weights, samples, running moments,
momentum, counters and burn-in optimizer state, bit for bit, as a run that
never stopped: interrupted by an exception in process, or killed with
SIGKILL in the middle of an epoch (workers/keras_resume_worker.py holds
the run) and resumed from what it left on disk. A backup of other sampler
settings is refused. Keras' backup files out of step with ours (a kill
before any file operation, a bit flip, a clean-up cut short) resume from a
consistent state, and a finished run's samples outlive the clean-up.
"""

import json
import os
import shutil
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc.keras as sgk
from support.paths import WORKERS
from workers import keras_resume_worker as worker


def assert_same_run(expected, got):
  assert sorted(expected) == sorted(got)
  for key in expected:
    np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def reference(name, seed, backup_dir):
  model, sampling, backup = worker.build(name, backup_dir, seed)
  worker.fit(model, [sampling, backup])
  # A healthy run is untouched by the divergence check: every epoch ran
  # and every thinning-th transition was kept.
  assert sampling.divergence is None
  assert len(sampling.samples) == min(
      25, sampling.posterior.num_transitions // sampling.thinning)
  assert not os.path.exists(backup_dir)  # BackupAndRestore cleaned up.
  return worker.result(model, sampling)


@pytest.mark.parametrize("name", ["sghmc", "amagold_minibatch",
                                  "amagold_warmup"])
def test_fit_interrupted_by_an_exception_resumes_bit_identically(name,
                                                                  tmp_path):
  # Interrupted in the middle of epoch 3 (of 6; burn-in is epochs 0-1), so
  # the callback's memory is 5 steps ahead of the epoch-3 backup and must
  # be rolled back to it, not continued from. SGHMC: splitting integrator
  # (variables half a drift ahead) with momentum resampling; AMAGOLD: the
  # minibatch test, whose host-side batch sampler must resume too, with
  # T = 3 trajectories that cross the epoch boundaries; AMAGOLD's warm-up:
  # the backup falls inside a slow window of the mass's estimate, and the
  # resumed run passes the window's end (a new mass, the step size's
  # restart) and the warm-up's.
  expected = reference(name, 5, str(tmp_path / "reference"))
  backup_dir = str(tmp_path / "backup")
  model, sampling, backup = worker.build(name, backup_dir, seed=5)
  interrupt = worker.Interrupt(3, 4, kill=False)
  with pytest.raises(RuntimeError, match="interrupted"):
    worker.fit(model, [sampling, backup, interrupt])
  ahead = sampling.sampler.step_count
  with np.load(os.path.join(backup_dir, "sampling_callback",
                            "epoch_000003.npz")) as data:
    at_backup = json.loads(str(data["header"]))["sampler_steps"]
  assert ahead == at_backup + 5
  history = worker.fit(model, [sampling, backup, interrupt])
  assert len(history.history["loss"]) == 3  # Epochs 3, 4, 5 only.
  assert_same_run(expected, worker.result(model, sampling))


def _run_worker(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run(
      [sys.executable, os.path.join(WORKERS, "keras_resume_worker.py"),
       *map(str, args)], env=env, capture_output=True, text=True,
      timeout=300, check=False)


def _resume_here(name, backup_dir, seed=None):
  """The killed script's call again, in this process: a new model and
  callback on `backup_dir` and the user's save after `fit`, as
  keras_resume_worker.py's main runs it. (The state on disk is all it has:
  this process never wrote it.) Returns (result, epochs run, the warnings'
  text)."""
  model, sampling, backup = worker.build(name, str(backup_dir), seed)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    history = worker.fit(model, [sampling, backup])
  sampling.save(f"{backup_dir}.resumed.posterior.npz")
  return (worker.result(model, sampling),
          len(history.history.get("loss", [])),
          "\n".join(str(w.message) for w in caught))


def _kill_and_resume(name, tmp_path):
  backup_dir = tmp_path / "backup"
  seed_file = tmp_path / "seed.json"
  # The sampler is built with seed=None: the seed drawn by the killed
  # process must be the one the resumed process continues with.
  killed = _run_worker(name, backup_dir, tmp_path / "never.npz", "--kill",
                       4, 2, "--seed-file", seed_file)
  assert killed.returncode == -9, killed.stderr[-3000:]
  assert not (tmp_path / "never.npz").exists()
  assert sorted(os.listdir(backup_dir / "sampling_callback")) == [
      "epoch_000003.npz", "epoch_000004.npz"]
  # Built with seed=None again: the seed comes from the backup.
  got, _, _ = _resume_here(name, backup_dir)
  with open(seed_file) as f:
    seed = json.load(f)["seed"]
  expected = reference(name, seed, str(tmp_path / "reference"))
  assert_same_run(expected, got)
  return got


def test_amagold_killed_with_sigkill_resumes_bit_identically(tmp_path):
  # Exact AMAGOLD, killed (SIGKILL, nothing cleaned up) in epoch 4; a new
  # model and callback resume from the epoch-4 backups. The stored
  # trajectory start, momentum, energy accumulator, cached energy U(theta),
  # test counters and the kept samples come back; the reference run, in
  # this process, ends bit-identical.
  got = _kill_and_resume("amagold", tmp_path)
  assert 0 < int(got["num_accepted"]) < int(got["num_tests"]) == 13


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sghmc", "sgnht"])
def test_other_samplers_killed_with_sigkill_resume_bit_identically(
    name, tmp_path):
  # `_kill_and_resume` asserts the bit-identical match with a reference
  # run; here, also that the resumed run kept samples and moved.
  got = _kill_and_resume(name, tmp_path)
  assert int(got["num_transitions"]) > 0 and "samples_0" in got
  assert "momentum_0" in got and np.any(got["momentum_0"] != 0)


def _interrupted_sghmc(tmp_path):
  """An SGHMC fit interrupted after epoch 3, with its backup: the backup
  directory, and a new model and BackupAndRestore to resume it."""
  backup_dir = str(tmp_path / "backup")
  model, sampling, backup = worker.build("sghmc", backup_dir, seed=1)
  with pytest.raises(RuntimeError, match="interrupted"):
    worker.fit(model, [sampling, backup, worker.Interrupt(3, 0, kill=False)])
  model, _, backup = worker.build("sghmc", backup_dir, seed=1)
  return backup_dir, model, backup


def test_a_backup_from_other_sampler_settings_is_refused(tmp_path):
  backup_dir, model, backup = _interrupted_sghmc(tmp_path)
  other = sgk.SamplingCallback(
      sgk.SGHMC(step_size=0.03, friction=5., integrator="splitting",
                momentum_resampling_period=7, seed=1),
      num_examples=worker.NUM_EXAMPLES, prior=1., burnin_epochs=2,
      thinning=4, backup_dir=backup_dir)
  with pytest.raises(ValueError, match="other settings.*step_size"):
    worker.fit(model, [other, backup])


def test_a_backup_of_another_prior_is_refused(tmp_path):
  # The prior is the callback's, not the sampler's: resumed with another
  # one, the chain would go on sampling another posterior and keep its
  # samples beside the first one's. Refused with both values; a backup
  # written before the prior was recorded resumes unchecked.
  backup_dir, model, backup = _interrupted_sghmc(tmp_path)
  other = sgk.SamplingCallback(
      worker.make_sampler("sghmc", 1), num_examples=worker.NUM_EXAMPLES,
      prior=100., burnin_epochs=2, max_samples=25, thinning=4,
      backup_dir=backup_dir)
  with pytest.raises(ValueError, match=r"another posterior.*'prior'.*"
                     r"'scale': 1\.0.*'scale': 100\.0"):
    worker.fit(model, [other, backup])
  assert other.samples == []  # Nothing kept from the refused backup.
  for name in os.listdir(os.path.join(backup_dir, "sampling_callback")):
    path = os.path.join(backup_dir, "sampling_callback", name)
    with np.load(path) as data:
      arrays = {k: data[k] for k in data.files}
    header = json.loads(str(arrays["header"]))
    del header["posterior"]
    arrays["header"] = np.array(json.dumps(header))
    np.savez(path, **arrays)
  model, sampling, backup = worker.build("sghmc", backup_dir, seed=1)
  history = worker.fit(model, [sampling, backup])
  assert len(history.history["loss"]) == 3  # Resumed after epoch 3.


def _gaussian_prior(scale):
  return lambda weights: tf.add_n(
      [tf.reduce_sum(-0.5 * (w / scale) ** 2) for w in weights])


def test_a_backup_of_another_prior_function_of_the_same_name_is_refused(
    tmp_path):
  # Two closures of one function share a module and a qualified name, so
  # the name alone let a resume with scale 100 go on from scale 1's chain.
  # Their values at the backup's weights tell them apart; the same prior
  # (a new closure, as a new process makes) resumes.
  backup_dir = str(tmp_path / "backup")

  def sampling(scale):
    return sgk.SamplingCallback(
        worker.make_sampler("sghmc", 1), num_examples=worker.NUM_EXAMPLES,
        prior=_gaussian_prior(scale), burnin_epochs=2, max_samples=25,
        thinning=4, backup_dir=backup_dir)
  model, _, backup = worker.build("sghmc", backup_dir, seed=1)
  with pytest.raises(RuntimeError, match="interrupted"):
    worker.fit(model, [sampling(1.), backup,
                       worker.Interrupt(3, 0, kill=False)])
  model, _, backup = worker.build("sghmc", backup_dir, seed=1)
  with pytest.raises(ValueError, match=r"another posterior.*'prior_value'"):
    worker.fit(model, [sampling(100.), backup])
  model, _, backup = worker.build("sghmc", backup_dir, seed=1)
  history = worker.fit(model, [sampling(1.), backup])
  assert len(history.history["loss"]) == 3  # Resumed after epoch 3.


def test_a_prior_value_summed_in_another_order_is_the_same_prior():
  # Another machine may sum the float32 log prior over the weights in
  # another order: its last digits move, and the resume must not be
  # refused for that; scale 1 against 1.1 of N(0, scale^2) moves it 17%.
  from tfp_sgmcmc.keras.fit import backup  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  w = rng.normal(size=535_000).astype(np.float32)
  value = -0.5 * np.sum(w ** 2)
  # One term after another (numpy's sum is pairwise): 1.7e-4 apart.
  other_order = -0.5 * np.cumsum(w ** 2, dtype=np.float32)[-1]
  assert value != other_order
  assert backup._same_setting("prior_value", float(value), float(other_order))
  assert not backup._same_setting("prior_value", float(value),
                                  float(value) / 1.1 ** 2)
  assert backup._same_setting("prior", "a", "a") and not (
      backup._same_setting("prior", "a", "b"))


def test_a_backup_of_other_energy_data_is_refused(tmp_path):
  # Exact AMAGOLD caches U(theta), a sum over `energy_data`: resumed with
  # other examples (the same N), its next test would weigh a proposal's
  # energy on the new data against the old data's U(theta). Refused with
  # both digests; the same data resumes.
  backup_dir = str(tmp_path / "backup")
  model, sampling, backup = worker.build("amagold", backup_dir, seed=1)
  with pytest.raises(RuntimeError, match="interrupted"):
    worker.fit(model, [sampling, backup, worker.Interrupt(3, 0, kill=False)])
  x, y = worker.data()
  model, _, backup = worker.build("amagold", backup_dir, seed=1)
  other = sgk.SamplingCallback(
      worker.make_sampler("amagold", 1), num_examples=worker.NUM_EXAMPLES,
      prior=1., burnin_epochs=2, max_samples=25, thinning=1,
      backup_dir=backup_dir, energy_data=(x, y + 1.), energy_batch_size=20)
  with pytest.raises(ValueError, match=r"another posterior.*'energy_data': "
                     r"\('[0-9a-f]{64}', '[0-9a-f]{64}'\)"):
    worker.fit(model, [other, backup])
  assert other.samples == []
  model, sampling, backup = worker.build("amagold", backup_dir, seed=1)
  history = worker.fit(model, [sampling, backup])
  assert len(history.history["loss"]) == 3  # Resumed after epoch 3.


# --- Keras' files out of step with ours ------------------------------------
# SamplingCallback's files (CRC-checked, atomic, with a digest of the
# weights) are the source of truth; Keras' latest.weights.h5 and
# training_metadata.json are written after them, in place. Whatever a kill
# leaves, the restart resumes from a consistent state and ends bit-identical.


@pytest.fixture(scope="module")
def sghmc_reference(tmp_path_factory):
  return reference("sghmc", 5, str(tmp_path_factory.mktemp("ref") / "b"))


def _interrupted(tmp_path, epoch=3):
  """An in-process fit stopped (an exception) in epoch `epoch`: the backups
  of epoch `epoch` (and the one before) are on disk."""
  backup_dir = str(tmp_path / "backup")
  model, sampling, backup = worker.build("sghmc", backup_dir, seed=5)
  with pytest.raises(RuntimeError, match="interrupted"):
    worker.fit(model, [sampling, backup, worker.Interrupt(epoch, 4,
                                                          kill=False)])
  return backup_dir, model, sampling, backup


def test_a_bit_flip_in_keras_weights_is_caught_by_the_digest(
    tmp_path, sghmc_reference):
  import h5py  # pylint: disable=g-import-not-at-top
  backup_dir, model, sampling, backup = _interrupted(tmp_path)
  weights = os.path.join(backup_dir, "latest.weights.h5")
  with h5py.File(weights, "r") as f:
    found = []
    f.visititems(lambda name, item: found.append(item.id.get_offset())
                 if isinstance(item, h5py.Dataset) and item.size else None)
  with open(weights, "r+b") as f:  # One bit of one stored weight.
    f.seek(found[0])
    byte = f.read(1)
    f.seek(found[0])
    f.write(bytes([byte[0] ^ 0x01]))
  with pytest.warns(RuntimeWarning, match="holds other weights than "
                    "SamplingCallback's state for epoch 3"):
    history = worker.fit(model, [sampling, backup])
  assert len(history.history["loss"]) == 3
  assert_same_run(sghmc_reference, worker.result(model, sampling))


def test_a_torn_keras_backup_without_metadata_resumes_from_ours(
    tmp_path, sghmc_reference):
  # Killed while Keras wrote its weights after our state, before its first
  # metadata: Keras would raise on the torn file at every restart.
  backup_dir, model, sampling, backup = _interrupted(tmp_path)
  os.remove(os.path.join(backup_dir, "training_metadata.json"))
  weights = os.path.join(backup_dir, "latest.weights.h5")
  with open(weights, "r+b") as f:
    f.truncate(os.path.getsize(weights) // 3)
  with pytest.warns(RuntimeWarning, match="missing.*Resuming from "
                    "SamplingCallback's complete state after epoch 3"):
    history = worker.fit(model, [sampling, backup])
  assert len(history.history["loss"]) == 3
  assert_same_run(sghmc_reference, worker.result(model, sampling))


def test_keras_files_without_a_state_of_ours_are_removed(tmp_path,
                                                         sghmc_reference):
  # Killed during the first backup, after Keras' weights (torn) but with no
  # state of ours: the restart starts over instead of raising every time.
  backup_dir = tmp_path / "backup"
  backup_dir.mkdir()
  (backup_dir / "latest.weights.h5").write_bytes(b"\x89HDF\r\n\x1a\n torn")
  model, sampling, backup = worker.build("sghmc", str(backup_dir), seed=5)
  with pytest.warns(RuntimeWarning, match=r"latest\.weights\.h5.*no state "
                    "of SamplingCallback.*starts from the beginning"):
    history = worker.fit(model, [sampling, backup])
  assert len(history.history["loss"]) == 6
  assert_same_run(sghmc_reference, worker.result(model, sampling))


class _CleanUpKilled(keras.callbacks.BackupAndRestore):
  """BackupAndRestore whose end-of-fit clean-up stops (as a kill would)
  after deleting SamplingCallback's folder and before its own files: the
  order of `rmtree` is the file system's."""

  def on_train_end(self, logs=None):
    shutil.rmtree(os.path.join(self.backup_dir, "sampling_callback"))
    raise RuntimeError("killed during clean-up")


def test_a_kill_during_keras_clean_up_keeps_the_finished_run(
    tmp_path, sghmc_reference):
  backup_dir = str(tmp_path / "backup")
  model, sampling, _ = worker.build("sghmc", backup_dir, seed=5)
  with pytest.raises(RuntimeError, match="killed during clean-up"):
    worker.fit(model, [sampling, _CleanUpKilled(backup_dir)])
  # A fresh process: a new model and callback, the same call.
  model, sampling, backup = worker.build("sghmc", backup_dir, seed=5)
  with pytest.warns(RuntimeWarning, match="previous fit .* finished, and "
                    "was killed while BackupAndRestore deleted its backup"):
    history = worker.fit(model, [sampling, backup])
  assert not history.history.get("loss")  # Nothing left to run.
  assert_same_run(sghmc_reference, worker.result(model, sampling))
  # Kept until the user's own save, then gone.
  final = backup_dir + ".sampling_callback.npz"
  assert os.path.exists(final) and not os.path.exists(backup_dir)
  sampling.save(tmp_path / "posterior.npz")
  assert not os.path.exists(final)


def test_a_kept_backup_resumes_as_usual_beside_the_finished_state(
    tmp_path, sghmc_reference):
  # BackupAndRestore(delete_checkpoint=False) keeps backup_dir: the same
  # call again resumes from it, silently, and runs no epoch.
  backup_dir = str(tmp_path / "backup")
  for runs in (6, 0):
    model, sampling, _ = worker.build("sghmc", backup_dir, seed=5)
    keep = keras.callbacks.BackupAndRestore(backup_dir,
                                            delete_checkpoint=False)
    with warnings.catch_warnings():
      warnings.simplefilter("error", RuntimeWarning)
      history = worker.fit(model, [sampling, keep])
    assert len(history.history.get("loss", [])) == runs
    assert_same_run(sghmc_reference, worker.result(model, sampling))


def _kill_point_and_resume(tmp_path, point, arm_epoch):
  backup_dir = tmp_path / "backup"
  killed = _run_worker("sghmc", backup_dir, tmp_path / "never.npz", "--seed",
                       5, "--kill-point", point, "--arm-epoch", arm_epoch)
  got, epochs_run, warned = _resume_here("sghmc", backup_dir, seed=5)
  # The user's save happened: nothing of the backup is left.
  assert not backup_dir.exists()
  assert not os.path.exists(f"{backup_dir}.sampling_callback.npz")
  return killed.returncode == -9, got, epochs_run, warned


def test_a_kill_between_keras_weights_and_metadata_resumes_the_newer_pair(
    tmp_path, sghmc_reference):
  # At the end of epoch 4: ours and Keras' weights written, Keras'
  # metadata still says 3. The weights and our state of epoch 4 are a
  # consistent pair: the run resumes after epoch 4, not 3-with-4's-weights.
  killed, got, epochs_run, warned = _kill_point_and_resume(
      tmp_path, "open:training_metadata.json", 3)
  assert killed
  assert "holds the weights after epoch 4 but its metadata says 3" in warned
  assert epochs_run == 2
  assert_same_run(sghmc_reference, got)


# Its in-process twin (a clean-up cut short by an exception) runs in CI.
@pytest.mark.slow
def test_a_kill_at_the_end_of_keras_clean_up_keeps_the_samples(
    tmp_path, sghmc_reference):
  # Everything in backup_dir deleted but the folder: the finished run's
  # state waits beside it and the restart runs no epoch.
  killed, got, epochs_run, _ = _kill_point_and_resume(
      tmp_path, "rmdir:backup", 5)
  assert killed and epochs_run == 0
  assert_same_run(sghmc_reference, got)


@pytest.mark.slow
@pytest.mark.parametrize("arm_epoch, points", [(0, 12), (4, 60)])
def test_a_kill_before_any_file_operation_resumes_bit_identically(
    arm_epoch, points, tmp_path, sghmc_reference):
  # Every file operation in turn from the end of epoch `arm_epoch` on (the
  # first epoch's backups; the last two epochs' and the clean-up), until a
  # run ends unkilled.
  for k in range(1, points + 1):
    killed, got, _, _ = _kill_point_and_resume(tmp_path / str(k), k,
                                               arm_epoch)
    assert_same_run(sghmc_reference, got)
    if not killed:
      break
