"""One `tfp_sgmcmc.sample` call with its defaults on a large data set.

Bayesian logistic regression, N = 200,000 examples, d = 20 standard normal
features, minibatches of 1,000, N(0, 1) prior; 4 chains of 1,000 draws.
The reference is the Laplace approximation at the exact mode (Newton's
method in float64 on the full data): at this N and d = 20 the posterior
mean is within 0.04 sd of the mode. At d = 200 the gap grows to 0.7 sd, so
where `one_call_reference.py` has saved the posterior's own means and sds
(an independent HMC run) for the size run, they are the reference; the row
says which (`reference`). Checks (docs/performance.md):

* every posterior mean within 0.2 reference sd of the reference mean;
* every posterior sd within 10% of the reference sd;
* split R-hat <= 1.01 with chains that draw their own minibatches, both
  the report's (TFP's `potential_scale_reduction`, a ratio of variances)
  and ArviZ's rank-normalised one (its square root, about);
* wall time of the call (mode search, warm-up, compilation and sampling
  included), with the machine's load average beside it, and the process's
  CPU time (both cores counted): on a busy machine the wall time says
  little, while the CPU time bounds the wall time of the same run on a
  quiet machine from above, as long as it keeps at least one core busy.

    python benchmarks/one_call.py                   # the size above
    python benchmarks/one_call.py --kernel sghmc    # another kernel
    python benchmarks/one_call.py --seed 1          # other data, seeds
    python benchmarks/one_call.py --tiny            # seconds (tests)
    python benchmarks/one_call.py --dim 300 --shared-factor  # correlated
    python benchmarks/one_call.py --dim 300 --shared-factor \
        --dense-mass true                          # the windows' dense mass
    python benchmarks/one_call.py --small-units     # a coefficient of 50
    python benchmarks/one_call.py --dim 200 --batch-size 5000
    python benchmarks/one_call.py --num-examples 20000 --dim 50 \
        --batch-size 100 [--keep-minibatches]      # a smaller d / n case
    python benchmarks/one_call.py --dataset --num-examples 50000
        # the data streamed from tf.data (DatasetTarget, no XLA)
    python benchmarks/one_call.py --tfrecord --num-examples 50000 \
        [--control-variates false]  # from TFRecord files (TFRecordTarget)
"""

import argparse
import datetime
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

tfd = tfp.distributions
HERE = os.path.dirname(os.path.abspath(__file__))
MEAN_TOLERANCE, SD_TOLERANCE, MAX_RHAT = 0.2, 0.1, 1.01


def logistic_data(num_examples, dim, seed=0, shared_factor=False,
                  small_units=False):
  """Standard normal features and N(0, 1) weights; with `shared_factor`,
  features 0.6 z_j + 0.4 a_j z_0 (a_j ~ N(0, 1): every feature loads on
  one common factor, so the posterior is correlated along one direction)
  and N(0, 0.2^2) weights; with `small_units`, the last feature in units
  100x too large (sd 0.01) and its weight 50, beyond what 2,000 Adam steps
  of 0.01 can reach."""
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, dim))
  if shared_factor:
    x = 0.6 * x + 0.4 * x[:, :1] * rng.normal(size=dim)
  x = x.astype(np.float32)
  w = (rng.normal(size=dim) * (0.2 if shared_factor else 1.)).astype(
      np.float32)
  if small_units:
    x[:, -1] *= 0.01
    w[-1] = 50.
  y = (rng.uniform(size=num_examples) < 1 / (1 + np.exp(-x @ w))).astype(
      np.float32)
  return x, y


def laplace(x, y, num_newton_steps=50, prior_sd=1.):
  """(mode, sds) of the posterior's Laplace approximation, in float64."""
  x = x.astype(np.float64)
  w = np.zeros(x.shape[1])
  for _ in range(num_newton_steps):
    p = 1 / (1 + np.exp(-x @ w))
    gradient = x.T @ (p - y) + w / prior_sd**2
    hessian = (x * (p * (1 - p))[:, None]).T @ x + np.eye(
        x.shape[1]) / prior_sd**2
    step = np.linalg.solve(hessian, gradient)
    w -= step
    if np.max(np.abs(step)) < 1e-12:
      break
  return w, np.sqrt(np.diag(np.linalg.inv(hessian)))


def target_for(x, y, batch_size, prior_sd=1., dataset=False, tfrecord=False):
  """The model in memory, or (`dataset`) streamed from tf.data: shuffled
  minibatches of `batch_size`, the exact energy from batches of 10,000, or
  (`tfrecord`) written to 8 TFRecord shards in a temporary folder, records
  of 10 examples, `batch_size` / 10 records per minibatch."""
  def log_likelihood(w, batch):
    xb, yb = batch
    return tfd.Bernoulli(logits=tf.linalg.matvec(xb, w)).log_prob(yb)
  log_prior = lambda w: tf.reduce_sum(tfd.Normal(0., prior_sd).log_prob(w),
                                      -1)
  if tfrecord:
    layout = sg.write_tfrecord_shards((x, y), tempfile.mkdtemp(),
                                      num_shards=8, record_size=10,
                                      shuffle_seed=0)
    return sg.TFRecordTarget(log_likelihood, layout, batch_size // 10,
                             log_prior_fn=log_prior,
                             parameter_shapes=[x.shape[1]])
  if dataset:
    examples = tf.data.Dataset.from_tensor_slices((x, y))
    return sg.DatasetTarget(
        log_likelihood, examples.repeat().shuffle(10_000, seed=0).batch(
            batch_size), num_examples=len(x), log_prior_fn=log_prior,
        full_dataset=cut_batches((x, y), 10_000),
        parameter_shapes=[x.shape[1]])
  return sg.InMemoryTarget(log_likelihood, (x, y), batch_size=batch_size,
                           parameter_shapes=[x.shape[1]],
                           log_prior_fn=log_prior)


def cut_batches(arrays, size):
  """A dataset of batches of `size` examples (and a last, shorter one) cut
  from `arrays` before tf.data sees them, as docs/warmup.md advises for a
  `full_dataset`: `.batch` over a dataset of examples copies them one by
  one on every pass."""
  count = len(arrays[0]) // size
  whole = tf.data.Dataset.from_tensor_slices(tuple(
      a[:count * size].reshape((count, size) + a.shape[1:]) for a in arrays))
  if len(arrays[0]) % size:
    whole = whole.concatenate(tf.data.Dataset.from_tensors(tuple(
        a[count * size:] for a in arrays)))
  return whole


def reference_path(dim, shared_factor):
  """Where `one_call_reference.py` saves the d-dimensional reference."""
  return os.path.join(HERE, "results", (
      f"one_call_reference_d{dim}" +
      ("_shared_factor" if shared_factor else "") + ".npz"))


def run(num_examples=200_000, dim=20, batch_size=1000, num_results=1000,
        num_chains=4, kernel=None, seed=0, progress=True,
        shared_factor=False, small_units=False, dataset=False,
        tfrecord=False, **sample_kwargs):
  x, y = logistic_data(num_examples, dim, seed, shared_factor, small_units)
  # A N(0, 1) prior would hold a weight of 50 near 0: a wide one.
  prior_sd = 100. if small_units else 1.
  mode, laplace_sd = laplace(x, y, prior_sd=prior_sd)
  centre, scale, reference = mode, laplace_sd, "Laplace"
  path = reference_path(dim, shared_factor)
  if (num_examples == 200_000 and not seed and not small_units
      and os.path.exists(path)):
    # The posterior's own means and sds (one_call_reference.py).
    saved = np.load(path)
    centre, scale, reference = saved["mean"], saved["sd"], (
        "HMC (one_call_reference.py)")
  target = target_for(x, y, batch_size, prior_sd, dataset, tfrecord)
  load = os.getloadavg()[0]
  start, cpu_start = time.perf_counter(), time.process_time()
  fit = sg.sample(target, num_results=num_results, num_chains=num_chains,
                  kernel=kernel, seed=[seed, 1], progress=progress,
                  **sample_kwargs)
  seconds = time.perf_counter() - start
  cpu_seconds = time.process_time() - cpu_start
  draws = np.asarray(fit.draws, np.float64).reshape(-1, dim)
  mean_error = np.abs(draws.mean(0) - centre) / scale
  sd_ratio = draws.std(0) / scale
  row = dict(
      kernel=fit.report.kernel, num_examples=num_examples, dim=dim,
      batch_size=batch_size, num_chains=num_chains, num_results=num_results,
      shared_factor=shared_factor, small_units=small_units,
      dataset=dataset, tfrecord=tfrecord, reference=reference,
      means=draws.mean(0).tolist(), sds=draws.std(0).tolist(),
      max_mode_gap_sd=float(np.max(np.abs(centre - mode) / scale)),
      max_mean_error_sd=float(mean_error.max()),
      sd_ratio_min=float(sd_ratio.min()), sd_ratio_max=float(sd_ratio.max()),
      max_rhat=float(fit.report.max_rhat),
      max_rhat_rank=fit.report.max_rank_rhat,
      min_ess=float(fit.report.min_ess), mass=fit.report.mass,
      arrived=bool(fit.report.arrived),
      minibatches=fit.report.minibatches,
      control_variates=bool(fit.report.control_variates),
      step_size=float(fit.report.warmup.step_size),
      seconds=seconds, cpu_seconds=cpu_seconds,
      phase_seconds=fit.report.seconds,
      load_average=load, load_average_after=os.getloadavg()[0],
      date=datetime.date.today().isoformat())
  row["passes"] = dict(
      means=row["max_mean_error_sd"] <= MEAN_TOLERANCE,
      sds=abs(row["sd_ratio_min"] - 1) <= SD_TOLERANCE and
      abs(row["sd_ratio_max"] - 1) <= SD_TOLERANCE,
      rhat=row["max_rhat"] <= MAX_RHAT and (
          row["max_rhat_rank"] is None or row["max_rhat_rank"] <= MAX_RHAT),
      # A tf.data pipeline gives every chain the same batches.
      independent=dataset or tfrecord or
      row["minibatches"] == "independent minibatches")
  return row


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--kernel", default=None)
  parser.add_argument("--num-results", type=int, default=1000)
  parser.add_argument("--seed", type=int, default=0,
                      help="the data's and the call's seed")
  parser.add_argument("--dim", type=int, default=20)
  parser.add_argument("--num-examples", type=int, default=200_000)
  parser.add_argument("--keep-minibatches", action="store_true",
                      help="sample(..., full_batch=False)")
  parser.add_argument("--batch-size", type=int, default=1000)
  parser.add_argument("--shared-factor", action="store_true",
                      help="features that share one factor (a posterior "
                      "correlated along one direction)")
  parser.add_argument("--small-units", action="store_true",
                      help="the last feature in units 100x too large, its "
                      "weight 50, and a N(0, 100^2) prior")
  parser.add_argument("--dense-mass", choices=("true", "false"),
                      help="sample(..., dense_mass=True or False); unset: "
                      "sample's own pick")
  parser.add_argument("--dataset", action="store_true",
                      help="the data streamed from tf.data (DatasetTarget)")
  parser.add_argument("--tfrecord", action="store_true",
                      help="the data read from TFRecord files "
                      "(TFRecordTarget)")
  parser.add_argument("--control-variates", choices=("true", "false"),
                      help="sample(..., control_variates=True or False); "
                      "unset: sample's own rule")
  parser.add_argument("--tiny", action="store_true",
                      help="N = 20,000, d = 3, short runs (seconds)")
  parser.add_argument("--out", default=os.path.join(HERE, "results"))
  args = parser.parse_args()
  if args.tiny:
    # Above sample's FULL_BATCH_MAX_EXAMPLES, so that the tiny run takes
    # the full size's path: minibatches through control variates.
    row = run(num_examples=20_000, dim=3, batch_size=50, num_results=60,
              kernel=args.kernel, progress=False, num_adaptation_steps=60,
              num_mode_steps=200, mode_learning_rate=0.05, jit_compile=False)
  else:
    row = run(kernel=args.kernel, num_results=args.num_results,
              seed=args.seed, dim=args.dim, num_examples=args.num_examples,
              shared_factor=args.shared_factor,
              small_units=args.small_units, batch_size=args.batch_size,
              dataset=args.dataset, tfrecord=args.tfrecord,
              **({} if args.control_variates is None else dict(
                  control_variates=args.control_variates == "true")),
              **(dict(full_batch=False) if args.keep_minibatches else {}),
              **({} if args.dense_mass is None else dict(
                  dense_mass=args.dense_mass == "true")))
  print(f"| {row['kernel']} | N = {row['num_examples']:,}, d = {row['dim']}, "
        f"n = {row['batch_size']}, {row['num_chains']} chains x "
        f"{row['num_results']} | max mean error "
        f"{row['max_mean_error_sd']:.3f} sd | sd ratio "
        f"{row['sd_ratio_min']:.3f}-{row['sd_ratio_max']:.3f} | R-hat "
        f"{row['max_rhat']:.3f} (rank-normalised "
        f"{row['max_rhat_rank'] or float('nan'):.3f}) | min ESS "
        f"{row['min_ess']:.0f} | "
        f"{row['seconds']:.0f} s (load {row['load_average']:.1f}; process "
        f"CPU time {row['cpu_seconds']:.0f} s) |")
  print("passes:", row["passes"])
  os.makedirs(args.out, exist_ok=True)
  name = ("one_call_tiny.json" if args.tiny else
          "one_call.json" if not args.seed else
          f"one_call_seed{args.seed}.json")
  if not args.tiny and (args.dim != 20 or args.shared_factor):
    name = name.replace(".json", f"_d{args.dim}" + (
        "_shared_factor" if args.shared_factor else "") + ".json")
  if not args.tiny and args.kernel is not None:  # Not the default's file.
    name = name.replace(".json", f"_{args.kernel}.json")
  if not args.tiny and args.small_units:
    name = name.replace(".json", "_small_units.json")
  if not args.tiny and args.num_examples != 200_000:
    name = name.replace(".json", f"_N{args.num_examples}.json")
  if not args.tiny and args.dataset:
    name = name.replace(".json", "_dataset.json")
  if not args.tiny and args.tfrecord:
    name = name.replace(".json", "_tfrecord.json")
  if not args.tiny and args.control_variates is not None:
    name = name.replace(".json", f"_cv_{args.control_variates}.json")
  if not args.tiny and args.keep_minibatches:
    name = name.replace(".json", "_minibatches.json")
  if not args.tiny and args.batch_size != 1000:
    name = name.replace(".json", f"_n{args.batch_size}.json")
  if not args.tiny and args.dense_mass is not None:
    name = name.replace(".json", "_dense_mass.json" if args.dense_mass ==
                        "true" else "_diagonal_mass.json")
  with open(os.path.join(args.out, name), "w") as f:
    json.dump(row, f, indent=1)


if __name__ == "__main__":
  main()
