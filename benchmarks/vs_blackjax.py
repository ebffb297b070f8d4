"""tfp_sgmcmc against BlackJAX, side by side, on the same CPU.

SGLD and SGHMC on Bayesian logistic regression (synthetic N = 100,000,
d = 20, minibatch 100; and Statlog Australian, N = 690, d = 15, minibatch
32): the same number of gradient evaluations, both compiled (XLA;
`jax.jit` around a `lax.scan`), compile time excluded, runs interleaved
(ours, theirs, ours, ...) over several repeats. Reports time per gradient
evaluation and the median of the per-pair ratios ours / BlackJAX (goal
<= 0.6), in wall-clock time and in process CPU time (both loops run on one
thread; on a shared machine the CPU time is the steadier of the two).

SGHMC is matched per gradient evaluation. One `blackjax.sghmc` step draws a
momentum, runs `num_integration_steps` = K Euler steps on ONE minibatch (K
gradients) and returns the position (the momentum is dropped). With K = 1,
as an earlier version of this script had it, the position moves with the
fresh momentum before the one gradient is used, the gradient only feeds the
discarded momentum, and XLA removes it: that step computes no gradient at
all, which is why BlackJAX's SGHMC looked faster than its own SGLD. Here
BlackJAX runs K = 10 (its default) and we run `SGHMC(...,
momentum_resampling_period=10)` with the same h and friction (BlackJAX's
alpha is the friction C: p' = (1 - alpha h) p + h grad log p + N(0, 2 alpha
h)); both do num_steps gradient evaluations. BlackJAX gathers one minibatch
per K gradients, we draw a fresh one for every gradient, so a second row,
`sghmc-fresh`, runs BlackJAX's own SGHMC integrator
(`blackjax.sgmcmc.diffusions.sghmc`) in a `lax.scan` with a fresh minibatch
per gradient and the momentum carried, against our SGHMC without
resampling: the same algorithm on both sides.

Needs the optional `bench` extra: pip install -e ".[bench]" (jax, blackjax).

    python benchmarks/vs_blackjax.py [--repeats 7] [--out benchmarks/results]
"""

import argparse
import os
import statistics

import tensorflow as tf  # noqa: E402

import common  # noqa: E402
import harness  # noqa: E402
import tfp_sgmcmc as sg  # noqa: E402

SGHMC_K = 10  # BlackJAX's default num_integration_steps.


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
  if algorithm == "sghmc-fresh":
    integrator = blackjax.sgmcmc.diffusions.sghmc(alpha=friction, beta=0.)

    @jax.jit
    def run_fresh(key, position):
      def body(carry, key):
        position, momentum = carry
        key_batch, key_step = jax.random.split(key)
        idx = jax.random.randint(key_batch, (batch,), 0, n)
        grad = grad_estimator(position, (x[idx], y[idx]))
        return integrator(key_step, position, momentum, grad,
                          step_size), ()
      carry, _ = jax.lax.scan(body, (position, jnp.zeros_like(position)),
                              jax.random.split(key, num_steps))
      return carry[0]

    def call_fresh():
      return run_fresh(jax.random.PRNGKey(0),
                       jnp.zeros(problem.d)).block_until_ready()
    return call_fresh
  if algorithm == "sgld":
    sampler = blackjax.sgld(grad_estimator)
  else:
    # K gradients on one minibatch per call; alpha is the friction C.
    sampler = blackjax.sghmc(grad_estimator, num_integration_steps=SGHMC_K,
                             alpha=friction)
    num_steps = num_steps // SGHMC_K

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
  if algorithm == "sgld":
    kernel = sg.SGLD(target, step_size)
  elif algorithm == "sghmc":
    kernel = sg.SGHMC(target, step_size, friction,
                      momentum_resampling_period=SGHMC_K)
  else:
    kernel = sg.SGHMC(target, step_size, friction)
  loop = harness.kernel_loop(kernel, num_steps)
  init, seed = problem.init(), tf.constant([1, 2])

  def call():
    return loop(init, seed).numpy()
  return call


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--out", default=os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "results"))
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
  print(f"{'problem':30s} {'sampler':11s} {'ours us':>8s} {'bjax us':>8s} "
        f"{'ratio':>6s} {'(spread)':>12s} {'cpu ratio':>9s} {'(spread)':>12s}"
        "   [us per gradient evaluation]")
  for problem, num_steps, h, c in problems:
    for algorithm in ("sgld", "sghmc", "sghmc-fresh"):
      fns = {"ours": ours_loop(problem, algorithm, num_steps, h, c),
             "theirs": blackjax_loop(problem, algorithm, num_steps, h, c)}
      wall, cpu = harness.interleaved({k: (lambda f=f: f()) for k, f in
                                       fns.items()}, (), args.repeats,
                                      cpu=True)
      ratio = harness.median_ratio(wall["ours"], wall["theirs"])
      cpu_ratio = harness.median_ratio(cpu["ours"], cpu["theirs"])
      row = dict(problem=problem.name, sampler=algorithm,
                 gradients=num_steps,
                 ours_us=1e6 * statistics.median(wall["ours"]) / num_steps,
                 blackjax_us=1e6 * statistics.median(wall["theirs"]) /
                 num_steps,
                 ratio=ratio,
                 ratio_range=harness.ratio_range(wall["ours"], wall["theirs"]),
                 ours_cpu_us=1e6 * statistics.median(cpu["ours"]) / num_steps,
                 blackjax_cpu_us=1e6 * statistics.median(cpu["theirs"]) /
                 num_steps,
                 cpu_ratio=cpu_ratio,
                 cpu_ratio_range=harness.ratio_range(cpu["ours"],
                                                     cpu["theirs"]),
                 goal=0.6)
      if algorithm == "sghmc":
        row["blackjax_num_integration_steps"] = SGHMC_K
        row["ours_momentum_resampling_period"] = SGHMC_K
      rows.append(row)
      lo, hi = row["ratio_range"]
      clo, chi = row["cpu_ratio_range"]
      print(f"{problem.name:30s} {algorithm:11s} {row['ours_us']:8.2f} "
            f"{row['blackjax_us']:8.2f} {ratio:6.2f} ({lo:4.2f}-{hi:4.2f}) "
            f"{cpu_ratio:9.2f} ({clo:4.2f}-{chi:4.2f})", flush=True)
  harness.write_json(os.path.join(args.out, "vs_blackjax.json"),
                     {"rows": rows})


if __name__ == "__main__":
  main()
