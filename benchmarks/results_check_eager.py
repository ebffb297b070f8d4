"""Per-step cost, in eager mode, of checking the results a kernel is given.

`one_step` called eagerly checks a kernel's cached target-dependent value
(AMAGOLD's U(theta), `target_log_prob` of a full-batch target) only for
results it did not return itself; its own results are recognised. This
times eager loops of `--steps` steps with the check as shipped and with it
disabled (check and recording replaced by no-ops), interleaved `--repeats`
times, for AMAGOLD (T = 3) and for tfp.mcmc.MetropolisHastings around
full-batch SGLD (results chosen per chain). Prints per-step medians [min,
max] and the median per-pair ratio (with / without), in wall and process
CPU time.

    python benchmarks/results_check_eager.py [--repeats 11] [--steps 20]
"""

import argparse
import time

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import harness  # noqa: E402
import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.kernels import results_guard  # noqa: E402


def quadratic(x):
  return 0.5 * tf.reduce_sum(x ** 2, -1)


KERNELS = {
    "AMAGOLD": lambda: sg.AMAGOLD(sg.NoisyGradientTarget(
        quadratic, gradient_noise_variance=1.), 0.1, 3, 0.5),
    "MH(full-batch SGLD)": lambda: tfp.mcmc.MetropolisHastings(sg.SGLD(
        target_log_prob_fn=lambda x: -quadratic(x), step_size=0.1)),
}


def run(make_kernel, steps, checked):
  saved = (results_guard.check_cached_values, results_guard.record_results)
  if not checked:
    results_guard.check_cached_values = lambda *a, **k: None
    results_guard.record_results = lambda *a, **k: None
  try:
    kernel = make_kernel()
    state = tf.ones([4, 10])
    results = kernel.bootstrap_results(state)
    start, start_cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
      state, results = kernel.one_step(state, results, seed=[i, 1])
    return ((time.perf_counter() - start) / steps,
            (time.process_time() - start_cpu) / steps)
  finally:
    results_guard.check_cached_values, results_guard.record_results = saved


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--repeats", type=int, default=11)
  parser.add_argument("--steps", type=int, default=20)
  args = parser.parse_args()
  import warnings  # pylint: disable=g-import-not-at-top
  warnings.simplefilter("ignore")
  for name, make in KERNELS.items():
    run(make, 2, True)  # Warm up.
    times = {(c, arm): [] for c in ("wall", "cpu") for arm in ("with",
                                                                "without")}
    for r in range(args.repeats):
      for arm in (("with", "without") if r % 2 == 0 else
                  ("without", "with")):
        wall, cpu = run(make, args.steps, arm == "with")
        times[("wall", arm)].append(wall)
        times[("cpu", arm)].append(cpu)
    for clock in ("wall", "cpu"):
      w, wo = times[(clock, "with")], times[(clock, "without")]
      ratio = harness.ratios(w, wo)
      print(f"{name:20s} {clock:4s} ms/step with "
            f"{harness.fmt(harness.spread(w), 1e3)}"
            f", without {harness.fmt(harness.spread(wo), 1e3)}; ratio "
            f"{harness.fmt(ratio, 1., 3)}")


if __name__ == "__main__":
  main()
