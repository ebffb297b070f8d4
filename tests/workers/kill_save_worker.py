"""Saves a file twice and kills itself (SIGKILL) before one chosen file
operation of the second save, for tests/processes/test_file_writes.py:

    python tests/workers/kill_save_worker.py WHAT PATH KILL_SPEC [PAUSE]

WHAT is `chain` (save_chain) or `posterior` (Posterior.save). The first save
writes version 1 (unarmed); the second, version 2, runs with the kill point
`KILL_SPEC` (see support/kill_points.py; `none` for no kill). `pause`
instead of a kill spec makes the second save wait before its rename until
the file PATH.go exists (after creating PATH.ready): a live writer that
another process races.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

import numpy as np  # noqa: E402

from support import kill_points  # noqa: E402


def chain_saver():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tfp_sgmcmc as sg  # pylint: disable=g-import-not-at-top
  kernel = sg.StepSeeded(sg.SGLD(sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2, -1), 1.), 0.1), seed=[1, 2])
  init = tf.zeros([2, 3])
  results = kernel.bootstrap_results(init)
  return lambda path, version: sg.save_chain(
      path, init + version, results, kernel=kernel)


def posterior_saver():
  import tfp_sgmcmc.keras as sgk  # pylint: disable=g-import-not-at-top
  def save(path, version):
    # Big enough that np.savez writes it in several pieces.
    sample = np.full((4, 64, 64), version, np.float32)
    sgk.Posterior([sample], ["w"], num_transitions=version).save(path)
  return save


def main():
  what, path, spec = sys.argv[1:4]
  save = dict(chain=chain_saver, posterior=posterior_saver)[what]()
  if spec == "pause":
    real_replace = os.replace

    def paused(src, dst):
      with open(path + ".ready", "w"):
        pass
      deadline = time.time() + 120
      while not os.path.exists(path + ".go") and time.time() < deadline:
        time.sleep(0.01)
      return real_replace(src, dst)

    save(path, 1)
    os.replace = paused
    save(path, 2)
    return 0
  kill_points.install(None if spec == "none" else spec)
  save(path, 1)
  kill_points.arm()
  save(path, 2)
  return 0


if __name__ == "__main__":
  sys.exit(main())
