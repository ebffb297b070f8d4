"""How the trajectory length that `sample` freezes decides its efficiency.

A logistic regression of 50 coefficients on 2,000 examples whose features
share a factor (0.6 own + 0.4 shared: correlated coefficients), sampled by
`sample` with its defaults (AMAGOLD on the full batch, a dense mass, T
tuned by ChEES and frozen).

1. `--seeds K`: K calls of `sample` (500 draws, `--warmup` steps) that
   differ only in the seed: the frozen T, R-hat, the report's smallest
   ESS (and ArviZ's bulk and tail ESS) and the smallest ESS per 1,000
   gradients of the sampling phase.
2. The sweep: the first call's tuned kernel (its step size and mass) run
   again from its final state for 1,000 transitions at each fixed T in
   `--sweep`, and with T drawn per transition as ceil(u 2T), u uniform
   (ChEES's jitter kept in sampling): the smallest cross-chain ESS (TFP's,
   capped at the number of draws, 4,000) of the coordinates and of their
   centred squares (the second moments ChEES aims at), and per 1,000
   gradients.

    python benchmarks/length_choice.py [--seeds 9] [--warmup 1000]
        [--sweep 2 13] [--out benchmarks/results]
"""

import argparse
import datetime
import json
import os
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
tfd = tfp.distributions
NUM_DRAWS, SWEEP_STEPS = 500, 1000


def target():
  rng = np.random.default_rng(0)
  n, d = 2000, 50
  x = (0.6 * rng.normal(size=(n, d)) + 0.4 * rng.normal(size=(n, 1))).astype(
      np.float32)
  w = rng.normal(size=d) / np.sqrt(d)
  y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w))).astype(np.float32)
  return sg.InMemoryTarget(
      lambda w, b: tfd.Bernoulli(logits=tf.linalg.matvec(b[0], w)).log_prob(
          b[1]), (x, y), batch_size=100, parameter_shapes=[d],
      log_prior_fn=lambda w: tf.reduce_sum(tfd.Normal(0., 1.).log_prob(w), -1))


def one_call(model, seed, warmup):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # The report's flags are kept below.
    fit = sg.sample(model, num_results=NUM_DRAWS, num_adaptation_steps=warmup,
                    seed=seed, progress=False, print_report=False)
  r = fit.report
  steps = r.warmup.num_leapfrog_steps
  row = dict(seed=seed, num_leapfrog_steps=steps,
             step_size=r.warmup.step_size, max_rhat=r.max_rhat,
             min_ess=r.min_ess, min_bulk_ess=r.min_bulk_ess,
             min_tail_ess=r.min_tail_ess,
             ess_per_1k_gradients=1000 * r.min_ess / (NUM_DRAWS * 4 * steps))
  return fit, row


def sweep(fit, steps, jittered):
  kernel, state = fit.kernel, tf.convert_to_tensor(fit.final_state)

  @tf.function(jit_compile=True, autograph=False)
  def run(state, seed):
    results = kernel.bootstrap_results(state)

    def body(i, state, results, seed, gradients, draws):
      seed, step_seed, jitter_seed = tfp.random.split_seed(seed, 3)
      t = tf.constant(steps)
      if jittered:  # Drawn independently of the state: each kernel exact.
        u = tf.random.stateless_uniform([], jitter_seed, 1e-6, 1.)
        t = tf.cast(tf.math.ceil(u * 2 * steps), tf.int32)
      state, results = kernel.copy(num_leapfrog_steps=t).one_step(
          state, results, step_seed)
      return (i + 1, state, results, seed, gradients + tf.cast(t, tf.float32),
              draws.write(i, state))
    out = tf.while_loop(lambda i, *_: i < SWEEP_STEPS, body, (
        0, state, results, seed, 0., tf.TensorArray(tf.float32,
                                                    SWEEP_STEPS)))
    return out[-1].stack(), out[-2] / SWEEP_STEPS
  draws, mean_steps = run(state, tf.constant([7, 8]))
  squares = tf.square(draws - tf.reduce_mean(draws, [0, 1]))
  ess, ess_squares = [min(float(tf.reduce_min(
      tfp.mcmc.effective_sample_size(x, cross_chain_dims=1))),
                          SWEEP_STEPS * 4.) for x in (draws, squares)]
  per_1k = 1000 / (SWEEP_STEPS * 4 * float(mean_steps))
  return dict(num_leapfrog_steps=steps, jittered=jittered,
              mean_num_leapfrog_steps=float(mean_steps), min_ess=ess,
              ess_per_1k_gradients=ess * per_1k,
              min_ess_of_squares=ess_squares,
              ess_of_squares_per_1k_gradients=ess_squares * per_1k)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--seeds", type=int, default=9)
  parser.add_argument("--warmup", type=int, default=1000)
  parser.add_argument("--sweep", type=int, nargs=2, default=[2, 13])
  parser.add_argument("--out", default=os.path.join(HERE, "results"))
  args = parser.parse_args()
  model, calls, first, start = target(), [], None, time.perf_counter()
  for k in range(args.seeds):
    fit, row = one_call(model, [2 * k, 2 * k + 1], args.warmup)
    first = first or fit
    calls.append(row)
    print("seed {seed}: T = {num_leapfrog_steps}, R-hat {max_rhat:.3f}, "
          "min ESS {min_ess:.0f} (tail {min_tail_ess:.0f}), "
          "{ess_per_1k_gradients:.1f} per 1k gradients".format(**row),
          flush=True)
  sweeps = []
  for steps in range(args.sweep[0], args.sweep[1] + 1):
    for jittered in (False, True):
      sweeps.append(sweep(first, steps, jittered))
      print("sweep T = {num_leapfrog_steps} jittered={jittered}: min ESS "
            "{min_ess:.0f}, {ess_per_1k_gradients:.1f} per 1k gradients; "
            "of the squares {min_ess_of_squares:.0f}, "
            "{ess_of_squares_per_1k_gradients:.1f}".format(**sweeps[-1]),
            flush=True)
  path = os.path.join(args.out, "length_choice.json")
  with open(path, "w") as f:
    json.dump({"date": datetime.date.today().isoformat(),
               "command": "python benchmarks/length_choice.py --seeds "
                          f"{args.seeds} --warmup {args.warmup} --sweep "
                          f"{args.sweep[0]} {args.sweep[1]}",
               "sweep_from": first.report.warmup.num_leapfrog_steps,
               "sweep_step_size": first.report.warmup.step_size,
               "calls": calls, "sweeps": sweeps,
               "seconds": time.perf_counter() - start}, f, indent=1)
  print("wrote", path)


if __name__ == "__main__":
  main()
