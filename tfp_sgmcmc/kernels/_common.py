"""Helpers shared by the kernels: argument checks, seeds, divergence."""

import numbers

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import dynamics
from tfp_sgmcmc import targets as targets_lib

__all__ = []

# The seed bootstrap_results uses for its one energy evaluation (bootstrap has
# no seed argument in the TransitionKernel protocol).
BOOTSTRAP_SEED = (0, 0)


def static_value(value):
  """The value of a Python number, array or constant tensor, else None."""
  if isinstance(value, (numbers.Number, np.ndarray, np.generic, list, tuple)):
    return np.asarray(value, dtype=np.float64)
  if tf.is_tensor(value):
    v = tf.get_static_value(value)
    return None if v is None else np.asarray(v, dtype=np.float64)
  return None


def check_positive(name, value, allow_zero=False):
  v = static_value(value)
  if v is None:
    return
  ok = np.all(v >= 0) if allow_zero else np.all(v > 0)
  if not ok or not np.all(np.isfinite(v)):
    raise ValueError(f"`{name}` must be {'>= 0' if allow_zero else '> 0'} "
                     f"and finite; got {value!r}.")


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
    raise TypeError(
        "`target` must be a tfp_sgmcmc target (InMemoryTarget, "
        "DatasetTarget, NoisyGradientTarget, ...); got "
        f"{type(target).__name__}.")


def check_initial_state(state, target=None):
  """Structure and float dtypes always; finite values when seen (eagerly)."""
  if target is None:
    targets_lib._check_float_state(state)  # pylint: disable=protected-access
  else:
    target.check_state(state)
  if tf.executing_eagerly():
    for i, part in enumerate(tf.nest.flatten(state)):
      if not bool(tf.reduce_all(tf.math.is_finite(part))):
        raise ValueError(f"`current_state` part {i} has non-finite values; "
                         "start the chain from a finite state.")


def as_dtype(x, dtype):
  """x in `dtype`, converting Python numbers without a float32 detour."""
  if tf.is_tensor(x):
    return tf.cast(x, dtype)
  return tf.constant(np.asarray(x, tf.as_dtype(dtype).as_numpy_dtype))


def is_schedule(step_size):
  return callable(step_size) and not tf.is_tensor(step_size)


def step_size_at(step_size, step_count, previous_step_size, dtype):
  """A schedule's value at this step; otherwise the (adaptable) result field.

  Reading a constant step size from the previous results, as TFP's HMC does,
  lets `SimpleStepSizeAdaptation` and `DualAveragingStepSizeAdaptation` set it.
  """
  if is_schedule(step_size):
    return tf.cast(step_size(step_count, dtype=dtype), dtype)
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
