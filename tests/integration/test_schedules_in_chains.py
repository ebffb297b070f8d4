"""A cyclical step-size schedule drives SGLD, SGHMC, SGNHT and pSGLD: with
exact gradients the exploration phase is deterministic (an optimiser
moving to the mode), then the chain samples; the step size used is the
schedule's.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import sample


def isotropic_gaussian(noise, precision=1.):
  precision = np.asarray(precision, np.float32)
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(precision * x ** 2, -1),
      gradient_noise_variance=noise)


@pytest.mark.parametrize("make", [
    lambda t, s: sg.SGLD(t, s),
    lambda t, s: sg.SGHMC(t, s, friction=1.),
    lambda t, s: sg.SGNHT(t, s),
    lambda t, s: sg.PreconditionedSGLD(t, s),
])
def test_cyclical_schedule_explores_without_noise_then_samples(make):
  # With exact gradients the exploration phase is deterministic (an
  # optimiser): two seeds give the same path until sampling starts.
  target = isotropic_gaussian(0.)
  schedule = sg.CyclicalSchedule(0.05, num_steps=40, num_cycles=2,
                                 exploration_fraction=0.5)
  kernel = make(target, schedule)
  init = tf.fill([1, 2], 3.)
  # Graphs without XLA: the schedule, not the compiler, is the subject.
  a, ha = sample(kernel, init, 40, seed=[1, 1],
                 trace_fn=lambda _, r: r.step_size, jit=False)
  b = sample(kernel, init, 40, seed=[2, 2], jit=False)
  a, b = np.asarray(a), np.asarray(b)
  if isinstance(kernel, (sg.SGHMC, sg.SGNHT)):
    # Their initial momentum is drawn from N(0, T I) at the first step.
    assert not np.allclose(a[:10], b[:10])
  else:
    np.testing.assert_allclose(a[:10], b[:10], rtol=1e-6)
    assert np.all(np.abs(a[9]) < np.abs(init.numpy()))  # Moving to the mode.
  assert not np.allclose(a[10:20], b[10:20])
  # A compiled and an eager cos may differ in float32 round-off near h = 0.
  np.testing.assert_allclose(ha, schedule(tf.range(40)), rtol=1e-5)


def test_sgnuts_moves_in_the_exploration_phase():
  # The exploration phase takes the noise out of the SGHMC steps only: the
  # trajectory's weights exp(-H / T) are the sampled law's. Weighed at the
  # noise's T = 0, every point had weight exp(-inf) and none could be
  # chosen, so each chain stood still through every exploration phase.
  target = isotropic_gaussian(0.)
  schedule = sg.CyclicalSchedule(0.1, num_steps=40, num_cycles=2,
                                 exploration_fraction=0.5)
  kernel = sg.SGNUTS(target, schedule, friction=0.1, max_tree_depth=4)
  init = tf.fill([8, 2], 3.)
  draws, ratio = sample(kernel, init, 40, seed=[1, 1], jit=False,
                        trace_fn=lambda _, r: r.log_accept_ratio)
  draws, ratio = np.asarray(draws), np.asarray(ratio)
  assert np.all(np.isfinite(ratio))
  # Every chain leaves its start in the first exploration phase (steps 0-9)
  # and comes down from 3 towards N(0, I)'s typical set (|x| about 0.8).
  assert np.all(np.any(draws[:10] != 3., axis=(0, 2)))
  assert np.mean(np.abs(draws[9])) < 2.
