"""Exact stationary laws of the SGBD variants on 1-D targets, by quadrature.

A 1-D SGBD step from x moves by z = b w with density (w ~ mu_sigma, b = +1
with probability P(delta, w), delta = d log pi(x) + tau eps, eps ~ N(0, 1))

    k(x, x + z) = mu_sigma(z) E_eps[P(delta, z) + 1 - P(delta, -z)],

which for the vanilla and corrected probabilities (P(delta, -z) =
1 - P(delta, z)) is the familiar 2 mu_sigma(z) E[P(delta, z)]. The
expectation over the Gaussian gradient noise is done by Gauss-Hermite
quadrature, the kernel is discretised on a fine grid (rows renormalised), and
the stationary vector solves pi K = pi. Written with NumPy, independently of
the TensorFlow code under test.

With a grid spacing of the bimodal components' standard deviation (0.1
sigma) and the grid reaching 7 target standard deviations, the variance is
accurate to about 1e-6 for the bimodal increments and 1e-3 for Gaussian ones
with the corrected or extreme probability (whose jump at tau |z| = 1.702 the
grid resolves only to O(spacing)): quartering the spacing changes it by no
more. Both are far below the Monte Carlo errors of the tests (about 1e-2).
"""

import numpy as np
import scipy.stats
from scipy.special import expit

PROBIT_LOGIT = 1.702


def increment_density(z, sigma, distribution="bimodal"):
  if distribution == "gaussian":
    return np.exp(-0.5 * (z / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))
  s = 0.1 * sigma
  return 0.5 * (np.exp(-0.5 * ((z - sigma) / s) ** 2) +
                np.exp(-0.5 * ((z + sigma) / s) ** 2)) / (s * np.sqrt(2 *
                                                                  np.pi))


def move_probability(delta, z, tau, variant):
  """P(delta, z) of each variant; "proposition_1" is Barker with the gradient
  shrunk by c = 1.702 / sqrt(1.702^2 + z^2 tau^2) (and no noise)."""
  if variant == "vanilla":
    return expit(z * delta)
  if variant == "extreme":
    return (z * delta > 0).astype(np.float64)
  if variant == "proposition_1":
    c = PROBIT_LOGIT / np.sqrt(PROBIT_LOGIT ** 2 + (tau * z) ** 2)
    return expit(c * z * delta)
  if variant == "corrected":
    tz2 = (tau * z) ** 2
    inside = tz2 < PROBIT_LOGIT ** 2
    scale = PROBIT_LOGIT / np.sqrt(np.where(inside, PROBIT_LOGIT ** 2 - tz2,
                                            1.))
    return np.where(inside, expit(scale * z * delta),
                    (z * delta > 0).astype(np.float64))
  raise ValueError(variant)


def expected_move_probability(drift, z, tau, variant, num_quadrature=40):
  """E_eps[P(drift + tau eps, z)], eps ~ N(0, 1).

  Smooth parts by Gauss-Hermite quadrature; the indicator 1(delta z > 0)
  (extreme variant, and the corrected one where tau |z| >= 1.702) in closed
  form, Phi(sign(z) drift / tau), where quadrature would be poor.
  """
  if tau == 0 or variant == "proposition_1":
    return move_probability(drift, z, tau, variant)
  indicator = scipy.stats.norm.cdf(np.sign(z) * drift / tau)
  if variant == "extreme":
    return indicator
  nodes, weights = np.polynomial.hermite_e.hermegauss(num_quadrature)
  weights = weights / weights.sum()
  smooth = np.zeros(np.broadcast(drift, z).shape)
  for eps, weight in zip(nodes, weights):
    smooth += weight * move_probability(drift + tau * eps, z, tau, variant)
  if variant == "corrected":
    return np.where((tau * z) ** 2 < PROBIT_LOGIT ** 2, smooth, indicator)
  return smooth


def stationary_moments(grad_log_pi, sigma, tau, variant,
                       distribution="bimodal", center=0., scale=1.):
  """(mean, variance) of the chain's stationary law.

  Args:
    grad_log_pi: x -> d log pi / dx (NumPy, vectorised).
    sigma: the step size.
    tau: standard deviation of the Gaussian gradient noise (the corrected
      variant also uses it as its tau-hat).
    variant: "vanilla", "corrected", "extreme" or "proposition_1".
    distribution: mu_sigma, "bimodal" or "gaussian".
    center, scale: where the target lives (the grid spans center +- 7 scale).
  """
  width = 0.1 * min(sigma, scale)
  x = center + np.arange(-7 * scale, 7 * scale + width / 2, width)
  z = x[None, :] - x[:, None]
  drift = grad_log_pi(x)[:, None]
  prob = (expected_move_probability(drift, z, tau, variant) + 1. -
          expected_move_probability(drift, -z, tau, variant))
  kernel = increment_density(z, sigma, distribution) * prob
  kernel /= kernel.sum(axis=1, keepdims=True)
  system = kernel.T - np.eye(len(x))
  system[0] = 1.
  rhs = np.zeros(len(x))
  rhs[0] = 1.
  pi = np.linalg.solve(system, rhs)
  mean = pi @ x
  return mean, pi @ (x - mean) ** 2
