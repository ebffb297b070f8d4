"""ShardedTarget on one replica is InMemoryTarget: the same energies and
gradients, differentiable by an outer tape, under control variates too.
(Two devices: processes/test_sharded_devices.py.)
"""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.linear_regression import LinearRegression


def test_sharded_target_on_one_replica_is_in_memory_target():
  problem = LinearRegression(num_examples=120, dim=2, seed=1)
  sharded = sg.ShardedTarget(problem.log_likelihood, problem.data, 20,
                             log_prior_fn=problem.log_prior,
                             minibatch="global", energy_chunk_size=50)
  single = problem.in_memory_target(20)
  w = tf.constant([[0.3, -0.2], [1., 0.5]])
  np.testing.assert_allclose(sharded.energy(w), single.energy(w), rtol=1e-6)
  for a, b in zip(sharded.energy_and_gradient(w, [4, 5]),
                  single.energy_and_gradient(w, [4, 5])):
    np.testing.assert_allclose(a, b, rtol=1e-5)
  # Differentiable by an outer tape (ControlVariateTarget, find_mode).
  with tf.GradientTape() as tape:
    tape.watch(w)
    energy = sharded.energy(w)
  np.testing.assert_allclose(tape.gradient(energy, w),
                             [problem.gradient(x) for x in w.numpy()],
                             rtol=1e-4)
  cv = sg.ControlVariateTarget(sharded, tf.constant(problem.posterior_mean,
                                                    tf.float32))
  cv_single = sg.ControlVariateTarget(
      single, tf.constant(problem.posterior_mean, tf.float32))
  for a, b in zip(cv.energy_and_gradient(w, [4, 5]),
                  cv_single.energy_and_gradient(w, [4, 5])):
    np.testing.assert_allclose(a, b, rtol=1e-4)
