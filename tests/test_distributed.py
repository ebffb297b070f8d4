"""ShardedTarget: the TFP kernels on data split across tf.distribute
replicas (issue 18, item 2)."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE
from support.linear_regression import LinearRegression
from support.paths import WORKERS


def test_sharded_chains_equal_single_device_chains_on_two_devices():
  worker = os.path.join(WORKERS, "sharded_worker.py")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run([sys.executable, worker], capture_output=True,
                       text=True, env=env, timeout=300, check=False)
  assert out.returncode == 0, out.stderr[-3000:]
  results = json.loads(out.stdout.strip().splitlines()[-1])
  assert results["num_replicas"] == 2
  for scheme in ("global", "per_shard"):
    r = results[scheme]
    # Each shard lives on its own device ...
    assert [d[-5:] for d in r["shard_devices"]] == ["CPU:0", "CPU:1"], r
    for name in ("sgld", "sghmc", "amagold"):
      # ... and the chain is the single-device target's chain for the same
      # seed, up to the float rounding of summing the shards' shares in
      # another order (1e-7 on positions of order 1): the same minibatches,
      # the same all-reduced energies and gradients, the same M-H decisions.
      assert r[name]["max_difference"] < 1e-5, (scheme, name, r[name])
      assert r[name]["moved"] > 0.3, (scheme, name, r[name])
  # Exact AMAGOLD on the sharded target (per-shard batches, exact energy
  # reduced over the shards) samples the analytic posterior.
  m = results["moments"]
  assert 0.3 < m["acceptance"] < 0.95, m
  for key in ("mean", "var"):
    err = np.abs(np.subtract(m[key], m["true_" + key]))
    assert np.all(err < NUM_SE * np.asarray(m[key + "_se"])), m


def test_sharded_target_on_one_replica_is_in_memory_target():
  problem = LinearRegression(num_examples=120, dim=2, seed=1)
  sharded = sg.ShardedTarget(problem.log_likelihood, problem.data, 20,
                             log_prior_fn=problem.log_prior,
                             minibatch="global", energy_chunk_size=50)
  single = problem.in_memory_target(20)
  w = tf.constant([[0.3, -0.2], [1., 0.5]])
  np.testing.assert_allclose(sharded.energy(w), single.energy(w), rtol=1e-6)
  for a, b in zip(sharded.energy_and_gradient(w, [4, 5]),
                  single.energy_and_gradient(w, [4, 5])):
    np.testing.assert_allclose(a, b, rtol=1e-5)
  # Differentiable by an outer tape (ControlVariateTarget, find_mode).
  with tf.GradientTape() as tape:
    tape.watch(w)
    energy = sharded.energy(w)
  np.testing.assert_allclose(tape.gradient(energy, w),
                             [problem.gradient(x) for x in w.numpy()],
                             rtol=1e-4)
  cv = sg.ControlVariateTarget(sharded, tf.constant(problem.posterior_mean,
                                                    tf.float32))
  cv_single = sg.ControlVariateTarget(
      single, tf.constant(problem.posterior_mean, tf.float32))
  for a, b in zip(cv.energy_and_gradient(w, [4, 5]),
                  cv_single.energy_and_gradient(w, [4, 5])):
    np.testing.assert_allclose(a, b, rtol=1e-4)
