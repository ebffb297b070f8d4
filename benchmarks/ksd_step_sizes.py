"""Does the kernel Stein discrepancy rank step sizes as their true error does?

For SGLD and SGHMC, kernels without a Metropolis-Hastings test, on the
posterior suite's models (`benchmarks/posteriors.py`: eight schools, the
ill-conditioned Gaussian, German credit full batch and with minibatches of
64) and the quickstart's double well (gradient noise N(0, 1)): `warm_up`
tunes a step size h_w and brings 4 chains to the posterior; from one start
each step size of the grid h_w x (0.1, 0.3, 1, 3, 10) runs `--steps` steps
(the last half kept). The start (`--start`): the warm-up's state (as a
user runs a search), or draws spread as the reference posterior, with its
means and sds exactly ("posterior": a run's error is then its step's bias,
not how far it got from the warm-up state) or twice its sds
("overdispersed"). Per step size:

* true error: the largest error of a mean in reference sds plus the largest
  relative error of an sd (in the reference's coordinates), and the same
  with the RMS over the coordinates instead of the largest; the Monte
  Carlo standard error of the mean errors (the chains as batches);
* KSD: `tfp_sgmcmc.ksd` of the kept draws, 4 chains pooled, thinned to
  1,000, with the exact full-data score, under three scales: the unit
  kernel, and the draws standardised by the sds ("diagonal") or the
  covariance ("dense") of the grid's median run (`stein.common_scale`, as
  `step_size_by_ksd` does), one scale for the whole grid; and
  standardised by the sds with the IMQ length scale c from the median
  heuristic ("diagonal_median", one c for the grid).

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
        --max-draws 2000 [--seed 1] [--start posterior]
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
# The KSDs measured on every grid: (name, scale, IMQ length scale c).
KERNELS = SCALES + ("diagonal_median",)
STARTS = ("warm-up", "posterior", "overdispersed")
NUM_CHAINS = 4


def double_well_problem():
  edges = np.linspace(-6., 5., 1101)
  density = synthetic.grid_density(synthetic.double_well_energy, edges)
  centres = 0.5 * (edges[1:] + edges[:-1])
  mean = np.sum(density * centres)
  sd = np.sqrt(np.sum(density * (centres - mean) ** 2))
  problem = posteriors.Problem(
      "double_well", 1, None,
      synthetic.noisy_target(synthetic.double_well_energy, 1.),
      (np.array([mean]), np.array([sd])))
  cdf = np.concatenate([[0.], np.cumsum(density)]) / np.sum(density)
  problem.quantile = lambda q: np.interp(q, cdf, edges)
  return problem


def true_errors(problem, draws):
  """(largest, RMS) over the reference's coordinates of the mean errors in
  reference sds, plus the same of the relative sd errors."""
  x = problem.to_reference(draws.astype(np.float64))
  x = x.reshape(-1, x.shape[-1])
  mean_error = np.abs(x.mean(0) - problem.mean) / problem.sd
  sd_error = np.abs(x.std(0) / problem.sd - 1.)
  rms = lambda e: np.sqrt(np.mean(e ** 2))
  return (float(np.max(mean_error) + np.max(sd_error)),
          float(rms(mean_error) + rms(sd_error)))


def mean_error_se(problem, draws):
  """The Monte Carlo standard error of the mean errors (in reference sds),
  the chains taken as independent batches: the largest over the
  coordinates. Errors of two runs closer than about twice this are a tie
  at this run length."""
  x = problem.to_reference(draws.astype(np.float64))
  chain_means = x.mean(0)                              # [chains, d]
  return float(np.max(chain_means.std(0, ddof=1) / np.sqrt(
      len(chain_means)) / problem.sd))


def _matched(num_chains, dim, rng):
  """num_chains standard normal draws whose sample mean is exactly 0 and
  whose sample sds (all, when num_chains > dim, the whole sample covariance)
  are exactly 1: a start whose own mean and sd errors are zero."""
  z = rng.standard_normal([num_chains, dim])
  z -= z.mean(0)
  if num_chains > dim:
    return z @ np.linalg.inv(np.linalg.cholesky(np.cov(z.T, bias=True))).T
  return z / z.std(0)


def posterior_start(problem, num_chains, spread, rng):
  """Chains' starts spread as the posterior (spread 1) or wider (spread >
  1, overdispersed): their mean is the reference mean and their sds spread
  x the reference sds, in the reference's coordinates."""
  if problem.name == "double_well":
    # Stratified: the posterior's quantiles (i + 1/2) / num_chains, so that
    # the two modes start with their weights.
    quantiles = problem.quantile((np.arange(num_chains) + 0.5) / num_chains)
    x = problem.mean + spread * (quantiles - quantiles.mean()) * (
        problem.sd / quantiles.std())
    return x[:, None].astype(np.float32)
  if problem.covariance is not None:
    # Correlated (ill-conditioned): exact draws of N(mean, covariance).
    chol = np.linalg.cholesky(problem.covariance)
    z = _matched(num_chains, problem.dim, rng)
    return (problem.mean + spread * z @ chol.T).astype(np.float32)
  # The reference has means and sds only: independent coordinates.
  x = problem.mean + spread * problem.sd * _matched(num_chains, problem.dim,
                                                    rng)
  return problem.from_reference(x).astype(np.float32)


def _start_info(problem):
  """What `posterior_start` needs beyond the reference's means and sds."""
  problem.covariance = None
  problem.from_reference = lambda x: x
  if problem.name.startswith("ill_conditioned_gaussian"):
    from inference_gym import using_tensorflow as gym  # pylint: disable=import-outside-toplevel
    problem.covariance = np.asarray(gym.targets.IllConditionedGaussian(
        ndims=problem.dim)._gaussian.covariance(), np.float64)  # pylint: disable=protected-access
  elif problem.name.startswith("eight_schools"):
    def from_reference(x):   # (avg, log sd, effects) -> (avg, log sd, z)
      avg, log_sd, effects = x[..., :1], x[..., 1:2], x[..., 2:]
      return np.concatenate([avg, log_sd, (effects - avg) / np.exp(log_sd)],
                            -1)
    problem.from_reference = from_reference
  return problem


def median_bandwidth(runs, scale, max_draws):
  """The IMQ length scale c by the median heuristic, one for the grid: per
  finite run, the median distance between its (standardised, thinned)
  draws; the median of those over the runs."""
  medians = []
  for draws in runs:
    x = draws.reshape(-1, draws.shape[-1]).astype(np.float64)
    if not np.isfinite(x).all():
      continue
    x = x[::max(1, len(x) // max_draws)]
    x = x / scale if scale.ndim == 1 else np.linalg.solve(scale, x.T).T
    sq = np.sum(x * x, 1)
    r2 = np.maximum(sq[:, None] + sq[None] - 2. * x @ x.T, 0.)
    medians.append(np.median(np.sqrt(r2[np.triu_indices(len(x), 1)])))
  return float(np.median(medians)) if medians else 1.


def grid_run(problem, kernel_name, num_steps, num_warmup, seed,
             num_chains=NUM_CHAINS, max_draws=1000, scale="diagonal",
             start="warm-up"):
  target = problem.target
  kernel = (sg.SGLD(target, step_size=1e-3) if kernel_name == "SGLD" else
            sg.SGHMC(target, step_size=0.01, friction=1.))
  warm_seed, run_seed, ksd_seed = tfp.random.split_seed(seed, 3)
  warm = sg.warm_up(kernel, tf.zeros([num_chains, problem.dim]),
                    num_steps=num_warmup, seed=warm_seed, adapt_mass=False)
  h_w = warm.report.step_size
  half = num_steps // 2
  if start == "warm-up":
    initial_state = warm.state
  else:
    initial_state = tf.constant(posterior_start(
        problem, num_chains, 1. if start == "posterior" else 2.,
        np.random.default_rng(int(tf.reduce_sum(
            tf.cast(run_seed, tf.int64)).numpy()) % 2 ** 32)))

  @tf.function(jit_compile=True, autograph=False)
  def run(h, s):
    return tfp.mcmc.sample_chain(num_steps - half, initial_state,
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
    error, error_rms = true_errors(problem, draws)
    rows.append(dict(step_size=float(h_w * factor), factor=factor,
                     error=error, error_rms=error_rms,
                     mean_error_se=mean_error_se(problem, draws),
                     sampling_seconds=sampling))
  scales = {kind: stein.common_scale(runs, kind) for kind in SCALES[1:]}
  scales["unit"] = None
  scales["diagonal_median"] = scales["diagonal"]
  bandwidth = {kind: 1. for kind in SCALES}
  bandwidth["diagonal_median"] = (
      median_bandwidth(runs, scales["diagonal"], max_draws)
      if scales["diagonal"] is not None else 1.)
  for row, draws in zip(rows, runs):
    for kind in KERNELS:
      t0 = time.perf_counter()
      row[f"ksd_{kind}"] = float(sg.ksd(
          draws, target, pool_chains=True, max_draws=max_draws,
          seed=ksd_seed, scale=scales[kind], c=bandwidth[kind]))
      if kind == "unit":
        row["ksd_seconds"] = time.perf_counter() - t0
    # A chain that blew up: both measures at their worst (a NaN has no
    # rank).
    for key in ["error", "error_rms"] + [f"ksd_{kind}" for kind in KERNELS]:
      row[key] = row[key] if np.isfinite(row[key]) else float("inf")
    row["ksd"] = row[f"ksd_{scale}"]
  by_scale = {}
  for kind in KERNELS:
    ksds = [r[f"ksd_{kind}"] for r in rows]
    chosen = int(np.argmin(ksds))
    by_scale[kind] = {}
    for measure, suffix in (("error", ""), ("error_rms", "_rms")):
      errors = [r[measure] for r in rows]
      by_scale[kind].update({
          "spearman" + suffix: float(scipy.stats.spearmanr(
              ksds, errors).correlation),
          "chosen_over_best" + suffix: float(errors[chosen] / min(errors))})
  return dict(model=problem.name, kernel=kernel_name, warmup_step_size=h_w,
              start=start, bandwidth_median=bandwidth["diagonal_median"],
              rows=rows, scale=scale, by_scale=by_scale, **by_scale[scale],
              ksd_cost_ratio=float(np.median(
                  [r["ksd_seconds"] / r["sampling_seconds"] for r in rows])))


def main(quick=False, out=os.path.join(HERE, "results"), num_steps=4000,
         num_chains=NUM_CHAINS, max_draws=1000, scale="diagonal", seed=0,
         start="warm-up"):
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
  problems = [_start_info(p) for p in problems]
  results = []
  seed_number, seed = seed, tfp.random.sanitize_seed(seed)
  for problem in problems:
    for kernel_name in ("SGLD", "SGHMC"):
      seed, run_seed = tfp.random.split_seed(seed)
      result = grid_run(problem, kernel_name, num_steps, num_warmup,
                        run_seed, num_chains, max_draws, scale, start)
      results.append(result)
      print(f"{result['model']:32s} {kernel_name:6s} Spearman "
            f"{result['spearman']:+.2f}  chosen/best error "
            f"{result['chosen_over_best']:.2f}  "
            + " ".join(f"[{k}: {v['spearman']:+.2f} {v['chosen_over_best']:.2f}"
                       f" rms {v['spearman_rms']:+.2f} "
                       f"{v['chosen_over_best_rms']:.2f}]"
                       for k, v in result["by_scale"].items())
            + f"  KSD/sampling time "
            f"{result['ksd_cost_ratio']:.2f}  KSD "
            + " ".join(f"{r['ksd']:.3g}" for r in result["rows"])
            + "  error " + " ".join(f"{r['error']:.3g}"
                                    for r in result["rows"])
            + "  rms " + " ".join(f"{r['error_rms']:.3g}"
                                  for r in result["rows"]), flush=True)
  if out:
    os.makedirs(out, exist_ok=True)
    name = "ksd_step_sizes" + (
        "" if start == "warm-up" else "_" + start) + (
            "_quick" if quick else f"_seed{seed_number}" if seed_number
            else "") + ".json"
    with open(os.path.join(out, name), "w") as f:
      json.dump(dict(date=str(datetime.date.today()), grid=GRID, seed=seed_number,
                     num_steps=num_steps, num_chains=num_chains,
                     max_draws=max_draws, start=start, results=results), f,
                indent=1)
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
  parser.add_argument("--start", choices=STARTS, default="warm-up",
                      help="the grid's start: the warm-up's state, or draws "
                      "spread as the reference posterior (1x or, "
                      "overdispersed, 2x its sds)")
  args = parser.parse_args()
  main(quick=args.quick, num_steps=args.steps, num_chains=args.chains,
       max_draws=args.max_draws, scale=args.scale, seed=args.seed,
       start=args.start)
