"""Targets built on other targets: control-variate gradients around a mode
(`ControlVariateTarget`, with `find_mode` to find the mode), a tempered
posterior (`TemperedTarget`) and exact gradients from a target's exact
energy (`FullBatchTarget`)."""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, pack_like
from tfp_sgmcmc.targets.base import (MinibatchTarget, TargetCapabilityError,
                                     check_target)
from tfp_sgmcmc.targets.checks import check_float_state, check_initial_state

__all__ = ["ControlVariateTarget", "TemperedTarget", "FullBatchTarget",
           "find_mode"]


class _OnBaseTarget(MinibatchTarget):
  """A target defined on another one, `base_target`: same examples, same
  parameter shapes, and the base's checks of states and functions."""

  def __init__(self, target):
    if not isinstance(target, MinibatchTarget):
      raise TypeError(f"`target` must be a tfp_sgmcmc target; got "
                      f"{type(target).__name__}.")
    super().__init__(target.num_examples,
                     parameter_shapes=target.parameter_shapes)
    self._base = target

  @property
  def base_target(self):
    return self._base

  @property
  def minibatches_from_seed(self):
    return self._base.minibatches_from_seed

  @property
  def has_exact_energy(self):
    return self._base.has_exact_energy

  def log_prior(self, state):
    return self._base.log_prior(state)

  def energy(self, state):
    return self._base.energy(state)

  def check_state(self, state):
    self._base.check_state(state)

  def non_finite_data(self):
    return self._base.non_finite_data()

  def check_functions(self, state):
    self._base.check_functions(state)


def _check_centre(parts, energy, grads):
  """A centre where theta_hat, U or grad U is not finite (a `find_mode` that
  diverged) would give every chain a non-finite gradient, so every chain
  would stay frozen at its start: refused. Eagerly a `ValueError`; in a
  graph an assertion (XLA drops it: there every chain is flagged `diverged`
  at its first step)."""
  named = [(f"the centre's part {i}", p) for i, p in enumerate(parts)]
  named.append(("U(centre)", energy))
  named += [(f"grad U(centre) of part {i}", g) for i, g in enumerate(grads)
            if g is not None]
  for what, value in named:
    if not value.dtype.is_floating:
      continue
    finite = tf.reduce_all(tf.math.is_finite(value))
    message = (
        f"`centre` of ControlVariateTarget is not usable: {what} is not "
        "finite, so every control-variate gradient would be NaN and every "
        "chain would stay frozen at its start. A `find_mode` that diverged "
        "returns such a centre: run it with a smaller learning rate (or "
        "more steps from a better start) and check "
        "tf.reduce_all(tf.math.is_finite(mode)) before building the target.")
    if tf.executing_eagerly():
      if not bool(finite):
        raise ValueError(message + f" Got {what} = {value.numpy()!r:.200}.")
    else:
      arguments.assert_in_graph(finite, [message])


class ControlVariateTarget(_OnBaseTarget):
  """Control-variate gradients around a mode (Baker, Fearnhead, Fox, Nemeth).

      grad U~_cv(theta) = grad U(theta_hat)
                          + grad U~(theta) - grad U~(theta_hat),

  with both minibatch terms on the same minibatch, so their noise largely
  cancels near theta_hat: the estimator's variance is O(|theta -
  theta_hat|^2) instead of O(1). The minibatch energy is the matching
  unbiased estimate

      U~_cv(theta) = U~(theta) - [U~(theta_hat) + grad U~(theta_hat)^T delta]
                     + [U(theta_hat) + grad U(theta_hat)^T delta],
      delta = theta - theta_hat,

  whose gradient in theta is exactly grad U~_cv. Every kernel uses it
  through the target, unchanged. U(theta_hat) and grad U(theta_hat) are
  computed once, at construction, from the base target's exact energy.

  Args:
    target: a target with an exact energy (e.g. `InMemoryTarget`).
    centre: theta_hat, in the structure of one chain's state (no chain
      dimensions), e.g. from `tfp_sgmcmc.find_mode`.

  #### Example

  ```python
  mode = tfp_sgmcmc.find_mode(target, tf.zeros([d]), num_steps=2000)
  cv_target = tfp_sgmcmc.ControlVariateTarget(target, mode)
  kernel = tfp_sgmcmc.SGLD(cv_target, step_size=1e-4)   # SGLD-CV
  ```

  #### References

  [1] Baker, J., Fearnhead, P., Fox, E. B. and Nemeth, C. Control variates
      for stochastic gradient MCMC. Statistics and Computing, 2019.
  """

  def __init__(self, target, centre):
    super().__init__(target)
    if not target.has_exact_energy:
      raise TargetCapabilityError(
          "ControlVariateTarget needs the base target's exact full-data "
          "energy to compute grad U(theta_hat); this target has none.")
    centre = tf.nest.map_structure(tf.convert_to_tensor, centre)
    target.check_state(centre)
    parts = tf.nest.flatten(centre)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      energy = target.energy(pack_like(centre, parts))
    grads = tape.gradient(energy, parts)
    _check_centre(parts, energy, grads)
    self._centre = centre
    self._centre_energy = energy
    self._centre_gradient = pack_like(centre, grads)

  @property
  def centre(self):
    return self._centre

  def minibatch_energies(self, states, seed):
    if not self._base.minibatches_from_seed:
      return self._energies_on_one_batch(states, seed)
    return [self.minibatch_energy(state, seed) for state in states]

  def minibatch_energy(self, state, seed):
    if not self._base.minibatches_from_seed:
      return self._energies_on_one_batch([state], seed)[0]
    centre_parts = tf.nest.flatten(self._centre)
    if getattr(self._base, "independent_minibatches", False):
      # Each chain has its own minibatch, so each needs the centre's energy
      # and gradient on that batch: one copy of the centre per chain.
      centre_parts = [tf.broadcast_to(tf.cast(c, x.dtype), tf.shape(x))
                      for c, x in zip(centre_parts, tf.nest.flatten(state))]
    with tf.GradientTape() as tape:
      tape.watch(centre_parts)
      centre_mb = self._base.minibatch_energy(
          pack_like(self._centre, centre_parts), seed)
    centre_mb, centre_mb_grad = _centre_terms(tape, centre_mb, centre_parts)
    return self._corrected(state, self._base.minibatch_energy(state, seed),
                           centre_parts, centre_mb, centre_mb_grad)

  def _energies_on_one_batch(self, states, seed):
    """U~_cv of each of `states` where the base's batch is not chosen by
    the seed (a `DatasetTarget`'s pipeline): each call draws the next
    batch, so the centre's terms and the states' are read from one call,
    one batch; on two, the noise of the difference does not cancel (it
    grew sqrt(2)x instead)."""
    centre_parts = tf.nest.flatten(self._centre)
    with tf.GradientTape() as tape:
      tape.watch(centre_parts)
      centre_mb, *state_mbs = self._base.minibatch_energies(
          [pack_like(self._centre, centre_parts), *states], seed)
    centre_mb, centre_mb_grad = _centre_terms(tape, centre_mb, centre_parts)
    return [self._corrected(state, state_mb, centre_parts, centre_mb,
                            centre_mb_grad)
            for state, state_mb in zip(states, state_mbs)]

  def _corrected(self, state, state_mb, centre_parts, centre_mb,
                 centre_mb_grad):
    """U~_cv(state) from U~(state), U~(theta_hat) and its gradient, all on
    one batch."""
    correction = tf.zeros_like(state_mb)
    for x, c, g_mb, g_full in zip(tf.nest.flatten(state), centre_parts,
                                  centre_mb_grad,
                                  tf.nest.flatten(self._centre_gradient)):
      delta = x - c
      axes = list(range(len(state_mb.shape), len(x.shape)))
      correction = correction + tf.reduce_sum(
          (tf.cast(g_full, x.dtype) - g_mb) * delta, axis=axes)
    return (state_mb - centre_mb + tf.cast(self._centre_energy,
                                           state_mb.dtype) + correction)


def _centre_terms(tape, centre_mb, centre_parts):
  """U~(theta_hat) and its gradient, held constant in the state."""
  grads = [tf.stop_gradient(g) for g in tape.gradient(
      centre_mb, centre_parts,
      unconnected_gradients=tf.UnconnectedGradients.ZERO)]
  return tf.stop_gradient(centre_mb), grads


class TemperedTarget(_OnBaseTarget):
  """The tempered posterior pi_T(theta) proportional to exp(-U(theta) / T).

  Divides every energy, gradient and gradient-noise estimate of `target` by
  the temperature T (variances by T^2). T < 1 gives a cold posterior, T > 1 a
  warm one. Kernels whose `temperature` argument cannot be expressed through
  their injected noise (the exact AMAGOLD and amortized Barker, and SGBD)
  sample `TemperedTarget(target, temperature)`.

      U_T(theta) = U(theta) / T,   grad U_T = grad U / T.

  Args:
    target: the `tfp_sgmcmc` target to temper (any `MinibatchTarget`).
    temperature: T, a finite number > 0, or a `tf.Variable` (read at every
      evaluation, so a value assigned later is the one sampled).

  Returns:
    A `MinibatchTarget` with the same data, batches and exact energy
    (where `target` has one) as `target`, every energy divided by T.

  Raises:
    TypeError: `temperature` is not a number.
    ValueError: `temperature` is not finite and > 0.

  #### Example

  A cold posterior (T = 0.1) for the exact AMAGOLD, which has no
  `temperature` argument of its own:

  ```python
  cold = tfp_sgmcmc.TemperedTarget(target, temperature=0.1)
  print(float(cold.energy(tf.zeros([d]))),
        float(target.energy(tf.zeros([d]))))   # the first is 10x the second
  kernel = tfp_sgmcmc.AMAGOLD(cold, step_size=1e-3, num_leapfrog_steps=5,
                              friction=1.)
  samples = tfp.mcmc.sample_chain(3, tf.zeros([d]), kernel=kernel,
                                  trace_fn=None, seed=[0, 1])
  ```
  """

  def __init__(self, target, temperature):
    super().__init__(target)
    if isinstance(temperature, (str, bytes, bool)) or temperature is None:
      raise TypeError(f"`temperature` must be a number > 0; got "
                      f"{temperature!r}.")
    t = float(temperature)
    if not t > 0 or not np.isfinite(t):
      raise ValueError(f"`temperature` must be > 0 and finite; got "
                       f"{temperature!r}.")
    # A `tf.Variable` is kept and read at every evaluation, as the
    # Langevin kernels read theirs: a value assigned between runs is the
    # temperature sampled, not the one seen here.
    self._temperature = (temperature if isinstance(temperature, tf.Variable)
                         else t)

  @property
  def temperature(self):
    return self._temperature

  def _cool(self, x):
    return x / as_dtype(self._temperature, x.dtype)

  def log_prior(self, state):
    return self._cool(tf.convert_to_tensor(self._base.log_prior(state)))

  def minibatch_energy(self, state, seed):
    return self._cool(self._base.minibatch_energy(state, seed))

  def minibatch_energies(self, states, seed):
    return [self._cool(e) for e in self._base.minibatch_energies(states, seed)]

  def energy_and_gradient(self, state, seed):
    energy, grads = self._base.energy_and_gradient(state, seed)
    return self._cool(energy), tf.nest.map_structure(self._cool, grads)

  def gradient(self, state, seed):
    return tf.nest.map_structure(self._cool, self._base.gradient(state, seed))

  def energy(self, state):
    return self._cool(self._base.energy(state))

  def gradient_noise_variance(self, state, seed):
    return tf.nest.map_structure(
        lambda v: self._cool(self._cool(v)),
        self._base.gradient_noise_variance(state, seed))



def tempered(target, temperature):
  """`target` itself where `temperature` is the number 1, else
  `TemperedTarget(target, temperature)`. A `tf.Variable` is always
  wrapped: whatever its value now, it may be assigned another before a
  run."""
  if not isinstance(temperature, tf.Variable) and float(temperature) == 1.:
    return target
  return TemperedTarget(target, temperature)


class FullBatchTarget(_OnBaseTarget):
  """`target` with exact gradients: every energy it gives, minibatch or
  not, is the base's exact U(theta) (for a `DatasetTarget`, one pass over
  its `full_dataset`), so there is no gradient noise. `tfp_sgmcmc.sample`
  samples on it where the minibatch noise holds the warm-up's step size
  down and the data are not in memory (an `InMemoryTarget` has
  `with_full_batch` instead).

  ```python
  exact = tfp_sgmcmc.targets.wrappers.FullBatchTarget(streamed)
  print(exact.is_full_batch)   # True: U~ = U, grad U~ = grad U
  ```
  """

  def __init__(self, target):
    super().__init__(target)
    if not target.has_exact_energy:
      raise TargetCapabilityError(
          f"FullBatchTarget needs a target with an exact energy; this "
          f"{type(target).__name__} has none (a DatasetTarget needs its "
          "`full_dataset`).")

  @property
  def is_full_batch(self):
    return True

  @property
  def minibatches_from_seed(self):
    """True: no batch is drawn, so a trajectory reads the same data in
    either direction (the amortized tests are exact)."""
    return True

  def minibatch_energy(self, state, seed):
    del seed  # Every evaluation is the exact energy.
    return self._base.energy(state)

  def energy_and_gradient(self, state, seed):
    del seed  # For a stream, one pass over `full_dataset` gives both.
    check_float_state(state)
    return self._base.exact_energy_and_gradient(state)

  def gradient_noise_variance(self, state, seed):
    del seed
    return tf.nest.map_structure(tf.zeros_like, state)

def find_mode(target, initial_state, num_steps=2000, learning_rate=1e-2,
              full_batch=None, seed=(0, 0), jit_compile=False):
  """Minimises U with Adam and returns theta_hat (structure of the state).

  Uses the exact full-data gradient when the target has an exact energy
  (`full_batch=None` or True), otherwise minibatch gradients with fresh
  batches drawn from `seed`. Runs as one compiled loop.

  Args:
    target: a `tfp_sgmcmc` target.
    initial_state: starting point (one chain or several).
    num_steps: Adam steps.
    learning_rate: Adam's step size.
    full_batch: force full-batch (True) or minibatch (False) gradients;
      None (default) uses full-batch gradients where the target has an
      exact energy (`has_exact_energy`).
    seed: stateless int32[2] seed for the minibatches.
    jit_compile: compile the loop with XLA, which gives the same bits at
      every call (in a graph, TensorFlow's optimiser may change an exact
      energy's gradient in its last bits from one tracing to the next).

  Each step is Adam's (beta1 = 0.9, beta2 = 0.999, eps = 1e-8):

      m_t = beta1 m_{t-1} + (1 - beta1) g_t,  v_t = beta2 v_{t-1} +
      (1 - beta2) g_t^2,
      theta_t = theta_{t-1} - lr (m_t / (1 - beta1^t)) /
                (sqrt(v_t / (1 - beta2^t)) + eps),   g_t = grad U(theta_{t-1}).

  Returns:
    theta_hat, in the structure of `initial_state`.

  Raises:
    ValueError: `full_batch=True` on a target without an exact energy, a
      bad `num_steps` or `learning_rate`, or (eagerly) a search that
      became non-finite.

  #### Example

  ```python
  mode = tfp_sgmcmc.find_mode(target, tf.zeros([d]), num_steps=300,
                              learning_rate=0.05)
  print(mode.numpy())   # about [1, -1]
  ```
  """
  check_target(target)
  arguments.check_positive("learning_rate", learning_rate)
  arguments.check_integer("num_steps", num_steps)
  if full_batch is None:
    full_batch = target.has_exact_energy
  elif full_batch and not target.has_exact_energy:
    raise ValueError("`full_batch` = True needs a target with an exact energy "
                     f"(has_exact_energy); {type(target).__name__} has none: "
                     "use full_batch=False (minibatch gradients).")
  state = tf.nest.map_structure(tf.convert_to_tensor, initial_state)
  check_initial_state(state, target)
  flat = tf.nest.flatten(state)
  beta1, beta2, eps = 0.9, 0.999, 1e-8

  def gradient(parts, step_seed):
    structured = tf.nest.pack_sequence_as(state, parts)
    if full_batch:
      with tf.GradientTape() as tape:
        tape.watch(parts)
        energy = target.energy(structured)
      return tape.gradient(energy, parts)
    _, grads = target.energy_and_gradient(structured, step_seed)
    return tf.nest.flatten(grads)

  @tf.function(autograph=False, jit_compile=jit_compile)
  def run(parts, seed):
    def body(i, parts, m, v, seed):
      seed, step_seed = random.split_seed(seed, 2)
      grads = gradient(parts, step_seed)
      t = tf.cast(i + 1, parts[0].dtype)
      m = [beta1 * mi + (1 - beta1) * g for mi, g in zip(m, grads)]
      v = [beta2 * vi + (1 - beta2) * g * g for vi, g in zip(v, grads)]
      parts = [p - learning_rate * (mi / (1 - beta1 ** t)) /
               (tf.sqrt(vi / (1 - beta2 ** t)) + eps)
               for p, mi, vi in zip(parts, m, v)]
      return i + 1, parts, m, v, seed
    zeros = [tf.zeros_like(p) for p in parts]
    _, parts, _, _, _ = tf.while_loop(
        lambda i, *_: i < num_steps, body,
        (tf.constant(0), parts, zeros, list(zeros), seed))
    return parts
  parts = run(flat, tfp.random.sanitize_seed(seed))
  if tf.executing_eagerly():
    # A search that met a non-finite energy or gradient returns NaN; as the
    # centre of ControlVariateTarget it would freeze every chain.
    for i, part in enumerate(parts):
      if not bool(tf.reduce_all(tf.math.is_finite(part))):
        raise ValueError(
            f"find_mode diverged: part {i} of the mode is not finite after "
            f"{num_steps} Adam steps at `learning_rate` = "
            f"{arguments.describe(learning_rate)} (the energy or its "
            "gradient became non-finite on the way). Use a smaller "
            "learning_rate, or start nearer the mode.")
  return tf.nest.pack_sequence_as(state, parts)
