"""AMAGOLD's stochastic leapfrog with friction (Zhang, Cooper & De Sa 2020,
Algorithm 2): the momentum kick, the energy accumulator rho, and a whole
proposal written one gradient at a time.

A proposal from (theta, r) is `proposal_start` (the momentum, redrawn if
resampled, and the half drift), then T calls of `leapfrog_step`, each with
the gradient at its position and the seeds of `leapfrog_seeds`. The
`tfp.mcmc` kernel runs them in a `tf.while_loop`; the Keras sampler runs one
per train step. The M-H test that makes the chain exact is
`tfp_sgmcmc.acceptance`.

Notation: step size eps, friction beta, mass matrix M (sigma^2 I from the
momentum standard deviation sigma, or a `momentum_distribution` N(0, M) in
TFP's convention, see `hamiltonian`), T leapfrog steps per proposal. With a
mass matrix every sigma^-2 below is M^{-1} and every sigma^2 of a draw is
M, through one `mass.Mass` (`mass.as_mass(momentum_distribution,
momentum_std)`):

    r_{-1/2}    ~ N(0, M)                         (if resampled)
    theta_0     = theta + 1/2 eps M^{-1} r_{-1/2}
    r_{t+1/2}   = ((1 - eps beta) r_{t-1/2} - eps grad U~_t(theta_t) + eta_t)
                  / (1 + eps beta),               eta_t ~ N(0, 4 eps beta M)
    rho        += 1/2 eps grad U~_t(theta_t)^T M^{-1} (r_{t-1/2} + r_{t+1/2})
    theta_{t+1} = theta_t + eps M^{-1} r_{t+1/2}  (half of it at t = T - 1)

and the M-H test log a = U(theta) - U(theta*) + rho is exact for any fixed
M: one kick's reverse-over-forward log density is K(r') - K(r) + the rho
increment with K(r) = r^T M^{-1} r / 2 (`energy_accumulator_increment`).
"""

import math

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, broadcast_structure, sum_event
from tfp_sgmcmc.dynamics.mass import as_mass

__all__ = ["amagold_momentum", "energy_accumulator_increment",
           "proposal_start", "leapfrog_seeds", "leapfrog_step",
           "sgd_parameters_to_amagold", "check_amagold_parameters",
           "check_num_leapfrog_steps"]


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
    step_size: eps, a scalar or a tensor broadcastable against each part,
      or a list with one per part.
    friction: beta >= 0.
    noise: draws xi, same structure as `momentum`: standard normal for
      M = sigma^2 I, N(0, M) for a `momentum_distribution` (with
      `momentum_std` 1), so that eta ~ N(0, 4 eps beta M).
    momentum_std: sigma > 0.

  Returns:
    r_{t+1/2}, the structure of `momentum`.

  ```python
  r = tfp_sgmcmc.dynamics.amagold_momentum(
      tf.ones([2]), tf.zeros([2]), step_size=0.1, friction=1.,
      noise=tf.zeros([2]))
  print(r.numpy())  # (1 - 0.1) / (1 + 0.1) = [0.818 0.818]
  ```
  """
  def step(r, g, xi, eps):
    eps = as_dtype(eps, r.dtype)
    a = eps * as_dtype(friction, r.dtype)
    sigma = as_dtype(momentum_std, r.dtype)
    eta = tf.sqrt(4. * a) * sigma * xi
    return ((1. - a) * r - eps * g + eta) / (1. + a)
  return tf.nest.map_structure(step, momentum, gradient, noise,
                               broadcast_structure(step_size, momentum))


def energy_accumulator_increment(gradient, momentum, new_momentum, step_size,
                                 momentum_std=1., batch_ndims=0,
                                 momentum_distribution=None):
  """AMAGOLD's energy-accumulator increment (Algorithm 2, line 13).

      rho_{t+1/2} - rho_{t-1/2}
          = 1/2 eps sigma^-2 grad U~_t(theta_t)^T (r_{t-1/2} + r_{t+1/2}),

  summed over every coordinate of every part, one value per chain,
  with M^{-1} in place of sigma^-2 for a `momentum_distribution`
  N(0, M): the kick's noise eta has covariance 4 eps beta M, and writing
  its forward and reverse Gaussian log densities out, the quadratic terms
  leave (K(r') - K(r)) + 1/2 eps g^T M^{-1} (r + r') with
  K(r) = r^T M^{-1} r / 2.

  For one kick r -> r' (`amagold_momentum`), the log density of the momentum-flipped
  reverse move -r' -> -r over that of the forward move is K(r') - K(r) +
  increment, so over the T kicks of a proposal (theta, r) -> (theta*, r*)
  the log of eq. (6) of the paper is U(theta) - U(theta*) + rho: the kinetic
  terms cancel against those of pi(theta*, -r*) / pi(theta, r).

  Args:
    gradient: grad U~_t(theta_t), a structure of tensors.
    momentum: r_{t-1/2}, same structure.
    new_momentum: r_{t+1/2}, same structure.
    step_size: eps, a scalar or a tensor broadcastable against each part,
      or a list with one per part.
    momentum_std: sigma.
    batch_ndims: number of leading chain axes of each part; the others are
      summed over.
    momentum_distribution: N(0, M), or None for M = sigma^2 I.

  Returns:
    A tensor of shape `batch_shape` (the first `batch_ndims` axes).

  ```python
  rho = tfp_sgmcmc.dynamics.energy_accumulator_increment(
      tf.ones([3, 2]), tf.ones([3, 2]), tf.ones([3, 2]), step_size=0.1,
      batch_ndims=1)
  print(rho.numpy())  # 1/2 * 0.1 * 2 coordinates * 2 = [0.2 0.2 0.2]
  ```
  """
  # M^{-1} is linear: one M^{-1} (r + r') per part.
  return as_mass(momentum_distribution, momentum_std).dot_velocity(
      tf.nest.map_structure(
          lambda g, eps: 0.5 * as_dtype(eps, g.dtype) * g, gradient,
          broadcast_structure(step_size, gradient)),
      tf.nest.map_structure(tf.add, momentum, new_momentum), batch_ndims)


def sgd_parameters_to_amagold(learning_rate, momentum_decay, kwargs=None):
  """(eps, beta, sigma) from Appendix F's SGD units (h, b): eps = sqrt(h),
  beta = b / sqrt(h), sigma = 1.

  Args:
    learning_rate: h > 0.
    momentum_decay: b >= 0.
    kwargs: the other constructor arguments, which must not also set
      `step_size`, `friction` or `momentum_std`; or None.

  Returns:
    (eps, beta, sigma) as Python floats.

  Raises:
    TypeError: `kwargs` sets one of them too.

  ```python
  print(tfp_sgmcmc.dynamics.amagold.sgd_parameters_to_amagold(0.01, 0.1))
  # (0.1, 1.0, 1.0)
  ```
  """
  arguments.check_positive("learning_rate", learning_rate)
  arguments.check_positive("momentum_decay", momentum_decay, allow_zero=True)
  if kwargs and ("momentum_std" in kwargs or "step_size" in kwargs or
                 "friction" in kwargs):
    raise TypeError("`from_sgd_parameters` sets `step_size`, `friction` and "
                    "`momentum_std` from `learning_rate` and "
                    "`momentum_decay`; do not pass them too.")
  eps = math.sqrt(float(learning_rate))
  return eps, float(momentum_decay) / eps, 1.


def check_amagold_parameters(num_leapfrog_steps, friction, momentum_std,
                             resample_momentum, momentum_distribution=None):
  """The argument checks of the proposal (other than target and step size).

  Args:
    num_leapfrog_steps: T, a Python integer >= 1.
    friction: beta >= 0.
    momentum_std: sigma > 0; 1 when `momentum_distribution` is given.
    resample_momentum: a Python bool.
    momentum_distribution: N(0, M), or None.

  Returns:
    None.

  Raises:
    TypeError, ValueError: naming the argument, the value seen and the fix.

  ```python
  tfp_sgmcmc.dynamics.amagold.check_amagold_parameters(
      10, friction=0.5, momentum_std=1., resample_momentum=True)  # passes
  ```
  """
  check_num_leapfrog_steps(num_leapfrog_steps)
  arguments.check_positive("friction", friction, allow_zero=True)
  arguments.check_positive("momentum_std", momentum_std)
  sigma = arguments.static_value(momentum_std)
  if momentum_distribution is not None and (sigma is None or
                                            np.any(sigma != 1.)):
    raise ValueError(
        f"`momentum_std` = {momentum_std!r} with a `momentum_distribution`: "
        "both set the mass matrix (sigma^2 I, or the distribution's M). "
        "Leave momentum_std at 1 and scale the distribution (M = sigma^2 "
        "M0 is N(0, M) with sigma times the scale).")
  arguments.check_bool("resample_momentum", resample_momentum,
                       " True: reversible AMAGOLD; False: skew-reversible.")


def proposal_start(position, momentum, step_size, momentum_std,
                   resample_momentum, seed, momentum_distribution=None):
  """The start of a proposal from (theta, r) with the proposal's `seed`.

  Args:
    position: theta, a structure of tensors.
    momentum: r, same structure.
    step_size: eps, a scalar or one per part.
    momentum_std: sigma.
    resample_momentum: whether r is redrawn first.
    seed: the proposal's stateless seed, int32[2].
    momentum_distribution: N(0, M), or None for M = sigma^2 I.

  Returns:
    (r_{-1/2}, theta_0, loop_seed): the momentum (redrawn from
    N(0, sigma^2 I), or N(0, M) with a `momentum_distribution`, if
    `resample_momentum`), the half-drifted position
    theta_0 = theta + 1/2 eps sigma^-2 r_{-1/2} (M^{-1} r_{-1/2}) of the
    first gradient, and the seed that `leapfrog_seeds` carries through the
    T steps.

  ```python
  r, theta0, loop_seed = tfp_sgmcmc.dynamics.proposal_start(
      tf.zeros([2]), tf.ones([2]), step_size=0.2, momentum_std=1.,
      resample_momentum=False, seed=[0, 1])
  print(theta0.numpy())  # [0.1 0.1]
  ```
  """
  momentum_seed, loop_seed = random.derive_seeds(seed, 2)
  mass = as_mass(momentum_distribution, momentum_std)
  if resample_momentum:
    momentum = mass.sample(momentum, momentum_seed)
  return momentum, mass.drift(position, momentum,
                              arguments.scale_step(0.5, step_size)), loop_seed


def leapfrog_seeds(loop_seed):
  """(next loop seed, minibatch seed, noise seed) of one leapfrog step.

  Args:
    loop_seed: the seed carried through the leapfrog steps, int32[2].

  Returns:
    (next loop seed, minibatch seed, noise seed), each int32[2].

  ```python
  next_seed, batch_seed, noise_seed = tfp_sgmcmc.dynamics.leapfrog_seeds(
      tf.constant([0, 1]))
  print(next_seed.shape)  # (2,)
  ```
  """
  next_seed, step_seed = random.walk_seed(loop_seed)
  batch_seed, noise_seed = random.derive_seeds(step_seed, 2)
  return next_seed, batch_seed, noise_seed


def leapfrog_step(step, position, momentum, rho, gradient, step_size,
                  friction, momentum_std, num_leapfrog_steps, noise_seed,
                  batch_ndims=0, momentum_distribution=None):
  """Leapfrog step `step` (0 <= step < T) of the proposal, given grad U~_t at
  theta_t = `position`.

      r_{t+1/2}   = `amagold_momentum`(r_{t-1/2}, grad U~_t)
      rho        += `energy_accumulator_increment`(...)
      theta_{t+1} = theta_t + eps sigma^-2 r_{t+1/2}   (half of it at t = T-1)

  with M^{-1} r_{t+1/2} for sigma^-2 r_{t+1/2} and the kick's noise drawn
  from N(0, M) when `momentum_distribution` (N(0, M)) is given.

  Args:
    step: t, the step's index (0 <= t < T).
    position: theta_t, a structure of tensors.
    momentum: r_{t-1/2}, same structure.
    rho: the energy accumulator, one per chain, in its own dtype.
    gradient: grad U~_t(theta_t), same structure as `position`.
    step_size: eps, a scalar or one per part.
    friction: beta >= 0.
    momentum_std: sigma.
    num_leapfrog_steps: T.
    noise_seed: the step's noise seed (`leapfrog_seeds`).
    batch_ndims: number of leading chain axes of each part.
    momentum_distribution: N(0, M), or None for M = sigma^2 I.

  Returns:
    (theta_{t+1}, r_{t+1/2}, rho) with rho in its own dtype (the Keras
    adapter keeps it in float64).

  ```python
  theta, r, rho = tfp_sgmcmc.dynamics.leapfrog_step(
      0, tf.zeros([3, 2]), tf.ones([3, 2]), tf.zeros([3], tf.float64),
      tf.ones([3, 2]), step_size=0.1, friction=0.5, momentum_std=1.,
      num_leapfrog_steps=10, noise_seed=[0, 1], batch_ndims=1)
  print(theta.shape, rho.dtype)  # (3, 2) float64
  ```
  """
  dtype = tf.nest.flatten(position)[0].dtype
  eps = tf.nest.map_structure(lambda e: as_dtype(e, dtype), step_size)
  mass = as_mass(momentum_distribution, momentum_std)
  noise, noise_std = mass.sample_factored(momentum, noise_seed)
  new_momentum = amagold_momentum(momentum, gradient, eps, friction, noise,
                                  noise_std)
  rho = rho + tf.cast(energy_accumulator_increment(
      gradient, momentum, new_momentum, eps, batch_ndims=batch_ndims,
      momentum_distribution=mass), rho.dtype)
  # Full position steps between the kicks, a half step after the last.
  scale = tf.nest.map_structure(
      lambda e: tf.where(step < num_leapfrog_steps - 1, e, 0.5 * e), eps)
  return mass.drift(position, new_momentum, scale), new_momentum, rho


def check_num_leapfrog_steps(num_leapfrog_steps):
  """Raises unless T is a Python integer >= 1 or a scalar integer tensor
  (a length drawn for each proposal, as a warm-up's jitter: a T drawn
  independently of the state mixes kernels that each leave the target
  invariant; its value, >= 1, is the caller's to keep).

  Args:
    num_leapfrog_steps: T.

  Returns:
    None.

  Raises:
    TypeError: T is not an integer.
    ValueError: T < 1.

  ```python
  tfp_sgmcmc.dynamics.amagold.check_num_leapfrog_steps(10)  # passes
  ```
  """
  if not (tf.is_tensor(num_leapfrog_steps) and num_leapfrog_steps.dtype
          .is_integer and num_leapfrog_steps.shape.rank == 0):
    arguments.check_integer("num_leapfrog_steps", num_leapfrog_steps, hint=(
        " It is T, the leapfrog steps of each proposal (a scalar integer "
        "tensor is also taken)."))
