"""Step-size schedules and their averages (tfp_sgmcmc/chains/schedules.py): the
cyclical schedule's values and phases, the step-size-weighted mean.
"""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg


def test_cyclical_schedule_values_and_phases():
  schedule = sg.CyclicalSchedule(0.1, num_steps=100, num_cycles=4,
                                 exploration_fraction=0.5)
  k = np.arange(100)
  want = 0.05 * (np.cos(np.pi * (k % 25) / 25) + 1)
  np.testing.assert_allclose(schedule(tf.constant(k)), want, rtol=1e-5)
  np.testing.assert_array_equal(schedule.is_sampling(tf.constant(k)),
                                (k % 25) / 25 >= 0.5)


def test_step_size_weighted_mean_is_the_weighted_sum():
  x = np.array([[1., 2.], [3., 4.], [5., 6.]], np.float32)
  w = np.array([0.5, 0.25, 0.25], np.float32)
  got = sg.step_size_weighted_mean(x, w).numpy()
  np.testing.assert_allclose(got, (w[:, None] * x).sum(0) / w.sum())
