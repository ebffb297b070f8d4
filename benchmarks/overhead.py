"""Overhead of each sampler step over its physical floor.

A sampler step cannot cost less than the minibatch gradient it needs. For
each kernel and problem this prints

    time per gradient evaluation of the kernel
    --------------------------------------------------------------
    time per gradient of a compiled loop that only draws the same
    minibatches and computes the same gradients

(goal <= 1.10 for the kernels without an M-H test). For AMAGOLD with the
exact M-H test the floor is T minibatch gradients plus one full-data energy
per outer step (goal <= 1.2), and the minibatch-M-H variant is reported
against the plain gradient floor. Both sides run in one process,
interleaved, compile time excluded; medians of per-pair ratios.

    python benchmarks/overhead.py [--repeats 5] [--out out/benchmarks]
"""

import argparse
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import common  # noqa: E402
import tfp_sgmcmc as sg  # noqa: E402

T = 10


def mnist_mlp(batch_size=500):
  path = os.path.join(common.SHARED_DATA, "mnist")
  with gzip.open(os.path.join(path, "t10k-images-idx3-ubyte.gz")) as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
  with gzip.open(os.path.join(path, "t10k-labels-idx1-ubyte.gz")) as f:
    y = np.frombuffer(f.read(), np.uint8, offset=8)
  x = (x / 255.).astype(np.float32)
  y = y.astype(np.int32)

  def log_likelihood(params, batch):
    w1, b1, w2, b2 = params
    xb, yb = batch
    logits = tf.nn.relu(xb @ w1 + b1) @ w2 + b2
    return -tf.nn.sparse_softmax_cross_entropy_with_logits(yb, logits)

  def log_prior(params):
    return sum(-0.5 * tf.reduce_sum(p ** 2) for p in params)
  target = sg.InMemoryTarget(log_likelihood, (x, y), batch_size,
                             log_prior_fn=log_prior)
  rng = np.random.default_rng(0)
  init = [tf.constant(rng.normal(size=(784, 100)) * 0.05, tf.float32),
          tf.zeros([100]),
          tf.constant(rng.normal(size=(100, 10)) * 0.1, tf.float32),
          tf.zeros([10])]
  return target, init, "MLP 784-100-10, MNIST 10k, batch 500"


def exact_mh_floor(target, num_outer):
  """T minibatch gradients + one full-data energy per outer step."""
  grads = common.bare_gradient_loop(target, T)

  @tf.function(jit_compile=True, autograph=False)
  def run(state, seed):
    def body(i, state, seed):
      seed, s1 = tfp.random.split_seed(seed)
      inner = grads.python_function(state, s1)
      energy = target.energy(inner)
      state = tf.nest.map_structure(lambda s: s + 1e-30 * energy, inner)
      return i + 1, state, seed
    _, state, _ = tf.while_loop(lambda i, *_: i < num_outer, body,
                                (tf.constant(0), state, seed))
    return state
  return run


def kernels(target, h, friction):
  out = {
      "SGLD": sg.SGLD(target, h),
      "SGHMC Euler": sg.SGHMC(target, h, friction),
      "SGHMC splitting": sg.SGHMC(target, h, friction,
                                  integrator="splitting"),
      "SGNHT": sg.SGNHT(target, h),
  }
  if hasattr(sg, "SGBD"):
    out["SGBD"] = sg.SGBD(target, h)
  return out


def bench_problem(name, target, init, num_steps, h, friction, repeats):
  rows = []
  seed = tf.constant([1, 2])
  floor = common.bare_gradient_loop(target, num_steps)
  for kname, kernel in kernels(target, h, friction).items():
    loop = common.kernel_loop(kernel, num_steps)
    t = common.interleaved({"kernel": loop, "floor": floor}, (init, seed),
                           repeats)
    ratio = common.median_ratio(t["kernel"], t["floor"])
    rows.append(dict(problem=name, kernel=kname,
                     us_per_gradient=1e6 * np.median(t["kernel"]) / num_steps,
                     floor_us=1e6 * np.median(t["floor"]) / num_steps,
                     ratio=ratio, goal=1.10))
    print(f"{name:38s} {kname:22s} {rows[-1]['us_per_gradient']:9.1f} "
          f"{rows[-1]['floor_us']:9.1f} {ratio:6.2f}  (goal <= 1.10)",
          flush=True)
  num_outer = max(num_steps // T, 1)
  for mode in ("exact", "minibatch"):
    kernel = sg.AMAGOLD(target, h, num_leapfrog_steps=T,
                        friction=friction / 2, acceptance_energy=mode)
    loop = common.kernel_loop(kernel, num_outer)
    fl = (exact_mh_floor(target, num_outer) if mode == "exact" else
          common.bare_gradient_loop(target, num_outer * T))
    t = common.interleaved({"kernel": loop, "floor": fl}, (init, seed),
                           repeats)
    ratio = common.median_ratio(t["kernel"], t["floor"])
    label = f"AMAGOLD T={T} {mode} M-H"
    goal = 1.2 if mode == "exact" else None
    rows.append(dict(problem=name, kernel=label,
                     us_per_gradient=1e6 * np.median(t["kernel"]) /
                     (num_outer * T),
                     floor_us=1e6 * np.median(t["floor"]) / (num_outer * T),
                     ratio=ratio, goal=goal))
    print(f"{name:38s} {label:22s} {rows[-1]['us_per_gradient']:9.1f} "
          f"{rows[-1]['floor_us']:9.1f} {ratio:6.2f}  "
          f"{'(goal <= 1.2, floor incl. full energy)' if goal else '(vs gradient floor)'}",
          flush=True)
  return rows


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--out", default="out/benchmarks")
  args = parser.parse_args()
  print(f"{'problem':38s} {'kernel':22s} {'us/grad':>9s} {'floor':>9s} "
        f"{'ratio':>6s}")
  rows = []
  logistic = common.synthetic_logistic()
  rows += bench_problem(logistic.name + " b=100", logistic.target(),
                        logistic.init(), 2000, 1e-5, 100., args.repeats)
  if os.path.isdir(common.SHARED_DATA):
    aus = common.australian()
    rows += bench_problem(aus.name + " b=32", aus.target(), aus.init(), 4000,
                          1e-3, 30., args.repeats)
    target, init, name = mnist_mlp()
    rows += bench_problem(name, target, init, 300, 1e-5, 100., args.repeats)
  else:
    print(f"skipping real-data problems: {common.SHARED_DATA} not found")
  common.write_json(os.path.join(args.out, "overhead.json"), {"rows": rows})


if __name__ == "__main__":
  main()
