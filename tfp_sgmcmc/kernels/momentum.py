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
  checking that a draw is shaped like `init_state`, or `IDENTITY`.
  `energy` is one value per chain."""
  batched = hamiltonian.check_momentum_distribution(
      kernel.momentum_distribution, init_state, _chains(energy),
      type(kernel).__name__)
  return IDENTITY if batched is None else batched


def of_step(kernel, previous_results):
  """The momentum distribution a step uses (None: the identity): the
  results' when the kernel stores its parameters in its results (TFP's
  adaptation kernels build it so), else the kernel's own."""
  if kernel.store_parameters_in_results:
    field = previous_results.momentum_distribution
    return None if _is_identity(field) else field
  return hamiltonian.batch_momentum_distribution(
      kernel.momentum_distribution, _chains(previous_results.diverged))
