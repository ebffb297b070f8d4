"""The benchmarks' timing harness: compiled loops, clocks, interleaved
timing, spreads, and the JSON the scripts write.

Timings on these machines vary by up to 2x between runs, so every script
measures the things it compares side by side in one process, interleaved
(A, B, A, B, ...), and reports medians and the median of per-pair ratios.
Compilation is excluded: each compiled function is called once to warm up.

* `kernel_loop`: a kernel's steps in one compiled `while_loop`, of a fixed
  length, or of a length given as a *tensor* so that one compilation serves
  every length (what `calibrate` needs);
* clocks: `timed` (wall clock), `cpu_timed` (process CPU time),
  `timed_both`, and `per_call` on either of `CLOCKS`;
* `calibrate` / `calibrate_cpu`: a number of steps that takes about a
  target time;
* `interleaved` (fixed-length calls), `interleaved_per_step` (calibrated,
  wall clock) and `interleaved_per_step_cpu` (calibrated on CPU time, both
  clocks);
* statistics: `spread` (median, min and max of timings or ratios), `ratios`
  (the spread of per-pair ratios), `ratio_range`, `median_ratio`, `fmt`;
* output: `RESULTS`, `machine`, `write_json`.

The problems and the gradient floors the scripts time are in common.py.
"""

import json
import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


# --- Output --------------------------------------------------------------


def machine():
  return {"platform": platform.platform(), "python": platform.python_version(),
          "tensorflow": tf.__version__, "tfp": tfp.__version__,
          "cpus": os.cpu_count(),
          "devices": [d.device_type for d in tf.config.list_physical_devices()]}


def write_json(path, payload):
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  payload = dict(payload, machine=machine(),
                 date=time.strftime("%Y-%m-%d %H:%M:%S"))
  with open(path, "w") as f:
    json.dump(payload, f, indent=2, default=float)
  print(f"wrote {path}")


# --- Statistics -------------------------------------------------------------


def spread(values):
  values = [float(v) for v in values]
  return dict(median=statistics.median(values), min=min(values),
              max=max(values), n=len(values))


def fmt(s, scale=1., digits=2):
  """'median [min, max]' of a `spread` dict."""
  return (f"{s['median'] * scale:.{digits}f} "
          f"[{s['min'] * scale:.{digits}f}, {s['max'] * scale:.{digits}f}]")


def ratios(a, b):
  """`spread` of the per-pair ratios a_i / b_i."""
  return spread([x / y for x, y in zip(a, b)])


def ratio_range(a, b):
  """(min, max) of the per-pair ratios a_i / b_i."""
  r = [x / y for x, y in zip(a, b)]
  return min(r), max(r)


def median_ratio(a, b):
  return statistics.median(x / y for x, y in zip(a, b))


# --- Compiled loops ---------------------------------------------------------


def kernel_loop(kernel, num_steps=None, jit_compile=True):
  """Steps of kernel.one_step in one compiled while_loop (no tracing of
  draws): the kernel's own cost.

  With `num_steps`, `run(state, seed)` runs that many steps. Without it,
  `run(state, seed, num_steps)` takes the number as a tensor, so one
  compilation serves every length (used to calibrate a length that takes a
  target time). `jit_compile=False`: a TF graph without XLA.
  """
  def steps(state, seed, n):
    results = kernel.bootstrap_results(state)
    def body(i, state, results, seed):
      seed, step_seed = tfp.random.split_seed(seed)
      state, results = kernel.one_step(state, results, seed=step_seed)
      return i + 1, state, results, seed
    _, state, _, _ = tf.while_loop(lambda i, *_: i < n, body,
                                   (tf.constant(0), state, results, seed))
    return state

  if num_steps is None:
    @tf.function(jit_compile=jit_compile, autograph=False)
    def run(state, seed, num_steps):
      return steps(state, seed, num_steps)
  else:
    @tf.function(jit_compile=jit_compile, autograph=False)
    def run(state, seed):  # pylint: disable=function-redefined
      return steps(state, seed, num_steps)
  return run


# --- Clocks -----------------------------------------------------------------

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _fetch(out):
  tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t,
                        out)


def timed(fn, *args):
  """Wall-clock seconds of one call (its outputs fetched)."""
  return timed_both(fn, *args)[0]


def cpu_timed(fn, *args):
  """Process CPU seconds of one call (its outputs fetched)."""
  start = time.process_time()
  _fetch(fn(*args))
  return time.process_time() - start


def timed_both(fn, *args):
  """(wall-clock seconds, process CPU seconds) of one call.

  The compiled loops run on one thread, so on a machine shared with other
  jobs their CPU time stays close to the quiet machine's wall time while the
  wall time inflates with the load. Both are reported.
  """
  wall, cpu = time.perf_counter(), time.process_time()
  _fetch(fn(*args))
  return time.perf_counter() - wall, time.process_time() - cpu


def per_call(run, init, steps, clock, repeats=3):
  """Seconds per iteration of run(init, steps) on `clock` (one of CLOCKS),
  the minimum over `repeats` calls (compiled first), and the last output."""
  now = CLOCKS[clock]
  tf.nest.map_structure(lambda t: t.numpy(), run(init, tf.constant(2)))
  times, out = [], None
  for _ in range(repeats):
    start = now()
    out = run(init, tf.constant(steps))
    tf.nest.map_structure(lambda t: t.numpy(), out)
    times.append((now() - start) / steps)
  return min(times), out


# --- Calibrated and interleaved timing ---------------------------------------


def calibrate(fn, args, target_seconds, start_steps=10, max_steps=10**7):
  """Compiles fn(*args, num_steps) and returns a num_steps that takes about
  `target_seconds` (at least 1)."""
  steps = start_steps
  timed(fn, *args, tf.constant(steps))  # Compile.
  while True:
    t = timed(fn, *args, tf.constant(steps))
    if t > 0.2 * target_seconds or steps >= max_steps:
      break
    steps *= 4
  return int(max(1, min(max_steps, steps * target_seconds / max(t, 1e-6))))


def calibrate_cpu(fn, args, target_seconds, min_steps=100):
  """Compiles fn(*args, num_steps); returns a num_steps that takes about
  `target_seconds` of process CPU time, at least `min_steps` (so that the
  fixed cost of a call, and a loaded machine's scheduling, stay small next
  to the steps)."""
  steps = 100
  cpu_timed(fn, *args, tf.constant(steps))  # Compile.
  while True:
    t = cpu_timed(fn, *args, tf.constant(steps))
    if t > 0.2 * target_seconds or steps >= 10**7:
      break
    steps *= 4
  return int(max(min_steps, steps * target_seconds / max(t, 1e-6)))


def interleaved(fns, args, repeats=5, cpu=False):
  """Times each fn(*args) `repeats` times, interleaved; returns lists of
  wall-clock times per name (and, with `cpu=True`, a second dict of process
  CPU times)."""
  for fn in fns.values():
    timed(fn, *args)  # Compile and warm up.
  times = {name: [] for name in fns}
  cpu_times = {name: [] for name in fns}
  for _ in range(repeats):
    for name, fn in fns.items():
      wall, proc = timed_both(fn, *args)
      times[name].append(wall)
      cpu_times[name].append(proc)
  return (times, cpu_times) if cpu else times


def interleaved_per_step(fns, target_seconds, repeats):
  """fns: name -> (fn, args), fn(*args, num_steps). Calibrates each to about
  target_seconds, then times them interleaved `repeats` times; returns
  name -> list of seconds per step (one per repeat) and name -> steps
  used."""
  steps = {name: calibrate(fn, args, target_seconds)
           for name, (fn, args) in fns.items()}
  out = {name: [] for name in fns}
  for _ in range(repeats):
    for name, (fn, args) in fns.items():
      out[name].append(timed(fn, *args, tf.constant(steps[name])) /
                       steps[name])
  return out, steps


def interleaved_per_step_cpu(fns, target_seconds, repeats):
  """Like `interleaved_per_step`, calibrated on process CPU time and timing
  each call in wall and process CPU time: returns (wall, cpu) dicts name ->
  seconds per step per repeat, and the steps used."""
  steps = {name: calibrate_cpu(fn, args, target_seconds)
           for name, (fn, args) in fns.items()}
  wall = {name: [] for name in fns}
  cpu = {name: [] for name in fns}
  for _ in range(repeats):
    for name, (fn, args) in fns.items():
      n = tf.constant(steps[name])
      c0, w0 = time.process_time(), time.perf_counter()
      out = fn(*args, n)
      tf.nest.map_structure(
          lambda t: t.numpy() if hasattr(t, "numpy") else t, out)
      wall[name].append((time.perf_counter() - w0) / steps[name])
      cpu[name].append((time.process_time() - c0) / steps[name])
  return wall, cpu, steps
