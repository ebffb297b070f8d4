"""Pure update rules of the SG-MCMC samplers, one place for each equation.

Every function here maps a structure of tensors (one tensor or a list, as the
chain state) to a new structure, given the stochastic gradient grad U~ already
evaluated where the rule needs it. They know nothing of TFP kernel results or
Keras variables: the `tfp.mcmc` kernels and the Keras adapter both call them,
so the two front ends cannot disagree about the math.

Notation (Chen et al. 2014; Chen, Ding, Carin 2015): position theta, momentum
r (identity mass), step size h (epsilon), friction C (D in the splitting
paper), noise-model estimate B-hat, temperature T (T = 1 samples the
posterior; T < 1 a cold posterior proportional to exp(-U / T)).
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = [
    "derive_seeds",
    "walk_seed",
    "standard_normal_like",
    "langevin_step",
    "drift",
    "sghmc_euler_momentum",
    "sghmc_splitting_momentum",
    "amagold_momentum",
    "energy_accumulator_increment",
    "kinetic_energy",
    "sgnht_step",
    "rmsprop_preconditioner",
    "preconditioned_langevin_step",
]


# For TF's own stateless draws (a few scalars per step, the TFRecord and
# distributed per-shard indices): one explicit counter-based generator rather
# than "auto_select", whose choice may change between TF versions. The
# injected noise and InMemoryTarget's minibatch indices come from SplitMix64
# below. Integer draws (minibatch indices) agree between XLA and TF kernels;
# float draws do not (erfinv is computed differently), so a chain is
# reproducible from its seed within one compilation mode.
RNG_ALG = "philox"


def _map(fn, *structures):
  return tf.nest.map_structure(fn, *structures)


# Odd 32-bit constants (golden ratio, Weyl sequence) that salt a seed.
_SALTS = (0x9E3779B9, 0x7F4A7C15)


def derive_seeds(seed, n):
  """`n` seeds for separate draws made from one stateless `seed`.

  seed_i = seed XOR (i + 1) * salt, word by word: the integer fold-in that
  TFP uses to salt seeds (`samplers.fold_in`). Distinct seeds give unrelated
  streams (`tf.random.stateless_*` scramble a seed through Philox before
  use; `standard_normal_like` mixes it with SplitMix64's finaliser), while
  `tfp.random.split_seed` costs a random-number op of its own, which next to
  a small minibatch gradient is a visible part of a step (about 0.1-0.3 us of
  a 2 us step on Statlog Australian; benchmarks/overhead.py).

  Use it for seeds that are consumed by draws within one step, never to
  carry a seed from step to step (XOR with the same salt twice returns the
  seed): carried seeds go through `tfp.random.split_seed` or `walk_seed`.
  """
  return _salted(seed, n, _SALTS)


# A second family for seeds derived from an already derived seed (inside
# `barker_increment_like`): XOR-ing the same family twice would return the
# step's own seed (i * salt XOR i * salt = 0); between the two families no
# combination coincides (checked for up to 300 x 300 seeds).
_INNER_SALTS = (0x85EBCA6B, 0xC2B2AE35)


def _salted(seed, n, family):
  seed = tfp.random.sanitize_seed(seed)
  salts = [np.array([(i * a) % 2**32 for a in family], np.uint32)
           .view(np.int32) for i in range(1, n + 1)]
  return [tf.bitwise.bitwise_xor(seed, tf.constant(v)) for v in salts]


# The injected noise (every kernel's Gaussian draws) comes from SplitMix64
# (Steele, Lea & Flood 2014; passes BigCrush), used as a counter-based
# generator: word i of a draw is mix64(mix64(seed) + i * gamma), i = 1..n.
# On XLA:CPU, TF's Philox normals cost about 17 ns each (9 ns for the Philox
# bits, 8 for their conversion) and are the largest cost of a batched step
# beyond the gradient; SplitMix64 words plus the same inverse-CDF transform
# (sqrt(2) erfinv of a symmetric uniform) cost about 7 ns per normal, and all
# parts of a structure come from one flat draw (benchmarks/chains.py).
_GAMMA = 0x9E3779B97F4A7C15
_MIX = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)


def _mix64(z):
  shift = lambda x, k: tf.bitwise.right_shift(x, tf.constant(k, tf.uint64))
  z = tf.bitwise.bitwise_xor(z, shift(z, 30)) * tf.constant(_MIX[0], tf.uint64)
  z = tf.bitwise.bitwise_xor(z, shift(z, 27)) * tf.constant(_MIX[1], tf.uint64)
  return tf.bitwise.bitwise_xor(z, shift(z, 31))


def walk_seed(seed):
  """(next seed, this step's seed) of a seed carried through a loop, with no
  random-number op: SplitMix64 used as the generator it is, over the seed's
  64 bits (state += gamma; output mix64(state)).

  The step seeds of one walk are consecutive SplitMix64 outputs; walks from
  two starting seeds share a state only if the starts lie within a loop's
  length of gammas of each other (probability about T / 2^64 for T steps).
  Inside AMAGOLD's leapfrog loop it replaces a threefry split
  (`tfp.random.split_seed`), whose random-number op cost about 0.1 us of a
  3 us one-chain step (benchmarks/chains.py).
  """
  state = tf.bitcast(tfp.random.sanitize_seed(seed), tf.uint64) + tf.constant(
      _GAMMA, tf.uint64)
  return tf.bitcast(state, tf.int32), tf.bitcast(_mix64(state), tf.int32)


def _random_words(seed, n):
  """`n` uint64 words of the SplitMix64 stream keyed by the int32[2] seed
  (`n` a scalar int64 tensor). The key is mixed first, so seeds that differ
  in a few bits (`derive_seeds`) start unrelated streams."""
  key = tf.bitcast(tfp.random.sanitize_seed(seed), tf.uint64)
  i = tf.bitcast(tf.range(1, n + 1, dtype=tf.int64), tf.uint64)
  return _mix64(_mix64(key) + i * tf.constant(_GAMMA, tf.uint64))


def uniform_indices(seed, shape, maxval):
  """int32 indices uniform on [0, maxval), of `shape` (a list or an int32
  tensor), from one flat SplitMix64 draw: index = (w_hi * maxval) >> 32 for
  the high 32 bits w_hi of each word (Lemire's multiply-shift; each index
  has probability within maxval / 2^32 of 1 / maxval, as for TF's modulo
  reduction of 32 random bits).

  `InMemoryTarget`'s minibatch indices ([n] shared, or [chains, n] in one
  draw): on XLA:CPU TF's Philox integers cost about 20 ns each, more than the
  gather of the rows they index, and the Philox op's key setup was about a
  fifth of a one-chain gradient step on the N = 1e5 logistic regression
  (benchmarks/chains.py). Integer arithmetic only, so eager and XLA agree."""
  shape = tf.cast(shape, tf.int32) if tf.is_tensor(shape) else shape
  n = tf.reduce_prod(tf.cast(shape, tf.int64))
  words = _random_words(seed, n)
  hi = tf.bitwise.right_shift(words, tf.constant(32, tf.uint64))
  index = tf.bitwise.right_shift(hi * tf.constant(int(maxval), tf.uint64),
                                 tf.constant(32, tf.uint64))
  return tf.reshape(tf.cast(index, tf.int32), shape)


def _symmetric_grid(seed, n, dtype):
  """`n` odd integers j uniform in (-2^b, 2^b), and b: the draw
  u = j 2^-b is uniform on a grid symmetric about 0 in (-1, 1). float64
  (int64 j, b = 52) from 52 bits of a word; float32 and narrower types
  (int32 j, b = 23) from 23 bits of each half of a word."""
  n = tf.cast(n, tf.int64)
  if dtype == tf.float64:
    words = _random_words(seed, n)
    k = tf.bitcast(tf.bitwise.right_shift(words, tf.constant(12, tf.uint64)),
                   tf.int64)
    return 2 * k + (1 - 2**52), 52
  words = _random_words(seed, (n + 1) // 2)
  halves = tf.reshape(tf.bitcast(words, tf.uint32), [-1])[:n]
  k = tf.cast(tf.bitwise.right_shift(halves, tf.constant(9, tf.uint32)),
              tf.int32)
  return 2 * k + (1 - 2**23), 23


def _to_unit(j, b):
  """j 2^-b, exactly (|j| < 2^b fits the significand)."""
  return tf.cast(j, tf.float64 if b == 52 else tf.float32) * 2.**-b


def _symmetric_uniform(seed, n, dtype):
  """`n` draws, uniform on a grid symmetric about 0 in (-1, 1)
  (`_symmetric_grid`)."""
  return _to_unit(*_symmetric_grid(seed, n, dtype))


def _flat_draws(structure, seed, draw):
  """One flat draw per dtype for all parts of `structure`, split and
  reshaped into the parts. `draw(seed, n, dtype, one_reader)` -> n values
  (`one_reader`: one fusion reads the result, which is neither split into
  several parts nor read by `_computed_once`'s two readers).

  A draw that fills a part of two or more dimensions is first computed
  flat, into a buffer (`_computed_once`): fused into the consumer's loop
  over, e.g., a [64, 20] state, the transform ran in short rows that
  vectorise badly (5.97 against 4.17 us per SGLD step at [64, 20], one
  thread; a flat [79,510] state, where the extra pass only costs, is left
  fused)."""
  parts = tf.nest.flatten(structure)
  out = [None] * len(parts)
  dtypes = []
  for p in parts:
    if p.dtype not in dtypes:
      dtypes.append(p.dtype)
  for j, dtype in enumerate(dtypes):
    idx = [i for i, p in enumerate(parts) if p.dtype == dtype]
    sizes = [tf.size(parts[i], out_type=tf.int64) for i in idx]
    group_seed = seed if j == 0 else _salted(seed, j, _GROUP_SALTS)[-1]
    computed_flat = any(parts[i].shape.rank != 1 for i in idx)
    flat = tf.cast(draw(group_seed, tf.add_n(sizes), dtype,
                        one_reader=len(idx) == 1 or computed_flat), dtype)
    if computed_flat:
      flat = _computed_once(flat, group_seed, second_reader=True)
    pieces = [flat] if len(idx) == 1 else tf.split(flat, tf.stack(sizes))
    for i, piece in zip(idx, pieces):
      out[i] = tf.reshape(piece, tf.shape(parts[i]))
  return tf.nest.pack_sequence_as(structure, out)


# Salts for the seeds of a structure's second, third... dtype.
_GROUP_SALTS = (0x27D4EB2F, 0x165667B1)


def _normal(seed, n, dtype, one_reader=False):
  """sqrt(2) erfinv(u) for the symmetric uniform u = j 2^-b, computed as
  sqrt(2) erfinv(|u|) with the sign bit of u set into the result by integer
  ops on u's bits: the same values as the plain product (erfinv is odd),
  but the last floating-point op of a draw is no longer a product with a
  scalar. XLA's simplifier reassociates (z * sqrt(2)) * c into
  z * (sqrt(2) * c) when a consumer scales the draw by a scalar that is a
  constant in one compilation and a loop value in another, so the same seed
  gave draws 1 ulp apart in differently compiled loops (progress chunks
  against one `sample_chain`); no float rewrite crosses the bitcast. Every
  stage before erfinv is exact (integers, and j 2^-b).

  u is computed into a buffer of its own (`_computed_once`) before the
  transform reads it. Left to itself XLA:CPU fused the SplitMix64 words,
  u and the transform into one loop per consumer of the draw, and that loop
  ran several times slower than the same work as separate loops (4-6 ns
  against 2.6-3 ns per normal on this project's CPU, one thread). A draw
  split into several parts has several readers of u already; a draw with
  `one_reader` is given a second one."""
  j, b = _symmetric_grid(seed, n, dtype)
  u = _computed_once(_to_unit(j, b), seed, second_reader=one_reader)
  itype = _SAME_WIDTH_INT[u.dtype]
  magnitude = np.sqrt(2.).astype(u.dtype.as_numpy_dtype) * (
      tf.math.erfinv(tf.abs(u)))
  signed = tf.bitwise.bitwise_or(
      tf.bitcast(magnitude, itype),
      tf.bitwise.bitwise_and(tf.bitcast(u, itype), _sign_bit(itype)))
  return tf.bitcast(signed, u.dtype)


_SAME_WIDTH_INT = {tf.float16: tf.int16, tf.bfloat16: tf.int16,
                   tf.float32: tf.int32, tf.float64: tf.int64}


def _sign_bit(itype):
  return tf.constant(-2**(tf.as_dtype(itype).size * 8 - 1), itype)


def _computed_once(x, seed, second_reader=False):
  """x itself, computed once into a buffer that its readers share.

  x is divided by a 1 that XLA cannot prove is 1 (1 + 0 * b, b the low bit
  of a seed word: 0 or 1, so finite in every float type; the word itself
  overflows float16). XLA's fusion copies cheap elementwise ops
  into every fusion that reads them but not a float division, which counts
  as expensive; so x gets a buffer of its own as soon as two fusions read
  it. With `second_reader` one more reader is made: |x| of x's first
  element (a reduction over one element: a fusion of its own that reads
  almost nothing), whose sign bit (0) is or-ed into x by integer ops, so
  the values do not change. (Reducing all of |x| instead cost a pass over
  x: 215 against 146 us per SGLD step on a flat [79510] state.)"""
  bit = tf.cast(tf.bitwise.bitwise_and(tf.convert_to_tensor(seed)[..., 0], 1),
                x.dtype)
  x = x / (1. + 0. * bit)
  if not second_reader:
    return x
  itype = _SAME_WIDTH_INT[x.dtype]
  smallest = tf.reduce_min(tf.abs(x[:1]))
  return tf.bitcast(tf.bitwise.bitwise_or(
      tf.bitcast(x, itype),
      tf.bitwise.bitwise_and(tf.bitcast(smallest, itype), _sign_bit(itype))),
                    x.dtype)


def standard_normal_like(structure, seed):
  """Independent N(0, 1) draws shaped like `structure`, from a stateless seed.

  All parts of the same dtype come from one flat draw: SplitMix64 words
  keyed by `seed`, each turned into a uniform u on a symmetric grid in
  (-1, 1) and then into sqrt(2) erfinv(u) (the inverse-CDF transform XLA
  uses for its own normals; |z| <= 5.3 in float32, 8.1 in float64)."""
  return _flat_draws(structure, seed, _normal)


def _scale(x, dtype):
  """x in `dtype`; Python numbers are converted directly (a float64 state
  keeps full precision instead of passing through float32)."""
  if tf.is_tensor(x):
    return tf.cast(x, dtype)
  return tf.constant(np.asarray(x, tf.as_dtype(dtype).as_numpy_dtype))


def langevin_step(position, gradient, step_size, noise, temperature=1.):
  """SGLD (Welling & Teh 2011): one Euler-Maruyama step of Langevin dynamics.

      theta' = theta - h grad U~(theta) + sqrt(2 h T) xi,   xi ~ N(0, I).

  (Welling & Teh write the step as epsilon / 2 with noise N(0, epsilon); here
  h = epsilon / 2.)

  Args:
    position: theta, a structure of tensors.
    gradient: grad U~(theta), same structure.
    step_size: h, a scalar or a structure broadcastable against `position`.
    noise: standard-normal draws xi, same structure.
    temperature: T.
  """
  def step(theta, g, xi, h):
    h = _scale(h, theta.dtype)
    t = _scale(temperature, theta.dtype)
    return theta - h * g + tf.sqrt(2. * h * t) * xi
  return _map(step, position, gradient, noise,
              _broadcast_structure(step_size, position))


def drift(position, momentum, step_size):
  """The position flow of Hamiltonian dynamics: theta' = theta + h r."""
  return _map(lambda theta, r, h: theta + _scale(h, theta.dtype) * r,
              position, momentum, _broadcast_structure(step_size, position))


def sghmc_euler_momentum(momentum, gradient, step_size, friction, noise,
                         noise_estimate=0., temperature=1., refresh=None,
                         refresh_temperature=1.):
  """SGHMC momentum update, Euler form (Chen et al. 2014, Algorithm 2).

      r' = r - h grad U~(theta) - h C r + N(0, 2 (C T - B-hat) h),

  followed by `drift(theta, r', h)`. With C = B-hat = 0 it is naive SGHMC
  (stochastic-gradient HMC without friction or injected noise). In the
  SGD-with-momentum units v = h r, eta = h^2, alpha = h C, beta-hat = h B-hat
  the same step reads v' = v - eta grad U~ - alpha v + N(0, 2 (alpha -
  beta-hat) eta).

  `noise_estimate` B-hat is a scalar or a per-coordinate structure; where it
  exceeds C T the injected variance is clipped at zero.

  `refresh` (a boolean scalar tensor, or None for never) says that this
  step starts from a fresh momentum r ~ N(0, T0 I), T0 =
  `refresh_temperature`, instead of `momentum` (Algorithm 2's resampling).
  Euler's r enters r' only as (1 - h C) r, independent of the gradient and
  of the injected noise, so on such a step

      r' = -h grad U~(theta) + N(0, (1 - h C)^2 T0 + 2 (C T - B-hat) h)

  exactly in distribution: the fresh draw is folded into the step's one
  standard normal per coordinate, with no second draw and no branch.
  """
  def step(r, g, xi, b_hat, h):
    h = _scale(h, r.dtype)
    c = _scale(friction, r.dtype)
    t = _scale(temperature, r.dtype)
    variance = tf.maximum(2. * (c * t - _scale(b_hat, r.dtype)) * h, 0.)
    scale = tf.sqrt(variance)
    if refresh is not None:
      # Selects between scales, not a square root of a select: with
      # constant h, C and T both scales are constants and the select joins
      # the update's elementwise loop.
      decay = 1. - h * c
      scale = tf.where(refresh, tf.sqrt(
          variance + decay * decay * _scale(refresh_temperature, r.dtype)),
                       scale)
      r = tf.where(refresh, tf.zeros_like(r), r)
    return r - h * g - h * c * r + scale * xi
  b_hat = _broadcast_structure(noise_estimate, momentum)
  return _map(step, momentum, gradient, noise, b_hat,
              _broadcast_structure(step_size, momentum))


def sghmc_splitting_momentum(momentum, gradient, step_size, friction, noise,
                             noise_estimate=0., temperature=1.):
  """The B-O-B core of the symmetric splitting (ABOBA) integrator.

  Chen, Ding, Carin (2015), Section 4: with the half drifts
  theta1 = theta + r h/2 before and theta' = theta1 + r' h/2 after,

      r1 = exp(-C h / 2) r
      r2 = r1 - h grad U~(theta1) + N(0, 2 (C T - B-hat) h)
      r' = exp(-C h / 2) r2,

  where `gradient` is grad U~ at the half-drifted position theta1. The friction
  flow is solved exactly, which is why the scheme stays stable at step sizes
  where the Euler form explodes.
  """
  def step(r, g, xi, b_hat, h):
    h = _scale(h, r.dtype)
    c = _scale(friction, r.dtype)
    t = _scale(temperature, r.dtype)
    decay = tf.exp(-0.5 * c * h)
    variance = tf.maximum(2. * (c * t - _scale(b_hat, r.dtype)) * h, 0.)
    return decay * (decay * r - h * g + tf.sqrt(variance) * xi)
  b_hat = _broadcast_structure(noise_estimate, momentum)
  return _map(step, momentum, gradient, noise, b_hat,
              _broadcast_structure(step_size, momentum))


def _broadcast_structure(value, structure):
  """A scalar becomes one value per part; a list or tuple of one value per
  part (e.g. per-part step sizes) takes the structure of `structure`."""
  if not tf.nest.is_nested(value):
    return tf.nest.map_structure(lambda _: value, structure)
  if isinstance(value, (list, tuple)):
    return tf.nest.pack_sequence_as(structure, tf.nest.flatten(value))
  return value


def _sum_event(x, batch_ndims):
  """Sums `x` over its event axes, those after the first `batch_ndims`."""
  return tf.reduce_sum(x, axis=list(range(batch_ndims, x.shape.rank)))


def amagold_momentum(momentum, gradient, step_size, friction, noise,
                     momentum_std=1.):
  """AMAGOLD's stochastic leapfrog momentum update (Zhang et al. 2020).

  Algorithm 2, line 12, with step size epsilon, friction beta and momentum
  standard deviation sigma (mass sigma^2):

      r' = ((1 - eps beta) r - eps grad U~(theta) + eta) / (1 + eps beta),
      eta = sqrt(4 eps beta) sigma xi ~ N(0, 4 eps beta sigma^2),

  equivalently r' = r - eps grad U~ - eps beta (r + r') + eta, the
  time-symmetric form whose reverse move has a tractable density. With
  beta = 0 it is the leapfrog kick r' = r - eps grad U. In the SGD units of
  Appendix F (v = eps sigma^-2 r, b = eps beta, h = eps^2 sigma^-2) the same
  step reads v' = ((1 - b) v - h grad U~ + 2 sqrt(b h) xi) / (1 + b).

  Args:
    momentum: r_{t-1/2}, a structure of tensors.
    gradient: grad U~_t(theta_t), same structure.
    step_size: eps, a scalar or a tensor broadcastable against each part,
      or a list with one per part.
    friction: beta >= 0.
    noise: standard-normal draws xi, same structure as `momentum`.
    momentum_std: sigma > 0.
  """
  def step(r, g, xi, eps):
    eps = _scale(eps, r.dtype)
    a = eps * _scale(friction, r.dtype)
    sigma = _scale(momentum_std, r.dtype)
    eta = tf.sqrt(4. * a) * sigma * xi
    return ((1. - a) * r - eps * g + eta) / (1. + a)
  return _map(step, momentum, gradient, noise,
              _broadcast_structure(step_size, momentum))


def energy_accumulator_increment(gradient, momentum, new_momentum, step_size,
                                 momentum_std=1., batch_ndims=0):
  """AMAGOLD's energy-accumulator increment (Algorithm 2, line 13).

      rho_{t+1/2} - rho_{t-1/2}
          = 1/2 eps sigma^-2 grad U~_t(theta_t)^T (r_{t-1/2} + r_{t+1/2}),

  summed over every coordinate of every part, one value per chain. For one
  kick r -> r' (`amagold_momentum`), the log density of the momentum-flipped
  reverse move -r' -> -r over that of the forward move is K(r') - K(r) +
  increment, so over the T kicks of a proposal (theta, r) -> (theta*, r*)
  the log of eq. (6) of the paper is U(theta) - U(theta*) + rho: the kinetic
  terms cancel against those of pi(theta*, -r*) / pi(theta, r).

  Args:
    gradient: grad U~_t(theta_t), a structure of tensors.
    momentum: r_{t-1/2}, same structure.
    new_momentum: r_{t+1/2}, same structure.
    step_size: eps, a scalar or a tensor broadcastable against each part,
      or a list with one per part.
    momentum_std: sigma.
    batch_ndims: number of leading chain axes of each part; the others are
      summed over.

  Returns:
    A tensor of shape `batch_shape` (the first `batch_ndims` axes).
  """
  terms = _map(
      lambda g, r, r_new, eps: _sum_event(
          0.5 * _scale(eps, g.dtype) * g * (r + r_new)
          / tf.square(_scale(momentum_std, g.dtype)), batch_ndims),
      gradient, momentum, new_momentum,
      _broadcast_structure(step_size, gradient))
  return tf.add_n(tf.nest.flatten(terms))


def kinetic_energy(momentum, momentum_std=1., batch_ndims=0):
  """K(r) = |r|^2 / (2 sigma^2), one value per chain (mass sigma^2 I)."""
  terms = _map(
      lambda r: _sum_event(
          0.5 * tf.square(r) / tf.square(_scale(momentum_std, r.dtype)),
          batch_ndims),
      momentum)
  return tf.add_n(tf.nest.flatten(terms))


def sgnht_step(position, momentum, thermostat, gradient, step_size, noise,
               diffusion, temperature=1., event_ndims=None, refresh=None,
               refresh_temperature=1.):
  """One step of the SG Nose-Hoover thermostat (Ding et al. 2014, Alg. 2).

      r'      = r - h xi r - h grad U~(theta) + sqrt(2 A h T) z
      theta'  = theta + h r'
      xi'     = xi + h (r'^T r' / d - T)

  xi is one thermostat per chain (shape of the chains' batch), d the number
  of parameters of a chain, A the injected diffusion. The thermostat raises
  the friction while the kinetic energy per dimension exceeds T and lowers
  it otherwise, so it absorbs gradient noise of unknown size.

  `refresh` (a boolean scalar tensor, or None for never): the step starts
  from a fresh r ~ N(0, T0 I), T0 = `refresh_temperature`, instead of
  `momentum`. r enters r' only as (1 - h xi) r, so, as in
  `sghmc_euler_momentum`, the fresh draw is folded into the step's noise:
  r' = -h grad U~ + N(0, (1 - h xi)^2 T0 + 2 A h T) per chain.

  Args:
    position, momentum, gradient, noise: structures like the state.
    thermostat: xi, shape = the chains' batch shape.
    step_size: h.
    diffusion: A >= 0.
    temperature: T.
    event_ndims: per part, how many trailing axes are parameters (the rest
      are chain axes); default: all axes beyond the thermostat's rank.
  """
  parts_r = tf.nest.flatten(momentum)
  dtype = parts_r[0].dtype
  h = _scale(step_size, dtype)
  t = _scale(temperature, dtype)
  a = _scale(diffusion, dtype)
  batch_rank = thermostat.shape.rank

  def expand(x, part):
    return tf.reshape(x, tf.concat(
        [tf.shape(x), tf.ones([part.shape.rank - batch_rank], tf.int32)], 0))

  scale = tf.sqrt(2. * a * h * t)
  if refresh is not None:
    decay = 1. - h * thermostat
    # One scale per chain, selected: the kick stays one elementwise loop.
    scale = tf.where(refresh, tf.sqrt(
        decay * decay * _scale(refresh_temperature, dtype)
        + 2. * a * h * t), scale * tf.ones_like(thermostat))

  def kick(r, g, z):
    if refresh is not None:
      r = tf.where(refresh, tf.zeros_like(r), r)
      return r - h * expand(thermostat, r) * r - h * g + expand(scale, r) * z
    return r - h * expand(thermostat, r) * r - h * g + scale * z
  new_momentum = _map(kick, momentum, gradient, noise)
  new_position = drift(position, new_momentum, step_size)
  sq = tf.zeros_like(thermostat)
  dim = 0
  for r in tf.nest.flatten(new_momentum):
    axes = list(range(batch_rank, r.shape.rank))
    sq = sq + tf.reduce_sum(tf.square(r), axis=axes)
    dim += int(np.prod(r.shape[batch_rank:]))
  new_thermostat = thermostat + h * (sq / tf.cast(dim, dtype) - t)
  return new_position, new_momentum, new_thermostat


def rmsprop_preconditioner(second_moment, gradient, decay, num_examples,
                           regularizer):
  """pSGLD's diagonal preconditioner (Li et al. 2016).

      V' = alpha V + (1 - alpha) g_bar * g_bar,   g_bar = grad U~ / N
      G  = 1 / (lambda + sqrt(V'))

  Returns (V', G). Scaling the gradient by 1/N makes V independent of the
  data size, as in the paper.
  """
  def update(v, g):
    g_bar = g / tf.cast(num_examples, g.dtype)
    return _scale(decay, g.dtype) * v + (1. - _scale(decay, g.dtype)) * (
        g_bar * g_bar)
  new_v = _map(update, second_moment, gradient)
  precond = _map(lambda v: 1. / (_scale(regularizer, v.dtype) + tf.sqrt(v)),
                 new_v)
  return new_v, precond


def preconditioned_langevin_step(position, gradient, preconditioner,
                                 step_size, noise, temperature=1.):
  """pSGLD without the Gamma term (Li et al. 2016, Algorithm 1):

      theta' = theta - h G grad U~(theta) + sqrt(2 h T G) xi.

  The Gamma(theta) correction (derivatives of G) is dropped, as in the
  paper's experiments: G changes slowly when the decay alpha is close to 1,
  and the term costs a second derivative.
  """
  def step(theta, g, p, xi, h):
    h = _scale(h, theta.dtype)
    t = _scale(temperature, theta.dtype)
    return theta - h * p * g + tf.sqrt(2. * h * t * p) * xi
  return _map(step, position, gradient, preconditioner, noise,
              _broadcast_structure(step_size, position))


# --- Barker proposal: SGBD (Livingstone & Zanella 2022; Mauri & Zanella 2024)
#
# Notation of the SGBD paper: g = log pi, so d_j g = -dU/dtheta_j; every
# function below takes the energy gradient grad U~ (as the rest of this
# module) and uses delta_j = -dU~/dtheta_j. sigma is the step size, w the
# increment, p(delta, z) = 1 / (1 + exp(-z delta)) the Barker probability.

__all__ += [
    "BARKER_INCREMENT_DISTRIBUTIONS",
    "barker_increment_like",
    "uniform_like",
    "barker_probability",
    "corrected_barker_probability",
    "extreme_barker_probability",
    "barker_move",
    "gradient_noise_std_ema",
    "barker_log_proposal_ratio",
]

BARKER_INCREMENT_DISTRIBUTIONS = ("bimodal", "gaussian")

# Phi(x) ~= sigmoid(1.702 x) (the probit-logistic matching constant behind
# Propositions 1 and 2 of Mauri & Zanella).
_PROBIT_LOGIT = 1.702


def barker_increment_like(structure, step_size, seed,
                          increment_distribution="bimodal"):
  """Increments w ~ mu_sigma, one per coordinate, from a stateless seed.

  * `"bimodal"` (Vogrinc, Livingstone & Zanella 2022; the SGBD paper's choice):
    mu_sigma = 0.5 N(-sigma, (0.1 sigma)^2) + 0.5 N(sigma, (0.1 sigma)^2),
    drawn as w = sigma s (1 + 0.1 xi), s = +-1 with probability 1/2,
    xi ~ N(0, 1).
  * `"gaussian"`: mu_sigma = N(0, sigma^2), w = sigma xi.

  `step_size` sigma is a scalar or a tensor broadcastable against each part
  (e.g. `[num_chains, 1]`, one sigma per chain). Because p(delta, -z) =
  1 - p(delta, z), the move b w has the same law whether the sign of w is
  drawn or not (Algorithm 2 of the SGBD paper draws w ~ N(sigma,
  (0.1 sigma)^2)); it is drawn here so that a zero gradient gives a
  symmetric move in every variant, the extreme one included.
  """
  if increment_distribution not in BARKER_INCREMENT_DISTRIBUTIONS:
    raise ValueError(f"`increment_distribution` must be one of "
                     f"{BARKER_INCREMENT_DISTRIBUTIONS}; got "
                     f"{increment_distribution!r}.")
  normal_seed, sign_seed = _salted(seed, 2, _INNER_SALTS)
  xi = standard_normal_like(structure, normal_seed)
  sigma = _broadcast_structure(step_size, xi)  # Also one sigma per part.
  if increment_distribution == "gaussian":
    return _map(lambda z, h: _scale(h, z.dtype) * z, xi, sigma)
  u = uniform_like(structure, sign_seed)

  def draw(z, v, h):
    sign = tf.where(v < 0.5, -tf.ones_like(v), tf.ones_like(v))
    return _scale(h, z.dtype) * sign * (1. + 0.1 * z)
  return _map(draw, xi, u, sigma)


def uniform_like(structure, seed):
  """Independent U(0, 1) draws shaped like `structure`, from a stateless
  seed (one flat SplitMix64 draw per dtype, as `standard_normal_like`),
  on a grid symmetric about 1/2, never 0 or 1."""
  return _flat_draws(structure, seed,
                     lambda s, n, dtype, one_reader: 0.5 + 0.5 * (
                         _symmetric_uniform(s, n, dtype)))


def barker_probability(gradient, increment):
  """The Barker probability p(delta_j, w_j) = 1 / (1 + exp(-w_j delta_j)).

  With delta_j = -dU~/dtheta_j (`gradient` is grad U~): the probability of
  the move theta_j + w_j rather than theta_j - w_j (Livingstone & Zanella
  2022; v-SGBD when grad U~ is a minibatch estimate).
  """
  return _map(lambda g, w: tf.math.sigmoid(-w * g), gradient, increment)


def corrected_barker_probability(gradient, increment, noise_std):
  """c-SGBD's corrected probability p~ (Mauri & Zanella, eq. (5)).

      p~(delta, z) = p(1.702 delta / sqrt(1.702^2 - tau^2 z^2), z)
                                          if |z| < 1.702 / tau,
                   = 1(delta z > 0)       otherwise,

  with delta = -dU~/dtheta_j and tau the standard deviation of the
  minibatch estimator delta (the N/n-scaled one). If delta ~ N(d, tau^2),
  E[p~(delta, z)] ~= p(d, z) (Proposition 2): the expected move probability
  is that of the exact gradient, undoing v-SGBD's shrinkage of the gradient
  by c = 1.702 / sqrt(1.702^2 + z^2 tau^2) (Proposition 1). With tau = 0 it
  is `barker_probability`.

  Args:
    gradient: grad U~, a structure of tensors.
    increment: w, same structure.
    noise_std: tau >= 0, same structure (or a scalar).
  """
  def prob(g, w, tau):
    tau = _scale(tau, g.dtype)
    a = tf.constant(_PROBIT_LOGIT, g.dtype)
    tz2 = tf.square(tau * w)
    inside = tz2 < a * a
    # The safe denominator only matters where `inside` is False.
    scale = a * tf.math.rsqrt(tf.where(inside, a * a - tz2, tf.ones_like(tz2)))
    smooth = tf.math.sigmoid(-scale * w * g)
    hard = tf.cast(-w * g > 0., g.dtype)
    return tf.where(inside, smooth, hard)
  tau = _broadcast_structure(noise_std, gradient)
  return _map(prob, gradient, increment, tau)


def extreme_barker_probability(gradient, increment):
  """e-SGBD's p-bar(delta, w) = 1(delta w > 0) (Mauri & Zanella).

  Always moves in the direction of the stochastic gradient: theta_j moves by
  |w_j| towards higher log density, as estimated on the minibatch. Among
  symmetric estimators of p it has the least bias when the gradient noise is
  large (the paper's Proposition 4); it is part sampler, part optimiser.
  """
  return _map(lambda g, w: tf.cast(-w * g > 0., g.dtype), gradient, increment)


def barker_move(position, increment, probability, uniform):
  """theta'_j = theta_j + b_j w_j, b_j = +1 if u_j < p_j else -1.

  `probability` is p, p~ or p-bar; `uniform` holds U(0, 1) draws u.
  """
  return _map(lambda x, w, p, u: x + tf.where(u < p, w, -w),
              position, increment, probability, uniform)


def gradient_noise_std_ema(noise_std, noise_variance, weight):
  """c-SGBD's online noise estimate (Mauri & Zanella, Algorithm 2).

      tau-hat_j <- (1 - beta) tau-hat_j + beta sqrt(V-hat_j),

  an exponential moving average, with weight beta in (0, 1) on the new
  value, of the per-coordinate standard deviation of the gradient
  estimator; V-hat_j is that estimator's variance estimated on the current
  minibatch (`target.gradient_noise_variance`).
  """
  def update(tau, v):
    beta = _scale(weight, tau.dtype)
    return (1. - beta) * tau + beta * tf.sqrt(tf.cast(v, tau.dtype))
  return _map(update, noise_std, noise_variance)


def barker_log_proposal_ratio(position, new_position, gradient, new_gradient,
                              batch_ndims=0):
  """log q(y -> x) - log q(x -> y) for one Barker move x -> y.

  The Barker proposal density is, per coordinate, with z = y_j - x_j and a
  symmetric mu_sigma,

      q(x -> y) = prod_j 2 mu_sigma(z) p(delta_j(x), z),
      p(delta, z) = 1 / (1 + exp(-z delta)),

  (z arises from (w, b) = (z, +1) or (-z, -1), each with density
  mu_sigma(z) p(delta, z) since p(delta, -z) = 1 - p(delta, z)). The
  mu_sigma terms cancel in the ratio, leaving

      log q(y -> x) / q(x -> y)
          = sum_j log p(delta_j(y), -z) - log p(delta_j(x), z)
          = sum_j log(1 + exp(-z delta_j(x))) - log(1 + exp(z delta_j(y)))
          = sum_j softplus(z dU/dtheta_j(x)) - softplus(-z dU/dtheta_j(y)),

  summed over every coordinate of every part, one value per chain.
  `gradient` is grad U at x and `new_gradient` at y; for a stochastic
  proposal both must be on the same minibatch (the one that made the move),
  which makes this the log of one factor of eq. (3) of Zhang et al. (2020).

  Args:
    position: x, a structure of tensors.
    new_position: y, same structure.
    gradient: grad U~(x), same structure.
    new_gradient: grad U~(y) on the same minibatch, same structure.
    batch_ndims: number of leading chain axes of each part.

  Returns:
    A tensor of shape `batch_shape` (the first `batch_ndims` axes).
  """
  terms = _map(
      lambda x, y, g, g_new: _sum_event(
          tf.math.softplus((y - x) * g) - tf.math.softplus(-(y - x) * g_new),
          batch_ndims),
      position, new_position, gradient, new_gradient)
  return tf.add_n(tf.nest.flatten(terms))


def langevin_log_proposal_ratio(position, new_position, gradient,
                                new_gradient, step_size, temperature=1.,
                                batch_ndims=0):
  """log q(y -> x) - log q(x -> y) for one Langevin (`langevin_step`) move.

  The move x -> y is Gaussian, q(x -> y) = N(y; x - h grad U(x), 2 h T I),
  so

      log q(y -> x) / q(x -> y)
          = (|y - x + h grad U(x)|^2 - |x - y + h grad U(y)|^2) / (4 h T),

  summed over every coordinate of every part, one value per chain. With
  exact gradients this is MALA's correction (Roberts & Tweedie 1996):
  `tfp.mcmc.MetropolisHastings(SGLD(target_log_prob_fn=...))` is MALA.

  Args:
    position: x, a structure of tensors.
    new_position: y, same structure.
    gradient: grad U(x), same structure.
    new_gradient: grad U(y), same structure.
    step_size: h, a scalar or one per part (same structure).
    temperature: T.
    batch_ndims: number of leading chain axes of each part.
  """
  def term(x, y, g, g_new, h):
    h = _scale(h, x.dtype)
    t = _scale(temperature, x.dtype)
    forward = tf.square(y - x + h * g)
    reverse = tf.square(x - y + h * g_new)
    return _sum_event((forward - reverse) / (4. * h * t), batch_ndims)
  terms = _map(term, position, new_position, gradient, new_gradient,
               _broadcast_structure(step_size, position))
  return tf.add_n(tf.nest.flatten(terms))
