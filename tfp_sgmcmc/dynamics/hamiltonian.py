"""Hamiltonian dynamics with friction: SGHMC (Chen, Fox & Guestrin 2014)
with its Euler and splitting integrators (Chen, Ding & Carin 2015), and the
SG Nose-Hoover thermostat (Ding et al. 2014).

Notation: position theta, momentum r (identity mass), step size h, friction
C, noise-model estimate B-hat, temperature T (T = 1 samples the posterior).
`sghmc_update` and `sgnht_update` are one whole step each (noise drawn from
the step's seed), called by the `tfp.mcmc` kernels and the Keras samplers
alike; the other functions are their pieces.
"""

import math

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import (as_dtype, broadcast_structure, expand_to,
                                   sum_event)

__all__ = ["drift", "sghmc_euler_momentum", "sghmc_splitting_momentum",
           "kinetic_energy", "sgnht_step", "INTEGRATORS", "is_refresh_step",
           "refresh_momentum", "gradient_position", "sghmc_update",
           "sgnht_update", "sgd_momentum_to_sghmc", "check_sghmc_parameters"]

INTEGRATORS = ("euler", "splitting")


def drift(position, momentum, step_size):
  """The position flow of Hamiltonian dynamics: theta' = theta + h r."""
  return tf.nest.map_structure(
      lambda theta, r, h: theta + as_dtype(h, theta.dtype) * r,
      position, momentum, broadcast_structure(step_size, position))


def sghmc_euler_momentum(momentum, gradient, step_size, friction, noise,
                         noise_estimate=0., temperature=1., refresh=None,
                         refresh_temperature=1.):
  """SGHMC momentum update, Euler form (Chen et al. 2014, Algorithm 2).

      r' = r - h grad U~(theta) - h C r + N(0, 2 (C T - B-hat) h),

  followed by `drift(theta, r', h)`. With C = B-hat = 0 it is naive SGHMC
  (stochastic-gradient HMC without friction or injected noise). In the
  SGD-with-momentum units v = h r, eta = h^2, alpha = h C, beta-hat = h B-hat
  the same step reads v' = v - eta grad U~ - alpha v + N(0, 2 (alpha -
  beta-hat) eta).

  `noise_estimate` B-hat is a scalar or a per-coordinate structure; where it
  exceeds C T the injected variance is clipped at zero.

  `refresh` (a boolean scalar tensor, or None for never) says that this
  step starts from a fresh momentum r ~ N(0, T0 I), T0 =
  `refresh_temperature`, instead of `momentum` (Algorithm 2's resampling).
  Euler's r enters r' only as (1 - h C) r, independent of the gradient and
  of the injected noise, so on such a step

      r' = -h grad U~(theta) + N(0, (1 - h C)^2 T0 + 2 (C T - B-hat) h)

  exactly in distribution: the fresh draw is folded into the step's one
  standard normal per coordinate, with no second draw and no branch.
  """
  def step(r, g, xi, b_hat, h):
    h = as_dtype(h, r.dtype)
    c = as_dtype(friction, r.dtype)
    t = as_dtype(temperature, r.dtype)
    variance = tf.maximum(2. * (c * t - as_dtype(b_hat, r.dtype)) * h, 0.)
    scale = tf.sqrt(variance)
    if refresh is not None:
      # Selects between scales, not a square root of a select: with
      # constant h, C and T both scales are constants and the select joins
      # the update's elementwise loop.
      decay = 1. - h * c
      scale = tf.where(refresh, tf.sqrt(
          variance + decay * decay * as_dtype(refresh_temperature, r.dtype)),
                       scale)
      r = tf.where(refresh, tf.zeros_like(r), r)
    return r - h * g - h * c * r + scale * xi
  b_hat = broadcast_structure(noise_estimate, momentum)
  return tf.nest.map_structure(step, momentum, gradient, noise, b_hat,
                               broadcast_structure(step_size, momentum))


def sghmc_splitting_momentum(momentum, gradient, step_size, friction, noise,
                             noise_estimate=0., temperature=1.):
  """The B-O-B core of the symmetric splitting (ABOBA) integrator.

  Chen, Ding, Carin (2015), Section 4: with the half drifts
  theta1 = theta + r h/2 before and theta' = theta1 + r' h/2 after,

      r1 = exp(-C h / 2) r
      r2 = r1 - h grad U~(theta1) + N(0, 2 (C T - B-hat) h)
      r' = exp(-C h / 2) r2,

  where `gradient` is grad U~ at the half-drifted position theta1. The friction
  flow is solved exactly, which is why the scheme stays stable at step sizes
  where the Euler form explodes.
  """
  def step(r, g, xi, b_hat, h):
    h = as_dtype(h, r.dtype)
    c = as_dtype(friction, r.dtype)
    t = as_dtype(temperature, r.dtype)
    decay = tf.exp(-0.5 * c * h)
    variance = tf.maximum(2. * (c * t - as_dtype(b_hat, r.dtype)) * h, 0.)
    return decay * (decay * r - h * g + tf.sqrt(variance) * xi)
  b_hat = broadcast_structure(noise_estimate, momentum)
  return tf.nest.map_structure(step, momentum, gradient, noise, b_hat,
                               broadcast_structure(step_size, momentum))


def kinetic_energy(momentum, momentum_std=1., batch_ndims=0):
  """K(r) = |r|^2 / (2 sigma^2), one value per chain (mass sigma^2 I)."""
  terms = tf.nest.map_structure(
      lambda r: sum_event(
          0.5 * tf.square(r) / tf.square(as_dtype(momentum_std, r.dtype)),
          batch_ndims),
      momentum)
  return tf.add_n(tf.nest.flatten(terms))


def sgnht_step(position, momentum, thermostat, gradient, step_size, noise,
               diffusion, temperature=1., event_ndims=None, refresh=None,
               refresh_temperature=1.):
  """One step of the SG Nose-Hoover thermostat (Ding et al. 2014, Alg. 2).

      r'      = r - h xi r - h grad U~(theta) + sqrt(2 A h T) z
      theta'  = theta + h r'
      xi'     = xi + h (r'^T r' / d - T)

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
    position, momentum, gradient, noise: structures like the state.
    thermostat: xi, shape = the chains' batch shape.
    step_size: h.
    diffusion: A >= 0.
    temperature: T.
    event_ndims: per part (or one for all parts), how many trailing axes
      are parameters; the rest are chain axes, which must be the
      thermostat's. Default: all axes beyond the thermostat's rank. A value
      that disagrees with the thermostat's rank raises a `ValueError`.
  """
  parts_r = tf.nest.flatten(momentum)
  if event_ndims is not None:
    _check_event_ndims(event_ndims, parts_r, thermostat.shape.rank)
  dtype = parts_r[0].dtype
  h = as_dtype(step_size, dtype)
  t = as_dtype(temperature, dtype)
  a = as_dtype(diffusion, dtype)
  batch_rank = thermostat.shape.rank

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
  new_position = drift(position, new_momentum, step_size)
  sq = tf.zeros_like(thermostat)
  dim = 0
  for r in tf.nest.flatten(new_momentum):
    axes = list(range(batch_rank, r.shape.rank))
    sq = sq + tf.reduce_sum(tf.square(r), axis=axes)
    dim += int(np.prod(r.shape[batch_rank:]))
  new_thermostat = thermostat + h * (sq / tf.cast(dim, dtype) - t)
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


def is_refresh_step(step_count, period):
  """True where SGHMC's step `step_count` starts from a fresh momentum
  N(0, T I): step 0 and, with a resampling period m, every multiple of m."""
  if period is None:
    return tf.equal(step_count, 0)
  return tf.equal(step_count % period, 0)


def refresh_momentum(momentum, step_count, period, temperature, seed):
  """The momentum SGHMC's step `step_count` starts from, drawn.

  A fresh draw r ~ N(0, T I) at step 0 and, with a resampling period m, at
  every multiple of m (`is_refresh_step`); otherwise `momentum` as carried.
  The splitting integrator needs it drawn (its half drift moves theta by r
  before the gradient); the Euler update folds the fresh draw into its
  noise instead (`sghmc_update`), without a branch or a second draw.
  `seed` is the step's seed (that of `one_step`); the draw depends on
  nothing else, so a caller may make it ahead of the step (the Keras
  adapter does, to place the splitting integrator's half drift before the
  gradient).
  """
  _, _, momentum_seed = random.derive_seeds(seed, 3)
  dtype = tf.nest.flatten(momentum)[0].dtype
  momentum_scale = tf.sqrt(as_dtype(temperature, dtype))
  return tf.cond(
      is_refresh_step(step_count, period),
      lambda: tf.nest.map_structure(
          lambda z: momentum_scale * z,
          random.standard_normal_like(momentum, momentum_seed)),
      lambda: momentum)


def gradient_position(position, momentum, step_size, integrator):
  """Where SGHMC's step evaluates grad U~: theta (Euler) or the half-drifted
  theta + r h/2 (splitting)."""
  if integrator == "euler":
    return position
  return drift(position, momentum, arguments.scale_step(0.5, step_size))


def sghmc_update(grad_position, momentum, gradient, step_size, friction,
                 noise_estimate, temperature, integrator, seed,
                 refresh=None, refresh_temperature=1.):
  """One SGHMC transition given grad U~ at `grad_position` (the kernel's
  update, after `gradient_position`).

  Returns (theta', r'). `seed` is the step's seed, used as `one_step` uses
  it. Euler: `refresh` (`is_refresh_step`) says the step starts from a
  fresh momentum N(0, T0 I), T0 = `refresh_temperature`, in place of
  `momentum`; it is folded into the step's noise
  (`sghmc_euler_momentum`). Splitting: `momentum` is already the
  refreshed one (`refresh_momentum`) and `refresh` is ignored.
  """
  _, noise_seed, _ = random.derive_seeds(seed, 3)
  noise = random.standard_normal_like(momentum, noise_seed)
  if integrator == "euler":
    new_momentum = sghmc_euler_momentum(
        momentum, gradient, step_size, friction, noise, noise_estimate,
        temperature, refresh=refresh, refresh_temperature=refresh_temperature)
  else:
    new_momentum = sghmc_splitting_momentum(
        momentum, gradient, step_size, friction, noise, noise_estimate,
        temperature)
  drift_size = (step_size if integrator == "euler" else
                arguments.scale_step(0.5, step_size))
  return drift(grad_position, new_momentum, drift_size), new_momentum


def sgd_momentum_to_sghmc(learning_rate, momentum_decay, noise_estimate=0.):
  """(step_size h, friction C, noise_estimate B-hat) from the SGD-with-
  momentum units (eta, alpha, beta-hat): h = sqrt(eta), C = alpha / h,
  B-hat = beta-hat / h (Chen et al. 2014, Section 3.3)."""
  arguments.check_positive("learning_rate", learning_rate)
  arguments.check_positive("momentum_decay", momentum_decay)
  arguments.check_positive("noise_estimate", noise_estimate, allow_zero=True)
  h = math.sqrt(float(learning_rate))
  return h, float(momentum_decay) / h, float(noise_estimate) / h


def sgnht_update(position, momentum, thermostat, gradient, step_count,
                 step_size, diffusion, temperature, momentum_temperature,
                 seed):
  """One SGNHT transition given grad U~ at `position` (the kernel's update).

  At `step_count` 0 the step starts from a fresh momentum N(0, T I) (T =
  `momentum_temperature`, the kernel's temperature), folded into the step's
  noise (`sgnht_step(refresh=...)`: one draw and no branch).
  `seed` is the step's seed, used as `one_step` uses it. Returns (position,
  momentum, thermostat).
  """
  _, noise_seed, _ = random.derive_seeds(seed, 3)
  noise = random.standard_normal_like(momentum, noise_seed)
  return sgnht_step(position, momentum, thermostat, gradient, step_size,
                    noise, diffusion, temperature,
                    refresh=tf.equal(step_count, 0),
                    refresh_temperature=momentum_temperature)


def check_sghmc_parameters(friction, noise_estimate, integrator,
                           momentum_resampling_period, temperature):
  """The argument checks of SGHMC other than target, step size and the sign
  of the friction (the kernel's and the Keras sampler's)."""
  if integrator not in INTEGRATORS:
    raise ValueError(f"`integrator` must be one of {INTEGRATORS}; got "
                     f"{integrator!r}.")
  arguments.check_positive("temperature", temperature)
  if isinstance(noise_estimate, str):
    if noise_estimate != "empirical_fisher":
      raise ValueError("`noise_estimate` must be a number, a structure of "
                       "per-coordinate values, or 'empirical_fisher'; got "
                       f"{noise_estimate!r}.")
  else:
    for value in tf.nest.flatten(noise_estimate):
      arguments.check_positive("noise_estimate", value, allow_zero=True)
      b = arguments.current_value(value)
      c = arguments.current_value(friction)
      t = arguments.current_value(temperature)
      if b is not None and c is not None and t is not None and (
          b > c * t).any():
        raise ValueError(
            f"`friction` C = {friction!r} must be >= `noise_estimate` "
            f"B-hat = {value!r} (times the temperature): the injected "
            "noise has variance 2 (C T - B-hat) h.")
  period = momentum_resampling_period
  if period is not None and (
      isinstance(period, bool) or not isinstance(period, (int, np.integer))
      or period < 1):
    raise ValueError("`momentum_resampling_period` must be None or an "
                     f"integer >= 1; got {period!r}.")
