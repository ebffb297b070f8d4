"""Langevin dynamics: SGLD (Welling & Teh 2011) and preconditioned SGLD
(Li et al. 2016), and the Gaussian move's proposal ratio (MALA's).

`sgld_update` and `psgld_update` are one whole step each (the noise drawn
inside from the step's seed), called by the `tfp.mcmc` kernels and the
Keras samplers alike; the other functions are their pieces.
"""

import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, broadcast_structure, sum_event

__all__ = ["langevin_step", "preconditioned_langevin_step",
           "rmsprop_preconditioner", "langevin_log_proposal_ratio",
           "sgld_update", "psgld_update", "check_psgld_parameters"]


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
  def step(theta, g, xi, h):
    h = as_dtype(h, theta.dtype)
    t = as_dtype(temperature, theta.dtype)
    return theta - h * g + tf.sqrt(2. * h * t) * xi
  return tf.nest.map_structure(step, position, gradient, noise,
                               broadcast_structure(step_size, position))


def rmsprop_preconditioner(second_moment, gradient, decay, num_examples,
                           regularizer):
  """pSGLD's diagonal preconditioner (Li et al. 2016).

      V' = alpha V + (1 - alpha) g_bar * g_bar,   g_bar = grad U~ / N
      G  = 1 / (lambda + sqrt(V'))

  Returns (V', G). Scaling the gradient by 1/N makes V independent of the
  data size, as in the paper.
  """
  def update(v, g):
    g_bar = g / tf.cast(num_examples, g.dtype)
    return as_dtype(decay, g.dtype) * v + (1. - as_dtype(decay, g.dtype)) * (
        g_bar * g_bar)
  new_v = tf.nest.map_structure(update, second_moment, gradient)
  precond = tf.nest.map_structure(
      lambda v: 1. / (as_dtype(regularizer, v.dtype) + tf.sqrt(v)), new_v)
  return new_v, precond


def preconditioned_langevin_step(position, gradient, preconditioner,
                                 step_size, noise, temperature=1.):
  """pSGLD without the Gamma term (Li et al. 2016, Algorithm 1):

      theta' = theta - h G grad U~(theta) + sqrt(2 h T G) xi.

  The Gamma(theta) correction (derivatives of G) is dropped, as in the
  paper's experiments: G changes slowly when the decay alpha is close to 1,
  and the term costs a second derivative.
  """
  def step(theta, g, p, xi, h):
    h = as_dtype(h, theta.dtype)
    t = as_dtype(temperature, theta.dtype)
    return theta - h * p * g + tf.sqrt(2. * h * t * p) * xi
  return tf.nest.map_structure(step, position, gradient, preconditioner,
                               noise, broadcast_structure(step_size,
                                                          position))


def langevin_log_proposal_ratio(position, new_position, gradient,
                                new_gradient, step_size, temperature=1.,
                                batch_ndims=0):
  """log q(y -> x) - log q(x -> y) for one Langevin (`langevin_step`) move.

  The move x -> y is Gaussian, q(x -> y) = N(y; x - h grad U(x), 2 h T I),
  so

      log q(y -> x) / q(x -> y)
          = (|y - x + h grad U(x)|^2 - |x - y + h grad U(y)|^2) / (4 h T),

  summed over every coordinate of every part, one value per chain. With
  exact gradients this is MALA's correction (Roberts & Tweedie 1996):
  `tfp.mcmc.MetropolisHastings(SGLD(target_log_prob_fn=...))` is MALA.

  Args:
    position: x, a structure of tensors.
    new_position: y, same structure.
    gradient: grad U(x), same structure.
    new_gradient: grad U(y), same structure.
    step_size: h, a scalar or one per part (same structure).
    temperature: T.
    batch_ndims: number of leading chain axes of each part.
  """
  def term(x, y, g, g_new, h):
    h = as_dtype(h, x.dtype)
    t = as_dtype(temperature, x.dtype)
    forward = tf.square(y - x + h * g)
    reverse = tf.square(x - y + h * g_new)
    return sum_event((forward - reverse) / (4. * h * t), batch_ndims)
  terms = tf.nest.map_structure(term, position, new_position, gradient,
                                new_gradient,
                                broadcast_structure(step_size, position))
  return tf.add_n(tf.nest.flatten(terms))


def sgld_update(position, gradient, step_size, temperature, seed):
  """One SGLD transition given grad U~ at `position`: `langevin_step` with
  its noise drawn from the step's `seed` (the seed `one_step` receives), so
  every front end that supplies the gradient runs the kernel's chain."""
  _, noise_seed = random.derive_seeds(seed, 2)
  noise = random.standard_normal_like(position, noise_seed)
  return langevin_step(position, gradient, step_size, noise, temperature)


def psgld_update(position, second_moment, gradient, step_count, step_size,
                 temperature, decay, regularizer, num_examples, seed):
  """One pSGLD transition given grad U~ at `position`.

  Returns (new position, new second moment V, preconditioner G). The first
  step (`step_count` 0) has no history and starts the average at g_bar^2.
  `seed` is the step's seed, used as `one_step` uses it.
  """
  _, noise_seed = random.derive_seeds(seed, 2)
  dtype = tf.nest.flatten(position)[0].dtype
  decay = tf.where(tf.equal(step_count, 0), tf.constant(0., dtype),
                   as_dtype(decay, dtype))
  second_moment, precond = rmsprop_preconditioner(
      second_moment, gradient, decay, num_examples, regularizer)
  noise = random.standard_normal_like(position, noise_seed)
  new_position = preconditioned_langevin_step(
      position, gradient, precond, step_size, noise, temperature)
  return new_position, second_moment, precond


def check_psgld_parameters(decay, regularizer):
  """pSGLD's preconditioner: decay alpha in [0, 1), regularizer lambda > 0."""
  d = arguments.static_value(decay)
  if d is not None and not 0. <= float(d) < 1.:
    raise ValueError(f"`decay` (alpha) must be in [0, 1); got {decay!r}.")
  arguments.check_positive("regularizer", regularizer)
