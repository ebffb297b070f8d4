"""Bad input gets a clear, early error; divergence is reported, not hidden."""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import sample


def quadratic(x):
  return 0.5 * tf.reduce_sum(x ** 2, -1)


@pytest.fixture
def target():
  return sg.NoisyGradientTarget(quadratic, gradient_noise_variance=1.)


def data_target(batch_size=4, n=10):
  x = np.zeros((n, 2), np.float32)
  return sg.InMemoryTarget(
      lambda w, b: -0.5 * tf.reduce_sum((b - w[..., None, :]) ** 2, -1),
      x, batch_size)


@pytest.mark.parametrize("step_size", [0., -0.1, float("nan")])
def test_non_positive_step_size(target, step_size):
  with pytest.raises(ValueError, match=r"`step_size` must be > 0.*got"):
    sg.SGLD(target, step_size)
  with pytest.raises(ValueError, match=r"`step_size` must be > 0"):
    sg.SGHMC(target, step_size, friction=1.)


@pytest.mark.parametrize("friction", [0., -1.])
def test_non_positive_friction(target, friction):
  with pytest.raises(ValueError, match=r"`friction` must be > 0.*got"):
    sg.SGHMC(target, 0.1, friction=friction)


def test_friction_smaller_than_noise_estimate(target):
  with pytest.raises(ValueError, match=r"`friction` C = 0.5 must be >= "
                     r"`noise_estimate` B-hat = 1.0"):
    sg.SGHMC(target, 0.1, friction=0.5, noise_estimate=1.0)


def test_other_bad_kernel_arguments(target):
  with pytest.raises(ValueError, match="`integrator` must be one of"):
    sg.SGHMC(target, 0.1, 1., integrator="rk4")
  with pytest.raises(ValueError, match="`noise_estimate` must be"):
    sg.SGHMC(target, 0.1, 1., noise_estimate="fisher")
  with pytest.raises(ValueError, match="`momentum_resampling_period`"):
    sg.SGHMC(target, 0.1, 1., momentum_resampling_period=0)
  with pytest.raises(ValueError, match="`temperature` must be > 0"):
    sg.SGLD(target, 0.1, temperature=0.)
  with pytest.raises(TypeError, match="`target` must be a tfp_sgmcmc target"):
    sg.SGLD(quadratic, 0.1)
  with pytest.raises(ValueError, match="PolynomialDecay `gamma`"):
    sg.PolynomialDecay(a=0.1, gamma=-1.)


@pytest.mark.parametrize("batch_size", [0, -3, 11])
def test_batch_size_out_of_range(batch_size):
  with pytest.raises(ValueError, match=r"`batch_size` must be between 1 and "
                     rf"N = 10.*got {batch_size}"):
    data_target(batch_size=batch_size)


def test_non_integer_batch_size():
  with pytest.raises(TypeError, match="`batch_size` must be an integer"):
    data_target(batch_size=2.5)


def test_data_parts_of_different_lengths():
  with pytest.raises(ValueError, match=r"different lengths \[10, 9\]"):
    sg.InMemoryTarget(lambda w, b: b[0][:, 0],
                      (np.zeros((10, 2)), np.zeros(9)), batch_size=2)


def test_empty_data():
  with pytest.raises(ValueError, match="empty"):
    sg.InMemoryTarget(lambda w, b: b[:, 0], np.zeros((0, 2)), batch_size=1)


def test_log_likelihood_that_sums_over_the_batch():
  target = sg.InMemoryTarget(lambda w, b: tf.reduce_sum(b - w),
                             np.zeros((10, 1), np.float32), batch_size=4)
  kernel = sg.SGLD(target, 0.1)
  with pytest.raises(ValueError, match=r"one log-likelihood per example.*"
                     r"returned shape \(\)"):
    kernel.bootstrap_results(tf.zeros([1]))


def test_log_likelihood_with_wrong_number_of_values():
  target = sg.InMemoryTarget(lambda w, b: tf.zeros([3]),
                             np.zeros((10, 1), np.float32), batch_size=4)
  with pytest.raises(ValueError, match=r"batch_shape \+ \[5\].*shape \(3,\).*probe batch of 5"):
    sg.SGLD(target, 0.1).bootstrap_results(tf.zeros([1]))


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


def test_per_example_noise_estimate_needs_two_examples():
  kernel = sg.SGHMC(data_target(batch_size=1), 0.1, 1.,
                    noise_estimate="empirical_fisher")
  state = tf.zeros([2])
  results = kernel.bootstrap_results(state)
  with pytest.raises(ValueError, match="`batch_size` >= 2; got 1"):
    kernel.one_step(state, results, seed=[1, 2])


def test_noise_estimate_unavailable_for_streamed_target_without_grads():
  # NoisyGradientTarget knows V; a target that cannot estimate it says so.
  class NoNoise(sg.NoisyGradientTarget):
    def gradient_noise_variance(self, state, seed):
      return sg.MinibatchTarget.gradient_noise_variance(self, state, seed)
  kernel = sg.SGHMC(NoNoise(quadratic, gradient_noise_variance=1.), 0.1, 1.,
                    noise_estimate="empirical_fisher")
  state = tf.zeros([2])
  with pytest.raises(sg.TargetCapabilityError, match="cannot estimate"):
    kernel.one_step(state, kernel.bootstrap_results(state), seed=[1, 2])


def test_diverging_chain_is_flagged_and_frozen_at_its_last_finite_state():
  # U = x^4 / 4 is stiff far out: from x = 20 a step of 0.2 overshoots
  # further each step until float32 overflows. Chain 1 starts in the well,
  # where h * sqrt(U'') < 2, and must not diverge.
  target = sg.NoisyGradientTarget(
      lambda x: tf.reduce_sum(0.25 * x ** 4, -1), gradient_noise_variance=0.)
  kernel = sg.SGHMC(target, step_size=0.2, friction=0.1)
  draws, diverged = sample(kernel, tf.constant([[20.], [0.]]), 200,
                           seed=[1, 2], trace_fn=lambda _, r: r.diverged)
  draws, diverged = np.asarray(draws), np.asarray(diverged)
  assert diverged[-1, 0] and not diverged[:, 1].any()
  assert np.all(np.isfinite(draws))
  first = np.argmax(diverged[:, 0])
  # Once diverged the chain stays flagged and stays put.
  assert diverged[first:, 0].all()
  assert np.all(draws[first:, 0] == draws[first, 0])


# --- compute_energy=False (issue 19, third round) ----------------------------

_ENERGY_FREE_KERNELS = {
    "SGLD": lambda t, **kw: sg.SGLD(t, 0.1, **kw),
    "SGHMC": lambda t, **kw: sg.SGHMC(t, 0.1, friction=1., **kw),
    "PreconditionedSGLD": lambda t, **kw: sg.PreconditionedSGLD(t, 0.1, **kw),
    "SGNHT": lambda t, **kw: sg.SGNHT(t, 0.1, **kw),
    "SGBD": lambda t, **kw: sg.SGBD(t, 0.5, variant="extreme", **kw),
}


_WITH_COMPUTE_ENERGY = dict(
    _ENERGY_FREE_KERNELS,
    AMAGOLD=lambda t, **kw: sg.AMAGOLD(t, 0.1, num_leapfrog_steps=2,
                                       friction=0.5, **kw))


@pytest.mark.parametrize("name", sorted(_WITH_COMPUTE_ENERGY))
def test_compute_energy_must_be_a_python_bool_and_minibatch_only(target,
                                                                  name):
  make = _WITH_COMPUTE_ENERGY[name]
  for bad in ("no", 0, None, np.bool_(False), tf.constant(False)):
    with pytest.raises(TypeError, match=r"`compute_energy` must be a Python "
                       r"bool \(True or False\); got .* of type"):
      make(target, compute_energy=bad)
  # A full-batch target needs its exact log density: refused, not ignored.
  with pytest.raises(ValueError, match=r"`compute_energy=False`.*full-batch "
                     r"target.*Drop `compute_energy=False`"):
    make(None, target_log_prob_fn=lambda x: -quadratic(x),
         compute_energy=False)
  full = sg.InMemoryTarget(lambda w, b: -0.5 * tf.reduce_sum(
      (b - w[..., None, :]) ** 2, -1), np.zeros((10, 2), np.float32),
                           full_batch=True)
  with pytest.raises(ValueError, match="full-batch target"):
    make(full, compute_energy=False)
  make(full, compute_energy=True)  # The default is accepted everywhere.


@pytest.mark.parametrize("name", sorted(_ENERGY_FREE_KERNELS))
def test_diverging_chain_is_flagged_without_the_energy(name):
  # U = -10 x, finite everywhere, with a NaN gradient from x = 3 on: every
  # kernel climbs from x = 0 and meets the NaN gradient; a chain at -1000
  # cannot reach it in 60 steps. With compute_energy=False the flag reads the
  # gradient (SGBD's move stays finite with a NaN gradient: without that
  # check its chain 0 is not flagged and this test fails).
  @tf.custom_gradient
  def energy_nan_gradient(x):
    def gradient(upstream):
      return upstream[..., None] * tf.where(
          x < 3., tf.fill(tf.shape(x), -10.), tf.fill(tf.shape(x), np.nan))
    return -10. * x[..., 0], gradient
  target = sg.NoisyGradientTarget(energy_nan_gradient,
                                  gradient_noise_variance=0.)
  kernel = _ENERGY_FREE_KERNELS[name](target, compute_energy=False)
  draws, (diverged, reported) = sample(
      kernel, tf.constant([[0.], [-1000.]]), 60, seed=[1, 2],
      trace_fn=lambda _, r: (r.diverged, r.energy))
  draws, diverged = np.asarray(draws), np.asarray(diverged)
  assert np.all(np.isnan(reported))
  assert diverged[-1, 0] and not diverged[:, 1].any()
  assert np.all(np.isfinite(draws))
  first = np.argmax(diverged[:, 0])
  assert diverged[first:, 0].all()
  assert np.all(draws[first:, 0] == draws[first, 0])
  assert draws[first, 0, 0] >= 3.  # The state whose gradient was NaN.
