"""The warmed-up AMAGOLD is exact: after `warm_up` (step size, and the mass
where AMAGOLD takes one, estimated from the draws or from the gradients)
the frozen kernel samples eight schools
(non-centred, minibatches of 4 of the 8 schools) with the Inference Gym's
reference moments.

Tolerances: NUM_SE = 4 Monte Carlo standard errors of the chain's own
averages (support/helpers.py: ESS of theta for means, of (theta - mean)^2
for variances); the reference's own errors are two orders below them.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support import eight_schools
from support.helpers import NUM_SE, mean_and_se, sample, variance_and_se


@pytest.mark.parametrize("mass_estimate", ["draws", "gradients"])
def test_warmed_up_amagold_matches_the_eight_schools_reference(mass_estimate):
  kernel = sg.AMAGOLD(eight_schools.target(batch_size=4), step_size=0.01,
                      num_leapfrog_steps=10, friction=0.5)
  # The warm-up in graph mode: the frozen kernel's exactness is the
  # subject, and a 300-step warm-up compiles under XLA at more cost than it
  # runs (the 3,000 draws run under XLA).
  warm = sg.warm_up(kernel, tf.zeros([8, eight_schools.DIM]), num_steps=300,
                    seed=[4, 5], jit_compile=False,
                    mass_estimate=mass_estimate)
  assert warm.kernel.is_calibrated
  draws = eight_schools.to_gym(
      sample(warm.kernel, warm.state, 3000, seed=[6, 7]))
  ref_mean, ref_sd = eight_schools.reference()
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert np.all(np.abs(mean - ref_mean) < NUM_SE * mean_se), (
      mean, ref_mean, mean_se)
  assert np.all(np.abs(var - ref_sd ** 2) < NUM_SE * var_se), (
      np.sqrt(var), ref_sd, var_se)


def test_sgld_path_under_the_amortized_test_is_exact_at_a_large_step():
  """The chain the warm-up tunes SGLD on is exact: T = 5 SGLD steps of
  h = 0.4 with noisy gradients (noise variance 0.1, where a wrong sign of
  the path ratio leaves variance 0.5), under the amortized test, keep
  N(0, I) (plain SGLD at this h has variance 1 / (1 - h / 2) = 1.25 even
  with exact gradients)."""
  from tfp_sgmcmc.kernels.langevin_path import UncalibratedLangevinPath  # pylint: disable=import-outside-toplevel
  target = sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x ** 2, -1),
                                  gradient_noise_variance=0.1)
  kernel = sg.AmortizedMetropolisHastings(
      UncalibratedLangevinPath(target, step_size=0.4, num_steps=5))
  draws = sample(kernel, tf.zeros([16, 2]), 2000, seed=[8, 9],
                 num_burnin_steps=100)
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert np.all(np.abs(mean) < NUM_SE * mean_se), (mean, mean_se)
  assert np.all(np.abs(var - 1.) < NUM_SE * var_se), (var, var_se)
  # Not trivially: the plain SGLD variance is far outside the error.
  assert np.all(np.abs(1.25 - 1.) > NUM_SE * var_se), var_se
