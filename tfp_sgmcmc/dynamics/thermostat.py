"""The SG Nose-Hoover thermostat (Ding et al. 2014): Hamiltonian dynamics
whose friction, one thermostat xi per chain, adapts to hold the kinetic
energy per dimension at the temperature, absorbing gradient noise of
unknown size. The mass matrix M is a `mass.Mass` (or a
`momentum_distribution`, see `mass`).
"""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, expand_to
from tfp_sgmcmc.dynamics.mass import as_mass, drift

__all__ = ["sgnht_step", "sgnht_update"]


def sgnht_step(position, momentum, thermostat, gradient, step_size, noise,
               diffusion, temperature=1., event_ndims=None, refresh=None,
               refresh_temperature=1., momentum_distribution=None):
  """One step of the SG Nose-Hoover thermostat (Ding et al. 2014, Alg. 2).

      r'      = r - h xi r - h grad U~(theta) + sqrt(2 A h T) z
      theta'  = theta + h M^{-1} r'
      xi'     = xi + h (r'^T M^{-1} r' / d - T),       z ~ N(0, M)

  With a mass matrix the thermostat holds 2 K(r') / d, the kinetic energy
  per dimension, at T: in q = M^{-1/2} r the step is the identity-mass
  thermostat with force M^{-1/2} grad U, so the invariant law stays
  exp(-U(theta) - K(r) / T) times the thermostat's.

  xi is one thermostat per chain (shape of the chains' batch), d the number
  of parameters of a chain, A the injected diffusion. The thermostat raises
  the friction while the kinetic energy per dimension exceeds T and lowers
  it otherwise, so it absorbs gradient noise of unknown size.

  `refresh` (a boolean scalar tensor, or None for never): the step starts
  from a fresh r ~ N(0, T0 I), T0 = `refresh_temperature`, instead of
  `momentum`. r enters r' only as (1 - h xi) r, so, as in
  `sghmc_euler_momentum`, the fresh draw is folded into the step's noise:
  r' = -h grad U~ + N(0, (1 - h xi)^2 T0 + 2 A h T) per chain.

  Args:
    position: theta, a structure of tensors (the state).
    momentum: r, same structure.
    thermostat: xi, shape = the chains' batch shape.
    gradient: grad U~(theta), same structure as `position`.
    step_size: h, a scalar or a tensor per chain or per coordinate
      (broadcasting against each part; then the thermostat moves by the
      mean of h_j (r'_j v'_j - T)).
    noise: z ~ N(0, M), same structure as `position`.
    diffusion: A >= 0.
    temperature: T.
    event_ndims: per part (or one for all parts), how many trailing axes
      are parameters; the rest are chain axes, which must be the
      thermostat's. Default: all axes beyond the thermostat's rank. A value
      that disagrees with the thermostat's rank raises a `ValueError`.
    refresh: a boolean scalar tensor, or None for never (above).
    refresh_temperature: T0 of the fresh momentum N(0, T0 M).
    momentum_distribution: N(0, M), or None for the identity.

  Returns:
    (theta', r', xi').

  ```python
  theta, r, xi = tfp_sgmcmc.dynamics.sgnht_step(
      tf.zeros([3, 2]), tf.ones([3, 2]), tf.zeros([3]), tf.zeros([3, 2]),
      step_size=0.1, noise=tf.zeros([3, 2]), diffusion=1.)
  print(theta.shape, xi.shape)  # (3, 2) (3,)
  ```
  """
  parts_r = tf.nest.flatten(momentum)
  if event_ndims is not None:
    _check_event_ndims(event_ndims, parts_r, thermostat.shape.rank)
  dtype = parts_r[0].dtype
  h = as_dtype(step_size, dtype)
  t = as_dtype(temperature, dtype)
  a = as_dtype(diffusion, dtype)
  if h.shape.rank != 0:
    return _sgnht_step_per_coordinate(
        position, momentum, thermostat, gradient, step_size, noise, a, t,
        refresh, refresh_temperature, momentum_distribution)
  scale = tf.sqrt(2. * a * h * t)
  if refresh is not None:
    decay = 1. - h * thermostat
    # One scale per chain, selected: the kick stays one elementwise loop.
    scale = tf.where(refresh, tf.sqrt(
        decay * decay * as_dtype(refresh_temperature, dtype)
        + 2. * a * h * t), scale * tf.ones_like(thermostat))

  def kick(r, g, z):
    if refresh is not None:
      r = tf.where(refresh, tf.zeros_like(r), r)
      return (r - h * expand_to(thermostat, r) * r - h * g
              + expand_to(scale, r) * z)
    return r - h * expand_to(thermostat, r) * r - h * g + scale * z
  new_momentum = tf.nest.map_structure(kick, momentum, gradient, noise)
  new_velocity = as_mass(momentum_distribution).velocity(new_momentum)
  # theta moves by the velocity, an identity drift of M^{-1} r'.
  new_position = drift(position, new_velocity, step_size)
  sq, dim = _summed(lambda r, v: r * v, new_momentum, new_velocity,
                     thermostat)
  new_thermostat = thermostat + h * (sq / tf.cast(dim, dtype) - t)
  return new_position, new_momentum, new_thermostat


def _summed(term, momentum, velocity, thermostat):
  """(sum over every coordinate of every part of term(r, v), per chain;
  the number of coordinates d)."""
  batch_rank = thermostat.shape.rank
  total, dim = tf.zeros_like(thermostat), 0
  for r, v in zip(tf.nest.flatten(momentum), tf.nest.flatten(velocity)):
    axes = list(range(batch_rank, r.shape.rank))
    total = total + tf.reduce_sum(term(r, v), axis=axes)
    dim += int(np.prod(r.shape[batch_rank:]))
  return total, dim


def _sgnht_step_per_coordinate(position, momentum, thermostat, gradient,
                               step_size, noise, diffusion, temperature,
                               refresh, refresh_temperature,
                               momentum_distribution):
  """`sgnht_step` with h a tensor per chain or per coordinate, h_j
  broadcast against each part.

  Coordinate j's time runs at its own h_j, and exp(-U - K(r) / T) times
  the thermostat's law stays invariant only if the one thermostat of a
  chain moves by the mean over its coordinates of h_j (r_j v_j - T), v =
  M^{-1} r (for one h, h (2 K / d - T)); the refresh's scale is per
  coordinate too."""
  dtype = thermostat.dtype
  t0 = as_dtype(refresh_temperature, dtype)

  def kick(r, g, z):
    h = as_dtype(step_size, dtype)
    xi = expand_to(thermostat, r)
    scale = tf.sqrt(2. * diffusion * h * temperature)
    if refresh is not None:
      decay = 1. - h * xi
      scale = tf.where(refresh, tf.sqrt(decay * decay * t0 + scale * scale),
                       scale)
      r = tf.where(refresh, tf.zeros_like(r), r)
    return r - h * xi * r - h * g + scale * z
  new_momentum = tf.nest.map_structure(kick, momentum, gradient, noise)
  new_velocity = as_mass(momentum_distribution).velocity(new_momentum)
  new_position = drift(position, new_velocity, step_size)
  change, dim = _summed(
      lambda r, v: as_dtype(step_size, dtype) * tf.ones_like(r) * (
          r * v - temperature), new_momentum, new_velocity, thermostat)
  new_thermostat = thermostat + change / tf.cast(dim, dtype)
  return new_position, new_momentum, new_thermostat


def _check_event_ndims(event_ndims, parts, batch_rank):
  ndims = tf.nest.flatten(event_ndims)
  if len(ndims) == 1:
    ndims = ndims * len(parts)
  if len(ndims) != len(parts) or any(
      not isinstance(k, int) or p.shape.rank - k != batch_rank
      for k, p in zip(ndims, parts)):
    raise ValueError(
        f"`event_ndims` = {event_ndims!r} does not fit a state of ranks "
        f"{[p.shape.rank for p in parts]} and a thermostat of rank "
        f"{batch_rank} (one per chain): each part's rank less its "
        "event_ndims must be the thermostat's rank. Leave it None to use "
        "the thermostat's rank.")


def sgnht_update(position, momentum, thermostat, gradient, step_count,
                 step_size, diffusion, temperature, momentum_temperature,
                 seed, momentum_distribution=None):
  """One SGNHT transition given grad U~ at `position` (the kernel's update:
  `sgnht_step`, with mass matrix M = `momentum_distribution`'s or I).

  At `step_count` 0 the step starts from a fresh momentum N(0, T M) (T =
  `momentum_temperature`, the kernel's temperature), folded into the step's
  noise (`sgnht_step(refresh=...)`: one draw and no branch).
  The update is `sgnht_step`'s:

      r'      = r - h xi r - h grad U~(theta) + sqrt(2 A h T) z
      theta'  = theta + h M^{-1} r'
      xi'     = xi + h (r'^T M^{-1} r' / d - T),       z ~ N(0, M)

  Args:
    position: theta, a structure of tensors.
    momentum: r, same structure.
    thermostat: xi, one per chain.
    gradient: grad U~(theta), same structure as `position`.
    step_count: the number of steps taken before this one.
    step_size: h.
    diffusion: A >= 0.
    temperature: T.
    momentum_temperature: T of the fresh momentum at step 0.
    seed: the step's stateless seed, int32[2], used as `one_step` uses it.
    momentum_distribution: N(0, M), or None for the identity.

  Returns:
    (theta', r', xi').

  ```python
  theta, r, xi = tfp_sgmcmc.dynamics.sgnht_update(
      tf.zeros([3, 2]), tf.zeros([3, 2]), tf.ones([3]), tf.ones([3, 2]),
      step_count=0, step_size=0.1, diffusion=1., temperature=1.,
      momentum_temperature=1., seed=[0, 1])
  print(theta.shape, xi.shape)  # (3, 2) (3,)
  ```
  """
  _, noise_seed, _ = random.derive_seeds(seed, 3)
  noise = as_mass(momentum_distribution).sample(momentum, noise_seed)
  return sgnht_step(position, momentum, thermostat, gradient, step_size,
                    noise, diffusion, temperature,
                    refresh=tf.equal(step_count, 0),
                    refresh_temperature=momentum_temperature,
                    momentum_distribution=momentum_distribution)
