"""SG-NUTS: moments on noisy Gaussians (close to the truth at small friction,
its approximation visible at larger), and trajectories that grow where the
posterior is wider.
"""

import numpy as np
import pytest

from support.helpers import NUM_SE, mean_and_se, variance_and_se
from support.sgnuts_gaussian import gaussian, run


@pytest.fixture(scope="module")
def stiff_run():
  """SG-NUTS at friction 0.1 on N(0, I), 2,000 draws: read by both tests
  (one compilation of the chain)."""
  return run(gaussian([1., 1.]), friction=0.1)


def test_sgnuts_moments_on_a_noisy_gaussian(stiff_run):
  # SG-NUTS is not exact (see its docstring): its SGHMC steps inject and
  # remove energy, and the multinomial weights exp(-H) then favour states
  # whose H drifted down. The effect scales with the friction, so at small
  # friction the moments are close to the truth. Tolerance: 4 Monte Carlo
  # standard errors plus 5% of the variance for that approximation (measured
  # 2-3% at C = 0.1; at C = 0.5 it is about 20%, asserted below, so the
  # allowance cannot hide a broken trajectory).
  draws, _, grads = stiff_run
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws, mean=0.)
  assert np.all(np.abs(mean) < NUM_SE * mean_se)
  assert np.all(np.abs(var - 1.) < NUM_SE * var_se + 0.05)
  # The number of gradient steps is reported and bounded by the depth.
  assert np.all(grads >= 1) and np.all(grads <= 2 ** 8 - 1)

  draws, _, _ = run(gaussian([1., 1.]), friction=0.5)
  var, var_se = variance_and_se(draws, mean=0.)
  assert np.all(1. - var > 0.05 + NUM_SE * var_se)


def test_sgnuts_takes_longer_trajectories_where_the_posterior_is_wider(
    stiff_run):
  results = {}
  for name, scales in (("stiff", None), ("stiff+loose", [1., 5.]),
                       ("loose", [5., 5.])):
    _, depth, grads = (stiff_run if scales is None else
                       run(gaussian(scales), friction=0.1, num_results=1000))
    results[name] = mean_and_se(grads[..., None].astype(np.float64))
    print(name, "mean gradient steps per iteration", results[name][0][0],
          "mean depth", depth.mean())
  order = ["stiff", "stiff+loose", "loose"]
  for a, b in zip(order, order[1:]):
    (ma, sa), (mb, sb) = results[a], results[b]
    assert mb[0] - ma[0] > NUM_SE * np.hypot(sa[0], sb[0]), (a, b)
