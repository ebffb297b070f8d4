"""TFP's `target_log_prob_fn` for the stochastic-gradient kernels.

TFP's wrappers (`TransformedTransitionKernel`, `MetropolisHastings`,
`ReplicaExchangeMC`) find the innermost kernel whose `parameters` hold a
`target_log_prob_fn` and rebuild it with `kernel.copy(target_log_prob_fn=f)`,
where `f` wraps the old function (e.g. `f(x) = old(bijector.forward(x)) +
log|det J(x)|`). This module lets every kernel take part:

* `SGLD(target_log_prob_fn=fn, step_size=...)`: a full-batch log density
  (exact gradients, `fn(*state_parts)` as for TFP's HMC) becomes a
  `LogProbFnTarget` with no base: `U(x) = -fn(x)`.
* A kernel built from a minibatch `target` reports, as its
  `target_log_prob_fn`, the target's `MinibatchLogProb`: a callable that
  evaluates -U~ on the minibatch that the *kernel* is currently evaluating
  (its seed is passed through a context the kernel opens around each call).
  When a wrapper hands back a function built on it, the kernel evaluates the
  wrapped function inside that context: the minibatch estimate, its
  gradient estimator (also a noisy-gradient target's injected noise, through
  `tf.custom_gradient`) and the exact energy all pass through the wrapper's
  transformation and log-det.

A `MinibatchLogProb` called outside a kernel (e.g. by `ReplicaExchangeMC` to
compare replicas, or by a user) raises: a minibatch estimate is a random
function of the batch, not a density to compare states with.
"""

import contextlib
import threading

import tensorflow as tf

from tfp_sgmcmc._structure import expand_to
from tfp_sgmcmc.targets.base import MinibatchTarget, TargetCapabilityError
from tfp_sgmcmc.targets.checks import (call_with_clear_errors,
                                       check_float_state)

__all__ = ["LogProbFnTarget", "MinibatchLogProb", "call_log_prob_fn",
           "minibatch_log_prob_fn", "is_full_batch"]

_CONTEXT = threading.local()


def _stack():
  if not hasattr(_CONTEXT, "stack"):
    _CONTEXT.stack = []
  return _CONTEXT.stack


@contextlib.contextmanager
def _evaluating(mode, seed, structure):
  """Kernel-side context: how a `MinibatchLogProb` evaluates its target.

  mode: "value" (-U~ on the batch of `seed`), "gradient" (-U~ with the
  target's own gradient estimator as its gradient) or "exact" (-U).
  structure: the state structure the kernel evaluates, to rebuild the
  target's state from the positional parts a TFP function passes on."""
  _stack().append((mode, seed, structure))
  try:
    yield
  finally:
    _stack().pop()


def call_log_prob_fn(fn, state):
  """`fn(*parts)` for a list/tuple state, `fn(**state)` for a dict,
  `fn(state)` for one tensor: TFP's convention for `target_log_prob_fn`."""
  if isinstance(state, (list, tuple)):
    return fn(*state)
  if isinstance(state, dict):
    return fn(**state)
  return fn(state)


def _rebuild(structure, args, kwargs):
  if kwargs:
    if args:
      raise TypeError("a target_log_prob_fn got both positional and keyword "
                      "state parts.")
    return type(structure)(**kwargs) if isinstance(structure, dict) else (
        dict(kwargs))
  if structure is None:
    return args[0] if len(args) == 1 else list(args)
  return tf.nest.pack_sequence_as(structure, list(args))


class MinibatchLogProb:
  """-U~(state) of a minibatch target, on the batch the calling kernel draws.

  The `target_log_prob_fn` a kernel reports when it was built from a
  minibatch `target`. Only meaningful inside that kernel's step: called
  elsewhere it raises a `ValueError` explaining why.
  """

  def __init__(self, target):
    self._target = target

  @property
  def target(self):
    return self._target

  def __call__(self, *args, **kwargs):
    stack = _stack()
    if not stack:
      raise ValueError(
          f"this `target_log_prob_fn` is the minibatch estimate of a "
          f"{type(self._target).__name__}: a random function of the "
          "minibatch the kernel draws at each step, evaluated only inside "
          "the kernel's own steps. It cannot be called on its own, e.g. by "
          "`tfp.mcmc.ReplicaExchangeMC` to compare replicas or by "
          "`tfp.mcmc.MetropolisHastings`: minibatch energies cannot drive an "
          "exact accept/reject or swap test. Give the kernel a full-batch "
          "log density (`target_log_prob_fn=model.log_prob`, or "
          "`InMemoryTarget(..., full_batch=True)`), or use AMAGOLD, whose "
          "amortized test is exact on minibatches.")
    mode, seed, structure = stack[-1]
    state = _rebuild(structure, args, kwargs)
    target = self._target
    if mode == "exact":
      return -target.energy(state)
    if mode == "value":
      return -target.minibatch_energy(state, seed)
    return _with_estimated_gradient(target, state, seed)


def _with_estimated_gradient(target, state, seed):
  """-U~(state) whose gradient is the target's estimator -grad U~."""
  parts = tf.nest.flatten(state)

  @tf.custom_gradient
  def value(*xs):
    energy, grads = target.energy_and_gradient(
        tf.nest.pack_sequence_as(state, list(xs)), seed)
    grads = tf.nest.flatten(grads)

    def grad_fn(upstream):
      out = []
      for g in grads:
        out.append(-expand_to(tf.cast(upstream, g.dtype), g) * g)
      return out
    return tf.identity(-energy), grad_fn

  return value(*parts)



def minibatch_log_prob_fn(target):
  """The one `MinibatchLogProb` of `target` (the same object each time, so
  a kernel can tell its own function from a wrapper's). It is kept on the
  target, so it lives exactly as long as the target and its data."""
  entry = getattr(target, "_own_minibatch_log_prob", None)
  if entry is None or entry.target is not target:
    entry = MinibatchLogProb(target)
    target._own_minibatch_log_prob = entry  # pylint: disable=protected-access
  return entry


def is_full_batch(target):
  """Whether `target`'s energies and gradients are exact (no minibatch)."""
  return bool(getattr(target, "is_full_batch", False))


def _innermost_base(target):
  while isinstance(target, LogProbFnTarget) and target.base_target is not None:
    target = target.base_target
  return target


class LogProbFnTarget(MinibatchTarget):
  """A target given by a TFP-style `target_log_prob_fn`.

  With `base_target=None`, `fn` is a full-batch log density: U(x) =
  -fn(x), exact values and gradients (`is_full_batch=True`; the gradient
  noise is zero). With a `base_target`, `fn` is a function a TFP wrapper
  built on the base's `MinibatchLogProb` (a bijector's transform and
  log-det, a tempering, ...): every evaluation runs inside the kernel's
  minibatch context, so the minibatch estimate, its gradient estimator and
  (where the base has one) the exact energy pass through the wrapper.

  Args:
    target_log_prob_fn: `fn(*state_parts)` -> log density, one value per
      chain (TFP's convention: one positional argument per state part,
      keyword arguments for a dict state).
    base_target: None, or the `tfp_sgmcmc` target `fn` was built on.

  Returns:
    A `MinibatchTarget`; kernels given `target_log_prob_fn=fn` build one
    themselves.

  Raises:
    TypeError: `target_log_prob_fn` is not callable, or `base_target` is
      not a `tfp_sgmcmc` target.

  #### Example

  A full-batch target from a TFP distribution's `log_prob`: the energy and
  its gradient are exact.

  ```python
  posterior = tfd.MultivariateNormalDiag(loc=[1., -1.], scale_diag=[.5, 2.])
  exact = tfp_sgmcmc.LogProbFnTarget(posterior.log_prob)
  print(exact.energy(tf.constant([1., -1.])))   # -log_prob at the mean
  energy, gradient = exact.energy_and_gradient(tf.zeros([2]), seed=[0, 1])
  print(gradient)   # [-4, 0.25]: grad U = -grad log_prob, no noise
  ```
  """

  def __init__(self, target_log_prob_fn, base_target=None):
    if not callable(target_log_prob_fn):
      raise TypeError("`target_log_prob_fn` must be callable (state parts "
                      "-> log density per chain); got "
                      f"{target_log_prob_fn!r}.")
    if base_target is not None and not isinstance(
        base_target, MinibatchTarget):
      raise TypeError("`target` must be a tfp_sgmcmc target; got "
                      f"{type(base_target).__name__}.")
    super().__init__(
        1 if base_target is None else base_target.num_examples)
    self._fn = target_log_prob_fn
    self._base = base_target

  @property
  def target_log_prob_fn(self):
    return self._fn

  @property
  def base_target(self):
    return self._base

  @property
  def minibatches_from_seed(self):
    return self._base is None or self._base.minibatches_from_seed

  @property
  def is_full_batch(self):
    return self._base is None or is_full_batch(self._base)

  @property
  def has_exact_energy(self):
    return self._base is None or self._base.has_exact_energy

  def _log_prob(self, state, mode, seed):
    if self._base is None:
      value = call_with_clear_errors(
          "`target_log_prob_fn`", lambda s: call_log_prob_fn(self._fn, s),
          state)
    else:
      with _evaluating(mode, seed, state):
        value = call_log_prob_fn(self._fn, state)
    value = tf.convert_to_tensor(value)
    dtype = tf.nest.flatten(state)[0].dtype
    return tf.cast(value, dtype)

  def minibatch_energy(self, state, seed):
    return -self._log_prob(state, "value", seed)

  def minibatch_energies(self, states, seed):
    base = _innermost_base(self)
    if not base.minibatches_from_seed:
      raise TargetCapabilityError(
          "a minibatch M-H test needs the current and proposed states' "
          "energies on one shared batch; through a wrapped "
          "`target_log_prob_fn` (e.g. TransformedTransitionKernel) each "
          f"evaluation of a {type(base).__name__} pulls a new batch from "
          "the pipeline (minibatches_from_seed=False). Use an "
          "InMemoryTarget or a TFRecordTarget (batches chosen by the seed) "
          "or acceptance_energy='exact'.")
    return [self.minibatch_energy(s, seed) for s in states]

  def energy_and_gradient(self, state, seed):
    check_float_state(state)
    parts = tf.nest.flatten(state)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      energy = -self._log_prob(tf.nest.pack_sequence_as(state, parts),
                               "gradient", seed)
    grads = tape.gradient(energy, parts,
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return energy, tf.nest.pack_sequence_as(state, grads)

  def energy(self, state):
    if not self.has_exact_energy:
      return super().energy(state)
    return -self._log_prob(state, "exact", None)

  def gradient_noise_variance(self, state, seed):
    if self.is_full_batch:
      return tf.nest.map_structure(tf.zeros_like, state)
    raise TargetCapabilityError(
        "a per-example gradient-noise estimate (e.g. SGHMC's "
        "noise_estimate='empirical_fisher', SGBD) is not available through "
        "a wrapped `target_log_prob_fn` such as TransformedTransitionKernel's"
        ": the wrapper's change of variables mixes the coordinates. Use a "
        "constant noise estimate with the wrapper.")

  def check_state(self, state):
    check_float_state(state)
