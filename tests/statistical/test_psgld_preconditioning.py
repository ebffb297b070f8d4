"""Preconditioned SGLD on an ill-conditioned Gaussian: more effective samples
per gradient than SGLD, right means, and the stiff direction's variance
predicted by the SGLD recursion with the preconditioned step.
"""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, ess, mean_and_se, sample
from support.helpers import stationary_covariance, variance_and_se


def isotropic_gaussian(noise, precision=1.):
  precision = np.asarray(precision, np.float32)
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(precision * x ** 2, -1),
      gradient_noise_variance=noise)


def test_psgld_mixes_faster_per_gradient_on_an_ill_conditioned_gaussian():
  # Precisions 1 and 1e4: SGLD's step is capped by the stiff direction
  # (h < 2e-4), so the loose direction barely moves. pSGLD's RMSprop
  # preconditioner gives each coordinate its own effective step h G_j.
  precision = np.array([1., 1e4], np.float32)
  target = isotropic_gaussian(1., precision)
  n, chains = 20000, 4
  results = {}
  for name, kernel in (
      ("sgld", sg.SGLD(target, 1e-4)),
      ("psgld", sg.PreconditionedSGLD(target, 5e-3, decay=0.999))):
    draws, g = sample(kernel, tf.zeros([chains, 2]), n, seed=[5, 6],
                      num_burnin_steps=2000,
                      trace_fn=lambda _, r: getattr(r, "preconditioner",
                                                    r.step_size))
    draws = np.asarray(draws)
    results[name] = (draws, np.asarray(g))
    min_ess_per_gradient = ess(draws).min() / (n * chains)
    print(f"{name}: ESS per gradient {ess(draws) / (n * chains)}, min "
          f"{min_ess_per_gradient:.2e}")
    results[name] += (min_ess_per_gradient,)
  assert results["psgld"][2] > 3. * results["sgld"][2]
  # Means are right for both; pSGLD's stiff-direction variance follows the
  # SGLD recursion with step h * mean(G) (the loose direction's G tracks
  # theta, the bias the dropped Gamma term would correct, so it is not
  # asserted).
  for name in ("sgld", "psgld"):
    mean, se = mean_and_se(results[name][0])
    assert np.all(np.abs(mean) < NUM_SE * se), name
  draws, g, _ = results["psgld"]
  g_stiff = g[..., 1].mean()
  var, var_se = variance_and_se(draws, mean=0.)
  # theta' = theta - h G (lambda theta + eta) + sqrt(2 h G) xi is SGLD with
  # step h G and the same gradient noise V = 1.
  predicted = stationary_covariance("sgld", [[1e4]], 5e-3 * g_stiff,
                                    gradient_noise=[[1.]])[0, 0]
  assert abs(var[1] - predicted) < NUM_SE * var_se[1]
