"""Kernel results that belong to another kernel, dtype or number of chains
are refused by one_step when it is traced (eagerly, in a graph and under XLA
alike); results of another state, target, density or temperature are
refused by check_kernel_results (and sample_moments, which calls it) with
the cached value that disagrees and the fix (bootstrap_results). Results
from a rebuilt identical target, and step sizes set through the results
(TFP's adaptation, with_step_size), are accepted and continue the right
chain.
"""

import os
import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.internal import unnest

import tfp_sgmcmc as sg
from support.bad_inputs import D, X, Y, classify, clear, correct, mem, noisy
from support.bad_inputs import prior, quadratic, steps


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


def kernel_step_size_used_and_reported():
  # A chain resumed by kernel.copy(step_size=new) from old results steps
  # with `new`, eagerly and in a compiled run alike (as TFP's HMC outside an
  # adaptation kernel); check_kernel_results warns that the results' value
  # is not used, and one_step itself says nothing in any mode.
  import warnings  # pylint: disable=g-import-not-at-top
  kernel = sg.SGLD(noisy(), 0.1)
  state, results = steps(kernel, tf.ones([D]))
  new = kernel.copy(step_size=0.02)
  with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    got, r = new.one_step(state, results, seed=[7, 3])
  assert not [w for w in seen if issubclass(
      w.category, sg.StepSizeFromResultsWarning)]
  with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    sg.check_kernel_results(new, state, results)
  assert [w for w in seen if issubclass(
      w.category, sg.StepSizeFromResultsWarning) and
          "0.02" in str(w.message) and "kernel's value" in str(w.message)]
  expected, _ = new.one_step(state, sg.with_step_size(results, 0.02),
                             seed=[7, 3])
  np.testing.assert_array_equal(got, expected)
  old, _ = kernel.one_step(state, results, seed=[7, 3])
  assert not np.array_equal(got, old)
  for jit in (False, True):
    compiled = tf.function(lambda s, r: new.one_step(s, r, seed=[7, 3]),
                           jit_compile=jit, autograph=False)
    got, _ = compiled(state, results)
    expected, _ = compiled(state, sg.with_step_size(results, 0.02))
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


def _continued(kernel, state, results):
  # What a user does before continuing a chain from results they did not
  # get from this kernel's last step.
  sg.check_kernel_results(kernel, state, results, "previous_kernel_results")
  return kernel.one_step(state, results, seed=[1, 2])


def _amagold_on_other_target():
  state = tf.zeros([2, D])
  results = amagold(noisy()).bootstrap_results(state)
  return _continued(amagold(shifted()), state, results)


def _barker_on_other_data():
  state = tf.zeros([D])
  results = sg.AmortizedBarker(mem(), 0.1, 2).bootstrap_results(state)
  other = mem(data=(X, Y + 1.))
  return _continued(sg.AmortizedBarker(other, 0.1, 2), state, results)


def _amagold_results_of_another_state():
  kernel = amagold(noisy())
  results = kernel.bootstrap_results(tf.zeros([D]))
  return _continued(kernel, tf.ones([D]), results)


def _mala_on_other_density():
  sgld = lambda fn: sg.SGLD(target_log_prob_fn=fn, step_size=0.1)
  state = tf.ones([2, D])
  results = sgld(lambda x: -quadratic(x)).bootstrap_results(state)
  return _continued(sgld(lambda x: -2. * quadratic(x)), state, results)


def foreign_results_step_alike_in_every_mode():
  # one_step checks what it sees when traced (type, dtype, chains), nothing
  # that needs the values: results of the right type from another target
  # are stepped with, eagerly, in a graph and under XLA alike (the values
  # are check_kernel_results' job, before a run).
  state = tf.zeros([2, D])
  results = amagold(noisy()).bootstrap_results(state)
  kernel = amagold(shifted())
  eager, _ = kernel.one_step(state, results, seed=[1, 2])
  for jit in (False, True):
    compiled = tf.function(lambda s, r: kernel.one_step(s, r, seed=[1, 2]),
                           jit_compile=jit, autograph=False)
    np.testing.assert_allclose(compiled(state, results)[0], eager,
                               rtol=1e-5)


def _moments_continued_on_other_target():
  state = tf.zeros([2, D])
  first = sg.sample_moments(amagold(noisy()), state, 3, seed=[1, 2])
  return sg.sample_moments(amagold(shifted()), first.final_state, 3,
                           seed=[3, 4],
                           previous_kernel_results=first.final_kernel_results)


def _forked(kernel_seed):
  """A StepSeeded SGLD chain of seed [3, 4] continued, by sample_moments,
  with a StepSeeded kernel of `kernel_seed`."""
  first = sg.sample_moments(sg.StepSeeded(sg.SGLD(noisy(), 0.1), [3, 4]),
                            tf.zeros([2, D]), 3, seed=[0, 0],
                            jit_compile=False)
  return sg.sample_moments(
      sg.StepSeeded(sg.SGLD(noisy(), 0.1), kernel_seed), first.final_state,
      3, seed=[0, 0], previous_kernel_results=first.final_kernel_results,
      jit_compile=False)


def step_seeded_chain_continued_with_its_seed():
  # Its seed and the results' agree: continued silently, bit for bit.
  kernel = sg.StepSeeded(sg.SGLD(noisy(), 0.1), [3, 4])
  with warnings.catch_warnings():
    warnings.simplefilter("error", UserWarning)
    second = _forked([3, 4])
  whole = sg.sample_moments(kernel, tf.zeros([2, D]), 6, seed=[0, 0],
                            jit_compile=False)
  np.testing.assert_array_equal(second.final_state, whole.final_state)


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


def _results_of_other_kernel():
  sgld = sg.SGLD(noisy(), 0.1)
  return sg.SGHMC(noisy(), 0.1, 1.).one_step(
      tf.ones([D]), sgld.bootstrap_results(tf.ones([D])), seed=[1, 2])


def _float64_state_float32_results():
  kernel = sg.SGLD(noisy(), 0.1)
  return kernel.one_step(tf.ones([D], tf.float64),
                         kernel.bootstrap_results(tf.ones([D])), seed=[1, 2])


def _naive_sghmc_results_into_sghmc():
  # The same fields: only the type says that they come from NaiveSGHMC.
  state = tf.ones([D])
  naive = sg.NaiveSGHMC(noisy(), 0.1)
  return sg.SGHMC(noisy(), 0.1, 1.).one_step(
      state, naive.bootstrap_results(state), seed=[1, 2])


def _sghmc_results_into_naive_sghmc():
  state = tf.ones([D])
  return sg.NaiveSGHMC(noisy(), 0.1).one_step(
      state, sg.SGHMC(noisy(), 0.1, 1.).bootstrap_results(state),
      seed=[1, 2])


def _more_chains_than_results():
  kernel = sg.SGNHT(noisy(), 0.1)
  return kernel.one_step(tf.ones([5, D]),
                         kernel.bootstrap_results(tf.ones([2, D])),
                         seed=[1, 2])


OUTCOMES = [
    clear("results of another kernel", _results_of_other_kernel,
          "previous_kernel_results", r"SGLDResults, not SGHMCResults"),
    clear("NaiveSGHMC's results continued by SGHMC",
          _naive_sghmc_results_into_sghmc, "previous_kernel_results",
          r"SGHMC\.one_step are NaiveSGHMCResults, not SGHMCResults"),
    clear("SGHMC's results continued by NaiveSGHMC",
          _sghmc_results_into_naive_sghmc, "previous_kernel_results",
          r"NaiveSGHMC\.one_step are SGHMCResults, not NaiveSGHMCResults"),
    clear("float64 state with float32 results",
          _float64_state_float32_results, "current_state",
          r"float64.*float32"),
    clear("5 chains continued with results for 2",
          _more_chains_than_results, "previous_kernel_results",
          r"\[5, 3\].*\[2\]"),
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
    # The results' seed picks the noise: every new kernel seed gave the
    # same continuation.
    clear("StepSeeded chain continued by a kernel of another seed",
          lambda: _forked([9, 9]), "previous_kernel_results",
          r"seed \[3, 4\].*seed \[9, 9\] would be ignored"),
    correct("StepSeeded chain continued by a kernel of its seed",
            step_seeded_chain_continued_with_its_seed),
    clear("checkpoint of a chain at another temperature",
          _checkpoint_of_other_temperature, "kernel_results",
          r"\.inner_results.*cached `energy`.*temperature"),
    clear("transformed AMAGOLD results checked against another density",
          _transformed_results_on_other_density, "kernel_results",
          r"\.inner_results.*1.5 in the results, -0 now"),
    correct("results of another target: one_step alike in every mode",
            foreign_results_step_alike_in_every_mode),
    correct("AMAGOLD checkpoint resumed on a rebuilt identical target",
            amagold_resumed_on_rebuilt_target),
    correct("a kernel resumed with a new step size uses it, compiled too",
            kernel_step_size_used_and_reported),
    correct("step-size adaptation sets the step size through the results",
            adaptation_changes_step_size_silently),
    correct("step size changed in kernel and results together",
            step_size_changed_with_the_results),
    clear("results given a negative step size", lambda: sg.with_step_size(
        steps(sg.SGLD(noisy(), 0.1), tf.ones([D]))[1], -0.1), "step_size",
          r"-0.1"),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"


@pytest.mark.parametrize("name", ["SGHMC", "AMAGOLD"])
def test_a_mass_in_the_results_that_the_kernel_ignores_is_warned(name):
  # TFP's convention: a kernel outside an adaptation kernel steps with its
  # own momentum distribution. Results of a DiagonalMassMatrixAdaptation
  # run continued by the kernel built without the mass lose the adapted
  # mass: check_kernel_results (and sample_moments) says so with the
  # numbers; built with the adapted distribution, it does not.
  scales = np.array([0.1, 3.], np.float32)
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x / scales) ** 2, -1),
      gradient_noise_variance=0.)
  make = {"SGHMC": lambda **kw: sg.SGHMC(target, 0.01, friction=1., **kw),
          "AMAGOLD": lambda **kw: sg.AMAGOLD(target, 0.01, 3, 0.5, **kw)}[
              name]
  state = tf.constant([[0.1, 3.], [-0.1, -3.]])
  adapted = tfp.experimental.mcmc.DiagonalMassMatrixAdaptation(
      make(), tfp.experimental.stats.RunningVariance.from_shape([2]),
      num_estimation_steps=3)
  state, results = steps(adapted, state, n=4)
  inner = results.inner_results
  mass = unnest.get_innermost(inner, "momentum_distribution")

  def mass_warnings(kernel, given):
    with warnings.catch_warnings(record=True) as seen:
      warnings.simplefilter("always")
      sg.check_kernel_results(kernel, state, given)
    return [str(w.message) for w in seen
            if issubclass(w.category, sg.MassFromResultsWarning)]

  [message] = mass_warnings(make(), inner)
  inverse_mass = np.asarray(
      sg.dynamics.hamiltonian.velocity(tf.ones([2, 2]), mass))[0]
  assert f"{inverse_mass[1]:.6f}" in message and "1., 1." in message
  assert "kernel.copy(momentum_distribution=" in message
  assert not mass_warnings(make(momentum_distribution=mass), inner)
  assert not mass_warnings(make(store_parameters_in_results=True), inner)
  assert not mass_warnings(adapted, results)
  # The identity kept in the results (a kernel that stores its parameters)
  # is the bare kernel's identity: nothing to warn about.
  stored = make(store_parameters_in_results=True)
  assert not mass_warnings(make(), stored.bootstrap_results(state))


@pytest.mark.parametrize("adaptation", [
    tfp.mcmc.SimpleStepSizeAdaptation,
    tfp.mcmc.DualAveragingStepSizeAdaptation])
def test_with_step_size_sets_the_step_size_tfps_adaptation_steps_with(
    adaptation):
  # TFP's adaptation kernels step with their own `new_step_size` and set
  # it on the inner results each step: results given a new step size by
  # with_step_size after the adaptation continued with the adapted one
  # (0.59 and 0.37 here, for 0.05) unless that field is set too.
  kernel = adaptation(amagold(noisy(), 0.3), num_adaptation_steps=3)
  state, results = steps(kernel, tf.zeros([2, D]), n=5)
  results = sg.with_step_size(results, 0.05)
  used = []
  for i in range(2):
    state, results = kernel.one_step(state, results, seed=[i, 9])
    used.append(float(unnest.get_innermost(results, "step_size")))
  np.testing.assert_allclose(used, 0.05, rtol=1e-6)
