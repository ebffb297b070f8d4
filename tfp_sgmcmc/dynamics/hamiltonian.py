"""Hamiltonian dynamics with friction: SGHMC (Chen, Fox & Guestrin 2014)
with its Euler and splitting integrators (Chen, Ding & Carin 2015), and the
SG Nose-Hoover thermostat (Ding et al. 2014).

Notation: position theta, momentum r, mass matrix M (kinetic energy
K(r) = r^T M^{-1} r / 2), step size h, friction C, noise-model estimate
B-hat, temperature T (T = 1 samples the posterior). `sghmc_update` and
`sgnht_update` are one whole step each (noise drawn from the step's seed),
called by the `tfp.mcmc` kernels and the Keras samplers alike; the other
functions are their pieces.

The mass matrix M is a `mass.Mass` (`mass.as_mass` of TFP's
`momentum_distribution` N(0, M), None for the identity): every update here
draws its noise with `Mass.sample` and moves theta with `Mass.drift`
(theta + h M^{-1} r). The mass matrix's functions (`sample_momentum`,
`velocity`, `drift`, `kinetic_energy`, the distribution helpers) live in
`mass`, SGNHT in `thermostat`; both are importable from here too.

The friction acts on r itself and the injected noise is scaled by M (the
friction matrix is C M), so for any M the momentum's part of the dynamics,
dr = -C r dt + N(0, 2 C T M dt), leaves N(0, T M) invariant: its drift
matrix A = C I and diffusion D = C T M satisfy A (T M) + (T M) A^T = 2 D.
(The other pairing, dr = -C M^{-1} r dt + N(0, 2 C T M dt), does not: it
needs D = C T I.) In the velocity v = M^{-1} r it is preconditioned SGHMC,
dtheta = v dt, dv = -M^{-1} grad U dt - C v dt + N(0, 2 C T M^{-1} dt),
with one friction for every coordinate. AMAGOLD's friction beta and its
momentum_std sigma (M = sigma^2 I) are the same convention.
"""

import math

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, broadcast_structure
# The mass matrix and SGNHT, re-exported for the callers of this module.
from tfp_sgmcmc.dynamics.mass import (as_mass, batch_momentum_distribution,  # pylint: disable=unused-import
                                      check_momentum_distribution,
                                      diagonal_momentum_distribution, drift,
                                      kinetic_energy, sample_momentum,
                                      velocity)
from tfp_sgmcmc.dynamics.thermostat import sgnht_step, sgnht_update  # pylint: disable=unused-import

__all__ = ["drift", "sample_momentum", "velocity",
           "batch_momentum_distribution", "diagonal_momentum_distribution",
           "check_momentum_distribution", "sghmc_euler_momentum",
           "sghmc_splitting_momentum",
           "kinetic_energy", "sgnht_step", "INTEGRATORS", "is_refresh_step",
           "refresh_momentum", "gradient_position", "sghmc_update",
           "sgnht_update", "sgd_momentum_to_sghmc", "check_sghmc_parameters"]

INTEGRATORS = ("euler", "splitting")


def sghmc_euler_momentum(momentum, gradient, step_size, friction, noise,
                         noise_estimate=0., temperature=1., refresh=None,
                         refresh_temperature=1.):
  """SGHMC momentum update, Euler form (Chen et al. 2014, Algorithm 2).

      r' = r - h grad U~(theta) - h C r + N(0, 2 (C T - B-hat) h M),

  followed by `drift(theta, r', h)`, theta' = theta + h M^{-1} r'. The
  mass M enters only through `noise`: standard normal draws for M = I,
  draws of N(0, M) (`sample_momentum`) otherwise, with B-hat = 0. With
  C = B-hat = 0 it is naive SGHMC (stochastic-gradient HMC without
  friction or injected noise). In the
  SGD-with-momentum units v = h r, eta = h^2, alpha = h C, beta-hat = h B-hat
  the same step reads v' = v - eta grad U~ - alpha v + N(0, 2 (alpha -
  beta-hat) eta).

  `noise_estimate` B-hat is a scalar or a per-coordinate structure; where it
  exceeds C T the injected variance is clipped at zero.

  `refresh` (a boolean scalar tensor, or None for never) says that this
  step starts from a fresh momentum r ~ N(0, T0 M), T0 =
  `refresh_temperature`, instead of `momentum` (Algorithm 2's resampling).
  Euler's r enters r' only as (1 - h C) r, independent of the gradient and
  of the injected noise, so on such a step

      r' = -h grad U~(theta) + N(0, ((1 - h C)^2 T0 + 2 (C T - B-hat) h) M)

  exactly in distribution: the fresh draw is folded into the step's one
  standard normal per coordinate, with no second draw and no branch.

  Args:
    momentum: r, a structure of tensors.
    gradient: grad U~(theta), same structure.
    step_size: h, a scalar or a structure broadcastable against `momentum`.
    friction: C.
    noise: draws of N(0, M) (standard normal for M = I), same structure.
    noise_estimate: B-hat, a scalar or a per-coordinate structure.
    temperature: T.
    refresh: a boolean scalar tensor, or None for never (above).
    refresh_temperature: T0 of the fresh momentum.

  Returns:
    r', the same structure as `momentum`.

  ```python
  r = tfp_sgmcmc.dynamics.sghmc_euler_momentum(
      tf.ones([2]), tf.ones([2]), step_size=0.1, friction=1.,
      noise=tf.zeros([2]))
  print(r.numpy())  # 1 - 0.1 - 0.1 = [0.8 0.8]
  ```
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
      r2 = r1 - h grad U~(theta1) + N(0, 2 (C T - B-hat) h M)
      r' = exp(-C h / 2) r2,

  where `gradient` is grad U~ at the half-drifted position theta1 (the
  drifts move by M^{-1} r h/2; `noise` is drawn from N(0, M), see
  `sghmc_euler_momentum`). The friction
  flow is solved exactly, which is why the scheme stays stable at step sizes
  where the Euler form explodes.

  Args:
    momentum: r, a structure of tensors.
    gradient: grad U~(theta1), same structure.
    step_size: h, a scalar or a structure broadcastable against `momentum`.
    friction: C.
    noise: draws of N(0, M) (standard normal for M = I), same structure.
    noise_estimate: B-hat, a scalar or a per-coordinate structure.
    temperature: T.

  Returns:
    r', the same structure as `momentum`.

  ```python
  r = tfp_sgmcmc.dynamics.sghmc_splitting_momentum(
      tf.ones([2]), tf.zeros([2]), step_size=0.1, friction=1.,
      noise=tf.zeros([2]))
  print(r.numpy())  # exp(-C h) = [0.905 0.905]
  ```
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


def is_refresh_step(step_count, period):
  """True where SGHMC's step `step_count` starts from a fresh momentum
  N(0, T M): step 0 and, with a resampling period m, every multiple of m.

  Args:
    step_count: the number of steps taken before this one.
    period: m, or None to refresh at step 0 only.

  Returns:
    A boolean scalar tensor.

  ```python
  print(tfp_sgmcmc.dynamics.hamiltonian.is_refresh_step(10, 5).numpy())
  ```
  """
  if period is None:
    return tf.equal(step_count, 0)
  return tf.equal(step_count % period, 0)


def refresh_momentum(momentum, step_count, period, temperature, seed,
                     momentum_distribution=None):
  """The momentum SGHMC's step `step_count` starts from, drawn.

  A fresh draw r ~ N(0, T M) (`sample_momentum`) at step 0 and, with a
  resampling period m, at every multiple of m (`is_refresh_step`);
  otherwise `momentum` as carried.
  The splitting integrator needs it drawn (its half drift moves theta by r
  before the gradient); the Euler update folds the fresh draw into its
  noise instead (`sghmc_update`), without a branch or a second draw.
  `seed` is the step's seed (that of `one_step`); the draw depends on
  nothing else, so a caller may make it ahead of the step (the Keras
  adapter does, to place the splitting integrator's half drift before the
  gradient).

  Args:
    momentum: r as carried, a structure of tensors.
    step_count: the number of steps taken before this one.
    period: m, or None to refresh at step 0 only.
    temperature: T of the fresh draw N(0, T M).
    seed: the step's stateless seed, int32[2].
    momentum_distribution: N(0, M), or None for the identity.

  Returns:
    The momentum the step starts from, the same structure as `momentum`.

  ```python
  r = tfp_sgmcmc.dynamics.hamiltonian.refresh_momentum(
      tf.zeros([2]), step_count=0, period=None, temperature=1.,
      seed=[0, 1])
  print(r.shape)  # (2,): a fresh draw at step 0
  ```
  """
  _, _, momentum_seed = random.derive_seeds(seed, 3)
  dtype = tf.nest.flatten(momentum)[0].dtype
  momentum_scale = tf.sqrt(as_dtype(temperature, dtype))
  return tf.cond(
      is_refresh_step(step_count, period),
      lambda: tf.nest.map_structure(
          lambda z: momentum_scale * z,
          as_mass(momentum_distribution).sample(momentum, momentum_seed)),
      lambda: momentum)


def gradient_position(position, momentum, step_size, integrator,
                      momentum_distribution=None):
  """Where SGHMC's step evaluates grad U~: theta (Euler) or the half-drifted
  theta + M^{-1} r h/2 (splitting).

  Args:
    position: theta, a structure of tensors.
    momentum: r, same structure.
    step_size: h.
    integrator: "euler" or "splitting".
    momentum_distribution: N(0, M), or None for the identity.

  Returns:
    theta or theta1, the same structure as `position`.

  ```python
  print(tfp_sgmcmc.dynamics.hamiltonian.gradient_position(
      tf.zeros([2]), tf.ones([2]), 0.2, "splitting").numpy())  # [0.1 0.1]
  ```
  """
  if integrator == "euler":
    return position
  return as_mass(momentum_distribution).drift(
      position, momentum, arguments.scale_step(0.5, step_size))


def sghmc_update(grad_position, momentum, gradient, step_size, friction,
                 noise_estimate, temperature, integrator, seed,
                 refresh=None, refresh_temperature=1.,
                 momentum_distribution=None):
  """One SGHMC transition given grad U~ at `grad_position` (the kernel's
  update, after `gradient_position`).

  With mass matrix M (`momentum_distribution`, None for I) and friction C:

      Euler:      r' = r - h grad U~(theta) - h C r + N(0, 2 C T h M)
                  theta' = theta + h M^{-1} r'
      splitting:  theta1 = theta + M^{-1} r h/2
                  r' = e^{-Ch/2} (e^{-Ch/2} r - h grad U~(theta1)
                                  + N(0, 2 C T h M))
                  theta' = theta1 + M^{-1} r' h/2

  (B-hat subtracted from C T per coordinate where M = I). The friction acts
  on r and the noise is scaled by M, the pairing that keeps N(0, T M)
  invariant (module docstring).

  Args:
    grad_position: theta (Euler) or theta1 (splitting), where `gradient`
      was evaluated.
    momentum: r (splitting: already refreshed by `refresh_momentum`).
    gradient: grad U~ at `grad_position`.
    step_size: h, a scalar or one per part.
    friction: C.
    noise_estimate: B-hat (0 with a mass matrix).
    temperature: T of the injected noise.
    integrator: "euler" or "splitting".
    seed: the step's seed, used as `one_step` uses it.
    refresh: Euler: a boolean scalar tensor (`is_refresh_step`) saying the
      step starts from a fresh momentum N(0, T0 M), folded into the step's
      noise (`sghmc_euler_momentum`); ignored by the splitting integrator.
    refresh_temperature: T0.
    momentum_distribution: N(0, M), or None for the identity.

  Returns:
    (theta', r').

  ```python
  theta, r = tfp_sgmcmc.dynamics.sghmc_update(
      tf.zeros([2]), tf.zeros([2]), tf.ones([2]), step_size=0.1,
      friction=1., noise_estimate=0., temperature=1., integrator="euler",
      seed=[0, 1])
  print(theta.shape, r.shape)  # (2,) (2,)
  ```
  """
  _, noise_seed, _ = random.derive_seeds(seed, 3)
  mass = as_mass(momentum_distribution)
  noise = mass.sample(momentum, noise_seed)
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
  return mass.drift(grad_position, new_momentum, drift_size), new_momentum


def sgd_momentum_to_sghmc(learning_rate, momentum_decay, noise_estimate=0.):
  """(step_size h, friction C, noise_estimate B-hat) from the SGD-with-
  momentum units (eta, alpha, beta-hat): h = sqrt(eta), C = alpha / h,
  B-hat = beta-hat / h (Chen et al. 2014, Section 3.3).

  Args:
    learning_rate: eta > 0.
    momentum_decay: alpha > 0.
    noise_estimate: beta-hat >= 0.

  Returns:
    (h, C, B-hat) as Python floats.

  ```python
  print(tfp_sgmcmc.dynamics.hamiltonian.sgd_momentum_to_sghmc(0.01, 0.1))
  # (0.1, 1.0, 0.0)
  ```
  """
  arguments.check_positive("learning_rate", learning_rate)
  arguments.check_positive("momentum_decay", momentum_decay)
  arguments.check_positive("noise_estimate", noise_estimate, allow_zero=True)
  h = math.sqrt(float(learning_rate))
  return h, float(momentum_decay) / h, float(noise_estimate) / h


def check_sghmc_parameters(friction, noise_estimate, integrator,
                           momentum_resampling_period, temperature,
                           momentum_distribution=None):
  """The argument checks of SGHMC other than target, step size and the sign
  of the friction (the kernel's and the Keras sampler's).

  Args:
    friction: C.
    noise_estimate: B-hat, a number, a per-coordinate structure or
      "empirical_fisher"; at most C T.
    integrator: one of `INTEGRATORS`.
    momentum_resampling_period: None or an integer >= 1.
    temperature: T > 0.
    momentum_distribution: N(0, M), or None; with one, B-hat must be 0.

  Returns:
    None.

  Raises:
    ValueError: naming the argument, the value seen and the fix.

  ```python
  tfp_sgmcmc.dynamics.hamiltonian.check_sghmc_parameters(
      friction=1., noise_estimate=0., integrator="euler",
      momentum_resampling_period=None, temperature=1.)  # passes
  ```
  """
  if momentum_distribution is not None and (
      isinstance(noise_estimate, str) or any(
          arguments.static_value(b) is None
          or np.any(arguments.static_value(b) != 0)
          for b in tf.nest.flatten(noise_estimate))):
    raise ValueError(
        f"`noise_estimate` = {noise_estimate!r} with a "
        "`momentum_distribution`: the injected noise N(0, 2 (C T M - B-hat) "
        "h) is drawn as a multiple of a draw from N(0, M), which cannot "
        "subtract a per-coordinate B-hat. Use noise_estimate=0 with a mass "
        "matrix (or the identity mass, momentum_distribution=None, with "
        "B-hat).")
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
      arguments.check_noise_within_friction(friction, value, temperature)
  if momentum_resampling_period is not None:
    arguments.check_integer("momentum_resampling_period",
                            momentum_resampling_period,
                            hint=" (Or None: never resampled.)")
