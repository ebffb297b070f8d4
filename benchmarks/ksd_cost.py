"""What the kernel Stein discrepancy costs beside the run it measures.

The Bayesian logistic regression of N = 100,000 examples, d = 20 (the
synthetic one of `benchmarks/common.py`), minibatches of 1,000: SGLD with 4
chains runs `--steps` steps from the mode under XLA (one warm call for the
compilation, then timed). The KSD of 1,000 thinned draws (4 chains pooled)
is measured with the exact full-data score and with the score estimated
from m examples per draw around the draws' mean (`score_examples=m`);
each is timed once compiled (its first call, which compiles, is timed
apart). The run and the KSDs are timed `--repeats` times, interleaved, so
that a change in the machine's load falls on both; each is reported as
its median. Per score: seconds, seconds over the sampling run's, and the
KSD value against the exact score's (the estimate's noise adds to KSD^2).

For the ranking: the same at three step sizes (the run's and x0.1, x10
of it), whose order by KSD must not change with the estimate.

    python benchmarks/ksd_cost.py             # the docs' size
    python benchmarks/ksd_cost.py --quick     # seconds
    python benchmarks/ksd_cost.py --repeats 9 # timings' medians over 9
"""

import argparse
import datetime
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import common  # noqa: E402  (benchmarks/common.py: the problems)
import tfp_sgmcmc as sg  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(fn):
  start = time.perf_counter()
  value = fn()
  value = tf.nest.map_structure(lambda t: t.numpy(), value)
  return value, time.perf_counter() - start


def main(quick=False, out=os.path.join(HERE, "results"), repeats=5):
  n, steps = (20_000, 2_000) if quick else (100_000, 20_000)
  problem = common.synthetic_logistic(n=n, d=20, batch_size=1000)
  mode, _ = common.newton_mode(problem)
  target = problem.target()
  start = tf.constant(np.tile(mode, (4, 1)), tf.float32)
  step_size = 2e-6 * 100_000 / n

  def sampling(h):
    return tf.function(lambda seed: tfp.mcmc.sample_chain(
        steps // 2, start, kernel=sg.SGLD(target, step_size=h),
        num_burnin_steps=steps - steps // 2, trace_fn=None, seed=seed),
                       autograph=False, jit_compile=True)

  run = sampling(step_size)
  # Tensor seeds: a Python list is part of tf.function's signature, and a
  # new one would compile the run again inside a timed call.
  first_seed, seed = tf.constant([0, 1]), tf.constant([0, 2])
  _, compile_seconds = timed(lambda: run(first_seed))
  scores = [("exact", None)] + [(f"m = {m:,}", m) for m in (1_000, 10_000)]
  measures = [
      lambda d, m=m: sg.ksd(d, target, pool_chains=True, max_draws=1000,
                            score_examples=m, seed=[3, 4])
      for _, m in scores]
  draws, _ = timed(lambda: run(seed))
  firsts = [timed(lambda f=f: f(draws)) for f in measures]
  run_times, ksd_times = [], []
  for _ in range(repeats):
    draws, seconds = timed(lambda: run(seed))
    run_times.append(seconds)
    ksd_times.append([timed(lambda f=f: f(draws))[1] for f in measures])
  run_seconds = float(np.median(run_times))
  rows = []
  for i, (name, m) in enumerate(scores):
    seconds = float(np.median([t[i] for t in ksd_times]))
    rows.append(dict(score=name, score_examples=m,
                     ksd=float(firsts[i][0]), seconds=seconds,
                     all_seconds=[t[i] for t in ksd_times],
                     first_call_seconds=firsts[i][1],
                     fraction_of_run=seconds / run_seconds))
  exact = rows[0]["ksd"]
  for row in rows:
    row["ksd_over_exact"] = row["ksd"] / exact
  ranking = {}
  for h in (step_size * 0.1, step_size, step_size * 10):
    grid_draws = sampling(h)(seed) if h != step_size else draws
    ranking[f"{h:.3g}"] = [float(sg.ksd(grid_draws, target, pool_chains=True,
                                        score_examples=m, seed=[3, 4]))
                           for _, m in scores]
  result = dict(
      date=datetime.date.today().isoformat(), quick=quick, num_examples=n,
      dimension=20, batch_size=1000, steps=steps, chains=4,
      step_size=step_size, repeats=repeats, sampling_seconds=run_seconds,
      all_sampling_seconds=run_times,
      sampling_first_call_seconds=compile_seconds, scores=rows,
      ksd_by_step_size=ranking, load_average=os.getloadavg()[0])
  print(f"sampling: 4 chains x {steps:,} SGLD steps, N = {n:,}: "
        f"{run_seconds:.2f} s, median of {repeats} (first call "
        f"{compile_seconds:.2f} s)")
  for row in rows:
    print(f"  KSD, {row['score']:>10s} score: {row['ksd']:.4g} "
          f"({row['ksd_over_exact']:.3f} x exact), {row['seconds']:.2f} s = "
          f"{100 * row['fraction_of_run']:.1f}% of the run (first call "
          f"{row['first_call_seconds']:.2f} s)")
  for h, values in ranking.items():
    print(f"  step {h}: KSD " + ", ".join(
        f"{name} {v:.4g}" for (name, _), v in zip(scores, values)))
  if not quick:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "ksd_cost.json"), "w") as f:
      json.dump(result, f, indent=1)
  return result


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--repeats", type=int, default=5,
                      help="timings of the run and of each KSD (medians)")
  args = parser.parse_args()
  main(quick=args.quick, repeats=args.repeats)
