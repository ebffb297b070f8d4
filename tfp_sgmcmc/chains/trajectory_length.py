"""The trajectory length of a warm-up: ChEES (Hoffman, Radul & Sountsov
2021) as pure functions over a small state, the one rule that
`tfp_sgmcmc.warm_up(adapt_num_leapfrog_steps=True)` runs in its window loops.

A trajectory of T leapfrog steps of size h lasts L = T h. ChEES, the change
in the estimator of the expected square,

    ChEES(L) = 1/4 E[(||theta' - E theta||^2 - ||theta - E theta||^2)^2],

theta the chain's state before a test and theta' its proposal, grows with
L as long as the trajectory carries the state further out or in, and falls
when it turns back. Its derivative in the proposal's integration time is,
with the velocity v' = M^{-1} r' at the proposal (d theta' / dt = v'),

    d ChEES / dt = E[(||theta' - E theta'||^2 - ||theta - E theta||^2)
                     (theta' - E theta')^T v'],

estimated per test from the chains (their mean for E theta, the
acceptance-weighted mean of the proposals for E theta') and weighted by each
chain's acceptance probability (a rejected proposal moves nothing). Each
test runs a jittered length u L, u in (0, 1] from a base-2 Halton sequence
(jitter keeps a trajectory from resonating with the target's periods), so
d(u L) / dL = u scales the estimate. log L follows Adam's normalised step
(second-moment rate 0.05, learning rate 0.025, each step clipped to +-0.35,
TFP's `GradientBasedTrajectoryLengthAdaptation` constants) and is iterate-
averaged with weight t^-1/2, under the cap L <= h * max_num_leapfrog_steps.

After the warm-up the length is frozen: `tuned_num_leapfrog_steps` gives
the one integer T = ceil(L-bar / (2 h)), the mean of the jittered lengths
the warm-up tuned (E u = 1/2). A kernel with a fixed T is exact (AMAGOLD's
Theorem 1 holds for every T), so the sampling phase stays exact; only the
warm-up's tests, whose T changes, are not a chain of one kernel.

AMAGOLD's amortized test spans a whole trajectory, so every statistic here
is per test (per trajectory of T gradients), as the warm-up's acceptance is.
"""

import collections
import math

import numpy as np
import tensorflow as tf
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments

__all__ = ["TrajectoryLengthState", "halton", "chees", "chees_gradient",
           "init", "jittered_num_leapfrog_steps", "update",
           "tuned_num_leapfrog_steps", "check_options",
           "test_step"]

# TFP's `GradientBasedTrajectoryLengthAdaptation` constants: Adam's learning
# rate on log L, its second-moment rate (1 - beta_2), the clip of one step
# (about log(2) / 2) and the Halton sequence's bits (1,024 lengths).
LEARNING_RATE, SQUARED_GRADIENT_RATE, MAX_LOG_STEP = 0.025, 0.05, 0.35
_HALTON_BITS = 10


class TrajectoryLengthState(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("TrajectoryLengthState", [
        "log_length", "log_averaged_length", "averaged_squared_gradient",
        "count"])):
  """log L (the jitter's maximum for the next test), log L-bar (its
  iterate average), Adam's average of the squared gradient, and t (tests
  so far)."""
  __slots__ = ()


def halton(index):
  """The base-2 Halton (van der Corput) point of `index` + 1, in (0, 1):
  1/2, 1/4, 3/4, 1/8, ... (an even spread of jitters)."""
  index = tf.cast(index, tf.int32) + 1
  bits = tf.range(_HALTON_BITS)
  digits = tf.math.floormod(index // tf.bitwise.left_shift(1, bits), 2)
  return tf.reduce_sum(tf.cast(digits, tf.float64) *
                       tf.pow(tf.constant(0.5, tf.float64),
                              tf.cast(bits + 1, tf.float64)))


def _as(value, dtype):
  """`value` in `dtype`; a Python number converted there directly (not
  through float32)."""
  return (tf.cast(value, dtype) if tf.is_tensor(value) else
          tf.convert_to_tensor(value, dtype))


def _sum_event(x, batch_ndims):
  return tf.reduce_sum(x, list(range(batch_ndims, x.shape.rank)))


def _centred(previous_parts, proposed_parts, accept_prob, batch_ndims):
  """The chains' draws centred: the previous on their mean, the proposals
  on their acceptance-weighted mean (a proposal that the test rejects, its
  integration error large, says little about where the dynamics go)."""
  axes = list(range(batch_ndims))

  def weights(x):
    return tf.reshape(tf.cast(accept_prob, x.dtype), tf.concat(
        [tf.shape(accept_prob), tf.ones([x.shape.rank - batch_ndims],
                                        tf.int32)], 0))
  previous = [x - tf.reduce_mean(x, axes) for x in previous_parts]
  proposed = []
  for x in proposed_parts:
    safe = tf.where(tf.math.is_finite(x), x, tf.zeros_like(x))
    w = weights(x)
    mean = tf.reduce_sum(w * safe, axes) / (tf.reduce_sum(w, axes) + 1e-20)
    proposed.append(safe - mean)
  return previous, proposed


def chees(previous_parts, proposed_parts, accept_prob, batch_ndims):
  """Per chain, 1/4 (||theta' - E theta'||^2 - ||theta - E theta||^2)^2,
  the means over the chains (see the module's docstring).

  ```python
  # Two chains in 1-d at -1 and 1, proposals at -2 and 2, accepted:
  # 1/4 (4 - 1)^2 = 2.25 each.
  from tfp_sgmcmc.chains import trajectory_length
  print(trajectory_length.chees(
      [tf.constant([[-1.], [1.]])], [tf.constant([[-2.], [2.]])],
      tf.ones([2]), 1).numpy())  # [2.25 2.25]
  ```
  """
  previous, proposed = _centred(previous_parts, proposed_parts,
                                accept_prob, batch_ndims)
  change = tf.add_n([_sum_event(tf.square(b) - tf.square(a), batch_ndims)
                     for a, b in zip(previous, proposed)])
  return 0.25 * tf.square(change)


def chees_gradient(previous_parts, proposed_parts, velocity_parts,
                   accept_prob, batch_ndims):
  """Per chain, the derivative of `chees` as the proposal moves on along
  its velocity v' = M^{-1} r' (theta' + dt v'):

      (||theta' - E theta'||^2 - ||theta - E theta||^2) (theta' - E theta')^T v'.

  ```python
  # The chains of `chees`, moving outwards at unit speed: 3 * 2 = 6 each.
  from tfp_sgmcmc.chains import trajectory_length
  print(trajectory_length.chees_gradient(
      [tf.constant([[-1.], [1.]])], [tf.constant([[-2.], [2.]])],
      [tf.constant([[-1.], [1.]])], tf.ones([2]), 1).numpy())  # [6. 6.]
  ```
  """
  previous, proposed = _centred(previous_parts, proposed_parts,
                                accept_prob, batch_ndims)
  change = tf.add_n([_sum_event(tf.square(b) - tf.square(a), batch_ndims)
                     for a, b in zip(previous, proposed)])
  outward = tf.add_n([_sum_event(b * v, batch_ndims)
                      for b, v in zip(proposed, velocity_parts)])
  return change * outward


def init(num_leapfrog_steps, step_size, dtype=tf.float32):
  """The state at the start: L = T h, the kernel's own trajectory."""
  log_length = tf.math.log(_as(num_leapfrog_steps, dtype) *
                           _as(step_size, dtype))
  zero = tf.zeros([], dtype)
  return TrajectoryLengthState(log_length, log_length, zero, zero)


def jittered_num_leapfrog_steps(state, step_size, max_num_leapfrog_steps):
  """(T, u): the next test's steps T = ceil(u L / h), between 1 and the
  cap, and its jitter u = `halton`(t)."""
  dtype = state.log_length.dtype
  jitter = tf.cast(halton(state.count), dtype)
  steps = tf.math.ceil(jitter * tf.exp(state.log_length) /
                       _as(step_size, dtype))
  steps = tf.clip_by_value(steps, 1., float(max_num_leapfrog_steps))
  return tf.cast(steps, tf.int32), jitter


def update(state, previous_parts, proposed_parts, velocity_parts,
           log_accept_ratio, jitter, step_size, max_num_leapfrog_steps,
           batch_ndims):
  """After a test of jitter u: one Adam step of log L up the ChEES
  gradient (the chains' `chees_gradient` times u, acceptance-weighted),
  its iterate average, and the cap L <= h * `max_num_leapfrog_steps`."""
  dtype = state.log_length.dtype
  accept = tf.cast(tf.where(
      tf.math.is_nan(log_accept_ratio), tf.zeros_like(log_accept_ratio),
      tf.exp(tf.minimum(log_accept_ratio, 0.))), dtype)
  grad = tf.cast(chees_gradient(previous_parts, proposed_parts,
                                velocity_parts, accept, batch_ndims), dtype)
  # A diverged or all-but-rejected proposal carries no direction.
  grad = tf.where((accept > 1e-4) & tf.math.is_finite(grad), grad,
                  tf.zeros_like(grad))
  grad = jitter * tf.reduce_sum(grad * accept) / (
      tf.reduce_sum(accept) + 1e-20)
  t = state.count + 1.
  squared = ((1. - SQUARED_GRADIENT_RATE) * state.averaged_squared_gradient
             + SQUARED_GRADIENT_RATE * tf.square(grad))
  unbiased = squared / (1. - (1. - SQUARED_GRADIENT_RATE) ** t)
  log_step = tf.clip_by_value(
      LEARNING_RATE * grad / tf.sqrt(unbiased + 1e-20), -MAX_LOG_STEP,
      MAX_LOG_STEP)
  cap = tf.math.log(_as(step_size, dtype) * float(max_num_leapfrog_steps))
  log_length = tf.minimum(state.log_length + log_step, cap)
  weight = t ** -0.5
  log_averaged = weight * log_length + (1. - weight) * (
      state.log_averaged_length)
  return TrajectoryLengthState(log_length, log_averaged, squared, t)


def tuned_num_leapfrog_steps(state, step_size, max_num_leapfrog_steps):
  """The frozen T, a Python integer: ceil(L-bar / (2 h)) (the warm-up's
  mean jittered length), between 1 and `max_num_leapfrog_steps`.

  ```python
  from tfp_sgmcmc.chains import trajectory_length
  state = trajectory_length.init(10, 0.1)  # L = 1
  print(trajectory_length.tuned_num_leapfrog_steps(state, 0.1, 100))  # 5
  ```
  """
  length = float(np.exp(np.float64(state.log_averaged_length)))
  steps = math.ceil(round(0.5 * length / float(step_size), 6))
  return int(min(max(steps, 1), max_num_leapfrog_steps))


# Why one chain keeps its T: ChEES reads each trajectory's spread about the
# chains' mean, which is the chain itself when there is one, so its
# gradient is 0 and L stays the kernel's T times its first step size.
ONE_CHAIN = ("ChEES needs at least 2 chains (it measures the trajectories "
             "against the chains' mean)")


def check_options(adapt_num_leapfrog_steps, max_num_leapfrog_steps,
                  kind="kernel", has_length=True, criterion="acceptance",
                  num_chains=None):
  """Raises unless `warm_up`'s length options fit: a Python bool, a cap
  that is a Python integer >= 1, and (when adapting) a kernel of `kind`
  whose test is its own trajectory (`has_length`) under the acceptance
  criterion, on at least two chains (`num_chains`, None: not known)."""
  arguments.check_bool("adapt_num_leapfrog_steps", adapt_num_leapfrog_steps,
                       " Pass True to tune AMAGOLD's T (or None to let the "
                       "warm-up pick).")
  if not adapt_num_leapfrog_steps:
    return
  arguments.check_integer(
      "max_num_leapfrog_steps", max_num_leapfrog_steps, hint=(
          " It is the most gradients one test may take. Pass e.g. "
          "max_num_leapfrog_steps=256."))
  if not has_length:
    raise ValueError(
        f"`adapt_num_leapfrog_steps=True` but this {kind} has no trajectory "
        "length of its own to tune (its warm-up test runs num_test_steps "
        "gradients, and it samples one step at a time); use "
        "adapt_num_leapfrog_steps=False, or AMAGOLD.")
  if criterion != "acceptance":
    raise ValueError(
        f"`adapt_num_leapfrog_steps=True` with criterion={criterion!r}: the "
        "length is tuned on the acceptance test's chains. Use "
        "criterion='acceptance', or adapt_num_leapfrog_steps=False.")
  if num_chains is not None and num_chains < 2:
    raise ValueError(
        f"`adapt_num_leapfrog_steps=True` with {num_chains} chain: "
        f"{ONE_CHAIN}; one chain would keep the kernel's T times its first "
        "step size, whatever the posterior. Run 2 or more chains, or use "
        "adapt_num_leapfrog_steps=False.")


def test_step(make_length_test, momentum_distribution, state, results, seed,
              step_size, length, max_num_leapfrog_steps, batch_ndims):
  """One warm-up test of a jittered length: the kernel's
  `_warmup_length_test` (the warm-up protocol of
  `tfp_sgmcmc.kernels.tuning`) with T = `jittered_num_leapfrog_steps`, then
  `update` from its proposal.

  Returns:
    (state, results, the new `TrajectoryLengthState`, T of this test).
  """
  steps, jitter = jittered_num_leapfrog_steps(length, step_size,
                                              max_num_leapfrog_steps)
  test, velocity = make_length_test(steps, momentum_distribution)
  new_state, results = test.one_step(state, results, seed)
  length = update(length, tf.nest.flatten(state),
                  tf.nest.flatten(results.proposed_state),
                  tf.nest.flatten(velocity(results)), results.log_accept_ratio,
                  jitter, step_size, max_num_leapfrog_steps, batch_ndims)
  return new_state, results, length, steps
