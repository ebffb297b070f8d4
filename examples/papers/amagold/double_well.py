"""AMAGOLD paper, Section 5 and Figure 1: the double well with noisy gradients.

U(theta) = (theta+4)(theta+1)(theta-1)(theta-3)/14 + 0.5 and
grad U~ = grad U + N(0, 1). Settings from the paper and the authors' MATLAB
code: T = 10 gradient steps per M-H test, beta = 0.25 (their C = 0.5,
beta = C / 2), sigma = 1, momentum resampled every outer step (reversible
AMAGOLD), 1000 burn-in outer steps, x0 = 0. Their SGHMC baseline is Euler
SGHMC with friction C = 0.5,

    p <- p - grad U~ dt - C p dt + N(0, 2 C dt),   x <- x + p dt,

with the momentum resampled every 10 steps: exactly `tfp_sgmcmc.SGHMC(...,
friction=0.5, integrator="euler", momentum_resampling_period=10)` (its
r' = r - h grad U~ - h C r + N(0, 2 C h) is the same update, mass 1).

Both samplers get the same gradient budget: AMAGOLD keeps one draw per outer
step (10 gradients), SGHMC one draw every 10 steps. The default run keeps the
paper's 1e5 draws per sampler and step size but spreads them over 40 chains
run side by side; `--full` is the paper's protocol, one chain of 1e5 draws
(noisier, since one chain crosses between the wells less often than 40 do).

Figures (PNG, into --out):

* fig1a_sghmc_eps0.25.png: SGHMC's density at eps = 0.25 against the truth;
* fig1b_amagold_eps0.25.png: AMAGOLD's at eps = 0.25;
* fig1c_tuned_amagold.png: AMAGOLD started at eps = 0.01 and tuned to 85%
  acceptance during burn-in (`tfp.mcmc.DualAveragingStepSizeAdaptation`),
  against fixed eps = 0.01 AMAGOLD and SGHMC;
* fig1d_kl_vs_step_size.png: symmetric KL against the step size.

The truth is exp(-U) integrated over each histogram bin by quadrature on a
fine sub-grid; the samplers' densities are histograms on the same bins.
Symmetric KL is KL(p||q) + KL(q||p) over the bins, with empty bins floored at
1e-10 probability (then renormalised; `tfp_sgmcmc.synthetic.symmetric_kl`),
so a sampler that misses a region is penalised heavily, not infinitely. The
histogram has 110 bins of width 0.1 on [-6, 5]; U > 26 outside it.

    python examples/papers/amagold/double_well.py [--out out/double_well] \
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
FRICTION = 0.25          # beta = C / 2
SGHMC_FRICTION = 0.5     # C
MOMENTUM_RESAMPLING_PERIOD = 10
TARGET_ACCEPT = 0.85
TUNED_START = 0.01
STEP_SIZES = (0.01, 0.05, 0.1, 0.15, 0.2, 0.25)
EDGES = np.linspace(-6., 5., 111)

DEFAULT = dict(num_chains=40, draws_per_chain=2500, burnin=1000)
FULL = dict(num_chains=1, draws_per_chain=100000, burnin=1000)


def target():
  return synthetic.noisy_target(synthetic.double_well_energy, 1.)


@functools.lru_cache(maxsize=None)
def true_bin_probabilities():
  return synthetic.grid_density(synthetic.double_well_energy, EDGES)


def kl_to_truth(draws):
  return synthetic.symmetric_kl(true_bin_probabilities(),
                                synthetic.histogram_density(draws, EDGES))


@functools.lru_cache(maxsize=None)
def _compiled(sampler, num_chains, draws_per_chain, burnin):
  """A compiled `(step_size, seed) -> (draws, accept)` for one sampler.

  The step size is a tensor argument, so all step sizes share one XLA
  compilation.
  """
  def run(step_size, seed):
    init = tf.zeros([num_chains, 1])
    if sampler == "sghmc":
      kernel = sg.SGHMC(target(), step_size, friction=SGHMC_FRICTION,
                        integrator="euler",
                        momentum_resampling_period=MOMENTUM_RESAMPLING_PERIOD)
      draws = tfp.mcmc.sample_chain(
          draws_per_chain, init, kernel=kernel, trace_fn=None,
          num_burnin_steps=burnin * NUM_LEAPFROG_STEPS,
          num_steps_between_results=NUM_LEAPFROG_STEPS - 1, seed=seed)
      return draws, tf.ones([draws_per_chain, num_chains])
    kernel = sg.AMAGOLD(target(), step_size,
                        num_leapfrog_steps=NUM_LEAPFROG_STEPS,
                        friction=FRICTION)
    if sampler == "amagold":
      return tfp.mcmc.sample_chain(
          draws_per_chain, init, kernel=kernel, num_burnin_steps=burnin,
          trace_fn=lambda _, r: tf.exp(tf.minimum(r.log_accept_ratio, 0.)),
          seed=seed)
    # Tuned: eps adapted during burn-in, then fixed for the kept draws.
    kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
        kernel, num_adaptation_steps=burnin,
        target_accept_prob=TARGET_ACCEPT)
    draws, (accept, eps) = tfp.mcmc.sample_chain(
        draws_per_chain, init, kernel=kernel, num_burnin_steps=burnin,
        trace_fn=lambda _, r: (
            tf.exp(tf.minimum(r.inner_results.log_accept_ratio, 0.)),
            r.inner_results.accepted_results.step_size),
        seed=seed)
    return draws, accept, eps
  return tf.function(run, jit_compile=True, autograph=False)


def sample(sampler, step_size, seed, num_chains, draws_per_chain, burnin):
  """Draws (flattened over chains) and the mean acceptance probability.

  For `sampler="tuned"`, `step_size` is the starting value and the adapted
  step size is returned too.
  """
  fn = _compiled(sampler, num_chains, draws_per_chain, burnin)
  out = fn(tf.constant(step_size, tf.float32), tf.constant(seed, tf.int32))
  draws = np.asarray(out[0])[..., 0]
  result = dict(draws=draws.ravel(), accept=float(np.mean(out[1])))
  if sampler == "tuned":
    result["step_size"] = float(np.asarray(out[2])[-1])
  return result


def run_experiment(num_chains, draws_per_chain, burnin, seed=0,
                   step_sizes=STEP_SIZES, verbose=True):
  """Symmetric KL against the step size, and the tuned run.

  Returns a dict with `rows` (step size, SGHMC KL, AMAGOLD KL, AMAGOLD
  acceptance), `densities` for the figures and `tuned` (adapted step size,
  acceptance, KL).
  """
  size = dict(num_chains=num_chains, draws_per_chain=draws_per_chain,
              burnin=burnin)
  rows, densities = [], {}
  for eps in step_sizes:
    start = time.time()
    # Seeds depend on the step size, not its position in the list, so a
    # subset of step sizes reproduces the same runs.
    stream = 2 * int(round(1000 * eps))
    sghmc = sample("sghmc", eps, [seed, stream], **size)
    amagold = sample("amagold", eps, [seed, stream + 1], **size)
    row = dict(step_size=eps, sghmc_kl=kl_to_truth(sghmc["draws"]),
               amagold_kl=kl_to_truth(amagold["draws"]),
               amagold_accept=amagold["accept"], secs=time.time() - start)
    rows.append(row)
    densities[("sghmc", eps)] = sghmc["draws"]
    densities[("amagold", eps)] = amagold["draws"]
    if verbose:
      print(f"{eps:9.2f} {row['sghmc_kl']:10.4f} {row['amagold_kl']:11.4f} "
            f"{row['amagold_accept']:9.2f} {row['secs']:6.1f}", flush=True)
  tuned = sample("tuned", TUNED_START, [seed, 1], **size)
  tuned["kl"] = kl_to_truth(tuned["draws"])
  return dict(rows=rows, densities=densities, tuned=tuned)


def _density_plot(path, title, curves):
  centres = 0.5 * (EDGES[1:] + EDGES[:-1])
  width = np.diff(EDGES)
  fig, ax = plt.subplots(figsize=(6, 3.8))
  ax.plot(centres, true_bin_probabilities() / width, "k-", lw=2,
          label="true density")
  for label, draws, style in curves:
    ax.plot(centres, synthetic.histogram_density(draws, EDGES) / width, style,
            lw=1.3, label=label)
  ax.set_xlabel("theta")
  ax.set_ylabel("density")
  ax.set_title(title)
  ax.legend(fontsize=7, loc="upper right", framealpha=0.6)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def write_figures(result, out):
  os.makedirs(out, exist_ok=True)
  d = result["densities"]
  largest = max(r["step_size"] for r in result["rows"])
  smallest = min(r["step_size"] for r in result["rows"])
  paths = []
  for name, key, style in (("a", "sghmc", "r--"), ("b", "amagold", "b--")):
    path = os.path.join(out, f"fig1{name}_{key}_eps{largest:g}.png")
    kl = kl_to_truth(d[(key, largest)])
    _density_plot(path, f"{key.upper()}, step size {largest:g}",
                  [(f"{key.upper()} (sym. KL {kl:.3f})", d[(key, largest)],
                    style)])
    paths.append(path)
  tuned = result["tuned"]
  path = os.path.join(out, "fig1c_tuned_amagold.png")
  curves = [(f"tuned AMAGOLD, eps {TUNED_START:g} -> "
             f"{tuned['step_size']:.3f} (KL {tuned['kl']:.3f})",
             tuned["draws"], "b--")]
  for key, style in (("amagold", "g:"), ("sghmc", "r:")):
    curves.append((f"{key.upper()} eps {smallest:g} "
                   f"(KL {kl_to_truth(d[(key, smallest)]):.3f})",
                   d[(key, smallest)], style))
  _density_plot(path, f"Tuned to {TARGET_ACCEPT:.0%} acceptance", curves)
  paths.append(path)
  path = os.path.join(out, "fig1d_kl_vs_step_size.png")
  fig, ax = plt.subplots(figsize=(5, 3.5))
  eps = [r["step_size"] for r in result["rows"]]
  ax.plot(eps, [r["sghmc_kl"] for r in result["rows"]], "ro-", label="SGHMC")
  ax.plot(eps, [r["amagold_kl"] for r in result["rows"]], "bs-",
          label="AMAGOLD")
  ax.set_xlabel("step size")
  ax.set_ylabel("symmetric KL")
  ax.set_yscale("log")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
  paths.append(path)
  return paths


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", default=os.path.join("out", "double_well"))
  parser.add_argument("--full", action="store_true",
                      help="the paper's protocol: one chain of 1e5 draws per "
                           "sampler and step size")
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
  print(f"double well, grad U~ = grad U + N(0, 1); T = {NUM_LEAPFROG_STEPS}, "
        f"beta = {FRICTION}, SGHMC C = {SGHMC_FRICTION}; {n} draws per run "
        f"({size['num_chains']} chains), {size['burnin']} burn-in")
  print(f"{'step size':>9s} {'SGHMC KL':>10s} {'AMAGOLD KL':>11s} "
        f"{'accept':>9s} {'secs':>6s}")
  start = time.time()
  result = run_experiment(seed=args.seed, **size)
  tuned = result["tuned"]
  print(f"tuned AMAGOLD: eps {TUNED_START:g} -> {tuned['step_size']:.4f}, "
        f"acceptance {tuned['accept']:.3f} (target {TARGET_ACCEPT}), "
        f"symmetric KL {tuned['kl']:.4f}")
  for path in write_figures(result, args.out):
    print(f"wrote {path}")
  # The table's numbers beside the figures, so the docs cite a file.
  path = os.path.join(args.out, "results.json")
  with open(path, "w") as f:
    json.dump(dict(size=size, seed=args.seed, rows=[
        {k: v for k, v in r.items() if k != "secs"} for r in result["rows"]],
                   tuned={k: tuned[k] for k in ("step_size", "accept", "kl")}),
              f, indent=1)
  print(f"wrote {path}")
  print(f"total {time.time() - start:.1f} s")
  return result


if __name__ == "__main__":
  main()
