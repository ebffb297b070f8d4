"""`sample_chain_with_progress`: `tfp.mcmc.sample_chain` run as a few
compiled chunks, with a progress report (a tqdm bar, or printed lines)
between them."""

import collections
import sys
import time

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.chains import loop_carry, quiet
from tfp_sgmcmc.chains import run_checks
from tfp_sgmcmc.chains import step_seeded

__all__ = ["sample_chain_with_progress", "ChainRun", "reporter"]


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


def _text_progress(total, desc, clock=time.perf_counter):
  """Progress lines on stderr: `desc: step/total (pct), elapsed, eta`.

  The time left is the steps left at the rate of the steps since the
  previous report. The first chunk to run a loop (the first; after a
  burn-in, the first kept one too) also compiles it: a rate over all the
  steps done would carry that compile time into every later estimate."""
  start = clock()
  last = [start, 0]  # Time and steps done at the previous report.

  def report(done):
    now = clock()
    elapsed = now - start
    eta = (now - last[0]) * (total - done) / max(done - last[1], 1)
    last[:] = now, done
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


def reporter(progress, total, desc):
  """(report(done), close()) for `progress` as `sample_chain_with_progress`
  takes it: nothing (False or None), a tqdm bar (True; lines on stderr
  without tqdm) or the callable `progress(done, total)`."""
  if progress is False or progress is None:
    return (lambda done: None), (lambda: None)
  if callable(progress):
    return (lambda done: progress(done, total)), (lambda: None)
  try:
    return _tqdm_progress(total, desc)
  except ImportError:
    return _text_progress(total, desc)


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
    kernel: any `tfp.mcmc.TransitionKernel` (a `StepSeeded` one only with
      `seed` equal to its own, which would otherwise pick every step's
      noise: pass its `inner_kernel`).
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
  num_results = run_checks.count("num_results", num_results, minimum=1)
  num_burnin_steps = run_checks.count("num_burnin_steps", num_burnin_steps)
  thin = run_checks.count("num_steps_between_results",
                          num_steps_between_results)
  num_reports = run_checks.count("num_reports", num_reports, minimum=1)
  if not isinstance(kernel, tfp.mcmc.TransitionKernel):
    raise TypeError(f"`kernel` must be a tfp.mcmc.TransitionKernel; got "
                    f"{type(kernel).__name__}.")
  seed = tfp.random.sanitize_seed(seed)
  _check_not_seeded_elsewhere(kernel, seed)
  current_state = tf.nest.map_structure(tf.convert_to_tensor, current_state)
  run_checks.check_start(current_state, None)
  burn, sample, bootstrap = _compiled_chunks(kernel, trace_fn, jit_compile)
  # As in `sample_chain`: the first draw one step after burn-in, then one
  # every thin + 1 steps.
  total = num_burnin_steps + 1 + (num_results - 1) * (thin + 1)
  report, close = reporter(progress, total, desc)
  if progress is False or progress is None:
    burn_sizes = [num_burnin_steps] if num_burnin_steps else []
    sample_sizes = [num_results]
  else:
    burn_sizes = _chunks(num_burnin_steps, num_reports)
    sample_sizes = _chunks(num_results, num_reports)

  state = current_state
  # The seed enters through the results, so the compiled chunks are reused
  # across calls with other seeds. The results are bootstrapped by code
  # compiled as the chunks are: an exact test compares the cached energy
  # with the proposals' energies, which under XLA can differ from eager
  # ones by a constant (XLA's float32 lgamma: 9 nats over a Poisson
  # regression's 50,000 counts near 1,100), and then every proposal of a
  # chain that started from an eager energy was rejected.
  results = bootstrap(current_state)._replace(base_seed=seed)
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

  all_states = _join(all_states)
  trace = None if trace_fn is None else _join(traces)
  return ChainRun(all_states=all_states, trace=trace,
                  final_kernel_results=results)


def _check_not_seeded_elsewhere(kernel, seed):
  """Refuses a `StepSeeded` kernel of another seed than `seed`: its own
  seed picks every step's noise and the outer wrapper's is ignored, so
  every `seed` would give the same draws without a word."""
  if not isinstance(kernel, step_seeded.StepSeeded):
    return
  own = np.asarray(kernel.seed).tolist()
  given = np.asarray(seed).tolist()
  if own != given:
    raise ValueError(
        f"`kernel` is a StepSeeded with seed {own}, which picks the noise "
        f"of every step, so `seed` = {given} would be ignored (every seed "
        "would give the same draws). Pass its inner kernel "
        "(`kernel.inner_kernel`): sample_chain_with_progress wraps it in "
        f"StepSeeded(kernel, seed) itself; or pass seed={own}.")


def _join(chunks):
  """The chunks' states or traces as one run's: each tensor joined along
  the leading (step) axis. A composite value in them (a TFP distribution
  in the kernel results, e.g. a tuned kernel's `momentum_distribution`) is
  joined component by component, as `sample_chain` stacked it."""
  if len(chunks) == 1:
    return chunks[0]
  return tf.nest.map_structure(lambda *parts: tf.concat(parts, axis=0),
                               *chunks, expand_composites=True)


def _compiled_chunks(kernel, trace_fn, jit_compile):
  """The compiled chunk functions, kept on the kernel (an attribute, so they
  live as long as it does) and reused by later calls with the same kernel,
  trace_fn and jit_compile: a new seed or state does not recompile."""
  per_kernel = kernel.__dict__.setdefault("_tfp_sgmcmc_progress_chunks", {})
  key = (trace_fn, jit_compile)
  if key in per_kernel:
    return per_kernel[key]
  # The seed given here is replaced by the caller's in the initial results.
  wrapped = step_seeded.StepSeeded(kernel, seed=[0, 0])
  inner_trace = None if trace_fn is None else (
      lambda state, results: trace_fn(state, results.inner_results))

  def burn(state, results, n):  # n is a tensor: one compilation.
    results, held, layout = loop_carry.split(results)

    def body(i, state, results, held):
      state, results = wrapped.one_step(
          state, loop_carry.join(results, held, layout))
      results, held, _ = loop_carry.split(results)
      return i + 1, state, results, held
    _, state, results, held = tf.while_loop(
        lambda i, *_: i < n, body, (tf.constant(0), state, results, held))
    return state, loop_carry.join(results, held, layout)

  samplers = {}

  def sample(n, thin, lead):  # Static sizes: one compilation per size.
    if (n, thin, lead) not in samplers:
      def run(state, results):
        results, held, layout = loop_carry.split(results)
        carried_trace = None if trace_fn is None else (
            lambda state, r: inner_trace(state, loop_carry.join(*r, layout)))
        with quiet.expected_warnings_silenced():  # Warned when traced.
          out = tfp.mcmc.sample_chain(
              n, state, previous_kernel_results=(results, held),
              kernel=loop_carry.Carrying(wrapped, layout),
              trace_fn=carried_trace, return_final_kernel_results=True,
              num_burnin_steps=lead, num_steps_between_results=thin,
              seed=tf.constant([0, 0]))  # Ignored: StepSeeded picks seeds.
        return (out.all_states, out.trace,
                loop_carry.join(*out.final_kernel_results, layout))
      samplers[(n, thin, lead)] = tf.function(
          run, jit_compile=jit_compile, autograph=False)
    return samplers[(n, thin, lead)]

  per_kernel[key] = (tf.function(burn, jit_compile=jit_compile,
                                 autograph=False), sample,
                     tf.function(wrapped.bootstrap_results,
                                 jit_compile=jit_compile, autograph=False))
  return per_kernel[key]
