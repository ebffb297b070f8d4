"""The mass matrix M of the Hamiltonian dynamics, one object per kind of M.

TFP's convention (`tfp.experimental.mcmc.PreconditionedHamiltonianMonteCarlo`)
describes M by a `momentum_distribution`, a zero-mean Gaussian N(0, M) whose
`sample` draws r and whose `log_prob` is -K(r) up to a constant; None is
the identity. `as_mass` turns that argument (or a `momentum_std` sigma for
M = sigma^2 I) into a `Mass`, and every Hamiltonian update (here, in
`hamiltonian`, `thermostat` and `amagold`) uses M only through it:

* `sample`: r ~ N(0, M), also the injected noise's direction
  (noise N(0, s^2 M) = s r);
* `velocity`: dtheta/dt = grad K(r) = M^{-1} r;
* `drift`: theta + h M^{-1} r;
* `dot_velocity`: a^T M^{-1} u per chain (the kinetic energy
  K(r) = r^T M^{-1} r / 2 and AMAGOLD's energy accumulator).

The kinds are `ScaledIdentity` (sigma^2 I; sigma = 1 is the identity, whose
draws are the package engine's standard normals, the stream every kernel
had before it took a mass), `DiagonalMass` (M^{-1} per coordinate: the form
`diagonal_momentum_distribution` and TFP's `DiagonalMassMatrixAdaptation`
build, read through the public classes of `tfp.experimental.distributions`;
draws z / sqrt(M^{-1}) from the engine's z), `LowRankMass`
(M^{-1} = S (I + V (Lambda - I) V^T) S, a diagonal times a low-rank update
of the identity, the form `low_rank_momentum_distribution` builds: O(d k)
velocity and draws from the engine's z), `DenseMass` (M^{-1} a [d, d]
matrix, the form `dense_momentum_distribution` builds: velocity and draws
are products with it and with its Cholesky factor's inverse) and
`DistributionMass` (any
other Gaussian, e.g. a dense `tfd.MultivariateNormalTriL`: its own
`sample`, and M^{-1} r by autodiff of its `log_prob`, as TFP's leapfrog
differentiates its kinetic energy).
"""

import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, broadcast_structure, sum_event
from tfp_sgmcmc.dynamics.momentum_distributions import (
    PRECISION_NORMAL as _PRECISION_NORMAL, batch_momentum_distribution,
    check_momentum_distribution, dense_momentum_distribution,
    diagonal_momentum_distribution, low_rank_momentum_distribution)

__all__ = ["Mass", "ScaledIdentity", "DiagonalMass", "LowRankMass",
           "DenseMass", "DistributionMass", "as_mass", "drift",
           "sample_momentum", "velocity", "kinetic_energy",
           "batch_momentum_distribution", "diagonal_momentum_distribution",
           "dense_momentum_distribution", "low_rank_momentum_distribution",
           "check_momentum_distribution"]

tfd = tfp.distributions


class Mass:
  """M: the momentum's law N(0, M) and M^{-1}. Subclasses give `sample`
  and `velocity`; the rest follows from them."""

  def sample(self, like, seed):
    """r ~ N(0, M) in the structure of `like` (one draw per chain)."""
    raise NotImplementedError

  def sample_factored(self, like, seed):
    """(z, s) with s z ~ N(0, M): a draw and a scalar scale, for updates
    that fold s into their own noise coefficient."""
    return self.sample(like, seed), 1.

  def velocity(self, momentum):
    """M^{-1} r, in the structure of `momentum`."""
    raise NotImplementedError

  def drift(self, position, momentum, step_size):
    """theta + h M^{-1} r (h a scalar or one per part)."""
    return tf.nest.map_structure(
        lambda theta, v, h: theta + as_dtype(h, theta.dtype) * v,
        position, self.velocity(momentum),
        broadcast_structure(step_size, position))

  def dot_velocity(self, a, u, batch_ndims):
    """sum a * M^{-1} u over each chain's coordinates."""
    terms = tf.nest.map_structure(lambda x, v: sum_event(x * v, batch_ndims),
                                  a, self.velocity(u))
    return tf.add_n(tf.nest.flatten(terms))

  def kinetic_energy(self, momentum, batch_ndims):
    """K(r) = r^T M^{-1} r / 2, one value per chain."""
    return self.dot_velocity(
        tf.nest.map_structure(lambda r: 0.5 * r, momentum), momentum,
        batch_ndims)


class ScaledIdentity(Mass):
  """M = sigma^2 I; sigma = 1 (a Python 1) is the identity, with no op."""

  def __init__(self, momentum_std=1.):
    self.momentum_std = momentum_std
    self._unit = (isinstance(momentum_std, (int, float)) and
                  float(momentum_std) == 1.)

  def _sigma(self, x):
    return as_dtype(self.momentum_std, x.dtype)

  def sample(self, like, seed):
    z = random.standard_normal_like(like, seed)
    if self._unit:
      return z
    return tf.nest.map_structure(lambda x: self._sigma(x) * x, z)

  def sample_factored(self, like, seed):
    return random.standard_normal_like(like, seed), self.momentum_std

  def velocity(self, momentum):
    if self._unit:
      return momentum
    return tf.nest.map_structure(lambda r: r / tf.square(self._sigma(r)),
                                 momentum)

  def drift(self, position, momentum, step_size):
    def move(theta, r, h):
      h = as_dtype(h, theta.dtype)
      return theta + (h if self._unit else
                      h / tf.square(self._sigma(theta))) * r
    return tf.nest.map_structure(move, position, momentum,
                                 broadcast_structure(step_size, position))

  def dot_velocity(self, a, u, batch_ndims):
    terms = tf.nest.map_structure(
        lambda x, y: sum_event(x * y / tf.square(self._sigma(x)),
                               batch_ndims), a, u)
    return tf.add_n(tf.nest.flatten(terms))

  def kinetic_energy(self, momentum, batch_ndims):
    terms = tf.nest.map_structure(
        lambda r: sum_event(0.5 * tf.square(r) / tf.square(self._sigma(r)),
                            batch_ndims), momentum)
    return tf.add_n(tf.nest.flatten(terms))


class DiagonalMass(Mass):
  """M = diag(1 / `inverse_mass`), M^{-1} given per state part (shaped like
  a part, with or without its chain axes)."""

  def __init__(self, inverse_mass):
    self.inverse_mass = list(inverse_mass)

  def sample(self, like, seed):
    return tf.nest.pack_sequence_as(like, [
        z * tf.math.rsqrt(tf.cast(m, z.dtype)) for z, m in zip(
            tf.nest.flatten(random.standard_normal_like(like, seed)),
            self.inverse_mass)])

  def velocity(self, momentum):
    return tf.nest.pack_sequence_as(momentum, [
        tf.cast(m, r.dtype) * r
        for m, r in zip(self.inverse_mass, tf.nest.flatten(momentum))])


class LowRankMass(Mass):
  """M^{-1} = S (I + V (Lambda - I) V^T) S per state part, each part's
  coordinates flattened (`low_rank_momentum_distribution`): per part a
  tuple (s [d], V [d, k] orthonormal, lambda [k]). Draws from the engine's
  z, as `DiagonalMass`."""

  def __init__(self, parts):
    self.parts = [tuple(p) for p in parts]

  @staticmethod
  def _apply(x, scale, basis, coefficients, pre, post):
    flat = tf.reshape(x, [-1, tf.shape(scale)[-1]])
    scale, basis, coefficients = (tf.cast(a, x.dtype) for a in
                                  (scale, basis, coefficients))
    w = flat * scale if pre else flat
    w = w + tf.linalg.matmul(tf.linalg.matmul(w, basis) * coefficients,
                             basis, transpose_b=True)
    w = w * scale if post else w / scale
    return tf.reshape(w, tf.shape(x))

  def sample(self, like, seed):
    z = tf.nest.flatten(random.standard_normal_like(like, seed))
    return tf.nest.pack_sequence_as(like, [
        self._apply(x, s, v, tf.math.rsqrt(lam) - 1., False, False)
        for x, (s, v, lam) in zip(z, self.parts)])

  def velocity(self, momentum):
    return tf.nest.pack_sequence_as(momentum, [
        self._apply(r, s, v, lam - 1., True, True)
        for r, (s, v, lam) in zip(tf.nest.flatten(momentum), self.parts)])


class DenseMass(Mass):
  """M^{-1} = C per state part, a [d, d] matrix over the part's last axis,
  with the inverse A = L^{-1} of its Cholesky factor (L L^T = C), as
  `dense_momentum_distribution` builds it: a draw is A^T z = L^{-T} z
  (covariance (L L^T)^{-1} = M), z the engine's N(0, I), as
  `DiagonalMass`; the velocity is C r. Each is one product (where the
  distribution's own draw and the autodiff of its log density trace TFP's
  joint, broadcast and precision-form machinery at every step)."""

  def __init__(self, parts):
    self.parts = [tuple(p) for p in parts]

  def sample(self, like, seed):
    z = tf.nest.flatten(random.standard_normal_like(like, seed))
    # The chains as the rows of one product: z^T A = (A^T z)^T.
    return tf.nest.pack_sequence_as(like, [
        tf.reshape(tf.matmul(tf.reshape(x, [-1, x.shape[-1]]),
                             tf.cast(a, x.dtype)), tf.shape(x))
        for x, (a, _) in zip(z, self.parts)])

  def velocity(self, momentum):
    return tf.nest.pack_sequence_as(momentum, [
        tf.linalg.matvec(tf.cast(c, r.dtype), r)
        for r, (_, c) in zip(tf.nest.flatten(momentum), self.parts)])


class DistributionMass(Mass):
  """M of any Gaussian `momentum_distribution` N(0, M): its own draws, and
  M^{-1} r = -grad log N(r; 0, M) by autodiff."""

  def __init__(self, momentum_distribution):
    self.momentum_distribution = momentum_distribution

  def sample(self, like, seed):
    return tf.nest.pack_sequence_as(like, tf.nest.flatten(
        self.momentum_distribution.sample(seed=seed)))

  def velocity(self, momentum):
    dist = self.momentum_distribution
    parts = tf.nest.flatten(momentum)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
      tape.watch(parts)
      # The log_prob's structure: a list for TFP's joint distributions,
      # one tensor otherwise. Chains are independent: the sum's gradient
      # is each chain's gradient.
      value = (tf.nest.pack_sequence_as(dist.dtype, parts)
               if tf.nest.is_nested(dist.dtype) else parts[0])
      log_prob = tf.reduce_sum(dist.log_prob(value))
    grads = tape.gradient(log_prob, parts,
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return tf.nest.pack_sequence_as(momentum, [-g for g in grads])


def _precision_normal(part):
  """The `MultivariateNormalPrecisionFactorLinearOperator` of one part of a
  momentum distribution (batch-broadcast and reshaped, as TFP's
  preconditioning builds it, or not), or None."""
  if isinstance(part, tfd.BatchBroadcast):
    part = part.distribution
  # The precision form is itself a TransformedDistribution.
  if isinstance(part, tfd.TransformedDistribution) and not isinstance(
      part, _PRECISION_NORMAL):
    if not isinstance(part.bijector, tfp.bijectors.Reshape):
      return None
    part = part.distribution
  return part if isinstance(part, _PRECISION_NORMAL) else None


def _read_mass(momentum_distribution):
  """The `DiagonalMass` or `LowRankMass` of the forms that
  `diagonal_momentum_distribution` (and TFP's
  `DiagonalMassMatrixAdaptation`) and `low_rank_momentum_distribution`
  build, read through public classes and properties; None for any other
  distribution."""
  model = getattr(momentum_distribution, "model", None)
  if not isinstance(model, (list, tuple)):
    model = [momentum_distribution]
  diagonal, low_rank, dense = [], [], []
  for part in model:
    normal = _precision_normal(part)
    if normal is None:
      return None
    factor = normal.precision_factor
    if isinstance(factor, tf.linalg.LinearOperatorInversion) and isinstance(
        factor.operator, tf.linalg.LinearOperatorLowerTriangular):
      # dense_momentum_distribution's form, over the part's last axis (a
      # reshaped part is left to the distribution's own draws).
      unreshaped = (part.distribution if isinstance(
          part, tfd.BatchBroadcast) else part) is normal
      if not unreshaped:
        return None
      dense.append((factor.operator.to_dense(), normal.precision.to_dense()))
      continue
    if isinstance(normal.precision, tf.linalg.LinearOperatorDiag):
      reshaped = part.distribution if isinstance(
          part, tfd.BatchBroadcast) else part
      if reshaped is normal:
        return None
      diagonal.append(reshaped.bijector.forward(normal.precision.diag_part()))
      continue
    ops = getattr(factor, "operators", ())
    if not (isinstance(factor, tf.linalg.LinearOperatorComposition) and
            len(ops) == 2 and
            isinstance(ops[0], tf.linalg.LinearOperatorDiag) and
            isinstance(ops[1], tf.linalg.LinearOperatorLowRankUpdate)):
      return None
    low_rank.append((ops[0].diag, ops[1].u,
                     tf.square(ops[1].diag_update + 1.)))
  if len(diagonal) == len(model):
    return DiagonalMass(diagonal)
  if len(low_rank) == len(model):
    return LowRankMass(low_rank)
  if len(dense) == len(model):
    return DenseMass(dense)
  return None


def as_mass(momentum_distribution=None, momentum_std=1.):
  """The `Mass` of a `momentum_distribution` N(0, M) (a `Mass` passes
  through): `ScaledIdentity(momentum_std)` for None, `DiagonalMass` for
  the diagonal form of `diagonal_momentum_distribution`, `LowRankMass` for
  that of `low_rank_momentum_distribution`, else `DistributionMass`.

  ```python
  mass = tfp_sgmcmc.dynamics.mass.as_mass(
      tfd.MultivariateNormalDiag(scale_diag=[2., 2.]))  # M = 4 I
  print(mass.velocity(tf.ones([2])).numpy())  # [0.25 0.25]
  ```
  """
  if isinstance(momentum_distribution, Mass):
    return momentum_distribution
  if momentum_distribution is None:
    return ScaledIdentity(momentum_std)
  mass = _read_mass(momentum_distribution)
  return mass if mass is not None else DistributionMass(
      momentum_distribution)


def drift(position, momentum, step_size, momentum_distribution=None):
  """The position flow of Hamiltonian dynamics: theta' = theta + h M^{-1} r
  (theta + h r for the identity, `momentum_distribution` None).

  Args:
    position: theta, a structure of tensors.
    momentum: r, same structure.
    step_size: h, a scalar or a structure broadcastable against `position`.
    momentum_distribution: N(0, M) or a `Mass`; None for the identity.

  Returns:
    theta', the same structure as `position`.

  ```python
  new = tfp_sgmcmc.dynamics.drift(tf.zeros([2]), tf.ones([2]), 0.1)
  print(new.numpy())  # [0.1 0.1]
  ```
  """
  return as_mass(momentum_distribution).drift(position, momentum, step_size)


def sample_momentum(momentum_distribution, like, seed):
  """A draw r ~ N(0, M) in the structure of `like` (one draw per chain):
  `as_mass(momentum_distribution).sample(like, seed)`.

  None: N(0, I) from the package's engine (`random.standard_normal_like`),
  the draws every kernel made before the mass matrix existed; the diagonal
  form: the engine's z scaled to z / sqrt(M^{-1}); any other distribution:
  its own `sample(seed=seed)`, parts in the order of `tf.nest.flatten(like)`.

  Args:
    momentum_distribution: N(0, M) or a `Mass`; None for the identity.
    like: a structure of tensors shaped like the momentum.
    seed: a stateless seed, int32[2].

  Returns:
    r, the same structure as `like`.

  ```python
  r = tfp_sgmcmc.dynamics.sample_momentum(None, tf.zeros([4, 2]), [0, 1])
  print(r.shape)  # (4, 2)
  ```
  """
  return as_mass(momentum_distribution).sample(like, seed)


def velocity(momentum, momentum_distribution=None):
  """dtheta/dt = grad K(r) = M^{-1} r, in the structure of `momentum`:
  r itself for the identity, M^{-1} r elementwise for the diagonal form,
  autodiff of the distribution's log density for any other Gaussian
  (dense `tfd.MultivariateNormalTriL`, joint over parts, ...).

  Args:
    momentum: r, a structure of tensors.
    momentum_distribution: N(0, M) or a `Mass`; None for the identity.

  Returns:
    M^{-1} r, the same structure as `momentum`.

  ```python
  mass = tfd.MultivariateNormalDiag(scale_diag=[2., 2.])  # M = 4 I
  print(tfp_sgmcmc.dynamics.velocity(tf.ones([2]), mass).numpy())  # 0.25
  ```
  """
  return as_mass(momentum_distribution).velocity(momentum)


def kinetic_energy(momentum, momentum_std=1., batch_ndims=0,
                   momentum_distribution=None):
  """K(r) = r^T M^{-1} r / 2, one value per chain.

  Args:
    momentum: r, a structure of tensors.
    momentum_std: sigma, for M = sigma^2 I when `momentum_distribution` is
      None: K(r) = |r|^2 / (2 sigma^2).
    batch_ndims: number of leading chain axes of each part.
    momentum_distribution: N(0, M) or a `Mass`, or None (M = sigma^2 I).
      K is r . M^{-1} r / 2, exact for the quadratic K and free of the
      distribution's normalising constant.

  Returns:
    A tensor of the chains' batch shape.

  ```python
  k = tfp_sgmcmc.dynamics.kinetic_energy(tf.ones([3, 2]), batch_ndims=1)
  print(k.numpy())  # [1. 1. 1.]
  ```
  """
  return as_mass(momentum_distribution, momentum_std).kinetic_energy(
      momentum, batch_ndims)
