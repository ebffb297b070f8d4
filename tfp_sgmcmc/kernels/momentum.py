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

import functools

import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.dynamics import hamiltonian

__all__ = ["IDENTITY", "initial_field", "of_step",
           "install_mass_adaptation_check"]

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


def _innermost_with_mass(kernel):
  """The innermost kernel (looking through `inner_kernel`) that takes a
  `momentum_distribution` argument, or None."""
  found, seen = None, set()
  while kernel is not None and id(kernel) not in seen:
    seen.add(id(kernel))
    if "momentum_distribution" in getattr(kernel, "parameters", {}):
      found = kernel
    kernel = getattr(kernel, "inner_kernel", None)
  return found


def refuse_frozen_adaptation_of_the_identity(adaptation):
  """Raises for `DiagonalMassMatrixAdaptation(kernel,
  num_estimation_steps=n)` around one of these kernels without a
  momentum distribution: at step n TFP replaces the distribution in the
  results, and the identity keeps none there (TFP's own kernels keep an
  identity distribution; ours keep `()` so that a chain without a mass
  matrix is unchanged), which would fail inside TFP with an
  AttributeError."""
  if adaptation.num_estimation_steps is None:
    return
  ours = _innermost_with_mass(adaptation.inner_kernel)
  if ours is None or not hasattr(type(ours), "reports_exact_log_prob") or (
      ours.parameters["momentum_distribution"] is not None):
    return
  raise ValueError(
      f"DiagonalMassMatrixAdaptation(..., num_estimation_steps="
      f"{adaptation.num_estimation_steps!r}) around {type(ours).__name__} "
      "with momentum_distribution=None: the adaptation replaces the "
      "kernel's momentum distribution at that step and needs one to "
      "replace. Start from the identity as a distribution: "
      f"{type(ours).__name__}(..., momentum_distribution=tfp_sgmcmc."
      "diagonal_momentum_distribution(initial_state, batch_ndims=<number "
      "of chain axes>)).")


_INSTALLED = "_tfp_sgmcmc_checks_momentum_distribution"


def install_mass_adaptation_check():
  """Makes TFP's `DiagonalMassMatrixAdaptation` run
  `refuse_frozen_adaptation_of_the_identity` when built (idempotent)."""
  dmma = tfp.experimental.mcmc.DiagonalMassMatrixAdaptation
  if getattr(dmma, _INSTALLED, False):
    return
  original_init = dmma.__init__

  @functools.wraps(original_init)
  def checked_init(self, *args, **kwargs):
    original_init(self, *args, **kwargs)
    refuse_frozen_adaptation_of_the_identity(self)
  dmma.__init__ = checked_init
  setattr(dmma, _INSTALLED, True)
