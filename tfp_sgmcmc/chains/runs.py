"""Long runs: posterior moments in constant memory, and progress reports.

A million-step chain that keeps every draw needs memory proportional to its
length; `sample_moments` folds the draws into running moments instead
(Welford updates through `tfp.experimental.mcmc.VarianceReducer`), so its
memory does not depend on the number of steps. Everything runs as one
compiled loop.

    moments = tfp_sgmcmc.sample_moments(kernel, init, 1_000_000, seed=[0, 1])
    moments.mean, moments.variance, moments.final_kernel_results

`sample_chain_with_progress` runs `tfp.mcmc.sample_chain` as a few compiled
chunks and reports progress (a tqdm bar, or printed lines) between them; it
is defined in `progress` and importable from here.
"""

import collections
import functools
import re
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import random
from tfp_sgmcmc.chains import diagnostics
from tfp_sgmcmc.chains import quiet
from tfp_sgmcmc.chains import run_checks
from tfp_sgmcmc.chains.progress import ChainRun
from tfp_sgmcmc.chains.progress import sample_chain_with_progress
from tfp_sgmcmc.kernels import results_guard

__all__ = ["sample_moments", "Moments", "sample_chain_with_progress",
           "ChainRun"]

Moments = collections.namedtuple(
    "Moments", ["mean", "variance", "num_draws", "final_state",
                "final_kernel_results", "diverged", "num_diverged",
                "heating"])
Moments.__doc__ = """What `sample_moments` returns.

Attributes:
  mean: the mean of the draws per chain and coordinate, in the state's
    structure; NaN for a diverged chain.
  variance: their variance, likewise.
  num_draws: the number of draws folded in (`num_steps`).
  final_state: the chain's last state.
  final_kernel_results: the kernel's last results (pass them back as
    `previous_kernel_results` to continue).
  diverged: per chain, True where the kernel flagged a divergence or the
    moments are not finite.
  num_diverged: the number of diverged chains.
  heating: per chain, `tfp_sgmcmc.diagnostics.heating` of the energy over
    16 windows of the run; None for a kernel without an `energy` field.
"""


def sample_moments(kernel, current_state, num_steps, seed,
                   num_burnin_steps=0, previous_kernel_results=None,
                   jit_compile=True):
  """Runs `num_steps` steps and returns per-chain running moments.

  Args:
    kernel: any `tfp.mcmc.TransitionKernel`.
    current_state: initial state (tensor or list, leading chain dims).
    num_steps: number of draws folded into the moments (after burn-in).
    seed: stateless int32[2] seed; for a `StepSeeded` kernel its own seed
      (or that of `previous_kernel_results`) picks the noise instead. A
      run that continues a chain folds in the chain's step count, so that
      repeating one call continues with new noise and minibatches.
    num_burnin_steps: steps run first and not counted.
    previous_kernel_results: to continue a chain (checked once before the
      run by `tfp_sgmcmc.check_kernel_results`: results of a kernel on
      another target are refused; the run uses their step size).
    jit_compile: compile the loop with XLA.

  Returns:
    `Moments(mean, variance, num_draws, final_state, final_kernel_results,
    diverged, num_diverged, heating)`: mean and variance per chain and
    coordinate, in the state's structure; `diverged` per chain (flagged by
    the kernel at any step of the run, burn-in included, or with
    non-finite moments), `num_diverged` their number, and `heating` per
    chain (`tfp_sgmcmc.diagnostics.heating` of the energy's means over 16
    windows of the run; None for a kernel without an `energy` field).

  Diverged chains: a chain the kernel flags `diverged` stays frozen at its
  last finite state, and its draws before that came from dynamics that
  were blowing up, so none of its draws are posterior draws. Its mean and
  variance are NaN (excluded, so that an average over chains cannot fold
  them in silently), and an `UnhealthyChainWarning` names how many chains
  diverged. A chain whose energy heats up beyond `HEATING_THRESHOLD` while
  staying finite (e.g. SGHMC at too large a step size) is kept and warned
  about in the same way.

  #### Example

  The posterior mean of four chains, in memory that does not grow with the
  number of steps:

  ```python
  moments = tfp_sgmcmc.sample_moments(
      tfp_sgmcmc.SGLD(target, step_size=1e-3), tf.zeros([4, d]),
      num_steps=500, seed=[0, 1], num_burnin_steps=100)
  print(np.mean(moments.mean, axis=0))   # about [1, -1]
  ```
  """
  if not isinstance(kernel, tfp.mcmc.TransitionKernel):
    raise TypeError(f"`kernel` must be a tfp.mcmc.TransitionKernel; got "
                    f"{type(kernel).__name__}.")
  num_steps = run_checks.count("num_steps", num_steps, minimum=1)
  num_burnin_steps = run_checks.count("num_burnin_steps", num_burnin_steps)
  current_state = tf.nest.map_structure(tf.convert_to_tensor, current_state)
  run_checks.check_start(current_state, previous_kernel_results)
  if previous_kernel_results is not None:
    # Once, before the compiled loop (which cannot check values without a
    # cost per step): results of another target or state are refused, and
    # another step size than the kernel's is reported.
    results_guard.check_kernel_results(kernel, current_state,
                                       previous_kernel_results,
                                       "previous_kernel_results")
  seed = tfp.random.sanitize_seed(seed)
  if previous_kernel_results is not None:
    seed = _continued_seed(seed, previous_kernel_results)
  fn = _compiled_moments(kernel, num_steps, num_burnin_steps, jit_compile,
                         previous_kernel_results is not None)
  mean, variance, final_state, final_results, energy_sums = fn(
      current_state, seed,
      () if previous_kernel_results is None else previous_kernel_results)
  mean, variance, diverged, heat = _health(
      mean, variance, final_results, energy_sums, num_steps, kernel)
  num_diverged = (int(np.sum(diverged)) if isinstance(diverged, np.ndarray)
                  else tf.reduce_sum(tf.cast(diverged, tf.int32)))
  return Moments(mean=mean, variance=variance, num_draws=num_steps,
                 final_state=final_state, final_kernel_results=final_results,
                 diverged=diverged, num_diverged=num_diverged, heating=heat)


def _continued_seed(seed, previous_kernel_results):
  """The seed of a run that continues a chain: `seed` folded with the
  chain's step count. A long run in pieces repeats one call; with `seed`
  alone each piece would draw the last one's noise and minibatches again,
  and its chain, coupled to the last piece's, repeat its draws. (A
  `StepSeeded` kernel ignores it: its results pick every step's seed.)"""
  count = diagnostics.find_field(previous_kernel_results, "step_count")
  if count is None:
    count = diagnostics.find_field(previous_kernel_results, "step")
  if count is None:
    return seed
  return random.fold_in(seed, tf.reduce_max(tf.cast(count, tf.int32)))


def _health(mean, variance, final_results, energy_sums, num_steps, kernel):
  """Diverged chains' moments set to NaN, and the warning (see
  `sample_moments`). Inside a `tf.function` only the flags are returned."""
  flags = diagnostics.find_field(final_results, "diverged")
  if not tf.executing_eagerly():
    return mean, variance, flags, None
  means = [np.asarray(m) for m in tf.nest.flatten(mean)]
  if flags is None:
    chain_rank = max(means[0].ndim - 1, 0)
    flags = np.zeros(means[0].shape[:chain_rank], bool)
  flags = np.asarray(flags, bool)
  chain_rank = flags.ndim
  # A chain with non-finite moments diverged too (a kernel without flags).
  for m in means:
    flags = flags | ~np.all(np.isfinite(
        m.reshape(m.shape[:chain_rank] + (-1,))), axis=-1)

  def excluded(x):
    x = np.asarray(x)
    mask = flags.reshape(flags.shape + (1,) * (x.ndim - chain_rank))
    return tf.constant(np.where(mask, np.nan, x), dtype=x.dtype)
  mean = tf.nest.map_structure(excluded, mean)
  variance = tf.nest.map_structure(excluded, variance)
  heat = None
  if energy_sums is not None:
    sums, squares, size = energy_sums
    d = sum(int(np.prod(m.shape[chain_rank:])) for m in means)
    windows = np.asarray(sums, np.float64) / int(size)
    # As `diagnostics.energy_windows` computes it from a trace.
    step_variance = np.median(
        0.5 * np.asarray(squares, np.float64) / int(size), axis=0)
    noise = np.sqrt(2. * step_variance / int(size))
    heat = diagnostics.heating(windows.reshape(windows.shape[:1] + (-1,)), d,
                               noise=noise.reshape(-1))
    heat = np.where(flags.reshape(-1), 0., heat).reshape(flags.shape)
  problems = []
  if flags.any():
    # Read only now, after a divergence: is the target's data the cause?
    data = run_checks.non_finite_data_of(kernel)
    problems.append(
        f"{int(flags.sum())} of {flags.size} chains diverged (flagged by the "
        "kernel or with non-finite moments): their mean and variance are "
        "NaN, excluded (Moments.diverged says which); " + (
            f"the target's data is not finite: {data}; no step size helps, "
            "remove or impute those examples" if data else
            "use a smaller step size, or a larger friction"))
  if heat is not None and np.any(heat > diagnostics.HEATING_THRESHOLD):
    hot = int(np.sum(heat > diagnostics.HEATING_THRESHOLD))
    problems.append(
        f"the energy of {hot} of {flags.size} chains grows far beyond "
        f"sampling's d/2 (heating {float(np.max(heat)):.0f} > "
        f"{diagnostics.HEATING_THRESHOLD:g}; Moments.heating per chain): "
        "the chain heats up, its moments are not the posterior's; use a "
        "smaller step size or a larger friction")
  if problems:
    warnings.warn("sample_moments: " + "; ".join(problems),
                  diagnostics.UnhealthyChainWarning, stacklevel=3)
  return mean, variance, flags, heat


class _EnergyWindows(tfp.experimental.mcmc.Reducer):
  """Sums of the results' `energy`, and of the squared differences of
  successive energies, over `num_windows` consecutive windows of `size`
  steps (the first num_steps - num_windows * size steps are not counted),
  for `diagnostics.heating`, in constant memory."""

  def __init__(self, num_steps, num_windows=diagnostics.HEATING_WINDOWS):
    self.num_windows = min(num_windows, num_steps // 2)
    self.size = num_steps // max(self.num_windows, 1)
    self.offset = num_steps - self.num_windows * self.size

  def initialize(self, initial_chain_state, initial_kernel_results):
    energy = diagnostics.find_field(initial_kernel_results, "energy")
    zeros = tf.zeros(tf.concat([[self.num_windows], tf.shape(energy)], 0),
                     energy.dtype)
    return zeros, zeros, energy, tf.constant(0, tf.int32)

  def one_step(self, new_chain_state, current_reducer_state,
               previous_kernel_results=None, axis=None):
    sums, squares, previous, count = current_reducer_state
    energy = diagnostics.find_field(previous_kernel_results, "energy")
    counted = count >= self.offset
    window = tf.clip_by_value((count - self.offset) // self.size, 0,
                              self.num_windows - 1)
    zero = tf.zeros_like(energy)
    add = tf.where(counted, energy, zero)
    square = tf.where(counted & (count > 0), (energy - previous) ** 2, zero)
    sums = tf.tensor_scatter_nd_add(sums, [[window]], add[tf.newaxis])
    squares = tf.tensor_scatter_nd_add(squares, [[window]],
                                       square[tf.newaxis])
    return sums, squares, energy, count + 1

  def finalize(self, final_reducer_state):
    return final_reducer_state


def _compiled_moments(kernel, num_steps, num_burnin_steps, jit_compile,
                      has_previous):
  """The compiled moment loop, kept on the kernel and reused: continuing a
  chain with `previous_kernel_results` (a function argument, not a captured
  value) reuses one compilation instead of building a new `tf.function`
  per call, whose graphs would accumulate in memory."""
  per_kernel = kernel.__dict__.setdefault("_tfp_sgmcmc_moments", {})
  key = (num_steps, num_burnin_steps, jit_compile, has_previous)
  if key in per_kernel:
    return per_kernel[key]
  reducer = tfp.experimental.mcmc.VarianceReducer()
  windows = _EnergyWindows(num_steps)

  def run(state, seed, previous_kernel_results):
    previous = previous_kernel_results if has_previous else None
    start_results = (previous if has_previous else
                     kernel.bootstrap_results(state))
    # The energy's window means (for the heating check) when the kernel
    # reports an energy and the run is long enough for 4 windows.
    with_windows = windows.num_windows >= 4 and diagnostics.find_field(
        start_results, "energy") is not None
    with quiet.expected_warnings_silenced():  # Warned when traced.
      _, final_state, final_results, reducer_state = (
          tfp.experimental.mcmc.sample_fold(
              num_steps, state, previous_kernel_results=start_results,
              kernel=kernel,
              reducer=[reducer, windows] if with_windows else [reducer],
              num_burnin_steps=num_burnin_steps,
              seed=seed, return_final_reducer_states=True))
    energy_sums = ((reducer_state[1][0], reducer_state[1][1], windows.size)
                   if with_windows else None)
    reducer_state = reducer_state[0]
    # One RunningCovariance per state part (a list for list states).
    running = reducer_state.cov_state
    parts = running if isinstance(running, (list, tuple)) else [running]
    means = [r.mean for r in parts]
    mean = means if isinstance(running, (list, tuple)) else means[0]
    variance = reducer.finalize(reducer_state)
    return mean, variance, final_state, final_results, energy_sums

  per_kernel[key] = tf.function(run, jit_compile=jit_compile,
                                autograph=False)
  return per_kernel[key]


def explain_xla_errors(fn):
  """`fn`, with XLA's failure to compile an operation it has no kernel for
  (a 40-line TensorFlow traceback) re-raised as a `ValueError` that names
  the operations and the fix."""
  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    try:
      return fn(*args, **kwargs)
    except tf.errors.InvalidArgumentError as e:
      if "Detected unsupported operations" not in str(e):
        raise
      ops = sorted(set(re.findall(r"(\w+) \(No registered", str(e))))
      raise ValueError(
          f"XLA cannot compile the chains: it has no kernel for {ops} on "
          "this device. A JointDistribution model draws from each of its "
          "nodes when TFP builds their distributions, even where every "
          "value is given, so a node whose sampler XLA lacks (e.g. a "
          "NegativeBinomial's gamma draws) stops it. Pass "
          "jit_compile=False (the same run without XLA, slower).") from e
  return wrapped
