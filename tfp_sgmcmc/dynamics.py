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
    "amagold_momentum",
    "energy_accumulator_increment",
    "kinetic_energy",
]


# One explicit counter-based generator rather than "auto_select", whose choice
# may change between TF versions. Integer draws (minibatch indices) agree
# between XLA and TF kernels; float draws do not (the two convert bits to
# floats differently), so a chain is reproducible from its seed within one
# compilation mode.
RNG_ALG = "philox"


def _map(fn, *structures):
  return tf.nest.map_structure(fn, *structures)


def standard_normal_like(structure, seed):
  """Independent N(0, 1) draws shaped like `structure`, from a stateless seed."""
  parts = tf.nest.flatten(structure)
  seeds = tfp.random.split_seed(seed, n=len(parts))
  draws = [tf.random.stateless_normal(tf.shape(p), seed=s, dtype=p.dtype,
                                     alg=RNG_ALG)
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


def _sum_event(x, batch_ndims):
  """Sums `x` over its event axes, those after the first `batch_ndims`."""
  return tf.reduce_sum(x, axis=list(range(batch_ndims, x.shape.rank)))


def amagold_momentum(momentum, gradient, step_size, friction, noise,
                     momentum_std=1.):
  """AMAGOLD's stochastic leapfrog momentum update (Zhang et al. 2020).

  Algorithm 2, line 12, with step size epsilon, friction beta and momentum
  standard deviation sigma (mass sigma^2):

      r' = ((1 - eps beta) r - eps grad U~(theta) + eta) / (1 + eps beta),
      eta = sqrt(4 eps beta) sigma xi ~ N(0, 4 eps beta sigma^2),

  equivalently r' = r - eps grad U~ - eps beta (r + r') + eta, the
  time-symmetric form whose reverse move has a tractable density. With
  beta = 0 it is the leapfrog kick r' = r - eps grad U. In the SGD units of
  Appendix F (v = eps sigma^-2 r, b = eps beta, h = eps^2 sigma^-2) the same
  step reads v' = ((1 - b) v - h grad U~ + 2 sqrt(b h) xi) / (1 + b).

  Args:
    momentum: r_{t-1/2}, a structure of tensors.
    gradient: grad U~_t(theta_t), same structure.
    step_size: eps, a scalar or a tensor broadcastable against each part.
    friction: beta >= 0.
    noise: standard-normal draws xi, same structure as `momentum`.
    momentum_std: sigma > 0.
  """
  def step(r, g, xi):
    eps = _scale(step_size, r.dtype)
    a = eps * _scale(friction, r.dtype)
    sigma = _scale(momentum_std, r.dtype)
    eta = tf.sqrt(4. * a) * sigma * xi
    return ((1. - a) * r - eps * g + eta) / (1. + a)
  return _map(step, momentum, gradient, noise)


def energy_accumulator_increment(gradient, momentum, new_momentum, step_size,
                                 momentum_std=1., batch_ndims=0):
  """AMAGOLD's energy-accumulator increment (Algorithm 2, line 13).

      rho_{t+1/2} - rho_{t-1/2}
          = 1/2 eps sigma^-2 grad U~_t(theta_t)^T (r_{t-1/2} + r_{t+1/2}),

  summed over every coordinate of every part, one value per chain. Summed over
  the T inner steps, rho is log of the product in eq. (6) of the paper minus
  the kinetic-energy change: the log-probability of the momentum-flipped
  reverse path over the forward path is K(r) - K(r') + rho.

  Args:
    gradient: grad U~_t(theta_t), a structure of tensors.
    momentum: r_{t-1/2}, same structure.
    new_momentum: r_{t+1/2}, same structure.
    step_size: eps, a scalar or a tensor broadcastable against each part.
    momentum_std: sigma.
    batch_ndims: number of leading chain axes of each part; the others are
      summed over.

  Returns:
    A tensor of shape `batch_shape` (the first `batch_ndims` axes).
  """
  terms = _map(
      lambda g, r, r_new: _sum_event(
          0.5 * _scale(step_size, g.dtype) * g * (r + r_new)
          / tf.square(_scale(momentum_std, g.dtype)), batch_ndims),
      gradient, momentum, new_momentum)
  return tf.add_n(tf.nest.flatten(terms))


def kinetic_energy(momentum, momentum_std=1., batch_ndims=0):
  """K(r) = |r|^2 / (2 sigma^2), one value per chain (mass sigma^2 I)."""
  terms = _map(
      lambda r: _sum_event(
          0.5 * tf.square(r) / tf.square(_scale(momentum_std, r.dtype)),
          batch_ndims),
      momentum)
  return tf.add_n(tf.nest.flatten(terms))
