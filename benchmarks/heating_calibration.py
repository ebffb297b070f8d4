"""The heating statistic on correct and on heating chains (docs/long_runs.md).

Runs SGLD, SGHMC and AMAGOLD at sound step sizes, and SGLD, SGHMC, SGNHT
and AMAGOLD at 10x and 100x those step sizes, on a Bayesian linear
regression (Gaussian posterior) and a logistic regression (N = 1000, d = 5,
batches of 50 drawn independently per chain, prior N(0, 1)), 500 burn-in
steps and 2000 traced draws, and prints per setting the largest statistic
`tfp_sgmcmc.diagnostics.heating` gave and how many chains exceeded
`HEATING_THRESHOLD`, beside the chains flagged `diverged`.

    python benchmarks/heating_calibration.py            # 4 seeds x 32 chains
    python benchmarks/heating_calibration.py --seeds 1 --chains 8   # quick
"""

import argparse
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import diagnostics

N, D = 1000, 5
# Sound step sizes (posterior precision about N on the linear regression,
# about N / 5 on the logistic one).
SOUND = {("linear", "SGLD"): 1e-4, ("linear", "SGHMC"): 3e-3,
         ("linear", "AMAGOLD"): 3e-3, ("linear", "SGNHT"): 3e-3,
         ("logistic", "SGLD"): 1e-3, ("logistic", "SGHMC"): 1e-2,
         ("logistic", "AMAGOLD"): 1e-2, ("logistic", "SGNHT"): 1e-2}


def target(kind):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(N, D)).astype(np.float32)
  w = rng.normal(size=D).astype(np.float32)
  if kind == "linear":
    y = (x @ w + rng.normal(size=N)).astype(np.float32)

    def log_likelihood(p, batch):
      prediction = tf.reduce_sum(p[..., None, :] * batch[0], -1)
      return -0.5 * (batch[1] - prediction) ** 2
  else:
    y = (rng.uniform(size=N) < 1 / (1 + np.exp(-x @ w))).astype(np.float32)

    def log_likelihood(p, batch):
      logits = tf.reduce_sum(p[..., None, :] * batch[0], -1)
      return -tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.broadcast_to(batch[1], tf.shape(logits)), logits=logits)
  return sg.InMemoryTarget(
      log_likelihood, (x, y), 50,
      log_prior_fn=lambda p: -0.5 * tf.reduce_sum(p ** 2, -1),
      parameter_shapes=[D], independent_minibatches=True)


def kernel(t, name, h):
  if name == "SGLD":
    return sg.SGLD(t, h)
  if name == "SGHMC":
    return sg.SGHMC(t, h, friction=1.)
  if name == "SGNHT":
    return sg.SGNHT(t, h)
  return sg.AMAGOLD(t, h, num_leapfrog_steps=5, friction=1.)


def run(kind, name, factor, seed, chains, num_results=2000, burnin=500):
  """Heating statistic and `diverged` per chain."""
  k = kernel(target(kind), name, SOUND[(kind, name)] * factor)

  def sample(s):
    return tfp.mcmc.sample_chain(
        num_results, tf.zeros([chains, D]), kernel=k,
        num_burnin_steps=burnin, seed=s,
        trace_fn=lambda _, r: (diagnostics.find_field(r, "energy"),
                               diagnostics.find_field(r, "diverged")))
  _, (energy, diverged) = tf.function(sample, jit_compile=True,
                                      autograph=False)(
                                          tf.constant([seed, 7]))
  means, noise = diagnostics.energy_windows(np.asarray(energy))
  return (diagnostics.heating(means, D, noise=noise),
          np.asarray(diverged).any(axis=0))


def main(seeds=4, chains=32):
  warnings.simplefilter("ignore")
  threshold = diagnostics.HEATING_THRESHOLD
  print(f"threshold {threshold:g}; {seeds} seeds x {chains} chains each")
  print(f"{'posterior':9s} {'kernel':8s} {'step':>5s} {'chains':>6s} "
        f"{'diverged':>8s} {'max z':>9s} {'z > thr':>7s}")
  rows = []
  settings = [(kind, name, 1) for kind in ("linear", "logistic")
              for name in ("SGLD", "SGHMC", "AMAGOLD")]
  settings += [(kind, name, factor) for kind in ("linear", "logistic")
               for name in ("SGLD", "SGHMC", "SGNHT", "AMAGOLD")
               for factor in (10, 100)]
  for kind, name, factor in settings:
    z, diverged = zip(*[run(kind, name, factor, s, chains)
                        for s in range(seeds if factor == 1 else 1)])
    z, diverged = np.concatenate(z), np.concatenate(diverged)
    alive = z[~diverged]
    row = dict(posterior=kind, kernel=name, factor=factor, chains=z.size,
               diverged=int(diverged.sum()),
               max_z=float(alive.max()) if alive.size else float("nan"),
               flagged=int((alive > threshold).sum()))
    rows.append(row)
    print(f"{kind:9s} {name:8s} {factor:>4d}x {z.size:6d} "
          f"{row['diverged']:8d} {row['max_z']:9.3g} {row['flagged']:7d}",
          flush=True)
  return rows


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seeds", type=int, default=4)
  parser.add_argument("--chains", type=int, default=32)
  args = parser.parse_args()
  main(args.seeds, args.chains)
