"""One `tfp_sgmcmc.sample` call on a regression whose outcome is in large
units, as a user brings it (not standardised).

A JointDistributionNamed linear regression with an unknown noise scale:
w ~ N(0, s_w^2 I_5), sigma ~ HalfNormal(s_sigma), y ~ N(x w, sigma^2), with
x standard normal, y = scale (x w0 + 0.5 e), w0 = (1, -2, 0.5, 0, 3), so
the weights are about `scale` and the noise sd about `scale` / 2. `sample`
works in the model's unconstrained space, where sigma is softplus(z); the
reference is the Laplace approximation there at the exact mode (Newton's
method in float64 on the full data, from least squares), whose error at
this N is a fraction of a posterior sd. Checks (docs/warmup.md):

* every posterior mean (w and z) within 0.2 Laplace sd of the mode;
* every posterior sd within 10% of the Laplace sd;
* R-hat <= 1.05 and the report's arrival.

    python benchmarks/unstandardised_regression.py               # N = 1e5
    python benchmarks/unstandardised_regression.py --n 5000      # full batch
    python benchmarks/unstandardised_regression.py --scale 1     # standard
    python benchmarks/unstandardised_regression.py --tiny        # seconds
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
WEIGHTS = np.array([1., -2., 0.5, 0., 3.])
MEAN_TOLERANCE, SD_TOLERANCE, MAX_RHAT = 0.2, 0.1, 1.05


def data(num_examples, scale, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, len(WEIGHTS)))
  y = scale * (x @ WEIGHTS + 0.5 * rng.normal(size=num_examples))
  return x.astype(np.float32), y.astype(np.float32)


def model_fn(prior_sd):
  def model(x):
    return tfd.JointDistributionNamed(dict(
        w=tfd.Independent(tfd.Normal(tf.zeros(len(WEIGHTS)), prior_sd), 1),
        sigma=tfd.HalfNormal(prior_sd),
        y=lambda w, sigma: tfd.Independent(
            tfd.Normal(tf.linalg.matvec(x, w), sigma[..., None]), 1)))
  return model


def laplace(x, y, prior_sd, num_newton_steps=100):
  """(mode, sds) in (w, z), sigma = softplus(z), float64, the prior and
  the bijector's log-Jacobian included (the density `sample` draws)."""
  x, y = x.astype(np.float64), y.astype(np.float64)
  d = x.shape[1]

  def energy(v):
    w, z = v[:d], v[d]
    s = tf.nn.softplus(z)
    return -(tf.reduce_sum(tfd.Normal(tf.linalg.matvec(x, w), s).log_prob(y))
             + tf.reduce_sum(tfd.Normal(
                 tf.constant(0., tf.float64), prior_sd).log_prob(w))
             + tfd.HalfNormal(tf.constant(prior_sd, tf.float64)).log_prob(s)
             - tf.nn.softplus(-z))

  @tf.function(autograph=False)
  def derivatives(v):
    with tf.GradientTape() as outer:
      outer.watch(v)
      with tf.GradientTape() as inner:
        inner.watch(v)
        u = energy(v)
      g = inner.gradient(u, v)
    return u, g, outer.jacobian(g, v)

  w = np.linalg.lstsq(x, y, rcond=None)[0]
  s = np.std(y - x @ w)
  v = np.r_[w, s + np.log(-np.expm1(-s))]  # softplus^-1(s)
  for _ in range(num_newton_steps):
    u, g, h = [a.numpy() for a in derivatives(tf.constant(v))]
    step = np.linalg.solve(h, g)
    t = 1.
    while float(energy(tf.constant(v - t * step))) > u and t > 1e-8:
      t /= 2.
    v = v - t * step
    if g @ step < 1e-12:
      break
  _, _, h = [a.numpy() for a in derivatives(tf.constant(v))]
  return v, np.sqrt(np.diag(np.linalg.inv(h)))


def run(num_examples=100_000, scale=1000., prior_sd=1e4, batch_size=1000,
        seed=0, num_results=1000, num_adaptation_steps=1000):
  x, y = data(num_examples, scale, seed)
  mode, sd = laplace(x, y, prior_sd)
  start = time.time()
  fit = sg.sample(target=model_fn(prior_sd), observed={"y": y},
                  covariates=x, batch_size=batch_size,
                  num_results=num_results,
                  num_adaptation_steps=num_adaptation_steps,
                  seed=[seed, 1], progress=False)
  seconds = time.time() - start
  states = np.concatenate([np.asarray(fit.states["w"]),
                           np.asarray(fit.states["sigma"])[..., None]], -1)
  flat = states.reshape(-1, states.shape[-1])
  mean_error = (flat.mean(0) - mode) / sd
  sd_ratio = flat.std(0) / sd
  rhat = float(np.max(tfp.mcmc.potential_scale_reduction(
      tf.constant(states, tf.float64), split_chains=True).numpy()))
  report = fit.report
  result = dict(
      num_examples=num_examples, scale=scale, prior_sd=prior_sd,
      batch_size=batch_size, seed=seed,
      max_abs_mean_error_sds=float(np.max(np.abs(mean_error))),
      sd_ratio_range=[float(sd_ratio.min()), float(sd_ratio.max())],
      rhat=rhat, arrived=bool(report.warmup.arrived), start=report.start,
      step_size=float(np.max(report.warmup.step_size)),
      noise_scale_mode=float(np.log1p(np.exp(mode[-1]))),
      seconds=seconds, date=datetime.date.today().isoformat())
  result["holds"] = bool(
      result["max_abs_mean_error_sds"] <= MEAN_TOLERANCE and
      np.all(np.abs(sd_ratio - 1.) <= SD_TOLERANCE) and rhat <= MAX_RHAT and
      result["arrived"])
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--n", type=int, default=100_000)
  parser.add_argument("--scale", type=float, default=1000.)
  parser.add_argument("--prior-sd", type=float, default=1e4)
  parser.add_argument("--batch-size", type=int, default=1000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--tiny", action="store_true",
                      help="N = 20,000, 100 draws after 200 warm-up steps: "
                      "seconds, not converged (the scripts' test)")
  parser.add_argument("--out", default=os.path.join(HERE, "results"))
  args = parser.parse_args()
  sizes = dict(num_results=100, num_adaptation_steps=200) if args.tiny else {}
  n = 20_000 if args.tiny else args.n
  result = run(n, args.scale, args.prior_sd, args.batch_size, args.seed,
               **sizes)
  print(json.dumps(result, indent=1))
  name = ("unstandardised_regression_tiny" if args.tiny else
          f"unstandardised_regression_n{n}_scale{args.scale:g}")
  name += f"_seed{args.seed}" if args.seed else ""
  with open(os.path.join(args.out, name + ".json"), "w") as f:
    json.dump(result, f, indent=1)


if __name__ == "__main__":
  main()
