"""Continues one chain with repeated sample_moments calls; prints RSS (run by
tests/processes/test_constant_memory.py, through memory_worker.py, which
runs it in its process after its own chain).

    python continuation_worker.py NUM_CALLS -> "rss_first_kib=... rss_last_kib=..."

RSS is read from /proc/self/statm after the 5th call (warm: compilation
done) and after the last one.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

warnings.filterwarnings("ignore")


def rss_kib():
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def continue_chain(num_calls):
  """The line this worker prints, after `num_calls` continuing calls."""
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2, -1), gradient_noise_variance=1.)
  kernel = sg.SGHMC(target, 0.1, 1., integrator="splitting")
  state, results = tf.zeros([4, 3]), None
  first = None
  means = []
  for i in range(num_calls):
    m = sg.sample_moments(kernel, state, 200, seed=[i, 7],
                          previous_kernel_results=results)
    state, results = m.final_state, m.final_kernel_results
    means.append(np.asarray(m.variance).mean())
    if i == 4:
      first = rss_kib()
  return (f"rss_first_kib={first} rss_last_kib={rss_kib()} "
          f"mean_variance={np.mean(means):.4f}")


def main():
  print(continue_chain(int(sys.argv[1])))


if __name__ == "__main__":
  main()
