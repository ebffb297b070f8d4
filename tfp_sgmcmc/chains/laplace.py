"""The mode of a target's exact energy by Newton's method, and the Laplace
approximation around it (its sds and covariance): where `tfp_sgmcmc.sample`
starts its chains (`chains.start`).

Each Hessian is `full_hessian`: Hessian-vector products with the rows of
the identity, `PRODUCTS_PER_PASS` in one pass over the data, up to
`FULL_HESSIAN_MAX` coordinates; beyond it `laplace_scale` bounds the sds
from Rademacher probes.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.targets import dataset

__all__ = ["newton_mode", "laplace_scale", "laplace_covariance",
           "hessian_products", "full_hessian", "FULL_HESSIAN_MAX",
           "PRODUCTS_PER_PASS", "ROUNDED_DECREMENT"]

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


def _unflattener(structure):
  """x [dim], or [chains..., dim] for several points -> `structure`."""
  shapes = [p.shape for p in tf.nest.flatten(structure)]
  sizes = [int(np.prod(s)) for s in shapes]

  def unflatten(x):
    parts = tf.split(x, sizes, axis=-1)
    return tf.nest.pack_sequence_as(structure, [
        tf.reshape(p, x.shape[:-1].concatenate(s))
        for p, s in zip(parts, shapes)])
  return unflatten


# Hessian-vector products computed together in one pass over the data
# (`tf.vectorized_map`): a pass's cost is mostly reading the data, so a
# block of products costs a few single ones, while the memory of a pass
# grows with the block.
PRODUCTS_PER_PASS = 32


def _flat(state):
  """One chain's state as one vector."""
  return tf.concat([tf.reshape(p, [-1]) for p in tf.nest.flatten(state)], 0)


def hessian_products(target, structure, jit_compile=False):
  """(hvps, energy_and_gradient) of `target`'s exact energy at a vector
  like `_flat(structure)`: the Hessian-vector products with each row of a
  matrix [k, dim] (one pass over the data, vectorised over the rows; three
  for a stream, `dataset.hessian_vector_products`), and
  the energy's value and gradient (one pass). Built once per start and
  shared, so that each is traced once. With `jit_compile` (never for a
  stream, whose pipeline runs on the host) both are compiled by XLA, which
  gives the same bits at every call; in a TensorFlow graph (with
  grappler's constant folding) the gradient of an energy written out in
  several chunks changed in its last bits from one tracing to the next."""
  unflatten = _unflattener(structure)
  energy = lambda x: target.energy(unflatten(x))
  streamed = dataset.reads_pipelines(target)

  def hvp(point, v):
    with tf.GradientTape() as outer:
      outer.watch(point)
      with tf.GradientTape() as inner:
        inner.watch(point)
        u = energy(point)
      g = inner.gradient(u, point)
      gv = tf.reduce_sum(g * v)
    return outer.gradient(gv, point)

  @tf.function(autograph=False, jit_compile=jit_compile and not streamed)
  def hvps(point, vectors):
    if streamed:
      return dataset.hessian_vector_products(energy, point, vectors)
    return tf.vectorized_map(lambda v: hvp(point, v), vectors)

  @tf.function(autograph=False, jit_compile=jit_compile and not streamed)
  def energy_and_gradient(point):  # A stream's from one pass.
    u, g = target.exact_energy_and_gradient(unflatten(point))
    return u, _flat(g)
  return hvps, energy_and_gradient


def full_hessian(hvps, x, energy_and_gradient=None):
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
  returned is then None unless positive definite). The Hessian returned
  is the one at the mode."""
  hvps, energy_and_gradient = products or hessian_products(target, start)
  x = _flat(start)
  # Energy differences below this are float rounding of a sum over N.
  rounding = 16. * np.finfo(x.dtype.as_numpy_dtype).eps

  def value_and_gradient(point):
    u, g = energy_and_gradient(point)
    return float(u), np.asarray(g, np.float64)

  u, g = value_and_gradient(x)
  positive = None
  for steps in range(max_steps + 1):
    hessian = full_hessian(hvps, x, energy_and_gradient)
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
    hvps, energy_and_gradient = products or hessian_products(target, mode)
  if dim <= FULL_HESSIAN_MAX:
    hessian = (full_hessian(hvps, x, energy_and_gradient) if hessian is None
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
