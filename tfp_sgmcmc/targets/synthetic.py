"""`NoisyGradientTarget`: the papers' synthetic targets, an exact energy with
a gradient corrupted by Gaussian noise, grad U~ = grad U + N(0, V)."""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import pack_like
from tfp_sgmcmc.targets.base import MinibatchTarget
from tfp_sgmcmc.targets.checks import (call_with_clear_errors,
                                       check_batch_shape, check_output)

__all__ = ["NoisyGradientTarget"]


class NoisyGradientTarget(MinibatchTarget):
  """A synthetic target with exact energy and noisy gradient.

      U~(theta) = U(theta),   grad U~(theta) = grad U(theta) + N(0, V),

  as in the toy experiments of Chen et al. (2014) and Zhang et al. (2020),
  where V is `gradient_noise_variance` (a scalar or one value per coordinate,
  broadcast against each state part) or `gradient_noise_covariance` (a
  [d, d] matrix for a single-tensor state with event size d).

  Args:
    energy_fn: `state -> U(state)` of shape `batch_shape`.
    gradient_noise_variance: V as a scalar or per-coordinate variance.
    gradient_noise_covariance: V as a full covariance matrix.
    num_examples: nominal N (only reported; default 1).

  #### Example

  ```python
  # The double well of the AMAGOLD paper, with grad U~ = grad U + N(0, 1).
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: ((x + 4) * (x + 1) * (x - 1) * (x - 3) / 14 + 0.5)[..., 0],
      gradient_noise_variance=1.)
  ```
  """

  def __init__(self, energy_fn, gradient_noise_variance=None,
               gradient_noise_covariance=None, num_examples=1,
               parameter_shapes=None):
    if not callable(energy_fn):
      raise TypeError(f"`energy_fn` must be callable; got {energy_fn!r}.")
    if (gradient_noise_variance is None) == (gradient_noise_covariance is
                                             None):
      raise ValueError("give exactly one of `gradient_noise_variance` and "
                       "`gradient_noise_covariance`.")
    super().__init__(num_examples, parameter_shapes=parameter_shapes)
    self._energy_fn = energy_fn
    self._chol = None
    self._variance = None
    if gradient_noise_covariance is not None:
      cov = np.asarray(gradient_noise_covariance, dtype=np.float64)
      if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"`gradient_noise_covariance` must be a square "
                         f"matrix; got shape {cov.shape}.")
      try:
        self._chol = np.linalg.cholesky(cov)
      except np.linalg.LinAlgError as e:
        raise ValueError("`gradient_noise_covariance` must be positive "
                         f"definite; got {cov.tolist()}.") from e
      self._variance = np.diag(cov)
    else:
      if isinstance(gradient_noise_variance, (str, bytes, bool)):
        raise TypeError("`gradient_noise_variance` must be a number or an "
                        f"array of numbers; got {gradient_noise_variance!r}.")
      try:
        var = np.asarray(gradient_noise_variance, dtype=np.float64)
      except (TypeError, ValueError) as e:
        raise TypeError("`gradient_noise_variance` must be a number or an "
                        f"array of numbers; got "
                        f"{gradient_noise_variance!r}.") from e
      if np.any(var < 0) or not np.all(np.isfinite(var)):
        raise ValueError(f"`gradient_noise_variance` must be finite and "
                         f">= 0; got {gradient_noise_variance!r}.")
      self._variance = var

  def _checked_energy(self, state):
    value = call_with_clear_errors("`energy_fn`", self._energy_fn, state)
    value = check_output("energy_fn", value, state)
    check_batch_shape("energy_fn", value.shape, state,
                       self.parameter_shapes, "energies")
    return value

  def minibatch_energy(self, state, seed):
    del seed
    return self._checked_energy(state)

  def energy(self, state):
    return self._checked_energy(state)

  def check_state(self, state):
    super().check_state(state)
    if self._chol is None:
      arguments.check_fits_state("gradient_noise_variance", self._variance,
                                 state)

  def energy_and_gradient(self, state, seed):
    if self._chol is None:
      arguments.check_fits_state("gradient_noise_variance", self._variance,
                                 state)
    energy, grads = super().energy_and_gradient(state, seed)
    parts = tf.nest.flatten(grads)
    seeds = random.split_seed(seed, len(parts))
    noisy = []
    for g, s in zip(parts, seeds):
      z = random.philox_normal(tf.shape(g), s, g.dtype)
      if self._chol is not None:
        if g.shape[-1] != self._chol.shape[0]:
          raise ValueError(
              f"`gradient_noise_covariance` is {self._chol.shape[0]}x"
              f"{self._chol.shape[0]} but the state has event size "
              f"{g.shape[-1]} (shape {g.shape}).")
        noise = tf.linalg.matvec(tf.constant(self._chol, g.dtype), z)
      else:
        noise = tf.sqrt(tf.constant(self._variance, g.dtype)) * z
      noisy.append(g + noise)
    return energy, pack_like(state, noisy)

  def gradient_noise_variance(self, state, seed):
    del seed
    if self._chol is None:
      arguments.check_fits_state("gradient_noise_variance", self._variance,
                                 state)
    return pack_like(state, [
        tf.broadcast_to(tf.constant(self._variance, p.dtype), tf.shape(p))
        for p in tf.nest.flatten(state)])
