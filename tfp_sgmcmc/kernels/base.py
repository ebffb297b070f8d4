"""The base of the library's kernels: TFP's protocol and the step, written once.

A kernel is a `tfp.mcmc.TransitionKernel` that keeps its constructor
arguments in `self._parameters` (so `kernel.copy(...)` works) and writes
only its transition:

    class MyKernel(StochasticGradientKernel):
      _results_type = MyKernelResults      # a namedtuple with the shared
      _scope = "my_kernel"                 # fields (see below)

      def _transition(self, state, previous_results, step):
        energy, grad = minibatch_energy_and_gradient(
            self.target, state, random.derive_seeds(step.seed, 1)[0],
            self.compute_energy)
        new_state = dynamics.sgld_update(state, grad, step.size, 1.,
                                         step.seed)
        return Move(new_state, energy, checked=[new_state])

Everything else is here: the checks of what `one_step` is given, the step
size (a schedule's value, or the results' so that TFP's adaptation kernels
can set it), the per-chain divergence bookkeeping (a chain whose energy or
new state is not finite keeps its last finite state and is flagged
`diverged`), the results' shared fields (`energy`, `step_size`,
`step_count`, `diverged`, `seed`, `target_log_prob`) and
`bootstrap_results`.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import (as_dtype, choose, finite_per_chain,
                                   state_dtype)
from tfp_sgmcmc.kernels import checks
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.targets.checks import check_initial_state

__all__ = ["StochasticGradientKernel", "Move", "Step",
           "minibatch_energy_and_gradient", "not_computed", "step_size_at",
           "temperature_at", "initial_step_size"]


class Step(collections.namedtuple("Step", ["count", "size", "seed",
                                           "dtype"])):
  """What a transition needs of the step: its count (a scalar), its step
  size (the results' or a schedule's value), its seed and the state's
  dtype."""
  __slots__ = ()


class Move(collections.namedtuple(
    "Move", ["state", "energy", "checked", "kept", "fields", "finite"])):
  """What a transition proposes.

  Fields:
    state: the new state.
    energy: the results' energy field (None: not computed, NaN reported).
    checked: structures that must be finite (with `energy`) for a chain not
      to diverge.
    kept: {results field: new value} of per-chain fields a diverged chain
      keeps from the previous results (momentum, thermostat, ...).
    fields: {results field: value, or a function of the per-chain
      `diverged` flags} of the other kernel-specific fields.
    finite: per-chain finiteness computed by the transition itself (then
      `energy` and `checked` are not checked again).
  """
  __slots__ = ()

  def __new__(cls, state, energy, checked=(), kept=None, fields=None,
              finite=None):
    return super().__new__(cls, state, energy, checked, kept or {},
                           fields or {}, finite)


class StochasticGradientKernel(tfp.mcmc.TransitionKernel):
  """The shared protocol and step of the stochastic-gradient kernels.

  Not calibrated: a kernel has no Metropolis-Hastings test of its own
  (AMAGOLD and the amortized Barker add one by composition with
  `AmortizedMetropolisHastings`).

  Continuing a chain: `one_step` steps with the kernel's own step size, and
  with the previous results' `step_size` only when the kernel was built with
  `store_parameters_in_results=True`, as TFP's adaptation kernels rebuild
  it to set the step size through the results (TFP's HMC does the same).
  Otherwise the results' `step_size` field is passed on unchanged, as TFP's
  HMC does: after `kernel.copy(step_size=new)` it still holds the old value
  until `with_step_size(results, new)` or `bootstrap_results` sets it.
  `one_step` checks the results' type, dtype and chain shape when it is
  traced (`checks.check_step`), the same eagerly, in a graph and under XLA;
  results that cache a value of another target are refused by
  `check_kernel_results` (`results_guard.cached_value_field`), which
  `sample_moments` runs before its loop.

  Subclasses set `_results_type` and `_scope`, implement `_transition`,
  and may override `_initial_fields`, `_bootstrap_energy` and
  `_initial_log_prob`.
  """

  _results_type = None
  _scope = None
  # The results field of the minibatch energy.
  _energy_field = "energy"
  # Kernels whose results TFP's MetropolisHastings may choose per chain
  # (those with a `log_acceptance_correction`) count steps per chain with a
  # full-batch target (`interop.step_count_of`).
  _per_chain_step_count = False

  @property
  def parameters(self):
    return self._parameters

  @property
  def is_calibrated(self):
    return False

  @property
  def reports_exact_log_prob(self):
    """Whether the results' `target_log_prob` is the log density (a
    full-batch target, with `compute_energy`), which TFP's exact wrappers
    may compare."""
    return (interop.reports_exact_log_prob(self.target)
            and self.compute_energy)

  target = interop.sampled_target_property()
  target_log_prob_fn = arguments.parameter_property("target_log_prob_fn")
  step_size = arguments.parameter_property("step_size")
  name = arguments.parameter_property("name")

  @property
  def compute_energy(self):
    return self._parameters.get("compute_energy", True)

  @property
  def store_parameters_in_results(self):
    """True when a TFP step-size adaptation kernel wraps this one (it sets
    the step size through the results, so no warning is given)."""
    return self._parameters["store_parameters_in_results"]

  def _cached_value_field(self, results):
    if not self.reports_exact_log_prob or not tf.is_tensor(
        getattr(results, "target_log_prob", None)):
      return None
    return ("target_log_prob", results.target_log_prob,
            lambda state: -self.target.energy(state))

  # --- the step ------------------------------------------------------------

  def _transition(self, state, previous_results, step):
    """The kernel's move from `state`: returns a `Move`."""
    raise NotImplementedError

  def _temperature_at(self, step):
    return temperature_at(self.step_size, step.count, self.temperature,
                          step.dtype)

  def one_step(self, current_state, previous_kernel_results, seed=None):
    interop.refuse_metropolis_hastings_around_inexact(
        self, previous_kernel_results)
    current_state = checks.check_step(self, current_state,
                                      previous_kernel_results,
                                      self._results_type)
    with tf.name_scope(self.name or self._scope + "_one_step"):
      prev = previous_kernel_results
      dtype = state_dtype(current_state)
      count = interop.step_count_of(prev)
      step = Step(count, step_size_at(
          self.step_size, count, prev.step_size, dtype,
          from_results=self.store_parameters_in_results), seed, dtype)
      move = self._transition(current_state, prev, step)
      return self._finish(current_state, prev, step, move)

  def _finish(self, current_state, prev, step, move):
    """Divergence bookkeeping and the results of a `Move`."""
    energy = move.energy
    if move.finite is not None:
      finite = move.finite
    elif energy is None:
      # Not computed: the moved state (linear in the gradient in every
      # update here) carries a non-finite gradient.
      finite = finite_per_chain(None, move.checked, chains=prev.diverged)
      energy = not_computed(prev.diverged, step.dtype)
    else:
      finite = finite_per_chain(energy, move.checked)
    diverged = tf.broadcast_to(prev.diverged, tf.shape(finite)) | ~finite
    next_state = choose(diverged, current_state, move.state)
    fields = {name: choose(diverged, getattr(prev, name), value)
              for name, value in move.kept.items()}
    for name, value in move.fields.items():
      fields[name] = value(diverged) if callable(value) else value
    fields.setdefault(self._energy_field, energy)
    if "target_log_prob" not in fields:
      # Not computed (NaN): with a full-batch target too, where it would
      # cost a log density at the new state.
      fields["target_log_prob"] = (-energy if not self.compute_energy else
                                   interop.target_log_prob(
                                       self.target, next_state, energy))
    # As TFP's HMC: a kernel that steps with its own constant step size
    # leaves the results' field as it was (bootstrap_results set it to the
    # kernel's), so that the field is the same tensor from step to step and
    # TFP's MetropolisHastings does not broadcast it per chain.
    reported = (step.size if self.store_parameters_in_results or
                arguments.is_schedule(self.step_size) else prev.step_size)
    fields.update(step_size=reported, step_count=prev.step_count + 1,
                  diverged=diverged, seed=tfp.random.sanitize_seed(step.seed))
    return next_state, self._results_type(**fields)

  # --- the start -----------------------------------------------------------

  def _bootstrap_energy(self, init_state):
    """(U~ at the initial state on the bootstrap minibatch, extra fields)."""
    return self.target.minibatch_energy(init_state,
                                        random.BOOTSTRAP_SEED), {}

  def _initial_fields(self, init_state, energy):
    """The kernel-specific results fields at the start."""
    del init_state, energy
    return {}

  def _initial_log_prob(self, init_state, energy):
    del init_state
    return -energy

  def bootstrap_results(self, init_state):
    init_state = checks.as_state(self, init_state, "bootstrap_results")
    with tf.name_scope((self.name or self._scope) + "_bootstrap_results"):
      check_initial_state(init_state, self.target)
      checks.check_hyperparameter_shapes(self, init_state)
      dtype = state_dtype(init_state)
      energy, fields = self._bootstrap_energy(init_state)
      energy = tf.cast(energy, dtype)
      if not self.compute_energy:
        energy = not_computed(tf.math.is_finite(energy), dtype)
      fields.update(self._initial_fields(init_state, energy))
      fields.setdefault("target_log_prob",
                        self._initial_log_prob(init_state, energy))
      count = (interop.initial_step_count(self.target, energy)
               if self._per_chain_step_count else tf.constant(0, tf.int32))
      fields.update({self._energy_field: energy},
                    step_size=initial_step_size(self.step_size, dtype),
                    step_count=count,
                    diverged=_not_finite_at_start(init_state, energy),
                    seed=tfp.random.sanitize_seed(random.BOOTSTRAP_SEED))
      return self._results_type(**fields)


def _not_finite_at_start(init_state, energy):
  """The `diverged` flags of the initial results: True for chains whose
  initial state is not finite. Eagerly such a state is refused
  (`check_initial_state`) and in a `tf.function` an assertion fails; XLA
  drops assertions, and there the flag says it from the first results on
  (the chain stays at its non-finite start, so its draws are NaN)."""
  return ~finite_per_chain(None, [init_state],
                           chains=tf.zeros(tf.shape(energy), tf.bool))


def minibatch_energy_and_gradient(target, state, seed, compute_energy):
  """(U~, grad U~) on the batch of `seed`; with `compute_energy=False` only
  the gradient (`target.gradient`: under XLA the energy's own work, e.g. a
  log1p per example, is not done) and None for the energy."""
  if compute_energy:
    return target.energy_and_gradient(state, seed)
  return None, target.gradient(state, seed)


def not_computed(chains, dtype):
  """NaN per chain (shape of the boolean `chains`, e.g. the `diverged`
  flags): the `energy` / `target_log_prob` a kernel built with
  `compute_energy=False` reports. NaN, so it is never taken for a value."""
  return tf.fill(tf.shape(chains), tf.constant(np.nan, dtype))


def step_size_at(step_size, step_count, previous_step_size, dtype,
                 from_results=True):
  """A schedule's value at this step; otherwise the kernel's own step size,
  or with `from_results` (the kernel's `store_parameters_in_results`) the
  results' field.

  As in TFP's HMC: a step-size adaptation kernel (`SimpleStepSizeAdaptation`,
  `DualAveragingStepSizeAdaptation`) rebuilds the kernel with
  `store_parameters_in_results=True` and sets the step size through the
  results (also a list, one per state part, adapted part by part); any
  other kernel steps with its own value, so a chain resumed by
  `kernel.copy(step_size=new)` from old results uses `new`, compiled or not.
  """
  if arguments.is_schedule(step_size):
    return tf.cast(step_size(step_count, dtype=dtype), dtype)
  source = previous_step_size if from_results else step_size
  if arguments.is_per_part(source):
    return [as_dtype(h, dtype) for h in source]
  return as_dtype(source, dtype)


def temperature_at(step_size, step_count, temperature, dtype):
  """The temperature of this step's injected noise.

  A schedule with a `noise_scale(step_count)` (e.g. the exploration phase of
  `CyclicalSchedule`) scales it; otherwise it is the kernel's temperature.
  """
  t = as_dtype(temperature, dtype)
  scale = getattr(step_size, "noise_scale", None)
  if arguments.is_schedule(step_size) and scale is not None:
    t = t * tf.cast(scale(step_count, dtype=dtype), dtype)
  return t


def initial_step_size(step_size, dtype):
  if arguments.is_schedule(step_size):
    return tf.cast(step_size(tf.constant(0, tf.int32), dtype=dtype), dtype)
  if arguments.is_per_part(step_size):
    return [as_dtype(h, dtype) for h in step_size]
  return as_dtype(step_size, dtype)
