"""Chen, Ding & Carin (2015), the sigmoid belief network, small.

`examples/papers/integrators/sbn_integrators.py`: an 8-hidden-unit SBN on the binarised MNIST
test-file split, its log-likelihood exact by summing over the 2^8 hidden
states (in place of the paper's AIS at 100 hidden units).
"""

import itertools
import os

import numpy as np
import pytest
import tensorflow as tf

from support.helpers import load_example

ex = load_example("papers/integrators/sbn_integrators")
MNIST = "t10k-images-idx3-ubyte.gz"
needs_data = pytest.mark.skipif(
    not any(os.path.exists(os.path.join(ex.SHARED_DATA, *where, MNIST))
            for where in ((), ("mnist",))),
    reason=f"MNIST ({MNIST}) not found under {ex.SHARED_DATA}, where "
    "the example reads it")


def test_exact_marginal_matches_brute_force():
  # log p(v) = log sum_h p(h) p(v | h), checked against a direct numpy sum.
  rng = np.random.default_rng(0)
  k = 3
  state = rng.normal(0., 0.5, (2, ex.dim(k))).astype(np.float32)
  v = (rng.random((4, 784)) < 0.3).astype(np.float32)
  got = ex.log_marginal(tf.constant(state), tf.constant(v), k).numpy()
  for c in range(2):
    w = state[c, :784 * k].reshape(784, k)
    cc = state[c, 784 * k:784 * k + 784]
    b = state[c, 784 * k + 784:]
    for i in range(4):
      total = 0.
      for h in itertools.product([0., 1.], repeat=k):
        h = np.array(h)
        ph = np.prod(np.where(h > 0, 1. / (1. + np.exp(-b)),
                              1. / (1. + np.exp(b))))
        p = 1. / (1. + np.exp(-(w @ h + cc)))
        total += ph * np.exp(np.sum(v[i] * np.log(p) +
                                    (1. - v[i]) * np.log1p(-p)))
      np.testing.assert_allclose(got[c, i], np.log(total), rtol=1e-4)


@needs_data
def test_euler_degrades_more_than_splitting_at_a_large_step():
  # The row's claim at CI size (4 hidden units, 2,000 images, 400 steps,
  # h = 0.1, D = 1 / sqrt(h)): Euler's test NLL is far above splitting's.
  # Seen (seeds 1-3): splitting 193.4 / 191.7 / 194.4, Euler 267.9 / 271.4
  # / 270.6 nats per image.
  import dataclasses  # pylint: disable=g-import-not-at-top
  config = dataclasses.replace(ex.Config(), hidden=4, num_train=2000,
                               num_steps=400, sghmc_steps=(0.1,))
  result = ex.run_experiment(config, methods=("splitting", "euler"),
                             log=lambda *_: None)
  split, euler = result["splitting"]["nll"][0], result["euler"]["nll"][0]
  assert np.isfinite(split) and split < 220., split
  assert euler > split + 30., (euler, split)
