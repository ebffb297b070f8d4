"""The samplers under tf.distribute.MirroredStrategy on two logical CPU devices
(workers/keras_mirrored_worker.py, a fresh process to configure them): the
replicas' copies of every variable stay bitwise identical, and the chain is
the single-device chain up to float rounding of the all-reduce; through
AMAGOLD's warm-up, the adapted step size is the single device's up to that
rounding, and the tests, acceptances and kept samples are as many.
"""

import json
import os
import subprocess
import sys

from support.paths import WORKERS


def test_mirrored_strategy_replicas_stay_identical_and_match_one_device():
  worker = os.path.join(WORKERS, "keras_mirrored_worker.py")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  names = ("sghmc", "amagold", "amagold_warmup")
  out = subprocess.run([sys.executable, worker, *names],
                       capture_output=True, text=True, env=env, timeout=300,
                       check=False)
  assert out.returncode == 0, out.stderr[-3000:]
  results = json.loads(out.stdout.strip().splitlines()[-1])
  assert results["num_replicas"] == 2
  for name in names:
    r = results[name]
    # Same noise and the same all-reduced gradient on both replicas: their
    # copies of every variable are bitwise equal ...
    assert r["replicas_equal"], r
    # ... and the chain is the single-device chain up to float rounding of
    # the gradient's all-reduce (differences of ~1e-7 on weights of ~1).
    # Not after a warm-up: its step size carries the rounding into every
    # later test, and a rounding-sized change on one device (each batch's
    # examples in reverse order) moved the final weights by 0.27 there
    # (2.5e-7 without the warm-up) while the step size moved by 1.1e-5.
    if name != "amagold_warmup":
      assert r["max_difference"] < 1e-5, r
    assert r["moved_from_first_sample"] > 0.05, r
    assert r["kept"][0] == r["kept"][1] > 0, r
    assert r["accepted"][0] == r["accepted"][1], r
    assert r["tests"][0] == r["tests"][1], r
    # The warm-up's step size (and mass) are the single device's.
    assert abs(r["step_size"][1] / r["step_size"][0] - 1.) < 1e-4, r
