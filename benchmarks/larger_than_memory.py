"""Data larger than memory: TFRecordTarget on a >= 2 GB logistic regression.

Generates a Bayesian logistic regression (d = 100 float32 features and a
float32 label per example, 404 bytes) chunk by chunk, never whole in memory,
and writes it with `write_tfrecord_shards` (16 shards, records of 32
examples) under --dir (default /tmp; the files are deleted at the end unless
--keep). Then, each in a fresh process so that its peak resident memory
(ru_maxrss) is its own:

* `stream`: `TFRecordTarget` on the big files: time per minibatch gradient
  (`energy_and_gradient`, n = 128 = 4 records, in a `tf.function`), time per
  exact-energy pass (streaming every shard), a few exact AMAGOLD steps,
  what `sample`'s start computes (an exact gradient and a block of 32
  Hessian-vector products, Newton's), and the process's peak RSS, which
  must stay under 1.5 GB;
* `compare`: at a size that fits (N = 2^19, 212 MB), `InMemoryTarget` and
  `TFRecordTarget` over the same examples, timed interleaved (A, B, A, B)
  in one process: time per gradient and per exact-energy pass.

    python benchmarks/larger_than_memory.py                 # ~2.1 GB
    python benchmarks/larger_than_memory.py --size-gb 0.1   # quick check

Writes benchmarks/results/larger_than_memory.json.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

DIM, RECORD, SHARDS, BATCH_RECORDS = 100, 32, 16, 4
CHUNK = 2 ** 17  # examples generated and written at a time
SMALL_N = 2 ** 19
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                       "larger_than_memory.json")


def chunks(num_examples, seed=0):
  rng = np.random.default_rng(seed)
  w_true = rng.normal(size=DIM) / np.sqrt(DIM)
  for start in range(0, num_examples, CHUNK):
    n = min(CHUNK, num_examples - start)
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    p = 1. / (1. + np.exp(-(x @ w_true)))
    y = (rng.uniform(size=n) < p).astype(np.float32)
    yield x, y


def write(directory, num_examples):
  import tfp_sgmcmc as sg  # pylint: disable=import-outside-toplevel
  start = time.perf_counter()
  layout = sg.write_tfrecord_shards(chunks(num_examples), directory,
                                    num_shards=SHARDS, record_size=RECORD)
  seconds = time.perf_counter() - start
  size = sum(os.path.getsize(os.path.join(directory, f))
             for f in os.listdir(directory))
  return layout, size, seconds


def log_likelihood(w, batch):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  x, y = batch
  logits = tf.einsum("nd,...d->...n", x, w)
  return -tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits)


def log_prior(w):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return -0.5 * tf.reduce_sum(w ** 2, axis=-1)


def timers(target):
  """(gradient(seed), energy()) compiled for `target` (tf.function)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  w = tf.fill([DIM], 0.01)
  gradient = tf.function(lambda s: target.energy_and_gradient(w, s)[1],
                         autograph=False)
  energy = tf.function(lambda: target.energy(w), autograph=False)
  energy.get_concrete_function()  # trace now, so no timed pass includes it
  return gradient, energy


def time_gradients(gradient, num, seed0):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  seeds = [tf.constant([seed0, i]) for i in range(num)]
  gradient(seeds[0]).numpy()  # trace
  start = time.perf_counter()
  for s in seeds:
    out = gradient(s)
  out.numpy()
  return (time.perf_counter() - start) / num


def time_energy(energy):
  start = time.perf_counter()
  energy().numpy()
  return time.perf_counter() - start


def peak_rss_gb():
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def stream(layout):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_probability as tfp  # pylint: disable=import-outside-toplevel
  import tfp_sgmcmc as sg  # pylint: disable=import-outside-toplevel
  rss_after_import = peak_rss_gb()
  target = sg.TFRecordTarget(log_likelihood, layout, BATCH_RECORDS,
                             log_prior_fn=log_prior)
  gradient, energy = timers(target)
  out = dict(num_examples=target.num_examples,
             rss_after_import_gb=rss_after_import)
  out["gradient_s"] = [time_gradients(gradient, 200, r) for r in range(3)]
  energy_times = [time_energy(energy) for _ in range(3)]
  out["energy_pass_s"] = energy_times
  kernel = sg.AMAGOLD(target, step_size=1e-3, num_leapfrog_steps=10,
                      friction=1.)
  run = tf.function(lambda s: tfp.mcmc.sample_chain(
      3, tf.zeros([DIM]), kernel=kernel, seed=s,
      trace_fn=lambda _, r: r.is_accepted), autograph=False)
  start = time.perf_counter()
  _, accepted = run(tf.constant([0, 1]))
  out["amagold_3_steps_s_incl_trace"] = time.perf_counter() - start
  out["amagold_accepted"] = np.asarray(accepted).tolist()
  out["peak_rss_gb_before_start"] = peak_rss_gb()
  # What `sample`'s start (Newton's method) computes: the exact gradient
  # and 32 Hessian-vector products, each a streaming pass or three.
  from tfp_sgmcmc.chains import laplace  # pylint: disable=import-outside-toplevel
  hvps, energy_and_gradient = laplace.hessian_products(target, tf.zeros([DIM]))
  point = tf.fill([DIM], 0.01)
  for name, fn in (("exact_gradient", lambda: energy_and_gradient(point)[1]),
                   ("hessian_block", lambda: hvps(point, tf.eye(
                       laplace.PRODUCTS_PER_PASS, DIM)))):
    start = time.perf_counter()
    fn().numpy()
    out[f"{name}_s_incl_trace"] = time.perf_counter() - start
    out[f"{name}_s"] = []
    for _ in range(3):
      start = time.perf_counter()
      fn().numpy()
      out[f"{name}_s"].append(time.perf_counter() - start)
  out["peak_rss_gb"] = peak_rss_gb()
  return out


def compare(layout):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tfp_sgmcmc as sg  # pylint: disable=import-outside-toplevel
  x, y = next(iter(_concat(chunks(SMALL_N))))
  in_memory = sg.InMemoryTarget(log_likelihood, (x, y),
                                BATCH_RECORDS * RECORD,
                                log_prior_fn=log_prior)
  records = sg.TFRecordTarget(log_likelihood, layout, BATCH_RECORDS,
                              log_prior_fn=log_prior)
  w = tf.fill([DIM], 0.01)
  np.testing.assert_allclose(records.energy(w), in_memory.energy(w),
                             rtol=1e-4)
  pairs = {"in_memory": timers(in_memory), "tfrecord": timers(records)}
  xla_energy = tf.function(lambda: in_memory.energy(w), jit_compile=True,
                           autograph=False)
  xla_gradient = tf.function(
      lambda s: in_memory.energy_and_gradient(w, s)[1], jit_compile=True,
      autograph=False)
  out = {k: {"gradient_s": [], "energy_pass_s": []} for k in pairs}
  out["in_memory_xla"] = {"gradient_s": [], "energy_pass_s": []}
  for repeat in range(3):
    for name, (gradient, energy) in pairs.items():
      out[name]["gradient_s"].append(time_gradients(gradient, 200, repeat))
      out[name]["energy_pass_s"].append(time_energy(energy))
    out["in_memory_xla"]["gradient_s"].append(
        time_gradients(xla_gradient, 200, repeat))
    if not repeat:
      xla_energy()  # compile
    out["in_memory_xla"]["energy_pass_s"].append(time_energy(xla_energy))
  out["num_examples"] = SMALL_N
  out["peak_rss_gb"] = peak_rss_gb()
  return out


def _concat(parts):
  xs, ys = zip(*parts)
  yield np.concatenate(xs), np.concatenate(ys)


def child(mode, layout):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run([sys.executable, __file__, "--child", mode, layout],
                       capture_output=True, text=True, env=env, check=False)
  if out.returncode:
    raise RuntimeError(out.stderr[-3000:])
  return json.loads(out.stdout.strip().splitlines()[-1])


def median(values):
  return statistics.median(values)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--size-gb", type=float, default=2.1)
  parser.add_argument("--dir", default="/tmp/tfp_sgmcmc_larger_than_memory")
  parser.add_argument("--keep", action="store_true")
  parser.add_argument("--child", nargs=2, metavar=("MODE", "LAYOUT"))
  args = parser.parse_args()
  if args.child:
    mode, layout = args.child
    print(json.dumps(stream(layout) if mode == "stream" else
                     compare(layout)))
    return

  bytes_per_example = 4 * (DIM + 1)
  num_examples = int(args.size_gb * 2 ** 30 / bytes_per_example)
  num_examples -= num_examples % CHUNK
  big_dir = os.path.join(args.dir, "big")
  small_dir = os.path.join(args.dir, "small")
  shutil.rmtree(args.dir, ignore_errors=True)
  try:
    layout, size, seconds = write(big_dir, num_examples)
    print(f"wrote N = {num_examples:,} examples, {size / 2**30:.2f} GiB in "
          f"{seconds:.0f} s")
    big = child("stream", layout)
    small_layout, small_size, _ = write(small_dir, SMALL_N)
    small = child("compare", small_layout)
  finally:
    if not args.keep:
      shutil.rmtree(args.dir, ignore_errors=True)

  print(f"\nTFRecordTarget on {size / 2**30:.2f} GiB "
        f"(N = {big['num_examples']:,}, d = {DIM}):")
  print(f"  gradient (n = {BATCH_RECORDS * RECORD}): "
        f"{1e3 * median(big['gradient_s']):.2f} ms "
        f"(runs: {', '.join(f'{1e3 * t:.2f}' for t in big['gradient_s'])})")
  print(f"  exact-energy pass: {median(big['energy_pass_s']):.1f} s "
        f"(runs: {', '.join(f'{t:.1f}' for t in big['energy_pass_s'])})")
  for name in ("exact_gradient", "hessian_block"):
    print(f"  {name.replace('_', ' ')} (Newton's start): "
          f"{median(big[name + '_s']):.1f} s (runs: "
          f"{', '.join(f'{t:.1f}' for t in big[name + '_s'])}; the first "
          f"call, with its trace, {big[name + '_s_incl_trace']:.1f} s)")
  print(f"  peak RSS: {big['peak_rss_gb']:.2f} GiB (before the start's "
        f"pieces {big['peak_rss_gb_before_start']:.2f}, "
        f"after importing TensorFlow {big['rss_after_import_gb']:.2f})")
  print(f"\nAt N = {SMALL_N:,} ({small_size / 2**20:.0f} MiB), "
        "medians of 3 interleaved repeats:")
  for name in ("in_memory", "in_memory_xla", "tfrecord"):
    r = small[name]
    print(f"  {name:14s} gradient {1e3 * median(r['gradient_s']):7.2f} ms   "
          f"energy pass {1e3 * median(r['energy_pass_s']):8.1f} ms")
  payload = dict(
      load_average_at_end=os.getloadavg(),
      command="python benchmarks/larger_than_memory.py",
      data=dict(num_examples=num_examples, dim=DIM, bytes_on_disk=size,
                shards=SHARDS, record_size=RECORD,
                write_seconds=seconds),
      big=big, small=small)
  import harness  # pylint: disable=import-outside-toplevel
  harness.write_json(RESULTS, payload)


if __name__ == "__main__":
  main()
