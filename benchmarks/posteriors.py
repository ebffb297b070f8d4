"""The posterior suite: SG kernels and TFP's NUTS on Inference Gym models
with reference posteriors, at the same gradient budget.

Models (the Inference Gym's reference means and standard deviations):

* German credit numeric logistic regression (1,000 x 24 and an intercept,
  N(0, 1) prior; the gym's model built from ../shared/data's file, which is
  the file the gym reads through tensorflow-datasets): full batch, and
  minibatches of 64 with and without control variates (around the mode).
* Eight schools, sampled non-centred (avg_effect, log_stddev, z with
  school_effects = avg_effect + exp(log_stddev) z), compared in the gym's
  (centred) parameters.
* The gym's ill-conditioned Gaussian (rotated; its covariance is known).

Methods: `tfp_sgmcmc.sample` with its defaults (one call: full-batch
gradients on a data set of at most 10,000 examples, so German credit's
minibatch models too; start, control variates where they pay, independent
minibatches, warm-up, AMAGOLD; 4
chains of 1,000 draws; its row passes when every mean is within 4 MCSE and
every sd within 10% of the reference), AMAGOLD with the identity mass and a dual-averaged step size
(`warm_up(adapt_mass=False)`), AMAGOLD warmed up (`warm_up` with its
defaults: the step size, and the mass and trajectory length it picks: a
dense mass for these short vectors, T tuned by ChEES on the full-batch
models only; `--dense-mass` and `--adapt-num-leapfrog-steps` force them),
SGHMC and
SGLD with `warm_up`'s step size, and TFP's NUTS
(`PreconditionedNoUTurnSampler` with `DiagonalMassMatrixAdaptation` and
`DualAveragingStepSizeAdaptation`). NUTS samples first; every other method
then gets the gradient evaluations NUTS used per chain (a minibatch gradient
counts as one; AMAGOLD's one full-data energy per test is not a gradient).

Per model x method: the largest error of a mean in posterior sd units and
in Monte Carlo standard errors (sd / sqrt(ESS) per coordinate), the largest
relative error of an sd, the smallest ESS (over coordinates, 4 chains
pooled) per 1,000 gradients and per second of sampling (compilation
excluded; warm-up not counted). A markdown table is printed and the rows are
written to results/posteriors.json.

    python benchmarks/posteriors.py            # the size docs/warmup.md shows
    python benchmarks/posteriors.py --quick    # seconds (CI)
"""

import argparse
import datetime
import gzip
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from tensorflow_probability.python.internal import unnest  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

tfd = tfp.distributions

HERE = os.path.dirname(os.path.abspath(__file__))
# ../shared/data beside the checkout; TFP_SGMCMC_SHARED_DATA overrides it
# (as for the tests).
SHARED_DATA = os.path.abspath(os.environ.get(
    "TFP_SGMCMC_SHARED_DATA", os.path.join(HERE, "..", "..", "shared",
                                           "data")))
GERMAN = os.path.join(SHARED_DATA, "statlog", "german.data-numeric.gz")
NUM_CHAINS = 4


class Problem:
  """A model: how the kernels see it, its reference and its start."""

  def __init__(self, name, dim, log_prob_fn=None, target=None,
               reference=None, to_reference=None, full_batch=True):
    self.name, self.dim = name, dim
    self.log_prob_fn = log_prob_fn      # full-batch log density (NUTS)
    self.target = target                # the SG kernels' target
    self.mean, self.sd = reference
    self.to_reference = to_reference or (lambda x: x)
    self.full_batch = full_batch


def german_credit_data(path=GERMAN):
  """The gym's German credit data: features standardised (population sd),
  an intercept column of ones last, label 1 for the file's class 2 (the
  orientation of the gym's reference posterior)."""
  with gzip.open(path, "rt") as f:
    raw = np.loadtxt(f)
  x, label = raw[:, :-1], raw[:, -1]
  x = (x - x.mean(0)) / x.std(0)
  x = np.concatenate([x, np.ones([len(x), 1])], 1).astype(np.float32)
  return x, (label == 2).astype(np.float32)


def _logistic_log_likelihood(w, batch):
  x, y = batch
  logits = tf.einsum("nd,...d->...n", x, w)
  return -tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits)


def _normal_prior(w):
  return -0.5 * tf.reduce_sum(w ** 2, -1)


def german_credit_problems():
  from inference_gym.targets.ground_truth import (  # pylint: disable=import-outside-toplevel
      german_credit_numeric_logistic_regression as truth)
  x, y = german_credit_data()
  reference = (truth.IDENTITY_MEAN, truth.IDENTITY_STANDARD_DEVIATION)
  full = sg.InMemoryTarget(_logistic_log_likelihood, (x, y),
                           full_batch=True, log_prior_fn=_normal_prior)
  xt, yt = tf.constant(x), tf.constant(y)

  def log_prob(w):
    return (tf.reduce_sum(_logistic_log_likelihood(w, (xt, yt)), -1)
            + _normal_prior(w))
  minibatch = sg.InMemoryTarget(_logistic_log_likelihood, (x, y),
                                batch_size=64, log_prior_fn=_normal_prior)
  mode = sg.find_mode(full, tf.zeros([x.shape[1]]), num_steps=2000,
                      learning_rate=0.05)
  return [
      Problem("german_credit", 25, log_prob, full, reference),
      Problem("german_credit_mb64", 25, log_prob, minibatch, reference,
              full_batch=False),
      Problem("german_credit_mb64_cv", 25, log_prob,
              sg.ControlVariateTarget(minibatch, mode), reference,
              full_batch=False),
  ]


EFFECTS = np.array([28, 8, -3, 7, -1, 1, 18, 12], np.float32)
STDDEVS = np.array([15, 10, 16, 11, 9, 11, 10, 18], np.float32)


def eight_schools_problem():
  from inference_gym.targets.ground_truth import eight_schools as truth  # pylint: disable=import-outside-toplevel

  def log_prob(state):
    avg, log_sd, z = state[..., 0], state[..., 1], state[..., 2:]
    effects = avg[..., None] + tf.exp(log_sd)[..., None] * z
    return (tfd.Normal(0., 10.).log_prob(avg)
            + tfd.Normal(5., 1.).log_prob(log_sd)
            + tf.reduce_sum(tfd.Normal(0., 1.).log_prob(z), -1)
            + tf.reduce_sum(tfd.Normal(effects, STDDEVS).log_prob(EFFECTS),
                            -1))

  def to_reference(draws):
    avg, log_sd, z = draws[..., :1], draws[..., 1:2], draws[..., 2:]
    return np.concatenate([avg, log_sd, avg + np.exp(log_sd) * z], -1)
  mean = np.concatenate([np.ravel(truth.IDENTITY_AVG_EFFECT_MEAN),
                         np.ravel(truth.IDENTITY_LOG_STDDEV_MEAN),
                         np.ravel(truth.IDENTITY_SCHOOL_EFFECTS_MEAN)])
  sd = np.concatenate([
      np.ravel(truth.IDENTITY_AVG_EFFECT_STANDARD_DEVIATION),
      np.ravel(truth.IDENTITY_LOG_STDDEV_STANDARD_DEVIATION),
      np.ravel(truth.IDENTITY_SCHOOL_EFFECTS_STANDARD_DEVIATION)])
  return Problem("eight_schools_noncentred", 10, log_prob,
                 sg.LogProbFnTarget(log_prob), (mean, sd), to_reference)


def ill_conditioned_gaussian_problem(ndims=10):
  from inference_gym import using_tensorflow as gym  # pylint: disable=import-outside-toplevel
  model = gym.targets.IllConditionedGaussian(ndims=ndims)
  identity = model.sample_transformations["identity"]

  def log_prob(x):
    return model.unnormalized_log_prob(x)
  return Problem(f"ill_conditioned_gaussian_{ndims}d", ndims, log_prob,
                 sg.LogProbFnTarget(log_prob),
                 (np.asarray(identity.ground_truth_mean),
                  np.asarray(identity.ground_truth_standard_deviation)))


def run_loop(kernel, state, results, num_steps, seed, count_fn, jit=True):
  """`num_steps` steps in one XLA loop, compiled before the timed call.

  Returns (draws [num_steps, chains, d], final state and results,
  sampling seconds, per-chain gradient count from `count_fn`)."""
  dim = state.shape[-1]

  @tf.function(jit_compile=jit, autograph=False)
  def run(state, results, seed, n):
    buf = tf.zeros([num_steps, NUM_CHAINS, dim], state.dtype)

    def body(i, state, results, seed, buf, grads):
      seed, step_seed = sg.random.split_seed(seed, 2)
      state, results = kernel.one_step(state, results, step_seed)
      buf = tf.tensor_scatter_nd_update(buf, [[i]], state[None])
      return i + 1, state, results, seed, buf, grads + count_fn(results)
    _, state, results, _, buf, grads = tf.while_loop(
        lambda i, *_: i < n, body,
        (tf.constant(0), state, results, seed, buf, tf.zeros([], tf.float64)))
    return buf, state, results, grads

  run(state, results, seed, tf.constant(1))  # compiles
  start = time.perf_counter()
  buf, state, results, grads = run(state, results, seed,
                                   tf.constant(num_steps))
  seconds = time.perf_counter() - start
  return buf.numpy(), state, results, seconds, float(grads)


def _constant(k):
  return lambda results: tf.constant(float(k), tf.float64)


def nuts(problem, num_warmup, num_steps, seed, jit=True):
  """TFP's NUTS with its diagonal mass and step-size adaptation: the mass
  and the step size adapted together over 80% of the warm-up, then the
  step size alone for the last 20% with the mass frozen (Stan's last fast
  window: the step size of the old mass does not fit the new one)."""
  init = tf.zeros([NUM_CHAINS, problem.dim])
  first = int(0.8 * num_warmup)
  inner = tfp.experimental.mcmc.PreconditionedNoUTurnSampler(
      problem.log_prob_fn, step_size=0.1)
  kernel = tfp.experimental.mcmc.DiagonalMassMatrixAdaptation(
      inner, tfp.experimental.stats.RunningVariance.from_stats(
          num_samples=10., mean=tf.zeros([problem.dim]),
          variance=tf.ones([problem.dim])))
  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      kernel, num_adaptation_steps=first, target_accept_prob=0.8)

  def count(results):
    return tf.cast(tf.reduce_sum(unnest.get_innermost(
        results, "leapfrogs_taken")), tf.float64) / NUM_CHAINS
  warm_seed, last_seed, seed = sg.random.split_seed(seed, 3)
  results = kernel.bootstrap_results(init)
  _, state, results, warm_seconds, _ = run_loop(
      kernel, init, results, first, warm_seed, count, jit)
  momentum = unnest.get_innermost(results, "momentum_distribution")
  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      tfp.experimental.mcmc.PreconditionedNoUTurnSampler(
          problem.log_prob_fn, step_size=results.new_step_size,
          momentum_distribution=momentum),
      num_adaptation_steps=num_warmup - first, target_accept_prob=0.8)
  results = kernel.bootstrap_results(state)
  _, state, results, last_seconds, _ = run_loop(
      kernel, state, results, num_warmup - first, last_seed, count, jit)
  draws, _, results, seconds, grads = run_loop(
      kernel, state, results, num_steps, seed, count, jit)
  return draws, seconds, grads, dict(
      warmup_seconds=warm_seconds + last_seconds,
      step_size=float(np.mean(results.new_step_size)))


def sg_method(problem, method, num_warmup, budget, seed, jit=True,
              warmup_options=None):
  """A tfp_sgmcmc kernel, warmed up, run for `budget` gradients a chain;
  `warmup_options` (e.g. `dense_mass`, `adapt_num_leapfrog_steps`): more
  arguments of "AMAGOLD warmed up"'s `warm_up`."""
  target = problem.target
  leapfrogs = 10
  if method.startswith("AMAGOLD"):
    kernel = sg.AMAGOLD(target, step_size=0.01, num_leapfrog_steps=leapfrogs,
                        friction=0.5)
    per_step = leapfrogs
  elif method == "SGHMC":
    kernel = sg.SGHMC(target, step_size=0.01, friction=1.)
    per_step = 1
  else:
    kernel = sg.SGLD(target, step_size=1e-3)
    per_step = 1
  adapt_mass = None
  if method == "AMAGOLD identity":
    adapt_mass = False
  elif method == "AMAGOLD warmed up" and (
      "momentum_distribution" not in kernel.parameters):
    return None
  options = (warmup_options or {}) if method == "AMAGOLD warmed up" else {}
  warm_seed, seed = sg.random.split_seed(seed, 2)
  warm = sg.warm_up(kernel, tf.zeros([NUM_CHAINS, problem.dim]),
                    num_steps=num_warmup, seed=warm_seed,
                    adapt_mass=adapt_mass, jit_compile=jit, **options)
  kernel = warm.kernel
  # The warm-up may have tuned AMAGOLD's T.
  per_step = getattr(kernel, "num_leapfrog_steps", None) or per_step
  num_steps = max(int(budget // per_step), 10)
  results = kernel.bootstrap_results(warm.state)
  draws, _, _, seconds, grads = run_loop(kernel, warm.state, results,
                                         num_steps, seed, _constant(per_step),
                                         jit)
  return draws, seconds, grads, dict(
      step_size=warm.report.step_size,
      warmup_acceptance=warm.report.acceptance,
      warmup_seconds=warm.report.seconds,
      mass_adapted=warm.report.variance is not None,
      mass=warm.report.mass or "identity", choices=warm.report.choices,
      leapfrogs_per_draw=float(per_step))


def score(problem, draws, seconds, grads):
  """The suite's numbers for draws [steps, chains, d] (sampling space)."""
  x = problem.to_reference(draws.astype(np.float64))
  ess = tfp.mcmc.effective_sample_size(
      tf.constant(x), cross_chain_dims=1).numpy()
  ess = np.maximum(ess, 1.)
  mean, sd = x.mean((0, 1)), x.std((0, 1))
  mcse = problem.sd / np.sqrt(ess)
  total_grads = grads * NUM_CHAINS
  return dict(
      mean_error_sd=float(np.max(np.abs(mean - problem.mean) / problem.sd)),
      mean_error_mcse=float(np.max(np.abs(mean - problem.mean) / mcse)),
      sd_rel_error=float(np.max(np.abs(sd / problem.sd - 1.))),
      ess_min=float(ess.min()),
      ess_per_1k_gradients=float(1000. * ess.min() / total_grads),
      ess_per_second=float(ess.min() / seconds),
      gradients_per_chain=float(grads), seconds=float(seconds))


METHODS = ("sample", "AMAGOLD identity", "AMAGOLD warmed up", "SGHMC",
           "SGLD")


def sample_method(problem, seed, quick=False):
  """One `tfp_sgmcmc.sample` call with its defaults (shortened in `quick`)."""
  sizes = (dict(num_results=40, num_adaptation_steps=60, num_mode_steps=200,
                jit_compile=False) if quick else {})
  fit = sg.sample(problem.target, num_chains=NUM_CHAINS, seed=seed,
                  parameter_shapes=[problem.dim], progress=False,
                  print_report=False, **sizes)
  draws = np.asarray(fit.states)
  per_step = getattr(fit.kernel, "num_leapfrog_steps", None) or 1
  report = fit.report
  return draws, report.seconds["sampling"], draws.shape[0] * per_step, dict(
      step_size=report.warmup.step_size,
      warmup_acceptance=report.warmup.acceptance,
      warmup_seconds=report.seconds["warmup"],
      total_seconds=report.seconds["total"],
      mass_adapted=report.warmup.variance is not None,
      mass=report.mass, choices=report.warmup.choices,
      leapfrogs_per_draw=float(per_step),
      control_variates=bool(report.control_variates),
      minibatches=report.minibatches, arrived=bool(report.arrived),
      max_rhat=float(report.max_rhat))


def main(quick=False, out=os.path.join(HERE, "results"), models=None,
         methods=None, seed=0, name=None, warmup_options=None):
  """Runs the suite; returns the rows (also written as JSON).

  `quick`: tiny sizes and no XLA (whose compilation would dominate);
  `models`, `methods`: names to run (default all); `warmup_options`: more
  `warm_up` arguments for "AMAGOLD warmed up" (`dense_mass`,
  `adapt_num_leapfrog_steps`)."""
  sizes = (dict(nuts_warmup=60, nuts_steps=40, warmup=60) if quick else
           dict(nuts_warmup=500, nuts_steps=500, warmup=500))
  jit = not quick
  problems = [eight_schools_problem(), ill_conditioned_gaussian_problem()]
  if os.path.exists(GERMAN):
    problems += german_credit_problems()
  if models:
    problems = [p for p in problems if p.name in models]
  rows = []
  seed = tfp.random.sanitize_seed(seed)
  for problem in problems:
    seed, nuts_seed = sg.random.split_seed(seed, 2)
    draws, seconds, grads, extra = nuts(problem, sizes["nuts_warmup"],
                                        sizes["nuts_steps"], nuts_seed, jit)
    rows.append(dict(model=problem.name, method="NUTS",
                     full_batch=problem.full_batch,
                     **score(problem, draws, seconds, grads), **extra,
                     leapfrogs_per_draw=grads / sizes["nuts_steps"]))
    budget = grads
    for method in methods or METHODS:
      seed, method_seed = sg.random.split_seed(seed, 2)
      if method == "sample":
        draws, seconds, grads, extra = sample_method(problem, method_seed,
                                                     quick)
        scored = score(problem, draws, seconds, grads)
        extra["passes"] = bool(scored["mean_error_mcse"] <= 4. and
                               scored["sd_rel_error"] <= 0.1)
        rows.append(dict(model=problem.name, method=method,
                         full_batch=problem.full_batch, **scored, **extra))
        _write(rows, quick, sizes, out, name)
        continue
      run = sg_method(problem, method, sizes["warmup"], budget, method_seed,
                      jit, warmup_options)
      if run is None:
        rows.append(dict(model=problem.name, method=method,
                         full_batch=problem.full_batch,
                         not_run="AMAGOLD takes no momentum_distribution "
                                 "here: no mass matrix to adapt"))
        continue
      draws, seconds, grads, extra = run
      scored = score(problem, draws, seconds, grads)
      extra["passes"] = bool(scored["mean_error_mcse"] <= 4. and
                             scored["sd_rel_error"] <= 0.1)
      rows.append(dict(model=problem.name, method=method,
                       full_batch=problem.full_batch, **scored, **extra))
      _write(rows, quick, sizes, out, name)
  print(table(rows))
  return rows


def _write(rows, quick, sizes, out, name):
  """The rows so far as JSON (after every method: a long run that stops
  keeps what it measured)."""
  if not out:
    return
  os.makedirs(out, exist_ok=True)
  name = name or ("posteriors_quick.json" if quick else "posteriors.json")
  with open(os.path.join(out, name), "w") as f:
    json.dump(dict(date=datetime.date.today().isoformat(), quick=quick,
                   sizes=sizes, num_chains=NUM_CHAINS, rows=rows), f,
              indent=1)


def table(rows):
  """The rows as a markdown table."""
  lines = ["| model | method | mean err (sd) | mean err (MCSE) | sd rel err "
           "| ESS / 1k grad | ESS / s | step size | mass | leapfrogs / draw |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- "
           "| ---: |"]
  for r in rows:
    if "not_run" in r:
      lines.append(f"| {r['model']} | {r['method']} | not run: "
                   f"{r['not_run']} | | | | | | | |")
      continue
    step = r.get("step_size")
    mass = r.get("mass") or ("adapted" if r.get("mass_adapted", True)
                             else "identity")
    leapfrogs = r.get("leapfrogs_per_draw")
    lines.append(
        f"| {r['model']} | {r['method']} | {r['mean_error_sd']:.3f} | "
        f"{r['mean_error_mcse']:.1f} | {r['sd_rel_error']:.3f} | "
        f"{r['ess_per_1k_gradients']:.2f} | {r['ess_per_second']:.1f} | "
        f"{'' if step is None else f'{step:.3g}'} | {mass} | "
        f"{'' if leapfrogs is None else f'{leapfrogs:.3g}'} |")
  return "\n".join(lines)


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--models", nargs="*")
  parser.add_argument("--methods", nargs="*")
  parser.add_argument("--name", help="the JSON file's name in results/")
  parser.add_argument("--dense-mass", action="store_true",
                      help="AMAGOLD warmed up: warm_up(dense_mass=True)")
  parser.add_argument("--adapt-num-leapfrog-steps", action="store_true",
                      help="AMAGOLD warmed up: its T tuned by ChEES")
  args = parser.parse_args()
  options = {}
  if args.dense_mass:
    options["dense_mass"] = True
  if args.adapt_num_leapfrog_steps:
    options["adapt_num_leapfrog_steps"] = True
  main(quick=args.quick, models=args.models, methods=args.methods,
       name=args.name, warmup_options=options)
