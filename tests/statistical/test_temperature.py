"""Tempered posteriors exp(-U / T): SGLD and SGHMC match their exact
stationary predictions at temperature T; AMAGOLD and amortized Barker
sample the tempered posterior exactly; SGBD at temperature T is the same
chain as SGBD on the tempered target.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, sample, stationary_covariance
from support.helpers import variance_and_se


def gaussian_target(noise, mean=0.):
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x - mean) ** 2, -1),
      gradient_noise_variance=noise)


def test_sgld_temperature_scales_the_posterior():
  h, t = 0.02, 0.25
  kernel = sg.SGLD(gaussian_target(0.), step_size=h, temperature=t)
  draws = sample(kernel, tf.zeros([8, 1]), 10000, seed=[3, 4])
  var, se = variance_and_se(draws, mean=0.)
  predicted = stationary_covariance("sgld", [[1.]], h, temperature=t)
  assert abs(var[0] - predicted[0, 0]) < NUM_SE * se[0]
  # Exactly T * 2 / (2 - h): the tempered target plus SGLD's O(h) bias.
  assert np.isclose(predicted[0, 0], t * 2. / (2. - h))


def isotropic_gaussian(noise, precision=1.):
  precision = np.asarray(precision, np.float32)
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(precision * x ** 2, -1),
      gradient_noise_variance=noise)


def test_sghmc_temperature_matches_exact_prediction():
  h, c, t = 0.1, 1., 0.2
  kernel = sg.SGHMC(isotropic_gaussian(0.), h, c, temperature=t,
                    integrator="splitting")
  draws = sample(kernel, tf.zeros([8, 1]), 10000, seed=[7, 7],
                 num_burnin_steps=200)
  var, se = variance_and_se(draws, mean=0.)
  predicted = stationary_covariance("splitting", [[1.]], h, c,
                                    temperature=t)[0, 0]
  assert abs(var[0] - predicted) < NUM_SE * se[0]
  assert abs(predicted - t) < 0.01 * t


@pytest.mark.parametrize("make", [
    lambda t: sg.AMAGOLD(t, 0.3, num_leapfrog_steps=5, friction=0.5,
                         temperature=0.25),
    lambda t: sg.AmortizedBarker(t, 0.4, num_steps=3, temperature=0.25),
])
def test_exact_kernels_sample_the_tempered_posterior_exactly(make):
  # AMAGOLD and amortized Barker are exact for exp(-U / T): on a unit
  # Gaussian with noisy gradients their variance must be T = 0.25 within
  # Monte Carlo error, with no discretisation or noise bias.
  target = isotropic_gaussian(1.)
  kernel = make(target)
  assert kernel.temperature == 0.25
  assert isinstance(kernel.target, sg.TemperedTarget)
  draws = sample(kernel, tf.zeros([8, 2]), 4000, seed=[8, 8],
                 num_burnin_steps=200)
  var, se = variance_and_se(draws, mean=0.)
  assert np.all(np.abs(var - 0.25) < NUM_SE * se)
  assert np.all(se < 0.02)  # The check has power against T = 1 or T^2.


def test_sgbd_temperature_scales_the_target():
  target = isotropic_gaussian(0.)
  kernel = sg.SGBD(target, 0.1, temperature=0.25)
  cold = sg.SGBD(sg.TemperedTarget(target, 0.25), 0.1)
  a = sample(kernel, tf.zeros([2, 2]), 50, seed=[1, 1])
  b = sample(cold, tf.zeros([2, 2]), 50, seed=[1, 1])
  np.testing.assert_array_equal(a, b)
  with pytest.raises(ValueError, match="`temperature` must be > 0"):
    sg.SGBD(target, 0.1, temperature=0.)


@pytest.mark.parametrize("make", [
    lambda t, T: sg.AMAGOLD(t, 0.3, num_leapfrog_steps=5, friction=0.5,
                            temperature=T),
    lambda t, T: sg.AmortizedBarker(t, 0.4, num_steps=3, temperature=T),
], ids=["AMAGOLD", "AmortizedBarker"])
def test_exact_kernels_read_a_variable_temperature_at_run_time(make):
  # A `tf.Variable` temperature of 1 when the kernel is built, then set to
  # 0.25 (a tempering ladder reusing one kernel): the chain must sample
  # T = 0.25, as SGLD and SGHMC do, not the value seen when building.
  temperature = tf.Variable(1.)
  kernel = make(isotropic_gaussian(1.), temperature)
  temperature.assign(0.25)
  draws = sample(kernel, tf.zeros([8, 2]), 2000, seed=[8, 8],
                 num_burnin_steps=100)
  var, se = variance_and_se(draws, mean=0.)
  assert np.all(np.abs(var - 0.25) < NUM_SE * se)
  assert np.all(se < 0.03)  # Power against T = 1.


def test_sgbd_reads_a_variable_temperature_at_run_time():
  # SGBD at a Variable temperature is the chain on the target tempered by
  # the Variable's value at run time.
  target = isotropic_gaussian(0.)
  temperature = tf.Variable(1.)
  kernel = sg.SGBD(target, 0.1, temperature=temperature)
  temperature.assign(0.25)
  cold = sg.SGBD(sg.TemperedTarget(target, 0.25), 0.1)
  a = sample(kernel, tf.zeros([2, 2]), 50, seed=[1, 1])
  b = sample(cold, tf.zeros([2, 2]), 50, seed=[1, 1])
  np.testing.assert_array_equal(a, b)
