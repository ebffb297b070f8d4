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
draws z / sqrt(M^{-1}) from the engine's z) and `DistributionMass` (any
other Gaussian, e.g. a dense `tfd.MultivariateNormalTriL`: its own
`sample`, and M^{-1} r by autodiff of its `log_prob`, as TFP's leapfrog
differentiates its kinetic energy).
"""

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.experimental.mcmc import (
    preconditioning_utils)

from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, broadcast_structure, sum_event

__all__ = ["Mass", "ScaledIdentity", "DiagonalMass", "DistributionMass",
           "as_mass", "drift", "sample_momentum", "velocity",
           "kinetic_energy", "batch_momentum_distribution",
           "diagonal_momentum_distribution", "dense_momentum_distribution",
           "check_momentum_distribution"]

tfd = tfp.distributions
_PRECISION_NORMAL = (
    tfp.experimental.distributions.MultivariateNormalPrecisionFactorLinearOperator)


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


def _diagonal_inverse_mass(momentum_distribution):
  """Per part, M^{-1}, for the diagonal form that
  `diagonal_momentum_distribution` and TFP's `DiagonalMassMatrixAdaptation`
  build (a joint distribution of batch-broadcast, reshaped
  `MultivariateNormalPrecisionFactorLinearOperator`s whose precision, a
  diagonal operator, is M^{-1}), read through public classes and
  properties; None for any other distribution."""
  model = getattr(momentum_distribution, "model", None)
  if not isinstance(model, (list, tuple)):
    return None
  inverse_mass = []
  for part in model:
    reshaped = (part.distribution if isinstance(part, tfd.BatchBroadcast)
                else None)
    if not isinstance(reshaped, tfd.TransformedDistribution) or (
        not isinstance(reshaped.bijector, tfp.bijectors.Reshape)):
      return None
    normal = reshaped.distribution
    if not isinstance(normal, _PRECISION_NORMAL) or (
        not isinstance(normal.precision, tf.linalg.LinearOperatorDiag)):
      return None
    inverse_mass.append(reshaped.bijector.forward(
        normal.precision.diag_part()))
  return inverse_mass


def as_mass(momentum_distribution=None, momentum_std=1.):
  """The `Mass` of a `momentum_distribution` N(0, M) (a `Mass` passes
  through): `ScaledIdentity(momentum_std)` for None, `DiagonalMass` for
  the diagonal form of `diagonal_momentum_distribution`, else
  `DistributionMass`.

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
  inverse_mass = _diagonal_inverse_mass(momentum_distribution)
  if inverse_mass is not None:
    return DiagonalMass(inverse_mass)
  return DistributionMass(momentum_distribution)


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

def dense_momentum_distribution(covariance):
  """A dense mass matrix as a momentum distribution: N(0, M) with
  M^{-1} = `covariance`, for a state of one vector per chain.

  M^{-1} near the posterior's covariance makes every direction move on the
  same time scale, including those along which correlated coordinates move
  together, which a diagonal mass leaves slow. The distribution is TFP's
  precision form (`MultivariateNormalPrecisionFactorLinearOperator` with
  precision M^{-1} and its Cholesky factor), so the velocity M^{-1} r (the
  gradient of its log density) is one matrix product, with no inverse.

  Args:
    covariance: M^{-1}, a [d, d] symmetric positive definite tensor (e.g.
      the posterior's covariance estimated from draws).

  Returns:
    N(0, M), event shape [d]; a kernel batches it to its chains.

  ```python
  momentum = tfp_sgmcmc.dynamics.mass.dense_momentum_distribution(
      [[1., 0.9], [0.9, 1.]])
  print(tfp_sgmcmc.dynamics.velocity(tf.ones([2]), momentum).numpy())
  # [1.9 1.9]
  ```
  """
  covariance = tf.convert_to_tensor(covariance)
  return _PRECISION_NORMAL(
      loc=tf.zeros(tf.shape(covariance)[-1:], covariance.dtype),
      precision_factor=tf.linalg.LinearOperatorLowerTriangular(
          tf.linalg.cholesky(covariance)),
      precision=tf.linalg.LinearOperatorFullMatrix(
          covariance, is_self_adjoint=True, is_positive_definite=True))


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
  if not all(hasattr(momentum_distribution, method)
             for method in ("sample", "log_prob")):
    raise TypeError(
        f"`momentum_distribution` of {name} must be a tfp.distributions "
        "distribution N(0, M) (`sample` draws the momentum, `log_prob` is "
        f"minus its kinetic energy); got {momentum_distribution!r}. Leave "
        "it None for the identity mass matrix.")
  batched = batch_momentum_distribution(momentum_distribution, batch_shape)
  draw = tf.nest.flatten(batched.sample(
      seed=tfp.random.sanitize_seed(random.BOOTSTRAP_SEED)))
  parts = tf.nest.flatten(state)
  if len(draw) != len(parts) or any(
      not d.shape.is_compatible_with(p.shape) or d.dtype != p.dtype
      for d, p in zip(draw, parts)):
    raise ValueError(
        f"`momentum_distribution` of {name} draws momenta of shapes "
        f"{[list(d.shape) for d in draw]} and dtypes "
        f"{[d.dtype.name for d in draw]}, but the state has shapes "
        f"{[list(p.shape) for p in parts]} and dtypes "
        f"{[p.dtype.name for p in parts]}: one "
        "draw must be shaped like the state (one part per state part, the "
        f"chains' batch shape {list(batch_shape)} first). Build it for the "
        "state, e.g. tfp_sgmcmc.diagonal_momentum_distribution(state, "
        "batch_ndims, inverse_mass).")
  return batched

