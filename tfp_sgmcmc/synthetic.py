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
  """U(x) = (x+4)(x+1)(x-1)(x-3)/14 + 0.5 for x of shape [..., 1].

  Args:
    x: positions, a float tensor of shape [..., 1].

  Returns:
    U, a tensor of shape [...].

  ```python
  print(tfp_sgmcmc.synthetic.double_well_energy(tf.zeros([3, 1])).numpy())
  ```
  """
  x = x[..., 0]
  return (x + 4.) * (x + 1.) * (x - 1.) * (x - 3.) / 14. + 0.5


def sghmc_toy_energy(x):
  """U(x) = -2 x^2 + x^4 for x of shape [..., 1].

  Args:
    x: positions, a float tensor of shape [..., 1].

  Returns:
    U, a tensor of shape [...].

  ```python
  print(tfp_sgmcmc.synthetic.sghmc_toy_energy(tf.zeros([3, 1])).numpy())
  ```
  """
  x = x[..., 0]
  return -2. * x ** 2 + x ** 4


def noisy_target(energy_fn, noise_variance=1.):
  """A 1-D target with grad U~ = grad U + N(0, noise_variance).

  Args:
    energy_fn: U, a function of positions of shape [..., 1].
    noise_variance: the variance of the gradient noise.

  Returns:
    A `tfp_sgmcmc.NoisyGradientTarget` with one parameter.

  ```python
  noisy = tfp_sgmcmc.synthetic.noisy_target(
      tfp_sgmcmc.synthetic.double_well_energy, noise_variance=1.)
  kernel = tfp_sgmcmc.SGLD(noisy, step_size=0.01)
  state, _ = kernel.one_step(tf.zeros([4, 1]),
                             kernel.bootstrap_results(tf.zeros([4, 1])),
                             seed=[0, 1])
  print(state.shape)  # (4, 1)
  ```
  """
  return targets.NoisyGradientTarget(energy_fn,
                                     gradient_noise_variance=noise_variance,
                                     parameter_shapes=[1])


def grid_density(energy_fn, edges):
  """exp(-U) normalised over histogram bins with the given edges.

  Args:
    energy_fn: U, a function of float64 positions of shape [..., 1].
    edges: the bin edges, increasing.

  Returns:
    The probability of each bin (midpoint rule on a fine sub-grid), a numpy
    array of len(edges) - 1 values summing to 1.

  ```python
  edges = np.linspace(-6., 5., 23)
  p = tfp_sgmcmc.synthetic.grid_density(
      tfp_sgmcmc.synthetic.double_well_energy, edges)
  print(p.shape, p.sum())  # (22,) 1.0
  ```
  """
  edges = np.asarray(edges, np.float64)
  fine = np.linspace(edges[0], edges[-1], 20 * (len(edges) - 1) + 1)
  mid = 0.5 * (fine[1:] + fine[:-1])
  u = np.asarray(energy_fn(tf.constant(mid[:, None], tf.float64)))
  w = np.exp(-(u - u.min())) * np.diff(fine)
  per_bin = w.reshape(len(edges) - 1, 20).sum(axis=1)
  return per_bin / per_bin.sum()


def histogram_density(samples, edges):
  """Bin probabilities of the samples (those outside the grid are dropped).

  Args:
    samples: an array of any shape, flattened.
    edges: the bin edges, increasing.

  Returns:
    A numpy array of len(edges) - 1 probabilities (all 0 with no sample
    inside the grid).

  ```python
  print(tfp_sgmcmc.synthetic.histogram_density([0.5, 1.5, 1.7, 9.], [0, 1, 2]))
  # [0.333 0.667]: 9 is outside the grid
  ```
  """
  counts, _ = np.histogram(np.asarray(samples).ravel(), bins=edges)
  return counts / max(counts.sum(), 1)


def symmetric_kl(p, q, floor=1e-10):
  """KL(p||q) + KL(q||p) between bin probabilities.

  Empty bins are floored at `floor` (then renormalised), so a sampler that
  misses a region of the target is penalised heavily rather than infinitely.

  Args:
    p: bin probabilities.
    q: bin probabilities of the same shape.
    floor: the smallest probability a bin is given.

  Returns:
    A Python float >= 0 (0 for p = q).

  ```python
  print(tfp_sgmcmc.synthetic.symmetric_kl([0.5, 0.5], [0.25, 0.75]))
  ```
  """
  p = np.maximum(np.asarray(p, np.float64), floor)
  q = np.maximum(np.asarray(q, np.float64), floor)
  p, q = p / p.sum(), q / q.sum()
  return float(np.sum((p - q) * (np.log(p) - np.log(q))))


# --- Two-dimensional targets (AMAGOLD paper, Section 6.1, Figures 2-3). ---
#
# The paper adapts its two 2-D distributions from Yin & Zhou (2018), "Semi-
# implicit variational inference", and gives their formulas in an appendix
# (G.2.1) that our copy of the paper does not contain. These are Yin & Zhou's
# own 2-D toy targets (their public SIVI_2d.py), unnormalised:
#
#   banana:   p(z) ∝ N(z1; 0, 2^2) N(z2; z1^2 / 4, 1),
#             U(z) = z1^2 / 8 + (z2 - z1^2 / 4)^2 / 2;
#   X-shape:  p(z) = 1/2 N(z; 0, [[2, 1.8], [1.8, 2]])
#                    + 1/2 N(z; 0, [[2, -1.8], [-1.8, 2]]);
#   two modes (their "gmm2d"):
#             p(z) = 1/2 N(z; (-2, 0), I) + 1/2 N(z; (2, 0), I).


def banana_energy(z):
  """U(z) = z1^2/8 + (z2 - z1^2/4)^2/2 for z of shape [..., 2] (Yin & Zhou
  2018's banana: z1 ~ N(0, 4), z2 | z1 ~ N(z1^2/4, 1)).

  Args:
    z: positions, a float tensor of shape [..., 2].

  Returns:
    U, a tensor of shape [...].

  ```python
  print(tfp_sgmcmc.synthetic.banana_energy(tf.zeros([3, 2])).numpy())
  ```
  """
  z1, z2 = z[..., 0], z[..., 1]
  return z1 ** 2 / 8. + 0.5 * (z2 - 0.25 * z1 ** 2) ** 2


def _gaussian_mixture_energy(z, means, covariances):
  """-log of an equal-weight mixture of 2-D Gaussians (normalised)."""
  logs = []
  for mean, cov in zip(means, covariances):
    cov = np.asarray(cov, np.float64)
    prec = np.linalg.inv(cov)
    d = z - tf.constant(mean, z.dtype)
    quad = (prec[0, 0] * d[..., 0] ** 2 + 2. * prec[0, 1] * d[..., 0] *
            d[..., 1] + prec[1, 1] * d[..., 1] ** 2)
    logs.append(-0.5 * quad - 0.5 * np.log(np.linalg.det(cov)) -
                np.log(2. * np.pi))
  return -(tf.reduce_logsumexp(tf.stack(logs, -1), -1) - np.log(len(logs)))


def x_shape_energy(z):
  """-log of Yin & Zhou 2018's X shape, z of shape [..., 2]:
  1/2 N(0, [[2, 1.8], [1.8, 2]]) + 1/2 N(0, [[2, -1.8], [-1.8, 2]]).

  Args:
    z: positions, a float tensor of shape [..., 2].

  Returns:
    U, a tensor of shape [...].

  ```python
  print(tfp_sgmcmc.synthetic.x_shape_energy(tf.zeros([3, 2])).numpy())
  ```
  """
  return _gaussian_mixture_energy(
      z, [(0., 0.), (0., 0.)],
      [[[2., 1.8], [1.8, 2.]], [[2., -1.8], [-1.8, 2.]]])


def two_modes_energy(z):
  """-log of Yin & Zhou 2018's 2-D mixture 1/2 N((-2, 0), I) +
  1/2 N((2, 0), I), z of shape [..., 2].

  Args:
    z: positions, a float tensor of shape [..., 2].

  Returns:
    U, a tensor of shape [...].

  ```python
  print(tfp_sgmcmc.synthetic.two_modes_energy(tf.zeros([3, 2])).numpy())
  ```
  """
  return _gaussian_mixture_energy(z, [(-2., 0.), (2., 0.)],
                                  [np.eye(2), np.eye(2)])


def noisy_target_2d(energy_fn, noise_variance=1.):
  """A 2-D target with grad U~ = grad U + N(0, noise_variance I).

  Args:
    energy_fn: U, a function of positions of shape [..., 2].
    noise_variance: the variance of each coordinate's gradient noise.

  Returns:
    A `tfp_sgmcmc.NoisyGradientTarget` with a parameter of shape [2].

  ```python
  noisy = tfp_sgmcmc.synthetic.noisy_target_2d(
      tfp_sgmcmc.synthetic.banana_energy)
  kernel = tfp_sgmcmc.SGLD(noisy, step_size=0.01)
  state, _ = kernel.one_step(tf.zeros([4, 2]),
                             kernel.bootstrap_results(tf.zeros([4, 2])),
                             seed=[0, 1])
  print(state.shape)  # (4, 2)
  ```
  """
  return targets.NoisyGradientTarget(energy_fn,
                                     gradient_noise_variance=noise_variance,
                                     parameter_shapes=[2])


def grid_density_2d(energy_fn, edges_x, edges_y, refine=4):
  """exp(-U) integrated over the cells of a 2-D grid (midpoint rule on a
  `refine` x `refine` sub-grid per cell); bin probabilities, shape
  [len(edges_x) - 1, len(edges_y) - 1], summing to 1.

  Args:
    energy_fn: U, a function of float64 positions of shape [..., 2].
    edges_x: the bin edges of the first coordinate.
    edges_y: the bin edges of the second coordinate.
    refine: the sub-grid points per cell and coordinate.

  Returns:
    A numpy array of bin probabilities (above).

  ```python
  p = tfp_sgmcmc.synthetic.grid_density_2d(
      tfp_sgmcmc.synthetic.two_modes_energy, np.linspace(-5., 5., 11),
      np.linspace(-3., 3., 7))
  print(p.shape)  # (10, 6)
  ```
  """
  edges_x = np.asarray(edges_x, np.float64)
  edges_y = np.asarray(edges_y, np.float64)
  def fine_mids(edges):
    fine = np.linspace(edges[0], edges[-1], refine * (len(edges) - 1) + 1)
    return 0.5 * (fine[1:] + fine[:-1]), np.diff(fine)
  mx, wx = fine_mids(edges_x)
  my, wy = fine_mids(edges_y)
  gx, gy = np.meshgrid(mx, my, indexing="ij")
  u = np.asarray(energy_fn(tf.constant(np.stack([gx, gy], -1), tf.float64)))
  w = np.exp(-(u - u.min())) * wx[:, None] * wy[None, :]
  per_bin = w.reshape(len(edges_x) - 1, refine, len(edges_y) - 1,
                      refine).sum(axis=(1, 3))
  return per_bin / per_bin.sum()


def histogram_density_2d(samples, edges_x, edges_y):
  """Bin probabilities of 2-D samples of shape [..., 2] on the grid (those
  outside it are dropped).

  Args:
    samples: an array of shape [..., 2].
    edges_x: the bin edges of the first coordinate.
    edges_y: the bin edges of the second coordinate.

  Returns:
    A numpy array of shape [len(edges_x) - 1, len(edges_y) - 1].

  ```python
  p = tfp_sgmcmc.synthetic.histogram_density_2d(
      np.zeros([5, 2]), [-1., 1.], [-1., 0.5, 1.])
  print(p)  # [[1. 0.]]
  ```
  """
  samples = np.asarray(samples).reshape(-1, 2)
  counts, _, _ = np.histogram2d(samples[:, 0], samples[:, 1],
                                bins=[edges_x, edges_y])
  return counts / max(counts.sum(), 1)


__all__ += [
    "banana_energy", "x_shape_energy", "two_modes_energy", "noisy_target_2d",
    "grid_density_2d", "histogram_density_2d",
]
