"""`sample_chain_with_progress` runs every kernel `warm_up` returns (AMAGOLD,
SGHMC, SGNHT, SGLD; with a tuned mass where they take one, and without),
with the default trace (the whole results, in which a tuned kernel keeps
its `momentum_distribution`, a TFP distribution) and a custom one, eager
and under XLA, with progress reports: every traced tensor has a step per
kept draw and the joined chunks equal one unchunked run bit for bit, the
distribution's parameters included."""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import diagnostics

NUM_RESULTS = 4


def _target():
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2, -1), gradient_noise_variance=0.1)


# name: (kernel, adapt_mass). SGHMC takes a mass only without a noise
# estimate, its default.
KERNELS = {
    "AMAGOLD mass": (lambda t: sg.AMAGOLD(t, step_size=0.1,
                                          num_leapfrog_steps=2,
                                          friction=0.5), True),
    "AMAGOLD": (lambda t: sg.AMAGOLD(t, step_size=0.1, num_leapfrog_steps=2,
                                     friction=0.5), False),
    "SGHMC mass": (lambda t: sg.SGHMC(t, step_size=0.1, friction=1.), True),
    "SGHMC": (lambda t: sg.SGHMC(t, step_size=0.1, friction=1.), False),
    "SGNHT mass": (lambda t: sg.SGNHT(t, step_size=0.1), True),
    "SGNHT": (lambda t: sg.SGNHT(t, step_size=0.1), False),
    "SGLD": (lambda t: sg.SGLD(t, step_size=0.1), False),
}


_WARMED = {}


def _warm(name):
  """The kernel `warm_up` returns, once per kernel for the module."""
  if name not in _WARMED:
    make, adapt_mass = KERNELS[name]
    out = sg.warm_up(make(_target()), tf.zeros([2, 3]), num_steps=20,
                     seed=[1, 2], num_test_steps=2, adapt_mass=adapt_mass,
                     jit_compile=False)
    has_mass = out.kernel.parameters.get("momentum_distribution") is not None
    assert has_mass == adapt_mass, name
    _WARMED[name] = out
  return _WARMED[name]


def _energy_trace(state, results):
  return state, diagnostics.find_field(results, "energy")


def _leaves(structure):
  return tf.nest.flatten(structure, expand_composites=True)


# Eager: every kernel with the default trace, and the custom trace on each
# kind of kernel (a tuned mass changes the step, run by the default-trace
# case, but not the energy the custom trace reads). Under XLA each case
# compiles (the costly part), so XLA covers the two kinds of results that
# hold a distribution (AMAGOLD's nested ones, SGHMC's own) with the default
# trace, and the custom trace once, on the kernel cheapest to compile
# (compiled chunks of results without a distribution are also
# test_long_runs.py's subject).
CASES = ([(name, "default_trace", False) for name in sorted(KERNELS)] +
         [(name, "custom_trace", False) for name in
          ("AMAGOLD", "SGHMC", "SGLD", "SGNHT")] +
         [(name, "default_trace", True) for name in
          ("AMAGOLD mass", "SGHMC mass")] +
         [("SGLD", "custom_trace", True)])


@pytest.mark.parametrize(
    "name,trace,jit_compile", CASES,
    ids=[f"{n}-{t}-{'xla' if j else 'eager'}" for n, t, j in CASES])
def test_progress_runs_a_warmed_up_kernel(name, trace, jit_compile):
  warm = _warm(name)
  trace_fn = None if trace == "default_trace" else _energy_trace
  extra = {} if trace_fn is None else dict(trace_fn=trace_fn)
  reports = []
  run = sg.sample_chain_with_progress(
      NUM_RESULTS, warm.state, warm.kernel, [3, 4], num_reports=2,
      progress=lambda done, total: reports.append((done, total)),
      jit_compile=jit_compile, **extra)
  assert reports == [(2, 4), (4, 4)]
  if trace_fn is None and not jit_compile:
    # The whole results joined: as one unchunked run (one compilation
    # more, so once per kernel).
    once = sg.sample_chain_with_progress(
        NUM_RESULTS, warm.state, warm.kernel, [3, 4], progress=False,
        jit_compile=jit_compile)
    for got, want in zip(_leaves(run), _leaves(once), strict=True):
      np.testing.assert_array_equal(got, want)
  for leaf in _leaves(run.trace):
    assert leaf.shape[0] == NUM_RESULTS
  if trace_fn is None and warm.report.momentum_distribution is not None:
    # The joined trace holds the distribution of each kept step.
    mass = diagnostics.find_field(run.trace, "momentum_distribution")
    assert mass.batch_shape_tensor()[0][0] == NUM_RESULTS


def test_warm_up_reports_after_each_window_and_tunes_the_same():
  # A long warm-up (`sample`'s at large N) would otherwise print nothing
  # until it ends; the reports come between the compiled windows, so the
  # tuned kernel and state are those of a warm-up without them.
  make, _ = KERNELS["AMAGOLD mass"]
  reports = []
  kwargs = dict(num_steps=40, seed=[1, 2], initial_buffer=10,
                final_buffer=10, base_window=10, jit_compile=False)
  shown = sg.warm_up(make(_target()), tf.zeros([2, 3]),
                     progress=lambda done, total: reports.append(
                         (done, total)), **kwargs)
  quiet = sg.warm_up(make(_target()), tf.zeros([2, 3]), **kwargs)
  steps = np.cumsum([w["steps"] for w in shown.report.windows]).tolist()
  assert reports == [(done, 40) for done in steps] and steps[-1] == 40
  np.testing.assert_array_equal(shown.state, quiet.state)
  assert shown.report.step_size == quiet.report.step_size
