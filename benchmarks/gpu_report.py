"""One command that measures what a GPU user of tfp_sgmcmc cares about.

Writes `benchmarks/results/gpu_report_<date>.json` (`--out` chooses the
path; the file is rewritten after every row, so a run that is cut short
keeps the rows it finished) and prints a markdown table. docs/gpu_report.md
describes every field and how to run it on a lent GPU.

Sections, in the order they run (each row records its error and the report
goes on when it fails; rows left when `--budget-s` is spent are skipped
with the reason):

* device: what TensorFlow sees (name, compute capability, memory), the
  TensorFlow / TFP / Keras versions and CUDA build, and whether a
  `tf.function(jit_compile=True)` compiles and where it runs;
* quickstart: the chains of examples/quickstart.py (4 chains on the double
  well with noisy gradients; SGLD, SGHMC, AMAGOLD with its exact test) in
  compiled `while_loop`s (`harness.kernel_loop`, `jit_compile=True`): time
  per gradient and the ratio to a gradient-only floor (`common.GradientOnly`)
  timed in the same interleaved sweep;
* chains: 1, 64, 1,024 and 4,096 chains batched in one kernel on the
  N = 100,000, d = 20 logistic regression of common.py (shared minibatch of
  100): time per step of the gradient floor, SGLD, SGHMC and AMAGOLD with
  the minibatch M-H test, and the ratio to one chain of the same kernel;
* keras: one epoch of the Bayesian MLP at the AMAGOLD paper's size
  (784-500-256-10 ReLU, batch 2,000, `compile(jit_compile=True)`) on
  synthetic inputs of MNIST's shape, for SGD with momentum, SGHMC, SGLD,
  AMAGOLD (exact and minibatch test), and SGHMC under the `mixed_float16`
  and `mixed_bfloat16` policies (each beside SGD under the same policy),
  every epoch time as a ratio to SGD's in the same repeat
  (`keras_epoch.py`'s clock, samplers and interleaving);
* mirrored: SGD and SGHMC under `tf.distribute.MirroredStrategy` over two
  GPUs (skipped with the reason when fewer are visible; `--quick` runs it
  over two logical CPU devices so that its code runs in CI).

Every row reports its peak device memory (`reset_memory_stats` before,
`get_memory_info(...)["peak"]` after; None where the device has no such
counter, e.g. the CPU).

    python benchmarks/gpu_report.py                 # about 5-8 min on a GPU
    python benchmarks/gpu_report.py --quick --out /tmp/gpu_report.json
"""

import argparse
import contextlib
import io
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import traceback
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402


def _split_cpu_for_mirrored():
  """Two logical CPU devices, so that the mirrored row runs without two
  GPUs (`--quick`). Must run before TensorFlow initialises its devices;
  returns why it could not, or None."""
  if len(tf.config.list_physical_devices("GPU")) >= 2:
    return None
  try:
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration()] * 2)
    return None
  except RuntimeError as e:
    return f"could not split the CPU into two logical devices: {e}"


import common  # noqa: E402
import harness  # noqa: E402
import keras_epoch  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
import tfp_sgmcmc.keras as sgk  # noqa: E402
from tfp_sgmcmc import synthetic  # noqa: E402

T = 10
GOALS = {
    ("keras", "SGHMC"): 1.05,
    ("keras", "AMAGOLD T=10 exact M-H"): 1.3,
    ("chains", "4096"): 2.0,
}
SYNTHETIC_DATA = ("synthetic inputs of MNIST's shape: x uniform in [0, 1) "
                  "of shape [N, 784] float32, labels uniform over 10 classes "
                  "(numpy default_rng(0)); for timing only, no download")

FULL = dict(
    budget_s=450., quickstart_target_s=0.2, quickstart_repeats=5,
    chain_counts=(1, 64, 1024, 4096), chains_n=100_000,
    chains_target_s=0.2, chains_repeats=3,
    keras_n=60_000, keras_batch=2000, keras_hidden=(500, 256),
    keras_repeats=4, keras_epochs=5)
QUICK = dict(
    budget_s=600., quickstart_target_s=0.01, quickstart_repeats=1,
    chain_counts=(1, 64), chains_n=2000, chains_target_s=0.01,
    chains_repeats=1,
    keras_n=1000, keras_batch=100, keras_hidden=(16, 8),
    keras_repeats=1, keras_epochs=1)


# --- Rows, budget, progress --------------------------------------------------


class Report:
  """The rows so far, the budget, the progress lines and the JSON, which is
  rewritten after every row."""

  def __init__(self, path, settings, budget_s):
    self.path = path
    self.settings = settings
    self.budget_s = budget_s
    self.start = time.perf_counter()
    self.cpu_start = time.process_time()
    self.rows = []
    self.device = {}

  def elapsed(self):
    return time.perf_counter() - self.start

  def over_budget(self):
    """The reason to skip what is left, or None."""
    if self.elapsed() > self.budget_s:
      return (f"budget of {self.budget_s:.0f} s spent ({self.elapsed():.0f} s "
              f"elapsed); rerun with a larger --budget-s")
    return None

  def add(self, row):
    row.setdefault("status", "ok")
    row["elapsed_s"] = round(self.elapsed(), 2)
    self.rows.append(row)
    ratio = row.get("ratio")
    detail = {"ok": row.get("summary") or (f"{_fmt_time(row)}" + (
        f", x{ratio['median']:.2f} vs {row['ratio_to']}" if ratio else "")),
              "skipped": row.get("reason"),
              "error": short_error(row.get("error", ""))}[row["status"]]
    print(f"[{self.elapsed():7.1f} s] {row['section']}: {row['name']}: "
          f"{row['status']}: {detail}", flush=True)
    self.save(complete=False)

  def fail(self, section, names, error, **extra):
    text = f"{type(error).__name__}: {error}"
    if len(text) > 2000:  # TF's graph errors end with what went wrong.
      text = text[:500] + " [...] " + text[-1500:]
    traceback.print_exception(error, file=sys.stderr)
    for name in names:
      self.add(dict(section=section, name=name, status="error",
                    error=text[:2000], **extra))

  def skip(self, section, names, reason, **extra):
    for name in names:
      self.add(dict(section=section, name=name, status="skipped",
                    reason=reason, **extra))

  def payload(self, complete):
    return dict(report="gpu_report", complete=complete,
                elapsed_s=round(self.elapsed(), 2),
                cpu_s=round(time.process_time() - self.cpu_start, 2),
                device=self.device,
                data=SYNTHETIC_DATA, goals={f"{s}: {n}": g
                                            for (s, n), g in GOALS.items()},
                settings=self.settings, rows=self.rows,
                table_markdown=table(self.rows))

  def save(self, complete):
    with contextlib.redirect_stdout(io.StringIO()):
      harness.write_json(self.path, self.payload(complete))


def short_error(text):
  """One line of an error: its first, and where that only announces what
  follows (TF's "Graph execution error:"), the last that says what failed."""
  lines = [l.strip() for l in text.splitlines() if l.strip()]
  if not lines:
    return ""
  line = lines[0]
  if line.endswith(":") and len(lines) > 1:
    tail = [l for l in lines[1:] if not l.startswith(("[[", "File ", "Cf. "))]
    if tail:
      line += " " + tail[-1]
  return line[:200]


def _fmt_time(row):
  t = row.get("time")
  if not t:
    return "-"
  v = t["median"]
  return f"{v:.3g} {row['time_unit']}" if v < 1000 else (
      f"{v:,.0f} {row['time_unit']}")


def _with_goal(row, key):
  goal = GOALS.get(key)
  row["goal"] = goal
  row["goal_met"] = (None if goal is None or not row.get("ratio") else
                     bool(row["ratio"]["median"] <= goal))
  return row


def table(rows):
  """The markdown table of the rows."""
  lines = ["| section | row | time | ratio [min, max] | goal | peak memory "
           "| status |", "|---|---|---|---|---|---|---|"]
  for r in rows:
    ratio = r.get("ratio")
    ratio_text = (f"{harness.fmt(ratio)} vs {r['ratio_to']}" if ratio
                  else "-")
    goal = ("-" if r.get("goal") is None else
            f"<= {r['goal']:g}: " + {True: "met", False: "NOT met",
                                     None: "-"}[r.get("goal_met")])
    peak = r.get("peak_memory_bytes")
    peak_text = "-" if peak is None else f"{peak / 2 ** 20:.0f} MiB"
    status = r["status"]
    if status == "skipped":
      status += f": {r['reason']}"
    elif status == "error":
      status += f": {short_error(r['error'])}"
    if r["section"] == "device" and status == "ok":
      status = f"ok: {r['summary']}"
    lines.append(f"| {r['section']} | {r['name']} | {_fmt_time(r)} | "
                 f"{ratio_text} | {goal} | {peak_text} | "
                 f"{status.replace('|', '/')} |")
  return "\n".join(lines)


# --- Device memory -----------------------------------------------------------


def _gpu_names():
  return [d.name.replace("/device:", "")
          for d in tf.config.list_logical_devices("GPU")]


def reset_peaks(devices=None):
  for d in (_gpu_names()[:1] if devices is None else devices):
    tf.config.experimental.reset_memory_stats(d)


def read_peak(devices=None):
  """The largest peak over `devices` (the first GPU by default) in bytes,
  or None without a GPU (the CPU keeps no such counter)."""
  devices = _gpu_names()[:1] if devices is None else devices
  if not devices:
    return None
  return max(tf.config.experimental.get_memory_info(d)["peak"]
             for d in devices)


def peak_of_call(fn, *args):
  """Peak device memory during one call of fn(*args)."""
  if not _gpu_names():
    return None
  reset_peaks()
  tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t,
                        fn(*args))
  return read_peak()


# --- Device ------------------------------------------------------------------


def device_row(mirrored_note):
  gpus = tf.config.list_physical_devices("GPU")
  info = dict(gpus=len(gpus), tensorflow=tf.__version__,
              tfp=tfp.__version__, keras=keras.__version__,
              numpy=np.__version__, python=platform.python_version(),
              build={k: v for k, v in tf.sysconfig.get_build_info().items()
                     if k in ("is_cuda_build", "cuda_version",
                              "cudnn_version", "is_rocm_build")},
              logical_devices=[d.name
                               for d in tf.config.list_logical_devices()],
              quick_mirrored_devices_note=mirrored_note)
  details = []
  for g in gpus:
    d = dict(tf.config.experimental.get_device_details(g))
    if "compute_capability" in d:
      d["compute_capability"] = ".".join(map(str, d["compute_capability"]))
    details.append(d)
  info["gpu_details"] = details
  info["total_memory_mib"] = _nvidia_smi_memory()

  @tf.function(jit_compile=True)
  def probe(x):
    return tf.reduce_sum(tf.sin(x) @ tf.transpose(x))
  try:
    out = probe(tf.ones([64, 64]))
    out.numpy()
    info["xla"] = dict(compiled=True, ran_on=out.device)
  except Exception as e:  # pylint: disable=broad-except
    info["xla"] = dict(compiled=False, error=f"{type(e).__name__}: {e}")
  gpu_names = _gpu_names()
  info["memory_info"] = {d: tf.config.experimental.get_memory_info(d)
                         for d in gpu_names}
  name = (details[0].get("device_name", "GPU") if details else
          f"CPU ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores), no GPU")
  info["device_name"] = name
  xla = info["xla"]
  summary = (f"{name}; TF {tf.__version__}, TFP {tfp.__version__}, Keras "
             f"{keras.__version__}; XLA " +
             (f"compiled on {xla['ran_on']}" if xla["compiled"] else
              "FAILED"))
  if info["total_memory_mib"]:
    summary += f"; {info['total_memory_mib']} MiB"
  return dict(section="device", name="device", summary=summary, **info)


def _nvidia_smi_memory():
  """Total memory of each GPU in MiB from nvidia-smi (TensorFlow reports
  only what it has allocated), or None without it."""
  if not shutil.which("nvidia-smi"):
    return None
  try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total",
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=20)
    return [int(v) for v in out.stdout.split()] or None
  except (OSError, ValueError, subprocess.SubprocessError):
    return None


# --- Compiled chains: quickstart and batched chains --------------------------


def timed_group(report, section, specs, target_s, repeats, ratio_of):
  """Times specs (name -> (kernel, init, gradients per step, extra fields))
  interleaved in one sweep and adds one row each.

  Each loop is compiled alone first, so that a row that fails to build or
  compile records its error and the others still run. `ratio_of(name)` is
  the name whose time a row is divided by (per repeat), or None."""
  seed = tf.constant([1, 2])
  fns = {}
  for name, (kernel, init, _, _) in specs.items():
    try:
      loop = harness.kernel_loop(kernel)
      harness.timed(loop, init, seed, tf.constant(2))  # Compile.
      fns[name] = (loop, (init, seed))
    except Exception as e:  # pylint: disable=broad-except
      report.fail(section, [name], e, **specs[name][3])
  if not fns:
    return
  reason = report.over_budget()
  if reason:
    report.skip(section, list(fns), reason)
    return
  try:
    per_step, steps = harness.interleaved_per_step(fns, target_s, repeats)
  except Exception as e:  # pylint: disable=broad-except
    report.fail(section, list(fns), e)
    return
  per_gradient = section == "quickstart"
  for name, (loop, args) in fns.items():
    _, _, grads, extra = specs[name]
    unit = grads if per_gradient else 1
    other = ratio_of(name)
    row = dict(section=section, name=name, gradients_per_step=grads,
               time=harness.spread([1e6 * t / unit for t in per_step[name]]),
               time_unit="us per gradient" if per_gradient else "us per step",
               us_per_step=harness.spread([1e6 * t for t in per_step[name]]),
               steps_timed=steps[name], ratio=None, ratio_to=None, **extra)
    if other is not None and other in per_step:
      other_unit = specs[other][2] if per_gradient else 1
      row["ratio"] = harness.ratios(
          [t / unit for t in per_step[name]],
          [t / other_unit for t in per_step[other]])
      row["ratio_to"] = ("gradient-only floor" if section == "quickstart"
                         else "1 chain")
    try:
      row["peak_memory_bytes"] = peak_of_call(loop, *args, tf.constant(10))
    except Exception as e:  # pylint: disable=broad-except
      row["peak_memory_bytes"] = None
      row["peak_memory_error"] = f"{type(e).__name__}: {e}"
    report.add(_with_goal(row, (section, str(extra.get("chains")))
                          if section == "chains" else (section, name)))


def quickstart_section(report, cfg):
  """examples/quickstart.py's kernels, 4 chains on the noisy double well."""
  target = synthetic.noisy_target(synthetic.double_well_energy, 1.)
  init = tf.zeros([4, 1])
  floor = "gradient only (floor)"
  specs = {
      floor: (common.GradientOnly(target), init, 1, {}),
      "SGLD h=0.1": (sg.SGLD(target, step_size=0.1), init, 1, {}),
      "SGHMC eps=0.25": (sg.SGHMC(target, 0.25, friction=0.5,
                                  momentum_resampling_period=T), init, 1, {}),
      "AMAGOLD eps=0.25 T=10": (sg.AMAGOLD(target, 0.25, num_leapfrog_steps=T,
                                           friction=0.25), init, T, {}),
  }
  timed_group(report, "quickstart", specs, cfg["quickstart_target_s"],
              cfg["quickstart_repeats"],
              lambda name: None if name == floor else floor)


def chains_section(report, cfg):
  problem = common.synthetic_logistic(n=cfg["chains_n"])
  target = problem.target()
  kernels = {
      "gradient only (floor)": (common.GradientOnly(target), 1),
      "SGLD": (sg.SGLD(target, 1e-5), 1),
      "SGHMC": (sg.SGHMC(target, 1e-5, 100.), 1),
      "AMAGOLD T=10 minibatch M-H": (sg.AMAGOLD(
          target, 1e-5, num_leapfrog_steps=T, friction=50.,
          acceptance_energy="minibatch"), T),
  }
  specs, baseline = {}, {}
  one = cfg["chain_counts"][0]
  for kname, (kernel, grads) in kernels.items():
    for c in cfg["chain_counts"]:
      name = chains_name(kname, c)
      specs[name] = (kernel, problem.init(c), grads,
                     dict(kernel=kname, chains=c, problem=problem.name,
                          batch_size=problem.batch_size))
      baseline[name] = None if c == one else chains_name(kname, one)
  timed_group(report, "chains", specs, cfg["chains_target_s"],
              cfg["chains_repeats"], baseline.get)


def chains_name(kernel, chains):
  return f"{kernel}, {chains} chain{'' if chains == 1 else 's'}"


# --- Keras -------------------------------------------------------------------


@contextlib.contextmanager
def dtype_policy(name):
  old = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(name)
  try:
    yield
  finally:
    keras.mixed_precision.set_global_policy(old)


def synthetic_mnist(n, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.uniform(size=(n, 784)).astype(np.float32)
  y = rng.integers(0, 10, size=n).astype(np.int32)
  return x, y


def make_mlp(hidden, seed=0):
  init = keras.initializers.HeNormal
  layers = [keras.Input((784,))]
  for i, units in enumerate(hidden):
    layers.append(keras.layers.Dense(units, activation="relu",
                                     kernel_initializer=init(seed + i)))
  layers.append(keras.layers.Dense(10, kernel_initializer=init(
      seed + len(hidden))))
  return keras.Sequential(layers)


def keras_specs(n, x, y, batch):
  """name -> (policy, sampler factory or None for SGD, callback kwargs,
  the SGD row it is compared with under the same policy or None)."""
  base = keras_epoch.samplers(n, x, y)
  sghmc = base["SGHMC"][0]
  exact = base["AMAGOLD T=10 exact M-H"]
  minibatch = base["AMAGOLD T=10 minibatch M-H"]
  return {
      "SGD": ("float32", None, {}, None),
      "SGHMC": ("float32",) + base["SGHMC"] + (None,),
      "SGLD": ("float32",) + base["SGLD"] + (None,),
      "AMAGOLD T=10 exact M-H": ("float32", exact[0],
                                 dict(exact[1], energy_batch_size=batch),
                                 None),
      "AMAGOLD T=10 minibatch M-H": ("float32", minibatch[0],
                                     dict(minibatch[1],
                                          energy_batch_size=batch), None),
      "SGD mixed_float16": ("mixed_float16", None, {}, None),
      # A static power-of-two loss scale, as docs/keras.md advises under
      # float16 (exactly undone before the update).
      "SGHMC mixed_float16": ("mixed_float16", lambda: sgk.SGHMC.
                              from_sgd_momentum(
                                  learning_rate=0.05 / n, momentum_decay=0.1,
                                  noise_estimate=0.05, seed=0,
                                  loss_scale_factor=128.),
                              dict(thinning=50), "SGD mixed_float16"),
      "SGD mixed_bfloat16": ("mixed_bfloat16", None, {}, None),
      "SGHMC mixed_bfloat16": ("mixed_bfloat16", sghmc, dict(thinning=50),
                               "SGD mixed_bfloat16"),
  }


def build_fit(hidden, policy, factory, kwargs, n, strategy=None):
  """A compiled model and its callbacks (none for SGD).

  Under a distribution strategy the train step is not XLA-compiled: Keras
  turns `jit_compile="auto"` off there, and `jit_compile=True` fails on
  mirrored variables (the compiled step reads another replica's device)."""
  with dtype_policy(policy), (strategy.scope() if strategy
                              else contextlib.nullcontext()):
    model = make_mlp(hidden)
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True), jit_compile=strategy is None)
  callbacks = []
  if factory is not None:
    callbacks.append(sgk.SamplingCallback(
        factory(), num_examples=n, prior=keras_epoch.PRIOR_SCALE,
        burnin_epochs=0, max_samples=20, **kwargs))
  return model, callbacks


def interleaved_epochs(report, section, fits, data, cfg, memory_devices):
  """Runs every fit `keras_repeats` times, interleaved, each for
  `keras_epochs` timed epochs after its first; returns name -> per-repeat
  lists of epoch seconds, the first epoch of each name's first fit, the
  peak memory and the errors. A fit that fails stops that name only."""
  epochs = {name: [] for name in fits}
  first, peaks, errors = {}, {}, {}
  for r in range(cfg["keras_repeats"]):
    if r > 0 and report.over_budget():
      break   # Keep the repeats done so far.
    for name, (model, callbacks) in fits.items():
      if name in errors:
        continue
      clock = keras_epoch.EpochClock()
      try:
        if memory_devices:
          reset_peaks(memory_devices)
        start = time.perf_counter()
        model.fit(data, epochs=cfg["keras_epochs"] + 1, verbose=0,
                  callbacks=callbacks + [clock])
        peaks[name] = max(peaks.get(name, 0),
                          read_peak(memory_devices) or 0) or None
      except Exception as e:  # pylint: disable=broad-except
        errors[name] = e
        traceback.print_exception(e, file=sys.stderr)
        continue
      first.setdefault(name, clock.marks[0] - start)
      epochs[name].append(clock.steady_epochs())
    print(f"[{report.elapsed():7.1f} s] {section}: repeat {r + 1}/"
          f"{cfg['keras_repeats']}: " + ", ".join(
              f"{k} {1e3 * statistics.median(v[-1]):.0f} ms"
              for k, v in epochs.items() if v and len(v) == r + 1),
          flush=True)
  return epochs, first, peaks, errors


def epoch_rows(report, section, fits, epochs, first, peaks, errors, specs,
               extra_fields, baseline="SGD"):
  """One row per fit: epoch time and per-repeat median ratio to the
  `baseline` fit's (SGD with momentum)."""
  for name, (model, callbacks) in fits.items():
    common_fields = dict(extra_fields.get(name, {}))
    if name in errors:
      report.fail(section, [name], errors[name], **common_fields)
      continue
    per_repeat = epochs[name]
    medians = [statistics.median(e) for e in per_repeat]
    row = dict(section=section, name=name,
               time=harness.spread([1e3 * t for e in per_repeat for t in e]),
               time_unit="ms per epoch", repeats=len(per_repeat),
               timed_epochs_per_fit=len(per_repeat[0]),
               first_epoch_s=first[name], jit_compile=model.jit_compile,
               peak_memory_bytes=peaks.get(name), ratio=None,
               ratio_to=None, **common_fields)

    def ratio_to(other):
      if other is None or other in errors or not epochs.get(other):
        return None
      sgd = [statistics.median(e) for e in epochs[other]]
      return harness.spread([m / s for m, s in zip(medians, sgd)])
    if name != baseline:
      row["ratio"] = ratio_to(baseline)
      row["ratio_to"] = baseline if row["ratio"] else None
    same = specs.get(name, (None,) * 4)[3]
    if same:
      row["ratio_to_same_policy_sgd"] = ratio_to(same)
      row["same_policy_sgd"] = same
    if callbacks and callbacks[0].sampler is not None and \
        callbacks[0].sampler.has_acceptance_test:
      row["mh_tests"] = callbacks[0].num_tests
      row["acceptance"] = (callbacks[0].acceptance_rate if row["mh_tests"]
                           else None)
    report.add(_with_goal(row, (section, name)))


def keras_section(report, cfg):
  n, batch, hidden = cfg["keras_n"], cfg["keras_batch"], cfg["keras_hidden"]
  x, y = synthetic_mnist(n)
  data = (tf.data.Dataset.from_tensor_slices((x, y))
          .shuffle(n, seed=0, reshuffle_each_iteration=True)
          .batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
  specs = keras_specs(n, x, y, batch)
  architecture = "-".join(map(str, (784,) + tuple(hidden) + (10,)))
  extra = {name: dict(policy=policy, model=f"MLP {architecture} ReLU",
                      batch_size=batch, num_examples=n,
                      steps_per_epoch=n // batch)
           for name, (policy, _, _, _) in specs.items()}
  fits = {}
  for name, (policy, factory, kwargs, _) in specs.items():
    try:
      fits[name] = build_fit(hidden, policy, factory, kwargs, n)
    except Exception as e:  # pylint: disable=broad-except
      report.fail("keras", [name], e, **extra[name])
  print(f"[{report.elapsed():7.1f} s] keras: MLP {architecture}, N={n}, "
        f"batch {batch}; {cfg['keras_repeats']} interleaved repeats x "
        f"{cfg['keras_epochs']} timed epochs", flush=True)
  epochs, first, peaks, errors = interleaved_epochs(
      report, "keras", fits, data, cfg, _gpu_names()[:1])
  for name in list(fits):
    if not epochs[name] and name not in errors:
      errors[name] = RuntimeError("no repeat ran (budget)")
  epoch_rows(report, "keras", fits, epochs, first, peaks, errors, specs,
             extra)


def mirrored_section(report, cfg, quick, mirrored_note):
  names = ["SGD, MirroredStrategy", "SGHMC, MirroredStrategy"]
  gpus = _gpu_names()
  if len(gpus) >= 2:
    devices, memory = gpus[:2], gpus[:2]
  elif quick and not mirrored_note:
    devices, memory = ["/cpu:0", "/cpu:1"], []
  else:
    report.skip("mirrored", names, (
        f"{len(gpus)} GPU(s) visible; the row needs two" +
        (f" ({mirrored_note})" if mirrored_note else "")))
    return
  n, batch, hidden = cfg["keras_n"], cfg["keras_batch"], cfg["keras_hidden"]
  strategy = tf.distribute.MirroredStrategy(devices)
  x, y = synthetic_mnist(n)
  data = (tf.data.Dataset.from_tensor_slices((x, y))
          .shuffle(n, seed=0, reshuffle_each_iteration=True)
          .batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
  sghmc = keras_epoch.samplers(n, x, y)["SGHMC"]
  specs = {names[0]: ("float32", None, {}, None),
           names[1]: ("float32",) + sghmc + (None,)}
  architecture = "-".join(map(str, (784,) + tuple(hidden) + (10,)))
  extra = {name: dict(devices=devices, global_batch_size=batch,
                      num_examples=n, steps_per_epoch=n // batch,
                      policy="float32", model=f"MLP {architecture} ReLU")
           for name in names}
  fits = {}
  for name, (policy, factory, kwargs, _) in specs.items():
    try:
      fits[name] = build_fit(hidden, policy, factory, kwargs, n, strategy)
    except Exception as e:  # pylint: disable=broad-except
      report.fail("mirrored", [name], e, **extra[name])
  epochs, first, peaks, errors = interleaved_epochs(
      report, "mirrored", fits, data, cfg, memory)
  for name in list(fits):
    if not epochs[name] and name not in errors:
      errors[name] = RuntimeError("no repeat ran (budget)")
  epoch_rows(report, "mirrored", fits, epochs, first, peaks, errors, {},
             extra, baseline=names[0])


# --- Main --------------------------------------------------------------------


SECTIONS = ("quickstart", "chains", "keras", "mirrored")


def expected_rows(cfg):
  """(section, name) of every row a run reports, in order (the device row's
  name is the device's)."""
  rows = [("quickstart", n) for n in ("gradient only (floor)", "SGLD h=0.1",
                                      "SGHMC eps=0.25",
                                      "AMAGOLD eps=0.25 T=10")]
  rows += [("chains", chains_name(k, c))
           for k in ("gradient only (floor)", "SGLD", "SGHMC",
                     "AMAGOLD T=10 minibatch M-H")
           for c in cfg["chain_counts"]]
  rows += [("keras", n) for n in keras_specs(1, None, None, 1)]
  rows += [("mirrored", n) for n in ("SGD, MirroredStrategy",
                                     "SGHMC, MirroredStrategy")]
  return rows


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true",
                      help="tiny sizes (CPU, CI): every row's code runs")
  parser.add_argument("--out", default=None,
                      help="JSON path (default benchmarks/results/"
                      "gpu_report_<date>.json)")
  parser.add_argument("--budget-s", type=float, default=None,
                      help="skip the rows left (with the reason) once this "
                      "many seconds have passed (default 450; 600 with "
                      "--quick)")
  parser.add_argument("--sections", default=",".join(SECTIONS),
                      help="comma-separated subset of " + ",".join(SECTIONS))
  args = parser.parse_args(argv)
  # Each row's loop is its own tf.function: their tracing is expected.
  tf.get_logger().setLevel("ERROR")
  # The fits are timed, not sampled from: short ones keep no sample.
  warnings.filterwarnings(
      "ignore", message=".*(will keep no sample|with no sample kept)")
  mirrored_note = _split_cpu_for_mirrored() if args.quick else None
  cfg = dict(QUICK if args.quick else FULL)
  if args.budget_s is not None:
    cfg["budget_s"] = args.budget_s
  sections = [s for s in args.sections.split(",") if s]
  unknown = set(sections) - set(SECTIONS)
  if unknown:
    parser.error(f"--sections: unknown {sorted(unknown)}; choose from "
                 f"{list(SECTIONS)}")
  out = args.out or os.path.join(
      harness.RESULTS, f"gpu_report_{time.strftime('%Y-%m-%d')}.json")
  settings = dict(cfg, quick=args.quick, sections=sections, T=T)
  report = Report(out, settings, cfg["budget_s"])
  print(f"gpu_report: {'quick' if args.quick else 'full'} run, budget "
        f"{cfg['budget_s']:.0f} s, writing {out}", flush=True)
  try:
    row = device_row(mirrored_note)
    report.device = {k: v for k, v in row.items() if k != "section"}
    report.add(row)
  except Exception as e:  # pylint: disable=broad-except
    report.fail("device", ["device"], e)
  runners = {"quickstart": lambda: quickstart_section(report, cfg),
             "chains": lambda: chains_section(report, cfg),
             "keras": lambda: keras_section(report, cfg),
             "mirrored": lambda: mirrored_section(report, cfg, args.quick,
                                                  mirrored_note)}
  planned = expected_rows(cfg)
  for section in SECTIONS:
    names = [n for s, n in planned if s == section]
    if section not in sections:
      report.skip(section, names, "not in --sections")
      continue
    reason = report.over_budget()
    if reason:
      report.skip(section, names, reason)
      continue
    try:
      runners[section]()
    except Exception as e:  # pylint: disable=broad-except
      done = {r["name"] for r in report.rows if r["section"] == section}
      report.fail(section, [n for n in names if n not in done], e)
  report.save(complete=True)
  payload = report.payload(complete=True)
  print(f"\n{payload['table_markdown']}\n\n({payload['elapsed_s']:.0f} s, "
        f"process CPU time {payload['cpu_s']:.0f} s; wrote {out})")
  return payload


if __name__ == "__main__":
  main()
