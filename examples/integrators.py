"""Chen, Ding & Carin (2015), Figure 1: Euler vs symmetric splitting for SGHMC.

The Gaussian model x_i ~ N(theta, 1), theta ~ N(0, 1), N = 1000 points,
minibatch 10, test function phi(theta) = theta^2. For each step size h, SGHMC
with the Euler integrator and with the symmetric splitting (ABOBA)
integrator (friction D = 10, as the paper's grid) estimates E[theta^2]; the
bias |estimate - truth| is plotted against h. The paper's claim: the Euler
integrator has larger bias and explodes at large step sizes; the splitting
integrator does not.

Here the minibatch gradient is (N + 1) theta - (N / n) sum_batch x_i, whose
noise does not depend on theta, so each chain is a linear Gaussian recursion
and its exact stationary E[theta^2] is also computed (Lyapunov equation):
the "predicted" columns, against which the sampled values can be checked.

    python examples/integrators.py [--out out/integrators] [--full]

Default: 8 chains x 1e5 steps per step size (about a minute on 2 cores);
--full: the paper's L = 1e6 steps.
"""

import argparse
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

warnings.filterwarnings("ignore", message=".*is not calibrated.*")

N, BATCH, FRICTION = 1000, 10, 10.
STEP_SIZES = [0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06]


def make_problem(seed=0):
  rng = np.random.default_rng(seed)
  theta_true = rng.normal()
  x = (theta_true + rng.normal(size=N)).astype(np.float32)
  post_var = 1. / (N + 1)
  post_mean = x.sum() * post_var
  target = sg.InMemoryTarget(
      lambda w, b: -0.5 * (b - w) ** 2,  # w: [..., 1] against b: [n].
      x, BATCH, log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1))
  return x, target, post_mean, post_var


def predicted_second_moment(x, post_mean, h, integrator):
  """Exact stationary E[theta^2] of the discretised chain."""
  precision = N + 1.
  noise = N ** 2 / BATCH * np.var(x.astype(np.float64))
  eye, zero = np.eye(1), np.zeros((1, 1))
  if integrator == "euler":
    a = np.block([[eye, h * eye], [zero, eye]]) @ np.block(
        [[eye, zero], [-h * precision * eye, (1 - h * FRICTION) * eye]])
    g = np.block([[eye, h * eye], [zero, eye]]) @ np.block([[zero], [eye]])
  else:
    half = np.block([[eye, 0.5 * h * eye], [zero, eye]])
    decay = np.block([[eye, zero], [zero, np.exp(-0.5 * FRICTION * h) * eye]])
    kick = np.block([[eye, zero], [-h * precision * eye, eye]])
    a = half @ decay @ kick @ decay @ half
    g = half @ decay @ np.block([[zero], [eye]])
  if np.max(np.abs(np.linalg.eigvals(a))) >= 1:
    return np.inf
  q = (h * h * noise + 2 * FRICTION * h) * (g @ g.T)
  var = scipy.linalg.solve_discrete_lyapunov(a, q)[0, 0]
  return post_mean ** 2 + var  # The recursion has no mean bias.


def run(target, h, integrator, num_steps, chains, seed):
  kernel = sg.SGHMC(target, h, FRICTION, integrator=integrator)

  # Second moment from the running mean and variance of theta.
  moments = sg.sample_moments(kernel, tf.zeros([chains, 1]), num_steps,
                              seed=seed, num_burnin_steps=1000)
  mean = np.asarray(moments.mean, np.float64)
  var = np.asarray(moments.variance, np.float64)
  second = mean ** 2 + var
  diverged = np.asarray(moments.final_kernel_results.diverged)
  finite = np.isfinite(second[:, 0]) & ~diverged & (np.abs(second[:, 0]) <
                                                     1e6)
  return (float(np.mean(second[finite, 0])) if finite.all() else np.inf,
          bool((~finite).any()))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", default="out/integrators")
  parser.add_argument("--full", action="store_true")
  parser.add_argument("--steps", type=int, default=None)
  args = parser.parse_args(argv)
  num_steps = args.steps or (1_000_000 if args.full else 100_000)
  os.makedirs(args.out, exist_ok=True)
  x, target, post_mean, post_var = make_problem()
  truth = post_mean ** 2 + post_var
  rows = []
  print(f"E[theta^2] = {truth:.5f}; SGHMC friction D = {FRICTION}, "
        f"8 chains x {num_steps} steps per step size")
  print(f"{'h':>6s} {'Euler bias':>11s} {'(pred.)':>9s} "
        f"{'split bias':>11s} {'(pred.)':>9s}")
  for i, h in enumerate(STEP_SIZES):
    row = {"step_size": h}
    for integrator in ("euler", "splitting"):
      second, exploded = run(target, h, integrator, num_steps, 8, [i, 7])
      row[integrator] = abs(second - truth) if np.isfinite(second) else np.inf
      row[integrator + "_exploded"] = exploded
      row[integrator + "_predicted"] = abs(
          predicted_second_moment(x, post_mean, h, integrator) - truth)
    rows.append(row)
    fmt = lambda v: "exploded" if not np.isfinite(v) else f"{v:.2e}"
    print(f"{h:6.3f} {fmt(row['euler']):>11s} "
          f"{fmt(row['euler_predicted']):>9s} {fmt(row['splitting']):>11s} "
          f"{fmt(row['splitting_predicted']):>9s}", flush=True)

  fig, ax = plt.subplots(figsize=(6, 4))
  for integrator, style in (("euler", "o-"), ("splitting", "s-")):
    hs = [r["step_size"] for r in rows if np.isfinite(r[integrator])]
    bias = [r[integrator] for r in rows if np.isfinite(r[integrator])]
    ax.semilogy(hs, bias, style, label=f"SGHMC {integrator}")
    boom = [r["step_size"] for r in rows if not np.isfinite(r[integrator])]
    if boom:
      ax.scatter(boom, [max(bias) * 3] * len(boom), marker="x", color="r",
                 label=f"{integrator} exploded")
  ax.set_xlabel("step size h")
  ax.set_ylabel("bias of E[theta^2]")
  ax.set_title("Euler vs splitting (Chen, Ding & Carin 2015, Fig. 1)")
  ax.legend()
  fig.tight_layout()
  path = os.path.join(args.out, "fig1_bias_vs_step_size.png")
  fig.savefig(path, dpi=120)
  with open(os.path.join(args.out, "table.md"), "w") as f:
    f.write("| h | Euler bias | Euler predicted | splitting bias | "
            "splitting predicted |\n|---|---|---|---|---|\n")
    for r in rows:
      f.write(f"| {r['step_size']} | {r['euler']:.3g} | "
              f"{r['euler_predicted']:.3g} | {r['splitting']:.3g} | "
              f"{r['splitting_predicted']:.3g} |\n")
  print(f"wrote {path}")
  return rows, truth


if __name__ == "__main__":
  main(sys.argv[1:])
