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


def test_float64_minibatch_energy_keeps_float64_precision():
  # N / n = 11 / 5 is not a float32 number: the N / n scale must be made in
  # the state's dtype, or a float64 chain's minibatch energies and gradients
  # carry a float32 rounding (a relative 2e-8) that InMemoryTarget's do not.
  x = np.random.default_rng(0).normal(size=11)
  w = tf.constant([[0.3], [-1.2]], tf.float64)
  single = sg.InMemoryTarget(lambda p, b: -0.5 * (b - p) ** 2, x, 5)
  for scheme in ("global", "per_shard"):
    sharded = sg.ShardedTarget(lambda p, b: -0.5 * (b - p) ** 2, x, 5,
                               minibatch=scheme)
    for seed in ([0, 3], [1, 3]):
      idx = sharded.minibatch_indices(seed).numpy()
      want = 0.5 * 11 / 5 * ((x[idx] - w.numpy()) ** 2).sum(-1)
      energy, grad = sharded.energy_and_gradient(w, seed)
      assert energy.dtype == tf.float64
      np.testing.assert_allclose(energy, want, rtol=1e-13, atol=0)
      np.testing.assert_allclose(sharded.minibatch_energy(w, seed), want,
                                 rtol=1e-13, atol=0)
      if scheme == "global":
        _, grad_single = single.energy_and_gradient(w, seed)
        np.testing.assert_allclose(grad, grad_single, rtol=1e-13, atol=0)
