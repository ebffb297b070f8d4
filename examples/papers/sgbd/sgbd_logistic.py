"""SGBD paper, Figure 2: robustness to the step size under scale heterogeneity.

Mauri & Zanella (2024) fit a Bayesian logistic regression to unscaled
covariates, so that the posterior standard deviations of the coefficients
differ by orders of magnitude, and sweep the step size of SGLD and of SGBD:
posterior means and +-2 sd intervals per coefficient against a reference. Here
the data are Statlog (Australian credit approval): 690 rows, 14 raw
covariates (binary flags next to amounts reaching 100,001) and an intercept;
the reference posterior standard deviations span 1.6e-4 to 1.1, almost four
orders of magnitude, with a condition number of the posterior precision of
about 7e7.

Model: y_i ~ Bernoulli(sigmoid(b_0 + x_i^T b)), b_j ~ N(0, 5^2) for all 15
coefficients (intercept included), float64.

Reference: full-batch NUTS (`tfp.mcmc.NoUTurnSampler`, XLA-compiled, step
size tuned by dual averaging during warm-up) run in the coordinates
z = L^-1 (b - b_MAP), L L^T the inverse Hessian at the mode (Laplace), i.e.
NUTS with a dense mass matrix: an affine reparameterisation leaves the
posterior unchanged and makes it well conditioned. Cached under
--out/reference_*.npz, keyed by its settings.

The sweep: all chains start at b = 0 (a neutral start, outside the reference
intervals of six of the 15 coefficients) and run with minibatches drawn with
replacement. The step sizes are put on one scale s, the per-step increment
scale: SGBD's sigma = s and SGLD's h = s^2 / 2 (so that SGLD's injected noise
sqrt(2 h) = s). The first half of each chain is discarded; the means and sds
pool the second halves of `reps` chains per step size.

"Within the reference intervals" at a step size means: every coefficient's
estimated posterior mean lies in [reference mean - k sd, reference mean +
k sd]. The paper's caption ("interval with two standard deviations width")
reads either as +-2 sd (k = 2, the default here, the figure's black lines)
or as an interval two sds wide, +-1 sd (k = 1); the tables and the JSON
report both. The robust range of a sampler is the longest run of consecutive grid
step sizes that are within, reported in orders of magnitude of s
(log10(s_max / s_min); a single grid point is 0 decades) and, for SGLD, also
in its own h (twice as many decades). Per coefficient the same is reported
with that coefficient alone, marked * where the coefficient's reference
interval contains the start 0 (a chain that never moved is "within" there).

Writes to --out (default ./out/sgbd):

* sgbd_logistic.png: one panel per coefficient, estimated mean +- 2 sd
  against s for each sampler, the reference mean +- 2 sd as horizontal lines;
* sgbd_logistic.md: the robust ranges and per-coefficient tables, under
  both readings (+-2 sd and +-1 sd);
* sgbd_logistic.json: the reference mean and sd, each sampler's pooled
  means, sds, z-scores and divergence flags per step size, and the robust
  ranges (overall and per coefficient) under both readings.

With --full the files are named sgbd_logistic_full.* instead, so that both
runs can sit in one folder.

    python examples/papers/sgbd/sgbd_logistic.py [--data-dir ../shared/data] \
        [--out out/sgbd] [--full] [--methods sgld,vanilla,corrected,extreme]

The default run: 11 step sizes from 1e-5 to 1, 4 chains of 300,000 steps
each per step size and sampler; --full: 21 step sizes, 8 chains of
3,000,000 steps, a 8 x 20,000 reference (38 times the default's chain
steps). The results are in docs/papers/sgbd.md.
"""

import argparse
import dataclasses
import hashlib
import json
import os
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

# SGLD and SGBD are uncalibrated by design; that is what is being measured.
warnings.filterwarnings("ignore", message=".*is not calibrated.*")

PRIOR_SCALE = 5.
EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..",
                                        ".."))
DEFAULT_DATA_DIR = os.path.join(EXAMPLES, "..", "..", "shared", "data")
METHOD_LABELS = {"sgld": "SGLD", "vanilla": "v-SGBD", "corrected": "c-SGBD",
                 "extreme": "e-SGBD"}
METHOD_COLORS = {"sgld": "tab:red", "vanilla": "tab:blue",
                 "corrected": "tab:green", "extreme": "tab:purple"}


@dataclasses.dataclass
class Config:
  """Sizes of one run of the experiment."""
  log10_scales: tuple = tuple(np.arange(-5., 0.01, 0.5))
  reps: int = 4
  num_steps: int = 300_000
  batch_size: int = 138
  methods: tuple = ("sgld", "vanilla", "extreme")
  reference_chains: int = 8
  reference_draws: int = 2000
  reference_warmup: int = 1000
  seed: int = 1
  # A progress bar inside each sweep (sg.sample_chain_with_progress). Its
  # per-step seeds differ from plain sample_chain's, so the draws differ
  # (not their distribution); on by default for --full only.
  progress: bool = False

  @property
  def scales(self):
    return 10. ** np.asarray(self.log10_scales)


FAST = Config()
FULL = Config(log10_scales=tuple(np.arange(-5., 0.01, 0.25)), reps=8,
              num_steps=3_000_000, reference_chains=8,
              reference_draws=20000, reference_warmup=2000, progress=True)


@dataclasses.dataclass
class Problem:
  x: np.ndarray  # [N, 14], raw covariates
  y: np.ndarray  # [N]

  @property
  def design(self):
    """[N, 15]: a column of ones (intercept) and the covariates."""
    return np.hstack([np.ones((len(self.y), 1)), self.x])

  @property
  def dim(self):
    return self.x.shape[1] + 1

  @property
  def names(self):
    return ["intercept"] + [f"A{j}" for j in range(1, self.x.shape[1] + 1)]


def load_problem(data_dir):
  x, y = sg.datasets.load_statlog_australian(data_dir)
  return Problem(x, y)


def log_likelihood(b, batch):
  """log p(y_i | x_i, b) per example, for b of shape [..., 15]."""
  xb, yb = batch
  logits = b[..., :1] + tf.einsum("nd,...d->...n", xb, b[..., 1:])
  return yb * logits - tf.math.softplus(logits)


def log_prior(b):
  return -0.5 * tf.reduce_sum(tf.square(b), -1) / PRIOR_SCALE ** 2


def make_target(problem, batch_size):
  return sg.InMemoryTarget(log_likelihood, (problem.x, problem.y),
                           batch_size=batch_size, log_prior_fn=log_prior)


def laplace(problem, iterations=100):
  """Posterior mode by Newton's method, and the inverse Hessian there."""
  design, y = problem.design, problem.y
  b = np.zeros(problem.dim)
  for _ in range(iterations):
    p = 1. / (1. + np.exp(-design @ b))
    grad = design.T @ (y - p) - b / PRIOR_SCALE ** 2
    hess = design.T @ (design * (p * (1 - p))[:, None]) + np.eye(
        problem.dim) / PRIOR_SCALE ** 2
    step = np.linalg.solve(hess, grad)
    b = b + step
    if np.max(np.abs(step) / np.sqrt(np.diag(np.linalg.inv(hess)))) < 1e-10:
      break
  p = 1. / (1. + np.exp(-design @ b))
  hess = design.T @ (design * (p * (1 - p))[:, None]) + np.eye(
      problem.dim) / PRIOR_SCALE ** 2
  return b, np.linalg.inv(hess)


def _reference_key(problem, config):
  digest = hashlib.sha256(np.ascontiguousarray(problem.design).tobytes())
  digest.update(np.ascontiguousarray(problem.y).tobytes())
  settings = dict(prior=PRIOR_SCALE, chains=config.reference_chains,
                  draws=config.reference_draws,
                  warmup=config.reference_warmup, seed=config.seed,
                  version=1)
  digest.update(json.dumps(settings, sort_keys=True).encode())
  return digest.hexdigest()[:16]


def nuts_reference(problem, config, cache_dir=None):
  """Reference posterior mean and sd by full-batch NUTS (cached).

  Returns a dict with `mean`, `sd` (per coefficient), `ess`, `rhat` and
  `seconds`.
  """
  path = None
  if cache_dir is not None:
    path = os.path.join(cache_dir,
                        f"reference_{_reference_key(problem, config)}.npz")
    if os.path.exists(path):
      with np.load(path) as cached:
        return {k: cached[k] for k in cached.files}
  mode, cov = laplace(problem)
  chol = tf.constant(np.linalg.cholesky(cov))
  shift = tf.constant(mode)
  design = tf.constant(problem.design)
  y = tf.constant(problem.y)

  def to_b(z):
    return shift + tf.linalg.matvec(chol, z)

  def target_log_prob(z):
    b = to_b(z)
    logits = tf.einsum("nd,...d->...n", design, b)
    return (tf.reduce_sum(y * logits - tf.math.softplus(logits), -1) +
            log_prior(b))

  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      tfp.mcmc.NoUTurnSampler(target_log_prob,
                              step_size=tf.constant(0.5, tf.float64)),
      num_adaptation_steps=int(0.8 * config.reference_warmup),
      target_accept_prob=0.85)

  @tf.function(jit_compile=True, autograph=False)
  def run(seed):
    return tfp.mcmc.sample_chain(
        config.reference_draws,
        tf.zeros([config.reference_chains, problem.dim], tf.float64),
        kernel=kernel, num_burnin_steps=config.reference_warmup,
        trace_fn=None, seed=seed)

  start = time.time()
  z = run(tf.constant([config.seed, 2024]))
  b = to_b(z)
  seconds = time.time() - start
  ess = tfp.mcmc.effective_sample_size(
      b, filter_beyond_positive_pairs=True).numpy().sum(0)
  rhat = tfp.mcmc.potential_scale_reduction(b).numpy()
  flat = b.numpy().reshape(-1, problem.dim)
  result = dict(mean=flat.mean(0), sd=flat.std(0), ess=ess, rhat=rhat,
                seconds=np.float64(seconds))
  if path is not None:
    os.makedirs(cache_dir, exist_ok=True)
    np.savez(path, **result)
  return result


def make_kernel(method, target, scales):
  """One kernel for all chains: a step size per chain, shape [chains, 1]."""
  s = tf.constant(scales[:, None])
  if method == "sgld":
    return sg.SGLD(target, step_size=0.5 * s ** 2)
  return sg.SGBD(target, step_size=s, variant=method)


def run_sweep(problem, method, config, target_factory=None):
  """Runs `reps` chains per step size from b = 0, all in one XLA program.

  Returns (means, sds, diverged, seconds): means and sds of the second half
  of the chains, pooled per step size, shape [num_scales, dim]; diverged
  [num_scales], True if any of its chains diverged.
  """
  scales = config.scales
  chain_scales = np.repeat(scales, config.reps)
  kernel = make_kernel(method, (target_factory or make_target)(
      problem, config.batch_size),
                       chain_scales)
  num_chains = len(chain_scales)
  thin = max(1, config.num_steps // 2000)
  num_results = config.num_steps // thin

  init = tf.zeros([num_chains, problem.dim], tf.float64)
  seed = tf.constant([config.seed, list(METHOD_LABELS).index(method)])

  @tf.function(jit_compile=True, autograph=False)
  def run(seed):
    return tfp.mcmc.sample_chain(
        num_results, init, kernel=kernel, num_steps_between_results=thin - 1,
        trace_fn=lambda _, r: r.diverged, seed=seed)

  start = time.time()
  if config.progress:
    out = sg.sample_chain_with_progress(
        num_results, init, kernel, seed, trace_fn=lambda _, r: r.diverged,
        num_steps_between_results=thin - 1, desc=METHOD_LABELS[method])
    draws, diverged = out.all_states, out.trace
  else:
    draws, diverged = run(seed)
  seconds = time.time() - start
  kept = np.asarray(draws)[num_results // 2:]
  kept = kept.reshape(kept.shape[0], len(scales), config.reps, problem.dim)
  kept = np.moveaxis(kept, 1, 0).reshape(len(scales), -1, problem.dim)
  diverged = np.asarray(diverged)[-1].reshape(len(scales), config.reps)
  return kept.mean(1), kept.std(1), diverged.any(1), seconds


def longest_run(flags, log10_scales):
  """(lo, hi, decades) of the longest run of consecutive True, or None."""
  best, start = None, None
  for i, flag in enumerate(list(flags) + [False]):
    if flag and start is None:
      start = i
    elif not flag and start is not None:
      lo, hi = log10_scales[start], log10_scales[i - 1]
      if best is None or hi - lo > best[2]:
        best = (lo, hi, hi - lo)
      start = None
  return best


# The two readings of "within": +-2 sd (the figure's lines) and +-1 sd (an
# interval two standard deviations wide).
HALF_WIDTHS = (2., 1.)


def evaluate(sweep, reference, half_width=2.):
  """z-scores of the means, and per-step-size and per-coefficient flags of
  "within reference mean +- half_width sd"."""
  means, sds, diverged, _ = sweep
  z = (means - reference["mean"]) / reference["sd"]
  inside = (np.abs(z) <= half_width) & ~diverged[:, None]
  return z, inside, inside.all(axis=1)


def robust_ranges(results, reference, log10_scales, half_width):
  """{method: {"overall": (lo, hi, decades) or None, "per_coefficient":
  [decades or None]}} under the +-half_width sd reading."""
  out = {}
  for method, (sweep, _) in results.items():
    _, inside, all_inside = evaluate(sweep, reference, half_width)
    runs = [longest_run(inside[:, j], log10_scales)
            for j in range(inside.shape[1])]
    out[method] = dict(
        overall=longest_run(all_inside, log10_scales),
        per_coefficient=[None if r is None else r[2] for r in runs])
  return out


def write_json(path, problem, config, reference, results):
  """Everything the tables are made from, and the ranges under both
  readings, as JSON."""
  log10_scales = [float(v) for v in config.log10_scales]
  data = dict(
      config=dict(log10_scales=log10_scales, reps=config.reps,
                  num_steps=config.num_steps, batch_size=config.batch_size,
                  methods=list(config.methods),
                  reference_chains=config.reference_chains,
                  reference_draws=config.reference_draws,
                  reference_warmup=config.reference_warmup,
                  seed=config.seed),
      coefficients=problem.names,
      reference=dict(mean=reference["mean"].tolist(),
                     sd=reference["sd"].tolist(),
                     min_ess=float(reference["ess"].min()),
                     max_rhat=float(reference["rhat"].max())),
      samplers={}, robust_ranges={})
  for method, (sweep, (z, _, _)) in results.items():
    means, sds, diverged, seconds = sweep
    data["samplers"][method] = dict(
        label=METHOD_LABELS[method], means=means.tolist(),
        sds=sds.tolist(), z=z.tolist(), diverged=diverged.tolist(),
        max_abs_z=np.max(np.abs(z), axis=1).tolist(), seconds=seconds)
  for k in HALF_WIDTHS:
    data["robust_ranges"][f"{k:g}sd"] = robust_ranges(
        results, reference, config.log10_scales, k)
  with open(path, "w") as f:
    json.dump(data, f, indent=1)
  return data


def _fmt_range(run, method=None):
  if run is None:
    return "none"
  lo, hi, decades = run
  text = f"s in [1e{lo:+.2f}, 1e{hi:+.2f}]: {decades:.2f} decades"
  if method == "sgld":
    text += f" (h: {2 * decades:.2f} decades)"
  return text


def write_table(path, problem, config, reference, results):
  log10_scales = np.asarray(config.log10_scales)
  lines = ["# SGLD vs SGBD on Statlog Australian (unscaled covariates)", ""]
  lines += [
      f"Logistic regression, 15 coefficients, prior N(0, {PRIOR_SCALE:g}^2);"
      f" minibatch {config.batch_size} of {len(problem.y)} (with "
      f"replacement); {config.reps} chains per step size from b = 0, "
      f"{config.num_steps} steps each, second half kept. Step-size scale s:"
      " SGBD sigma = s, SGLD h = s^2 / 2.", "",
      f"Reference: NUTS, {config.reference_chains} chains x "
      f"{config.reference_draws} draws after {config.reference_warmup} "
      f"warm-up, min ESS {reference['ess'].min():.0f}, max R-hat "
      f"{reference['rhat'].max():.3f}.", "",
      "The caption's \"interval with two standard deviations width\" "
      "reads as +-2 sd (the figure's lines) or as +-1 sd (two sds wide); "
      "both readings:", ""]
  for k in HALF_WIDTHS:
    lines += [f"## Robust range: all 15 means within the reference mean "
              f"+- {k:g} sd", "",
              "| sampler | robust range | step sizes within |",
              "|---|---|---|"]
    for method, (sweep, _) in results.items():
      _, _, all_inside = evaluate(sweep, reference, k)
      within = ", ".join(f"1e{v:+.2f}" for v in log10_scales[all_inside])
      lines.append(
          f"| {METHOD_LABELS[method]} | "
          f"{_fmt_range(longest_run(all_inside, log10_scales), method)}"
          f" | {within or '-'} |")
    lines.append("")
  for k in HALF_WIDTHS:
    starts = np.abs(reference["mean"]) <= k * reference["sd"]
    lines += [f"## Per coefficient: decades of s with the mean within "
              f"+- {k:g} sd", "",
              "\\* the interval contains the start 0.", "",
              "| coefficient | ref. mean | ref. sd | " +
              " | ".join(METHOD_LABELS[m] for m in results) + " |",
              "|---|---|---|" + "---|" * len(results)]
    for j, name in enumerate(problem.names):
      cells = []
      for method, (sweep, _) in results.items():
        _, inside, _ = evaluate(sweep, reference, k)
        run = longest_run(inside[:, j], log10_scales)
        cells.append("none" if run is None else f"{run[2]:.2f}")
      lines.append(f"| {name}{'*' if starts[j] else ''} | "
                   f"{reference['mean'][j]:.3g} | {reference['sd'][j]:.2g} | "
                   + " | ".join(cells) + " |")
    lines.append("")
  lines += ["## max_j |mean_j - ref_j| / sd_j per step size", "",
            "| s | " + " | ".join(METHOD_LABELS[m] for m in results) + " |",
            "|---|" + "---|" * len(results)]
  for i, v in enumerate(log10_scales):
    cells = []
    for method, (sweep, (z, _, _)) in results.items():
      mark = " (diverged)" if sweep[2][i] else ""
      cells.append(f"{np.max(np.abs(z[i])):.3g}{mark}")
    lines.append(f"| 1e{v:+.2f} | " + " | ".join(cells) + " |")
  seconds = ", ".join(f"{METHOD_LABELS[m]} {r[0][3]:.0f} s"
                      for m, r in results.items())
  lines += ["", f"Sampling time: {seconds}; reference "
            f"{float(reference['seconds']):.0f} s.", ""]
  with open(path, "w") as f:
    f.write("\n".join(lines))
  return "\n".join(lines)


def draw_coefficient_panels(axes, problem, scales, reference, results):
  """One panel per coefficient, smallest posterior sd first: each method's
  estimated mean +- 2 sd against the step-size scale, beside the reference
  mean +- 2 sd (x: a mean off the panel or a diverged run, clipped)."""
  order = np.argsort(reference["sd"])
  offsets = np.linspace(-0.06, 0.06, len(results))
  for ax, j in zip(axes, order):
    m, s = reference["mean"][j], reference["sd"][j]
    for k in (-2., 0., 2.):
      ax.axhline(m + k * s, color="k", lw=1.2 if k else 0.6,
                 ls="-" if k else ":")
    lo, hi = m - 8 * s, m + 8 * s
    for off, (method, (sweep, _)) in zip(offsets, results.items()):
      means, sds, diverged, _ = sweep
      x = scales * 10. ** off
      y = np.clip(means[:, j], lo, hi)
      clipped = (means[:, j] < lo) | (means[:, j] > hi) | diverged
      # No error bar where the mean itself is off the panel.
      err = np.where(clipped, 0., np.minimum(2. * sds[:, j], hi - lo))
      ax.errorbar(x, y, yerr=err, fmt="o-", ms=3, lw=1, capsize=2,
                  color=METHOD_COLORS[method], label=METHOD_LABELS[method])
      ax.plot(x[clipped], y[clipped], "x", color=METHOD_COLORS[method], ms=7)
    ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_title(f"{problem.names[j]} (sd {s:.1e})", fontsize=9)


def write_figure(path, problem, config, reference, results):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  scales = config.scales
  fig, axes = plt.subplots(3, 5, figsize=(17, 9), sharex=True)
  draw_coefficient_panels(axes.ravel(), problem, scales, reference, results)
  for ax in axes.ravel():
    ax.tick_params(labelsize=7)
  for ax in axes[-1]:
    ax.set_xlabel("step-size scale s (SGBD sigma = s, SGLD h = s^2/2)",
                  fontsize=7)
  axes[0, 0].legend(fontsize=7)
  fig.suptitle(
      "Statlog Australian, unscaled covariates: estimated mean +- 2 sd per "
      "step size; black: NUTS mean +- 2 sd (x: off the panel, clipped)",
      fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def run_experiment(problem, config, cache_dir=None, log=print,
                   target_factory=None):
  """The reference and every sampler's sweep: (reference, results)."""
  reference = nuts_reference(problem, config, cache_dir)
  log(f"reference: NUTS {config.reference_chains} x "
      f"{config.reference_draws}, min ESS {reference['ess'].min():.0f}, "
      f"max R-hat {reference['rhat'].max():.3f}, "
      f"{float(reference['seconds']):.0f} s")
  results = {}
  for method in config.methods:
    sweep = run_sweep(problem, method, config, target_factory)
    results[method] = (sweep, evaluate(sweep, reference))
    all_inside = results[method][1][2]
    log(f"{METHOD_LABELS[method]:7s} {sweep[3]:5.0f} s  robust range: "
        f"{_fmt_range(longest_run(all_inside, config.log10_scales), method)}")
  return reference, results


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                      help="directory holding statlog/australian.dat")
  parser.add_argument("--out", default=os.path.join("out", "sgbd"))
  parser.add_argument("--full", action="store_true",
                      help="paper size: finer grid, longer chains")
  parser.add_argument("--batch-size", type=int, default=None)
  parser.add_argument("--progress", action="store_true",
                      help="a progress bar inside each sweep (on with --full)")
  parser.add_argument("--steps", type=int, default=None)
  parser.add_argument("--methods", default=None,
                      help="comma-separated, from sgld,vanilla,corrected,"
                      "extreme (default sgld,vanilla,extreme; c-SGBD costs "
                      "a per-example Jacobian per step)")
  args = parser.parse_args()
  config = FULL if args.full else FAST
  if args.batch_size:
    config = dataclasses.replace(config, batch_size=args.batch_size)
  if args.steps:
    config = dataclasses.replace(config, num_steps=args.steps)
  if args.progress:
    config = dataclasses.replace(config, progress=True)
  if args.methods:
    methods = tuple(args.methods.split(","))
    unknown = set(methods) - set(METHOD_LABELS)
    if unknown:
      parser.error(f"--methods: unknown {sorted(unknown)}; choose from "
                   f"{list(METHOD_LABELS)}")
    config = dataclasses.replace(config, methods=methods)
  os.makedirs(args.out, exist_ok=True)
  problem = load_problem(args.data_dir)
  reference, results = run_experiment(problem, config, cache_dir=args.out)
  name = "sgbd_logistic_full" if args.full else "sgbd_logistic"
  table = write_table(os.path.join(args.out, f"{name}.md"), problem,
                      config, reference, results)
  write_json(os.path.join(args.out, f"{name}.json"), problem, config,
             reference, results)
  write_figure(os.path.join(args.out, f"{name}.png"), problem, config,
               reference, results)
  print(table)
  print(f"wrote {args.out}/{name}.md, {name}.json and {name}.png")


if __name__ == "__main__":
  main()
