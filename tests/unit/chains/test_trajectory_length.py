"""ChEES's trajectory-length rule (`tfp_sgmcmc.chains.trajectory_length`)
against values worked out by hand, and `warm_up(adapt_num_leapfrog_steps=
True)` returning a kernel of one fixed integer T."""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import trajectory_length as length_lib

# Two chains in 2-d: previous states with mean (1, 1), proposals accepted
# with probabilities 1 and 1/2 (their weighted mean (5/3, 4/3)), velocities.
PREVIOUS = [tf.constant([[0., 0.], [2., 2.]], tf.float64)]
PROPOSED = [tf.constant([[1., 0.], [3., 4.]], tf.float64)]
VELOCITY = [tf.constant([[1., 1.], [0., -1.]], tf.float64)]
ACCEPT = tf.constant([1., 0.5], tf.float64)


def test_chees_is_the_change_of_the_centred_square_worked_by_hand():
  # Centred squares: previous 2 and 2; proposals (-2/3, -4/3) -> 20/9 and
  # (4/3, 8/3) -> 80/9; changes 2/9 and 62/9; 1/4 of their squares.
  chees = length_lib.chees(PREVIOUS, PROPOSED, ACCEPT, 1).numpy()
  np.testing.assert_allclose(chees, [1. / 81., 961. / 81.], rtol=1e-12)


def test_chees_gradient_is_the_change_times_the_outward_speed_by_hand():
  # Outward speeds (theta' - E theta')^T v': -2/3 - 4/3 = -2 and
  # 0 - 8/3; times the changes 2/9 and 62/9.
  grad = length_lib.chees_gradient(PREVIOUS, PROPOSED, VELOCITY, ACCEPT,
                                   1).numpy()
  np.testing.assert_allclose(grad, [-4. / 9., -496. / 27.], rtol=1e-12)


def test_halton_jitters_spread_over_the_unit_interval():
  values = [float(length_lib.halton(i)) for i in range(7)]
  assert values == [0.5, 0.25, 0.75, 0.125, 0.625, 0.375, 0.875]


def test_first_update_is_an_adam_step_of_the_learning_rate():
  # 1-d chains at -1, 1 proposed to -2, 2 moving outwards at unit speed,
  # both accepted: gradient 3 * 2 = 6 each, times the jitter 1/2 = 3.
  # Adam's first step is lr * g / |g| = +0.025 on log L (L = 10 * 0.1).
  state = length_lib.init(10, 0.1, tf.float64)
  new = length_lib.update(
      state, [tf.constant([[-1.], [1.]], tf.float64)],
      [tf.constant([[-2.], [2.]], tf.float64)],
      [tf.constant([[-1.], [1.]], tf.float64)],
      tf.zeros([2], tf.float64), tf.constant(0.5, tf.float64), 0.1, 100, 1)
  np.testing.assert_allclose(new.log_length, 0.025, atol=1e-12)
  np.testing.assert_allclose(new.log_averaged_length, 0.025, atol=1e-12)
  np.testing.assert_allclose(new.averaged_squared_gradient, 0.05 * 9.,
                             rtol=1e-12)
  assert float(new.count) == 1.
  # The cap: at most 5 steps of h = 0.1, L <= 0.5.
  capped = length_lib.update(
      state, [tf.constant([[-1.], [1.]], tf.float64)],
      [tf.constant([[-2.], [2.]], tf.float64)],
      [tf.constant([[-1.], [1.]], tf.float64)],
      tf.zeros([2], tf.float64), tf.constant(0.5, tf.float64), 0.1, 5, 1)
  np.testing.assert_allclose(capped.log_length, np.log(0.5), rtol=1e-12)


def test_jittered_and_tuned_steps_are_ceilings_within_the_cap():
  state = length_lib.init(10, 0.1)  # L = 1
  steps, jitter = length_lib.jittered_num_leapfrog_steps(state, 0.1, 100)
  assert float(jitter) == 0.5 and int(steps) == 5  # ceil(0.5 * 1 / 0.1)
  steps, _ = length_lib.jittered_num_leapfrog_steps(state, 0.1, 3)
  assert int(steps) == 3
  assert length_lib.tuned_num_leapfrog_steps(state, 0.1, 100) == 5
  assert length_lib.tuned_num_leapfrog_steps(state, 0.03, 100) == 17
  assert length_lib.tuned_num_leapfrog_steps(state, 0.03, 8) == 8
  assert length_lib.tuned_num_leapfrog_steps(state, 10., 8) == 1


def test_warm_up_returns_one_fixed_integer_length():
  scales = np.logspace(-1., 0., 6).astype(np.float32)
  target = sg.LogProbFnTarget(
      lambda x: -0.5 * tf.reduce_sum((x / scales) ** 2, -1))
  kernel = sg.AMAGOLD(target, step_size=0.01, num_leapfrog_steps=10,
                      friction=0.5)
  warm = sg.warm_up(kernel, tf.zeros([4, 6]), num_steps=200, seed=[1, 2],
                    adapt_num_leapfrog_steps=True, max_num_leapfrog_steps=40,
                    jit_compile=False)
  steps = warm.kernel.num_leapfrog_steps
  assert type(steps) is int and 1 <= steps <= 40  # pylint: disable=unidiomatic-typecheck
  assert steps == warm.report.num_leapfrog_steps
  # The warm-up's tests, not 200 x 10, are the gradients it reports.
  per_window = [w["num_leapfrog_steps"] * w["steps"]
                for w in warm.report.windows]
  assert warm.report.num_gradients == pytest.approx(sum(per_window))
  assert warm.kernel.step_size == warm.report.step_size
  # The length moved from the kernel's 10 x 0.01 = 0.1.
  assert steps * warm.report.step_size > 0.3
  # With adapt_num_leapfrog_steps=False T is the kernel's own (on this
  # full-batch target the default would tune it).
  plain = sg.warm_up(kernel, tf.zeros([4, 6]), num_steps=40, seed=[1, 2],
                     jit_compile=False, adapt_num_leapfrog_steps=False)
  assert plain.kernel.num_leapfrog_steps == 10
  assert plain.report.num_leapfrog_steps is None


def test_amagold_with_a_tensor_length_is_the_integer_lengths_chain():
  # The warm-up's tests draw T per test as a scalar tensor; with the same
  # value the proposal, rho and the test are those of the integer T.
  target = sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x ** 2, -1),
                                  gradient_noise_variance=0.5)
  state = tf.ones([3, 2])
  outs = []
  for steps in (5, tf.constant(5)):
    kernel = sg.AMAGOLD(target, step_size=0.2, num_leapfrog_steps=steps,
                        friction=0.5)
    new_state, results = kernel.one_step(
        state, kernel.bootstrap_results(state), seed=[3, 4])
    outs.append((new_state.numpy(), results.log_accept_ratio.numpy()))
  np.testing.assert_array_equal(outs[0][0], outs[1][0])
  np.testing.assert_array_equal(outs[0][1], outs[1][1])
  with pytest.raises(TypeError, match="num_leapfrog_steps"):
    sg.AMAGOLD(target, step_size=0.2, num_leapfrog_steps=tf.constant(5.),
               friction=0.5)
