"""AMAGOLD paper, Section 6.1, Figures 2 and 3: 2-D synthetic distributions.

Two 2-D targets with noisy gradients grad U~ = grad U + N(0, I) (as in Chen
et al. 2014). The paper adapts them from Yin & Zhou (2018) and gives the
formulas in its Appendix G.2.1, which our copy of the paper does not contain;
we use Yin & Zhou's own 2-D toy targets (`tfp_sgmcmc.synthetic`):

* Dist1, banana: U(z) = z1^2/8 + (z2 - z1^2/4)^2/2
  (z1 ~ N(0, 2^2), z2 | z1 ~ N(z1^2/4, 1));
* Dist2, X shape: p(z) = 1/2 N(0, [[2, 1.8], [1.8, 2]])
                         + 1/2 N(0, [[2, -1.8], [-1.8, 2]]).

Samplers (Section 6: reversible AMAGOLD, T = 10, beta = 0.25):

* HMC: `tfp.mcmc.HamiltonianMonteCarlo`, exact gradients, T = 10 leapfrog
  steps, M-H every T steps (what AMAGOLD becomes with exact gradients,
  beta = 0 and resampling, Appendix D; we use TFP's own kernel as an
  independent baseline).
* L2MC: "L2MC with amortized M-H correction" = AMAGOLD with the full-batch
  (exact) gradient (Section 5: "using a full-batch gradient, AMAGOLD becomes
  L2MC with amortized M-H-adjustment"): `tfp_sgmcmc.AMAGOLD` on the noiseless
  target, beta = 0.25, T = 10, momentum resampled every M-H test.
* SGHMC: noisy gradients, no M-H; the authors' baseline as in the double-well
  example (Euler SGHMC, friction C = 0.5 = 2 beta, momentum resampled every
  10 steps), one draw kept every 10 steps so that every sampler spends T = 10
  gradients per draw.
* AMAGOLD: noisy gradients, exact-energy amortized M-H every T = 10 steps.

Figure 2 (b, d): symmetric KL divergence between the sample histogram and
the true density (exp(-U) integrated over each cell of the same grid,
`synthetic.grid_density_2d`; empty cells floored at 1e-10,
`synthetic.symmetric_kl`) against the step size 0.01 ... 0.25, on each
distribution. Figure 3: convergence speed of AMAGOLD against L2MC on Dist1 at
step size 0.15: symmetric KL of all draws made so far (pooled over the
chains, no burn-in, chains started at the origin) against the number of
iterations (each iteration is one M-H test and T = 10 gradient evaluations
for both samplers; AMAGOLD's are stochastic, L2MC's full-batch).

The paper draws 5e6 samples from one chain per setting. The default here is
CI-sized (4e5 draws per setting over 400 chains); `--full` draws the paper's
5e6 per setting, over 1000 chains.

SGHMC's KL is not monotone in the step size here: this Euler SGHMC with the
momentum resampled every 10 steps is too cold at small step sizes (with
exact gradients at eps = 0.05 its Dist1 variances are 3.66 and 2.61, not 4
and 3) and too hot at large ones (the gradient noise), and the two nearly
cancel near eps = 0.15.

Outputs (into --out): fig2a_dist1_densities.png, fig2b_dist1_kl.png,
fig2c_dist2_densities.png, fig2d_dist2_kl.png, fig3_convergence_dist1.png,
table.md and results.json.

    python examples/papers/amagold/synthetic_2d.py [--out out/synthetic_2d] \
        [--full]
"""

import argparse
import functools
import json
import os
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import synthetic  # noqa: E402

# SGHMC is uncalibrated by design: that is what this experiment shows.
warnings.filterwarnings("ignore", message=".*is not calibrated.*")

NUM_LEAPFROG_STEPS = 10  # T
FRICTION = 0.25          # beta (AMAGOLD and L2MC)
SGHMC_FRICTION = 0.5     # C = 2 beta
GRADIENT_NOISE_VARIANCE = 1.
STEP_SIZES = (0.01, 0.05, 0.1, 0.15, 0.2, 0.25)
CONVERGENCE_STEP_SIZE = 0.15
SAMPLERS = ("hmc", "l2mc", "sghmc", "amagold")
LABELS = dict(hmc="HMC", l2mc="L2MC", sghmc="SGHMC", amagold="AMAGOLD")
STYLES = dict(hmc="k^-", l2mc="gv-", sghmc="ro-", amagold="bs-")

# XLA compilation costs seconds per sampler and pays off from about 1e4
# draws; tiny runs (the notebook's CI size) are faster without it.
JIT_COMPILE = True

# Grids of 0.5 x 0.5 cells; the mass outside each is below 1e-3.
DISTRIBUTIONS = {
    "dist1": dict(name="banana", energy=synthetic.banana_energy,
                  edges_x=np.linspace(-7., 7., 29),
                  edges_y=np.linspace(-3., 12., 31)),
    "dist2": dict(name="X shape", energy=synthetic.x_shape_energy,
                  edges_x=np.linspace(-6., 6., 25),
                  edges_y=np.linspace(-6., 6., 25)),
}

DEFAULT = dict(num_chains=400, draws_per_chain=1000, burnin=200,
               convergence_iterations=2000)
FULL = dict(num_chains=1000, draws_per_chain=5000, burnin=500,
            convergence_iterations=20000)


def target(dist, noisy):
  return synthetic.noisy_target_2d(
      DISTRIBUTIONS[dist]["energy"],
      GRADIENT_NOISE_VARIANCE if noisy else 0.)


@functools.lru_cache(maxsize=None)
def true_bin_probabilities(dist):
  d = DISTRIBUTIONS[dist]
  return synthetic.grid_density_2d(d["energy"], d["edges_x"], d["edges_y"])


def histogram(dist, draws):
  d = DISTRIBUTIONS[dist]
  return synthetic.histogram_density_2d(draws, d["edges_x"], d["edges_y"])


def kl_to_truth(dist, draws):
  return synthetic.symmetric_kl(true_bin_probabilities(dist),
                                histogram(dist, draws))


def make_kernel(dist, sampler, step_size):
  """The transition kernel of one sampler; one draw per T gradients except
  for SGHMC (thinned by `sample`)."""
  if sampler == "hmc":
    energy = DISTRIBUTIONS[dist]["energy"]
    return tfp.mcmc.HamiltonianMonteCarlo(
        lambda z: -energy(z), step_size=step_size,
        num_leapfrog_steps=NUM_LEAPFROG_STEPS)
  if sampler == "sghmc":
    return sg.SGHMC(target(dist, noisy=True), step_size,
                    friction=SGHMC_FRICTION, integrator="euler",
                    momentum_resampling_period=NUM_LEAPFROG_STEPS)
  if sampler in ("l2mc", "amagold"):
    return sg.AMAGOLD(target(dist, noisy=sampler == "amagold"), step_size,
                      num_leapfrog_steps=NUM_LEAPFROG_STEPS,
                      friction=FRICTION)
  raise ValueError(f"unknown sampler {sampler!r}; expected one of "
                   f"{SAMPLERS}.")


@functools.lru_cache(maxsize=None)
def _compiled(dist, sampler, num_chains, num_draws, burnin, jit_compile):
  """A compiled `(step_size, seed) -> (draws, accept)`; the step size is a
  tensor argument, so all step sizes share one XLA compilation."""
  def run(step_size, seed):
    kernel = make_kernel(dist, sampler, step_size)
    init = tf.zeros([num_chains, 2])
    if sampler == "sghmc":
      draws = tfp.mcmc.sample_chain(
          num_draws, init, kernel=kernel, trace_fn=None,
          num_burnin_steps=burnin * NUM_LEAPFROG_STEPS,
          num_steps_between_results=NUM_LEAPFROG_STEPS - 1, seed=seed)
      return draws, tf.ones([num_draws, num_chains])
    return tfp.mcmc.sample_chain(
        num_draws, init, kernel=kernel, num_burnin_steps=burnin,
        trace_fn=lambda _, r: tf.exp(tf.minimum(r.log_accept_ratio, 0.)),
        seed=seed)
  return tf.function(run, jit_compile=jit_compile, autograph=False)


def sample(dist, sampler, step_size, seed, num_chains, num_draws, burnin):
  """Draws of shape [num_draws, num_chains, 2] and the mean acceptance
  probability (1 for SGHMC)."""
  fn = _compiled(dist, sampler, num_chains, num_draws, burnin, JIT_COMPILE)
  draws, accept = fn(tf.constant(step_size, tf.float32),
                     tf.constant(seed, tf.int32))
  return np.asarray(draws), float(np.mean(accept))


def _stream(dist, sampler, step_size):
  # Seeds depend on the setting, not its position in a list, so a subset of
  # step sizes reproduces the same runs.
  return (1000000 * (1 + sorted(DISTRIBUTIONS).index(dist)) +
          1000 * (1 + SAMPLERS.index(sampler)) + int(round(1000 * step_size)))


def kl_vs_step_size(dist, num_chains, draws_per_chain, burnin, seed=0,
                    step_sizes=STEP_SIZES, samplers=SAMPLERS, verbose=True,
                    keep_draws_at=()):
  """Figure 2 (b, d): one row per step size with each sampler's symmetric KL
  and acceptance rate; `draws` holds the draws at the step sizes in
  `keep_draws_at` (for the density panels)."""
  rows, kept = [], {}
  for eps in step_sizes:
    start = time.time()
    row = dict(distribution=dist, step_size=eps)
    for sampler in samplers:
      draws, accept = sample(dist, sampler, eps,
                             [seed, _stream(dist, sampler, eps)],
                             num_chains, draws_per_chain, burnin)
      row[f"{sampler}_kl"] = kl_to_truth(dist, draws)
      if sampler != "sghmc":
        row[f"{sampler}_accept"] = accept
      if eps in keep_draws_at:
        kept[(sampler, eps)] = draws
    row["secs"] = time.time() - start
    rows.append(row)
    if verbose:
      print(f"{dist} eps {eps:5.2f}  " + "  ".join(
          f"{LABELS[s]} {row[f'{s}_kl']:.4f}" for s in samplers) +
            "  acc " + " ".join(f"{row[f'{s}_accept']:.2f}" for s in samplers
                                if s != "sghmc") +
            f"  ({row['secs']:.1f} s)", flush=True)
  return dict(rows=rows, draws=kept)


def checkpoints(num_iterations, num=12):
  return sorted({int(n) for n in np.geomspace(10, num_iterations, num)})


def convergence(num_chains, num_iterations, seed=0, dist="dist1",
                step_size=CONVERGENCE_STEP_SIZE, samplers=("l2mc", "amagold"),
                verbose=True):
  """Figure 3: symmetric KL of the draws of iterations 1..n (pooled over the
  chains, no burn-in, chains started at the origin) for n on a log grid."""
  ns = checkpoints(num_iterations)
  curves = {}
  for sampler in samplers:
    start = time.time()
    draws, accept = sample(dist, sampler, step_size,
                           [seed + 1, _stream(dist, sampler, step_size)],
                           num_chains, num_iterations, 0)
    curves[sampler] = dict(iterations=ns, accept=accept,
                           kl=[kl_to_truth(dist, draws[:n]) for n in ns])
    if verbose:
      print(f"convergence {LABELS[sampler]:8s} eps {step_size}: KL " +
            " ".join(f"{k:.3f}" for k in curves[sampler]["kl"]) +
            f"  acc {accept:.3f}  ({time.time() - start:.1f} s)", flush=True)
  return dict(distribution=dist, step_size=step_size, num_chains=num_chains,
              gradients_per_iteration=NUM_LEAPFROG_STEPS, curves=curves)


def run_experiment(num_chains, draws_per_chain, burnin, convergence_iterations,
                   seed=0, step_sizes=STEP_SIZES, verbose=True):
  largest = max(step_sizes)
  out = dict(size=dict(num_chains=num_chains, draws_per_chain=draws_per_chain,
                       burnin=burnin,
                       convergence_iterations=convergence_iterations),
             seed=seed, kl={}, draws={})
  for dist in sorted(DISTRIBUTIONS):
    res = kl_vs_step_size(dist, num_chains, draws_per_chain, burnin, seed,
                          step_sizes, verbose=verbose,
                          keep_draws_at=(largest,))
    out["kl"][dist] = res["rows"]
    out["draws"][dist] = res["draws"]
  out["convergence"] = convergence(num_chains, convergence_iterations, seed,
                                   verbose=verbose)
  return out


def _density_figure(path, dist, draws, step_size):
  d = DISTRIBUTIONS[dist]
  ex, ey = d["edges_x"], d["edges_y"]
  area = np.diff(ex)[0] * np.diff(ey)[0]
  panels = [("true density", true_bin_probabilities(dist))]
  for sampler in ("sghmc", "amagold"):
    hist = histogram(dist, draws[(sampler, step_size)])
    kl = synthetic.symmetric_kl(true_bin_probabilities(dist), hist)
    panels.append((f"{LABELS[sampler]}, eps {step_size:g} (KL {kl:.1e})",
                   hist))
  vmax = max(p.max() for _, p in panels) / area
  fig, axes = plt.subplots(1, 3, figsize=(10, 3.4), sharey=True)
  for ax, (title, p) in zip(axes, panels):
    ax.pcolormesh(ex, ey, p.T / area, vmin=0., vmax=vmax, cmap="viridis")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("z1")
  axes[0].set_ylabel("z2")
  fig.suptitle(f"{dist} ({d['name']})", fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def _samplers_in(rows):
  return [s for s in SAMPLERS if f"{s}_kl" in rows[0]]


def _kl_figure(path, dist, rows):
  fig, ax = plt.subplots(figsize=(5, 3.5))
  eps = [r["step_size"] for r in rows]
  for sampler in _samplers_in(rows):
    ax.plot(eps, [r[f"{sampler}_kl"] for r in rows], STYLES[sampler],
            label=LABELS[sampler], ms=4)
  ax.set_xlabel("step size")
  ax.set_ylabel("symmetric KL")
  ax.set_yscale("log")
  ax.set_title(f"{dist} ({DISTRIBUTIONS[dist]['name']})", fontsize=10)
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def _convergence_figure(path, conv):
  fig, ax = plt.subplots(figsize=(5, 3.5))
  for sampler, curve in conv["curves"].items():
    ax.plot(curve["iterations"], curve["kl"], STYLES[sampler],
            label=f"{LABELS[sampler]} (acc. {curve['accept']:.2f})", ms=4)
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel(f"iterations (x{conv['gradients_per_iteration']} gradients, "
                f"{conv['num_chains']} chains)")
  ax.set_ylabel("symmetric KL")
  ax.set_title(f"{conv['distribution']}, step size {conv['step_size']:g}",
               fontsize=10)
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def write_figures(result, out):
  os.makedirs(out, exist_ok=True)
  paths = []
  for letters, dist in (("ab", "dist1"), ("cd", "dist2")):
    if dist not in result["kl"]:
      continue
    rows = result["kl"][dist]
    largest = max(r["step_size"] for r in rows)
    path = os.path.join(out, f"fig2{letters[0]}_{dist}_densities.png")
    _density_figure(path, dist, result["draws"][dist], largest)
    paths.append(path)
    path = os.path.join(out, f"fig2{letters[1]}_{dist}_kl.png")
    _kl_figure(path, dist, rows)
    paths.append(path)
  if "convergence" in result:
    path = os.path.join(out, "fig3_convergence_dist1.png")
    _convergence_figure(path, result["convergence"])
    paths.append(path)
  return paths


def write_tables(result, out):
  os.makedirs(out, exist_ok=True)
  samplers = _samplers_in(next(iter(result["kl"].values())))
  calibrated = [s for s in samplers if s != "sghmc"]
  lines = ["| distribution | step size | " +
           " | ".join(f"{LABELS[s]} KL" for s in samplers) + " | " +
           " | ".join(f"{LABELS[s]} acc." for s in calibrated) + " |",
           "|---|---:|" + "---:|" * (len(samplers) + len(calibrated))]
  for dist in sorted(result["kl"]):
    for r in result["kl"][dist]:
      lines.append(
          f"| {dist} ({DISTRIBUTIONS[dist]['name']}) | {r['step_size']:g} | " +
          " | ".join(f"{r[f'{s}_kl']:.2e}" for s in samplers) + " | " +
          " | ".join(f"{r[f'{s}_accept']:.3f}" for s in calibrated) + " |")
  conv = result.get("convergence")
  if conv is not None:
    lines += ["", f"Convergence on {conv['distribution']}, step size "
            f"{conv['step_size']:g} ({conv['num_chains']} chains): symmetric "
              "KL of the draws of iterations 1..n", "",
              "| iterations n | " + " | ".join(
                  LABELS[s] for s in conv["curves"]) + " |",
              "|---:|" + "---:|" * len(conv["curves"])]
    first = next(iter(conv["curves"].values()))
    for i, n in enumerate(first["iterations"]):
      lines.append(f"| {n} | " + " | ".join(
          f"{c['kl'][i]:.2e}" for c in conv["curves"].values()) + " |")
  md = os.path.join(out, "table.md")
  with open(md, "w") as f:
    f.write("\n".join(lines) + "\n")
  js = os.path.join(out, "results.json")
  with open(js, "w") as f:
    json.dump({k: v for k, v in result.items() if k != "draws"}, f, indent=1)
  return [md, js]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", default=os.path.join("out", "synthetic_2d"))
  parser.add_argument("--full", action="store_true",
                      help="the paper's 5e6 draws per setting (1000 chains)")
  parser.add_argument("--chains", type=int, help="override the chain count")
  parser.add_argument("--draws-per-chain", type=int,
                      help="override the draws kept per chain")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  size = dict(FULL if args.full else DEFAULT)
  if args.chains:
    size["num_chains"] = args.chains
  if args.draws_per_chain:
    size["draws_per_chain"] = args.draws_per_chain
  n = size["num_chains"] * size["draws_per_chain"]
  print(f"2-D synthetic targets, grad U~ = grad U + N(0, I); T = "
        f"{NUM_LEAPFROG_STEPS}, beta = {FRICTION}, SGHMC C = "
        f"{SGHMC_FRICTION}; {n} draws per setting ({size['num_chains']} "
        f"chains), {size['burnin']} burn-in iterations", flush=True)
  start = time.time()
  result = run_experiment(seed=args.seed, **size)
  for path in write_figures(result, args.out) + write_tables(result,
                                                             args.out):
    print(f"wrote {path}")
  print(f"total {time.time() - start:.1f} s")
  return result


if __name__ == "__main__":
  main()
