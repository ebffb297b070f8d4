"""Pure update rules of the SG-MCMC samplers, one place for each equation.

Every function here maps a structure of tensors (one tensor or a list, as the
chain state) to a new structure, given the stochastic gradient grad U~ already
evaluated where the rule needs it. They know nothing of TFP kernel results or
Keras variables: the `tfp.mcmc` kernels and the Keras adapter both call them,
so the two front ends cannot disagree about the math.

Notation (Chen et al. 2014; Chen, Ding, Carin 2015): position theta, momentum
r (identity mass), step size h (epsilon), friction C (D in the splitting
paper), noise-model estimate B-hat, temperature T (T = 1 samples the
posterior; T < 1 a cold posterior proportional to exp(-U / T)).
"""

import tensorflow as tf
import tensorflow_probability as tfp

__all__ = [
    "standard_normal_like",
    "langevin_step",
    "drift",
    "sghmc_euler_momentum",
    "sghmc_splitting_momentum",
]


def _map(fn, *structures):
  return tf.nest.map_structure(fn, *structures)


def standard_normal_like(structure, seed):
  """Independent N(0, 1) draws shaped like `structure`, from a stateless seed."""
  parts = tf.nest.flatten(structure)
  seeds = tfp.random.split_seed(seed, n=len(parts))
  draws = [tf.random.stateless_normal(tf.shape(p), seed=s, dtype=p.dtype)
           for p, s in zip(parts, seeds)]
  return tf.nest.pack_sequence_as(structure, draws)


def _scale(x, dtype):
  return tf.cast(x, dtype)


def langevin_step(position, gradient, step_size, noise, temperature=1.):
  """SGLD (Welling & Teh 2011): one Euler-Maruyama step of Langevin dynamics.

      theta' = theta - h grad U~(theta) + sqrt(2 h T) xi,   xi ~ N(0, I).

  (Welling & Teh write the step as epsilon / 2 with noise N(0, epsilon); here
  h = epsilon / 2.)

  Args:
    position: theta, a structure of tensors.
    gradient: grad U~(theta), same structure.
    step_size: h, a scalar or a structure broadcastable against `position`.
    noise: standard-normal draws xi, same structure.
    temperature: T.
  """
  def step(theta, g, xi):
    h = _scale(step_size, theta.dtype)
    t = _scale(temperature, theta.dtype)
    return theta - h * g + tf.sqrt(2. * h * t) * xi
  return _map(step, position, gradient, noise)


def drift(position, momentum, step_size):
  """The position flow of Hamiltonian dynamics: theta' = theta + h r."""
  return _map(lambda theta, r: theta + _scale(step_size, theta.dtype) * r,
              position, momentum)


def sghmc_euler_momentum(momentum, gradient, step_size, friction, noise,
                         noise_estimate=0., temperature=1.):
  """SGHMC momentum update, Euler form (Chen et al. 2014, Algorithm 2).

      r' = r - h grad U~(theta) - h C r + N(0, 2 (C T - B-hat) h),

  followed by `drift(theta, r', h)`. With C = B-hat = 0 it is naive SGHMC
  (stochastic-gradient HMC without friction or injected noise). In the
  SGD-with-momentum units v = h r, eta = h^2, alpha = h C, beta-hat = h B-hat
  the same step reads v' = v - eta grad U~ - alpha v + N(0, 2 (alpha -
  beta-hat) eta).

  `noise_estimate` B-hat is a scalar or a per-coordinate structure; where it
  exceeds C T the injected variance is clipped at zero.
  """
  def step(r, g, xi, b_hat):
    h = _scale(step_size, r.dtype)
    c = _scale(friction, r.dtype)
    t = _scale(temperature, r.dtype)
    variance = tf.maximum(2. * (c * t - _scale(b_hat, r.dtype)) * h, 0.)
    return r - h * g - h * c * r + tf.sqrt(variance) * xi
  b_hat = _broadcast_structure(noise_estimate, momentum)
  return _map(step, momentum, gradient, noise, b_hat)


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
  def step(r, g, xi, b_hat):
    h = _scale(step_size, r.dtype)
    c = _scale(friction, r.dtype)
    t = _scale(temperature, r.dtype)
    decay = tf.exp(-0.5 * c * h)
    variance = tf.maximum(2. * (c * t - _scale(b_hat, r.dtype)) * h, 0.)
    return decay * (decay * r - h * g + tf.sqrt(variance) * xi)
  b_hat = _broadcast_structure(noise_estimate, momentum)
  return _map(step, momentum, gradient, noise, b_hat)


def _broadcast_structure(value, structure):
  """A scalar becomes one value per part; a structure is used as given."""
  if tf.nest.is_nested(structure) and not tf.nest.is_nested(value):
    return tf.nest.map_structure(lambda _: value, structure)
  return value
