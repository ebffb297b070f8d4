"""The mass matrix of the Hamiltonian kernels (SGHMC, SGNHT, AMAGOLD's
proposal) in TFP's convention: the `momentum_distribution` argument, the
results field of the same name, and which distribution a step uses.

As in `tfp.experimental.mcmc.PreconditionedHamiltonianMonteCarlo`, the
results carry the momentum distribution (batched to the chains by TFP's own
helper) and a kernel built with `store_parameters_in_results=True` reads it
from there, so `tfp.experimental.mcmc.DiagonalMassMatrixAdaptation` finds it
(`unnest.get_innermost(results, "momentum_distribution")`) and replaces it.
The identity (`momentum_distribution=None`) is the empty structure `()` in
the results (a `tf.while_loop` carries no None), and the step takes the
identity path of `dynamics.hamiltonian`: the chain is the one the kernels
ran before they had a mass matrix, bit for bit.
"""

import tensorflow as tf

from tfp_sgmcmc.dynamics import hamiltonian

__all__ = ["IDENTITY", "initial_field", "of_step"]

# The results field of the identity mass matrix.
IDENTITY = ()


def _is_identity(field):
  return isinstance(field, tuple) and not field


def _chains(per_chain):
  shape = per_chain.shape
  return shape if shape.is_fully_defined() else tf.shape(per_chain)


def initial_field(kernel, init_state, energy):
  """The results field at `bootstrap_results`: the kernel's distribution
  batched to the chains (the shape of `energy`) after
  checking that a draw is shaped like `init_state`; without one, the
  identity (see `_identity_for_adaptation`). `energy` is one value per
  chain."""
  if kernel.momentum_distribution is None:
    return _identity_for_adaptation(kernel, init_state, energy)
  return hamiltonian.check_momentum_distribution(
      kernel.momentum_distribution, init_state, _chains(energy),
      type(kernel).__name__)


def _identity_for_adaptation(kernel, init_state, energy):
  """The identity mass matrix in the results.

  A kernel that reads its parameters from its results (TFP's adaptation
  kernels build it with `store_parameters_in_results=True`, as TFP's
  windowed sampling builds `PreconditionedHamiltonianMonteCarlo`) keeps
  the identity as TFP's diagonal form with M^{-1} = 1, as TFP's
  preconditioned HMC keeps one: `DiagonalMassMatrixAdaptation(...,
  num_estimation_steps=n)` replaces that distribution at step n and needs
  it there from the start. Its draws are the identity path's N(0, I) draws
  scaled by 1, and its velocity is r times 1: the same chain.

  Any other kernel (and AMAGOLD with `momentum_std` other than 1, whose
  identity is sigma^2 I) keeps `IDENTITY`, the empty structure, and steps
  on the identity path of `dynamics.hamiltonian`."""
  if not kernel.store_parameters_in_results or not _is_one(
      getattr(kernel, "momentum_std", 1.)):
    return IDENTITY
  parts = tf.nest.flatten(init_state)
  batch_ndims = energy.shape.rank
  identity = hamiltonian.diagonal_momentum_distribution(
      parts, batch_ndims,
      inverse_mass=[tf.ones(p.shape[batch_ndims:], p.dtype) for p in parts])
  return hamiltonian.batch_momentum_distribution(identity, _chains(energy))


def _is_one(value):
  """Whether `value` is statically the number 1."""
  try:
    return float(value) == 1.
  except (TypeError, ValueError):
    return False


def of_step(kernel, previous_results):
  """The momentum distribution a step uses (None: the identity): the
  results' when the kernel stores its parameters in its results (TFP's
  adaptation kernels build it so), else the kernel's own."""
  if kernel.store_parameters_in_results:
    field = previous_results.momentum_distribution
    return None if _is_identity(field) else field
  return hamiltonian.batch_momentum_distribution(
      kernel.momentum_distribution, _chains(previous_results.diverged))
