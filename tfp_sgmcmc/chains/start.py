"""Where `tfp_sgmcmc.sample` starts and what it samples: the model as a
target, each chain's own minibatches, control variates where they pay, and
the chains' starting states.

* **Start.** A minibatch target with an exact energy: around the mode
  (Newton's method, `newton_mode`, up to `FULL_HESSIAN_MAX` coordinates;
  `find_mode`'s Adam beyond, or where Newton's method stops short), each
  chain at mode + s * z, z ~ N(0, I), s the Laplace sds
  (the inverse Hessian's diagonal where the state has at most
  `FULL_HESSIAN_MAX` coordinates, else a lower bound of 1 / sqrt of the
  Hessian's diagonal from Rademacher probes: `laplace_scale`). Elsewhere
  as Stan does: uniform(-2, 2) in the unconstrained space.
* **Full batch on a small data set.** An `InMemoryTarget` (or a
  `DatasetTarget` with a `full_dataset`, or a `ControlVariateTarget` on
  either) of at most `FULL_BATCH_MAX_EXAMPLES` examples is sampled with
  full-batch gradients (`with_full_batch`): there a full-data gradient
  costs about what a minibatch one does, while the minibatch noise, even
  through control variates, cuts the step size and the ESS several-fold.
* **Control variates** (`ControlVariateTarget` around the mode) when the
  kernel's seed draws the minibatch (not a `DatasetTarget`'s pipeline) and
  it covers at most 1 / `CONTROL_VARIATE_MIN_RATIO` of the data: the
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

from tfp_sgmcmc.chains import rounding as rounding_lib
from tfp_sgmcmc.chains.model_target import as_target
from tfp_sgmcmc.chains.uniform_start import uniform_states
from tfp_sgmcmc.targets import dataset
from tfp_sgmcmc.targets.in_memory import InMemoryTarget
from tfp_sgmcmc.targets.log_prob import LogProbFnTarget, is_full_batch
from tfp_sgmcmc.targets.wrappers import ControlVariateTarget, find_mode

__all__ = ["as_target", "independent", "use_control_variates", "full_batch",
           "laplace_scale", "newton_mode", "initial_states", "is_minibatch",
           "CONTROL_VARIATE_MIN_RATIO", "FULL_HESSIAN_MAX",
           "FULL_BATCH_MAX_EXAMPLES", "MINIBATCH_MIN_STEP_SIZE",
           "full_batch_for_noise"]


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
# Beyond it, the minibatches are kept unless the warm-up on them tunes
# AMAGOLD's step size (in the units its mass whitens) below this: the
# exact test then sees the gradient noise, whose energy grows with the
# dimension, and the chain barely moves. Logistic regression, N = 200,000,
# minibatches of 1,000 with control variates (benchmarks/one_call.py):
# d = 20 tuned 0.21-0.70 and mixed (R-hat <= 1.01); d = 200 tuned 0.023
# (R-hat 11) and d = 300 0.014 (R-hat 10), where full-data gradients from
# the same start tuned 0.37 and mixed (d = 200: R-hat 1.008, smallest ESS
# 1,899 of 4,000).
MINIBATCH_MIN_STEP_SIZE = 0.1
# The largest state (coordinates) whose full Hessian the start computes:
# Newton's mode and exact Laplace sds. It costs dim / PRODUCTS_PER_PASS
# passes over the data per Hessian, a few Hessians in all, where Adam's
# 2,000 steps cost 2,000 passes; beyond it, probes bound the sds.
FULL_HESSIAN_MAX = 1000

# Newton's method, out of steps or with no step that lowers the energy, has
# still converged where the energy's rounding hides the fall its step
# predicts and the step, in posterior sds, is shorter than the square root
# of this: a tenth of an sd, well within the Laplace sds the chains are
# dispersed by.
ROUNDED_DECREMENT = 1e-2


def is_minibatch(target):
  """Whether `target`'s gradients come from minibatches."""
  base = (target.base_target if isinstance(target, ControlVariateTarget)
          else target)
  return not is_full_batch(base) and (isinstance(base, InMemoryTarget) or (
      not isinstance(base, LogProbFnTarget) and
      base.minibatches_from_seed is not None))


def _data_base(target):
  """The target under `target` (itself, or a `ControlVariateTarget`'s
  base) that can give full-batch gradients (`with_full_batch`: an
  `InMemoryTarget`, or a `DatasetTarget` with a `full_dataset`), or None."""
  base = (target.base_target if isinstance(target, ControlVariateTarget)
          else target)
  return base if hasattr(base, "with_full_batch") and (
      base.has_exact_energy) else None


def full_batch(target, choice):
  """(target, note): `target` with full-batch gradients where `choice` is
  True, or None and the data set has at most `FULL_BATCH_MAX_EXAMPLES`
  examples; `note` says what was done and why (None: `target` kept as it
  is, with nothing to say). A `ControlVariateTarget` is replaced by its
  base's full batch: with exact gradients there is no noise to remove."""
  if choice is not None and not isinstance(choice, (bool, np.bool_)):
    raise TypeError(f"`full_batch` must be None (the rule), True or False; "
                    f"got {choice!r}.")
  base = _data_base(target)
  if choice is False:
    return target, None
  if base is None:
    if choice:
      raise ValueError(
          f"`full_batch=True` needs an InMemoryTarget or a DatasetTarget "
          f"with a `full_dataset` (or a ControlVariateTarget on one); got a "
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


def full_batch_for_noise(target, choice, step_size, state):
  """(target, note) where the minibatch warm-up (`choice`: `sample`'s
  `full_batch`) tuned `step_size` below `MINIBATCH_MIN_STEP_SIZE`, else
  None: the full batch, or `target` kept where the energy at `state` is
  rough (`rounding`): full-data gradients share that exact test."""
  base = _data_base(target)
  if (choice is not None or base is None or base.is_full_batch or
      step_size >= MINIBATCH_MIN_STEP_SIZE):
    return None
  draws = tf.nest.map_structure(lambda p: np.asarray(p)[None], state)
  rough = rounding_lib.rough_energy(target, draws)
  if rough is not None:
    return target, (
        f"minibatches kept: the warm-up's step size was {step_size:.3g} < "
        f"{MINIBATCH_MIN_STEP_SIZE:g}, held down by float rounding, not "
        "(only) by the gradient noise: "
        f"{rounding_lib.rough_energy_phrase(rough, draws)}; full-data "
        "gradients are tested on the same energy and would not free it: "
        f"{rounding_lib.FLOAT64_FIX}")
  return base.with_full_batch(), (
      f"full batch: on minibatches the warm-up's step size was "
      f"{step_size:.3g} < {MINIBATCH_MIN_STEP_SIZE:g}, held down by the "
      f"gradient noise, so full-data gradients (N = {base.num_examples:,};"
      " full_batch=False keeps the minibatches)")


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
  """Whether to sample on `ControlVariateTarget` around the mode: as asked,
  or (None) on minibatches that the kernel's seed draws (an
  `InMemoryTarget`, a `TFRecordTarget`), of at most 1 /
  `CONTROL_VARIATE_MIN_RATIO` of the data, from a target with an exact
  energy (for the mode). Not on a `DatasetTarget`'s pipeline, which
  chooses its own batches: AMAGOLD on them is not exact, so there `sample`
  moves to full-data gradients instead."""
  if control_variates is not None:
    return bool(control_variates)
  batch_size = getattr(target, "batch_size", None)
  if (isinstance(target, ControlVariateTarget) or batch_size is None or
      not target.has_exact_energy or not is_minibatch(target) or
      not target.minibatches_from_seed):
    return False
  return target.num_examples >= CONTROL_VARIATE_MIN_RATIO * batch_size


def _flat_energy(target, structure):
  shapes = [p.shape for p in tf.nest.flatten(structure)]
  sizes = [int(np.prod(s)) for s in shapes]

  def energy(x):
    parts = tf.split(x, sizes)
    parts = [tf.reshape(p, s) for p, s in zip(parts, shapes)]
    return target.energy(tf.nest.pack_sequence_as(structure, parts))
  return energy


# Hessian-vector products computed together in one pass over the data
# (`tf.vectorized_map`): a pass's cost is mostly reading the data, so a
# block of products costs a few single ones, while the memory of a pass
# grows with the block.
PRODUCTS_PER_PASS = 32


def _flat(state):
  """One chain's state as one vector."""
  return tf.concat([tf.reshape(p, [-1]) for p in tf.nest.flatten(state)], 0)


def _products(target, structure):
  """(hvps, energy_and_gradient) of `target`'s exact energy at a vector
  like `_flat(structure)`: the Hessian-vector products with each row of a
  matrix [k, dim] (one pass over the data, vectorised over the rows), and
  the energy's value and gradient (one pass). Built once per start and
  shared, so that each is traced once."""
  energy = _flat_energy(target, structure)

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
  def hvps(point, vectors):
    if dataset.reads_pipelines(target):
      return dataset.hessian_vector_products(energy, point, vectors)
    return tf.vectorized_map(lambda v: hvp(point, v), vectors)

  @tf.function(autograph=False)
  def energy_and_gradient(point):
    with tf.GradientTape() as tape:
      tape.watch(point)
      u = energy(point)
    return u, tape.gradient(u, point)
  return hvps, energy_and_gradient


def _full_hessian(hvps, x, energy_and_gradient=None):
  """The Hessian at x (float64, symmetrised), `PRODUCTS_PER_PASS` rows of
  the identity at a time (the last block padded, so one trace serves).

  Rows with a non-finite entry, where the gradient is finite, are central
  differences of the gradient (given `energy_and_gradient`): autodiff's
  second derivative can overflow where the energy's is finite (that of
  TFP's `Softplus`, the default bijector of a positive parameter, is NaN
  past 88 in float32), and Newton's method would stop there."""
  dim = int(x.shape[0])
  blocks = -(-dim // PRODUCTS_PER_PASS)
  basis = tf.eye(blocks * PRODUCTS_PER_PASS, dim, dtype=x.dtype)
  hessian = np.concatenate([
      hvps(x, basis[i * PRODUCTS_PER_PASS:(i + 1) * PRODUCTS_PER_PASS])
      .numpy() for i in range(blocks)])[:dim].astype(np.float64)
  bad = np.flatnonzero(~np.all(np.isfinite(hessian), axis=1))
  if bad.size and energy_and_gradient is not None:
    point = x.numpy()
    # The step that balances rounding (eps / h) against truncation (h^2).
    relative = np.cbrt(np.finfo(point.dtype).eps)
    for i in bad:
      h = relative * max(1., abs(float(point[i])))
      rows = [energy_and_gradient(tf.constant(point + sign * h * np.eye(
          1, dim, i, dtype=point.dtype)[0]))[1].numpy().astype(np.float64)
              for sign in (1., -1.)]
      hessian[i] = (rows[0] - rows[1]) / (2. * h)
    # A difference fills the row; its column's entries in the other rows
    # are the same second derivatives.
    hessian[:, bad] = hessian[bad].T
  return 0.5 * (hessian + hessian.T)


def _unflatten(vector, mode):
  parts = tf.nest.flatten(mode)
  sizes = [int(np.prod(p.shape)) for p in parts]
  pieces = np.split(np.asarray(vector), np.cumsum(sizes)[:-1])
  return tf.nest.pack_sequence_as(mode, [
      tf.constant(v.reshape(p.shape), p.dtype) for v, p in zip(pieces, parts)])


def newton_mode(target, start, max_steps=25, tolerance=1e-4,
                products=None):
  """(mode, Hessian, Newton steps taken, converged): the mode of `target`'s
  exact energy by Newton's method from `start` (one chain's state, at most
  `FULL_HESSIAN_MAX` coordinates): x <- x - t (H + lambda D)^-1 g, t halved
  until the energy falls (or, where float rounding hides a fall, while the
  energy still descends along the step).

  Newton's step is scale-free, exact on a Gaussian posterior and quadratic
  near a log-concave one's mode, where Adam moves each coordinate by at
  most its learning rate per step. Where H is not positive definite (an
  energy that is not log-concave there, e.g. a regression's noise scale
  far from its residuals) the step is Levenberg-Marquardt's: lambda D
  added, D = diag |H|, lambda raised tenfold until the sum is positive
  definite. It has converged when H itself is positive definite and the
  Newton decrement g' H^-1 g, the step's squared length in posterior sds,
  is below `tolerance`, or, where no step lowers the energy or the steps
  run out, below `ROUNDED_DECREMENT` with the fall the step predicts
  (half the decrement) under the energy's float rounding; it stops
  unconverged otherwise, or when the values are not finite (the Hessian
  returned is then None unless positive definite). The Hessian returned is the one at the
  mode."""
  hvps, energy_and_gradient = products or _products(target, start)
  x = _flat(start)
  # Energy differences below this are float rounding of a sum over N.
  rounding = 16. * np.finfo(x.dtype.as_numpy_dtype).eps

  def value_and_gradient(point):
    u, g = energy_and_gradient(point)
    return float(u), np.asarray(g, np.float64)

  u, g = value_and_gradient(x)
  positive = None
  for steps in range(max_steps + 1):
    hessian = _full_hessian(hvps, x, energy_and_gradient)
    if not (np.all(np.isfinite(hessian)) and np.all(np.isfinite(g))):
      return _unflatten(x, start), None, steps, False
    factor, damping = _damped_cholesky(hessian)
    if factor is None:
      return _unflatten(x, start), None, steps, False
    positive = hessian if damping == 0. else None
    delta = np.linalg.solve(factor.T, np.linalg.solve(factor, g))  # H^-1 g
    if positive is not None and g @ delta < tolerance:
      return _unflatten(x, start), hessian, steps, True
    if steps == max_steps:
      break
    for t in 0.5 ** np.arange(20):
      trial = tf.constant(x.numpy() - t * delta, x.dtype)
      u_trial, g_trial = value_and_gradient(trial)
      if u_trial < u or (u_trial <= u + rounding * abs(u) and
                         g_trial @ delta > 0):
        x, u, g = trial, u_trial, g_trial
        break
    else:
      break  # No step along this direction lowers the energy.
  # Out of steps, or no step lowers the energy: where H is positive
  # definite, the step is within a tenth of a posterior sd and the fall it
  # predicts, g' H^-1 g / 2, is below the energy's rounding, that is float
  # rounding in the gradient (float32 terms of large values), which moves
  # the steps at random: the mode as far as the dtype resolves it.
  return _unflatten(x, start), positive, steps, bool(
      positive is not None and g @ delta < ROUNDED_DECREMENT and
      g @ delta / 2 <= rounding * abs(u))


def _damped_cholesky(hessian):
  """(Cholesky factor of H + lambda D, lambda): lambda = 0 where H is
  positive definite, else the first of 1e-3, 1e-2, ..., 1e12 that makes it
  so, with D = diag |H| (1 where H_ii = 0): a damping in each coordinate's
  own units. (None, None) where none does."""
  scale = np.abs(np.diag(hessian))
  scale = np.diag(np.where(scale > 0, scale, 1.))
  for damping in [0.] + [10.**k for k in range(-3, 13)]:
    try:
      return np.linalg.cholesky(hessian + damping * scale), damping
    except np.linalg.LinAlgError:
      continue
  return None, None


def laplace_scale(target, mode, seed, num_probes=16, hessian=None,
                  products=None):
  """Per coordinate of `mode` (one chain's state), the Laplace sd: sqrt of
  the inverse Hessian's diagonal (<= `FULL_HESSIAN_MAX` coordinates; the
  one `newton_mode` returns when given), else (H^2)_ii^(-1/4) from
  Rademacher probes s, E[(H s)_i^2] = (H^2)_ii: at most the conditional sd
  1 / sqrt(H_ii), itself below the marginal one, so the chains are never
  started wider than the posterior; equal to it where H is diagonal. Zero
  curvature gives sd 1."""
  x = _flat(mode)
  dtype = x.dtype
  dim = int(x.shape[0])
  if hessian is None or dim > FULL_HESSIAN_MAX:
    hvps, energy_and_gradient = products or _products(target, mode)
  if dim <= FULL_HESSIAN_MAX:
    hessian = (_full_hessian(hvps, x, energy_and_gradient) if hessian is None
               else hessian)
    try:
      np.linalg.cholesky(hessian)
      variance = np.diag(np.linalg.inv(hessian))
    except np.linalg.LinAlgError:
      diag = np.diag(hessian)
      usable = np.isfinite(diag) & (diag > 0)
      variance = np.where(usable, 1. / np.where(usable, diag, 1.), 1.)
  else:
    # E[(H s)_i^2] = (H^2)_ii >= H_ii^2 for Rademacher s: 1 / sqrt of its
    # root is at most the conditional sd 1 / sqrt(H_ii), never above the
    # marginal one, and a mean of squares. The unbiased s_i (H s)_i has a
    # variance of sum_j H_ij^2 over the probes: where the coordinates are
    # correlated it came out non-positive (taken as sd 1) or up to 190x the
    # conditional sd, and chains started 100 sds out did not arrive.
    signs = tfp.random.rademacher([num_probes, dim], dtype=dtype,
                                  seed=tfp.random.sanitize_seed(seed))
    squares = np.mean(hvps(x, signs).numpy().astype(np.float64)**2, 0)
    variance = np.where(squares > 0, 1. / np.sqrt(
        np.where(squares > 0, squares, 1.)), 1.)
  # A Hessian with non-finite entries (an overflowing energy) gives no sd.
  variance = np.where(np.isfinite(variance) & (variance > 0), variance, 1.)
  return _unflatten(np.sqrt(variance).astype(dtype.as_numpy_dtype), mode)


def _mode(target, start, num_mode_steps, learning_rate, seed, products):
  """(mode, Hessian there or None, how it was found, whether Newton's
  method converged there: None beyond `FULL_HESSIAN_MAX`). Up to
  `FULL_HESSIAN_MAX` coordinates Newton's method from `start`, whose
  Hessians the Laplace sds need anyway and which converges in a few steps
  where Adam takes thousands (docs/warmup.md). Where it does not converge
  (no step lowers the energy, or not within its steps), and beyond
  `FULL_HESSIAN_MAX`, `find_mode`'s Adam, then Newton's method from Adam's
  point up to `FULL_HESSIAN_MAX`."""
  dim = sum(int(np.prod(p.shape)) for p in tf.nest.flatten(start))
  small = dim <= FULL_HESSIAN_MAX
  # A Newton step costs a Hessian, about `dim` gradients for a compute-bound
  # model: at most about Adam's `num_mode_steps` gradients, but at least 10
  # steps (from zeros it took 6-7 on logistic regressions of 300-500 dims).
  max_steps = int(min(25, max(10, num_mode_steps // max(dim, 1))))
  if small:
    mode, hessian, steps, converged = newton_mode(
        target, start, max_steps=max_steps, products=products)
    if converged:
      return mode, hessian, f"Newton's method, {_steps(steps)}", True
    start = mode  # Lower than the start, where Newton's method stopped.
  mode = find_mode(target, start, num_steps=num_mode_steps,
                   learning_rate=learning_rate, seed=seed)
  found = f"find_mode, {num_mode_steps} Adam steps"
  if not small:
    return mode, None, found, None
  mode, hessian, steps, converged = newton_mode(
      target, mode, max_steps=max_steps, products=products)
  return (mode, hessian, f"{found}, then Newton's method, {_steps(steps)}",
          converged)


def _steps(count):
  return f"{count} step{'' if count == 1 else 's'}"


def laplace_covariance(hessian, template):
  """H^{-1}, the Laplace approximation's covariance (float64 [d, d]), for a
  `template` of one vector whose Hessian at the mode is positive definite;
  else None."""
  if hessian is None or len(tf.nest.flatten(template)) != 1 or (
      tf.nest.flatten(template)[0].shape.rank != 1):
    return None
  try:
    factor = np.linalg.cholesky(hessian)
  except np.linalg.LinAlgError:
    return None
  inverse_factor = np.linalg.inv(factor)
  return inverse_factor.T @ inverse_factor


def initial_states(target, template, num_chains, seed, num_mode_steps,
                   learning_rate, around_mode=None):
  """(states with a leading chain axis, mode or None, Laplace sd or None,
  how the start was chosen, Laplace covariance or None:
  `laplace_covariance`). `around_mode` None: around the mode for a
  minibatch target with an exact energy, else uniform."""
  mode_seed, scale_seed, draw_seed = tfp.random.split_seed(seed, 3)
  parts = tf.nest.flatten(template)
  if around_mode is None:
    around_mode = is_minibatch(target) and target.has_exact_energy
  no_mode = ""
  if around_mode:
    # One set of traced products serves every Newton step and the sds.
    products = _products(target, template)
    mode, hessian, found, converged = _mode(
        target, template, num_mode_steps, learning_rate, mode_seed, products)
    if converged is False:
      # Still descending after Adam and Newton's method: the density may
      # grow without bound (a hierarchical scale going to 0 with its
      # effects), and chains started there never leave it.
      around_mode = False
      no_mode = (f"no mode ({found}, not converged: the density may grow "
                 "without bound, e.g. a hierarchical scale going to 0); ")
  if around_mode:
    scale = laplace_scale(target, mode, scale_seed, hessian=hessian,
                          products=products)
    seeds = tfp.random.split_seed(draw_seed, len(parts))
    states = [m[None] + s[None] * tf.random.stateless_normal(
        [num_chains] + m.shape.as_list(), sd, dtype=m.dtype)
              for m, s, sd in zip(tf.nest.flatten(mode),
                                  tf.nest.flatten(scale), seeds)]
    how = f"around the mode ({found}), dispersed by the Laplace sds"
    return (tf.nest.pack_sequence_as(template, states), mode, scale, how,
            laplace_covariance(hessian, template))
  states, redrawn = uniform_states(target, template, num_chains, draw_seed)
  again = (f"; {redrawn} of {num_chains} chains drawn again where the log "
           "density was not finite" if redrawn else "")
  return (states, None, None, f"{no_mode}uniform(-2, 2) in the "
          f"unconstrained space (as Stan{again})", None)
