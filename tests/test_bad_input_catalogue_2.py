"""A second bad-input catalogue (issue 16), every outcome classified.

Each case declares the outcome it must have, and the test checks it:

* "clear": a ValueError / TypeError / FileNotFoundError raised before any
  sampling, whose message names the argument in backticks (`arg`) and
  matches `pattern` (the value seen, what was expected or the fix).
* "correct": the call is accepted by design, and its result is checked to
  be right (an exact comparison or a known value), not just finite.
* "unclear": an error, but not one that names the cause (kept to at most 3).
* "silent": a wrong answer or hang. None may remain.

`classify` decides the outcome from what actually happens, so a case whose
message stops naming the argument, or whose accepted result becomes wrong,
changes class and fails. None of these cases is copied from the issue's
list; they cover the same classes (user functions' shapes and dtypes, data,
numeric arguments, kernel vs results, checkpoints, runs) with other inputs.
"""

import collections
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg

D = 3
RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, D)).astype(np.float32)
Y = (X @ np.array([1., -1., .5], np.float32) +
     RNG.normal(size=40).astype(np.float32))


RAGGED = np.empty(2, dtype=object)
RAGGED[0], RAGGED[1] = [1., 2.], [3.]


def ll(w, b):
  return -0.5 * (b[1] - tf.linalg.matvec(b[0], w)) ** 2


def prior(w):
  return -0.5 * tf.reduce_sum(w ** 2, -1)


def quadratic(x):
  return 0.5 * tf.reduce_sum(x ** 2, -1)


def noisy(**kw):
  return sg.NoisyGradientTarget(quadratic, gradient_noise_variance=1., **kw)


def mem(fn=ll, data=(X, Y), batch_size=8, **kw):
  return sg.InMemoryTarget(fn, data, batch_size, **kw)


def boot(kernel, state):
  return kernel.bootstrap_results(state)


def steps(kernel, state, n=2):
  results = kernel.bootstrap_results(state)
  for i in range(n):
    state, results = kernel.one_step(state, results, seed=[i, 3])
  return state, results


def batches(batch=8, repeat=True):
  ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(batch)
  return ds.repeat() if repeat else ds


def exact_energy(w):
  """U(w) of `mem(log_prior_fn=prior)` computed here in numpy."""
  r = Y - X @ w
  return 0.5 * np.sum(r ** 2) + 0.5 * np.sum(w ** 2)


# --- checks of the "correct" cases ------------------------------------------

def same_as_tensor_state():
  kernel = sg.SGLD(noisy(), 0.1)
  a, _ = steps(kernel, tf.ones([2, D]))
  results = kernel.bootstrap_results(tf.ones([2, D]))
  b, _ = kernel.one_step(np.ones([2, D], np.float32), results, seed=[0, 3])
  b, _ = kernel.one_step(b, _, seed=[1, 3])
  np.testing.assert_array_equal(a, b)


def variable_step_size_as_float():
  a, _ = steps(sg.SGLD(noisy(), tf.Variable(0.1)), tf.ones([D]))
  b, _ = steps(sg.SGLD(noisy(), 0.1), tf.ones([D]))
  np.testing.assert_array_equal(a, b)


def numpy_step_size_as_float():
  a, _ = steps(sg.SGHMC(noisy(), np.float64(0.1), np.array(2.)),
               tf.ones([D]))
  b, _ = steps(sg.SGHMC(noisy(), 0.1, 2.), tf.ones([D]))
  np.testing.assert_array_equal(a, b)


def fractional_chunk_size_energy():
  # energy_chunk_size only splits the exact sum: 2.5 -> chunks of 2.
  target = mem(log_prior_fn=prior, energy_chunk_size=2.5)
  w = np.array([0.3, -0.2, 0.1], np.float32)
  np.testing.assert_allclose(target.energy(tf.constant(w)), exact_energy(w),
                             rtol=1e-5)


def constant_prior_broadcasts():
  target = mem(log_prior_fn=lambda w: 0.)
  flat = mem()
  w = tf.constant(RNG.normal(size=(4, D)).astype(np.float32))
  np.testing.assert_allclose(target.minibatch_energy(w, [1, 2]),
                             flat.minibatch_energy(w, [1, 2]), rtol=1e-6)
  assert target.minibatch_energy(w, [1, 2]).shape == [4]


def integer_constant_prior():
  target = mem(log_prior_fn=lambda w: 0)
  energy = target.minibatch_energy(tf.zeros([D]), [1, 2])
  assert energy.dtype == tf.float32
  np.testing.assert_allclose(energy, mem().minibatch_energy(
      tf.zeros([D]), [1, 2]), rtol=1e-6)


def list_data_as_tuple():
  # Data given as numpy float64 arrays in a list: the energy is the same as
  # with a tuple of float32 (within float32 rounding) in a float64 state.
  target = mem(data=[X.astype(np.float64), Y.astype(np.float64)],
               log_prior_fn=prior)
  w = np.array([0.3, -0.2, 0.1])
  np.testing.assert_allclose(target.energy(tf.constant(w)), exact_energy(w),
                             rtol=1e-5)


def one_step_moments():
  m = sg.sample_moments(sg.SGLD(noisy(), 0.1), tf.ones([2, D]), 1,
                        seed=[1, 2])
  np.testing.assert_allclose(m.mean, m.final_state)
  np.testing.assert_array_equal(m.variance, np.zeros([2, D]))


def pathlib_round_trip(tmp_path):
  import pathlib  # pylint: disable=g-import-not-at-top
  kernel = sg.SGHMC(noisy(), 0.1, 1.)
  state, results = steps(kernel, tf.ones([2, D]))
  path = pathlib.Path(tmp_path) / "chain.npz"
  sg.save_chain(path, state, results)
  s2, r2 = sg.load_chain(path, kernel.bootstrap_results(state), state)
  np.testing.assert_array_equal(s2, state)
  for a, b in zip(tf.nest.flatten(r2), tf.nest.flatten(results)):
    np.testing.assert_array_equal(a, b)
  assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]


def stale_temporary_removed(tmp_path):
  path = os.path.join(tmp_path, "c.npz")
  stale = path + ".tmp12345.npz"
  with open(stale, "wb") as f:
    f.write(b"PK\x03\x04 partial")  # Left by a process killed mid-write.
  kernel = sg.SGLD(noisy(), 0.1)
  sg.save_chain(path, tf.ones([D]), kernel.bootstrap_results(tf.ones([D])))
  assert os.listdir(tmp_path) == ["c.npz"]


def find_mode_of_quadratic():
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x - 2.) ** 2, -1),
      gradient_noise_variance=0.)
  mode = sg.find_mode(target, tf.zeros([D]), num_steps=400,
                      learning_rate=0.05)
  np.testing.assert_allclose(mode, 2. * np.ones(D), atol=1e-2)


def tempered_string_free():
  target = sg.TemperedTarget(noisy(), 2)
  np.testing.assert_allclose(target.energy(tf.ones([D])), 0.75)


def dataset_exact_count():
  target = sg.DatasetTarget(ll, batches(), 40, log_prior_fn=prior,
                            full_dataset=batches(7, repeat=False))
  w = np.array([0.3, -0.2, 0.1], np.float32)
  np.testing.assert_allclose(target.energy(tf.constant(w)), exact_energy(w),
                             rtol=1e-5)


def independent_chains_fallback():
  # A log-likelihood written for one chain, with per-chain minibatches: the
  # library calls it once per chain; the energy equals the per-chain call's.
  target = mem(log_prior_fn=prior, parameter_shapes=[D],
               independent_minibatches=True)
  w = tf.constant(RNG.normal(size=(2, D)).astype(np.float32))
  energy = target.minibatch_energy(w, [4, 5])
  idx = np.asarray(target.minibatch_indices([4, 5], w))
  for c in range(2):
    wc = np.asarray(w[c])
    r = Y[idx[c]] - X[idx[c]] @ wc
    np.testing.assert_allclose(
        energy[c], 40. / 8 * 0.5 * np.sum(r ** 2) + 0.5 * np.sum(wc ** 2),
        rtol=1e-5)


def shifted(shift=3.):
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x - shift) ** 2, -1),
      gradient_noise_variance=1.)


def amagold(target, step_size=0.1):
  return sg.AMAGOLD(target, step_size, 3, 0.5)


def amagold_resumed_on_rebuilt_target(tmp_path):
  # A checkpoint continued by a new kernel on an identical, rebuilt target
  # (as in a new process) is accepted and continues bit for bit: the check
  # compares the cached U(theta) with the target's, not object identities.
  path = os.path.join(tmp_path, "c.npz")
  kernel = amagold(mem(log_prior_fn=prior))
  state, results = steps(kernel, tf.zeros([2, D]))
  sg.save_chain(path, state, results)
  expected, _ = kernel.one_step(state, results, seed=[7, 3])
  rebuilt = amagold(mem(log_prior_fn=prior))
  s2, r2 = sg.load_chain(path, rebuilt.bootstrap_results(state), state)
  got, _ = rebuilt.one_step(s2, r2, seed=[7, 3])
  np.testing.assert_array_equal(got, expected)


def step_size_of_results_used_and_reported():
  # TFP's protocol: the step size comes from the results. Eagerly, a kernel
  # built with another step size says so; the step is the one with the
  # results' step size.
  import warnings  # pylint: disable=g-import-not-at-top
  kernel = sg.SGLD(noisy(), 0.1)
  state, results = steps(kernel, tf.ones([D]))
  with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    got, _ = kernel.copy(step_size=0.02).one_step(state, results,
                                                  seed=[7, 3])
  assert [w for w in seen if issubclass(
      w.category, sg.StepSizeFromResultsWarning) and
          "0.02" in str(w.message) and "with_step_size" in str(w.message)]
  expected, _ = kernel.one_step(state, results, seed=[7, 3])
  np.testing.assert_array_equal(got, expected)


def step_size_changed_with_the_results():
  # kernel.copy(step_size=new) plus with_step_size(results, new): no
  # warning, and the step is the new kernel's step from fresh results.
  import warnings  # pylint: disable=g-import-not-at-top
  kernel = sg.SGLD(noisy(), 0.1)
  state, results = steps(kernel, tf.ones([2, D]))
  new = kernel.copy(step_size=0.02)
  with warnings.catch_warnings():
    warnings.simplefilter("error", sg.StepSizeFromResultsWarning)
    got, r = new.one_step(state, sg.with_step_size(results, 0.02),
                          seed=[7, 3])
  expected, _ = new.one_step(state, new.bootstrap_results(state),
                             seed=[7, 3])
  np.testing.assert_array_equal(got, expected)
  assert float(r.step_size) == np.float32(0.02)


def adaptation_changes_step_size_silently():
  # Under TFP's step-size adaptation the results' step size differs from
  # the kernel's by design: no warning, and the step size moves.
  import warnings  # pylint: disable=g-import-not-at-top
  import tensorflow_probability as tfp  # pylint: disable=g-import-not-at-top
  kernel = tfp.mcmc.SimpleStepSizeAdaptation(amagold(noisy(), 0.5),
                                             num_adaptation_steps=5)
  with warnings.catch_warnings():
    warnings.simplefilter("error", sg.StepSizeFromResultsWarning)
    _, results = steps(kernel, tf.zeros([2, D]), n=3)
  assert float(results.new_step_size) != 0.5


def _amagold_on_other_target():
  state = tf.zeros([2, D])
  results = amagold(noisy()).bootstrap_results(state)
  return amagold(shifted()).one_step(state, results, seed=[1, 2])


def _barker_on_other_data():
  state = tf.zeros([D])
  results = sg.AmortizedBarker(mem(), 0.1, 2).bootstrap_results(state)
  other = mem(data=(X, Y + 1.))
  return sg.AmortizedBarker(other, 0.1, 2).one_step(state, results,
                                                    seed=[1, 2])


def _amagold_results_of_another_state():
  kernel = amagold(noisy())
  results = kernel.bootstrap_results(tf.zeros([D]))
  return kernel.one_step(tf.ones([D]), results, seed=[1, 2])


def _mala_on_other_density():
  sgld = lambda fn: sg.SGLD(target_log_prob_fn=fn, step_size=0.1)
  state = tf.ones([2, D])
  results = sgld(lambda x: -quadratic(x)).bootstrap_results(state)
  return sgld(lambda x: -2. * quadratic(x)).one_step(state, results,
                                                     seed=[1, 2])


def _moments_continued_on_other_target():
  state = tf.zeros([2, D])
  first = sg.sample_moments(amagold(noisy()), state, 3, seed=[1, 2])
  return sg.sample_moments(amagold(shifted()), first.final_state, 3,
                           seed=[3, 4],
                           previous_kernel_results=first.final_kernel_results)


def _checkpoint_of_other_temperature(tmp_path):
  path = os.path.join(tmp_path, "c.npz")
  wrap = lambda temperature: sg.StepSeeded(sg.AMAGOLD(
      noisy(), 0.1, 3, 0.5, temperature=temperature), seed=[1, 2])
  state = tf.zeros([2, D]) + 1.
  sg.save_chain(path, state, wrap(1.).bootstrap_results(state))
  kernel = wrap(2.)
  s, r = sg.load_chain(path, kernel.bootstrap_results(state), state)
  return sg.check_kernel_results(kernel, s, r)


def _transformed_results_on_other_density():
  import tensorflow_probability as tfp  # pylint: disable=g-import-not-at-top
  make = lambda shift: tfp.mcmc.TransformedTransitionKernel(sg.AMAGOLD(
      target_log_prob_fn=lambda x: -quadratic(x - shift), step_size=0.1,
      num_leapfrog_steps=2, friction=0.5), tfp.bijectors.Exp())
  state = tf.ones([2, D])
  return sg.check_kernel_results(make(1.), state,
                                 make(0.).bootstrap_results(state))


# --- the catalogue ------------------------------------------------------------

Case = collections.namedtuple("Case", ["name", "call", "outcome", "arg",
                                       "pattern"])


def clear(name, call, arg, pattern=""):
  return Case(name, call, "clear", arg, pattern)


def correct(name, call):
  return Case(name, call, "correct", None, None)


def unclear(name, call):
  return Case(name, call, "unclear", None, None)


def _nan_moments():
  return sg.sample_moments(sg.SGLD(noisy(), 0.1),
                           tf.constant([[0., np.inf, 0.]]), 5, seed=[1, 2])


def _bad_zip(tmp_path):
  path = os.path.join(tmp_path, "c.npz")
  kernel = sg.SGLD(noisy(), 0.1)
  sg.save_chain(path, tf.ones([D]), kernel.bootstrap_results(tf.ones([D])))
  with open(path, "r+b") as f:
    f.truncate(30)
  return sg.load_chain(path, kernel.bootstrap_results(tf.ones([D])))


def _text_file(tmp_path):
  path = os.path.join(tmp_path, "notes.npz")
  with open(path, "w") as f:
    f.write("not a checkpoint")
  return sg.load_chain(path, sg.SGLD(noisy(), 0.1).bootstrap_results(
      tf.ones([D])))


def _wrong_parameter_count(tmp_path):
  path = os.path.join(tmp_path, "c.npz")
  kernel = sg.SGLD(noisy(), 0.1)
  sg.save_chain(path, tf.ones([2, D]), kernel.bootstrap_results(
      tf.ones([2, D])))
  return sg.load_chain(path, kernel.bootstrap_results(tf.ones([2, 5])),
                       tf.ones([2, 5]))


def _results_of_other_kernel():
  sgld = sg.SGLD(noisy(), 0.1)
  return sg.SGHMC(noisy(), 0.1, 1.).one_step(
      tf.ones([D]), sgld.bootstrap_results(tf.ones([D])), seed=[1, 2])


def _float64_state_float32_results():
  kernel = sg.SGLD(noisy(), 0.1)
  return kernel.one_step(tf.ones([D], tf.float64),
                         kernel.bootstrap_results(tf.ones([D])), seed=[1, 2])


def _more_chains_than_results():
  kernel = sg.SGNHT(noisy(), 0.1)
  return kernel.one_step(tf.ones([5, D]),
                         kernel.bootstrap_results(tf.ones([2, D])),
                         seed=[1, 2])


CATALOGUE = [
    # InMemoryTarget: data.
    clear("inf in the labels", lambda: mem(
        data=(X, np.where(np.arange(40) == 7, np.inf, Y))), "data",
          r"part 1 .* non-finite .* index \(7,\)"),
    clear("data parts of different lengths", lambda: mem(
        data=(X, Y[:30])), "data", r"different lengths \[40, 30\]"),
    clear("data as a nested Python list of numbers", lambda: mem(
        data=[[1., 2.], [3., 4.]], batch_size=1), "data",
          r"leading example axis"),
    clear("ragged rows in the data", lambda: mem(
        data=(RAGGED,), batch_size=1), "data", r"ragged"),
    clear("text data", lambda: mem(data=(X, np.array(["a"] * 40))), "data",
          r"dtype string"),
    clear("fractional batch size", lambda: mem(batch_size=2.5),
          "batch_size", r"integer; got 2.5"),
    clear("boolean batch size", lambda: mem(batch_size=True), "batch_size",
          r"integer; got True"),
    clear("string batch size", lambda: mem(batch_size="8"), "batch_size",
          r"got '8'"),
    clear("batch size above N", lambda: mem(batch_size=41), "batch_size",
          r"N = 40.*got 41"),
    clear("independent_minibatches as a string", lambda: mem(
        independent_minibatches="yes"), "independent_minibatches",
          r"got 'yes'"),
    clear("independent minibatches without parameter shapes", lambda: mem(
        independent_minibatches=True), "parameter_shapes",
          r"parameter_shapes=None"),
    correct("fractional energy chunk size (only splits the exact sum)",
            fractional_chunk_size_energy),
    correct("data as a list of float64 arrays, float64 state",
            list_data_as_tuple),
    # InMemoryTarget: what the user's functions return.
    clear("log-likelihood returns one scalar", lambda: boot(sg.SGLD(mem(
        fn=lambda w, b: tf.reduce_sum(ll(w, b))), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"shape \(\)"),
    clear("log-likelihood averages over the batch", lambda: boot(sg.SGLD(
        mem(fn=lambda w, b: tf.reduce_mean(ll(w, b), -1)), 0.1),
        tf.zeros([D])), "log_likelihood_fn", r"Do not sum or average"),
    clear("log-likelihood with keepdims", lambda: boot(sg.SGLD(mem(
        fn=lambda w, b: ll(w, b)[..., None]), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"one log-likelihood per example"),
    clear("log-likelihood with an extra leading axis", lambda: boot(sg.SGLD(
        mem(fn=lambda w, b: ll(w, b)[None]), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"shape \[1\].*state part 0 has shape \[3\]"),
    clear("log-likelihood returns (value, extra) pair", lambda: boot(sg.SGLD(
        mem(fn=lambda w, b: (ll(w, b), ll(w, b))), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"shape \[2\]"),
    clear("log-likelihood computes in float64", lambda: boot(sg.SGLD(mem(
        fn=lambda w, b: tf.cast(ll(w, b), tf.float64)), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"dtype float64 for a float32 state"),
    clear("log-likelihood indexes a tuple batch by key", lambda: boot(
        sg.SGLD(mem(fn=lambda w, b: -b["y"] ** 2), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"batch.*float32\[9, 3\]"),
    clear("log-likelihood broadcasts chains against examples (4 chains, "
          "batch 4)", lambda: boot(sg.SGLD(mem(
              fn=lambda w, b: -tf.reduce_sum((b[0] - w) ** 2, -1),
              batch_size=4), 0.1), tf.zeros([4, D])), "log_likelihood_fn",
          r"probe batch of 5"),
    clear("log-prior sums over the chains too", lambda: boot(sg.SGLD(mem(
        log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2)), 0.1),
        tf.zeros([4, D])), "log_prior_fn", r"returned shape \[\].*\[4\]"),
    clear("log-prior in float64 for a float32 state", lambda: boot(sg.SGLD(
        mem(log_prior_fn=lambda w: tf.cast(prior(w), tf.float64)), 0.1),
        tf.zeros([D])), "log_prior_fn", r"dtype float64"),
    clear("log-prior expects a list state", lambda: boot(sg.SGLD(mem(
        log_prior_fn=lambda p: prior(p[0]) + prior(p[1])), 0.1),
        tf.zeros([D])), "log_prior_fn", r"float32\[3\]"),
    correct("constant log-prior with 4 chains", constant_prior_broadcasts),
    correct("integer constant log-prior", integer_constant_prior),
    correct("per-chain minibatches with a one-chain log-likelihood",
            independent_chains_fallback),
    # DatasetTarget.
    clear("zero training-set size", lambda: sg.DatasetTarget(
        ll, batches(), 0), "num_examples", r"got 0"),
    clear("fractional training-set size", lambda: sg.DatasetTarget(
        ll, batches(), 40.5), "num_examples", r"got 40.5"),
    clear("full dataset that is a numpy array", lambda: sg.DatasetTarget(
        ll, batches(), 40, full_dataset=X), "full_dataset", r"ndarray"),
    clear("full dataset with half the examples", lambda: sg.DatasetTarget(
        ll, batches(), 40, full_dataset=batches(repeat=False).take(2)),
          "num_examples", r"40 but `full_dataset` holds 16"),
    clear("full dataset covering the data three times",
          lambda: sg.DatasetTarget(ll, batches(), 40, full_dataset=batches(
              repeat=False).repeat(3)), "num_examples", r"holds 120"),
    clear("full dataset of features only", lambda: sg.DatasetTarget(
        ll, batches(), 40, full_dataset=tf.data.Dataset.from_tensor_slices(
            X).batch(8)), "full_dataset", r"rank \[2\].*rank \[2, 1\]"),
    clear("unbatched minibatch dataset", lambda: sg.DatasetTarget(
        ll, tf.data.Dataset.from_tensor_slices((X, Y)).repeat(), 40),
          "dataset", r"\.batch\(batch_size\)"),
    clear("dataset filtered to nothing", lambda: sg.DatasetTarget(
        ll, batches(repeat=False).take(0), 40), "dataset", r"empty"),
    clear("finite dataset runs out during the chain", lambda: steps(
        sg.SGLD(sg.DatasetTarget(ll, batches(repeat=False), 40), 1e-3),
        tf.zeros([D]), n=6), "dataset", r"exhausted.*repeat"),
    correct("dataset target with an exact full dataset", dataset_exact_count),
    # NoisyGradientTarget, wrappers.
    clear("energy function that is a number", lambda: sg.NoisyGradientTarget(
        1., gradient_noise_variance=1.), "energy_fn", r"got 1.0"),
    clear("noise variance as a string", lambda: sg.NoisyGradientTarget(
        quadratic, gradient_noise_variance="1"), "gradient_noise_variance",
          r"got '1'"),
    clear("NaN noise variance", lambda: sg.NoisyGradientTarget(
        quadratic, gradient_noise_variance=[1., np.nan]),
          "gradient_noise_variance", r"nan"),
    clear("energy computed in float64", lambda: boot(sg.SGLD(
        sg.NoisyGradientTarget(lambda x: tf.cast(quadratic(x), tf.float64),
                               gradient_noise_variance=1.), 0.1),
        tf.zeros([D])), "energy_fn", r"dtype float64"),
    clear("energy summed over declared chains", lambda: boot(sg.SGLD(
        noisy(parameter_shapes=[D]).__class__(
            lambda x: tf.reduce_sum(x ** 2), gradient_noise_variance=1.,
            parameter_shapes=[D]), 0.1), tf.zeros([4, D])), "energy_fn",
          r"shape \[\].*\[4, 3\]"),
    clear("tempering at a string temperature", lambda: sg.TemperedTarget(
        noisy(), "2"), "temperature", r"got '2'"),
    clear("tempering at zero temperature", lambda: sg.TemperedTarget(
        noisy(), 0.), "temperature", r"got 0.0"),
    clear("control variates around a target-less centre",
          lambda: sg.ControlVariateTarget(None, tf.zeros([D])), "target",
          r"NoneType"),
    correct("tempered energy at an integer temperature",
            tempered_string_free),
    # Kernels: numeric arguments.
    clear("step size None", lambda: sg.SGLD(noisy(), None), "step_size",
          r"got None"),
    clear("per-coordinate step sizes with a negative one", lambda: sg.SGLD(
        noisy(), [0.1, -0.1, 0.1]), "step_size", r"-0.1"),
    clear("complex step size", lambda: sg.SGLD(noisy(), 0.1j),
          "step_size", r"0.1j"),
    clear("friction as a string", lambda: sg.SGHMC(noisy(), 0.1, "1"),
          "friction", r"got '1'"),
    clear("negative friction in a Variable", lambda: sg.SGHMC(
        noisy(), 0.1, tf.Variable(-1.)), "friction", r"Variable.*-1"),
    clear("NaN step size in numpy float32", lambda: sg.SGNHT(
        noisy(), np.float32(np.nan)), "step_size", r"nan"),
    clear("zero temperature", lambda: sg.SGLD(noisy(), 0.1, temperature=0),
          "temperature", r"got 0"),
    clear("boolean temperature", lambda: sg.SGLD(noisy(), 0.1,
                                                 temperature=True),
          "temperature", r"got True"),
    clear("momentum resampling every 0 steps", lambda: sg.SGHMC(
        noisy(), 0.1, 1., momentum_resampling_period=0),
          "momentum_resampling_period", r"got 0"),
    clear("noise estimate above the friction", lambda: sg.SGHMC(
        noisy(), 0.1, 1., noise_estimate=2.), "friction", r"noise_estimate"),
    clear("pSGLD negative decay", lambda: sg.PreconditionedSGLD(
        noisy(), 0.1, decay=-0.1), "decay", r"-0.1"),
    clear("SG-NUTS tree depth 0", lambda: sg.SGNUTS(
        noisy(), 0.1, 1., max_tree_depth=0), "max_tree_depth", r"got 0"),
    clear("AMAGOLD with no leapfrog steps", lambda: sg.AMAGOLD(
        noisy(), 0.1, 0, 1.), "num_leapfrog_steps", r"got 0"),
    clear("kernel without a target", lambda: sg.SGLD(None, 0.1), "target",
          r"NoneType"),
    correct("step size in a positive Variable", variable_step_size_as_float),
    correct("numpy step size and friction", numpy_step_size_as_float),
    # Kernels: state and results.
    clear("initial state as a list of Python floats", lambda: boot(sg.SGLD(
        noisy(), 0.1), [0., 0.]), "current_state", r"float, not a tensor"),
    clear("results of another kernel", _results_of_other_kernel,
          "previous_kernel_results", r"SGLDResults, not SGHMCResults"),
    clear("float64 state with float32 results",
          _float64_state_float32_results, "current_state",
          r"float64.*float32"),
    clear("5 chains continued with results for 2",
          _more_chains_than_results, "previous_kernel_results",
          r"\[2\].*\[5, 3\]"),
    correct("numpy state to one_step", same_as_tensor_state),
    clear("AMAGOLD results continued on another target",
          _amagold_on_other_target, "previous_kernel_results",
          r"cached `energy` \(chain \(0,\): 0 in the results, 13.5 now.*"
          r"another target.*bootstrap_results"),
    clear("amortized Barker results continued on other data",
          _barker_on_other_data, "previous_kernel_results",
          r"cached `energy`.*bootstrap_results"),
    clear("AMAGOLD results given with another state",
          _amagold_results_of_another_state, "previous_kernel_results",
          r"0 in the results, 1.5 now.*another state"),
    clear("full-batch SGLD results continued on another log density",
          _mala_on_other_density, "previous_kernel_results",
          r"cached `target_log_prob`.*-1.5 in the results, -3 now"),
    clear("moment run continued on another target",
          _moments_continued_on_other_target, "previous_kernel_results",
          r"cached `energy`.*bootstrap_results"),
    clear("checkpoint of a chain at another temperature",
          _checkpoint_of_other_temperature, "kernel_results",
          r"\.inner_results.*cached `energy`.*temperature"),
    clear("transformed AMAGOLD results checked against another density",
          _transformed_results_on_other_density, "kernel_results",
          r"\.inner_results.*1.5 in the results, -0 now"),
    correct("AMAGOLD checkpoint resumed on a rebuilt identical target",
            amagold_resumed_on_rebuilt_target),
    correct("results with another step size continue with theirs, reported",
            step_size_of_results_used_and_reported),
    correct("step-size adaptation sets the step size through the results",
            adaptation_changes_step_size_silently),
    correct("step size changed in kernel and results together",
            step_size_changed_with_the_results),
    clear("results given a negative step size", lambda: sg.with_step_size(
        steps(sg.SGLD(noisy(), 0.1), tf.ones([D]))[1], -0.1), "step_size",
          r"-0.1"),
    # Runs.
    clear("negative burn-in", lambda: sg.sample_moments(
        sg.SGLD(noisy(), 0.1), tf.zeros([D]), 5, seed=[1, 2],
        num_burnin_steps=-1), "num_burnin_steps", r"got -1"),
    clear("fractional number of steps", lambda: sg.sample_moments(
        sg.SGLD(noisy(), 0.1), tf.zeros([D]), 2.5, seed=[1, 2]),
          "num_steps", r"got 2.5"),
    clear("moments of a target instead of a kernel", lambda: sg.sample_moments(
        noisy(), tf.zeros([D]), 5, seed=[1, 2]), "kernel",
          r"NoisyGradientTarget"),
    clear("infinite initial state in a compiled moment run", _nan_moments,
          "current_state", r"non-finite"),
    clear("progress run without results", lambda:
          sg.sample_chain_with_progress(0, tf.zeros([D]), sg.SGLD(
              noisy(), 0.1), seed=[1, 2]), "num_results", r"got 0"),
    clear("negative thinning", lambda: sg.sample_chain_with_progress(
        5, tf.zeros([D]), sg.SGLD(noisy(), 0.1), seed=[1, 2],
        num_steps_between_results=-2), "num_steps_between_results",
          r"got -2"),
    correct("moments of a single step", one_step_moments),
    # Checkpoints.
    clear("checkpoint path that is a number", lambda: sg.save_chain(
        123, tf.zeros([D]), ()), "path", r"int"),
    clear("missing checkpoint", lambda: sg.load_chain(
        "/nonexistent/c.npz", ()), "path", r"no such checkpoint"),
    clear("truncated checkpoint", _bad_zip, "path", r"truncated or corrupt"),
    clear("text file as checkpoint", _text_file, "path", r"not a complete"),
    clear("checkpoint of 3 parameters into a template of 5",
          _wrong_parameter_count, "state_template", r"shape \[2, 3\].*\[2, 5\]"),
    clear("step seed as a string", lambda: sg.StepSeeded(
        sg.SGLD(noisy(), 0.1), seed="1,2"), "seed", r"'1,2'"),
    clear("step-seeded target", lambda: sg.StepSeeded(noisy(), [1, 2]),
          "inner_kernel", r"NoisyGradientTarget"),
    correct("save and load through pathlib, exactly", pathlib_round_trip),
    correct("stale temporary removed by the next save",
            stale_temporary_removed),
    # Schedules, diagnostics, optimisation.
    clear("polynomial decay scale as a string", lambda: sg.PolynomialDecay(
        "0.1"), "a", r"'0.1'"),
    clear("cyclical schedule over 10.5 steps", lambda: sg.CyclicalSchedule(
        0.1, 10.5, 2), "num_steps", r"10.5"),
    clear("cyclical schedule with negative step", lambda: sg.CyclicalSchedule(
        -0.1, 10, 2), "initial_step_size", r"-0.1"),
    clear("weighted mean with one step size too few",
          lambda: sg.step_size_weighted_mean(tf.zeros([10, 2]),
                                             tf.ones([9])), "step_sizes",
          r"\[9\].*10 draws"),
    clear("summary of a single draw", lambda: sg.summarize(
        tf.zeros([1, 2, D]), print_report=False), "samples", r"\[1, 2, 3\]"),
    clear("summary with the trace of another run", lambda: sg.summarize(
        tf.zeros([10, 2, D]), steps(sg.SGLD(noisy(), 0.1), tf.zeros([2, D]))[
            1]._replace(diverged=tf.zeros([4, 2], tf.bool)),
        print_report=False), "trace", r"\[4, 2\].*10 draws"),
    clear("mode search with zero steps", lambda: sg.find_mode(
        noisy(), tf.zeros([D]), num_steps=0), "num_steps", r"got 0"),
    clear("mode search from a NaN start", lambda: sg.find_mode(
        noisy(), tf.constant([np.nan, 0., 0.])), "current_state",
          r"non-finite"),
    clear("full-batch mode search without an exact energy",
          lambda: sg.find_mode(sg.DatasetTarget(ll, batches(), 40),
                               tf.zeros([D]), full_batch=True),
          "full_batch", r"DatasetTarget"),
    correct("mode of a shifted quadratic", find_mode_of_quadratic),
]

NAMES = [c.name for c in CATALOGUE]
assert len(set(NAMES)) == len(NAMES)


def classify(case, tmp_path):
  """The outcome that actually happens: clear / correct / unclear / silent,
  with a description."""
  call = case.call
  args = ((tmp_path,) if call.__code__.co_argcount == 1 and
          call.__code__.co_varnames[:1] == ("tmp_path",) else ())
  try:
    result = call(*args)
  except (ValueError, TypeError, FileNotFoundError) as e:
    message = str(e)
    named = (case.arg is not None and
             (not case.arg or f"`{case.arg}`" in message))
    if case.outcome == "clear" and named and re.search(
        case.pattern, message, re.S):
      return "clear", message
    return "unclear", f"{type(e).__name__}: {message}"
  except AssertionError as e:  # A "correct" case whose result is wrong.
    return "silent", f"wrong result: {e}"
  except Exception as e:  # pylint: disable=broad-except
    return "unclear", f"{type(e).__name__}: {e}"
  del result
  return ("correct", "") if case.outcome == "correct" else (
      "silent", "accepted without an error")


@pytest.mark.parametrize("case", CATALOGUE, ids=NAMES)
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"


def test_catalogue_outcome_counts():
  counts = collections.Counter(c.outcome for c in CATALOGUE)
  print(dict(counts))
  assert len(CATALOGUE) >= 60
  assert counts["silent"] == 0
  assert counts["unclear"] <= 3


def _energy_calls(make_kernel, trust_all, monkeypatch, n=4):
  """Calls of the user's energy over an eager run of n steps."""
  from tfp_sgmcmc.kernels import _common  # pylint: disable=g-import-not-at-top
  if trust_all:  # As if no results were ever checked.
    monkeypatch.setattr(_common._ResultsGuard, "known",  # pylint: disable=protected-access
                        lambda self, values, parts: (True, None))
  calls = [0]

  def counted(x):
    calls[0] += 1
    return quadratic(x)
  kernel = make_kernel(counted)
  state = tf.ones([2, D])
  results = kernel.bootstrap_results(state)
  calls[0] = 0
  for i in range(n):
    state, results = kernel.one_step(state, results, seed=[i, 5])
  monkeypatch.undo()
  return calls[0]


@pytest.mark.parametrize("make_kernel", [
    lambda fn: sg.AMAGOLD(sg.NoisyGradientTarget(
        fn, gradient_noise_variance=1.), 0.1, 2, 0.5),
    lambda fn: __import__("tensorflow_probability").mcmc.MetropolisHastings(
        sg.SGLD(target_log_prob_fn=lambda x: -fn(x), step_size=0.1)),
], ids=["AMAGOLD", "MH(full-batch SGLD)"])
def test_own_results_are_not_checked_again(make_kernel, monkeypatch):
  # The check of cached values runs once per results a kernel did not make:
  # a kernel's own results (chosen per chain by MetropolisHastings too) cost
  # no extra energy evaluation per step.
  assert (_energy_calls(make_kernel, False, monkeypatch) ==
          _energy_calls(make_kernel, True, monkeypatch))
