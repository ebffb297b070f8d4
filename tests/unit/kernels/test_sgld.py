"""SGLD's kernel (tfp_sgmcmc/kernels/sgld.py): the same seed gives the same
chain, another seed another, and batched chains are independent.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg


def gaussian_target(noise, mean=0.):
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x - mean) ** 2, -1),
      gradient_noise_variance=noise)


def test_sgld_same_seed_same_chain_other_seed_other_chain():
  kernel = sg.SGLD(gaussian_target(1.), step_size=0.1)

  # One compilation for the three seeds.
  @tf.function(jit_compile=True, autograph=False)
  def run(seed):
    return tfp.mcmc.sample_chain(100, tf.zeros([2, 3]), kernel=kernel,
                                 trace_fn=None, seed=seed)
  a = run(tf.constant([7, 8]))
  b = run(tf.constant([7, 8]))
  c = run(tf.constant([7, 9]))
  np.testing.assert_array_equal(a, b)
  assert not np.allclose(a, c)
  # Batched chains are independent: the two chains differ.
  assert not np.allclose(a[:, 0], a[:, 1])
