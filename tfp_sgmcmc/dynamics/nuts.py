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
  """sum over every coordinate of every part of a * b, one per chain.

  Args:
    a: a structure of tensors.
    b: the same structure.
    batch_ndims: number of leading chain axes of each part.

  Returns:
    A tensor of the chains' batch shape.

  ```python
  print(tfp_sgmcmc.dynamics.nuts.dot_per_chain(
      tf.ones([3, 2]), tf.ones([3, 2]), batch_ndims=1).numpy())  # [2. 2. 2.]
  ```
  """
  total = 0.
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    axes = list(range(batch_ndims, x.shape.rank))
    total = total + tf.reduce_sum(x * y, axis=axes)
  return total


def no_u_turn(left, right, batch_ndims):
  """(theta+ - theta-) . r- >= 0 and (theta+ - theta-) . r+ >= 0, for the
  (theta, r) ends `left` and `right` of a trajectory.

  Args:
    left: (theta-, r-), each a structure of tensors.
    right: (theta+, r+), the same structures.
    batch_ndims: number of leading chain axes of each part.

  Returns:
    A boolean tensor of the chains' batch shape: True while the trajectory
    has not turned back.

  ```python
  left = (tf.zeros([3, 2]), tf.ones([3, 2]))
  right = (tf.ones([3, 2]), -tf.ones([3, 2]))
  print(tfp_sgmcmc.dynamics.nuts.no_u_turn(left, right, 1).numpy())
  # [False False False]: the right end moves back
  ```
  """
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
  Args:
    theta: the position, a structure of tensors.
    r: the momentum, same structure.
    direction: +1 or -1 per chain, a tensor of the chains' batch shape.
    step_size: eps.
    friction: C.
    noise_estimate: B.
    temperature: T.
    seed: the step's stateless seed, int32[2].
    energy_and_gradient: `(theta, seed) -> (U~, grad U~)` on the minibatch
      of `seed`.

  Returns:
    (theta', r', U~(theta')).

  ```python
  def energy_and_gradient(x, seed):
    return 0.5 * tf.reduce_sum(x**2, -1), x  # U = |x|^2 / 2, exact
  theta, r, energy = tfp_sgmcmc.dynamics.nuts.sghmc_time_step(
      tf.zeros([3, 2]), tf.ones([3, 2]), tf.constant([1., -1., 1.]),
      step_size=0.1, friction=1., noise_estimate=0., temperature=1.,
      seed=tf.constant([0, 1]), energy_and_gradient=energy_and_gradient)
  print(theta.numpy()[:, 0], energy.shape)  # [0.1 -0.1 0.1] (3,)
  ```
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
  ("uniform"); -inf where it or the momentum is not finite.

  Args:
    energy: U~ at the point, one per chain.
    momentum: r, a structure of tensors.
    temperature: T.
    batch_ndims: number of leading chain axes of each part.
    weighting: "energy" or "uniform".

  Returns:
    log w, a tensor of the chains' batch shape.

  ```python
  print(tfp_sgmcmc.dynamics.nuts.log_weight(
      tf.zeros([3]), tf.ones([3, 2]), 1., batch_ndims=1).numpy())  # -1
  ```
  """
  if weighting == "uniform":
    log_w = tf.zeros_like(energy)
  else:
    kinetic = 0.5 * dot_per_chain(momentum, momentum, batch_ndims)
    log_w = -(energy + kinetic) / temperature
  finite = finite_per_chain(log_w, momentum)
  return tf.where(finite, log_w, tf.constant(-float("inf"), log_w.dtype))
