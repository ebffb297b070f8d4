"""What `tfp_sgmcmc.warm_up` asks a kernel it tunes: the warm-up protocol.

`warm_up` knows no kernel class. A kernel it can tune has the method

* `_warmup_test_kernel(num_test_steps, momentum_distribution)`: the exact
  chain whose acceptance tunes the step size, a kernel whose results have
  `log_accept_ratio` and the step size in `accepted_results.step_size`
  (read each step, `store_parameters_in_results=True`), with the mass
  `momentum_distribution` (None: the kernel's own);

and, where the defaults do not fit, any of

* `_warmup_takes_mass` (default False): whether a diagonal mass is adapted
  by default (the kernel takes a `momentum_distribution`);
* `_warmup_gradients_per_test(num_test_steps)` (default `num_test_steps`):
  gradient evaluations per test, for the report;
* `_warmup_check()` (default none): raises where the kernel as built
  cannot be tuned (e.g. a temperature other than 1);
* `_warmup_tuned(step_size, momentum_distribution)` (default: `copy` with
  that step size, and that `momentum_distribution` when not None): the
  frozen kernel `warm_up` returns.
* `_warmup_length_test(num_leapfrog_steps, momentum_distribution)` (only
  a kernel whose test is its own trajectory of `num_leapfrog_steps`
  gradients): `(test, velocity)`, the test kernel with T a scalar int32
  tensor and a function of its results giving M^{-1} r at the proposal, for
  `warm_up(adapt_num_leapfrog_steps=True)`, which then returns the tuned
  kernel's `copy(num_leapfrog_steps=T)`.

* `_warmup_max_step_size(tolerance, scale)` (default none: no bound): for
  a kernel without an exact test of its own chain, the largest step size
  at which its own chain on a Gaussian whose sds are `scale` (in the
  mass's units) settles with an sd within `tolerance` of the posterior's
  (`stationary_bound`); `warm_up` caps the tuned step size there, with
  `scale` 1 where it adapted a mass (the posterior's variance) and else
  the smallest sd of its draws.

A kernel without `_warmup_test_kernel` (or with it set to None, as a
subclass whose dynamics the parent's test does not describe) is refused.
The functions here are the tests the package's kernels share.
"""

import numpy as np

from tfp_sgmcmc import arguments
from tfp_sgmcmc.dynamics import stationary
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.kernels.amagold import UncalibratedAMAGOLD
from tfp_sgmcmc.kernels.amortized_mh import AmortizedMetropolisHastings
from tfp_sgmcmc.kernels.langevin_path import UncalibratedLangevinPath
from tfp_sgmcmc.targets.base import TargetCapabilityError

__all__ = ["friction_test_kernel", "langevin_path_test_kernel",
           "check_temperature_one", "mass_arguments", "stationary_bound"]


def mass_arguments(momentum_distribution):
  """`dict(momentum_distribution=...)`, or {} for None (the kernel's own)."""
  return ({} if momentum_distribution is None else
          dict(momentum_distribution=momentum_distribution))


def friction_test_kernel(kernel, friction, num_test_steps,
                         momentum_distribution):
  """AMAGOLD's amortized test around Hamiltonian dynamics with friction C:
  `num_test_steps` steps of AMAGOLD's time-symmetric kick with friction
  beta = C / 2, the one integrator of dr = -grad U~ dt - C r dt +
  N(0, 2 C dt), dtheta = M^{-1} r dt whose reverse path has a tractable
  density (an Euler step moves theta with the new momentum, so its
  momentum-flipped reverse move has no density)."""
  target = kernel.target
  if momentum_distribution is None:  # The kernel's own mass, if any.
    momentum_distribution = kernel.parameters.get("momentum_distribution")
  proposal = UncalibratedAMAGOLD(
      target, step_size=kernel.step_size, num_leapfrog_steps=num_test_steps,
      friction=0.5 * float(friction),
      # The minibatch energy is a diagnostic the test does not read; a
      # full-batch target's comes with its gradient and is kept.
      compute_energy=interop.reports_exact_log_prob(target),
      store_parameters_in_results=True,
      **mass_arguments(momentum_distribution))
  return _exact_test(kernel, proposal)


def langevin_path_test_kernel(kernel, num_test_steps):
  """T of SGLD's own steps tested with their Gaussian path ratio
  (`UncalibratedLangevinPath`)."""
  target = kernel.target
  proposal = UncalibratedLangevinPath(
      target, step_size=kernel.step_size, num_steps=num_test_steps,
      store_parameters_in_results=True)
  return _exact_test(kernel, proposal)


def _exact_test(kernel, proposal):
  """The amortized test of `proposal` on the full-data energy: refused by
  warm_up's name where `kernel`'s target has none (the test's own refusal
  names an `acceptance_energy` that SGLD, SGHMC and SGNHT do not take)."""
  target = kernel.target
  if not target.has_exact_energy:
    raise TargetCapabilityError(
        f"warm_up tunes {type(kernel).__name__}'s step size on an exact "
        "Metropolis-Hastings test of its chain, on the full-data energy; "
        f"this {type(target).__name__} has none (has_exact_energy=False). "
        "Give the target its data for the energy (DatasetTarget(..., "
        "full_dataset=...)), or choose the step size yourself (e.g. "
        "tfp_sgmcmc.step_size_by_ksd) and run sample_chain_with_progress.")
  return AmortizedMetropolisHastings(proposal, target=target)


def check_temperature_one(kernel):
  """Raises unless the kernel samples at temperature 1 (the test tunes the
  posterior's chain)."""
  temperature = kernel.parameters.get("temperature", 1.)
  if float(temperature) != 1.:
    raise ValueError(
        f"{type(kernel).__name__} has temperature={temperature!r}; warm_up "
        "tunes the step size of the posterior's chain (temperature 1). Warm "
        "up at temperature 1 and copy the tuned kernel with your "
        "temperature.")


def stationary_bound(integrator, friction, tolerance, scale):
  """`_warmup_max_step_size` of a kernel whose chain is `integrator` with
  `friction` (C, or SGNHT's A; at its largest where it is one per
  coordinate: every error there grows with it) on a Gaussian of sds
  `scale`: the standard normal's bound (`dynamics.stationary`) in the
  units where the sds are 1. There a Hamiltonian step is h / scale and its
  friction C scale; a Langevin step (no friction) is h / scale^2. None
  where the friction's value is not known while building."""
  value = arguments.static_value(friction)
  if value is None:
    return None
  if integrator == "langevin":
    return stationary.max_step_size(integrator, 0., tolerance) * scale ** 2
  return scale * stationary.max_step_size(
      integrator, float(np.max(value)) * scale, tolerance)
