"""A logistic regression with random intercepts, as a new user writes it.

y_i ~ Bernoulli(logit x_i w + u[g_i]), u_g ~ N(0, tau^2), log tau ~ N(0,
1), w ~ N(0, 4), with `--num-examples` examples (default 100,000) in 200
groups and d = 5: the state [w, u, log tau] has 206 coordinates in three
parts, so the warm-up's mass is diagonal, and the density grows without
bound as tau goes to 0 with u (there is no mode). Runs, each 4 chains:

* AMAGOLD on the full batch, warmed up 1,000 steps from uniform(-2, 2)
  with the kernel's T = 10 kept, and with T tuned by ChEES
  (`adapt_num_leapfrog_steps=True`), then 1,000 draws, for `--seeds`
  seeds (each its own uniform start and warm-up seed);
* `tfp_sgmcmc.sample(target)` with its defaults (`--sample`);
* TFP's NUTS on the full batch, 500 warm-up and 1,000 draws, as the
  reference (`--nuts`, about 12 minutes on 2 cores).

Per run: the largest R-hat, the smallest ESS, the frozen T and step size,
and with `--nuts` the largest mean error over the 206 coordinates in NUTS's
sds.

    python benchmarks/random_intercepts.py [--seeds 4] [--sample] [--nuts]
"""

import argparse
import datetime
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

tfd = tfp.distributions
HERE = os.path.dirname(os.path.abspath(__file__))
GROUPS, DIM = 200, 5


def problem(num_examples):
  rng = np.random.default_rng(0)
  group = rng.integers(0, GROUPS, size=num_examples).astype(np.int32)
  x = rng.normal(size=(num_examples, DIM)).astype(np.float32)
  logits = x @ np.array([1., -1., .5, 0., 2.]) + rng.normal(
      0., 0.8, size=GROUPS)[group]
  y = (rng.uniform(size=num_examples) < 1 / (1 + np.exp(-logits))).astype(
      np.float32)

  def log_likelihood(params, batch):
    w, u, _ = params
    xb, gb, yb = batch
    return tfd.Bernoulli(logits=tf.linalg.matvec(xb, w) + tf.gather(
        u, gb, axis=-1)).log_prob(yb)

  def log_prior(params):
    w, u, log_tau = params
    return (tf.reduce_sum(tfd.Normal(0., 2.).log_prob(w), -1)
            + tf.reduce_sum(tfd.Normal(0., tf.exp(log_tau)[..., None])
                            .log_prob(u), -1)
            + tfd.Normal(0., 1.).log_prob(log_tau))
  data = (x, group, y)
  return sg.InMemoryTarget(log_likelihood, data, batch_size=1000,
                           log_prior_fn=log_prior,
                           parameter_shapes=[[DIM], [GROUPS], []]), (
                               lambda params: tf.reduce_sum(log_likelihood(
                                   params, data), -1) + log_prior(params))


def _flat(draws):
  return np.concatenate([np.asarray(p, np.float64).reshape(
      p.shape[0], p.shape[1], -1) for p in draws], -1)


def _row(name, draws, seconds, **extra):
  health = sg.summarize(draws, print_report=False, warn=False)
  return dict(run=name, max_rhat=float(health.max_rhat),
              min_ess=float(health.min_ess), seconds=seconds,
              draws=_flat(draws), **extra)


def warmed_up(target, adapt, seed=(5, 6), num_steps=1000, jit_compile=True):
  full = target.with_full_batch()
  kernel = sg.AMAGOLD(full, step_size=0.01, num_leapfrog_steps=10,
                      friction=0.1)
  seeds = tfp.random.split_seed(tf.constant(seed), 3)
  start = [tf.random.stateless_uniform([4] + s, seed=k, minval=-2.,
                                       maxval=2.)
           for s, k in zip([[DIM], [GROUPS], []], seeds)]
  t0 = time.perf_counter()
  warm = sg.warm_up(kernel, start, num_steps=num_steps, seed=seed,
                    adapt_num_leapfrog_steps=adapt, jit_compile=jit_compile)
  draws = tf.function(lambda s: tfp.mcmc.sample_chain(
      num_steps, warm.state, kernel=warm.kernel, trace_fn=None, seed=s),
                      jit_compile=jit_compile)(tf.constant([9, 10]))
  return _row(f"warm_up, T {'tuned by ChEES' if adapt else '= 10 kept'}",
              draws, time.perf_counter() - t0, seed=list(seed),
              num_leapfrog_steps=int(warm.kernel.num_leapfrog_steps),
              step_size=float(warm.report.step_size))


def nuts(log_prob):
  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      tfp.mcmc.NoUTurnSampler(lambda *p: log_prob(list(p)), step_size=0.01),
      num_adaptation_steps=400)
  start = [tf.zeros([4, DIM]), tf.zeros([4, GROUPS]), tf.zeros([4])]
  t0 = time.perf_counter()
  draws, leapfrogs = tf.function(lambda s: tfp.mcmc.sample_chain(
      1000, start, kernel=kernel, num_burnin_steps=500,
      trace_fn=lambda _, r: r.inner_results.leapfrogs_taken, seed=s),
                                 jit_compile=True)(tf.constant([3, 4]))
  return _row("NUTS (reference)", draws, time.perf_counter() - t0,
              leapfrogs_per_draw=float(np.mean(leapfrogs)))


def main(num_examples=100_000, run_sample=False, run_nuts=False,
         num_steps=1000, out=os.path.join(HERE, "results"),
         jit_compile=True, num_seeds=1):
  target, log_prob = problem(num_examples)
  rows = [warmed_up(target, adapt, (5 + k, 6), num_steps, jit_compile)
          for k in range(num_seeds) for adapt in (False, True)]
  if run_sample:
    t0 = time.perf_counter()
    fit = sg.sample(target, num_results=1000, seed=[0, 1], progress=False)
    rows.append(_row("sample (defaults)", fit.draws,
                     time.perf_counter() - t0, start=fit.report.start))
  if run_nuts:
    rows.append(nuts(log_prob))
    reference = rows[-1]["draws"].reshape(-1, DIM + GROUPS + 1)
    mean, sd = reference.mean(0), reference.std(0)
    for row in rows:
      x = row["draws"].reshape(-1, DIM + GROUPS + 1)
      row["max_mean_error_sd"] = float(np.max(np.abs(x.mean(0) - mean) / sd))
  for row in rows:
    row.pop("draws")
    print(" ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                   for k, v in row.items()), flush=True)
  if out:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "random_intercepts.json"), "w") as f:
      json.dump(dict(date=str(datetime.date.today()),
                     num_examples=num_examples, rows=rows), f, indent=1)
  return rows


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--num-examples", type=int, default=100_000)
  parser.add_argument("--sample", action="store_true")
  parser.add_argument("--nuts", action="store_true")
  parser.add_argument("--seeds", type=int, default=1,
                      help="warm-up seeds (and uniform starts) per variant")
  args = parser.parse_args()
  main(args.num_examples, args.sample, args.nuts, num_seeds=args.seeds)
