"""The IMQ Stein kernel written out in NumPy, and the check of the
pairwise sum against its plain double loop."""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.chains import stein


def stein_kernel_numpy(x, y, sx, sy, c=1., beta=-0.5):
  """k0(x, y) written out from Gorham & Mackey (2017), Langevin operator on
  both arguments of k = (c^2 + |x - y|^2)^beta."""
  r = x - y
  u = c * c + r @ r
  d = len(x)
  return (sx @ sy * u ** beta
          - 2 * beta * (sx @ r) * u ** (beta - 1)
          + 2 * beta * (sy @ r) * u ** (beta - 1)
          - 2 * beta * d * u ** (beta - 1)
          - 4 * beta * (beta - 1) * (r @ r) * u ** (beta - 2))


C, BETA = 0.7, -0.3


def pairwise_case():
  """(x [2, 23, 3], score, the two double sums at c = C, beta = BETA)."""
  rng = np.random.default_rng(0)
  n, d = 23, 3
  x = rng.normal(size=(2, n, d)) + 2.
  score = -(x - 1.5) * np.array([1., 2., 0.5])
  want = [sum(stein_kernel_numpy(x[b, i], x[b, j], score[b, i], score[b, j],
                                 c=C, beta=BETA)
              for i in range(n) for j in range(n)) for b in range(2)]
  return x, score, want


def assert_pairwise_sum_matches(jit):
  """`stein_kernel_sum` (compiled with XLA or not) equals the double loop,
  for a padded last block, one block, and a block larger than n."""
  x, score, want = pairwise_case()
  for block_size in (4, x.shape[1], 64):
    got = tf.function(stein.stein_kernel_sum, jit_compile=jit)(
        x, score, c=C, beta=BETA, block_size=block_size).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
