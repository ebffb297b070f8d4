"""Targets on other targets (tfp_sgmcmc/targets/wrappers.py): a tempered
target divides every energy and gradient by T, at the state's precision."""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg


def _quadratic(x):
  return 0.5 * tf.reduce_sum(x ** 2, -1)


def test_tempered_target_divides_a_float64_energy_by_the_exact_temperature():
  # 0.7 is not a float32 number: the division is by float64(0.7).
  base = sg.NoisyGradientTarget(_quadratic, gradient_noise_variance=0.)
  tempered = sg.TemperedTarget(base, 0.7)
  x = tf.constant([[0.3, -1.2], [2.5, 0.1]], tf.float64)
  want = 0.5 * np.sum(x.numpy() ** 2, -1) / 0.7
  np.testing.assert_array_equal(tempered.energy(x).numpy(), want)
  energy, grad = tempered.energy_and_gradient(x, [1, 2])
  np.testing.assert_array_equal(energy.numpy(), want)
  np.testing.assert_array_equal(grad.numpy(), x.numpy() / 0.7)


def test_tempered_target_keeps_the_base_targets_checks_and_examples():
  base = sg.NoisyGradientTarget(_quadratic, gradient_noise_variance=1.,
                                num_examples=7, parameter_shapes=[2])
  tempered = sg.TemperedTarget(base, 2.)
  assert tempered.base_target is base
  assert tempered.num_examples == 7
  assert tempered.parameter_shapes == base.parameter_shapes
  assert tempered.has_exact_energy
