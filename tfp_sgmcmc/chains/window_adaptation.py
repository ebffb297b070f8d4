"""Stan's window adaptation as pure functions over a small state: the one
adaptation that `tfp_sgmcmc.warm_up` (in its compiled window loops) and the
Keras `SamplingCallback(warmup=n)` (its state in optimizer variables) run.

The state (`WindowAdaptationState`) is a nest of tensors:

* `dual_averaging`: the step size's dual averaging (Hoffman & Gelman 2014,
  Stan's h-bar recursion and constants), `DualAveragingState`;
* `window`: the running sums of the draws of the current window
  (`WindowState`: centred on the chains' mean at the window's start, for a
  variance without cancellation), or None (or `()`, a loop's empty
  structure) when no mass is adapted;
* `inverse_mass`: M^{-1} per state part, the current mass: a diagonal
  shaped like the part, a dense [d, d] matrix, or a low-rank-plus-diagonal
  (s, V, lambda) (`regularized_low_rank`), the last two with a dense
  window.

A warm-up is `init`, then `update` after each test (the test's acceptance
and the chain's state after it), and at the end of each window of
`warmup_windows` `end_window` (a new mass after a slow window, dual averaging
restarted from the averaged step size) and `begin_window`; `final` gives the
tuned step size and M^{-1}. Every function is a pure map of the nest (as
BlackJAX's `window_adaptation` parts are), so a caller can keep the nest in
a loop's variables or in Keras variables alike.
"""

import collections

import numpy as np
import tensorflow as tf
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

__all__ = ["WindowAdaptationState", "DualAveragingState", "WindowState",
           "warmup_windows", "regularized_variance", "acceptance_probability",
           "regularized_covariance", "regularized_low_rank", "final",
           "low_rank_diagonal", "dual_averaging_init", "dual_averaging_update",
           "begin_window", "window_update", "window_variance", "init",
           "gradient_window_update", "gradient_variance", "GRADIENT_BOUND_SDS",
           "MASS_ESTIMATES", "MIN_WARMUP_STEPS", "update", "end_window"]

MIN_WARMUP_STEPS = 20  # A fast, a slow and a final window.
# What a diagonal M^{-1} is estimated from: the window's draws
# (`window_variance`) or the gradients at them (`gradient_variance`).
MASS_ESTIMATES = ("draws", "gradients")

# Dual averaging's constants (Hoffman & Gelman 2014, Stan's defaults).
_GAMMA, _T0, _KAPPA = 0.05, 10., 0.75


class DualAveragingState(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("DualAveragingState", [
        "log_step_size", "log_averaging_step", "error_mean", "count",
        "log_shrinkage_target"])):
  """log eps (the step of the next test), log eps-bar (its average),
  H-bar (the mean of target - acceptance), t (tests since the restart) and
  mu (the search's centre, log(10 eps) at the restart)."""
  __slots__ = ()


class WindowState(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("WindowState", [
        "shift", "sum", "sum_of_squares", "count"])):
  """Per state part, the sums of (x - shift) and (x - shift)^2 over the
  window's draws (chain axes summed), and `count`, the number of draws
  (tests times chains)."""
  __slots__ = ()


class WindowAdaptationState(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("WindowAdaptationState", [
        "dual_averaging", "window", "inverse_mass"])):
  """The whole adaptation: `DualAveragingState`, `WindowState` (or None
  without mass adaptation) and M^{-1} per state part."""
  __slots__ = ()


def warmup_windows(num_steps, initial_buffer=75, final_buffer=50,
                   base_window=25):
  """Stan's windows: [(kind, steps)], a fast window, slow windows doubling
  from `base_window` (the last stretched to the end), a fast window.

  When `num_steps` is below initial_buffer + base_window + final_buffer the
  three are shrunk to 15% / 75% / 10% of it, as Stan does.

  Args:
    num_steps: the warm-up's length, an integer >= 20.
    initial_buffer: steps of the first fast window (step size only).
    final_buffer: steps of the last fast window (step size only, with the
      mass frozen).
    base_window: steps of the first slow window (step size and mass); each
      next slow window is twice as long, the last one stretched to end
      where the final buffer starts.

  Returns:
    A list of `(kind, steps)` pairs, `kind` "fast" or "slow", whose steps
    sum to `num_steps`; windows of 0 steps are left out.

  Raises:
    ValueError: `num_steps` < 20.

  #### Example

  ```python
  print(tfp_sgmcmc.warmup_windows(1000))
  # [('fast', 75), ('slow', 25), ('slow', 50), ('slow', 100),
  #  ('slow', 200), ('slow', 500), ('fast', 50)]
  assert sum(n for _, n in tfp_sgmcmc.warmup_windows(1000)) == 1000
  ```
  """
  if num_steps < MIN_WARMUP_STEPS:
    raise ValueError(f"`num_steps` of the warm-up must be >= 20 (a fast, a "
                     f"slow and a final window); got {num_steps}.")
  if initial_buffer + base_window + final_buffer > num_steps:
    initial_buffer = int(0.15 * num_steps)
    final_buffer = int(0.1 * num_steps)
    base_window = num_steps - initial_buffer - final_buffer
  windows = [("fast", initial_buffer)]
  end = num_steps - final_buffer
  start, size = initial_buffer, base_window
  while start < end:
    if start + size + 2 * size > end:
      size = end - start
    windows.append(("slow", size))
    start += size
    size *= 2
  windows.append(("fast", final_buffer))
  return [(k, n) for k, n in windows if n > 0]


def _log_level(variance):
  """log L, L the geometric mean of the positive finite entries of every
  part of `variance` (0. when there is none), and the mask of those
  entries per part."""
  parts = [tf.convert_to_tensor(v) for v in tf.nest.flatten(variance)]
  seen = [tf.math.is_finite(v) & (v > 0.) for v in parts]
  logs = [tf.where(m, tf.math.log(tf.where(m, v, tf.ones_like(v))),
                   tf.zeros_like(v)) for v, m in zip(parts, seen)]
  total = tf.add_n([tf.reduce_sum(tf.cast(x, tf.float64)) for x in logs])
  count = tf.add_n([tf.reduce_sum(tf.cast(m, tf.float64)) for m in seen])
  return (tf.math.divide_no_nan(total, count), count > 0.), seen


def regularized_variance(variance, num_draws, previous=None):
  """A slow window's variance estimate made the M^{-1} of the next window:
  each coordinate's variance shrunk towards L, the geometric mean of the
  window's variances over every coordinate of every part, with Stan's
  weight 5 / (n + 5), on the log scale,

      log M^{-1} = n / (n + 5) log var + 5 / (n + 5) log L.

  The rule is relative: scaling every variance by c scales M^{-1} by c, so
  a state whose posterior variances run from 1e-8 to 1e4 gets each one
  back within a factor (L / var)^{5 / (n + 5)} (1.035 at n = 2,000
  draws for a variance 1e6 from L), where Stan's absolute rule (shrinking
  towards 1e-3) sets every variance below about 1e-3 x 5 / (n + 5) to
  that floor.
  A coordinate whose window variance is not positive (it never moved: a
  window with every test rejected) keeps `previous` (default: L; 1 when no
  coordinate moved). The two weights are computed in double precision and
  cast to the variance's dtype, so the result does not depend on whether
  n is a number or a tensor.

  Args:
    variance: per state part, the window draws' variance (a tensor or a
      list of tensors).
    num_draws: n, the draws the variance was estimated from (a number or a
      scalar tensor).
    previous: M^{-1} before the window, in the structure of `variance`
      (optional).

  Returns:
    M^{-1}, tensors in the structure of `variance`.

  ```python
  from tfp_sgmcmc.chains.window_adaptation import regularized_variance
  print(regularized_variance([tf.constant([1e-8, 1e4])], 2000.))
  # [1.035e-08, 9.66e+03]: each within 3.5% of its variance
  ```
  """
  (log_level, any_seen), seen = _log_level(variance)
  n = tf.cast(num_draws, tf.float64)
  weight = n / (n + 5.)
  parts = [tf.convert_to_tensor(v) for v in tf.nest.flatten(variance)]
  olds = ([None] * len(parts) if previous is None else
          [tf.convert_to_tensor(m) for m in tf.nest.flatten(previous)])
  out = []
  for v, m, old in zip(parts, seen, olds):
    safe = tf.where(m, v, tf.ones_like(v))
    w = tf.cast(weight, v.dtype)
    shrunk = tf.exp(w * tf.math.log(safe) +
                    tf.cast((1. - weight) * log_level, v.dtype))
    if old is None:
      old = tf.where(any_seen, tf.cast(tf.exp(log_level), v.dtype),
                     tf.ones([], v.dtype))
    out.append(tf.where(m, shrunk, tf.cast(old, v.dtype) + tf.zeros_like(v)))
  return tf.nest.pack_sequence_as(variance, out)


def regularized_covariance(covariance, num_draws, previous=None):
  """A slow window's covariance estimate ([d, d]) made a dense M^{-1}:
  shrunk towards its diagonal with weight d / (n + d), which keeps it
  positive definite when n, the window's draws, is not far above d (a
  covariance of n draws has rank at most n); then its diagonal is
  regularised as `regularized_variance` does, the correlations kept:

      S = (1 - d / (n + d)) C + d / (n + d) diag(C),
      M^{-1} = D R D,   R = the correlation matrix of S,
      D^2 = regularized_variance(diag(C), n, diag(previous)).

  Args:
    covariance: the window draws' covariance, a [d, d] tensor.
    num_draws: n, the draws it was estimated from (a number or a scalar
      tensor).
    previous: M^{-1} before the window, [d, d] (optional): where a
      coordinate never moved, its variance is kept from it.

  Returns:
    M^{-1}, [d, d].
  """
  covariance = tf.convert_to_tensor(covariance)
  dtype = covariance.dtype
  n = tf.cast(num_draws, tf.float64)
  d = tf.cast(tf.shape(covariance)[-1], tf.float64)
  shrink = tf.cast(d / (n + d), dtype)
  diagonal = tf.linalg.diag_part(covariance)
  shrunk = (1. - shrink) * covariance + shrink * tf.linalg.diag(diagonal)
  sd = tf.sqrt(tf.where(diagonal > 0., diagonal, tf.ones_like(diagonal)))
  correlation = tf.linalg.set_diag(shrunk / (sd[:, None] * sd[None, :]),
                                   tf.ones_like(diagonal))
  scale = tf.sqrt(regularized_variance(
      diagonal, num_draws,
      None if previous is None else tf.linalg.diag_part(previous)))
  return scale[:, None] * correlation * scale[None, :]


def low_rank_diagonal(inverse_mass):
  """The diagonal of M^{-1} = S (I + V (Lambda - I) V^T) S, given as
  (s, V, lambda)."""
  scale, basis, eigenvalues = inverse_mass
  return tf.square(scale) * (1. + tf.linalg.matvec(tf.square(basis),
                                                   eigenvalues - 1.))


def regularized_low_rank(covariance, num_draws, rank, previous=None):
  """A slow window's covariance estimate ([d, d]) made a low-rank-plus-
  diagonal M^{-1} = S (I + V (Lambda - I) V^T) S: the dense estimate
  `regularized_covariance` (its diagonal S^2), and of its correlation
  matrix the `rank` eigenvectors V whose eigenvalues Lambda are farthest
  from 1 on the log scale, both the stretched directions (lambda > 1) and
  the squeezed ones (lambda < 1); the other directions keep the diagonal.

  Args:
    covariance: the window draws' covariance, a [d, d] tensor.
    num_draws: n, the draws it was estimated from.
    rank: k, a Python int <= d.
    previous: M^{-1} before the window as (s, V, lambda) (optional).

  Returns:
    (s [d], V [d, k], lambda [k]), as `low_rank_momentum_distribution`
    takes them.
  """
  previous_dense = None
  if previous is not None:
    previous_dense = tf.linalg.diag(low_rank_diagonal(previous))
  dense = regularized_covariance(covariance, num_draws, previous_dense)
  scale = tf.sqrt(tf.linalg.diag_part(dense))
  correlation = dense / (scale[:, None] * scale[None, :])
  eigenvalues, vectors = tf.linalg.eigh(
      0.5 * (correlation + tf.linalg.matrix_transpose(correlation)))
  eigenvalues = tf.maximum(eigenvalues, tf.reduce_max(eigenvalues) * 1e-12)
  _, top = tf.math.top_k(tf.abs(tf.math.log(eigenvalues)), k=rank)
  return (scale, tf.gather(vectors, top, axis=1),
          tf.gather(eigenvalues, top))


def acceptance_probability(log_accept_ratio):
  """The test's mean acceptance probability over the chains, min(1, e^r);
  a NaN ratio (an overflowed trajectory) counts as 0."""
  return tf.reduce_mean(tf.where(
      tf.math.is_nan(log_accept_ratio), tf.zeros_like(log_accept_ratio),
      tf.exp(tf.minimum(log_accept_ratio, 0.))))


def dual_averaging_init(log_step_size):
  """Dual averaging started (or restarted) at eps = exp(`log_step_size`),
  its search centred on mu = log(10 eps)."""
  zero = tf.zeros_like(log_step_size)
  return DualAveragingState(log_step_size, log_step_size, zero, zero,
                            log_step_size + np.log(10.))


def dual_averaging_update(state, accept_prob, target_accept_prob):
  """One step of Stan's dual averaging after a test of acceptance `a`:

      t' = t + 1,   H' = (1 - 1 / (t' + t0)) H + (delta - a) / (t' + t0)
      log eps' = mu - sqrt(t') / gamma H'
      log eps-bar' = t'^-kappa log eps' + (1 - t'^-kappa) log eps-bar.
  """
  t = state.count + 1.
  eta = 1. / (t + _T0)
  h_bar = (1. - eta) * state.error_mean + eta * (
      target_accept_prob - accept_prob)
  log_eps = state.log_shrinkage_target - tf.sqrt(t) / _GAMMA * h_bar
  w = t ** -_KAPPA
  log_eps_bar = w * log_eps + (1. - w) * state.log_averaging_step
  return DualAveragingState(log_eps, log_eps_bar, h_bar, t,
                            state.log_shrinkage_target)


def begin_window(state_parts, batch_ndims, dense=False):
  """An empty `WindowState`, centred on the chains' mean of `state_parts`
  (the chain's position for one chain). `dense`: the sums of squares are
  the [d, d] sums of outer products (each part one vector per chain)."""
  axes = list(range(batch_ndims))
  shift = [tf.reduce_mean(p, axes) for p in state_parts]
  zeros = [tf.zeros_like(s) for s in shift]
  squares = ([tf.zeros(tf.concat([tf.shape(s), tf.shape(s)], 0), s.dtype)
              for s in shift] if dense else list(zeros))
  return WindowState(shift, zeros, squares,
                     tf.zeros([], state_parts[0].dtype))


def _is_dense(window_sum, window_squares):
  return window_squares.shape.rank == window_sum.shape.rank + 1


def window_update(window, state_parts, batch_ndims):
  """`window` with the draws `state_parts` (one per chain) added."""
  axes = list(range(batch_ndims))
  centred = [p - s for p, s in zip(state_parts, window.shift)]
  chains = tf.cast(tf.reduce_prod(tf.shape(state_parts[0])[:batch_ndims]),
                   window.count.dtype)
  def squares(b, s, c):
    if _is_dense(s, b):
      flat = tf.reshape(c, [-1, c.shape[-1]])
      return b + tf.linalg.matmul(flat, flat, transpose_a=True)
    return b + tf.reduce_sum(c * c, axes)
  return WindowState(
      window.shift,
      [a + tf.reduce_sum(c, axes) for a, c in zip(window.sum, centred)],
      [squares(b, s, c)
       for b, s, c in zip(window.sum_of_squares, window.sum, centred)],
      window.count + chains)


def window_variance(window):
  """The window draws' variance per coordinate (divisor n), or their
  [d, d] covariance for a dense window."""
  n = window.count

  def variance(s1, s2):
    mean = s1 / n
    if _is_dense(s1, s2):
      return s2 / n - mean[:, None] * mean[None, :]
    return s2 / n - tf.square(mean)
  return [variance(s1, s2)
          for s1, s2 in zip(window.sum, window.sum_of_squares)]


def gradient_window_update(window, gradients, other_gradients,
                           batch_ndims):
  """`window` (begun on zeros) with, per chain, the product p = g_a g_b of
  two independent unbiased estimates of grad U at the chain's draw: a
  window over the products (`sum` adds p, `sum_of_squares` p^2), the sums
  of `gradient_variance`."""
  axes = list(range(batch_ndims))
  chains = tf.cast(tf.reduce_prod(tf.shape(gradients[0])[:batch_ndims]),
                   window.count.dtype)
  products = [g * h for g, h in zip(gradients, other_gradients)]
  return WindowState(
      window.shift,
      [a + tf.reduce_sum(p, axes) for a, p in zip(window.sum, products)],
      [b + tf.reduce_sum(p * p, axes)
       for b, p in zip(window.sum_of_squares, products)],
      window.count + chains)


# `gradient_variance`'s one-sided bound: standard errors above the mean.
GRADIENT_BOUND_SDS = 2.


def gradient_variance(window):
  """Per state part, each coordinate's posterior variance (before the
  window's regularisation) from the gradients at the window's n draws, not
  from how far the draws moved: v_i = 1 / (max(m_i, 0) + 2 s_i / sqrt(n)),
  m_i and s_i the mean and sd over the window of p_k = g_{a,k,i} g_{b,k,i},
  g_a and g_b two independent unbiased estimates of grad U at draw k.

  Why the mean: integrating by parts, E_pi[(d_i U)^2] = E_pi[d_i^2 U], for
  a Gaussian posterior of precision P exactly P_ii, so 1 / E[(d_i U)^2] is
  the variance of theta_i given the other coordinates (the marginal one
  where the posterior is uncorrelated, below it otherwise). Independent
  noises give E[g_a g_b | theta] = (d_i U)^2 with no noise term; one
  minibatch gradient squared (RMSprop's statistic) would add its variance,
  about N / n times the data's precision near the mode.

  Why the bound: at draws near a mode (a warm-up from an optimiser's
  point) d_i U is small and minibatch noise decides the products' mean;
  1 / mean was <= 0 or as large as the noise made it (the AMAGOLD paper's
  MLP: half the weights kept M^{-1} = 1, the rest up to 4e10). As
  E[g_a g_b] >= 0 the mean is clipped at 0, then read 2 standard errors
  up: an unresolved coordinate gets sqrt(n) / (4 s) to sqrt(n) / (2 s), a
  variance the noise has not ruled out; a resolved one loses 1 + 2 (s / m)
  / sqrt(n), s / m = sqrt(2 + 2 r + r^2) for noise of variance r P_ii
  (0.94x at r = 0, n = 2,000; 0.50x at r = 10, n = 500; autocorrelated
  draws make it less conservative than nominal). It cannot mark a small
  *exact* gradient as unresolved. With exact gradients on a Gaussian v_i
  is off by a factor of relative sd sqrt(2 / n_eff). Products all 0 give
  0: "not estimated", the previous M^{-1} kept (`regularized_variance`).
  """
  n = window.count

  def variance(s1, s2):
    mean = s1 / n
    sd = tf.sqrt(tf.maximum(s2 / n - tf.square(mean), 0.))
    bound = tf.maximum(mean, 0.) + GRADIENT_BOUND_SDS * sd / tf.sqrt(n)
    return tf.math.divide_no_nan(tf.ones_like(bound), bound)
  return [variance(a, b) for a, b in zip(window.sum, window.sum_of_squares)]


def init(state_parts, step_size, batch_ndims, inverse_mass=None,
         adapt_mass=True):
  """The adaptation's state at the start: dual averaging at `step_size`,
  an empty window (none without `adapt_mass`), M^{-1} = `inverse_mass`
  (default ones, shaped like a chain's parts)."""
  dtype = state_parts[0].dtype
  if inverse_mass is None:
    inverse_mass = [tf.ones(p.shape[batch_ndims:], dtype)
                    for p in state_parts]
  return WindowAdaptationState(
      dual_averaging_init(tf.math.log(tf.cast(step_size, dtype))),
      begin_window(state_parts, batch_ndims) if adapt_mass else None,
      list(inverse_mass))


def update(state, state_parts, log_accept_ratio, target_accept_prob,
           batch_ndims, gradients=None):
  """After a test: the step size moved towards `target_accept_prob` and
  the chain's new draws `state_parts` added to the window (or, given
  `gradients`, a pair of two independent estimates of grad U at them,
  `gradient_window_update`'s).

  Returns:
    (the new state, the test's acceptance probability).
  """
  accept = acceptance_probability(log_accept_ratio)
  window = state.window
  if window and gradients is not None:
    window = gradient_window_update(window, *gradients, batch_ndims)
  elif window:  # None or () without mass adaptation.
    window = window_update(window, state_parts, batch_ndims)
  return state._replace(
      dual_averaging=dual_averaging_update(state.dual_averaging, accept,
                                           target_accept_prob),
      window=window), accept


def _select(flag, new, old):
  if isinstance(flag, (bool, np.bool_)):
    return new if flag else old
  return tf.nest.map_structure(
      lambda a, b: tf.where(flag, tf.cast(a, b.dtype), b), new, old)


def end_window(state, variance, set_mass, restart):
  """At a window's end. Where `set_mass` (a slow window ended): M^{-1}
  becomes the window's `variance` (`window_variance`) regularised relative
  to its own scale (`regularized_variance`, or `regularized_covariance` for
  a dense window; n = the window's draws, a coordinate that never moved
  keeping its M^{-1}). Where `restart`:
  dual averaging starts again from the averaged step size (Stan restarts
  after the first window and after each new mass). The flags are Python
  bools or boolean scalar tensors."""
  if set_mass is not False:
    count = state.window.count
    dense = [_is_dense(s, v) for v, s in zip(variance, state.window.sum)]
    if all(dense):
      new = [regularized_low_rank(v, count, m[1].shape[-1], m)
             if isinstance(m, tuple) else regularized_covariance(v, count, m)
             for v, m in zip(variance, state.inverse_mass)]
    else:
      new = regularized_variance(list(variance), count,
                                 list(state.inverse_mass))
    state = state._replace(inverse_mass=_select(
        set_mass, new, state.inverse_mass))
  if restart is not False:
    state = state._replace(dual_averaging=_select(
        restart, dual_averaging_init(state.dual_averaging.log_averaging_step),
        state.dual_averaging))
  return state


def final(state):
  """(step size, M^{-1}) tuned: the averaged step size of the dual
  averaging and the last slow window's mass."""
  return (tf.exp(state.dual_averaging.log_averaging_step),
          state.inverse_mass)
