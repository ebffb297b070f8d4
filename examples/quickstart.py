"""Quickstart: SG-MCMC on the double well, where exactness matters.

The target is the AMAGOLD paper's double well U(x) = (x+4)(x+1)(x-1)(x-3)/14
+ 0.5 with noisy gradients grad U + N(0, 1). At step size 0.25, SGHMC and
SGLD sample a visibly wrong density; AMAGOLD, whose amortized M-H test uses
the exact energy, samples the right one, and step-size adaptation tunes it
to 85% acceptance from a poor starting step size. Needs no download.

    python examples/quickstart.py [--out out] [--steps 200000]

Prints a table (moments and symmetric KL against the truth) and writes
out/quickstart.png.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import warnings  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import synthetic  # noqa: E402

# SGLD and SGHMC are uncalibrated by design: that is what this demo shows.
warnings.filterwarnings("ignore", message=".*is not calibrated.*")

CHAINS = 4
T = 10


def run(kernel, num_results, seed, burnin=1000, trace=lambda _, r: ()):
  def go(seed):
    return tfp.mcmc.sample_chain(num_results, tf.zeros([CHAINS, 1]),
                                 kernel=kernel, num_burnin_steps=burnin,
                                 trace_fn=trace, seed=seed)
  # One XLA program per kernel, traced once for its seed's signature: a
  # concrete function, so five kernels are not taken for a retracing loop.
  go = tf.function(go, jit_compile=True, autograph=False)
  go = go.get_concrete_function(tf.TensorSpec([2], tf.int32))
  start = time.time()
  draws, traced = go(tf.constant(seed))
  return np.asarray(draws)[..., 0], traced, time.time() - start


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", default="out")
  parser.add_argument("--steps", type=int, default=200000,
                      help="gradient evaluations per chain")
  args = parser.parse_args()
  os.makedirs(args.out, exist_ok=True)

  target = synthetic.noisy_target(synthetic.double_well_energy, 1.)
  edges = np.linspace(-6., 5., 111)
  truth = synthetic.grid_density(synthetic.double_well_energy, edges)
  centres = 0.5 * (edges[1:] + edges[:-1])
  true_mean = np.sum(truth * centres)
  true_var = np.sum(truth * (centres - true_mean) ** 2)

  accept = lambda _, r: r.is_accepted
  adaptive_accept = lambda _, r: (r.inner_results.is_accepted,
                                  r.new_step_size)
  eps = 0.25
  n = args.steps
  # Adaptation steps, fewer on a short run so that steps remain after them.
  adapt = min(800, n // T // 2)
  runs = [
      ("SGLD h=0.1", sg.SGLD(target, step_size=0.1), n, None),
      ("SGHMC Euler eps=0.25", sg.SGHMC(
          target, eps, friction=0.5, momentum_resampling_period=T), n, None),
      ("SGHMC splitting eps=0.25", sg.SGHMC(
          target, eps, friction=0.5, integrator="splitting",
          momentum_resampling_period=T), n, None),
      ("AMAGOLD eps=0.25", sg.AMAGOLD(
          target, eps, num_leapfrog_steps=T, friction=0.25), n // T, accept),
      ("AMAGOLD eps 0.01 -> 85%", tfp.mcmc.SimpleStepSizeAdaptation(
          sg.AMAGOLD(target, 0.01, num_leapfrog_steps=T, friction=0.25),
          num_adaptation_steps=adapt, target_accept_prob=0.85),
       n // T, adaptive_accept),
  ]

  print(f"double well, grad U~ = grad U + N(0, 1); {CHAINS} chains x {n} "
        "gradient evaluations each")
  print(f"truth: mean {true_mean:+.3f}  var {true_var:.3f}")
  header = (f"{'sampler':26s} {'mean':>7s} {'var':>6s} {'sym KL':>7s} "
            f"{'accept':>7s} {'step':>6s} {'secs':>5s}")
  print(header)
  print("-" * len(header))
  fig, ax = plt.subplots(figsize=(7, 4))
  ax.plot(centres, truth / np.diff(edges), "k-", lw=2, label="truth")
  for i, (name, kernel, num, trace) in enumerate(runs):
    burnin = 1000 if trace is None else 100
    draws, traced, secs = run(kernel, num, [i, 2026], burnin,
                              trace or (lambda _, r: ()))
    density = synthetic.histogram_density(draws, edges)
    kl = synthetic.symmetric_kl(truth, density)
    acc, step = "", ""
    if trace is accept:
      acc = f"{np.mean(traced):.2f}"
      step = f"{eps:.3f}"
    elif trace is adaptive_accept:
      acc = f"{np.mean(traced[0][adapt:]):.2f}"
      step = f"{float(np.mean(traced[1][-1])):.3f}"
    print(f"{name:26s} {draws.mean():+7.3f} {draws.var():6.3f} {kl:7.3f} "
          f"{acc:>7s} {step:>6s} {secs:5.1f}", flush=True)
    ax.plot(centres, density / np.diff(edges), label=f"{name} (KL {kl:.3f})",
            lw=1.2)
  ax.set_xlabel("theta")
  ax.set_ylabel("density")
  ax.set_title("Double well with noisy gradients")
  ax.legend(fontsize=7)
  fig.tight_layout()
  path = os.path.join(args.out, "quickstart.png")
  fig.savefig(path, dpi=120)
  print(f"wrote {path}")


if __name__ == "__main__":
  main()
