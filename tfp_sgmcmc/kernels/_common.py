"""Helpers shared by the kernels: argument checks, seeds, divergence."""

import functools
import inspect
import numbers
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import dynamics
from tfp_sgmcmc import log_prob as log_prob_lib
from tfp_sgmcmc import targets as targets_lib

__all__ = []

# The seed bootstrap_results uses for its one energy evaluation (bootstrap has
# no seed argument in the TransitionKernel protocol).
BOOTSTRAP_SEED = (0, 0)


def static_value(value):
  """The value of a Python number, array or constant tensor, else None."""
  if isinstance(value, (str, bytes)):
    return None
  if isinstance(value, (numbers.Number, np.ndarray, np.generic, list, tuple)):
    try:
      return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
      return None
  if tf.is_tensor(value) and not isinstance(value, tf.Variable):
    v = tf.get_static_value(value)
    return None if v is None else np.asarray(v, dtype=np.float64)
  return None


def _describe(value):
  if isinstance(value, tf.Variable):
    return f"tf.Variable {value.name!r} = {value.numpy()!r}"
  return repr(value)


def check_positive(name, value, allow_zero=False):
  """Checks a numeric argument: its type always, its value where known.

  Strings, booleans and other non-numbers are rejected; the value of a
  Python number, array or constant tensor is checked now; a `tf.Variable`'s
  current value is checked now (eagerly) and a non-constant tensor's is
  asserted in the graph being built (once, where the kernel is built, not
  per step).
  """
  want = ">= 0" if allow_zero else "> 0"
  if isinstance(value, (str, bytes, bool, np.bool_)) or value is None:
    raise TypeError(f"`{name}` must be a number (or a float tensor) "
                    f"{want}; got {value!r} of type {type(value).__name__}. "
                    f"Pass e.g. {name}=0.1.")
  if tf.is_tensor(value) or isinstance(value, tf.Variable):
    dtype = tf.as_dtype(value.dtype)
    if not (dtype.is_floating or dtype.is_integer):
      raise TypeError(f"`{name}` must be a real number; got a {dtype.name} "
                      f"tensor {value!r}.")
  v = static_value(value)
  if v is None and isinstance(value, tf.Variable) and tf.executing_eagerly():
    v = np.asarray(value.numpy(), dtype=np.float64)
  if v is None and not tf.is_tensor(value) and not isinstance(
      value, tf.Variable):
    raise TypeError(f"`{name}` must be a number (or a float tensor) {want};"
                    f" got {value!r} of type {type(value).__name__}.")
  if v is None:
    # A tensor whose value is not known while tracing: asserted once, in
    # the graph that builds the kernel (not in every step).
    x = tf.cast(value, tf.float64)
    ok = (x >= 0) if allow_zero else (x > 0)
    tf.debugging.Assert(
        tf.reduce_all(ok & tf.math.is_finite(x)),
        [f"`{name}` must be {want} and finite; got", x])
    return
  ok = np.all(v >= 0) if allow_zero else np.all(v > 0)
  if not ok or not np.all(np.isfinite(v)):
    raise ValueError(f"`{name}` must be {want} and finite; got "
                     f"{_describe(value)}.")
  if np.any(np.abs(v) > np.finfo(np.float32).max):
    raise ValueError(f"`{name}` = {_describe(value)} is beyond the float32 "
                     "range (3.4e38), so it cannot be used with a float32 "
                     "state; use a representable value.")


def check_number(name, value, allow_zero=False):
  """A Python number (not a bool, tensor or string), > 0 (or >= 0), finite:
  the check of a hyperparameter that must be known when the sampler is
  built (the Keras samplers' constructor arguments)."""
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise TypeError(f"`{name}` must be a number; got {value!r}.")
  check_positive(name, value, allow_zero=allow_zero)


def parameter_property(name):
  """A read-only property returning `self._parameters[name]`: every kernel
  keeps its constructor arguments there (TFP's convention, so `copy` works)."""
  return property(lambda self: self._parameters[name],
                  doc=f"The `{name}` argument the kernel was built with.")


class StepSizeFromResultsWarning(UserWarning):
  """`one_step` was given results whose `step_size` differs from the
  kernel's own `step_size`: the step uses the results' value (TFP's
  convention, through which adaptation kernels set it)."""


class _Known:
  """Cached values known to be right, per chain, and the state they belong
  to (its tensors, and its per-chain keys once computed)."""

  def __init__(self, values, parts, keys=None):
    self.values, self.parts, self._keys = values, parts, keys

  def keys(self):
    if self._keys is None:
      self._keys = _state_key(self.parts, self.values.shape)
    return self._keys


class _ResultsGuard:
  """What a kernel remembers, in eager mode only, about the results it
  returned, so that results it made itself are not checked again.

  Per chain, the values of the kernel's cached target-dependent field
  (`cached_value_field`) known to be right, with the state they belong to:
  those it returned last and those it last checked or accepted. Results
  coming back from the kernel's own last step with the state it returned
  (the same tensors) cost one comparison of a few numbers; results chosen
  per chain (e.g. by `tfp.mcmc.MetropolisHastings`) are matched chain by
  chain through a weighted sum of the state (`_state_key`). Anything else
  (results of another kernel object, loaded from a file or edited, or given
  with another state) is checked against the target once.
  """

  def __init__(self):
    self.returned = None  # _Known
    self.accepted = None
    self.step_size_warned = False

  def known(self, values, parts):
    """Whether `values` with state `parts` are known; returns (known, the
    `_Known` of them)."""
    same_values = lambda k: (k is not None and k.values.shape == values.shape
                             and np.array_equal(k.values, values,
                                                equal_nan=True))
    for k in (self.returned, self.accepted):
      if same_values(k) and len(k.parts) == len(parts) and all(
          a is b for a, b in zip(k.parts, parts)):
        return True, k
    entry = _Known(values, parts)
    ok = np.zeros(values.shape, bool)
    for k in (self.returned, self.accepted):
      if k is not None and k.values.shape == values.shape:
        same = (k.values == values) | (np.isnan(k.values) & np.isnan(values))
        if same.any():
          ok |= same & (k.keys() == entry.keys())
    return bool(ok.all()), entry


def _guard(kernel):
  return kernel.__dict__.setdefault("_tfp_sgmcmc_results_guard",
                                    _ResultsGuard())


def _eager_values(x):
  return tf.executing_eagerly() and tf.is_tensor(x) and hasattr(x, "numpy")


def _state_key(parts, chain_shape):
  """Per chain, a weighted sum over the state's values (weights 1 + i/n on
  the i-th of n values per chain): equal for the same state, different
  (almost surely) for another one, permutations included. In numpy (eager
  tensors on the CPU are read without a copy)."""
  n_chains = int(np.prod(chain_shape, dtype=np.int64))
  key = np.zeros([n_chains])
  for part in parts:
    x = np.asarray(part, np.float64).reshape(n_chains, -1)
    key += x @ (1. + np.arange(x.shape[1]) / max(x.shape[1], 1))
  return key.reshape(chain_shape)


def _as_tensors(state):
  return tf.nest.map_structure(
      lambda x: tf.convert_to_tensor(x) if isinstance(x, np.ndarray) else x,
      state)


def record_results(kernel, state, results):
  """Remembers (eagerly) the cached field of results `kernel` returned with
  `state`."""
  field = cached_value_field(kernel, results)
  if field is None or not _eager_values(field[1]):
    return
  _guard(kernel).returned = _Known(np.asarray(field[1]),
                                   tf.nest.flatten(_as_tensors(state)))


def _with_recording(method, returns_state):
  @functools.wraps(method)
  def wrapped(self, *args, **kwargs):
    out = method(self, *args, **kwargs)
    if tf.executing_eagerly():
      if returns_state:
        record_results(self, out[0], out[1])
      else:
        record_results(self, args[0] if args else kwargs["init_state"], out)
    return out
  return wrapped


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
  Eager only (called by `one_step` eagerly, once per foreign results, and by
  `check_kernel_results` before a compiled run)."""
  field = cached_value_field(kernel, results)
  if field is None or not _eager_values(field[1]):
    return
  name, cached, expected_fn = field
  guard = _guard(kernel)
  cached = np.asarray(cached)
  state = _as_tensors(state)
  try:
    known, entry = guard.known(cached, tf.nest.flatten(state))
  except (ValueError, TypeError, tf.errors.InvalidArgumentError):
    return  # Shapes that do not fit: `check_step` reports those.
  if known:
    guard.accepted = entry
    return
  expected = np.asarray(tf.cast(expected_fn(state), cached.dtype))
  expected = np.broadcast_to(expected, cached.shape)
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
  guard.accepted = entry


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
  at `current_state` with `kernel`; run it before a compiled run.

  Inside a compiled `tf.function` (e.g. your own around
  `tfp.mcmc.sample_chain`) `one_step` cannot check values without a cost
  per step, so call this first (`sample_moments` does). Down the kernel's
  wrappers (StepSeeded, TransformedTransitionKernel, step-size adaptation,
  MetropolisHastings, AMAGOLD's amortized test) it

  * raises a `ValueError` if a kernel's results cache a value that depends
    on the target and that the next step uses (AMAGOLD's and the amortized
    Barker's full-data U(theta) with the exact test; `target_log_prob` with
    a full-batch target) and that value is not this kernel's target's at
    the state: results made on another target (or for another state);
  * warns (`StepSizeFromResultsWarning`) when the results' `step_size`
    differs from the kernel's own constant `step_size` and no step-size
    adaptation kernel sets it: the run would use the results' step size.

  It costs one full-data energy evaluation per cached field (none for
  minibatch kernels). Returns nothing.
  """
  if not tf.executing_eagerly():
    return
  state = tf.nest.map_structure(tf.convert_to_tensor, current_state)
  path = ""
  adapted = False
  level = (kernel, kernel_results, state)
  while level is not None:
    k, results, s = level
    adapted = adapted or _adapts_step_size(k)
    if getattr(k, "_cached_value_field", None) is not None:
      check_cached_values(k, s, results, argument, path)
    if isinstance(k, UncalibratedKernel):
      warn_if_step_size_differs(k, results, argument, path, adapted=adapted,
                                stacklevel=3)
    level = _inner(k, results, s)
    if level is not None:
      path += "." + ("accepted_results" if hasattr(results, "accepted_results")
                     else "inner_results")


_NESTED_RESULTS = ("inner_results", "accepted_results", "proposed_results")


def with_step_size(kernel_results, step_size):
  """`kernel_results` with every `step_size` field set to `step_size`.

  Kernels read the step size from their results (TFP's convention), so a
  chain continued with `kernel.copy(step_size=new)` and the old results
  would keep the old one. This replaces it down the wrappers' results
  (`inner_results` of StepSeeded and of TFP's step-size adaptation and
  TransformedTransitionKernel, `accepted_results` and `proposed_results` of
  the M-H tests), in each field's dtype; a list gives one step size per
  state part. Everything else (momentum, counters, seeds) is kept.

      kernel = kernel.copy(step_size=0.05)          # or rebuild it
      results = tfp_sgmcmc.with_step_size(results, 0.05)
  """
  check_step_size(step_size)
  if is_schedule(step_size):
    raise TypeError("`step_size` must be a value here, not a schedule: a "
                    "schedule is the kernel's (kernel.copy(step_size=...)) "
                    "and is not kept in the results.")

  def convert(old, new):
    if is_per_part(old):
      if not is_per_part(new) or len(new) != len(old):
        new = [new] * len(old) if not is_per_part(new) else new
        if len(new) != len(old):
          raise ValueError(f"`step_size` has {len(new)} entries but the "
                           f"results hold {len(old)} (one per state part).")
      return type(old)(convert(o, n) for o, n in zip(old, new))
    if is_per_part(new):
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
    if "step_size" in fields:
      updates["step_size"] = convert(results.step_size, step_size)
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


def _adapts_step_size(owner):
  return isinstance(owner, (tfp.mcmc.SimpleStepSizeAdaptation,
                            tfp.mcmc.DualAveragingStepSizeAdaptation))


def _under_step_size_adaptation():
  frame = inspect.currentframe()
  try:
    while frame is not None:
      if _adapts_step_size(frame.f_locals.get("self")):
        return True
      frame = frame.f_back
  finally:
    del frame
  return False


def _static_step_size(step_size):
  if is_schedule(step_size):
    return None
  if is_per_part(step_size):
    values = [_static_step_size(h) for h in step_size]
    return None if any(v is None for v in values) else values
  if isinstance(step_size, tf.Variable):
    return np.asarray(step_size.numpy(), np.float64)
  return static_value(step_size)


def warn_if_step_size_differs(kernel, results, argument, path="",
                              adapted=None, stacklevel=5):
  """Warns once per kernel (eagerly) when the results' `step_size` differs
  from the kernel's own constant `step_size`, unless a TFP step-size
  adaptation kernel is driving the step (it sets the step size through the
  results)."""
  guard = _guard(kernel)
  if guard.step_size_warned or not tf.executing_eagerly():
    return
  own = _static_step_size(getattr(kernel, "parameters", {}).get("step_size"))
  seen = getattr(results, "step_size", None)
  if own is None or seen is None:
    return
  seen_parts = seen if is_per_part(seen) else [seen]
  own_parts = own if isinstance(own, list) else [own]
  if len(seen_parts) != len(own_parts) or not all(
      _eager_values(x) for x in seen_parts):
    return
  if all(np.allclose(np.asarray(x, np.float64), o, rtol=1e-6, atol=0)
         for x, o in zip(seen_parts, own_parts)):
    return
  if adapted is None:
    adapted = _under_step_size_adaptation()
  if adapted:  # An adaptation kernel sets it: by design.
    return
  guard.step_size_warned = True
  seen_text = ", ".join(_format(x) for x in seen_parts)
  own_text = ", ".join(_format(x) for x in own_parts)
  warnings.warn(
      f"`{argument}`{path}.step_size = {seen_text} differs from "
      f"{type(kernel).__name__}'s `step_size` = {own_text}: the step uses the "
      "results' value (TFP's convention: step-size adaptation sets it "
      "through the results, and an adapted step size carries on). To run "
      "with the kernel's step size, start from "
      "`kernel.bootstrap_results(state)` or replace it in the results: "
      "`results = tfp_sgmcmc.with_step_size(results, new)` (docs/"
      "long_runs.md, 'Continue a chain: same target, chosen step size').",
      StepSizeFromResultsWarning, stacklevel=stacklevel)


class UncalibratedKernel(tfp.mcmc.TransitionKernel):
  """The shared protocol of the stochastic-gradient kernels.

  Each keeps its constructor arguments in `self._parameters` (TFP's
  convention, so `kernel.copy(...)` works) and is not calibrated: it has no
  Metropolis-Hastings test of its own (AMAGOLD and the amortized Barker add
  one by wrapping a kernel in `AmortizedMetropolisHastings`).

  Continuing a chain: `one_step` reads the step size from the previous
  results (TFP's convention, so that `SimpleStepSizeAdaptation` and
  `DualAveragingStepSizeAdaptation` can set it); results with another step
  size therefore continue with theirs (eagerly a
  `StepSizeFromResultsWarning` says so when the kernel is not under an
  adaptation kernel). Results that cache a value of another target are
  refused (`cached_value_field`).
  """

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    # Eagerly, remember the cached values of the results each step and
    # bootstrap returned, so that `check_step` re-checks only results this
    # kernel did not make (no cost per step).
    for name in ("one_step", "bootstrap_results"):
      if name in cls.__dict__:
        setattr(cls, name, _with_recording(cls.__dict__[name],
                                           name == "one_step"))

  @property
  def parameters(self):
    return self._parameters

  @property
  def is_calibrated(self):
    return False

  def _cached_value_field(self, results):
    if not reports_exact_log_prob(self.target) or not tf.is_tensor(
        getattr(results, "target_log_prob", None)):
      return None
    return ("target_log_prob", results.target_log_prob,
            lambda state: -self.target.energy(state))


def check_target(target):
  if not isinstance(target, targets_lib.MinibatchTarget):
    hint = ""
    if callable(target):
      hint = (" It is a callable: for a full-batch log density (as TFP's "
              "HMC takes) pass it as `target_log_prob_fn=`; for a minibatch "
              "log-likelihood wrap it in `tfp_sgmcmc.InMemoryTarget(fn, data, "
              "batch_size)`; for a JointDistribution use "
              "`tfp_sgmcmc.JointDistributionTarget`.")
    raise TypeError(
        "`target` must be a tfp_sgmcmc target (InMemoryTarget, "
        "DatasetTarget, NoisyGradientTarget, ...); got "
        f"{type(target).__name__}.{hint}")


def resolve_target(target, target_log_prob_fn):
  """The target a kernel samples, from its `target` / `target_log_prob_fn`.

  Returns (target to sample, `target` parameter, `target_log_prob_fn`
  parameter). A kernel keeps the two parameters (so TFP's wrappers find
  `target_log_prob_fn` and `kernel.copy(target_log_prob_fn=f)` rebuilds
  it) and samples the first:

  * `target` alone: that minibatch target; the reported
    `target_log_prob_fn` is its `MinibatchLogProb`.
  * `target_log_prob_fn` alone: a full-batch log density (exact gradients).
  * both, the function not the target's own: a function a TFP wrapper built
    on the target's (`LogProbFnTarget(fn, base_target=target)`).
  """
  if target is None and target_log_prob_fn is None:
    raise TypeError(
        "got `target`=None (NoneType) and no `target_log_prob_fn`: give "
        "`target` (a tfp_sgmcmc minibatch target such as InMemoryTarget) or "
        "`target_log_prob_fn` (a full-batch log density taking one argument "
        "per state part, as TFP's HMC does).")
  if target is not None:
    check_target(target)
  if target_log_prob_fn is None:
    return target, target, log_prob_lib.minibatch_log_prob_fn(target)
  if not callable(target_log_prob_fn):
    raise TypeError("`target_log_prob_fn` must be callable (state parts -> "
                    f"log density per chain); got {target_log_prob_fn!r}.")
  if target is None:
    return (log_prob_lib.LogProbFnTarget(target_log_prob_fn), None,
            target_log_prob_fn)
  if target_log_prob_fn is log_prob_lib.minibatch_log_prob_fn(target):
    return target, target, target_log_prob_fn
  if isinstance(target_log_prob_fn, log_prob_lib.MinibatchLogProb):
    # Another target's own function: `kernel.copy(target=new)` carries the
    # old target's function in `parameters`; the new target replaces both.
    return target, target, log_prob_lib.minibatch_log_prob_fn(target)
  return (log_prob_lib.LogProbFnTarget(target_log_prob_fn, target), target,
          target_log_prob_fn)


def sampled_target_property():
  """`kernel.target`: the target the kernel samples (see `resolve_target`)."""
  return property(lambda self: self._target,  # pylint: disable=protected-access
                  doc="The target the kernel samples: its `target`, the "
                  "full-batch `target_log_prob_fn`, or a TFP wrapper's "
                  "function built on the target's.")


def step_count_of(results):
  """The kernel's step count as one scalar.

  Kernels with a full-batch target keep `step_count` per chain, because
  `tfp.mcmc.MetropolisHastings` chooses every results field per chain (a
  scalar would change shape after one step); a rejected chain's count then
  lags, and the clock is the largest count."""
  count = results.step_count
  if count.shape.rank:
    return tf.reduce_max(count)
  return count


def initial_step_count(target, energy):
  """0, per chain for a full-batch target (see `step_count_of`)."""
  if reports_exact_log_prob(target):
    return tf.zeros(tf.shape(energy), tf.int32)
  return tf.constant(0, tf.int32)


def reports_exact_log_prob(target):
  return log_prob_lib.is_full_batch(target)


def target_log_prob(target, state, energy_seen):
  """The `target_log_prob` results field.

  Full-batch target: the exact log density at `state` (the state the step
  returns; one extra evaluation, no gradient), which TFP's
  MetropolisHastings and ReplicaExchangeMC compare. Minibatch target:
  -`energy_seen`, the minibatch estimate the step computed anyway (at the
  point where it evaluated it, not necessarily `state`)."""
  if log_prob_lib.is_full_batch(target):
    return tf.cast(-target.energy(state), energy_seen.dtype)
  return -energy_seen


_TFP_EXACT_WRAPPERS = (tfp.mcmc.MetropolisHastings, tfp.mcmc.ReplicaExchangeMC)


def refuse_minibatch_under_tfp_mh(kernel, exact=None):
  """Raises if `kernel`'s results are being bootstrapped by TFP's
  MetropolisHastings or ReplicaExchangeMC while its `target_log_prob` is a
  minibatch estimate: those wrappers compare it across states as if it were
  the log density, which would be a silent wrong answer."""
  if exact is None:
    exact = reports_exact_log_prob(kernel.target)
  if exact:
    return
  frame = inspect.currentframe()
  try:
    while frame is not None:
      owner = frame.f_locals.get("self")
      if owner is not kernel and getattr(owner, "corrects_with_own_test",
                                         False):
        return  # The nearest wrapper is ours (AmortizedMetropolisHastings).
      if isinstance(owner, _TFP_EXACT_WRAPPERS):
        raise ValueError(
            f"tfp.mcmc.{type(owner).__name__} around "
            f"{type(kernel).__name__} with a minibatch target: its "
            "`target_log_prob` is a minibatch estimate (-U~ on one batch), "
            "and an accept/reject or replica-swap test on minibatch "
            "energies does not sample the posterior. Give the kernel a "
            "full-batch log density (`target_log_prob_fn=...`, e.g. through "
            "make_kernel_fn=lambda fn: tfp_sgmcmc.SGLD(target_log_prob_fn=fn"
            ", step_size=...), or InMemoryTarget(..., full_batch=True)), or "
            "use tfp_sgmcmc.AMAGOLD, whose amortized test is exact on "
            "minibatches.")
      frame = frame.f_back
  finally:
    del frame


def check_initial_state(state, target=None):
  """Checks a chain's initial state once, when the results are bootstrapped.

  Structure and float dtypes always, and the shapes and dtypes of what the
  target's user functions return (at trace time). Finite values: raised
  eagerly; asserted in the graph under `tf.function` (one check per run, not
  per step). XLA drops assertions: there a chain started at a non-finite
  state is flagged `diverged` at its first step and stays where it is.
  """
  for i, part in enumerate(tf.nest.flatten(state)):
    if not (tf.is_tensor(part) or isinstance(part, np.ndarray)):
      raise TypeError(
          f"`current_state` part {i} is a {type(part).__name__}, not a "
          "tensor: convert it once, e.g. tf.constant(x, tf.float32), and "
          "pass the same tensors to `bootstrap_results` and `one_step`.")
  if target is None:
    targets_lib._check_float_state(state)  # pylint: disable=protected-access
  else:
    target.check_state(state)
    target.check_functions(state)
  for i, part in enumerate(tf.nest.flatten(state)):
    finite = tf.reduce_all(tf.math.is_finite(part))
    message = (f"`current_state` part {i} has non-finite values; start the "
               "chain from a finite state.")
    if tf.executing_eagerly():
      if not bool(finite):
        raise ValueError(message)
    else:
      tf.debugging.Assert(finite, [message])


def check_step(kernel, state, results, results_type):
  """Static checks, at trace time (no cost per step), that `results` were
  made for this kernel and this state: the results' type, the state's parts
  (tensors; numpy arrays are converted), and the state's chain dimensions and
  dtype against those of the results' `energy`. Eagerly, also the cached
  target-dependent value (`check_cached_values`, once per results this
  kernel did not return) and the step size (`warn_if_step_size_differs`).
  Returns the state."""
  state = _check_step_structure(kernel, state, results, results_type)
  if tf.executing_eagerly():
    check_cached_values(kernel, state, results, "previous_kernel_results")
    warn_if_step_size_differs(kernel, results, "previous_kernel_results")
  return state


def _check_step_structure(kernel, state, results, results_type):
  name = type(kernel).__name__
  if not isinstance(results, results_type):
    raise TypeError(
        f"`previous_kernel_results` of {name}.one_step are "
        f"{type(results).__name__}, not {results_type.__name__}: they come "
        f"from another kernel. Start from {name}.bootstrap_results(state) "
        "or pass the results this kernel returned.")
  parts = []
  for i, part in enumerate(tf.nest.flatten(state)):
    if isinstance(part, np.ndarray):
      part = tf.convert_to_tensor(part)
    if not tf.is_tensor(part):
      raise TypeError(
          f"`current_state` part {i} of {name}.one_step is a "
          f"{type(part).__name__}, not a tensor: convert it once, e.g. "
          "tf.constant(x, tf.float32).")
    parts.append(part)
  state = tf.nest.pack_sequence_as(state, parts)
  energy = None
  for field in ("energy", "minibatch_energy", "target_log_prob"):
    energy = getattr(results, field, None)
    if tf.is_tensor(energy):
      break
  if not tf.is_tensor(energy):
    return state
  if parts and parts[0].dtype != energy.dtype:
    raise TypeError(
        f"`current_state` has dtype {parts[0].dtype.name} but "
        f"`previous_kernel_results` hold {energy.dtype.name} values: pass the "
        "state and results of one run (or bootstrap_results(state)).")
  chains = energy.shape
  if chains.rank is None:
    return state
  for i, part in enumerate(parts):
    if part.shape.rank is not None and (
        part.shape.rank < chains.rank or
        not part.shape[:chains.rank].is_compatible_with(chains)):
      raise ValueError(
          f"`previous_kernel_results` are for chains of shape {list(chains)}"
          f" (the shape of their `energy`), but `current_state` part {i} has"
          f" shape {list(part.shape)}: pass the results returned with this "
          "state, or bootstrap_results(state) for new chains.")
  return state


def as_dtype(x, dtype):
  """x in `dtype`, converting Python numbers without a float32 detour."""
  if tf.is_tensor(x):
    return tf.cast(x, dtype)
  return tf.constant(np.asarray(x, tf.as_dtype(dtype).as_numpy_dtype))


def is_schedule(step_size):
  return callable(step_size) and not tf.is_tensor(step_size)


def is_per_part(step_size):
  """A list/tuple of step sizes: one per state part, as TFP's HMC takes."""
  return isinstance(step_size, (list, tuple))


def check_step_size(step_size, per_part=True):
  """A positive constant, a schedule, or (where `per_part`) one positive
  constant per state part."""
  if step_size is None:
    raise TypeError("`step_size` is required; got None. Give a positive "
                    "float, a schedule, or a list with one per state part.")
  if is_schedule(step_size):
    return
  if is_per_part(step_size):
    if not per_part:
      raise ValueError(
          f"`step_size` {step_size!r}: one step size per state part is not "
          "supported by this kernel; give one step size.")
    if not step_size:
      raise ValueError("`step_size` is an empty list; give one step size per "
                       "state part.")
    for i, h in enumerate(step_size):
      if is_schedule(h):
        raise ValueError(f"`step_size[{i}]` is a schedule; per-part step "
                         "sizes must be constants (use one schedule for all "
                         "parts).")
      try:
        check_positive(f"step_size[{i}]", h)
      except (TypeError, ValueError) as e:
        raise type(e)(f"`step_size` (a list: one per state part): {e}"
                      ) from None
    return
  check_positive("step_size", step_size)


def scale_step(factor, step_size):
  """factor * step_size, part by part for per-part step sizes."""
  if is_per_part(step_size):
    return [factor * h for h in step_size]
  return factor * step_size


def check_step_size_matches(step_size, state):
  """A per-part step size needs one entry per part of the state."""
  if is_per_part(step_size):
    n = len(tf.nest.flatten(state))
    if len(step_size) != n:
      raise ValueError(f"`step_size` has {len(step_size)} entries but the "
                       f"state has {n} parts; give one step size per part "
                       "(or one for all).")


def step_size_at(step_size, step_count, previous_step_size, dtype):
  """A schedule's value at this step; otherwise the (adaptable) result field.

  Reading a constant step size from the previous results, as TFP's HMC does,
  lets `SimpleStepSizeAdaptation` and `DualAveragingStepSizeAdaptation` set it
  (also a list, one per state part, which they adapt part by part).
  """
  if is_schedule(step_size):
    return tf.cast(step_size(step_count, dtype=dtype), dtype)
  if is_per_part(previous_step_size):
    return [as_dtype(h, dtype) for h in previous_step_size]
  return as_dtype(previous_step_size, dtype)


def temperature_at(step_size, step_count, temperature, dtype):
  """The temperature of this step's injected noise.

  A schedule with a `noise_scale(step_count)` (e.g. the exploration phase of
  `CyclicalSchedule`) scales it; otherwise it is the kernel's temperature.
  """
  t = as_dtype(temperature, dtype)
  scale = getattr(step_size, "noise_scale", None)
  if is_schedule(step_size) and scale is not None:
    t = t * tf.cast(scale(step_count, dtype=dtype), dtype)
  return t


def initial_step_size(step_size, dtype):
  if is_schedule(step_size):
    return tf.cast(step_size(tf.constant(0, tf.int32), dtype=dtype), dtype)
  if is_per_part(step_size):
    return [as_dtype(h, dtype) for h in step_size]
  return as_dtype(step_size, dtype)


def state_dtype(state):
  return tf.nest.flatten(state)[0].dtype


def _expand_to(mask, part):
  extra = part.shape.rank - mask.shape.rank
  return tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones([extra],
                                                              tf.int32)], 0))


def check_compute_energy(compute_energy, target):
  """`compute_energy` is a Python bool, and False only with a minibatch
  target (see `minibatch_energy_and_gradient`)."""
  if not isinstance(compute_energy, bool):
    raise TypeError(
        f"`compute_energy` must be a Python bool (True or False); got "
        f"{compute_energy!r} of type {type(compute_energy).__name__}. Pass "
        "compute_energy=False to skip the per-step minibatch energy (the "
        "results' `energy` and `target_log_prob` then hold NaN), or True "
        "(the default) to report it.")
  if not compute_energy and reports_exact_log_prob(target):
    raise ValueError(
        "`compute_energy=False` skips a minibatch target's per-step energy, "
        "but this kernel samples a full-batch target (`target_log_prob_fn=` "
        "or InMemoryTarget(..., full_batch=True)): its exact log density is "
        "the results' `target_log_prob`, which tfp.mcmc.MetropolisHastings "
        "compares and the MALA correction needs, and it comes with the "
        "gradient at no extra pass. Drop `compute_energy=False` (or pass "
        "compute_energy=True).")


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


def finite_per_chain(energy, structures, chains=None):
  """True for chains whose energy and every value in `structures` are finite.

  `energy` None (a step that did not compute it): the chains are those of
  the boolean tensor `chains` (e.g. the previous `diverged` flags), and only
  `structures` are checked."""
  if energy is None:
    finite = tf.ones_like(chains, tf.bool)
    batch_rank = chains.shape.rank
  else:
    finite = tf.math.is_finite(energy)
    batch_rank = energy.shape.rank
  for part in tf.nest.flatten(structures):
    axes = list(range(batch_rank, part.shape.rank))
    part_finite = tf.reduce_all(tf.math.is_finite(part), axis=axes)
    finite = finite & tf.broadcast_to(part_finite, tf.shape(finite))
  return finite


def keep_where_diverged(diverged, old, new):
  """Chains flagged `diverged` keep `old`; the others move to `new`."""
  def pick(o, n):
    return tf.where(_expand_to(diverged, n), o, n)
  return tf.nest.map_structure(pick, old, new)


def split(seed, n):
  """A real split (one random-number op): for seeds carried between steps."""
  return tfp.random.split_seed(tfp.random.sanitize_seed(seed), n=n)


def step_seeds(seed, n):
  """`n` seeds for the separate draws of one step (minibatch, noise, ...),
  derived from the step's seed without a random-number op
  (`dynamics.derive_seeds`)."""
  return dynamics.derive_seeds(seed, n)
