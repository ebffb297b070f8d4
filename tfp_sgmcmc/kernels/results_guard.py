"""The check of results that continue a chain: `check_kernel_results`.

A kernel's results carry state that a later step uses: the step size (TFP's
convention: adaptation kernels set it there) and, for some kernels, a value
that depends on the target (AMAGOLD's cached full-data U(theta), the exact
`target_log_prob` of a full-batch kernel). Results from another kernel,
another target or another state would then be used silently.

`one_step` checks only what is known when it is traced (the results' type,
dtype and chain shape: `checks.check_step`), the same eagerly, in a graph
and under XLA; a cached value cannot be checked there without a full-data
energy per step. `check_kernel_results` checks the values once, explicitly,
down a stack of wrappers: `sample_moments` calls it before its compiled
run, and a user continuing a chain from a checkpoint or from another
kernel's results calls it before theirs.
"""

import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import arguments
from tfp_sgmcmc._structure import as_dtype
from tfp_sgmcmc.dynamics import mass as mass_lib
from tfp_sgmcmc.kernels import momentum

__all__ = ["StepSizeFromResultsWarning", "MassFromResultsWarning",
           "cached_value_field", "check_cached_values",
           "check_kernel_results", "with_step_size",
           "warn_if_step_size_differs", "warn_if_mass_differs"]


class StepSizeFromResultsWarning(UserWarning):
  """Raised as a warning when `one_step` (or `check_kernel_results`) is
  given results whose `step_size` differs from the kernel's own
  `step_size`: the step uses the kernel's value (as TFP's HMC does outside
  an adaptation kernel), e.g. not a step size adapted earlier; set the
  results' with `with_step_size`."""


class MassFromResultsWarning(UserWarning):
  """Raised as a warning when `check_kernel_results` is given results whose
  `momentum_distribution` (e.g. one TFP's `DiagonalMassMatrixAdaptation`
  adapted) differs from the kernel's own: the step uses the kernel's, as
  TFP's preconditioned HMC does outside an adaptation kernel."""


def cached_value_field(kernel, results):
  """(field name, cached tensor, function of the state giving its right
  value) for a kernel whose results cache a value that depends on its
  target and that a later step uses, else None.

  * `AmortizedMetropolisHastings` (AMAGOLD, the amortized Barker) with
    `acceptance_energy="exact"`: `energy`, the full-data U(theta) of the
    chain's state that the next M-H test uses.
  * A kernel with a full-batch target: `target_log_prob`, the exact log
    density at the state, which `tfp.mcmc.MetropolisHastings` compares, and
    from which full-batch SGLD (MALA) reuses the gradient.
  """
  method = getattr(kernel, "_cached_value_field", None)
  if method is None:
    return None
  return method(results)


def check_cached_values(kernel, state, results, argument, path=""):
  """Raises if `results` cache a target-dependent value (see
  `cached_value_field`) that is not this kernel's target's value at `state`:
  results made on another target (or for another state) would otherwise be
  used silently, e.g. AMAGOLD's M-H test with another target's U(theta).
  Eager only; costs one evaluation of the target's energy at `state`."""
  field = cached_value_field(kernel, results)
  if field is None or not _has_values(field[1]):
    return
  name, cached, expected_fn = field
  cached = np.asarray(cached)
  state = tf.nest.map_structure(tf.convert_to_tensor, state)
  expected = np.asarray(tf.cast(expected_fn(state), cached.dtype))
  try:
    expected = np.broadcast_to(expected, cached.shape)
  except ValueError:
    return  # Shapes that do not fit: `checks.check_step` reports those.
  rtol = np.sqrt(np.finfo(cached.dtype).eps)  # 3e-4 (float32), 1.5e-8
  close = np.isclose(cached, expected, rtol=rtol, atol=rtol, equal_nan=True)
  close |= np.isinf(cached) & (cached == expected)
  if not close.all():
    bad = np.argwhere(~close)
    where = ", ".join(
        f"chain {tuple(int(i) for i in b)}: {cached[tuple(b)]:.6g} in the "
        f"results, {expected[tuple(b)]:.6g} now" for b in bad[:3])
    if bad.shape[0] > 3:
      where += f", ... ({bad.shape[0]} chains of {cached.size})"
    elif not bad.shape[1]:
      where = (f"{float(cached):.6g} in the results, {float(expected):.6g} "
               "now")
    raise ValueError(
        f"`{argument}`{path} were not made by this kernel for this target "
        f"and state: their cached `{name}` ({where}) is not what "
        f"{type(kernel).__name__}'s target gives at `current_state`. They "
        "come from a kernel on another target (other data, log-likelihood, "
        "prior, N or temperature) or were returned with another state, and "
        f"the next step would use the stale `{name}` (e.g. in its "
        "Metropolis-Hastings test): a wrong answer. Start the chain on this "
        "target with `kernel.bootstrap_results(current_state)` (keep the "
        "old momentum or step size with `results._replace(...)` if you "
        "want them), or pass the state these results were returned with.")


def _has_values(x):
  return tf.executing_eagerly() and tf.is_tensor(x) and hasattr(x, "numpy")


def _format(x):
  return np.array2string(np.asarray(x, np.float64), precision=6,
                         separator=", ")


def _inner(kernel, results, state):
  """(inner kernel, its results, its state) one level down a kernel
  wrapper's results, or None: TFP's TransformedTransitionKernel (its inner
  state is `transformed_state`), MetropolisHastings and the amortized test
  (`accepted_results`), and wrappers with `inner_results` (StepSeeded, the
  step-size adaptation kernels, ...)."""
  inner_kernel = getattr(kernel, "inner_kernel", None)
  if inner_kernel is None:
    return None
  if hasattr(results, "transformed_state") and hasattr(results,
                                                       "inner_results"):
    # TransformedTransitionKernel steps a copy of `inner_kernel` rebuilt on
    # the transformed log density (`inner_kernel` is the one it was given).
    inner_kernel = getattr(kernel, "_inner_kernel", inner_kernel)
    return inner_kernel, results.inner_results, results.transformed_state
  if hasattr(results, "accepted_results"):
    return inner_kernel, results.accepted_results, state
  if hasattr(results, "inner_results"):
    return inner_kernel, results.inner_results, state
  return None


def check_kernel_results(kernel, current_state, kernel_results,
                         argument="kernel_results"):
  """Checks, eagerly and once, that `kernel_results` can continue a chain
  at `current_state` with `kernel`; run it before a run, eager or compiled.

  `one_step` checks only what it sees when traced (the results' type,
  dtype and number of chains), the same eagerly, in a graph and under XLA:
  their values would cost a full-data energy per step. So call this before
  continuing a chain from results this kernel did not just return (a
  checkpoint, another kernel's results; `sample_moments` does). Down the
  kernel's wrappers (StepSeeded, TransformedTransitionKernel, step-size
  adaptation, MetropolisHastings, AMAGOLD's amortized test) it

  * raises a `ValueError` if a kernel's results cache a value that depends
    on the target and that the next step uses (AMAGOLD's and the amortized
    Barker's full-data U(theta) with the exact test; `target_log_prob` with
    a full-batch target) and that value is not this kernel's target's at
    the state: results made on another target (or for another state);
  * raises a `ValueError` if the results of a `StepSeeded` chain carry
    another seed than the kernel's (the step seeds come from the results,
    so the kernel's seed would be ignored);
  * warns (`StepSizeFromResultsWarning`) when the results' `step_size`
    differs from the kernel's own constant `step_size` and no step-size
    adaptation kernel sets it: the run uses the kernel's step size, not the
    results' (e.g. an adapted one);
  * warns (`MassFromResultsWarning`) when the results'
    `momentum_distribution` differs from the kernel's own and the kernel
    does not read it from them (`store_parameters_in_results=False`): the
    run uses the kernel's mass, not the results' (e.g. one TFP's
    `DiagonalMassMatrixAdaptation` adapted).

  It costs one full-data energy evaluation per cached field (none for
  minibatch kernels). Inside a `tf.function` it does nothing: call it
  before.

  Args:
    kernel: the kernel (or stack of wrappers) that will continue the chain.
    current_state: the state the chain continues from.
    kernel_results: the results to continue with, e.g. a previous run's
      `final_kernel_results` or `load_chain`'s.
    argument: the name the messages give `kernel_results` (e.g.
      "previous_kernel_results").

  Returns:
    None.

  Raises:
    ValueError: a cached, target-dependent value in the results is not the
      kernel's target's at `current_state`, or a `StepSeeded` chain's
      results carry another seed than the kernel's.

  #### Example

  Results whose step size is not the kernel's are reported before a
  compiled run uses the kernel's:

  ```python
  import warnings
  kernel = tfp_sgmcmc.SGLD(target, step_size=1e-3)
  init = tf.zeros([d])
  state, results = kernel.one_step(init, kernel.bootstrap_results(init),
                                   seed=[0, 1])
  tfp_sgmcmc.check_kernel_results(kernel, state, results)   # silent
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tfp_sgmcmc.check_kernel_results(kernel.copy(step_size=1e-4), state,
                                    results)
  print(caught[0].category.__name__)   # StepSizeFromResultsWarning
  ```
  """
  if not tf.executing_eagerly():
    return
  state = tf.nest.map_structure(tf.convert_to_tensor, current_state)
  path = ""
  adapted = False
  level = (kernel, kernel_results, state)
  while level is not None:
    k, results, s = level
    _check_seed(k, results, argument, path)
    adapted = adapted or _adapts_step_size(k)
    if getattr(k, "_cached_value_field", None) is not None:
      check_cached_values(k, s, results, argument, path)
    if _warns_on_step_size(k):
      warn_if_step_size_differs(k, results, argument, path, adapted=adapted,
                                stacklevel=3)
      warn_if_mass_differs(k, results, s, argument, path, stacklevel=3)
    level = _inner(k, results, s)
    if level is not None:
      path += "." + ("accepted_results" if hasattr(results, "accepted_results")
                     else "inner_results")


_NESTED_RESULTS = ("inner_results", "accepted_results", "proposed_results")


def _check_seed(kernel, results, argument, path):
  """Refuses the results of a `StepSeeded` chain of another seed than the
  kernel's: the step's seed is read from the results, so the kernel's seed
  would be ignored (every kernel seed would continue with the same noise),
  as `load_chain` refuses a checkpoint of another seed."""
  seed = getattr(kernel, "seed", None)
  saved = getattr(results, "base_seed", None)
  if seed is None or saved is None or not _has_values(saved):
    return
  mine, theirs = np.asarray(seed).tolist(), np.asarray(saved).tolist()
  if mine != theirs:
    raise ValueError(
        f"`{argument}{path}` continues a chain of seed {theirs}, and the "
        f"step seeds come from the results: the kernel's seed {mine} "
        "would be ignored (every kernel seed would give the same draws). "
        f"Build the kernel with seed={theirs} to continue that chain, or "
        f"replace the results' `base_seed` (results._replace(base_seed="
        f"{mine})) to continue with new noise.")


def with_step_size(kernel_results, step_size):
  """`kernel_results` with every `step_size` field set to `step_size`.

  Kernels read the step size from their results (TFP's convention), so a
  chain continued with `kernel.copy(step_size=new)` and the old results
  would keep the old one. This replaces it down the wrappers' results
  (`inner_results` of StepSeeded and of TFP's step-size adaptation and
  TransformedTransitionKernel, `accepted_results` and `proposed_results` of
  the M-H tests), and the `new_step_size` that TFP's
  `SimpleStepSizeAdaptation` and `DualAveragingStepSizeAdaptation` step
  with (kept after their adaptation; during it they go on adapting), in
  each field's dtype; a list gives one step size per state part.
  Everything else (momentum, counters, seeds) is kept.

      kernel = kernel.copy(step_size=0.05)          # or rebuild it
      results = tfp_sgmcmc.with_step_size(results, 0.05)

  Args:
    kernel_results: the (possibly nested) kernel results.
    step_size: the new step size: a value (not a schedule), or a list with
      one per state part.

  Returns:
    `kernel_results` with every `step_size` field replaced, in the same
    structure.

  Raises:
    TypeError: `step_size` is a schedule.
    ValueError: no `step_size` field in the results, or a list of step
      sizes whose length is not the number of state parts.

  #### Example

  ```python
  kernel = tfp_sgmcmc.SGLD(target, step_size=1e-3)
  init = tf.zeros([d])
  state, results = kernel.one_step(init, kernel.bootstrap_results(init),
                                   seed=[0, 1])
  kernel = kernel.copy(step_size=4e-3)
  results = tfp_sgmcmc.with_step_size(results, 4e-3)
  samples = tfp.mcmc.sample_chain(5, state, kernel=kernel,
                                  previous_kernel_results=results,
                                  trace_fn=None, seed=[0, 2])
  print(float(results.step_size))   # 0.004
  ```
  """
  arguments.check_step_size(step_size)
  if arguments.is_schedule(step_size):
    raise TypeError("`step_size` must be a value here, not a schedule: a "
                    "schedule is the kernel's (kernel.copy(step_size=...)) "
                    "and is not kept in the results.")

  def convert(old, new):
    if arguments.is_per_part(old):
      if not arguments.is_per_part(new) or len(new) != len(old):
        new = [new] * len(old) if not arguments.is_per_part(new) else new
        if len(new) != len(old):
          raise ValueError(f"`step_size` has {len(new)} entries but the "
                           f"results hold {len(old)} (one per state part).")
      return type(old)(convert(o, n) for o, n in zip(old, new))
    if arguments.is_per_part(new):
      raise ValueError("`step_size` is a list but the results hold one step "
                       "size; give one value.")
    old = tf.convert_to_tensor(old)
    return tf.broadcast_to(as_dtype(new, old.dtype), tf.shape(old)) \
        if old.shape.rank else as_dtype(new, old.dtype)

  found = [False]

  def replace(results):
    fields = getattr(results, "_fields", None)
    if not fields:
      return results
    updates = {}
    # TFP's step-size adaptation kernels step with their `new_step_size`
    # and set it on the inner results at every step.
    for name in ("step_size", "new_step_size"):
      if name in fields:
        updates[name] = convert(getattr(results, name), step_size)
        found[0] = True
    for name in _NESTED_RESULTS:
      if name in fields:
        updates[name] = replace(getattr(results, name))
    return results._replace(**updates) if updates else results

  out = replace(kernel_results)
  if not found[0]:
    raise ValueError(f"`kernel_results` ({type(kernel_results).__name__}) "
                     "have no `step_size` field to replace.")
  return out


def _warns_on_step_size(kernel):
  """Kernels that read their step size from the results and warn when it
  is not theirs (the library's uncalibrated kernels)."""
  return "store_parameters_in_results" in getattr(kernel, "parameters", {})


def _adapts_step_size(owner):
  return isinstance(owner, (tfp.mcmc.SimpleStepSizeAdaptation,
                            tfp.mcmc.DualAveragingStepSizeAdaptation))


def _static_step_size(step_size):
  if arguments.is_schedule(step_size):
    return None
  if arguments.is_per_part(step_size):
    values = [_static_step_size(h) for h in step_size]
    return None if any(v is None for v in values) else values
  if isinstance(step_size, tf.Variable):
    return np.asarray(step_size.numpy(), np.float64)
  return arguments.static_value(step_size)


def warn_if_step_size_differs(kernel, results, argument, path="",
                              adapted=None, stacklevel=5):
  """Warns (eagerly) when the results' `step_size` differs
  from the kernel's own constant `step_size`, unless a step-size adaptation
  kernel drives the step: `adapted` (found by `check_kernel_results` above
  the kernel) or the kernel's `store_parameters_in_results`, which TFP's
  adaptation kernels set when they wrap it (they rebuild the kernel with
  it, as they do TFP's HMC)."""
  if not tf.executing_eagerly():
    return
  own = _static_step_size(getattr(kernel, "parameters", {}).get("step_size"))
  seen = getattr(results, "step_size", None)
  if own is None or seen is None:
    return
  seen_parts = seen if arguments.is_per_part(seen) else [seen]
  own_parts = own if isinstance(own, list) else [own]
  if len(seen_parts) != len(own_parts) or not all(
      _has_values(x) for x in seen_parts):
    return
  if all(np.allclose(np.asarray(x, np.float64), o, rtol=1e-6, atol=0)
         for x, o in zip(seen_parts, own_parts)):
    return
  if adapted or getattr(kernel, "parameters", {}).get(
      "store_parameters_in_results"):
    return  # An adaptation kernel sets it: by design.
  seen_text = ", ".join(_format(x) for x in seen_parts)
  own_text = ", ".join(_format(x) for x in own_parts)
  warnings.warn(
      f"`{argument}`{path}.step_size = {seen_text} differs from "
      f"{type(kernel).__name__}'s `step_size` = {own_text}: the step uses the "
      "kernel's value (only a step-size adaptation kernel sets it through "
      "the results). To continue with the results' step size (e.g. an "
      f"adapted one), build the kernel with it: kernel.copy(step_size="
      f"{seen_text}); to record the new one in the results, "
      "`results = tfp_sgmcmc.with_step_size(results, new)` (docs/"
      "long_runs.md, 'Continue a chain: same target, chosen step size').",
      StepSizeFromResultsWarning, stacklevel=stacklevel)


def warn_if_mass_differs(kernel, results, state, argument, path="",
                         stacklevel=5):
  """Warns (eagerly) when the results' `momentum_distribution` differs
  from the one `kernel` steps with: its own, since it does not store its
  parameters in its results (only a kernel that does, as TFP's
  `DiagonalMassMatrixAdaptation` rebuilds it, reads the results'). Compared
  through M^{-1} applied to two probes shaped like `state`: a mass adapted
  in the results and a kernel built without it differ there."""
  parameters = getattr(kernel, "parameters", {})
  if ("momentum_distribution" not in parameters or
      parameters.get("store_parameters_in_results") or
      not hasattr(results, "momentum_distribution") or
      not all(_has_values(x) for x in tf.nest.flatten(state))):
    return
  stored = results.momentum_distribution
  stored = None if isinstance(stored, tuple) and not stored else stored
  used = momentum.of_step(kernel, results)
  if stored is None and used is None:
    return
  parts = tf.nest.flatten(state)
  ones = tf.nest.pack_sequence_as(state, [tf.ones_like(p) for p in parts])
  counts = tf.nest.pack_sequence_as(state, [
      tf.reshape(tf.range(1, tf.size(p) + 1, dtype=p.dtype), tf.shape(p))
      for p in parts])
  differs = False
  for probe in (ones, counts):
    seen = tf.nest.flatten(mass_lib.velocity(probe, stored))
    own = tf.nest.flatten(mass_lib.velocity(probe, used))
    differs = differs or not all(
        np.allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=0)
        for a, b in zip(seen, own))
  if not differs:
    return
  first_chain = (0,) * results.diverged.shape.rank

  def shown(dist):  # M^-1 1 of the first chain's first state part
    return _format(np.asarray(tf.nest.flatten(
        mass_lib.velocity(ones, dist))[0])[first_chain])

  warnings.warn(
      f"`{argument}`{path}.momentum_distribution (first chain's M^-1 1 = "
      f"{shown(stored)}, e.g. adapted by DiagonalMassMatrixAdaptation) "
      f"differs from {type(kernel).__name__}'s `momentum_distribution` "
      f"(M^-1 1 = {shown(used)}): the step uses the kernel's, since it "
      "does not read its parameters from its results. To continue with the "
      "results' mass, build the kernel with it: kernel.copy("
      "momentum_distribution="
      "unnest.get_innermost(results, 'momentum_distribution')), unnest "
      "from tensorflow_probability.python.internal.",
      MassFromResultsWarning, stacklevel=stacklevel)
