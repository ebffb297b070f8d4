"""Keras: one epoch of sampling divided by one epoch of SGD with momentum.

The Bayesian MLP 784-100-10 of examples/keras_bnn_mnist.py on the 8,000
MNIST training images of that example (the 10,000 MNIST test images split
8,000 / 2,000 by numpy.random.default_rng(0).permutation), batch 500
(16 steps per epoch), one `tf.data` pipeline (shuffle + batch) shared by all
fits, `model.compile(jit_compile=True)`:

* SGD: `keras.optimizers.SGD(0.05, momentum=0.9)`, the baseline;
* SGHMC, SGLD: `tfp_sgmcmc.keras` samplers through `SamplingCallback`
  (sampling from the first step, `burnin_epochs=0`); SGHMC also without
  the running moments (`track_moments=False`), the update alone;
* AMAGOLD, T = 10 (the paper's T for its BNN), exact M-H: every 10 steps
  the callback evaluates U over the 8,000 training images (batches of
  2,000) and runs the test, one compiled call;
* AMAGOLD, T = 10, minibatch M-H (`acceptance_energy="minibatch"`).

An epoch's time is the wall time between consecutive `on_epoch_end`
calls, so it includes everything Keras and the callback do per epoch; the
first epoch of every `fit` (which traces and compiles the train step) is
excluded. Each repeat runs one `fit` per method, interleaved (SGD, SGHMC,
..., SGD, SGHMC, ...); the ratio of a repeat is the median epoch of the
method over the median epoch of SGD in that repeat; the table shows the
median ratio over repeats and its [min, max]. Bounds: SGHMC /
SGD <= 1.25 (goal 1.10; the Gaussian draws are the known floor), AMAGOLD
with the exact test / SGD <= 1.5; both from the same run.

    python benchmarks/keras_epoch.py            # 5 repeats x 8 timed epochs
    python benchmarks/keras_epoch.py --quick    # 2 repeats x 3 timed epochs

`--jit-compile false` (or `auto`, Keras' default, which is False on a
machine without an accelerator) times the same fits without XLA, and the
table adds each method's first (tracing and compiling) epoch, to compare
`compile(jit_compile=True)` with the default on a CPU:

    python benchmarks/keras_epoch.py --quick --jit-compile true --out /tmp/a
    python benchmarks/keras_epoch.py --quick --jit-compile false --out /tmp/b
"""

import argparse
import math
import os
import statistics
import time

import common  # noqa: E402
import harness  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfp_sgmcmc import datasets  # noqa: E402
import tfp_sgmcmc.keras as sgk  # noqa: E402

PRIOR_SCALE = 0.3
T = 10
# method -> (bound on the ratio to SGD, stretch goal or None).
BOUNDS = {"SGHMC": (1.25, 1.10), "AMAGOLD T=10 exact M-H": (1.5, None)}


class EpochClock(keras.callbacks.Callback):
  """Wall and process CPU time at every on_epoch_end (put it last in the
  callback list)."""

  def __init__(self):
    super().__init__()
    self.marks = []
    self.cpu_marks = []

  def on_epoch_end(self, epoch, logs=None):
    self.marks.append(time.perf_counter())
    self.cpu_marks.append(time.process_time())

  def steady_epochs(self):
    return list(np.diff(self.marks))  # Drops the first (compile) epoch.

  def steady_cpu_epochs(self):
    return list(np.diff(self.cpu_marks))


def load_train(num_train=8000):
  """The training part of examples/keras_bnn_mnist.py's split."""
  return datasets.load_mnist_split(
      os.path.join(common.SHARED_DATA, "mnist"), 0,
      train=slice(num_train))["train"]


def make_model(seed=0):
  init = keras.initializers.HeNormal
  return keras.Sequential([
      keras.Input((784,)),
      keras.layers.Dense(100, activation="relu", kernel_initializer=init(seed)),
      keras.layers.Dense(10, kernel_initializer=init(seed + 1))])


def samplers(n, x, y):
  """name -> (sampler factory, SamplingCallback kwargs)."""
  amagold = dict(energy_data=(x, y), energy_batch_size=2000, thinning=5)
  return {
      "SGHMC": (lambda: sgk.SGHMC.from_sgd_momentum(
          learning_rate=0.05 / n, momentum_decay=0.1, noise_estimate=0.05,
          seed=0), dict(thinning=50)),
      "SGHMC, track_moments=False": (lambda: sgk.SGHMC.from_sgd_momentum(
          learning_rate=0.05 / n, momentum_decay=0.1, noise_estimate=0.05,
          seed=0), dict(thinning=50, track_moments=False)),
      "SGLD": (lambda: sgk.SGLD(step_size=1e-6, seed=0), dict(thinning=50)),
      "AMAGOLD T=10 exact M-H": (lambda: sgk.AMAGOLD.from_sgd_parameters(
          learning_rate=2e-4 / n, momentum_decay=1e-3, num_leapfrog_steps=T,
          resample_momentum=False, seed=0), amagold),
      "AMAGOLD T=10 minibatch M-H": (lambda: sgk.AMAGOLD.from_sgd_parameters(
          learning_rate=2e-4 / n, momentum_decay=1e-3, num_leapfrog_steps=T,
          resample_momentum=False, acceptance_energy="minibatch", seed=0),
                                     dict(amagold, energy_batch_size=500)),
  }


def _bound_note(row):
  if row.get("bound") is None:
    return ""
  note = f"  bound <= {row['bound']}"
  if row["goal"] is not None:
    note += f" (goal {row['goal']})"
  return note + (": met" if row["bound_met"] else ": NOT met")


def summarize(epoch_times, extra=None, epochs_run=None, cpu_times=None):
  """Rows of the table from name -> [per-repeat lists of epoch seconds].

  `ratio`: per repeat, median epoch over SGD's median epoch; spread over
  repeats. `ratio_of_minima`: fastest epoch over SGD's fastest epoch, the
  least disturbed by other processes on a shared machine. `cpu_ratio`: the
  same per-repeat median ratio of process CPU time per epoch (all threads),
  steadier than wall time when other jobs share the cores."""
  extra = extra or {}
  rows = []
  sgd_medians = [statistics.median(e) for e in epoch_times["SGD"]]
  sgd_min = min(t for e in epoch_times["SGD"] for t in e)
  print(f"\n{'method':28s} {'ms/epoch median [min, max]':>30s} "
        f"{'ratio to SGD median [min, max]':>32s} {'ratio of minima':>16s}"
        f" {'CPU-time ratio':>15s}")
  for name, per_repeat in epoch_times.items():
    medians = [statistics.median(e) for e in per_repeat]
    ratios = [m / s for m, s in zip(medians, sgd_medians)]
    all_epochs = [t for e in per_repeat for t in e]
    row = dict(method=name, ms_per_epoch=harness.spread(
        [1e3 * t for t in all_epochs]), ratio=harness.spread(ratios),
               ratio_of_minima=min(all_epochs) / sgd_min,
               bound=BOUNDS.get(name, (None,))[0],
               goal=BOUNDS.get(name, (None, None))[1],
               **extra.get(name, {}))
    if cpu_times:
      cpu_sgd = [statistics.median(e) for e in cpu_times["SGD"]]
      row["cpu_ratio"] = harness.spread(
          [statistics.median(e) / c for e, c in zip(cpu_times[name],
                                                     cpu_sgd)])
    if row["bound"] is not None:
      row["bound_met"] = row["ratio"]["median"] <= row["bound"]
    if "AMAGOLD" in name and extra.get(name) and epochs_run:
      # The callback's host-side M-H time over all fits (compile epochs
      # included), per epoch run.
      row["mh_ms_per_epoch"] = 1e3 * extra[name]["mh_seconds"] / epochs_run
    rows.append(row)
    print(f"{name:28s} {harness.fmt(row['ms_per_epoch'], digits=0):>30s} "
          f"{harness.fmt(row['ratio']):>32s} {row['ratio_of_minima']:16.2f}"
          f" {row.get('cpu_ratio', {}).get('median', math.nan):15.2f}"
          + _bound_note(row))
  return rows


def main(quick=False, smoke=False, repeats=None, epochs=None,
         batch_size=500, num_train=8000, steps_per_execution=1,
         methods=None, out=None, jit_compile=True, repeat=False):
  if smoke:  # The CI smoke test: tiny sizes, SGD and SGHMC only.
    num_train, batch_size, methods = 1000, 250, methods or ["SGHMC"]
  repeats = repeats or (1 if smoke else 2 if quick else 5)
  epochs = epochs or (1 if smoke else 3 if quick else 8)  # Timed, per fit.
  x, y = load_train(num_train)
  n = len(x)
  data = (tf.data.Dataset.from_tensor_slices((x, y))
          .shuffle(n, seed=0, reshuffle_each_iteration=True)
          .batch(batch_size, drop_remainder=True))
  steps = n // batch_size
  if repeat:  # One iterator for the whole fit (`docs/keras.md`).
    data = data.repeat()
  data = data.prefetch(tf.data.AUTOTUNE)
  specs = samplers(n, x, y)
  if methods is not None:
    specs = {k: v for k, v in specs.items() if k in methods}
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  fits = {}
  for name in ["SGD"] + list(specs):
    model = make_model()
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                  loss=loss, jit_compile=jit_compile,
                  steps_per_execution=steps_per_execution)
    callbacks = []
    if name != "SGD":
      factory, kwargs = specs[name]
      callbacks.append(sgk.SamplingCallback(
          factory(), num_examples=n, prior=PRIOR_SCALE, burnin_epochs=0,
          max_samples=20, **kwargs))
    fits[name] = (model, callbacks)

  print(f"MNIST MLP 784-100-10, N={n}, batch {batch_size} ({steps} steps per "
        f"epoch), jit_compile={jit_compile!r}, steps_per_execution="
        f"{steps_per_execution}, {'repeated' if repeat else 'finite'} "
        f"dataset; {repeats} interleaved repeats x {epochs} timed epochs",
        flush=True)
  epoch_times = {name: [] for name in fits}   # One list per repeat.
  cpu_times = {name: [] for name in fits}
  first_fit_epoch = {}   # The first epoch of the first fit: trace + compile.
  extra = {name: {} for name in fits}
  for r in range(repeats):
    for name, (model, callbacks) in fits.items():
      clock = EpochClock()
      start = time.perf_counter()
      model.fit(data, epochs=epochs + 1, verbose=0,
                steps_per_epoch=steps if repeat else None,
                callbacks=callbacks + [clock])
      first_fit_epoch.setdefault(name, clock.marks[0] - start)
      epoch_times[name].append(clock.steady_epochs())
      cpu_times[name].append(clock.steady_cpu_epochs())
      if callbacks and "AMAGOLD" in name:
        cb = callbacks[0]
        extra[name] = dict(acceptance=cb.acceptance_rate,
                           mh_tests=cb.num_tests, mh_seconds=cb.mh_seconds)
    print(f"  repeat {r + 1}/{repeats}: " + ", ".join(
        f"{k} {1e3 * statistics.median(v[-1]):.0f} ms"
        for k, v in epoch_times.items()), flush=True)

  rows = summarize(epoch_times, extra, repeats * (epochs + 1), cpu_times)
  for row in rows:
    row["first_epoch_s"] = first_fit_epoch[row["method"]]
  print("first epoch of the first fit (tracing and compiling), s: " +
        ", ".join(f"{k} {v:.1f}" for k, v in first_fit_epoch.items()))
  if smoke and not out:
    return rows
  harness.write_json(os.path.join(out or harness.RESULTS,
                                  "keras_epoch.json"), dict(
      rows=rows, num_train=n, batch_size=batch_size, steps_per_epoch=steps,
      steps_per_execution=steps_per_execution, repeats=repeats,
      repeated_dataset=repeat,
      timed_epochs_per_fit=epochs, quick=quick, jit_compile=jit_compile,
      epoch_times_s={k: v for k, v in epoch_times.items()},
      cpu_epoch_times_s={k: v for k, v in cpu_times.items()}))
  return rows


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument("--epochs", type=int, default=None,
                      help="timed epochs per fit (after the compile epoch)")
  parser.add_argument("--batch-size", type=int, default=500)
  parser.add_argument("--steps-per-execution", type=int, default=1)
  parser.add_argument("--out", default=None,
                      help="JSON directory (default benchmarks/results)")
  parser.add_argument("--jit-compile", default="true",
                      choices=["true", "false", "auto"],
                      help="model.compile(jit_compile=...); default true")
  parser.add_argument("--repeat", action="store_true",
                      help="repeat the dataset and pass steps_per_epoch, so "
                      "one iterator serves the whole fit (the default makes "
                      "one per epoch)")
  a = parser.parse_args()
  main(quick=a.quick, repeats=a.repeats, epochs=a.epochs,
       batch_size=a.batch_size, steps_per_execution=a.steps_per_execution,
       out=a.out, jit_compile={"true": True, "false": False,
                               "auto": "auto"}[a.jit_compile],
       repeat=a.repeat)
