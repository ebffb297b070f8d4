"""The state a chain starts from is checked before any step: integer dtypes,
a structure or trailing shape that does not match the target, non-finite
values (an error eagerly and in graphs; under XLA, where assertions are
dropped, the chain is flagged diverged at its first step), Python floats
in place of tensors. A NumPy state is accepted and is the same chain.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.bad_inputs import D, boot, bootstrap, classify, clear, correct
from support.bad_inputs import data, location_ll, noisy, quadratic, steps


@pytest.fixture
def target():
  return sg.NoisyGradientTarget(quadratic, gradient_noise_variance=1.)


def test_integer_state(target):
  with pytest.raises(TypeError, match="dtype int32; expected a floating"):
    sg.SGLD(target, 0.1).bootstrap_results(tf.zeros([2], tf.int32))
  with pytest.raises(TypeError, match="expected a floating"):
    tf.nest.map_structure(
        lambda x: x, sg.SGHMC(target, 0.1, 1.).bootstrap_results(
            [tf.zeros([2]), tf.zeros([2], tf.int64)]))


def test_state_structure_that_does_not_match_the_target():
  def log_likelihood(params, batch):
    w, b = params  # Expects a list of two parts.
    # (With 4 chains, `batch - w` would broadcast only when n == 4, a
    # coincidence that the bootstrap's probe batch now catches.)
    return -0.5 * tf.reduce_sum((batch - w[..., None, :]) ** 2, -1) + b

  x = np.zeros((10, 2), np.float32)
  # Without declared shapes the user function's own failure is reported
  # with the state's structure.
  target = sg.InMemoryTarget(log_likelihood, x, batch_size=4)
  with pytest.raises(ValueError, match=r"float32\[3\].*does the state "
                     r"structure"):
    sg.SGLD(target, 0.1).bootstrap_results(tf.zeros([3]))
  # With declared parameter shapes a mismatch is caught before any call.
  target = sg.InMemoryTarget(log_likelihood, x, batch_size=4,
                             parameter_shapes=[[2], [1]])
  with pytest.raises(ValueError, match=r"`current_state` must be a list of "
                     r"2 tensors with trailing shapes \[\[2\], \[1\]\]"):
    sg.SGLD(target, 0.1).bootstrap_results(tf.zeros([2]))
  with pytest.raises(ValueError, match=r"part 1 has shape \(4, 2\)"):
    sg.SGLD(target, 0.1).bootstrap_results([tf.zeros([4, 2]),
                                            tf.zeros([4, 2])])
  sg.SGLD(target, 0.1).bootstrap_results([tf.zeros([4, 2]), tf.zeros([4, 1])])


def test_non_finite_initial_state(target):
  with pytest.raises(ValueError, match="non-finite values"):
    sg.SGLD(target, 0.1).bootstrap_results(tf.constant([0., np.nan]))


def test_non_finite_initial_state_is_caught_under_tf_function():
  kernel = sg.SGLD(sg.NoisyGradientTarget(quadratic, 1.), 0.1)

  @tf.function(autograph=False)
  def run(init):
    return tfp.mcmc.sample_chain(3, init, kernel=kernel, trace_fn=None,
                                 seed=[1, 2])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="`current_state` part 0 has non-finite"):
    run(tf.constant([0., np.nan]))
  # XLA cannot run assertions (none is built there): the chain is flagged diverged at its
  # first step instead, and stays where it started.

  @tf.function(jit_compile=True, autograph=False)
  def run_xla(init):
    return tfp.mcmc.sample_chain(3, init, kernel=kernel,
                                 trace_fn=lambda _, r: r.diverged,
                                 seed=[1, 2])
  states, diverged = run_xla(tf.constant([[0., np.nan], [0., 0.]]))
  assert np.all(np.asarray(diverged)[:, 0])
  assert not np.any(np.asarray(diverged)[:, 1])
  # The flag is in the initial results already, so a run that only
  # bootstraps (or reads the results before a step) sees it, for every
  # kernel (AMAGOLD's inside its accepted results).
  for k in (kernel, sg.AMAGOLD(sg.NoisyGradientTarget(quadratic, 1.), 0.1,
                               2, 1.)):
    boot_xla = tf.function(
        lambda init, k=k: sg.diagnostics.find_field(
            k.bootstrap_results(init), "diverged"),
        jit_compile=True, autograph=False)
    np.testing.assert_array_equal(
        boot_xla(tf.constant([[0., np.nan], [0., 0.]])), [True, False])


CLEAR_MESSAGES = [
    ("non-finite initial state in float64", bootstrap(
        sg.SGHMC(noisy(), 0.1, 1.), tf.constant([np.inf], tf.float64)),
     ValueError, r"part 0 has non-finite values"),
    ("state of the wrong trailing shape", bootstrap(
        sg.SGLD(sg.InMemoryTarget(location_ll, data(), 2,
                                  parameter_shapes=[2]), 0.1),
        tf.zeros([3])), ValueError,
     r"part 0 has shape \(3,\); expected trailing shape \[2\]"),
]


@pytest.mark.parametrize("case,call,error,pattern", CLEAR_MESSAGES,
                         ids=[c[0] for c in CLEAR_MESSAGES])
def test_bad_input_fails_early_with_a_clear_message(case, call, error,
                                                    pattern):
  del case
  with pytest.raises(error, match=pattern):
    call()


def same_as_tensor_state():
  kernel = sg.SGLD(noisy(), 0.1)
  a, _ = steps(kernel, tf.ones([2, D]))
  results = kernel.bootstrap_results(tf.ones([2, D]))
  b, _ = kernel.one_step(np.ones([2, D], np.float32), results, seed=[0, 3])
  b, _ = kernel.one_step(b, _, seed=[1, 3])
  np.testing.assert_array_equal(a, b)


def numpy_state_everywhere():
  # A numpy state (float32 or float64) to bootstrap_results and one_step of
  # every kernel, AMAGOLD's M-H wrapper included, is the tensor state's
  # chain.
  make = [lambda: sg.SGLD(noisy(), 0.1),
          lambda: sg.SGHMC(noisy(), 0.1, 1.),
          lambda: sg.SGNHT(noisy(), 0.1),
          lambda: sg.PreconditionedSGLD(noisy(), 0.1),
          lambda: sg.SGBD(noisy(), 0.1),
          lambda: sg.SGNUTS(noisy(), 0.1, 1.),
          lambda: sg.AMAGOLD(noisy(), 0.1, 2, 1.)]
  for kernel in (m() for m in make):
    for dtype in (np.float32, np.float64):
      x = np.ones([2, D], dtype)
      expected, _ = kernel.one_step(
          tf.constant(x), kernel.bootstrap_results(tf.constant(x)),
          seed=[1, 2])
      got, _ = kernel.one_step(x, kernel.bootstrap_results(x), seed=[1, 2])
      np.testing.assert_array_equal(got, expected)


OUTCOMES = [
    correct("numpy state to bootstrap_results and one_step of every kernel",
            numpy_state_everywhere),
    clear("initial state as a tuple of Python floats to one_step",
          lambda: sg.AMAGOLD(noisy(), 0.1, 2, 1.).one_step(
              (0., 0.), None, seed=[1, 2]), "current_state",
          r"float, not a tensor"),
    clear("initial state as a list of Python floats", lambda: boot(sg.SGLD(
        noisy(), 0.1), [0., 0.]), "current_state", r"float, not a tensor"),
    correct("numpy state to one_step", same_as_tensor_state),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"
