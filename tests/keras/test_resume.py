"""An interrupted `fit` with SamplingCallback + BackupAndRestore, restarted
with the same call, ends with the same weights, samples, running moments,
momentum, counters and burn-in optimizer state, bit for bit, as a run that
never stopped: interrupted by an exception in process, or killed with
SIGKILL in the middle of an epoch and resumed by a fresh process
(workers/keras_resume_worker.py holds the run). A backup of other sampler
settings is refused.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

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


@pytest.mark.parametrize("name", ["sghmc", "amagold_minibatch"])
def test_fit_interrupted_by_an_exception_resumes_bit_identically(name,
                                                                  tmp_path):
  # Interrupted in the middle of epoch 3 (of 6; burn-in is epochs 0-1), so
  # the callback's memory is 5 steps ahead of the epoch-3 backup and must
  # be rolled back to it, not continued from. SGHMC: splitting integrator
  # (variables half a drift ahead) with momentum resampling; AMAGOLD: the
  # minibatch test, whose host-side batch sampler must resume too, with
  # T = 3 trajectories that cross the epoch boundaries.
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


def _kill_and_resume(name, tmp_path):
  backup_dir, out = tmp_path / "backup", tmp_path / "resumed.npz"
  seed_file = tmp_path / "seed.json"
  # The sampler is built with seed=None: the seed drawn by the killed
  # process must be the one the resumed process continues with.
  killed = _run_worker(name, backup_dir, tmp_path / "never.npz", "--kill",
                       4, 2, "--seed-file", seed_file)
  assert killed.returncode == -9, killed.stderr[-3000:]
  assert not (tmp_path / "never.npz").exists()
  assert sorted(os.listdir(backup_dir / "sampling_callback")) == [
      "epoch_000003.npz", "epoch_000004.npz"]
  resumed = _run_worker(name, backup_dir, out)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  with open(seed_file) as f:
    seed = json.load(f)["seed"]
  expected = reference(name, seed, str(tmp_path / "reference"))
  with np.load(out) as data:
    got = {k: data[k] for k in data.files}
  assert_same_run(expected, got)
  return got


def test_amagold_killed_with_sigkill_resumes_bit_identically(tmp_path):
  # Exact AMAGOLD, killed (SIGKILL, nothing cleaned up) in epoch 4; a fresh
  # process resumes from the epoch-4 backups. The stored trajectory start,
  # momentum, energy accumulator, cached energy U(theta), test counters and
  # the kept samples come back; the reference run, in this process, ends
  # bit-identical.
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


def test_a_backup_from_other_sampler_settings_is_refused(tmp_path):
  backup_dir = str(tmp_path / "backup")
  model, sampling, backup = worker.build("sghmc", backup_dir, seed=1)
  with pytest.raises(RuntimeError, match="interrupted"):
    worker.fit(model, [sampling, backup, worker.Interrupt(3, 0, kill=False)])
  model, _, backup = worker.build("sghmc", backup_dir, seed=1)
  other = sgk.SamplingCallback(
      sgk.SGHMC(step_size=0.03, friction=5., integrator="splitting",
                momentum_resampling_period=7, seed=1),
      num_examples=worker.NUM_EXAMPLES, prior=1., burnin_epochs=2,
      thinning=4, backup_dir=backup_dir)
  with pytest.raises(ValueError, match="other settings.*step_size"):
    worker.fit(model, [other, backup])
