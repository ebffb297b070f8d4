"""ShardedTarget across two logical CPU devices (workers/sharded_worker.py, a
fresh process to configure them): each shard on its own device, the chains
of SGLD, SGHMC and AMAGOLD equal to the single-device chains for the same
seed, and exact AMAGOLD on the sharded target samples the analytic
posterior.
"""

import json
import os
import subprocess
import sys

import numpy as np

from support.helpers import NUM_SE
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
