"""Data scale: time per step for N = 1e3 ... 1e6 examples.

Bayesian logistic regression of common.py (d = 20, synthetic, fixed seed),
one chain, each sampler in one compiled `while_loop`:

* SGLD (h = 1e-5) and SGHMC Euler (h = 1e-5, C = 100), minibatch 100:
  the step costs one minibatch gradient whatever N is (expected flat);
* AMAGOLD T = 10 with the exact M-H test: T minibatch gradients plus one
  full-data energy (chunks of 4,096) per outer step, so its time per
  gradient grows with N through the energy term; and with
  `acceptance_energy="minibatch"` (flat again, approximate test);
* TFP's full-batch `HamiltonianMonteCarlo` (10 leapfrog steps) on the
  full-data log density written directly (one [N, d] x [d] product per
  gradient): time per gradient evaluation, expected linear in N.

All (sampler, N) pairs are calibrated to about the same wall time and
timed interleaved over several repeats; the table gives the median time
per gradient evaluation, its [min, max] over repeats, and the log-log
slope of time against N from 1e4 to 1e6 (0 = flat, 1 = linear).

    python benchmarks/data_scale.py            # N = 1e3 ... 1e6
    python benchmarks/data_scale.py --quick    # N = 1e3 ... 1e5, 2 repeats
"""

import argparse
import os

import common  # noqa: E402
import harness  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

T = 10
HMC_LEAPFROG = 10


def full_batch_log_prob(problem):
  x = tf.constant(problem.x)
  y = tf.constant(problem.y)

  def log_prob(w):
    logits = tf.linalg.matvec(x, w)
    return (-tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=y, logits=logits)) - 0.5 * tf.reduce_sum(w ** 2))
  return log_prob


def samplers(problem, which):
  target = problem.target()
  out = {
      "SGLD": (sg.SGLD(target, 1e-5), 1),
      "SGHMC": (sg.SGHMC(target, 1e-5, 100.), 1),
      "AMAGOLD T=10 exact M-H": (sg.AMAGOLD(
          target, 1e-5, num_leapfrog_steps=T, friction=50.), T),
      "AMAGOLD T=10 minibatch M-H": (sg.AMAGOLD(
          target, 1e-5, num_leapfrog_steps=T, friction=50.,
          acceptance_energy="minibatch"), T),
      f"TFP HMC full batch, L={HMC_LEAPFROG}": (
          tfp.mcmc.HamiltonianMonteCarlo(
              full_batch_log_prob(problem), step_size=1e-3,
              num_leapfrog_steps=HMC_LEAPFROG), HMC_LEAPFROG),
  }
  return {k: v for k, v in out.items() if which is None or k in which}


def slope(ns, times):
  ns, times = np.asarray(ns, float), np.asarray(times, float)
  keep = ns >= 1e4 if np.sum(ns >= 1e4) >= 2 else ns > 0
  return float(np.polyfit(np.log(ns[keep]), np.log(times[keep]), 1)[0])


def main(quick=False, smoke=False, repeats=None, sizes=None,
         target_seconds=None, which=None, out=None):
  repeats = repeats or (1 if smoke else 2 if quick else 4)
  sizes = sizes or ([1000, 2000] if smoke else [1000, 10_000, 100_000]
                    if quick else [1000, 10_000, 100_000, 1_000_000])
  target_seconds = target_seconds or (0.02 if smoke else 0.1 if quick
                                      else 0.3)
  if smoke and which is None:
    which = ["SGLD"]
  seed = tf.constant([3, 4])
  fns, grads = {}, {}
  for n in sizes:
    problem = common.synthetic_logistic(n=n)
    for name, (kernel, per_step) in samplers(problem, which).items():
      fns[(name, n)] = (harness.kernel_loop(kernel), (problem.init(), seed))
      grads[name] = per_step
  print(f"logistic d=20, minibatch 100, N in {sizes}; {repeats} interleaved "
        "repeats; calibrating and compiling ...", flush=True)
  per_step, steps = harness.interleaved_per_step(fns, target_seconds,
                                                 repeats)
  rows = []
  print(f"\n{'sampler':34s} " + " ".join(f"{f'N={n:.0e}':>24s}"
                                           for n in sizes) +
        f" {'slope':>6s}   (us per gradient, median [min, max])")
  for name in grads:
    medians = []
    cells = []
    for n in sizes:
      us = [1e6 * t / grads[name] for t in per_step[(name, n)]]
      s = harness.spread(us)
      medians.append(s["median"])
      rows.append(dict(sampler=name, n=n, us_per_gradient=s,
                       gradients_per_step=grads[name],
                       steps_timed=steps[(name, n)]))
      cells.append(harness.fmt(s, digits=1))
    b = slope(sizes, medians)
    for r in rows[-len(sizes):]:
      r["loglog_slope"] = b
    print(f"{name:34s} " + " ".join(f"{c:>24s}" for c in cells) +
          f" {b:6.2f}", flush=True)
  if not smoke or out:
    harness.write_json(os.path.join(out or harness.RESULTS,
                                    "data_scale.json"),
                       dict(rows=rows, sizes=sizes, repeats=repeats,
                            target_seconds=target_seconds, quick=quick,
                            slope_fit="log-log, N >= 1e4"))
  return rows


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument("--out", default=None,
                      help="JSON directory (default benchmarks/results)")
  a = parser.parse_args()
  main(quick=a.quick, repeats=a.repeats, out=a.out)
