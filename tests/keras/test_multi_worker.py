"""Keras fit across two worker processes with MultiWorkerMirroredStrategy
(workers/multi_worker_worker.py): SGHMC and exact AMAGOLD, the chain equal to a
single-process run with the same global batch, Posterior.save and
BackupAndRestore from the chief."""

import os
import socket
import subprocess
import sys

import numpy as np

import tfp_sgmcmc.keras as sgk
from support.paths import WORKERS

WORKER = os.path.join(WORKERS, "multi_worker_worker.py")
TIMEOUT = 240  # seconds per phase; about 20-40 s each on 2 quiet cores


def free_ports(n):
  sockets = [socket.socket() for _ in range(n)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def run_phase(out_dir, phase, with_single):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("TF_CONFIG", None)
  ports = [str(p) for p in free_ports(2)]
  commands = [[sys.executable, WORKER, out_dir, phase, "worker", str(i)] +
              ports for i in range(2)]
  if with_single:
    commands.append([sys.executable, WORKER, out_dir, phase, "single"])
  procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env) for c in commands]
  outputs = []
  try:
    for p in procs:
      outputs.append(p.communicate(timeout=TIMEOUT))
  finally:
    for p in procs:  # A hung collective must not outlive the test.
      if p.poll() is None:
        p.kill()
        p.communicate()
  for p, (out, err) in zip(procs, outputs):
    assert p.returncode == 0, (phase, out, err[-3000:])
  return [out for out, _ in outputs]


def test_fit_across_two_worker_processes_equals_one_process(tmp_path):
  out_dir = str(tmp_path)
  first = run_phase(out_dir, "first", with_single=True)
  # Both workers were interrupted in the AMAGOLD fit after epoch 4 and kept
  # their backups ...
  for out in first[:2]:
    assert "amagold interrupted after epoch 4 backup kept: True" in out, out
  # ... and fresh worker processes resume it from BackupAndRestore.
  run_phase(out_dir, "resume", with_single=False)
  for name in ("sghmc", "amagold"):
    w0, w1, single = (np.load(os.path.join(out_dir, f"{name}_{role}.npz"))
                      for role in ("worker0", "worker1", "single"))
    # Both workers hold bitwise the same weights and sampler state (the
    # same noise from the same all-reduced gradient) ...
    np.testing.assert_array_equal(w0["weights"], w1["weights"])
    np.testing.assert_array_equal(w0["sampler_state"], w1["sampler_state"])
    # ... and the chain is the one-process chain with the same global batch
    # (64 = 2 x 32), up to the rounding of the gradient's all-reduce; for
    # AMAGOLD across an interruption and a resume in new processes.
    assert np.max(np.abs(w0["weights"] - single["weights"])) < 1e-5
    assert w0["samples"].shape == single["samples"].shape
    assert np.max(np.abs(w0["samples"] - single["samples"])) < 1e-5
    assert np.max(np.abs(single["samples"][-1] - single["samples"][0])) > .1
    assert int(w0["tests"]) == int(single["tests"])
    assert int(w0["accepted"]) == int(single["accepted"])
    assert not w0["backup_left"]  # BackupAndRestore cleans up after a fit.
  amagold = np.load(os.path.join(out_dir, "amagold_worker0.npz"))
  # Exact M-H tests ran, with both outcomes.
  assert 0 < int(amagold["accepted"]) < int(amagold["tests"]), amagold
  # The chief's Posterior.save holds the one-process samples.
  saved = sgk.Posterior.load(os.path.join(out_dir, "amagold_posterior"))
  reference = sgk.Posterior.load(
      os.path.join(out_dir, "amagold_posterior_single"))
  assert saved.num_samples == reference.num_samples > 0
  for a, b in zip(saved.samples, reference.samples):
    np.testing.assert_allclose(a, b, atol=1e-5)
