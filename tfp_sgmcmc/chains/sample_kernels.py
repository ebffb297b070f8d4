"""The kernels `tfp_sgmcmc.sample` builds, and the mass it gives them.

A kernel given by name is built with the starting guesses `warm_up` tunes
from; an instance is rebuilt on the target `sample` made. Where the start
found the Laplace covariance (Newton's Hessian at the mode) and the state is
a vector too long for the warm-up's dense estimate, the kernel takes that
covariance as a fixed mass (`laplace_mass`) and the warm-up tunes the rest.
"""

import contextlib
import warnings

import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.chains import warmup_picks as picks
from tfp_sgmcmc.dynamics.momentum_distributions import (
    dense_momentum_distribution)
from tfp_sgmcmc.kernels import AMAGOLD, SGHMC, SGLD, SGNHT
from tfp_sgmcmc.kernels.amortized_mh import NOT_EXACT_MESSAGE
from tfp_sgmcmc.targets.base import TargetCapabilityError

__all__ = ["KERNELS", "DEFAULT_KERNEL", "AMAGOLD_EXACT_GRADIENT_FRICTION",
           "build_kernel", "laplace_mass", "kernel_and_mass", "with_mass",
           "LAPLACE_CHOICE", "built_quietly", "warn_if_not_exact",
           "approximate"]

# Kernels by name, with the starting guesses warm_up tunes from (the step
# size is replaced by one from the Laplace sds where they are known).
KERNELS = {
    "amagold": lambda t, h, noisy=True: AMAGOLD(
        t, step_size=h, num_leapfrog_steps=10,
        friction=0.5 if noisy else AMAGOLD_EXACT_GRADIENT_FRICTION),
    "sghmc": lambda t, h: SGHMC(t, step_size=h, friction=1.),
    "sgnht": lambda t, h: SGNHT(t, step_size=h, diffusion=1.),
    "sgld": lambda t, h: SGLD(t, step_size=h),
}
DEFAULT_KERNEL = "amagold"
# AMAGOLD's friction where its gradients are exact or nearly so (control
# variates around the mode, or a full-batch target): the friction is there
# to dissipate the energy the gradient noise injects, and where there is
# little, 0.5 only damps the momentum within a trajectory (by
# (1 - eps beta)^2 / (1 + eps beta)^2 a step, a fifth of it over 10 steps
# at eps = 0.2) and the chain moves by a random walk. Measured on the
# N = 200,000 logistic regression (benchmarks/one_call.py, dense mass, one
# seed): smallest ESS 1,729 of 4,000 at friction 0.5, 3,511 at 0.1.
AMAGOLD_EXACT_GRADIENT_FRICTION = 0.1
# What `warm_up`'s report says of the mass where `sample` fixed the
# Laplace mass (the warm-up itself ran with adapt_mass=False).
LAPLACE_CHOICE = ("dense Laplace mass, fixed: M^-1 the Laplace covariance at "
                  "Newton's mode (more than "
                  f"{picks.DENSE_MASS_MAX} coordinates, too many for the "
                  "windows' dense estimate);")


@contextlib.contextmanager
def built_quietly():
  """Inside, AMAGOLD's constructor does not warn that its chain is not
  exact (a `DatasetTarget`'s pipeline chooses the batches): `sample` builds
  a kernel and the warm-up copies it several times, on minibatches that
  the chains may leave for full-data gradients, where the chains are
  exact. `warn_if_not_exact` warns once, of the kernel `sample` returns."""
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=NOT_EXACT_MESSAGE)
    yield


def warn_if_not_exact(kernel, stacklevel):
  """The warning AMAGOLD's constructor gives, where `kernel`, the one
  `sample` returns, is not exact for its batches."""
  note = getattr(kernel, "calibration_note", "")
  if note and getattr(kernel, "acceptance_energy", None) == "exact" and (
      not kernel.is_calibrated):
    warnings.warn(note, UserWarning, stacklevel=stacklevel + 1)


def approximate(kernel, ksd):
  """Why `kernel`'s draws are not exact, with how to measure or avoid it,
  or None for a calibrated kernel."""
  if getattr(kernel, "is_calibrated", True):
    return None
  note = getattr(kernel, "calibration_note", "") or (
      f"{type(kernel).__name__} has no exact Metropolis-Hastings test, so "
      "its draws are biased by its step size (and any gradient noise), "
      "which R-hat and ESS do not show.")
  advice = [] if ksd else ["`ksd=True` measures how far the draws are "
                            "from the posterior (compare step sizes)"]
  if not isinstance(kernel, AMAGOLD):
    advice.append("kernel='amagold' draws exactly")
  return f"{note} {'; '.join(advice)}." if advice else note


def build_kernel(kernel, target, step_size, noisy):
  """`kernel` (a name, None for the default, or an instance) on `target`:
  by name, from `step_size` (its square for SGLD) and AMAGOLD's friction
  for `noisy` or exact gradients."""
  if not target.has_exact_energy:
    raise TargetCapabilityError(
        f"`sample` warms up every kernel (SGHMC and SGLD too) on an exact "
        "Metropolis-Hastings test, and finds the mode, on the full-data "
        f"energy; this {type(target).__name__} has none "
        "(has_exact_energy=False). Give the target its data for the energy "
        "(DatasetTarget(..., full_dataset=...)), or tune with your own "
        "step size and run sample_chain_with_progress.")
  if kernel is None:
    kernel = DEFAULT_KERNEL
  if isinstance(kernel, str):
    if kernel.lower() not in KERNELS:
      raise ValueError(f"`kernel` = {kernel!r} is not a kernel `sample` "
                       f"knows by name; use one of {sorted(KERNELS)} or "
                       "pass a kernel instance.")
    h = step_size if kernel.lower() != "sgld" else step_size ** 2
    with built_quietly():
      if kernel.lower() == "amagold":
        return KERNELS["amagold"](target, h, noisy)
      return KERNELS[kernel.lower()](target, h)
  if isinstance(kernel, tfp.mcmc.TransitionKernel):
    with built_quietly():
      return kernel.copy(target=target, target_log_prob_fn=None)
  raise TypeError(f"`kernel` must be a name ({sorted(KERNELS)}) or a "
                  f"tfp_sgmcmc kernel instance; got {kernel!r:.100}.")


def laplace_mass(kernel, states, covariance, dense_mass, num_steps):
  """N(0, M) with M^{-1} the Laplace covariance, where the start found it
  (Newton's Hessian at the mode) and the warm-up would otherwise adapt a
  diagonal mass to a vector of more than `DENSE_MASS_MAX` coordinates,
  whose windows hold too few draws for a dense one: else None (the
  warm-up's own mass). The kernel keeps it; the warm-up tunes the rest."""
  parts = tf.nest.flatten(states)
  if covariance is None or dense_mass is not None or (
      parts[0].shape[-1] <= picks.DENSE_MASS_MAX) or picks.pick_mass(
          kernel, parts, 1, num_steps).choice != "diagonal":
    return None
  return dense_momentum_distribution(
      tf.constant(covariance, parts[0].dtype))


def kernel_and_mass(choice, target, step_size, noisy, states, covariance,
                     dense_mass, num_steps):
  """(the kernel `sample` warms up, its fixed Laplace mass or None): the
  mass rule (`laplace_mass`) asked of the kernel built by name."""
  kernel = build_kernel(choice, target, step_size, noisy)
  laplace = laplace_mass(kernel, states, covariance, dense_mass, num_steps)
  if laplace is None:
    return kernel, None
  return with_mass(choice, target, step_size, noisy, laplace), laplace


def with_mass(choice, target, step_size, noisy, momentum_distribution):
  """`build_kernel`, with `momentum_distribution` where one is given (the
  Laplace mass: then from step size d^(-1/4), HMC's scaling on a standard
  normal in d coordinates, as the posterior is in that mass's units; the
  trajectory length ChEES starts from is T times it)."""
  if momentum_distribution is None:
    return build_kernel(choice, target, step_size, noisy)
  size = momentum_distribution.event_shape[-1]
  kernel = build_kernel(choice, target, size ** -0.25, noisy)
  # The mass replaces a scalar one (AMAGOLD's momentum_std), as in warm_up.
  scalar = {"momentum_std": 1.} if "momentum_std" in kernel.parameters else {}
  with built_quietly():
    return kernel.copy(momentum_distribution=momentum_distribution,
                       **scalar)
