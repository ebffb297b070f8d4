"""What the tests of `dynamics` share: the structures they feed the update
rules (two parts with a leading chain axis), the step sizes (a scalar, one
per part, one per chain and part), the check of a result against the
float64 NumPy reference within the tolerance of its dtype, and a fake
minibatch energy that records where and with which seed it is called.

Imported by the test modules beside it (`from .reference import ...`); it is
no test module itself, so pytest collects nothing here.
"""

import numpy as np
import tensorflow as tf

CHAINS = 3
SHAPES = [(CHAINS, 4), (CHAINS, 2, 2)]  # Two parts, a leading chain axis.
TOL = {tf.float32: dict(rtol=1e-6, atol=1e-6),
       tf.float64: dict(rtol=1e-12, atol=1e-12)}


def draws(seed, scale=1., shapes=SHAPES):
  rng = np.random.default_rng(seed)
  return [scale * rng.normal(size=s) for s in shapes]


def const(parts, dtype=tf.float64):
  return [tf.constant(p, dtype) for p in parts]


def f64(parts, dtype):
  """The parts as the function sees them (rounded to `dtype`), in float64."""
  return [tf.cast(tf.constant(p, dtype), tf.float64).numpy() for p in parts]


def check(got, expected, dtype):
  assert len(got) == len(expected)
  for g, e in zip(got, expected):
    assert g.dtype == dtype and g.shape == e.shape
    np.testing.assert_allclose(g.numpy(), e, **TOL[dtype])


def per_chain_sum(parts, batch_shape=(CHAINS,)):
  return sum(np.reshape(p, batch_shape + (-1,)).sum(-1) for p in parts)


# Step sizes: one scalar; one per part; one per chain and part.
PER_CHAIN = [np.array([0.05, 0.011, 0.2]).reshape(3, 1),
             np.array([0.03, 0.07, 0.002]).reshape(3, 1, 1)]
# (argument, the per-part values the reference uses)
STEP_SIZES = {"scalar": (0.07, [0.07, 0.07]),
              "per_part": ([0.07, 0.013], [0.07, 0.013]),
              "per_chain": (PER_CHAIN, PER_CHAIN)}


def step_size_arg(name, dtype):
  arg, _ = STEP_SIZES[name]
  return const(arg, dtype) if name == "per_chain" else arg


class FakeEnergy:
  """energy_and_gradient(theta, seed) of U~ = sum lam theta^2 / 2 + c theta,
  c depending on the seed (each minibatch its own gradient); records the
  positions and seeds it is called with."""

  def __init__(self, lam=1.5):
    self.lam = lam
    self.calls = []

  def shift(self, seed):
    return (int(np.asarray(seed)[0]) % 101) / 25. - 2.

  def __call__(self, theta, seed):
    self.calls.append(([np.array(x) for x in theta], np.array(seed)))
    c = self.shift(seed)
    energy = sum(tf.reduce_sum(0.5 * self.lam * x * x + c * x,
                               axis=list(range(1, x.shape.rank)))
                 for x in theta)
    return energy, [self.lam * x + c for x in theta]
