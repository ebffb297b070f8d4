"""The checks a kernel makes of its arguments and of what `one_step` is given,
each naming the argument, the value seen and the fix; at construction or at
trace time, never per step."""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc.kernels import interop

__all__ = ["check_step", "check_results_type", "check_compute_energy",
           "check_compute_energy_for_log_density", "as_state",
           "check_hyperparameter_shapes"]


def as_state(kernel, state, method):
  """The state with its numpy parts (arrays and numpy scalars) converted to
  tensors of their own dtype; any other part that is not a tensor (a Python
  number or list) is refused, naming the part, its type and the fix.

  Every entry point that takes a state (`one_step`, `bootstrap_results`) calls
  this first, so that no later check meets a numpy shape (a tuple, without a
  `rank`)."""
  parts = [tf.convert_to_tensor(p) if isinstance(p, (np.ndarray, np.generic))
           else p for p in tf.nest.flatten(state)]
  for i, part in enumerate(parts):
    if not tf.is_tensor(part):
      raise TypeError(
          f"`current_state` part {i} of {_name(kernel)}.{method} is a "
          f"{type(part).__name__}, not a tensor or numpy array (got "
          f"{part!r:.60}): convert it once, e.g. tf.constant(x, tf.float32),"
          " and pass the same tensors to `bootstrap_results` and "
          "`one_step`.")
  return tf.nest.pack_sequence_as(state, parts)


def _name(kernel):
  """The kernel that errors name (a shell such as AMAGOLD sets its own)."""
  return getattr(kernel, "_name_for_messages", type(kernel).__name__)


# Constructor arguments that may hold one value per coordinate or chain.
PER_COORDINATE = ("step_size", "friction", "noise_estimate", "temperature",
                  "diffusion", "momentum_std")


def check_hyperparameter_shapes(kernel, state):
  """A per-part step size has one entry per state part
  (`arguments.check_step_size_matches`) and each per-coordinate argument
  of `kernel` fits the state's shape (`arguments.check_fits_state`):
  static shapes, at trace time."""
  parameters = getattr(kernel, "parameters", {}) or {}
  arguments.check_step_size_matches(parameters.get("step_size"), state)
  for name in [n for n in PER_COORDINATE if n in parameters]:
    arguments.check_fits_state(name, parameters[name], state)


def check_step(kernel, state, results, results_type):
  """What `one_step` is given, checked from what is known at trace time
  (types, dtypes, static shapes: the same eagerly, in a graph and under XLA,
  and nothing per step): the state's parts (`as_state`), the results' type
  (`check_results_type`), the state's dtype and chain dimensions against
  those of the results' energy, and the per-coordinate arguments against the
  state's shape. Returns the state.

  Values are not checked: results of the same type from another target (a
  cached U(theta) of other data) or for another state of the same shape
  cannot be told apart here without a full-data energy per step;
  `check_kernel_results` checks them once, before a run."""
  state = as_state(kernel, state, "one_step")
  check_results_type(kernel, results, results_type)
  _check_chains(state, results)
  check_hyperparameter_shapes(kernel, state)
  _check_schedule_not_adapted(kernel)
  return state


def _check_schedule_not_adapted(kernel):
  """A step-size schedule, and `store_parameters_in_results=True` (TFP's
  step-size adaptation kernels rebuild the kernel so, to set the step size
  through the results): the schedule would silently replace every step
  size they set."""
  parameters = getattr(kernel, "parameters", {}) or {}
  if parameters.get("store_parameters_in_results") and arguments.is_schedule(
      parameters.get("step_size")):
    raise ValueError(
        f"`step_size` of {_name(kernel)} is a schedule "
        f"({type(parameters['step_size']).__name__}), and the kernel is "
        "adapted (store_parameters_in_results=True, as TFP's "
        "SimpleStepSizeAdaptation and DualAveragingStepSizeAdaptation "
        "rebuild it): the schedule would replace every step size they set."
        " Adapt a constant step size (or use tfp_sgmcmc.warm_up), or run "
        "the schedule without an adaptation kernel.")


def check_results_type(kernel, results, results_type):
  """`previous_kernel_results` are `results_type`, the kernel's own type:
  exactly, since a kernel's results type names the kernel (`NaiveSGHMC`'s
  results subclass `SGHMC`'s, and are refused by `SGHMC`)."""
  if type(results) is not results_type:  # pylint: disable=unidiomatic-typecheck
    name = _name(kernel)
    raise TypeError(
        f"`previous_kernel_results` of {name}.one_step are "
        f"{type(results).__name__}, not {results_type.__name__}: they come "
        f"from another kernel. Start from {name}.bootstrap_results(state) "
        "or pass the results this kernel returned.")


def _check_chains(state, results):
  """The state's dtype and chain dimensions are those of the results'
  energy (static shapes)."""
  energy = next((e for e in (getattr(results, field, None) for field in (
      "energy", "minibatch_energy", "target_log_prob")) if tf.is_tensor(e)),
                None)
  for i, part in enumerate(tf.nest.flatten(state) if energy is not None
                           else []):
    chains = energy.shape
    if part.dtype != energy.dtype or None not in (
        chains.rank, part.shape.rank) and not part.shape[
            :chains.rank].is_compatible_with(chains):
      raise (TypeError if part.dtype != energy.dtype else ValueError)(
          f"`current_state` part {i} ({part.dtype.name}, shape "
          f"{list(part.shape)}) is not of the chains `previous_kernel_results`"
          f" are for ({energy.dtype.name}, chain shape {list(chains)}, from "
          "their `energy`): pass the state and results of one run, or "
          "bootstrap_results(state) for new chains.")


def check_compute_energy(compute_energy):
  """`compute_energy` is a Python bool."""
  arguments.check_bool(
      "compute_energy", compute_energy, " Pass compute_energy=False to skip "
      "the per-step minibatch energy (the results' `energy` and "
      "`target_log_prob` then hold NaN), or True (the default) to report it.")


def check_compute_energy_for_log_density(compute_energy, target):
  """`check_compute_energy`, and for a kernel whose step reads the exact log
  density (its MALA correction; see `minibatch_energy_and_gradient`):
  False only with a minibatch target. Kernels whose own step reads no log
  density (SGHMC, SGNHT, AMAGOLD) check only the type."""
  check_compute_energy(compute_energy)
  if not compute_energy and interop.reports_exact_log_prob(target):
    raise ValueError(
        "`compute_energy=False` with a full-batch target (`target_log_prob_fn="
        "` or InMemoryTarget(..., full_batch=True)): this kernel's step "
        "needs the exact log density at each new state, the results' "
        "`target_log_prob`, from which its MALA correction is computed and "
        "which tfp.mcmc.MetropolisHastings compares. Drop "
        "`compute_energy=False` (or pass compute_energy=True); SGHMC, SGNHT "
        "and AMAGOLD accept it with a full-batch target.")
