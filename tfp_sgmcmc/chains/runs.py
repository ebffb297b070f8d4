"""Long runs: posterior moments in constant memory, and progress reports.

A million-step chain that keeps every draw needs memory proportional to its
length; `sample_moments` folds the draws into running moments instead
(Welford updates through `tfp.experimental.mcmc.VarianceReducer`), so its
memory does not depend on the number of steps. Everything runs as one
compiled loop.

    moments = tfp_sgmcmc.sample_moments(kernel, init, 1_000_000, seed=[0, 1])
    moments.mean, moments.variance, moments.final_kernel_results

`sample_chain_with_progress` runs `tfp.mcmc.sample_chain` as a few compiled
chunks and reports progress (a tqdm bar, or printed lines) between them.
"""

import collections
import sys
import time
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.chains import checkpointing
from tfp_sgmcmc.chains import diagnostics
from tfp_sgmcmc.chains import quiet
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
    seed: stateless int32[2] seed.
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
  num_steps = _count("num_steps", num_steps, minimum=1)
  num_burnin_steps = _count("num_burnin_steps", num_burnin_steps)
  current_state = tf.nest.map_structure(tf.convert_to_tensor, current_state)
  _check_start(current_state, previous_kernel_results)
  if previous_kernel_results is not None:
    # Once, before the compiled loop (which cannot check values without a
    # cost per step): results of another target or state are refused, and
    # another step size than the kernel's is reported.
    results_guard.check_kernel_results(kernel, current_state,
                                       previous_kernel_results,
                                       "previous_kernel_results")
  fn = _compiled_moments(kernel, num_steps, num_burnin_steps, jit_compile,
                         previous_kernel_results is not None)
  mean, variance, final_state, final_results, energy_sums = fn(
      current_state, tfp.random.sanitize_seed(seed),
      () if previous_kernel_results is None else previous_kernel_results)
  mean, variance, diverged, heat = _health(
      mean, variance, final_results, energy_sums, num_steps)
  num_diverged = (int(np.sum(diverged)) if isinstance(diverged, np.ndarray)
                  else tf.reduce_sum(tf.cast(diverged, tf.int32)))
  return Moments(mean=mean, variance=variance, num_draws=num_steps,
                 final_state=final_state, final_kernel_results=final_results,
                 diverged=diverged, num_diverged=num_diverged, heating=heat)


def _health(mean, variance, final_results, energy_sums, num_steps):
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
    problems.append(
        f"{int(flags.sum())} of {flags.size} chains diverged (flagged by the "
        "kernel or with non-finite moments): their mean and variance are "
        "NaN, excluded (Moments.diverged says which); use a smaller step "
        "size, or a larger friction")
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


def _count(name, value, minimum=0):
  """A Python integer >= minimum (number of steps, reports, ...)."""
  if (isinstance(value, (bool, np.bool_)) or not isinstance(
      value, (int, np.integer)) and not (
          tf.is_tensor(value) and value.dtype.is_integer and
          tf.get_static_value(value) is not None)):
    raise TypeError(f"`{name}` must be an integer >= {minimum}; got "
                    f"{value!r}.")
  v = int(tf.get_static_value(value)) if tf.is_tensor(value) else int(value)
  if v < minimum:
    raise ValueError(f"`{name}` must be an integer >= {minimum}; got "
                     f"{value!r}.")
  return v


def _check_start(state, previous_kernel_results):
  """What a compiled run cannot report (XLA drops assertions), checked once
  here, before it starts: a finite initial state and finite results."""
  if not tf.executing_eagerly():
    return
  for i, part in enumerate(tf.nest.flatten(state)):
    if part.dtype.is_floating and not bool(
        tf.reduce_all(tf.math.is_finite(part))):
      raise ValueError(f"`current_state` part {i} has non-finite values; "
                       "start the chain from a finite state.")
  if previous_kernel_results is not None:
    diverged = diagnostics.find_field(previous_kernel_results, "diverged")
    if diverged is not None and bool(tf.reduce_all(diverged)):
      raise ValueError("`previous_kernel_results` has every chain flagged "
                       "`diverged`: the run it continues has failed; start "
                       "again from a finite state.")


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


ChainRun = collections.namedtuple(
    "ChainRun", ["all_states", "trace", "final_kernel_results"])
ChainRun.__doc__ = """What `sample_chain_with_progress` returns.

Attributes:
  all_states: the kept states, with a leading `num_results` axis.
  trace: `trace_fn` of each kept step (None if `trace_fn` is None).
  final_kernel_results: the last `StepSeededResults`; passed back to
    `tfp.mcmc.sample_chain` with `StepSeeded(kernel, seed)`, or saved with
    `save_chain`, they continue the chain bit for bit.
"""


def _default_trace(_, results):
  return results


def _text_progress(total, desc):
  """Progress lines on stderr: `desc: step/total (pct), elapsed, eta`."""
  start = time.perf_counter()

  def report(done):
    elapsed = time.perf_counter() - start
    eta = elapsed * (total - done) / max(done, 1)
    print(f"{desc}: {done}/{total} ({100. * done / total:3.0f}%), "
          f"{elapsed:6.1f} s elapsed, {eta:6.1f} s left",
          file=sys.stderr, flush=True)
  return report, lambda: None


def _tqdm_progress(total, desc):
  import tqdm  # pylint: disable=g-import-not-at-top
  bar = tqdm.tqdm(total=total, desc=desc, unit="step")
  position = [0]

  def report(done):
    bar.update(done - position[0])
    position[0] = done
  return report, bar.close


def _chunks(total, num_reports):
  """Chunk sizes: equal chunks and a shorter last one (at most two distinct
  sizes: at most two compilations of the sampling loop)."""
  if total <= 0:
    return []
  size = max(1, -(-total // num_reports))
  sizes = [size] * (total // size)
  if total % size:
    sizes.append(total % size)
  return sizes


def sample_chain_with_progress(num_results, current_state, kernel, seed,
                               num_burnin_steps=0, trace_fn=_default_trace,
                               progress=True, num_reports=20,
                               jit_compile=True, desc="sampling",
                               num_steps_between_results=0):
  """`tfp.mcmc.sample_chain` with a progress report every few steps.

  The chain runs as `num_reports` compiled chunks (burn-in and sampling
  each), with a report between chunks: no host round trip inside a chunk
  (its cost is measured by benchmarks/progress.py). TFP's
  `ProgressBarReducer` instead calls back to Python at every step through
  `tf.numpy_function`, which XLA cannot compile.

  The kernel is wrapped in `StepSeeded(kernel, seed)`: step i uses the seed
  fold_in(seed, i), so the draws do not depend on the chunking or on
  `progress`, and equal `tfp.mcmc.sample_chain(num_results, current_state,
  kernel=StepSeeded(kernel, seed), num_burnin_steps=num_burnin_steps, ...)`
  bit for bit.

  Args:
    num_results: number of draws kept (after burn-in).
    current_state: initial state (tensor or list, leading chain dims).
    kernel: any `tfp.mcmc.TransitionKernel`.
    seed: stateless int32[2] seed.
    num_burnin_steps: steps run first and not kept.
    trace_fn: `trace_fn(state, results)` on the kernel's own results (not
      the `StepSeeded` wrapper's), as in `sample_chain`; None traces nothing.
    progress: True (a tqdm bar if tqdm is installed, else lines on stderr),
      False (one compiled run, no reports), or a callable `report(done,
      total)` called after each chunk.
    num_reports: number of chunks (reports) for burn-in and for sampling.
    jit_compile: compile each chunk with XLA.
    desc: label of the progress bar.
    num_steps_between_results: thinning, as in `sample_chain`: steps run
      and not kept between two kept draws (the bar counts every step).

  Returns:
    `ChainRun(all_states, trace, final_kernel_results)`: states with a
    leading `num_results` axis, the trace (None if `trace_fn` is None) and
    the final `StepSeeded` results, which continue the chain bit-identically
    when passed back to `tfp.mcmc.sample_chain` or saved (`save_chain`).

  #### Example

  ```python
  run = tfp_sgmcmc.sample_chain_with_progress(
      200, tf.zeros([4, d]), tfp_sgmcmc.SGLD(target, step_size=1e-3),
      seed=[0, 1], num_burnin_steps=100, num_reports=4,
      trace_fn=lambda _, r: r.energy)
  print(run.all_states.shape, run.trace.shape)   # (200, 4, 2) (200, 4)
  ```
  """
  num_results = _count("num_results", num_results, minimum=1)
  num_burnin_steps = _count("num_burnin_steps", num_burnin_steps)
  thin = _count("num_steps_between_results", num_steps_between_results)
  num_reports = _count("num_reports", num_reports, minimum=1)
  if not isinstance(kernel, tfp.mcmc.TransitionKernel):
    raise TypeError(f"`kernel` must be a tfp.mcmc.TransitionKernel; got "
                    f"{type(kernel).__name__}.")
  current_state = tf.nest.map_structure(tf.convert_to_tensor, current_state)
  _check_start(current_state, None)
  burn, sample, wrapped = _compiled_chunks(kernel, trace_fn, jit_compile)
  # As in `sample_chain`: the first draw one step after burn-in, then one
  # every thin + 1 steps.
  total = num_burnin_steps + 1 + (num_results - 1) * (thin + 1)
  if progress is False or progress is None:
    report, close = (lambda done: None), (lambda: None)
    burn_sizes = [num_burnin_steps] if num_burnin_steps else []
    sample_sizes = [num_results]
  else:
    if callable(progress):
      report, close = (lambda done: progress(done, total)), (lambda: None)
    else:
      try:
        report, close = _tqdm_progress(total, desc)
      except ImportError:
        report, close = _text_progress(total, desc)
    burn_sizes = _chunks(num_burnin_steps, num_reports)
    sample_sizes = _chunks(num_results, num_reports)

  state = current_state
  # The seed enters through the results, so the compiled chunks are reused
  # across calls with other seeds.
  results = wrapped.bootstrap_results(current_state)._replace(
      base_seed=tfp.random.sanitize_seed(seed))
  done = 0
  try:
    for n in burn_sizes:
      state, results = burn(state, results, tf.constant(n))
      done += n
      report(done)
    all_states, traces = [], []
    for k, n in enumerate(sample_sizes):
      # Later chunks skip `thin` steps before their first draw, so the
      # thinning does not depend on the chunking.
      lead = 0 if k == 0 else thin
      states, trace, results = sample(n, thin, lead)(state, results)
      state = tf.nest.map_structure(lambda s: s[-1], states)
      all_states.append(states)
      traces.append(trace)
      done += lead + 1 + (n - 1) * (thin + 1)
      report(done)
  finally:
    close()

  def concat(*parts):
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis=0)
  all_states = tf.nest.map_structure(concat, *all_states)
  trace = (None if trace_fn is None
           else tf.nest.map_structure(concat, *traces))
  return ChainRun(all_states=all_states, trace=trace,
                  final_kernel_results=results)


def _compiled_chunks(kernel, trace_fn, jit_compile):
  """The compiled chunk functions, kept on the kernel (an attribute, so they
  live as long as it does) and reused by later calls with the same kernel,
  trace_fn and jit_compile: a new seed or state does not recompile."""
  per_kernel = kernel.__dict__.setdefault("_tfp_sgmcmc_progress_chunks", {})
  key = (trace_fn, jit_compile)
  if key in per_kernel:
    return per_kernel[key]
  # The seed given here is replaced by the caller's in the initial results.
  wrapped = checkpointing.StepSeeded(kernel, seed=[0, 0])
  inner_trace = None if trace_fn is None else (
      lambda state, results: trace_fn(state, results.inner_results))

  def burn(state, results, n):  # n is a tensor: one compilation.
    def body(i, state, results):
      state, results = wrapped.one_step(state, results)
      return i + 1, state, results
    _, state, results = tf.while_loop(
        lambda i, *_: i < n, body, (tf.constant(0), state, results))
    return state, results

  samplers = {}

  def sample(n, thin, lead):  # Static sizes: one compilation per size.
    if (n, thin, lead) not in samplers:
      def run(state, results):
        with quiet.expected_warnings_silenced():  # Warned when traced.
          out = tfp.mcmc.sample_chain(
              n, state, previous_kernel_results=results, kernel=wrapped,
              trace_fn=inner_trace, return_final_kernel_results=True,
              num_burnin_steps=lead, num_steps_between_results=thin,
              seed=tf.constant([0, 0]))  # Ignored: StepSeeded picks seeds.
        return out.all_states, out.trace, out.final_kernel_results
      samplers[(n, thin, lead)] = tf.function(
          run, jit_compile=jit_compile, autograph=False)
    return samplers[(n, thin, lead)]

  per_kernel[key] = (tf.function(burn, jit_compile=jit_compile,
                                 autograph=False), sample, wrapped)
  return per_kernel[key]
