"""One `tfp_sgmcmc.sample` call on a JointDistribution at large N.

The README's hierarchical logistic regression (a learned prior scale,
HalfNormal(1), over 3 weights; a Bernoulli likelihood), N = 200,000
examples, given to `sample` as the model function with `observed=` and
`covariates=` and its defaults otherwise (full-batch gradients: the target
of a JointDistribution has no minibatch size unless given one). The
reference: TFP's NUTS on the exact pinned model in the same unconstrained
space (4 chains, 1,000 draws after 500 adapting the step size). Checks:
every mean within 0.2 reference sd, every sd within 10%, R-hat <= 1.05.

`--structured` samples the nodes' structure instead
(`JointDistributionTarget(..., flat_state=False)`, what `sample` built
before it flattened a JointDistribution's state): a diagonal mass.

    python benchmarks/joint_distribution_one_call.py [--structured]
    python benchmarks/joint_distribution_one_call.py --num-examples 20000
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
MEAN_TOLERANCE, SD_TOLERANCE, MAX_RHAT = 0.2, 0.1, 1.05


def model(x):
  return tfd.JointDistributionNamed(dict(
      scale=tfd.HalfNormal(1.),
      w=lambda scale: tfd.Independent(tfd.Normal(
          tf.zeros(3), scale[..., None]), 1),
      y=lambda w: tfd.Independent(tfd.Bernoulli(
          logits=tf.linalg.matvec(x, w)), 1)))


def data(num_examples, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, 3)).astype(np.float32)
  y = (rng.uniform(size=num_examples) < 1 / (1 + np.exp(
      -x @ [1., -1., .5]))).astype(np.int32)
  return x, y


def nuts_reference(x, y, seed=3):
  """(means, sds) of [scale, w] by NUTS, sampled unconstrained."""
  target = sg.JointDistributionTarget(model, {"y": y}, covariates=x,
                                      flat_state=True)
  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      tfp.mcmc.NoUTurnSampler(target.unconstrained_log_prob, 0.01), 400)
  init = tf.zeros([4, 4]) + tf.constant([0.5, 0., 0., 0.])
  draws = tf.function(lambda: tfp.mcmc.sample_chain(
      1000, init, kernel=kernel, num_burnin_steps=500, trace_fn=None,
      seed=[seed, 4]), jit_compile=True)()
  draws = target.constrain(draws)
  flat = np.concatenate([np.asarray(draws["scale"])[..., None],
                         np.asarray(draws["w"])], -1).reshape(-1, 4)
  return flat.mean(0), flat.std(0)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--num-examples", type=int, default=200_000)
  parser.add_argument("--structured", action="store_true",
                      help="the nodes' structure (a diagonal mass)")
  parser.add_argument(
      "--out", default=None, help="a JSON file for the row (default: "
      "benchmarks/results/joint_distribution_one_call[_structured].json)")
  args = parser.parse_args()
  x, y = data(args.num_examples)
  given = (sg.JointDistributionTarget(model, {"y": y}, covariates=x)
           if args.structured else model)
  start = time.perf_counter()
  fit = sg.sample(given, **({} if args.structured else dict(
      observed={"y": y}, covariates=x)), seed=[0, 1], progress=False)
  seconds = time.perf_counter() - start
  draws = np.concatenate([np.asarray(fit.draws["scale"])[..., None],
                          np.asarray(fit.draws["w"])], -1).reshape(-1, 4)
  mean, sd = nuts_reference(x, y)
  row = dict(
      num_examples=args.num_examples, structured=args.structured,
      mass=fit.report.mass, step_size=float(fit.report.warmup.step_size),
      max_rhat=float(fit.report.max_rhat), min_ess=float(fit.report.min_ess),
      max_mean_error_sd=float(np.max(np.abs(draws.mean(0) - mean) / sd)),
      sd_ratios=(draws.std(0) / sd).round(3).tolist(),
      problems=list(fit.report.problems), seconds=round(seconds, 1),
      reference_means=mean.tolist(), reference_sds=sd.tolist(),
      date=datetime.date.today().isoformat(), load_average=os.getloadavg()[0])
  row["passes"] = (row["max_mean_error_sd"] <= MEAN_TOLERANCE and
                   max(abs(r - 1) for r in row["sd_ratios"]) <= SD_TOLERANCE
                   and row["max_rhat"] <= MAX_RHAT)
  print(json.dumps(row, indent=1))
  out = args.out or os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "results",
      "joint_distribution_one_call"
      f"{'_structured' if args.structured else ''}.json")
  with open(out, "w") as f:
    json.dump(row, f, indent=1)


if __name__ == "__main__":
  main()
