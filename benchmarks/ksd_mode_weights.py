"""How much does KSD see of the double well's mode weights?

The quickstart's double well, U(x) = (x+4)(x+1)(x-1)(x-3)/14 + 0.5, has a
deep mode on the left and a shallow one on the right. Sets of independent
draws (no chain, no step size) from:

* the posterior itself (exact draws, by the inverse CDF on a fine grid);
* the posterior with the left mode's weight moved by `delta` (each mode's
  own shape exact: the left mode's draws with probability w + delta);
* the posterior with each mode's draws widened (or narrowed) about the
  mode's own mean by a factor, the weights exact.

For each law: the true error as `benchmarks/ksd_step_sizes.py` measures it
(the mean's error in posterior sds plus the sd's relative error), and the
IMQ KSD of `--replicates` sets of `--draws` draws against the exact score,
in posterior sds (one scale for every set) with the kernel's length scale
c = 1, 2 and 4 sds. The question for a step-size ranking: does a law whose
true error is larger score a larger KSD, by more than the spread of KSD
over sets of draws of one law?

    python benchmarks/ksd_mode_weights.py [--draws 2000] [--replicates 20]
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import synthetic  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EDGES = np.linspace(-6., 5., 22001)
LENGTH_SCALES = (1., 2., 4.)


def grid():
  """Bin centres, their probabilities, the barrier between the modes."""
  density = synthetic.grid_density(synthetic.double_well_energy, EDGES)
  centres = 0.5 * (EDGES[1:] + EDGES[:-1])
  energy = synthetic.double_well_energy(
      tf.constant(centres[:, None])).numpy()
  inner = (centres > -3.) & (centres < 2.)
  barrier = centres[inner][np.argmax(energy[inner])]
  return centres, density, barrier


def mode_sampler(centres, density, barrier, side):
  """Exact draws from one mode (the posterior restricted to one side of
  the barrier), by the inverse CDF with uniform jitter within a bin."""
  on_side = centres < barrier if side == "left" else centres >= barrier
  p = np.where(on_side, density, 0.)
  cdf = np.concatenate([[0.], np.cumsum(p)]) / p.sum()
  def draw(rng, n):
    return np.interp(rng.uniform(size=n), cdf, EDGES)
  mean = np.sum(p * centres) / p.sum()
  return draw, mean


def law_draws(rng, n, left, right, weight_left, widen=1.):
  """n draws: the left mode with probability `weight_left`, each mode's
  draws scaled by `widen` about its own mean."""
  (draw_l, mean_l), (draw_r, mean_r) = left, right
  is_left = rng.uniform(size=n) < weight_left
  x = np.where(is_left, draw_l(rng, n), draw_r(rng, n))
  mode_mean = np.where(is_left, mean_l, mean_r)
  return mode_mean + widen * (x - mode_mean)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--draws", type=int, default=2000)
  parser.add_argument("--replicates", type=int, default=20)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--out", default=os.path.join(
      HERE, "results", "ksd_mode_weights.json"))
  args = parser.parse_args()

  centres, density, barrier = grid()
  mean = np.sum(density * centres)
  sd = np.sqrt(np.sum(density * (centres - mean) ** 2))
  weight = density[centres < barrier].sum()
  left = mode_sampler(centres, density, barrier, "left")
  right = mode_sampler(centres, density, barrier, "right")
  print(f"posterior mean {mean:.4f}, sd {sd:.4f}; barrier at "
        f"{barrier:.3f}; left mode's weight {weight:.4f}; mode means "
        f"{left[1]:.3f} and {right[1]:.3f}")

  def log_prob(x):
    return -synthetic.double_well_energy(x)

  laws = [("exact", weight, 1.)]
  laws += [(f"left weight {d:+.2f}", weight + d, 1.)
           for d in (-0.2, -0.1, -0.05, 0.05)]
  laws += [(f"modes scaled x{w:g}", weight, w) for w in (0.9, 1.05, 1.1)]
  rng = np.random.default_rng(args.seed)
  rows = []
  for name, w, widen in laws:
    # The law's true error, from a large sample of it (not the KSD's sets).
    big = law_draws(rng, 2_000_000, left, right, w, widen)
    error = abs(big.mean() - mean) / sd + abs(big.std() / sd - 1.)
    ksds = {c: [] for c in LENGTH_SCALES}
    for _ in range(args.replicates):
      x = law_draws(rng, args.draws, left, right, w, widen)
      x = tf.constant(x[:, None], tf.float64)
      for c in LENGTH_SCALES:
        ksds[c].append(float(sg.ksd(
            x, target_log_prob_fn=log_prob, num_chain_dims=0, c=c,
            scale=np.array([sd]), max_draws=args.draws)))
    row = {"law": name, "left_weight": w, "widen": widen,
           "true_error": error,
           "ksd_mean": {str(c): float(np.mean(v)) for c, v in ksds.items()},
           "ksd_sd": {str(c): float(np.std(v, ddof=1))
                      for c, v in ksds.items()}}
    rows.append(row)
    print(f"{name:22s} true error {error:.3f}  " + "  ".join(
        f"c={c:g}: {np.mean(v):.4f} +- {np.std(v, ddof=1):.4f}"
        for c, v in ksds.items()), flush=True)
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, "w") as f:
    json.dump({"args": vars(args), "posterior_mean": mean,
               "posterior_sd": sd, "left_weight": weight,
               "barrier": barrier, "rows": rows}, f, indent=1)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
