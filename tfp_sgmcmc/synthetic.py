"""The papers' synthetic targets and the density diagnostics they are judged by.

* `double_well_energy`: U(x) = (x+4)(x+1)(x-1)(x-3)/14 + 0.5 (AMAGOLD paper,
  Section 5, from the authors' MATLAB code).
* `sghmc_toy_energy`: U(x) = -2x^2 + x^4 (Chen et al. 2014, Figure 1).
* `noisy_target(energy, noise_variance)`: the target with
  grad U~ = grad U + N(0, V).
* `grid_density`, `histogram_density`, `symmetric_kl`: the true density by
  quadrature on a grid, a sample histogram on the same grid, and the
  symmetric KL divergence between them (the papers' Figure 1d metric).
"""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import targets

__all__ = [
    "double_well_energy", "sghmc_toy_energy", "noisy_target",
    "grid_density", "histogram_density", "symmetric_kl",
]


def double_well_energy(x):
  """U(x) = (x+4)(x+1)(x-1)(x-3)/14 + 0.5 for x of shape [..., 1]."""
  x = x[..., 0]
  return (x + 4.) * (x + 1.) * (x - 1.) * (x - 3.) / 14. + 0.5


def sghmc_toy_energy(x):
  """U(x) = -2 x^2 + x^4 for x of shape [..., 1]."""
  x = x[..., 0]
  return -2. * x ** 2 + x ** 4


def noisy_target(energy_fn, noise_variance=1.):
  """A 1-D target with grad U~ = grad U + N(0, noise_variance)."""
  return targets.NoisyGradientTarget(energy_fn,
                                     gradient_noise_variance=noise_variance,
                                     parameter_shapes=[1])


def grid_density(energy_fn, edges):
  """exp(-U) normalised over histogram bins with the given edges.

  Returns the probability of each bin (midpoint rule on a fine sub-grid).
  """
  edges = np.asarray(edges, np.float64)
  fine = np.linspace(edges[0], edges[-1], 20 * (len(edges) - 1) + 1)
  mid = 0.5 * (fine[1:] + fine[:-1])
  u = np.asarray(energy_fn(tf.constant(mid[:, None], tf.float64)))
  w = np.exp(-(u - u.min())) * np.diff(fine)
  per_bin = w.reshape(len(edges) - 1, 20).sum(axis=1)
  return per_bin / per_bin.sum()


def histogram_density(samples, edges):
  """Bin probabilities of the samples (those outside the grid are dropped)."""
  counts, _ = np.histogram(np.asarray(samples).ravel(), bins=edges)
  return counts / max(counts.sum(), 1)


def symmetric_kl(p, q, floor=1e-10):
  """KL(p||q) + KL(q||p) between bin probabilities.

  Empty bins are floored at `floor` (then renormalised), so a sampler that
  misses a region of the target is penalised heavily rather than infinitely.
  """
  p = np.maximum(np.asarray(p, np.float64), floor)
  q = np.maximum(np.asarray(q, np.float64), floor)
  p, q = p / p.sum(), q / q.sum()
  return float(np.sum((p - q) * (np.log(p) - np.log(q))))
