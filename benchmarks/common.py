"""Shared benchmark machinery: problems, compiled loops, interleaved timing.

Timings on these machines vary by up to 2x between runs, so every script
measures the things it compares side by side in one process, interleaved
(A, B, A, B, ...), and reports medians and the median of per-pair ratios.
Compilation is excluded: each compiled function is called once to warm up.
"""

import json
import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

SHARED_DATA = os.path.abspath(os.path.join(
    os.path.dirname(__file__), "..", "..", "shared", "data"))


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


class LogisticProblem:
  """Bayesian logistic regression with a N(0, 1) prior (no intercept term
  beyond what the design matrix holds)."""

  def __init__(self, x, y, batch_size, name):
    self.x = np.asarray(x, np.float32)
    self.y = np.asarray(y, np.float32)
    self.n, self.d = self.x.shape
    self.batch_size = batch_size
    self.name = name

  @staticmethod
  def log_likelihood(w, batch):
    x, y = batch
    logits = tf.einsum("nd,...d->...n", x, w)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits)

  @staticmethod
  def log_prior(w):
    return -0.5 * tf.reduce_sum(w ** 2, -1)

  def target(self, batch_size=None):
    return sg.InMemoryTarget(self.log_likelihood, (self.x, self.y),
                             batch_size or self.batch_size,
                             log_prior_fn=self.log_prior)

  def init(self, chains=None):
    shape = [self.d] if chains is None else [chains, self.d]
    return tf.zeros(shape, tf.float32)


def synthetic_logistic(n=100_000, d=20, batch_size=100, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)).astype(np.float32)
  w = rng.normal(size=d) / np.sqrt(d)
  y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w))).astype(np.float32)
  return LogisticProblem(x, y, batch_size, f"logistic N={n} d={d}")


def australian(batch_size=32):
  path = os.path.join(SHARED_DATA, "statlog")
  raw = np.loadtxt(os.path.join(path, "australian.dat"))
  x = (raw[:, :-1] - raw[:, :-1].mean(0)) / raw[:, :-1].std(0)
  x = np.concatenate([x, np.ones((len(x), 1))], axis=1)  # d = 15
  return LogisticProblem(x, raw[:, -1], batch_size, "Statlog Australian")


class GradientOnly:
  """The floor: draw the minibatch and compute its gradient (and, with
  `energy` / `noise`, the per-chain energy / one standard normal per
  coordinate, one draw for all parts), nothing else; everything is fed back
  so XLA cannot drop it. The state may be a tensor with leading chain axes
  or a structure (the MLP's weights)."""

  def __init__(self, target, energy=False, noise=False):
    self.target = target
    self.energy = energy
    self.noise = noise

  def bootstrap_results(self, state):
    del state
    return ()

  def one_step(self, state, results, seed):
    energy, grad = self.target.energy_and_gradient(state, seed)
    new = tf.nest.map_structure(lambda s, g: s - 1e-12 * g, state, grad)
    if self.energy:
      def add_energy(s):
        trailing = tf.ones([s.shape.rank - energy.shape.rank], tf.int32)
        return s + 1e-30 * tf.reshape(
            energy, tf.concat([tf.shape(energy), trailing], 0))
      new = tf.nest.map_structure(add_energy, new)
    if self.noise:
      noise = sg.dynamics.standard_normal_like(
          state, sg.dynamics.derive_seeds(seed, 2)[1])
      new = tf.nest.map_structure(lambda s, z: s + 1e-9 * z, new, noise)
    return new, results


def bare_gradient_loop(target, num_steps):
  """The physical floor: draw the minibatch indices and compute the same
  minibatch gradient, num_steps times, in one compiled loop."""
  @tf.function(jit_compile=True, autograph=False)
  def run(state, seed):
    def body(i, state, seed):
      seed, step_seed = tfp.random.split_seed(seed)
      _, grad = target.energy_and_gradient(state, step_seed)
      # Feed the gradient back so XLA cannot drop the computation.
      state = tf.nest.map_structure(lambda s, g: s - 1e-12 * g, state, grad)
      return i + 1, state, seed
    _, state, _ = tf.while_loop(lambda i, *_: i < num_steps, body,
                                (tf.constant(0), state, seed))
    return state
  return run


def kernel_loop(kernel, num_steps):
  """num_steps of kernel.one_step in one compiled while_loop (no tracing
  of draws): the kernel's own cost."""
  @tf.function(jit_compile=True, autograph=False)
  def run(state, seed):
    results = kernel.bootstrap_results(state)
    def body(i, state, results, seed):
      seed, step_seed = tfp.random.split_seed(seed)
      state, results = kernel.one_step(state, results, seed=step_seed)
      return i + 1, state, results, seed
    _, state, _, _ = tf.while_loop(lambda i, *_: i < num_steps, body,
                                   (tf.constant(0), state, results, seed))
    return state
  return run


def timed(fn, *args):
  return timed_both(fn, *args)[0]


def timed_both(fn, *args):
  """(wall-clock seconds, process CPU seconds) of one call.

  The compiled loops run on one thread, so on a machine shared with other
  jobs their CPU time stays close to the quiet machine's wall time while the
  wall time inflates with the load (seen here: at a load average of 17 on 2
  cores the wall time of the same loop varied 5.9-9.5 us per step and its
  CPU time 2.00-2.15 us). Both are reported.
  """
  wall, cpu = time.perf_counter(), time.process_time()
  out = fn(*args)
  tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t,
                        out)
  return time.perf_counter() - wall, time.process_time() - cpu


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


def spread(a, b):
  """(min, max) of the per-pair ratios a_i / b_i."""
  ratios = [x / y for x, y in zip(a, b)]
  return min(ratios), max(ratios)


def median_ratio(a, b):
  return statistics.median(x / y for x, y in zip(a, b))
