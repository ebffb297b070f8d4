"""Helpers shared by the kernels: argument checks, seeds, divergence."""

import inspect
import numbers

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


class UncalibratedKernel(tfp.mcmc.TransitionKernel):
  """The shared protocol of the stochastic-gradient kernels.

  Each keeps its constructor arguments in `self._parameters` (TFP's
  convention, so `kernel.copy(...)` works) and is not calibrated: it has no
  Metropolis-Hastings test of its own (AMAGOLD and the amortized Barker add
  one by wrapping a kernel in `AmortizedMetropolisHastings`).
  """

  @property
  def parameters(self):
    return self._parameters

  @property
  def is_calibrated(self):
    return False


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
  dtype against those of the results' `energy`. Returns the state."""
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


def finite_per_chain(energy, structures):
  """True for chains whose energy and every value in `structures` are finite."""
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
