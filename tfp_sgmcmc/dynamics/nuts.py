"""SG-NUTS's pieces (the reproduction of Chen et al. 2014 in papers/003,
Section 5): an SGHMC step forward or backward in time, the U-turn criterion
of Hoffman & Gelman (2014), and the weight of a trajectory point.

The tree building and the progressive sampling over these pieces are the
kernel's (`tfp_sgmcmc.SGNUTS`).
"""

import tensorflow as tf

from tfp_sgmcmc import random
from tfp_sgmcmc._structure import expand_to, finite_per_chain
from tfp_sgmcmc.dynamics.hamiltonian import drift, sghmc_euler_momentum

__all__ = ["WEIGHTINGS", "dot_per_chain", "no_u_turn", "sghmc_time_step",
           "log_weight"]

WEIGHTINGS = ("energy", "uniform")


def dot_per_chain(a, b, batch_ndims):
  """sum over every coordinate of every part of a * b, one per chain."""
  total = 0.
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    axes = list(range(batch_ndims, x.shape.rank))
    total = total + tf.reduce_sum(x * y, axis=axes)
  return total


def no_u_turn(left, right, batch_ndims):
  """(theta+ - theta-) . r- >= 0 and (theta+ - theta-) . r+ >= 0, for the
  (theta, r) ends `left` and `right` of a trajectory."""
  (theta_l, r_l), (theta_r, r_r) = left, right
  span = tf.nest.map_structure(tf.subtract, theta_r, theta_l)
  return ((dot_per_chain(span, r_l, batch_ndims) >= 0.) &
          (dot_per_chain(span, r_r, batch_ndims) >= 0.))


def sghmc_time_step(theta, r, direction, step_size, friction, noise_estimate,
                    temperature, seed, energy_and_gradient):
  """One SGHMC step forward (direction +1) or backward (-1) in time, per
  chain:

      forward:   theta <- theta + eps r,
                 r <- r - eps grad U~(theta) - eps C r + N(0, 2 (C T - B) eps)
      backward:  the same step applied to (theta, -r),

  so friction and noise act in both directions (the paper's update).
  `energy_and_gradient(theta, seed)` gives (U~, grad U~) on the minibatch
  of `seed`. Returns (theta', r', U~(theta')).
  """
  batch_seed, noise_seed = random.split_seed(seed, 2)
  signed = tf.nest.map_structure(lambda x: expand_to(direction, x) * x, r)
  theta = drift(theta, signed, step_size)
  energy, grad = energy_and_gradient(theta, batch_seed)
  noise = random.standard_normal_like(signed, noise_seed)
  signed = sghmc_euler_momentum(signed, grad, step_size, friction, noise,
                                noise_estimate, temperature)
  r = tf.nest.map_structure(lambda x: expand_to(direction, x) * x, signed)
  return theta, r, energy


def log_weight(energy, momentum, temperature, batch_ndims,
               weighting="energy"):
  """log w of a trajectory point: -(U~ + |r|^2 / 2) / T ("energy") or 0
  ("uniform"); -inf where it or the momentum is not finite."""
  if weighting == "uniform":
    log_w = tf.zeros_like(energy)
  else:
    kinetic = 0.5 * dot_per_chain(momentum, momentum, batch_ndims)
    log_w = -(energy + kinetic) / temperature
  finite = finite_per_chain(log_w, momentum)
  return tf.where(finite, log_w, tf.constant(-float("inf"), log_w.dtype))
