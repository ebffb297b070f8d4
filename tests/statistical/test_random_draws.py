"""The injected noise and minibatch indices (dynamics.standard_normal_like,
dynamics.uniform_indices): N(0, 1) i.i.d. across steps, chains and state
parts, with folded-in or walked seeds; indices uniform and independent
across chains, the same eagerly and under XLA.
"""

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc import dynamics


STEPS = 4000


def _structure():
  # 8 chains: a [8, 5] and a [8] float32 part (one flat draw) and a [8, 2]
  # float64 part (a second draw with its own seed).
  return [tf.zeros([8, 5]), tf.zeros([8]), tf.zeros([8, 2], tf.float64)]


@tf.function(jit_compile=True, autograph=False)
def _draws(seed):
  """[STEPS, 64] draws: row t is the structure's draw for the seed of step
  t (`fold_in(seed, t)`, as `StepSeeded`), chains and parts side by side."""
  def step(_, t):
    s = tf.random.experimental.stateless_fold_in(seed, t)
    parts = dynamics.standard_normal_like(_structure(), s)
    return tf.concat([tf.reshape(tf.cast(p, tf.float64), [-1])
                      for p in parts], 0)
  return tf.scan(step, tf.range(STEPS), tf.zeros([64], tf.float64))


@tf.function(jit_compile=True, autograph=False)
def _walked_draws(seed):
  """As `_draws`, with the seed of step t carried through the loop by
  `dynamics.walk_seed`, as AMAGOLD's leapfrog steps carry theirs
  (`dynamics.amagold.leapfrog_seeds`)."""
  from tfp_sgmcmc.dynamics import amagold  # pylint: disable=g-import-not-at-top
  def step(carry, _):
    loop_seed, _ = carry
    loop_seed, _, noise_seed = amagold.leapfrog_seeds(loop_seed)
    parts = dynamics.standard_normal_like(_structure(), noise_seed)
    return loop_seed, tf.concat([tf.reshape(tf.cast(p, tf.float64), [-1])
                                 for p in parts], 0)
  return tf.scan(step, tf.range(STEPS),
                 (seed, tf.zeros([64], tf.float64)))[1]


@pytest.mark.parametrize("draws", [_draws, _walked_draws],
                         ids=["folded-in seeds", "walked seeds"])
def test_noise_is_iid_standard_normal_across_steps_chains_and_parts(draws):
  z = draws(tf.constant([5, 6])).numpy()
  n = z.size
  # Each coordinate (chain x part element) has mean 0 ...
  assert np.max(np.abs(z.mean(0))) * np.sqrt(STEPS) < 4.5
  # ... variance 1 (a 1.1 variance would be 35 standard errors off) and
  # normal tails.
  assert abs(z.var() - 1.) / np.sqrt(2. / n) < 4.5, z.var()
  for q, p in ((1., 0.31731), (2., 0.04550), (3., 0.0026998)):
    frac = np.mean(np.abs(z) > q)
    assert abs(frac - p) < 4.5 * np.sqrt(p * (1 - p) / n), (q, frac)
  # No two coordinates are correlated (chains or parts sharing a stream,
  # or overlapping pieces of one flat draw, give r = 1) ...
  r = np.corrcoef(z, rowvar=False)
  off = r[~np.eye(64, dtype=bool)]
  assert np.max(np.abs(off)) * np.sqrt(STEPS) < 5., np.max(np.abs(off))
  # ... and consecutive steps are uncorrelated.
  lag1 = np.mean((z[1:] - z.mean(0)) * (z[:-1] - z.mean(0)), 0) / z.var(0)
  assert np.max(np.abs(lag1)) * np.sqrt(STEPS) < 4.5, lag1
  # Another seed gives other draws.
  assert not np.array_equal(z[:10], draws(tf.constant([5, 7])).numpy()[:10])


def test_minibatch_indices_are_uniform_and_independent_across_chains():
  maxval, steps = 270, 500
  draw = tf.function(lambda s: dynamics.uniform_indices(s, [steps, 8, 16],
                                                        maxval),
                     jit_compile=True)
  idx = draw(tf.constant([3, 4])).numpy()
  assert idx.min() >= 0 and idx.max() < maxval
  counts = np.bincount(idx.ravel(), minlength=maxval)
  expected = idx.size / maxval
  chi2 = np.sum((counts - expected) ** 2 / expected)
  # chi-square with 269 degrees of freedom: mean 269, sd 23.
  assert abs(chi2 - (maxval - 1)) < 5 * np.sqrt(2 * (maxval - 1)), chi2
  # Chains' batches are independent: the same index in the same slot of
  # two chains with probability 1 / maxval.
  same = np.mean(idx[:, 0, :] == idx[:, 1, :])
  assert abs(same - 1. / maxval) < 5 * np.sqrt(1. / maxval / (steps * 16))
  # Eager (TF kernels) and XLA agree: integer arithmetic only.
  np.testing.assert_array_equal(
      idx, dynamics.uniform_indices(tf.constant([3, 4]), [steps, 8, 16],
                                    maxval).numpy())
