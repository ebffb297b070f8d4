"""Runs a long chain with running moments and prints its peak memory (run by
tests/processes/test_constant_memory.py).

    python memory_worker.py NUM_STEPS [NUM_CALLS]
        ->  prints "peak_kib=... mean=..."

With NUM_CALLS, it then continues a chain with NUM_CALLS sample_moments
calls in the same process (continuation_worker.py, one TensorFlow import
for both) and prints that worker's line, after the peak was read.
"""
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

warnings.filterwarnings("ignore")


def main():
  num_steps = int(float(sys.argv[1]))
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2, -1), gradient_noise_variance=1.)
  kernel = sg.SGHMC(target, 0.1, 1., integrator="splitting")
  start = time.time()
  # 8 chains x 10 parameters: keeping every draw of 1e6 steps would take
  # 320 MB; running moments take a few hundred bytes.
  moments = sg.sample_moments(kernel, tf.zeros([8, 10]), num_steps,
                              seed=[1, 2])
  mean = float(np.mean(moments.variance))
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  print(f"peak_kib={peak} mean_variance={mean:.4f} "
        f"seconds={time.time() - start:.1f}", flush=True)
  if len(sys.argv) > 2:
    import continuation_worker  # pylint: disable=import-outside-toplevel
    print(continuation_worker.continue_chain(int(sys.argv[2])))


if __name__ == "__main__":
  main()
