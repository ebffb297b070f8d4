"""What a dense mass adds to an AMAGOLD transition.

On a standard normal target in d coordinates (its gradient is almost free,
so the mass's own work is what is timed), 4 chains, T = 10 leapfrog steps:
the time per transition of a compiled `tfp.mcmc.sample_chain` with the
identity mass and with `dense_momentum_distribution(C)` (C a random
symmetric positive definite matrix), both in one process, interleaved,
compile time excluded; medians over repeats. A dense transition draws 11
momenta (one per leapfrog step and the refresh) and takes about as many
velocities M^{-1} r, each a [d, d] product per chain.

    python benchmarks/dense_mass_step.py [--dims 20,200,1000] [--repeats 5]
        [--out benchmarks/results]
"""

import argparse
import datetime
import json
import os
import time

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

HERE = os.path.dirname(os.path.abspath(__file__))
NUM_CHAINS = 4
NUM_STEPS = 100


def chain_fn(dim, momentum_distribution):
  target = sg.LogProbFnTarget(lambda w: -0.5 * tf.reduce_sum(w * w, -1))
  extra = ({} if momentum_distribution is None else
           {"momentum_distribution": momentum_distribution})
  kernel = sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=10,
                      friction=0.1, **extra)
  return tf.function(lambda seed: tfp.mcmc.sample_chain(
      NUM_STEPS, tf.zeros([NUM_CHAINS, dim]), kernel=kernel, trace_fn=None,
      seed=seed), jit_compile=True)


def seconds_per_transition(fn, seed):
  start = time.perf_counter()
  fn(tf.constant([seed, 1])).numpy()
  return (time.perf_counter() - start) / NUM_STEPS


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--dims", default="20,200,1000")
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--out", default=os.path.join(HERE, "results"))
  args = parser.parse_args()
  rows = []
  for dim in [int(d) for d in args.dims.split(",")]:
    rng = np.random.default_rng(dim)
    a = rng.normal(size=(dim, dim)) / np.sqrt(dim)
    covariance = (a @ a.T + np.eye(dim)).astype(np.float32)
    fns = {"identity": chain_fn(dim, None),
           "dense": chain_fn(dim, sg.dynamics.mass.dense_momentum_distribution(
               covariance))}
    for fn in fns.values():
      fn(tf.constant([0, 1])).numpy()  # Compiles.
    times = {name: [] for name in fns}
    for repeat in range(args.repeats):
      for name, fn in fns.items():
        times[name].append(seconds_per_transition(fn, repeat + 1))
    identity, dense = (1e3 * np.median(times[k]) for k in ("identity", "dense"))
    rows.append({"dim": dim, "identity_ms": identity, "dense_ms": dense,
                 "dense_minus_identity_ms": dense - identity})
    print(f"d = {dim:5d}: identity {identity:.3f} ms, dense {dense:.3f} ms "
          "per transition")
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "dense_mass_step.json")
  with open(path, "w") as f:
    json.dump({"date": datetime.date.today().isoformat(),
               "load_average": os.getloadavg()[0], "num_chains": NUM_CHAINS,
               "num_leapfrog_steps": 10, "rows": rows}, f, indent=1)
  print("wrote", path)


if __name__ == "__main__":
  main()
