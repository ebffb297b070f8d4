"""tfp_sgmcmc against BlackJAX, side by side, on the same CPU.

SGLD and SGHMC on Bayesian logistic regression (synthetic N = 100,000,
d = 20, minibatch 100; and Statlog Australian, N = 690, d = 15, minibatch
32): the same number of gradient evaluations, both compiled (XLA;
`jax.jit` around a `lax.scan`), compile time excluded, runs interleaved
(ours, theirs, ours, ...) over several repeats. Reports time per gradient
and the median of the per-pair ratios ours / BlackJAX (goal <= 0.6).

Needs the optional `bench` extra: pip install -e ".[bench]" (jax, blackjax).

    python benchmarks/vs_blackjax.py [--repeats 7] [--out out/benchmarks]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import common  # noqa: E402
import tfp_sgmcmc as sg  # noqa: E402


def blackjax_loop(problem, algorithm, num_steps, step_size, friction):
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp
  import blackjax

  x = jnp.asarray(problem.x)
  y = jnp.asarray(problem.y)
  n, batch = problem.n, problem.batch_size

  def logprior(w):
    return -0.5 * jnp.sum(w ** 2)

  def loglikelihood(w, example):
    xi, yi = example
    logit = xi @ w
    return yi * logit - jnp.logaddexp(0., logit)

  grad_estimator = blackjax.sgmcmc.gradients.grad_estimator(
      logprior, loglikelihood, n)
  if algorithm == "sgld":
    sampler = blackjax.sgld(grad_estimator)
  else:
    # One integration step per call: the same gradient count as ours, and
    # alpha = h C (their friction in SGD units).
    sampler = blackjax.sghmc(grad_estimator, num_integration_steps=1,
                             alpha=step_size * friction)

  @jax.jit
  def run(key, position):
    def body(position, key):
      key_batch, key_step = jax.random.split(key)
      idx = jax.random.randint(key_batch, (batch,), 0, n)
      position = sampler.step(key_step, position, (x[idx], y[idx]),
                              step_size)
      return position, ()
    position, _ = jax.lax.scan(body, position,
                               jax.random.split(key, num_steps))
    return position

  key = jax.random.PRNGKey(0)
  init = jnp.zeros(problem.d)

  def call():
    return run(key, init).block_until_ready()
  return call


def ours_loop(problem, algorithm, num_steps, step_size, friction):
  target = problem.target()
  kernel = (sg.SGLD(target, step_size) if algorithm == "sgld" else
            sg.SGHMC(target, step_size, friction))
  loop = common.kernel_loop(kernel, num_steps)
  init, seed = problem.init(), tf.constant([1, 2])

  def call():
    return loop(init, seed).numpy()
  return call


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--out", default="out/benchmarks")
  args = parser.parse_args()
  try:
    import blackjax  # noqa: F401  pylint: disable=g-import-not-at-top
  except ImportError:
    print("BlackJAX is not installed: pip install -e '.[bench]'")
    return
  problems = [(common.synthetic_logistic(), 5000, 1e-5, 100.)]
  if os.path.isdir(common.SHARED_DATA):
    problems.append((common.australian(), 20000, 1e-3, 30.))
  rows = []
  print(f"{'problem':30s} {'sampler':6s} {'ours us':>8s} {'bjax us':>8s} "
        f"{'ratio':>6s}")
  for problem, num_steps, h, c in problems:
    for algorithm in ("sgld", "sghmc"):
      ours = ours_loop(problem, algorithm, num_steps, h, c)
      theirs = blackjax_loop(problem, algorithm, num_steps, h, c)
      ours(), theirs()  # Compile and warm up.
      t_ours, t_theirs = [], []
      for _ in range(args.repeats):
        for fn, out in ((ours, t_ours), (theirs, t_theirs)):
          start = time.perf_counter()
          fn()
          out.append(time.perf_counter() - start)
      ratio = common.median_ratio(t_ours, t_theirs)
      row = dict(problem=problem.name, sampler=algorithm,
                 ours_us=1e6 * statistics.median(t_ours) / num_steps,
                 blackjax_us=1e6 * statistics.median(t_theirs) / num_steps,
                 ratio=ratio, goal=0.6)
      rows.append(row)
      print(f"{problem.name:30s} {algorithm:6s} {row['ours_us']:8.2f} "
            f"{row['blackjax_us']:8.2f} {ratio:6.2f}", flush=True)
  common.write_json(os.path.join(args.out, "vs_blackjax.json"),
                    {"rows": rows})


if __name__ == "__main__":
  main()
