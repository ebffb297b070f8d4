"""Momentum distributions N(0, M) in TFP's `momentum_distribution`
convention (`tfp.experimental.mcmc.PreconditionedHamiltonianMonteCarlo`):
the builders of each kind of mass the warm-up estimates (diagonal, dense,
low rank plus diagonal), the batching every kernel applies, and its check.
`tfp_sgmcmc.dynamics.mass.as_mass` turns each into the `Mass` the updates
use.
"""

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.experimental.mcmc import (
    preconditioning_utils)

from tfp_sgmcmc import arguments, random
from tfp_sgmcmc._structure import broadcast_structure

__all__ = ["batch_momentum_distribution", "diagonal_momentum_distribution",
           "dense_momentum_distribution", "low_rank_momentum_distribution",
           "check_momentum_distribution", "PRECISION_NORMAL"]

tfd = tfp.distributions

# TFP's precision form of a Gaussian: N(0, M) given M^{-1} (its precision)
# and a factor F with F F^T = M^{-1}, so the velocity M^{-1} r is a product.
PRECISION_NORMAL = (
    tfp.experimental.distributions.MultivariateNormalPrecisionFactorLinearOperator)


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
  if momentum_distribution is None or _batched(momentum_distribution):
    return momentum_distribution
  return preconditioning_utils.maybe_make_list_and_batch_broadcast(
      momentum_distribution, batch_shape)


def _batched(momentum_distribution):
  """Whether `momentum_distribution` is a sequence of batch broadcasts (what
  TFP's helper and this module's builders return), which TFP's helper
  hands back unchanged. Asked first: the helper reads the joint
  distribution's dtype, and a joint distribution learns its dtype by
  tracing a draw from its model, once per distribution built."""
  model = getattr(momentum_distribution, "model", None)
  return (type(momentum_distribution) is tfd.JointDistributionSequential and
          isinstance(model, (list, tuple)) and
          all(isinstance(part, tfd.BatchBroadcast) for part in model))


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
    if tf.nest.is_nested(state):
      # A list is read per part in tf.nest's order (a dict's sorted keys):
      # refused for a dict written in another order, whose parts it would
      # silently give each other's masses.
      arguments.check_fits_state("inverse_mass", inverse_mass, state)
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
  precision M^{-1} and its Cholesky factor L, held as the inverse of
  L^{-1}), so the velocity M^{-1} r (the gradient of its log density) and
  a draw L^{-T} z are each one matrix product, with no solve in a step.

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
  factor = tf.linalg.cholesky(covariance)
  # L^{-1} once, here: a triangular solve for each draw, in every leapfrog
  # step, runs as a loop in XLA on a CPU, far slower than a product.
  inverse_factor = tf.linalg.triangular_solve(
      factor, tf.eye(tf.shape(covariance)[-1], dtype=covariance.dtype))
  return PRECISION_NORMAL(
      loc=tf.zeros(tf.shape(covariance)[-1:], covariance.dtype),
      precision_factor=tf.linalg.LinearOperatorInversion(
          tf.linalg.LinearOperatorLowerTriangular(inverse_factor)),
      precision=tf.linalg.LinearOperatorFullMatrix(
          covariance, is_self_adjoint=True, is_positive_definite=True))


def low_rank_momentum_distribution(scale, basis, eigenvalues):
  """A low-rank-plus-diagonal mass matrix as a momentum distribution: N(0, M)
  for a state of one vector per chain, with

      M^{-1} = S (I + V (Lambda - I) V^T) S,

  S = diag(`scale`) (each coordinate's posterior sd), V = `basis` ([d, k],
  orthonormal columns: the directions in which the posterior's correlation
  matrix differs most from I) and Lambda = diag(`eigenvalues`) (that
  matrix's eigenvalues along them, > 0). It is the posterior's covariance
  where its correlations are confined to k directions, at O(d k) a step and
  O(d k) memory where a dense mass costs O(d^2): `velocity` is
  S (w + V ((Lambda - I) V^T w)) with w = S r, and a draw is
  S^{-1} (z + V ((Lambda^{-1/2} - I) V^T z)), z ~ N(0, I).

  The distribution is TFP's precision form
  (`MultivariateNormalPrecisionFactorLinearOperator`): its precision is
  M^{-1}, a `LinearOperatorLowRankUpdate` of diag(S^2), and its precision
  factor F = S (I + V (Lambda^{1/2} - I) V^T) (F F^T = M^{-1}), a
  `LinearOperatorComposition` of a diagonal and a low-rank update of the
  identity; `tfp_sgmcmc.dynamics.mass.as_mass` reads it back as a
  `LowRankMass`, which computes the two formulas above directly.

  Args:
    scale: s, [d], positive.
    basis: V, [d, k] with orthonormal columns.
    eigenvalues: lambda, [k], positive.

  Returns:
    N(0, M), event shape [d]; a kernel batches it to its chains.

  ```python
  momentum = tfp_sgmcmc.dynamics.mass.low_rank_momentum_distribution(
      [1., 1.], [[0.7071], [0.7071]], [1.9])   # M^{-1} = [[1, .9], [.9, 1]]
  print(tfp_sgmcmc.dynamics.velocity(tf.ones([2]), momentum).numpy())
  # [1.9 1.9]
  ```
  """
  scale = tf.convert_to_tensor(scale)
  basis = tf.convert_to_tensor(basis, scale.dtype)
  eigenvalues = tf.convert_to_tensor(eigenvalues, scale.dtype)
  linalg = tf.linalg
  d = tf.shape(scale)[-1]
  factor = linalg.LinearOperatorComposition([
      linalg.LinearOperatorDiag(scale, is_positive_definite=True),
      linalg.LinearOperatorLowRankUpdate(
          linalg.LinearOperatorIdentity(d, dtype=scale.dtype), basis,
          diag_update=tf.sqrt(eigenvalues) - 1., is_self_adjoint=True,
          is_positive_definite=True)])
  precision = linalg.LinearOperatorLowRankUpdate(
      linalg.LinearOperatorDiag(tf.square(scale), is_positive_definite=True),
      scale[:, None] * basis, diag_update=eigenvalues - 1.,
      is_self_adjoint=True, is_positive_definite=True)
  return PRECISION_NORMAL(loc=tf.zeros_like(scale), precision_factor=factor,
                          precision=precision)


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
  if _batched(batched):  # A draw's parts: each part's batch and event.
    draw = [tf.TensorSpec(part.batch_shape.concatenate(part.event_shape),
                          part.dtype) for part in batched.model]
  else:
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

