"""Whole chains a kernel's step makes, compiled as users run them: AMAGOLD,
SG Barker dynamics and SGLD give the same chain for the same seed and another
for another seed under XLA, with batched chains independent; a diverging SG
Barker chain is flagged and frozen at its last finite state (their steps
against their formulas are unit tests, tests/unit/kernels/); and `warm_up`
reports a cold start and not a warm one (the check itself:
tests/unit/chains/test_arrival.py)."""

import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import arrival
from support import barker_gaussian
from support.amagold_targets import FRICTION, NUM_LEAPFROG_STEPS, STEP_SIZE
from support.amagold_targets import accept_trace, noisy_gaussian
from support.helpers import (assert_diverged_chain_frozen,
                             assert_seeded_chains)


def test_amagold_same_seed_same_chain_other_seed_other_chain():
  kernel = sg.AMAGOLD(noisy_gaussian(), step_size=STEP_SIZE,
                      num_leapfrog_steps=NUM_LEAPFROG_STEPS, friction=FRICTION)
  assert_seeded_chains(kernel, tf.zeros([3, 2]), 50,
                       ([1, 2], [1, 2], [2, 1]), trace_fn=accept_trace,
                       chains_differ=False)


def test_sgbd_same_seed_same_chain_other_seed_other_chain():
  kernel = sg.SGBD(barker_gaussian.noisy_gaussian(),
                   step_size=barker_gaussian.SIGMA, variant="corrected")
  # Chains of one run are independent (only the minibatch is shared).
  assert_seeded_chains(kernel, tf.zeros([3, 2]), 50,
                       ([1, 2], [1, 2], [2, 1]))


def gaussian_target(noise, mean=0.):
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x - mean) ** 2, -1),
      gradient_noise_variance=noise)


def test_sgld_same_seed_same_chain_other_seed_other_chain():
  kernel = sg.SGLD(gaussian_target(1.), step_size=0.1)
  assert_seeded_chains(kernel, tf.zeros([2, 3]), 100,
                       ([7, 8], [7, 8], [7, 9]))


def test_diverging_chain_is_flagged_and_frozen_at_its_last_finite_state():
  # U = -10 x for x < 3 and NaN beyond: the extreme variant climbs by about
  # sigma per step from x = 0 and meets the NaN; a chain started at -1000
  # cannot reach it in 200 steps of 0.5 and must not diverge.
  def energy(x):
    x = x[..., 0]
    return tf.where(x < 3., -10. * x, tf.fill(tf.shape(x), np.nan))
  target = sg.NoisyGradientTarget(energy, gradient_noise_variance=0.)
  kernel = sg.SGBD(target, step_size=0.5, variant="extreme")
  last = assert_diverged_chain_frozen(kernel, tf.constant([[0.], [-1000.]]))
  assert last[0] >= 3.  # The state that produced the NaN.


def test_warm_up_reports_a_cold_start_and_not_a_warm_one():
  # A posterior 1,000 sds from the start and 30 warm-up steps: on its way.
  far = tfp.distributions.MultivariateNormalDiag([1000., -1000.], [1., 1.])
  kernel = sg.SGHMC(target_log_prob_fn=far.log_prob, step_size=0.1,
                    friction=1.)
  with pytest.warns(arrival.WarmupNotConvergedWarning, match="find_mode"):
    warm = sg.warm_up(kernel, tf.zeros([4, 2]), num_steps=30, seed=[0, 1],
                      jit_compile=False)
  assert warm.report.arrived is False
  assert warm.report.arrival.distance > arrival.MAX_DISTANCE
  # Started at the posterior: the same end-of-warm-up check finds it
  # arrived (at the posterior's variance), and nothing is warned.
  at_posterior = tf.constant([[1000., -1000.]] * 4)
  with warnings.catch_warnings():
    warnings.simplefilter("error", arrival.WarmupNotConvergedWarning)
    checked = arrival.check_warm_up(kernel, at_posterior, [tf.ones([2])], 1,
                                    seed=[0, 1])
    arrival.warn_if_not_arrived(checked)
  assert checked.arrived is True
