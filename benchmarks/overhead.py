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
interleaved, compile time excluded; medians of per-pair ratios, with their
range, in wall-clock time and in process CPU time (the loops run on one
thread; on a shared machine the CPU-time ratio is the steadier one).

The "gradient + noise" row is the floor plus one standard normal per
coordinate: its ratio is the share of a noisy step the Gaussian draw costs.
The "(no energy)" rows are built with `compute_energy=False`: the step
skips the minibatch energy it would only report, so their distance from
the plain rows is the energy's cost (the log prior's sum over every
weight, on the MLP).

    python benchmarks/overhead.py [--repeats 5] [--out benchmarks/results]
        [--problems logistic,australian,mlp]
"""

import argparse
import gzip
import os

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import common  # noqa: E402
import harness  # noqa: E402
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
      "gradient + noise": common.GradientOnly(target, noise=True),
      "SGLD": sg.SGLD(target, h),
      "SGLD (no energy)": sg.SGLD(target, h, compute_energy=False),
      "SGHMC Euler": sg.SGHMC(target, h, friction),
      "SGHMC Euler (no energy)": sg.SGHMC(target, h, friction,
                                          compute_energy=False),
      "SGHMC splitting": sg.SGHMC(target, h, friction,
                                  integrator="splitting"),
      "SGNHT": sg.SGNHT(target, h),
  }
  if hasattr(sg, "SGBD"):
    out["SGBD"] = sg.SGBD(target, h)
  return out


def _row(name, label, t, cpu, grads, goal):
  row = dict(problem=name, kernel=label,
             us_per_gradient=1e6 * np.median(t["kernel"]) / grads,
             floor_us=1e6 * np.median(t["floor"]) / grads,
             ratio=harness.median_ratio(t["kernel"], t["floor"]),
             ratio_range=harness.ratio_range(t["kernel"], t["floor"]),
             cpu_us_per_gradient=1e6 * np.median(cpu["kernel"]) / grads,
             cpu_floor_us=1e6 * np.median(cpu["floor"]) / grads,
             cpu_ratio=harness.median_ratio(cpu["kernel"], cpu["floor"]),
             cpu_ratio_range=harness.ratio_range(cpu["kernel"], cpu["floor"]),
             goal=goal)
  note = {1.10: "(goal <= 1.10)", "noise": "(the Gaussian draw's share)",
          1.2: "(goal <= 1.2, floor incl. full energy)",
          None: "(vs gradient floor)"}[goal]
  print(f"{name:38s} {label:24s} {row['us_per_gradient']:9.1f} "
        f"{row['floor_us']:9.1f} {row['ratio']:6.2f} "
        f"({row['ratio_range'][0]:4.2f}-{row['ratio_range'][1]:4.2f}) "
        f"{row['cpu_us_per_gradient']:9.1f} {row['cpu_floor_us']:9.1f} "
        f"{row['cpu_ratio']:6.2f} ({row['cpu_ratio_range'][0]:4.2f}-"
        f"{row['cpu_ratio_range'][1]:4.2f})  {note}", flush=True)
  return row


def bench_problem(name, target, init, num_steps, h, friction, repeats):
  rows = []
  seed = tf.constant([1, 2])
  floor = common.bare_gradient_loop(target, num_steps)
  for kname, kernel in kernels(target, h, friction).items():
    loop = harness.kernel_loop(kernel, num_steps)
    t, cpu = harness.interleaved({"kernel": loop, "floor": floor},
                                 (init, seed), repeats, cpu=True)
    rows.append(_row(name, kname, t, cpu, num_steps,
                     "noise" if kname == "gradient + noise" else 1.10))
  num_outer = max(num_steps // T, 1)
  for mode in ("exact", "minibatch"):
    kernel = sg.AMAGOLD(target, h, num_leapfrog_steps=T,
                        friction=friction / 2, acceptance_energy=mode)
    loop = harness.kernel_loop(kernel, num_outer)
    fl = (exact_mh_floor(target, num_outer) if mode == "exact" else
          common.bare_gradient_loop(target, num_outer * T))
    t, cpu = harness.interleaved({"kernel": loop, "floor": fl},
                                 (init, seed), repeats, cpu=True)
    rows.append(_row(name, f"AMAGOLD T={T} {mode} M-H", t, cpu,
                     num_outer * T, 1.2 if mode == "exact" else None))
  return rows


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--problems", default="logistic,australian,mlp",
                      help="comma-separated subset of logistic,australian,mlp")
  parser.add_argument("--out", default=os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "results"))
  args = parser.parse_args()
  print(f"{'problem':38s} {'kernel':24s} {'us/grad':>9s} {'floor':>9s} "
        f"{'ratio':>6s} {'(range)':>11s} {'cpu us':>9s} {'cpu flr':>9s} "
        f"{'cpu':>6s} {'(range)':>11s}")
  rows = []
  problems = args.problems.split(",")
  if "logistic" in problems:
    logistic = common.synthetic_logistic()
    rows += bench_problem(logistic.name + " b=100", logistic.target(),
                          logistic.init(), 2000, 1e-5, 100., args.repeats)
  if os.path.isdir(common.SHARED_DATA):
    if "australian" in problems:
      aus = common.australian()
      rows += bench_problem(aus.name + " b=32", aus.target(), aus.init(),
                            4000, 1e-3, 30., args.repeats)
    if "mlp" in problems:
      target, init, name = mnist_mlp()
      rows += bench_problem(name, target, init, 300, 1e-5, 100.,
                            args.repeats)
  else:
    print(f"skipping real-data problems: {common.SHARED_DATA} not found")
  stem = ("overhead" if set(problems) >= {"logistic", "australian", "mlp"}
          else "overhead_" + "_".join(problems))
  harness.write_json(os.path.join(args.out, stem + ".json"), {"rows": rows})


if __name__ == "__main__":
  main()
