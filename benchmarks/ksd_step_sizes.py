"""Does the kernel Stein discrepancy rank step sizes as their true error does?

For SGLD and SGHMC, kernels without a Metropolis-Hastings test, on the
posterior suite's models (`benchmarks/posteriors.py`: eight schools, the
ill-conditioned Gaussian, German credit full batch and with minibatches of
64) and the quickstart's double well (gradient noise N(0, 1)): `warm_up`
tunes a step size h_w and brings 4 chains to the posterior; from that state
each step size of the grid h_w x (0.1, 0.3, 1, 3, 10) runs `--steps` steps
(the last half kept). Per step size:

* true error: the largest error of a mean in reference sds plus the largest
  relative error of an sd (in the reference's coordinates);
* KSD: `tfp_sgmcmc.ksd` of the kept draws, 4 chains pooled, thinned to
  1,000, with the exact full-data score, under three scales: the unit
  kernel, and the draws standardised by the sds ("diagonal") or the
  covariance ("dense") of the grid's median run (`stein.common_scale`, as
  `step_size_by_ksd` does), one scale for the whole grid.

Per model, kernel and scale: Spearman's rank correlation of KSD and true
error over the grid, and the true error of the KSD-chosen step over the
best step's (the summary line leads with `--scale`, default diagonal).
Also the cost of the KSD against the sampling run that made the draws:
the median over the grid of KSD seconds over sampling seconds
(the sampling's compilation excluded; the KSD compiles its score and
pairwise sum at its first call per model only).

    python benchmarks/ksd_step_sizes.py --quick    # seconds
    # the docs' table, seeds 0 and 1 (about 15 min each on 2 cores):
    python benchmarks/ksd_step_sizes.py --steps 16000 --chains 16 \
        --max-draws 2000 [--seed 1]
"""

import argparse
import datetime
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import scipy.stats  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import posteriors  # noqa: E402  (benchmarks/posteriors.py: the models)
import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import synthetic  # noqa: E402
from tfp_sgmcmc.chains import stein  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GRID = (0.1, 0.3, 1., 3., 10.)
SCALES = ("unit", "diagonal", "dense")
NUM_CHAINS = 4


def double_well_problem():
  edges = np.linspace(-6., 5., 1101)
  density = synthetic.grid_density(synthetic.double_well_energy, edges)
  centres = 0.5 * (edges[1:] + edges[:-1])
  mean = np.sum(density * centres)
  sd = np.sqrt(np.sum(density * (centres - mean) ** 2))
  return posteriors.Problem(
      "double_well", 1, None,
      synthetic.noisy_target(synthetic.double_well_energy, 1.),
      (np.array([mean]), np.array([sd])))


def true_error(problem, draws):
  x = problem.to_reference(draws.astype(np.float64))
  x = x.reshape(-1, x.shape[-1])
  return float(np.max(np.abs(x.mean(0) - problem.mean) / problem.sd)
               + np.max(np.abs(x.std(0) / problem.sd - 1.)))


def grid_run(problem, kernel_name, num_steps, num_warmup, seed,
             num_chains=NUM_CHAINS, max_draws=1000, scale="diagonal"):
  target = problem.target
  kernel = (sg.SGLD(target, step_size=1e-3) if kernel_name == "SGLD" else
            sg.SGHMC(target, step_size=0.01, friction=1.))
  warm_seed, run_seed, ksd_seed = tfp.random.split_seed(seed, 3)
  warm = sg.warm_up(kernel, tf.zeros([num_chains, problem.dim]),
                    num_steps=num_warmup, seed=warm_seed, adapt_mass=False)
  h_w = warm.report.step_size
  half = num_steps // 2

  @tf.function(jit_compile=True, autograph=False)
  def run(h, s):
    return tfp.mcmc.sample_chain(num_steps - half, warm.state,
                                 kernel=warm.kernel.copy(step_size=h),
                                 num_burnin_steps=half, trace_fn=None,
                                 seed=s)
  rows, runs = [], []
  for factor in GRID:
    h = tf.constant(h_w * factor, tf.float32)
    run(h, run_seed)        # compiles once (the step size is an argument)
    t0 = time.perf_counter()
    draws = run(h, run_seed).numpy()
    sampling = time.perf_counter() - t0
    runs.append(draws)
    rows.append(dict(step_size=float(h_w * factor), factor=factor,
                     error=true_error(problem, draws),
                     sampling_seconds=sampling))
  scales = {kind: stein.common_scale(runs, kind) for kind in SCALES[1:]}
  scales["unit"] = None
  for row, draws in zip(rows, runs):
    for kind in SCALES:
      t0 = time.perf_counter()
      row[f"ksd_{kind}"] = float(sg.ksd(
          draws, target, pool_chains=True, max_draws=max_draws,
          seed=ksd_seed, scale=scales[kind]))
      if kind == "unit":
        row["ksd_seconds"] = time.perf_counter() - t0
    # A chain that blew up: both measures at their worst (a NaN has no
    # rank).
    for key in ["error"] + [f"ksd_{kind}" for kind in SCALES]:
      row[key] = row[key] if np.isfinite(row[key]) else float("inf")
    row["ksd"] = row[f"ksd_{scale}"]
  errors = [r["error"] for r in rows]
  by_scale = {}
  for kind in SCALES:
    ksds = [r[f"ksd_{kind}"] for r in rows]
    chosen = int(np.argmin(ksds))
    by_scale[kind] = dict(
        spearman=float(scipy.stats.spearmanr(ksds, errors).correlation),
        chosen_over_best=float(errors[chosen] / min(errors)))
  return dict(model=problem.name, kernel=kernel_name, warmup_step_size=h_w,
              rows=rows, scale=scale, by_scale=by_scale, **by_scale[scale],
              ksd_cost_ratio=float(np.median(
                  [r["ksd_seconds"] / r["sampling_seconds"] for r in rows])))


def main(quick=False, out=os.path.join(HERE, "results"), num_steps=4000,
         num_chains=NUM_CHAINS, max_draws=1000, scale="diagonal", seed=0):
  num_steps, num_warmup = (400, 100) if quick else (num_steps, 500)
  problems = [double_well_problem(), posteriors.eight_schools_problem(),
              posteriors.ill_conditioned_gaussian_problem()]
  if os.path.exists(posteriors.GERMAN):
    problems += posteriors.german_credit_problems()[:2]
  else:
    print(f"German credit: not run (no {posteriors.GERMAN}; set "
          "TFP_SGMCMC_SHARED_DATA to the shared data folder)", flush=True)
  if quick:
    problems = problems[:1]
  results = []
  seed_number, seed = seed, tfp.random.sanitize_seed(seed)
  for problem in problems:
    for kernel_name in ("SGLD", "SGHMC"):
      seed, run_seed = tfp.random.split_seed(seed)
      result = grid_run(problem, kernel_name, num_steps, num_warmup,
                        run_seed, num_chains, max_draws, scale)
      results.append(result)
      print(f"{result['model']:32s} {kernel_name:6s} Spearman "
            f"{result['spearman']:+.2f}  chosen/best error "
            f"{result['chosen_over_best']:.2f}  "
            + " ".join(f"[{k}: {v['spearman']:+.2f} {v['chosen_over_best']:.2f}]"
                       for k, v in result["by_scale"].items())
            + f"  KSD/sampling time "
            f"{result['ksd_cost_ratio']:.2f}  KSD "
            + " ".join(f"{r['ksd']:.3g}" for r in result["rows"])
            + "  error " + " ".join(f"{r['error']:.3g}"
                                    for r in result["rows"]), flush=True)
  if out:
    os.makedirs(out, exist_ok=True)
    name = ("ksd_step_sizes_quick.json" if quick else "ksd_step_sizes.json"
            if not seed_number else
            f"ksd_step_sizes_seed{seed_number}.json")
    with open(os.path.join(out, name), "w") as f:
      json.dump(dict(date=str(datetime.date.today()), grid=GRID, seed=seed_number,
                     num_steps=num_steps, num_chains=num_chains,
                     max_draws=max_draws, results=results), f, indent=1)
  return results


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--steps", type=int, default=4000)
  parser.add_argument("--chains", type=int, default=NUM_CHAINS)
  parser.add_argument("--max-draws", type=int, default=1000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--scale", choices=SCALES, default="diagonal",
                      help="the KSD's scale the summary ranks by (all three "
                      "are recorded)")
  args = parser.parse_args()
  main(quick=args.quick, num_steps=args.steps, num_chains=args.chains,
       max_draws=args.max_draws, scale=args.scale, seed=args.seed)
