"""Amortized Metropolis-Hastings: one M-H test for a whole multi-step proposal.

Zhang, Cooper & De Sa (2020), Section 4. A proposal kernel runs T stochastic
steps x_0 -> x_1 -> ... -> x_T = y, each with its own random minibatch
zeta_t; the correction accepts y with probability

    min(1, pi(y^perp) / pi(x) prod_t P(x_{t+1}^perp, x_t^perp; zeta_t)
                                     / P(x_t, x_{t+1}; zeta_t))          (6)

where ^perp negates the momentum, (theta, r)^perp = (theta, -r). Writing the
product's log, together with the kinetic part of pi(y^perp) / pi(x), as the
proposal's `log_acceptance_correction`, the test only needs the energy
difference of the positions:

    log a = U(theta) - U(theta*) + log_acceptance_correction.

The full-data energy U is computed once per outer step (for the proposal; the
current state's energy is cached in the results), so its cost is amortized
over the T gradient steps.
"""

import collections
import warnings

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import choose
from tfp_sgmcmc.dynamics import acceptance
from tfp_sgmcmc.dynamics.acceptance import (metropolis_hastings_test,
                                            momentum_after_test, test_seeds)
from tfp_sgmcmc.kernels import checks
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.targets import log_prob as log_prob_lib
from tfp_sgmcmc.targets.base import TargetCapabilityError

__all__ = [
    "AmortizedMetropolisHastings",
    "AmortizedMetropolisHastingsResults",
    "ACCEPTANCE_ENERGIES",
    "CLOCK_FIELDS",
    "NOT_EXACT_MESSAGE",
]

ACCEPTANCE_ENERGIES = acceptance.ACCEPTANCE_ENERGIES

# Inner-results fields that describe the kernel's clock, not the chain's
# state: they are taken from the proposal even when it is rejected, so that
# step counts, schedules and adapted step sizes move on.
CLOCK_FIELDS = ("step_size", "step_count", "seed")


class AmortizedMetropolisHastingsResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("AmortizedMetropolisHastingsResults", [
        "accepted_results", "is_accepted", "log_accept_ratio",
        "proposed_state", "proposed_results", "energy", "proposed_energy",
        "seed", "target_log_prob"])):
  """Results of one amortized M-H step.

  Attributes:
    accepted_results: the inner kernel's results for the chain's state after
      this step (the proposal's if accepted, else the previous ones with the
      momentum negated); the next proposal starts from them.
    is_accepted: per chain, whether the proposal was accepted.
    log_accept_ratio: per chain, U(theta) - U(theta*) +
      log_acceptance_correction; -inf where it is not finite (a divergent
      proposal is always rejected).
    proposed_state: theta*, the end of the inner kernel's trajectory.
    proposed_results: the inner kernel's results for the proposal.
    energy: per chain, U of the chain's state after this step. With exact
      energies this is the cached U(theta) the next test uses; with minibatch
      energies it is the estimate on this step's minibatch.
    proposed_energy: per chain, U(theta*) (exact or minibatch estimate).
    seed: the stateless seed this step used.
    target_log_prob: -`energy`: the exact log density at the chain's state
      with the exact test, the minibatch estimate otherwise.
  """
  __slots__ = ()


class AmortizedMetropolisHastings(tfp.mcmc.TransitionKernel):
  """Metropolis-Hastings correction of a multi-step stochastic proposal.

  Given an inner kernel that proposes (theta, r) -> (theta*, r*) through T
  stochastic steps and reports the log of the reverse-over-forward path
  probability, this kernel accepts with probability min(1, a),

      log a = U(theta) - U(theta*) + log_acceptance_correction,

  eq. (6) of Zhang et al. (2020), and otherwise keeps theta with the momentum
  negated (the skew-reversible rejection, r <- -r). The chain is
  skew-reversible with respect to pi(theta, r) = exp(-U(theta) - K(r)); if the
  inner kernel resamples the momentum at every step, it is reversible
  (Theorem 1 of the paper).

  U is the exact full-data energy (`target.energy`, accumulated over chunks
  of the data) when `acceptance_energy="exact"`: the chain is then exact for
  any step size. U(theta) of the current state is cached in the results, so
  each step evaluates the full-data energy once, at theta*.
  `acceptance_energy="minibatch"` replaces U(theta) - U(theta*) by the
  difference of minibatch estimates on one minibatch, chosen by the seed,
  shared by both states (Section 5.2): cheaper, but no longer exact (the
  estimate of the acceptance ratio is biased), so `is_calibrated` is False.
  Both energies come from `target.minibatch_energies([theta, theta*],
  seed)`, which evaluates them on one shared batch (also for a
  `DatasetTarget`, whose batches come from its pipeline, not the seed).

  #### Protocol for the inner kernel

  Any `TransitionKernel` can be corrected if

  1. its results have `log_acceptance_correction`: per chain, the log of
     prod_t P(x_{t+1}^perp, x_t^perp; zeta_t) / P(x_t, x_{t+1}; zeta_t) plus
     K(r) - K(r*), i.e. everything in log (6) except U(theta) - U(theta*).
     For AMAGOLD's stochastic leapfrog it is the energy accumulator rho; for
     a momentum-free proposal (e.g. Barker) it is the log proposal ratio
     log q(theta | theta*) - log q(theta* | theta);
  2. if its results have a `momentum` field, it holds the momentum the next
     proposal starts from (the kernel keeps it, or resamples it itself for
     the reversible variant). On rejection this kernel sets it to minus the
     previous one, applying the involution r -> -r;
  3. it has a `target` attribute (a `tfp_sgmcmc` target), unless `target` is
     given here.

  Fields named in `CLOCK_FIELDS` (`step_size`, `step_count`, `seed`) are
  taken from the proposal even on rejection; every other field is chosen per
  chain between the proposal's results (accepted) and the previous ones
  (rejected), as `tfp.mcmc.MetropolisHastings` does. The step size is found
  by `tfp.mcmc.SimpleStepSizeAdaptation` and
  `tfp.mcmc.DualAveragingStepSizeAdaptation` in `accepted_results`, and the
  `log_accept_ratio` here, so both adapt it.

  #### Examples

  ```python
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x**2, -1), gradient_noise_variance=1.)
  kernel = tfp_sgmcmc.AmortizedMetropolisHastings(
      tfp_sgmcmc.UncalibratedAMAGOLD(target, step_size=0.1,
                                     num_leapfrog_steps=10, friction=0.5))
  samples, is_accepted = tfp.mcmc.sample_chain(
      1000, tf.zeros([4, 2]), kernel=kernel,
      trace_fn=lambda _, pkr: pkr.is_accepted, seed=[0, 1])
  ```

  `tfp_sgmcmc.AMAGOLD` is this composition in one line.

  #### Continuing a chain

  The results cache U(theta) of the chain's state (exact test), so they
  continue a chain only on the same target. `one_step` checks what it can
  see when traced, the same eagerly, in a graph and under XLA: the results'
  type, dtype and number of chains. It cannot see whether results of the
  right type were made on another target or for another state (that would
  cost a full-data energy per step), and would use their stale U(theta):
  `tfp_sgmcmc.check_kernel_results(kernel, state, results)` refuses them
  with a `ValueError` at the cost of one full-data energy; `sample_moments`
  calls it, and you call it before continuing a chain from a checkpoint or
  from another kernel's results. The step size, as in TFP, comes from the
  results (`accepted_results.step_size`); change it with
  `tfp_sgmcmc.with_step_size(results, new)` together with the kernel's.

  #### References

  [1] Zhang, R., Cooper, A. F. and De Sa, C. AMAGOLD: Amortized Metropolis
      adjustment for efficient stochastic gradient MCMC. AISTATS 2020.
  [2] Turitsyn, K. S., Chertkov, M. and Vucelja, M. Irreversible Monte Carlo
      algorithms for efficient sampling. Physica D, 2011.

  Args:
    inner_kernel: the proposal, following the protocol above.
    target: the `tfp_sgmcmc` target whose energy the test uses; default
      `inner_kernel.target`.
    acceptance_energy: "exact" (full-data U; needs
      `target.has_exact_energy`) or "minibatch" (Section 5.2, approximate).
    name: name scope of the kernel's ops.
  """

  def __init__(self, inner_kernel, target=None, acceptance_energy="exact",
               name=None, target_log_prob_fn=None):
    if not isinstance(inner_kernel, tfp.mcmc.TransitionKernel):
      raise TypeError(f"`inner_kernel` must be a tfp.mcmc.TransitionKernel; "
                      f"got {type(inner_kernel).__name__}.")
    own = getattr(inner_kernel, "target", None)
    if target_log_prob_fn is None and (target is None or target is own):
      # The proposal's target (protocol point 3), resolved and checked when
      # the proposal was built: not resolved again.
      if own is None:
        raise ValueError(
            f"`target` is None and `inner_kernel` "
            f"({type(inner_kernel).__name__}) has no `target` attribute; "
            "pass the target whose energy the M-H test uses.")
      sampled = target = own
      target_log_prob_fn = log_prob_lib.minibatch_log_prob_fn(own)
    else:
      sampled, target, target_log_prob_fn = interop.resolve_target(
          target, target_log_prob_fn)
    if sampled is not target and "target_log_prob_fn" in getattr(
        inner_kernel, "parameters", {}) and (
            inner_kernel.parameters["target_log_prob_fn"] is not
            target_log_prob_fn):
      # A TFP wrapper (e.g. TransformedTransitionKernel) rebuilt this kernel
      # with its function: the proposal must move in the same space.
      inner_kernel = inner_kernel.copy(target_log_prob_fn=target_log_prob_fn)
    check_acceptance_energy(acceptance_energy, sampled)
    self._calibration_note = calibration_note(acceptance_energy, sampled)
    self._target = sampled
    self._parameters = dict(inner_kernel=inner_kernel, target=target,
                            acceptance_energy=acceptance_energy, name=name,
                            target_log_prob_fn=target_log_prob_fn)
    # The kernel that errors name: a shell (AMAGOLD) sets its own.
    self._name_for_messages = type(self).__name__
    if self._calibration_note and acceptance_energy == "exact":
      warnings.warn(self._calibration_note, UserWarning, stacklevel=2)

  inner_kernel = arguments.parameter_property("inner_kernel")
  target = interop.sampled_target_property()
  target_log_prob_fn = arguments.parameter_property("target_log_prob_fn")
  acceptance_energy = arguments.parameter_property("acceptance_energy")
  name = arguments.parameter_property("name")

  @property
  def parameters(self):
    return self._parameters

  @property
  def is_calibrated(self):
    """True when the test makes the chain exact: exact energies and
    minibatches drawn i.i.d. from the kernel's seed (`calibration_note`
    says why not otherwise)."""
    return self.acceptance_energy == "exact" and not self._calibration_note

  # Its own test, not TFP's MetropolisHastings, decides: the inner kernel's
  # minibatch `target_log_prob` is not compared across states.
  corrects_with_own_test = True

  @property
  def reports_exact_log_prob(self):
    """Whether `target_log_prob` is the exact log density (the exact test),
    which TFP's exact wrappers may compare."""
    return self.acceptance_energy == "exact"

  @property
  def calibration_note(self):
    """Why the chain is not exact, or "" when it is."""
    return self._calibration_note

  def _energies(self, current_state, proposed_state, cached_energy, seed):
    """(U(theta), U(theta*)), exact or on one shared minibatch."""
    if self.acceptance_energy == "exact":
      return cached_energy, self.target.energy(proposed_state)
    # Both energies on one shared minibatch (the target makes sure of it,
    # also for a DatasetTarget whose pipeline, not the seed, picks batches).
    energy, proposed_energy = self.target.minibatch_energies(
        [current_state, proposed_state], seed)
    return energy, proposed_energy

  def _cached_value_field(self, results):
    """The cached U(theta) of the chain's state (exact test only): see
    `results_guard.cached_value_field`."""
    if self.acceptance_energy != "exact" or not tf.is_tensor(
        getattr(results, "energy", None)):
      return None
    return "energy", _cached_energy(results), self.target.energy

  def one_step(self, current_state, previous_kernel_results, seed=None):
    current_state = checks.as_state(self, current_state, "one_step")
    checks.check_results_type(self, previous_kernel_results,
                              AmortizedMetropolisHastingsResults)
    interop.refuse_metropolis_hastings_around_inexact(
        self, previous_kernel_results)
    return self._one_step(current_state, previous_kernel_results, seed)

  def _one_step(self, current_state, previous_kernel_results, seed):
    with tf.name_scope(self.name or "amortized_mh_one_step"):
      proposal_seed, energy_seed, accept_seed = test_seeds(seed)
      prev = previous_kernel_results
      # Exact or not refused above: the proposal's minibatch
      # `target_log_prob` is compared by this kernel's own test, not by
      # TFP's, so the proposal must not read TFP's mark as meant for it.
      proposed_state, proposed_results = self.inner_kernel.one_step(
          current_state, interop.without_strip_mark(
              prev.accepted_results, proposal_seed), seed=proposal_seed)
      proposed_state = tf.nest.pack_sequence_as(
          current_state, tf.nest.flatten(proposed_state))

      energy, proposed_energy = self._energies(
          current_state, proposed_state, _cached_energy(prev), energy_seed)
      proposed_results = _with_log_prob(proposed_results, proposed_energy,
                                        self.acceptance_energy)
      is_accepted, log_accept_ratio = metropolis_hastings_test(
          energy, proposed_energy,
          proposed_results.log_acceptance_correction, accept_seed)

      next_state, next_energy, _ = acceptance.after_test(
          is_accepted, current_state, proposed_state, energy,
          proposed_energy)
      accepted_results = _choose_results(is_accepted, proposed_results,
                                         prev.accepted_results)
      return next_state, AmortizedMetropolisHastingsResults(
          accepted_results=accepted_results,
          is_accepted=is_accepted,
          log_accept_ratio=log_accept_ratio,
          proposed_state=proposed_state,
          proposed_results=proposed_results,
          energy=next_energy,
          proposed_energy=proposed_energy,
          seed=tfp.random.sanitize_seed(seed),
          target_log_prob=-next_energy)

  def bootstrap_results(self, init_state):
    init_state = checks.as_state(self, init_state, "bootstrap_results")
    with tf.name_scope((self.name or "amortized_mh") + "_bootstrap_results"):
      inner = self.inner_kernel.bootstrap_results(init_state)
      if not hasattr(inner, "log_acceptance_correction") or not getattr(
          self.inner_kernel, "has_log_acceptance_correction", True):
        raise ValueError(
            f"the results of `inner_kernel` ({type(self.inner_kernel).__name__}"
            f") have no `log_acceptance_correction` field; an amortized M-H "
            "test needs the log reverse-over-forward proposal ratio.")
      if self.acceptance_energy == "exact":
        energy = self.target.energy(init_state)
      else:
        energy = self.target.minibatch_energy(init_state,
                                              random.BOOTSTRAP_SEED)
      inner = _with_log_prob(inner, energy, self.acceptance_energy)
      return AmortizedMetropolisHastingsResults(
          accepted_results=inner,
          is_accepted=tf.ones(tf.shape(energy), tf.bool),
          log_accept_ratio=tf.zeros_like(energy),
          proposed_state=init_state,
          proposed_results=inner,
          energy=energy,
          proposed_energy=energy,
          seed=tfp.random.sanitize_seed(random.BOOTSTRAP_SEED),
          target_log_prob=-energy)


def _with_log_prob(results, energy, acceptance_energy):
  """The inner results with `target_log_prob` = -U(state) where the exact
  test has computed U anyway (so TFP's ReplicaExchangeMC, which reads the
  innermost `target_log_prob`, sees the exact value)."""
  if acceptance_energy != "exact" or "target_log_prob" not in getattr(
      results, "_fields", ()):
    return results
  tlp = results.target_log_prob
  return results._replace(target_log_prob=tf.cast(-energy, tlp.dtype))


def _cached_energy(results):
  """U(theta) of the chain's state for the exact test: minus the accepted
  results' `target_log_prob`, where `_with_log_prob` keeps it (the same
  value as `energy`, bit for bit), else `energy`.

  That field is where TFP's wrappers keep the log density of the state:
  `tfp.mcmc.ReplicaExchangeMC`, after swapping states between replicas,
  re-evaluates the innermost `target_log_prob` of each (and only that), so
  `energy` is then the energy of the state before the swap, at another
  temperature. Tested with it, AMAGOLD replicas at inverse temperatures
  (1, 0.3, 0.1) gave sds 0.536 and 1.593 for a Gaussian's 0.5 and 1.5."""
  tlp = getattr(results.accepted_results, "target_log_prob", None)
  if tlp is None or tlp.dtype != results.energy.dtype:
    return results.energy
  return -tlp


def _innermost_target(target):
  while getattr(target, "base_target", None) is not None:
    target = target.base_target
  return target


def check_acceptance_energy(acceptance_energy, target):
  """`acceptance_energy` is known, and one `target` can give."""
  acceptance.check_acceptance_energy(acceptance_energy)
  if acceptance_energy == "exact" and not target.has_exact_energy:
    raise TargetCapabilityError(
        f"`acceptance_energy='exact'` needs the full-data energy U(theta), "
        f"but `target` ({type(target).__name__}) has none "
        "(has_exact_energy=False; for a DatasetTarget pass `full_dataset`). "
        "Use acceptance_energy='minibatch' for an approximate test.")


# The start of `calibration_note`'s sentence where the target's batches are
# not drawn from the seed, which the constructor warns (a regular
# expression for `warnings`' filter).
NOT_EXACT_MESSAGE = r"the amortized test is exact only when"


def calibration_note(acceptance_energy, target):
  """Why a chain tested with `acceptance_energy` on `target` is not exact,
  or "" when it is (the kernel's `calibration_note`)."""
  if acceptance_energy != "exact":
    return ("acceptance_energy='minibatch': the test uses minibatch "
            "energies, so the chain is approximate.")
  if target.minibatches_from_seed:
    return ""
  return (
      "the amortized test is exact only when a trajectory's minibatches are "
      "as likely in reverse order as forward (i.i.d. batches chosen by the "
      f"kernel's seed); a {type(_innermost_target(target)).__name__}'s "
      "batches are not (minibatches_from_seed=False: e.g. a DatasetTarget's "
      "pipeline chooses them, and one that batches epoch by epoch without "
      "replacement does not give that), so this AMAGOLD chain is not "
      "guaranteed exact (is_calibrated=False). Use an InMemoryTarget or a "
      "TFRecordTarget (batches drawn from the seed) for an exact chain.")


def _choose_results(is_accepted, proposed, previous):
  """The accepted inner results, following the protocol in the class doc."""
  fields = {}
  for name in proposed._fields:
    new, old = getattr(proposed, name), getattr(previous, name)
    if name in CLOCK_FIELDS:
      fields[name] = new
    elif name == "momentum":
      fields[name] = momentum_after_test(is_accepted, new, old)
    elif all(tf.is_tensor(t) and t.shape.rank is not None and
             t.shape.rank >= is_accepted.shape.rank
             for t in tf.nest.flatten(new)):
      fields[name] = choose(is_accepted, new, old)
    else:
      # Not per chain (a scalar diagnostic, a Python value): nothing to
      # choose.
      fields[name] = new
  return type(proposed)(**fields)


class AmortizedShell(tfp.mcmc.TransitionKernel):
  """A calibrated kernel built from its own arguments as
  `AmortizedMetropolisHastings(proposal)` (TFP's `hmc.py` pattern: a thin
  shell whose `_impl` steps). `one_step`, `bootstrap_results` and the
  protocol are the implementation's; `parameters` are the shell's, so
  `copy(...)` and TFP's wrappers rebuild the shell."""

  def _build(self, proposal, target, acceptance_energy, name):
    self._impl = AmortizedMetropolisHastings(
        proposal, target=target, acceptance_energy=acceptance_energy,
        name=name)
    self._impl._name_for_messages = type(self).__name__  # pylint: disable=protected-access

  @property
  def parameters(self):
    return self._parameters

  @property
  def is_calibrated(self):
    return self._impl.is_calibrated

  @property
  def calibration_note(self):
    """Why the chain is not exact, or "" when it is."""
    return self._impl.calibration_note

  @property
  def inner_kernel(self):
    """The proposal."""
    return self._impl.inner_kernel

  @property
  def target(self):
    """The target the chain samples: `TemperedTarget(target, T)` when
    T != 1 (the constructor's `target` stays in `parameters`)."""
    return self._impl.target

  @property
  def reports_exact_log_prob(self):
    return self._impl.reports_exact_log_prob

  corrects_with_own_test = True
  target_log_prob_fn = arguments.parameter_property("target_log_prob_fn")
  acceptance_energy = arguments.parameter_property("acceptance_energy")
  temperature = arguments.parameter_property("temperature")
  step_size = arguments.parameter_property("step_size")
  name = arguments.parameter_property("name")

  def _cached_value_field(self, results):
    return self._impl._cached_value_field(results)  # pylint: disable=protected-access

  def one_step(self, current_state, previous_kernel_results, seed=None):
    # Refused under the shell's own name (the impl would name itself).
    interop.refuse_metropolis_hastings_around_inexact(
        self, previous_kernel_results)
    return self._impl.one_step(current_state, previous_kernel_results,
                               seed=seed)

  def bootstrap_results(self, init_state):
    return self._impl.bootstrap_results(init_state)
