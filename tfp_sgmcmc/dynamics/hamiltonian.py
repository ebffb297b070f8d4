"""Hamiltonian dynamics with friction: SGHMC (Chen, Fox & Guestrin 2014)
with its Euler and splitting integrators (Chen, Ding & Carin 2015), and the
SG Nose-Hoover thermostat (Ding et al. 2014).

Notation: position theta, momentum r, mass matrix M (kinetic energy
K(r) = r^T M^{-1} r / 2), step size h, friction C, noise-model estimate
B-hat, temperature T (T = 1 samples the posterior). `sghmc_update` and
`sgnht_update` are one whole step each (noise drawn from the step's seed),
called by the `tfp.mcmc` kernels and the Keras samplers alike; the other
functions are their pieces.

The mass matrix, in TFP's convention (`tfp.experimental.mcmc.
PreconditionedHamiltonianMonteCarlo`): a `momentum_distribution`, a
zero-mean Gaussian N(0, M) whose `sample` draws r and whose `log_prob` is
-K(r) up to a constant; None is the identity M = I (the fast path, the
default). Every use of M is one of three functions, used by every
Hamiltonian update here and in `amagold`:

* `sample_momentum`: r ~ N(0, M), also the injected noise's direction
  (noise N(0, s^2 M) = s r);
* `velocity`: dtheta/dt = grad K(r) = M^{-1} r (autodiff of the
  distribution's log density, as TFP's leapfrog does);
* `kinetic_energy`: K(r).

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
import tensorflow_probability as tfp
from tensorflow_probability.python.bijectors import reshape as reshape_bijector
from tensorflow_probability.python.distributions import batch_broadcast
from tensorflow_probability.python.distributions import (
    transformed_distribution)
from tensorflow_probability.python.experimental.distributions import (
    mvn_precision_factor_linop as mvn_pfl)
from tensorflow_probability.python.experimental.mcmc import (
    preconditioning_utils)

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import (as_dtype, broadcast_structure, expand_to,
                                   sum_event)

__all__ = ["drift", "sample_momentum", "velocity",
           "batch_momentum_distribution", "diagonal_momentum_distribution",
           "check_momentum_distribution", "sghmc_euler_momentum",
           "sghmc_splitting_momentum",
           "kinetic_energy", "sgnht_step", "INTEGRATORS", "is_refresh_step",
           "refresh_momentum", "gradient_position", "sghmc_update",
           "sgnht_update", "sgd_momentum_to_sghmc", "check_sghmc_parameters"]

INTEGRATORS = ("euler", "splitting")


def drift(position, momentum, step_size, momentum_distribution=None):
  """The position flow of Hamiltonian dynamics: theta' = theta + h M^{-1} r
  (`velocity`; theta + h r for the identity, `momentum_distribution`
  None).

  Args:
    position: theta, a structure of tensors.
    momentum: r, same structure.
    step_size: h, a scalar or a structure broadcastable against `position`.
    momentum_distribution: N(0, M), or None for the identity.

  Returns:
    theta', the same structure as `position`.

  ```python
  new = tfp_sgmcmc.dynamics.drift(tf.zeros([2]), tf.ones([2]), 0.1)
  print(new.numpy())  # [0.1 0.1]
  ```
  """
  momentum = velocity(momentum, momentum_distribution)
  return tf.nest.map_structure(
      lambda theta, r, h: theta + as_dtype(h, theta.dtype) * r,
      position, momentum, broadcast_structure(step_size, position))


def _as_value(momentum_distribution, parts):
  """The flat list `parts` in the structure the distribution's `log_prob`
  takes (a list for TFP's joint distributions, one tensor otherwise)."""
  dtype = momentum_distribution.dtype
  if tf.nest.is_nested(dtype):
    return tf.nest.pack_sequence_as(dtype, parts)
  return parts[0]


def sample_momentum(momentum_distribution, like, seed):
  """A draw r ~ N(0, M) in the structure of `like` (one draw per chain).

  `momentum_distribution` None: N(0, I) from the package's engine
  (`random.standard_normal_like(like, seed)`), the draws every kernel made
  before the mass matrix existed. Otherwise the distribution's own
  `sample(seed=seed)` (stateless), its parts in the order of
  `tf.nest.flatten(like)`; for the diagonal form of
  `diagonal_momentum_distribution` (and of `DiagonalMassMatrixAdaptation`),
  the engine's N(0, I) draw z scaled to M^{1/2} z = z / sqrt(M^{-1}).

  Args:
    momentum_distribution: N(0, M), or None for the identity.
    like: a structure of tensors shaped like the momentum.
    seed: a stateless seed, int32[2].

  Returns:
    r, the same structure as `like`.

  ```python
  r = tfp_sgmcmc.dynamics.sample_momentum(None, tf.zeros([4, 2]), [0, 1])
  print(r.shape)  # (4, 2)
  ```
  """
  if momentum_distribution is None:
    return random.standard_normal_like(like, seed)
  inverse_mass = _diagonal_inverse_mass(momentum_distribution)
  if inverse_mass is not None and len(inverse_mass) == len(
      tf.nest.flatten(like)):
    return tf.nest.pack_sequence_as(like, [
        z * tf.math.rsqrt(tf.cast(m, z.dtype)) for z, m in zip(
            tf.nest.flatten(random.standard_normal_like(like, seed)),
            inverse_mass)])
  return tf.nest.pack_sequence_as(
      like, tf.nest.flatten(momentum_distribution.sample(seed=seed)))


def _diagonal_inverse_mass(momentum_distribution):
  """Per part, M^{-1} shaped like the part, for the diagonal form that
  `diagonal_momentum_distribution` and TFP's `DiagonalMassMatrixAdaptation`
  build (a joint distribution of batch-broadcast, reshaped
  `MultivariateNormalPrecisionFactorLinearOperator`s with a diagonal
  precision, which is M^{-1}); None for any other distribution."""
  model = getattr(momentum_distribution, "model", None)
  if not isinstance(model, (list, tuple)):
    return None
  inverse_mass = []
  for part in model:
    if not isinstance(part, batch_broadcast.BatchBroadcast):
      return None
    reshaped = part.distribution
    if not isinstance(reshaped,
                      transformed_distribution.TransformedDistribution) or (
                          not isinstance(reshaped.bijector,
                                         reshape_bijector.Reshape)):
      return None
    normal = reshaped.distribution
    if not isinstance(
        normal, mvn_pfl.MultivariateNormalPrecisionFactorLinearOperator) or (
            not isinstance(normal.precision, tf.linalg.LinearOperatorDiag)):
      return None
    inverse_mass.append(reshaped.bijector.forward(
        normal.precision.diag_part()))
  return inverse_mass


def velocity(momentum, momentum_distribution=None):
  """dtheta/dt = grad K(r) = M^{-1} r, in the structure of `momentum`.

  K(r) = -log N(r; 0, M) up to a constant, differentiated (as TFP's
  leapfrog differentiates its kinetic energy): any Gaussian momentum
  distribution works, diagonal, dense (`tfd.MultivariateNormalTriL`,
  `MultivariateNormalPrecisionFactorLinearOperator`) or joint over parts.
  The diagonal form of `diagonal_momentum_distribution` (and of TFP's
  `DiagonalMassMatrixAdaptation`) is read directly: M^{-1} r elementwise,
  its precision diagonal times r, with no gradient taken.
  None: the identity, r itself (no op).

  Args:
    momentum: r, a structure of tensors.
    momentum_distribution: N(0, M), or None for the identity.

  Returns:
    M^{-1} r, the same structure as `momentum`.

  ```python
  mass = tfd.MultivariateNormalDiag(scale_diag=[2., 2.])  # M = 4 I
  print(tfp_sgmcmc.dynamics.velocity(tf.ones([2]), mass).numpy())  # 0.25
  ```
  """
  if momentum_distribution is None:
    return momentum
  parts = tf.nest.flatten(momentum)
  inverse_mass = _diagonal_inverse_mass(momentum_distribution)
  if inverse_mass is not None and len(inverse_mass) == len(parts):
    return tf.nest.pack_sequence_as(
        momentum, [tf.cast(m, r.dtype) * r
                   for m, r in zip(inverse_mass, parts)])
  with tf.GradientTape(watch_accessed_variables=False) as tape:
    tape.watch(parts)
    # Chains are independent: the sum's gradient is each chain's gradient.
    log_prob = tf.reduce_sum(momentum_distribution.log_prob(
        _as_value(momentum_distribution, parts)))
  grads = tape.gradient(log_prob, parts,
                        unconnected_gradients=tf.UnconnectedGradients.ZERO)
  return tf.nest.pack_sequence_as(momentum, [-g for g in grads])


def batch_momentum_distribution(momentum_distribution, batch_shape):
  """The distribution a step uses: TFP's own normalisation
  (`preconditioning_utils.maybe_make_list_and_batch_broadcast`, as
  `PreconditionedHamiltonianMonteCarlo` does), a joint distribution over
  the state's parts broadcast to the chains' `batch_shape`, so that one
  draw has the state's shape and `DiagonalMassMatrixAdaptation` can update
  it. None stays None (the identity).

  Args:
    momentum_distribution: N(0, M), or None.
    batch_shape: the chains' batch shape.

  Returns:
    The batched joint distribution, or None.

  ```python
  batched = tfp_sgmcmc.dynamics.hamiltonian.batch_momentum_distribution(
      tfd.MultivariateNormalDiag(scale_diag=[1., 1.]), [4])
  print([r.shape for r in batched.sample(seed=[0, 1])])  # [[4, 2]]
  ```
  """
  if momentum_distribution is None:
    return None
  return preconditioning_utils.maybe_make_list_and_batch_broadcast(
      momentum_distribution, batch_shape)


def diagonal_momentum_distribution(state, batch_ndims, inverse_mass=None):
  """A diagonal mass matrix as a momentum distribution, in the form TFP's
  `DiagonalMassMatrixAdaptation` builds and updates.

  Args:
    state: a tensor or a list of tensors shaped like the chains' state.
    batch_ndims: how many leading axes of each part are chains (0 for one
      chain of shape [d], 1 for a state of shape [chains, d]).
    inverse_mass: M^{-1} per coordinate, a structure like `state` without
      the chain axes (or broadcastable to it), e.g. the posterior variance
      of each coordinate, which is what makes every coordinate move on the
      same time scale. Default: ones (the identity).

  Returns:
    N(0, M) with M = diag(1 / `inverse_mass`), batch shape the chains'.
    A kernel given it is the identity-mass kernel when `inverse_mass` is
    one (a different random stream: draws come from the distribution);
    wrapped in `DiagonalMassMatrixAdaptation(..., num_estimation_steps=n)`
    it is the distribution the adaptation replaces at step n.

  #### Example

  SGHMC with M^{-1} set to a guess of the posterior variance, which lets
  one step size suit both coordinates:

  ```python
  init = tf.zeros([4, d])
  momentum = tfp_sgmcmc.diagonal_momentum_distribution(
      init, batch_ndims=1, inverse_mass=[5e-3, 5e-3])
  print([r.shape for r in momentum.sample(seed=[0, 1])])   # [[4, 2]]
  kernel = tfp_sgmcmc.SGHMC(target, step_size=0.3, friction=1.,
                            momentum_distribution=momentum)
  samples = tf.function(lambda: tfp.mcmc.sample_chain(
      200, init, kernel=kernel, num_burnin_steps=100, trace_fn=None,
      seed=[0, 1]), jit_compile=True)()
  print(tf.reduce_mean(samples, [0, 1]))   # about [1, -1]
  ```
  """
  parts = tf.nest.flatten(state)
  parts = [tf.convert_to_tensor(p) for p in parts]
  batch_shape = tf.shape(parts[0])[:batch_ndims]
  if parts[0].shape[:batch_ndims].is_fully_defined():
    batch_shape = parts[0].shape[:batch_ndims]
  variance = None
  if inverse_mass is not None:
    # A one-tensor state takes a list of numbers as one value per
    # coordinate, not one per part.
    values = (tf.nest.flatten(broadcast_structure(inverse_mass, parts))
              if tf.nest.is_nested(state) else [inverse_mass])
    variance = [tf.cast(v, p.dtype) for v, p in zip(values, parts)]
  return preconditioning_utils.make_momentum_distribution(
      parts, batch_shape, variance)


def check_momentum_distribution(momentum_distribution, state, batch_shape,
                                name):
  """The distribution batched to the chains (`batch_momentum_distribution`),
  after checking that a draw has the state's structure, shapes and dtypes.
  `name` is the kernel's, for the messages. None passes as None.

  Args:
    momentum_distribution: N(0, M), or None.
    state: the chains' state, a structure of tensors.
    batch_shape: the chains' batch shape.
    name: the kernel's name, for the error messages.

  Returns:
    The batched distribution (`batch_momentum_distribution`), or None.

  Raises:
    TypeError: `momentum_distribution` is not a distribution.
    ValueError: a draw is not shaped like `state`.

  ```python
  state = tf.zeros([4, 2])
  checked = tfp_sgmcmc.dynamics.hamiltonian.check_momentum_distribution(
      tfd.MultivariateNormalDiag(scale_diag=[1., 1.]), state, [4], "SGHMC")
  print(type(checked).__name__)
  ```
  """
  if momentum_distribution is None:
    return None
  if not hasattr(momentum_distribution, "sample") or not hasattr(
      momentum_distribution, "log_prob"):
    raise TypeError(
        f"`momentum_distribution` of {name} must be a tfp.distributions "
        "distribution N(0, M) (`sample` draws the momentum, `log_prob` is "
        f"minus its kinetic energy); got {momentum_distribution!r}. Leave "
        "it None for the identity mass matrix.")
  batched = batch_momentum_distribution(momentum_distribution, batch_shape)
  draw = tf.nest.flatten(batched.sample(
      seed=tfp.random.sanitize_seed(random.BOOTSTRAP_SEED)))
  parts = tf.nest.flatten(state)
  shapes = [list(p.shape) for p in parts]
  drawn = [list(d.shape) for d in draw]
  if len(draw) != len(parts) or any(
      not d.shape.is_compatible_with(p.shape) or d.dtype != p.dtype
      for d, p in zip(draw, parts)):
    raise ValueError(
        f"`momentum_distribution` of {name} draws momenta of shapes {drawn} "
        f"and dtypes {[d.dtype.name for d in draw]}, but the state has "
        f"shapes {shapes} and dtypes {[p.dtype.name for p in parts]}: one "
        "draw must be shaped like the state (one part per state part, the "
        f"chains' batch shape {list(batch_shape)} first). Build it for the "
        "state, e.g. tfp_sgmcmc.diagonal_momentum_distribution(state, "
        "batch_ndims, inverse_mass).")
  return batched


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


def kinetic_energy(momentum, momentum_std=1., batch_ndims=0,
                   momentum_distribution=None):
  """K(r) = r^T M^{-1} r / 2, one value per chain.

  Args:
    momentum: r, a structure of tensors.
    momentum_std: sigma, for M = sigma^2 I when `momentum_distribution` is
      None: K(r) = |r|^2 / (2 sigma^2).
    batch_ndims: number of leading chain axes of each part.
    momentum_distribution: N(0, M), or None (M = sigma^2 I). K is
      r . grad K(r) / 2 (`velocity`), exact for the quadratic K and free of
      the distribution's normalising constant.

  Returns:
    A tensor of the chains' batch shape.

  ```python
  k = tfp_sgmcmc.dynamics.kinetic_energy(tf.ones([3, 2]), batch_ndims=1)
  print(k.numpy())  # [1. 1. 1.]
  ```
  """
  if momentum_distribution is not None:
    terms = tf.nest.map_structure(
        lambda r, v: sum_event(0.5 * r * v, batch_ndims), momentum,
        velocity(momentum, momentum_distribution))
    return tf.add_n(tf.nest.flatten(terms))
  terms = tf.nest.map_structure(
      lambda r: sum_event(
          0.5 * tf.square(r) / tf.square(as_dtype(momentum_std, r.dtype)),
          batch_ndims),
      momentum)
  return tf.add_n(tf.nest.flatten(terms))


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
    step_size: h.
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
  new_velocity = velocity(new_momentum, momentum_distribution)
  new_position = drift(position, new_velocity, step_size)
  sq = tf.zeros_like(thermostat)
  dim = 0
  for r, v in zip(tf.nest.flatten(new_momentum),
                  tf.nest.flatten(new_velocity)):
    axes = list(range(batch_rank, r.shape.rank))
    sq = sq + tf.reduce_sum(tf.square(r) if momentum_distribution is None
                            else r * v, axis=axes)
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
          sample_momentum(momentum_distribution, momentum,
                          momentum_seed)),
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
  return drift(position, momentum, arguments.scale_step(0.5, step_size),
               momentum_distribution)


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
  noise = sample_momentum(momentum_distribution, momentum, noise_seed)
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
  return drift(grad_position, new_momentum, drift_size,
               momentum_distribution), new_momentum


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
  noise = sample_momentum(momentum_distribution, momentum, noise_seed)
  return sgnht_step(position, momentum, thermostat, gradient, step_size,
                    noise, diffusion, temperature,
                    refresh=tf.equal(step_count, 0),
                    refresh_temperature=momentum_temperature,
                    momentum_distribution=momentum_distribution)


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
  period = momentum_resampling_period
  if period is not None and (
      isinstance(period, bool) or not isinstance(period, (int, np.integer))
      or period < 1):
    raise ValueError("`momentum_resampling_period` must be None or an "
                     f"integer >= 1; got {period!r}.")
