"""Where `tfp_sgmcmc.sample` starts and what it samples: the model as a
target, each chain's own minibatches, control variates where they pay, and
the chains' starting states.

* **Start.** A minibatch target with an exact energy: around the mode
  (`find_mode`, then up to `FULL_HESSIAN_MAX` coordinates Newton steps:
  `newton_mode`), each chain at mode + s * z, z ~ N(0, I), s the Laplace sds
  (the inverse Hessian's diagonal where the state has at most
  `FULL_HESSIAN_MAX` coordinates, else a lower bound of 1 / sqrt of the
  Hessian's diagonal from Rademacher probes: `laplace_scale`). Elsewhere
  as Stan does: uniform(-2, 2) in the unconstrained space.
* **Full batch on a small data set.** An `InMemoryTarget` with minibatches
  (or a `ControlVariateTarget` on one) of at most `FULL_BATCH_MAX_EXAMPLES`
  examples is sampled with full-batch gradients (`with_full_batch`): there
  a full-data gradient costs about what a minibatch one does, while the
  minibatch noise, even through control variates, cuts the step size and
  the ESS several-fold. Minibatches pay only at large N.
* **Control variates** (`ControlVariateTarget` around the mode) when the
  minibatch covers at most 1 / `CONTROL_VARIATE_MIN_RATIO` of the data: the
  minibatch gradient's noise variance, in units of the posterior's
  curvature, grows as N / n, and around the mode control variates remove
  most of it for two minibatch gradients per step instead of one.
* **Independent chains.** An `InMemoryTarget` (or a `ControlVariateTarget`
  on one) whose chains share each step's minibatch is rebuilt with
  `with_independent_minibatches`; other targets are kept, and the report
  says so.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.targets.base import MinibatchTarget
from tfp_sgmcmc.targets.in_memory import InMemoryTarget
from tfp_sgmcmc.targets.joint import JointDistributionTarget
from tfp_sgmcmc.targets.log_prob import LogProbFnTarget
from tfp_sgmcmc.targets.wrappers import ControlVariateTarget, find_mode

__all__ = ["as_target", "independent", "use_control_variates", "full_batch",
           "laplace_scale", "newton_mode", "initial_states", "is_minibatch",
           "CONTROL_VARIATE_MIN_RATIO", "FULL_HESSIAN_MAX",
           "FULL_BATCH_MAX_EXAMPLES"]

tfd = tfp.distributions

CONTROL_VARIATE_MIN_RATIO = 10.
# The largest data set (N examples) that `sample` samples with full-batch
# gradients when the target has minibatches. Measured on a logistic
# regression (d = 25, minibatches of 64 through control variates, sample's
# defaults, 4 chains): the full batch's smallest ESS per draw was 6-8x the
# minibatches' (800 against 100-140 of 4,000 at N = 2,000, 5,000 and
# 20,000, with R-hat 1.02 against 1.09-1.11), while an AMAGOLD trajectory on
# the full data cost 2.5x one on the minibatches at N = 1,000, 4.5x at
# 5,000 and 9x at 20,000. ESS per unit time breaks even near N = 20,000;
# the threshold is half that, as a full-data gradient's cost grows with N
# faster for a model dearer per example than this one, where the fixed
# cost of a step weighs less.
FULL_BATCH_MAX_EXAMPLES = 10_000
FULL_HESSIAN_MAX = 200


def as_target(model, target_log_prob_fn, observed, covariates, batch_size):
  """The model as a `tfp_sgmcmc` target."""
  if target_log_prob_fn is not None:
    if model is not None:
      raise ValueError("give the model once: `target` or "
                       "`target_log_prob_fn`, not both.")
    return LogProbFnTarget(target_log_prob_fn)
  if isinstance(model, MinibatchTarget):
    if observed is not None or covariates is not None:
      raise ValueError("`observed` and `covariates` go with a "
                       "JointDistribution; `target` is already a "
                       f"{type(model).__name__}.")
    return model
  if isinstance(model, tfd.JointDistribution) or (
      callable(model) and observed is not None):
    return JointDistributionTarget(model, observed=observed,
                                   covariates=covariates,
                                   batch_size=batch_size)
  raise TypeError(
      "`target` must be a tfp_sgmcmc target (e.g. InMemoryTarget), a "
      "tfd.JointDistribution (with `observed`, or pinned), or a model "
      "function with `observed`; for a log density pass "
      f"`target_log_prob_fn=`. Got {model!r:.100}.")


def is_minibatch(target):
  """Whether `target`'s gradients come from minibatches."""
  base = (target.base_target if isinstance(target, ControlVariateTarget)
          else target)
  return (isinstance(base, InMemoryTarget) and not base.is_full_batch) or (
      not isinstance(base, (InMemoryTarget, LogProbFnTarget)) and
      base.minibatches_from_seed is not None)


def _in_memory_base(target):
  """The `InMemoryTarget` under `target` (itself, or a
  `ControlVariateTarget`'s base), or None."""
  base = (target.base_target if isinstance(target, ControlVariateTarget)
          else target)
  return base if isinstance(base, InMemoryTarget) else None


def full_batch(target, choice):
  """(target, note): `target` with full-batch gradients where `choice` is
  True, or None and the data set has at most `FULL_BATCH_MAX_EXAMPLES`
  examples; `note` says what was done and why (None: `target` kept as it
  is, with nothing to say). A `ControlVariateTarget` is replaced by its
  base's full batch: with exact gradients there is no noise to remove."""
  if choice is not None and not isinstance(choice, (bool, np.bool_)):
    raise TypeError(f"`full_batch` must be None (the rule), True or False; "
                    f"got {choice!r}.")
  base = _in_memory_base(target)
  if choice is False:
    return target, None
  if base is None:
    if choice:
      raise ValueError(
          f"`full_batch=True` needs an InMemoryTarget (or a "
          f"ControlVariateTarget on one), whose data are in memory; got a "
          f"{type(target).__name__}. Use full_batch=None or False.")
    return target, None
  if base.is_full_batch:
    return target, None
  n = base.num_examples
  if choice:
    return base.with_full_batch(), (
        f"full batch (full_batch=True; N = {n:,})")
  if n <= FULL_BATCH_MAX_EXAMPLES:
    return base.with_full_batch(), (
        f"full batch: N = {n:,} <= {FULL_BATCH_MAX_EXAMPLES:,}, where a "
        "full-data gradient costs about a minibatch's (full_batch=False "
        "keeps the minibatches)")
  return target, None


def independent(target, parameter_shapes):
  """(target, note): `target` with one minibatch per chain where it can be
  rebuilt so; `note` says what the chains share."""
  if isinstance(target, ControlVariateTarget):
    base, note = independent(target.base_target, parameter_shapes)
    if base is not target.base_target:
      return ControlVariateTarget(base, target.centre), note
    return target, note
  if isinstance(target, InMemoryTarget):
    if target.is_full_batch:
      return target, "full batch (no minibatch noise)"
    if target.independent_minibatches:
      return target, "independent minibatches"
    try:
      rebuilt = target.with_independent_minibatches(parameter_shapes)
    except ValueError as e:
      return target, f"SHARED minibatches: {e}"
    return rebuilt, "independent minibatches"
  if not is_minibatch(target):
    return target, "exact gradients (no minibatch noise)"
  return target, (
      f"SHARED minibatches: a {type(target).__name__} cannot give each chain "
      "its own, so R-hat and cross-chain ESS are optimistic")


def use_control_variates(target, control_variates):
  """Whether to sample on `ControlVariateTarget` around the mode."""
  if control_variates is not None:
    return bool(control_variates)
  if isinstance(target, ControlVariateTarget) or not target.has_exact_energy:
    return False
  if not isinstance(target, InMemoryTarget) or target.is_full_batch:
    return False
  return target.num_examples >= CONTROL_VARIATE_MIN_RATIO * target.batch_size


def _flat_energy(target, structure):
  shapes = [p.shape for p in tf.nest.flatten(structure)]
  sizes = [int(np.prod(s)) for s in shapes]

  def energy(x):
    parts = tf.split(x, sizes)
    parts = [tf.reshape(p, s) for p, s in zip(parts, shapes)]
    return target.energy(tf.nest.pack_sequence_as(structure, parts))
  return energy


def _hessian_vector_product(target, mode):
  """(x, hvp, gradient, energy): `mode` flattened to one vector x, and the
  exact energy's Hessian-vector product, gradient and value at a vector
  like x (each one pass over the data)."""
  parts = tf.nest.flatten(mode)
  x = tf.concat([tf.reshape(p, [-1]) for p in parts], 0)
  energy = _flat_energy(target, mode)

  @tf.function(autograph=False)
  def hvp(point, v):
    with tf.GradientTape() as outer:
      outer.watch(point)
      with tf.GradientTape() as inner:
        inner.watch(point)
        u = energy(point)
      g = inner.gradient(u, point)
      gv = tf.reduce_sum(g * v)
    return outer.gradient(gv, point)

  @tf.function(autograph=False)
  def energy_and_gradient(point):
    with tf.GradientTape() as tape:
      tape.watch(point)
      u = energy(point)
    return u, tape.gradient(u, point)
  return x, hvp, energy_and_gradient


def _full_hessian(hvp, x):
  """The Hessian at x (float64, symmetrised), one product per coordinate."""
  dim = int(x.shape[0])
  hessian = np.stack([hvp(x, tf.one_hot(i, dim, dtype=x.dtype)).numpy()
                      for i in range(dim)]).astype(np.float64)
  return 0.5 * (hessian + hessian.T)


def _unflatten(vector, mode):
  parts = tf.nest.flatten(mode)
  sizes = [int(np.prod(p.shape)) for p in parts]
  pieces = np.split(np.asarray(vector), np.cumsum(sizes)[:-1])
  return tf.nest.pack_sequence_as(mode, [
      tf.constant(v.reshape(p.shape), p.dtype) for v, p in zip(pieces, parts)])


def _solve(factor, v):
  """H^-1 v from the Cholesky factor L of H = L L'."""
  return np.linalg.solve(factor.T, np.linalg.solve(factor, v))


def newton_mode(target, mode, max_hessians=4, max_steps=25,
                tolerance=1e-4):
  """(mode, Hessian, Newton steps taken): `mode` (one chain's state, at
  most `FULL_HESSIAN_MAX` coordinates) refined by Newton steps on the exact
  energy, x <- x - t H^-1 g, with t halved until the energy falls.

  Adam moves each coordinate by at most its learning rate per step, so
  `find_mode`'s 2,000 steps at 0.01 cannot reach a coefficient of 100 (a
  feature in small units); Newton's step is scale-free, exact on a Gaussian
  posterior and quadratic near a log-concave one's mode. A Hessian (one
  product per coordinate, each a pass over the data) is kept while its
  steps lower the energy, each step then costing a gradient, and computed
  anew when a step fails, at most `max_hessians` times. It stops when the
  Newton decrement g' H^-1 g, the step's squared length in posterior sds,
  is below `tolerance`, and at once where the Hessian is not positive
  definite. The Hessian returned is recomputed at the mode only where the
  gradients seen along the steps show it changed by more than 10% (None
  where it is not positive definite)."""
  x, hvp, energy_and_gradient = _hessian_vector_product(target, mode)

  def value_and_gradient(point):
    u, g = energy_and_gradient(point)
    return float(u), np.asarray(g, np.float64)

  steps = 0
  for _ in range(max_hessians):
    hessian, at = _full_hessian(hvp, x), x.numpy().astype(np.float64)
    try:
      factor = np.linalg.cholesky(hessian)
    except np.linalg.LinAlgError:
      return _unflatten(x, mode), None, steps
    u, g = value_and_gradient(x)
    g_at, moved = g, False
    for _ in range(max_steps):
      delta = _solve(factor, g)
      if g @ delta < tolerance:
        break
      for t in 0.5 ** np.arange(12):
        trial = tf.constant(x.numpy() - t * delta, x.dtype)
        u_trial, g_trial = value_and_gradient(trial)
        if u_trial < u:
          x, u, g, steps, moved = trial, u_trial, g_trial, steps + 1, True
          break
      else:
        break  # No step along the Newton direction lowers the energy.
    if not moved or g @ _solve(factor, g) < tolerance:
      break
  # The secant check: along the steps the gradient changed by H (x - at)
  # if H held; a residual above 10% of it (in the H^-1 norm) means the
  # curvature changed, and the Laplace sds need the Hessian at the mode.
  shift = x.numpy().astype(np.float64) - at
  residual = g - g_at - hessian @ shift
  if residual @ _solve(factor, residual) > 0.01 * (shift @ hessian @ shift):
    hessian = _full_hessian(hvp, x)
    try:
      np.linalg.cholesky(hessian)
    except np.linalg.LinAlgError:
      hessian = None
  return _unflatten(x, mode), hessian, steps


def laplace_scale(target, mode, seed, num_probes=16, hessian=None):
  """Per coordinate of `mode` (one chain's state), the Laplace sd: sqrt of
  the inverse Hessian's diagonal (<= `FULL_HESSIAN_MAX` coordinates; the
  one `newton_mode` returns when given), else (H^2)_ii^(-1/4) from
  Rademacher probes s, E[(H s)_i^2] = (H^2)_ii: at most the conditional sd
  1 / sqrt(H_ii), itself below the marginal one, so the chains are never
  started wider than the posterior; equal to it where H is diagonal. Zero
  curvature gives sd 1."""
  x, hvp, _ = _hessian_vector_product(target, mode)
  dtype = x.dtype
  dim = int(x.shape[0])
  if dim <= FULL_HESSIAN_MAX:
    hessian = _full_hessian(hvp, x) if hessian is None else hessian
    try:
      np.linalg.cholesky(hessian)
      variance = np.diag(np.linalg.inv(hessian))
    except np.linalg.LinAlgError:
      diag = np.diag(hessian)
      variance = np.where(diag > 0, 1. / np.where(diag > 0, diag, 1.), 1.)
  else:
    # E[(H s)_i^2] = (H^2)_ii >= H_ii^2 for Rademacher s: 1 / sqrt of its
    # root is at most the conditional sd 1 / sqrt(H_ii), never above the
    # marginal one, and a mean of squares. The unbiased s_i (H s)_i has a
    # variance of sum_j H_ij^2 over the probes: where the coordinates are
    # correlated it came out non-positive (taken as sd 1) or up to 190x the
    # conditional sd, and chains started 100 sds out did not arrive.
    signs = tfp.random.rademacher([num_probes, dim], dtype=dtype,
                                  seed=tfp.random.sanitize_seed(seed))
    squares = np.mean([hvp(x, s).numpy().astype(np.float64)**2
                       for s in signs], 0)
    variance = np.where(squares > 0, 1. / np.sqrt(
        np.where(squares > 0, squares, 1.)), 1.)
  return _unflatten(np.sqrt(variance).astype(dtype.as_numpy_dtype), mode)


def initial_states(target, template, num_chains, seed, num_mode_steps,
                   learning_rate):
  """(states with a leading chain axis, mode or None, Laplace sd or None,
  how the start was chosen)."""
  mode_seed, scale_seed, draw_seed = tfp.random.split_seed(seed, 3)
  parts = tf.nest.flatten(template)
  if is_minibatch(target) and target.has_exact_energy:
    mode = find_mode(target, template, num_steps=num_mode_steps,
                     learning_rate=learning_rate, seed=mode_seed)
    hessian, newton = None, ""
    if sum(int(np.prod(p.shape)) for p in parts) <= FULL_HESSIAN_MAX:
      mode, hessian, steps = newton_mode(target, mode)
      newton = (f" and {steps} Newton step{'s' * (steps > 1)}" if steps
                else "")
    scale = laplace_scale(target, mode, scale_seed, hessian=hessian)
    seeds = tfp.random.split_seed(draw_seed, len(parts))
    states = [m[None] + s[None] * tf.random.stateless_normal(
        [num_chains] + m.shape.as_list(), sd, dtype=m.dtype)
              for m, s, sd in zip(tf.nest.flatten(mode),
                                  tf.nest.flatten(scale), seeds)]
    how = (f"around the mode (find_mode, {num_mode_steps} Adam steps"
           f"{newton}), dispersed by the Laplace sds")
    return tf.nest.pack_sequence_as(template, states), mode, scale, how
  seeds = tfp.random.split_seed(draw_seed, len(parts))
  states = [tf.random.stateless_uniform(
      [num_chains] + p.shape.as_list(), sd, -2., 2., dtype=p.dtype)
            for p, sd in zip(parts, seeds)]
  return (tf.nest.pack_sequence_as(template, states), None, None,
          "uniform(-2, 2) in the unconstrained space (as Stan)")
