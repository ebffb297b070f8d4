"""Long compiled runs (tfp_sgmcmc/chains/runs.py and progress.py): progress
reports in chunks change no draw (against one chunk and TFP's sample_chain),
compiled chunks are reused across seeds and continue the chain, text
reports without tqdm, thinning keeps every k-th draw of the same chain, and
sample_moments continued from its results equals one long run.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import progress
from tfp_sgmcmc.chains import runs


def _kernel():
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2, -1), gradient_noise_variance=1.)
  return sg.SGHMC(target, step_size=0.1, friction=1.)


def _energy(_, results):
  return results.energy


def test_progress_reports_do_not_change_the_draws():
  # Chunking the compiled loop for progress reports must not change a
  # single bit: every step's seed is fold_in(seed, step) (StepSeeded), so
  # 3 + 3 chunks, one chunk, and TFP's own sample_chain agree exactly.
  kernel, init, seed = _kernel(), tf.zeros([2, 3]), [1, 2]
  calls = []
  chunked = runs.sample_chain_with_progress(
      42, init, kernel, seed, num_burnin_steps=11, trace_fn=_energy,
      progress=lambda done, total: calls.append((done, total)),
      num_reports=3)
  single = runs.sample_chain_with_progress(
      42, init, kernel, seed, num_burnin_steps=11, trace_fn=_energy,
      progress=False)
  reference = tf.function(lambda: tfp.mcmc.sample_chain(
      42, init, kernel=sg.StepSeeded(kernel, seed), num_burnin_steps=11,
      trace_fn=lambda s, r: r.inner_results.energy, seed=[0, 0]),
      jit_compile=True, autograph=False)()
  for run in (single, reference):
    np.testing.assert_array_equal(chunked.all_states, run.all_states)
    np.testing.assert_array_equal(chunked.trace, run.trace)
  assert chunked.all_states.shape == (42, 2, 3)
  assert np.std(chunked.all_states) > 0  # The chain moved.
  # Reports after each chunk, increasing, ending at burn-in + samples:
  # burn-in 11 in chunks of 4, 4, 3; samples 42 in 14, 14, 14.
  assert [d for d, _ in calls] == [4, 8, 11, 25, 39, 53]
  assert all(t == 53 for _, t in calls)


def test_compiled_chunks_are_reused_across_seeds():
  # The cache and the continuation do not depend on XLA (the test above
  # compiles with it): graphs without XLA, cheaper to build.
  kernel, init = _kernel(), tf.zeros([2, 3])
  a = runs.sample_chain_with_progress(10, init, kernel, [1, 2],
                                      trace_fn=None, progress=False,
                                      jit_compile=False)
  cache = kernel.__dict__["_tfp_sgmcmc_progress_chunks"]
  burn = cache[(None, False)][0]
  b = runs.sample_chain_with_progress(10, init, kernel, [3, 4],
                                      trace_fn=None, progress=False,
                                      jit_compile=False)
  assert len(cache) == 1 and cache[(None, False)][0] is burn
  assert not np.array_equal(a.all_states, b.all_states)  # Another seed.
  # The final results continue the chain: TFP's sample_chain from them
  # gives the same draws as a longer run.
  longer = runs.sample_chain_with_progress(15, init, kernel, [1, 2],
                                           trace_fn=None, progress=False,
                                           jit_compile=False)
  rest = tf.function(lambda: tfp.mcmc.sample_chain(
      5, a.all_states[-1], kernel=sg.StepSeeded(kernel, [1, 2]),
      previous_kernel_results=a.final_kernel_results, trace_fn=None,
      seed=[0, 0]), jit_compile=False, autograph=False)()
  np.testing.assert_array_equal(rest, longer.all_states[10:])


def test_compiled_chains_start_from_their_compiled_energy():
  # Each example's term holds lgamma(c), about 2.5e5 at c near 2.5e4,
  # which XLA's float32 lgamma rounds otherwise than the eager one: the
  # exact energy under XLA is the eager one plus a constant (15 nats
  # here; 9 over a Poisson regression's 50,000 counts near 1,100). The
  # results were bootstrapped eagerly, so AMAGOLD's first test compared
  # XLA's energies with the eager one and rejected every proposal
  # (acceptance 0.00 in every chain, reported as "step size too large?").
  rng = np.random.default_rng(0)
  x = rng.normal(size=2000).astype(np.float32)
  c = rng.uniform(2e4, 3e4, size=2000).astype(np.float32)

  def log_likelihood(w, batch):
    # A state-free term: lgamma less Stirling's approximation of it.
    free = (tf.math.lgamma(batch[1]) - (batch[1] - 0.5) *
            tf.math.log(batch[1]) + batch[1])
    return -0.5 * (batch[0] - w[..., :1]) ** 2 + free
  target = sg.InMemoryTarget(log_likelihood, (x, c), full_batch=True)
  init = tf.zeros([4, 1])
  offset = tf.function(target.energy, jit_compile=True)(init) - (
      target.energy(init))
  assert np.all(np.abs(offset) > 5.), offset   # What the test is about.
  kernel = sg.AMAGOLD(target, step_size=0.01, num_leapfrog_steps=3,
                      friction=0.5)
  run = runs.sample_chain_with_progress(
      50, init, kernel, [0, 1], progress=False,
      trace_fn=lambda _, r: r.is_accepted)
  assert np.mean(run.trace) > 0.9, np.mean(run.trace, 0)


def test_text_progress_when_given_true(capsys, monkeypatch):
  # Without tqdm the reports are lines on stderr.
  monkeypatch.setattr(progress, "_tqdm_progress", _raise_import_error)
  runs.sample_chain_with_progress(6, tf.zeros([3]), _kernel(), [5, 6],
                                  trace_fn=None, num_reports=2,
                                  desc="demo")
  err = capsys.readouterr().err
  assert "demo: 3/6" in err and "demo: 6/6 (100%)" in err


def _raise_import_error(*_):
  raise ImportError


def test_thinning_keeps_every_kth_draw_of_the_same_chain():
  # num_steps_between_results=2 keeps every third draw of the chain that an
  # unthinned run draws (same StepSeeded seeds), starting, as sample_chain
  # does, one step after burn-in, whatever the chunking; the reports count
  # every step: burn-in 2 + 2, then 1 + 3 * 3 and 4 * 3 steps.
  # The thinning is the loop's bookkeeping, the same with or without XLA:
  # graphs without it, cheaper to build.
  kernel, init, seed = _kernel(), tf.zeros([2, 3]), [5, 6]
  calls = []
  thinned = runs.sample_chain_with_progress(
      8, init, kernel, seed, num_burnin_steps=4, trace_fn=None,
      num_steps_between_results=2, num_reports=2,
      progress=lambda done, total: calls.append((done, total)),
      jit_compile=False)
  full = runs.sample_chain_with_progress(
      24, init, kernel, seed, num_burnin_steps=4, trace_fn=None,
      progress=False, jit_compile=False)
  np.testing.assert_array_equal(thinned.all_states,
                                np.asarray(full.all_states)[0::3][:8])
  assert [d for d, _ in calls] == [2, 4, 14, 26]
  assert all(t == 26 for _, t in calls)
  with pytest.raises(ValueError, match="num_steps_between_results"):
    runs.sample_chain_with_progress(8, init, kernel, seed,
                                    num_steps_between_results=-1)


def quadratic(x):
  return 0.5 * tf.reduce_sum(x ** 2, -1)


def test_sample_moments_continuation_equals_one_long_run():
  # Continuation reuses the compiled loop and continues the chain: two
  # calls of 50 steps end where the kernel's own 100 steps end. (Graphs
  # without XLA: the loops' reuse and continuation do not depend on it.)
  target = sg.NoisyGradientTarget(quadratic, gradient_noise_variance=1.)
  kernel = sg.StepSeeded(sg.SGHMC(target, 0.1, 1.), seed=[4, 5])
  first = sg.sample_moments(kernel, tf.zeros([2, 3]), 50, seed=[0, 0],
                            jit_compile=False)
  second = sg.sample_moments(kernel, first.final_state, 50, seed=[0, 0],
                             previous_kernel_results=first.final_kernel_results,
                             jit_compile=False)
  whole = sg.sample_moments(kernel, tf.zeros([2, 3]), 100, seed=[0, 0],
                            jit_compile=False)
  np.testing.assert_allclose(second.final_state, whole.final_state,
                             rtol=1e-5, atol=1e-6)
  # The pooled mean of the halves is the whole run's mean.
  np.testing.assert_allclose((first.mean + second.mean) / 2., whole.mean,
                             rtol=1e-4, atol=1e-5)
  # One compiled loop per (steps, burn-in, jit, continuing): a further
  # continuation reuses one.
  sg.sample_moments(kernel, second.final_state, 50, seed=[0, 0],
                    previous_kernel_results=second.final_kernel_results,
                    jit_compile=False)
  assert len(kernel.__dict__["_tfp_sgmcmc_moments"]) == 3


def test_sample_moments_continued_with_one_seed_draws_new_noise():
  # A long run in pieces repeats one call. A bare kernel (no StepSeeded)
  # continued with the same `seed` drew the previous piece's noise again,
  # and its chain, coupled to that piece's, repeated its draws: on a
  # regression, pieces 2, 3 and 4 of 2,000 SGLD steps had bit-identical
  # means. The step count folded into the seed gives each piece its own
  # noise: the pieces' means differ by their Monte Carlo error (about 0.2
  # here: a chain mean of 300 SGLD draws at sd 1), not by nothing.
  kernel = sg.SGLD(sg.NoisyGradientTarget(quadratic, 1.), 0.1)
  first = sg.sample_moments(kernel, tf.zeros([4, 3]), 300, seed=[1, 2],
                            jit_compile=False)
  pieces = [first]
  for _ in range(3):
    last = pieces[-1]
    pieces.append(sg.sample_moments(
        kernel, last.final_state, 300, seed=[1, 2], jit_compile=False,
        previous_kernel_results=last.final_kernel_results))
  means = np.stack([np.asarray(p.mean) for p in pieces])
  steps = np.abs(np.diff(means[1:], axis=0))
  assert steps.min() > 1e-4, steps.min()   # No two pieces alike.
  assert 0.02 < np.median(steps) < 1., np.median(steps)
