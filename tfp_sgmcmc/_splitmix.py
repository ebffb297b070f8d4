"""SplitMix64 as a counter-based generator: the engine behind
`tfp_sgmcmc.random`'s injected noise (`standard_normal_like`,
`uniform_like`) and in-memory minibatch indices (`uniform_indices`).

Word i of a draw keyed by an int32[2] seed is mix64(mix64(seed) + i gamma),
i = 1..n (Steele, Lea & Flood 2014; passes BigCrush). On XLA:CPU TF's Philox
draws cost more than the rest of a small batched step
(benchmarks/chains.py), and all parts of a structure come from one flat
draw (`random._flat_draws`).
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

GAMMA = 0x9E3779B97F4A7C15
MIX = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)


def mix64(z):
  """SplitMix64's output function of uint64 words."""
  shift = lambda x, k: tf.bitwise.right_shift(x, tf.constant(k, tf.uint64))
  z = tf.bitwise.bitwise_xor(z, shift(z, 30)) * tf.constant(MIX[0], tf.uint64)
  z = tf.bitwise.bitwise_xor(z, shift(z, 27)) * tf.constant(MIX[1], tf.uint64)
  return tf.bitwise.bitwise_xor(z, shift(z, 31))


def random_words(seed, n):
  """`n` uint64 words of the SplitMix64 stream keyed by the int32[2] seed
  (`n` a scalar int64 tensor). The key is mixed first, so seeds that differ
  in a few bits (`derive_seeds`) start unrelated streams."""
  key = tf.bitcast(tfp.random.sanitize_seed(seed), tf.uint64)
  i = tf.bitcast(tf.range(1, n + 1, dtype=tf.int64), tf.uint64)
  return mix64(mix64(key) + i * tf.constant(GAMMA, tf.uint64))


def indices(seed, shape, maxval):
  """`random.uniform_indices` (Lemire's multiply-shift of each word's high
  32 bits)."""
  n = tf.reduce_prod(tf.cast(shape, tf.int64))
  words = random_words(seed, n)
  hi = tf.bitwise.right_shift(words, tf.constant(32, tf.uint64))
  index = tf.bitwise.right_shift(hi * tf.constant(int(maxval), tf.uint64),
                                 tf.constant(32, tf.uint64))
  return tf.reshape(tf.cast(index, tf.int32), shape)


def symmetric_grid(seed, n, dtype):
  """`n` odd integers j uniform in (-2^b, 2^b), and b: the draw
  u = j 2^-b is uniform on a grid symmetric about 0 in (-1, 1). float64
  (int64 j, b = 52) from 52 bits of a word; float32 and narrower types
  (int32 j, b = 23) from 23 bits of each half of a word."""
  n = tf.cast(n, tf.int64)
  if dtype == tf.float64:
    words = random_words(seed, n)
    k = tf.bitcast(tf.bitwise.right_shift(words, tf.constant(12, tf.uint64)),
                   tf.int64)
    return 2 * k + (1 - 2**52), 52
  words = random_words(seed, (n + 1) // 2)
  halves = tf.reshape(tf.bitcast(words, tf.uint32), [-1])[:n]
  k = tf.cast(tf.bitwise.right_shift(halves, tf.constant(9, tf.uint32)),
              tf.int32)
  return 2 * k + (1 - 2**23), 23


def to_unit(j, b):
  """j 2^-b, exactly (|j| < 2^b fits the significand)."""
  return tf.cast(j, tf.float64 if b == 52 else tf.float32) * 2.**-b


def symmetric_uniform(seed, n, dtype):
  """`n` draws, uniform on a grid symmetric about 0 in (-1, 1)
  (`symmetric_grid`)."""
  return to_unit(*symmetric_grid(seed, n, dtype))


def flat_draw(seed, n, dtype, draw, one_reader, computed_flat):
  """`n` draws of `draw` in `dtype`, computed into a buffer of their own
  where `computed_flat` (`_flat_draws`)."""
  flat = tf.cast(draw(seed, n, dtype, one_reader=one_reader), dtype)
  if computed_flat:
    flat = computed_once(flat, seed, second_reader=True)
  return flat


def normal(seed, n, dtype, one_reader=False):
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

  u is computed into a buffer of its own (`computed_once`) before the
  transform reads it: left to itself XLA:CPU fused the SplitMix64 words,
  u and the transform into one loop per consumer of the draw, which ran
  several times slower than the same work as separate loops. A draw split
  into several parts has several readers of u already; a draw with
  `one_reader` is given a second one."""
  j, b = symmetric_grid(seed, n, dtype)
  u = computed_once(to_unit(j, b), seed, second_reader=one_reader)
  itype = SAME_WIDTH_INT[u.dtype]
  magnitude = np.sqrt(2.).astype(u.dtype.as_numpy_dtype) * (
      tf.math.erfinv(tf.abs(u)))
  signed = tf.bitwise.bitwise_or(
      tf.bitcast(magnitude, itype),
      tf.bitwise.bitwise_and(tf.bitcast(u, itype), sign_bit(itype)))
  return tf.bitcast(signed, u.dtype)


SAME_WIDTH_INT = {tf.float16: tf.int16, tf.bfloat16: tf.int16,
                   tf.float32: tf.int32, tf.float64: tf.int64}


def sign_bit(itype):
  return tf.constant(-2**(tf.as_dtype(itype).size * 8 - 1), itype)


def computed_once(x, seed, second_reader=False):
  """x itself, computed once into a buffer that its readers share.

  x is divided by a 1 that XLA cannot prove is 1 (1 + 0 * b, b the low bit
  of a seed word: 0 or 1, so finite in every float type; the word itself
  overflows float16). XLA's fusion copies cheap elementwise ops into every
  fusion that reads them but not a float division, which counts as
  expensive; so x gets a buffer of its own as soon as two fusions read it.
  With `second_reader` one more reader is made: |x| of x's first element
  (a reduction over one element: a fusion of its own that reads almost
  nothing), whose sign bit (0) is or-ed into x by integer ops, so the
  values do not change. (Reducing all of |x| instead would cost a pass
  over x.)"""
  bit = tf.cast(tf.bitwise.bitwise_and(tf.convert_to_tensor(seed)[..., 0], 1),
                x.dtype)
  x = x / (1. + 0. * bit)
  if not second_reader:
    return x
  itype = SAME_WIDTH_INT[x.dtype]
  smallest = tf.reduce_min(tf.abs(x[:1]))
  return tf.bitcast(tf.bitwise.bitwise_or(
      tf.bitcast(x, itype),
      tf.bitwise.bitwise_and(tf.bitcast(smallest, itype), sign_bit(itype))),
                    x.dtype)


def uniform(seed, n, dtype, one_reader=False):
  """U(0, 1) on a grid symmetric about 1/2 (`uniform_like`)."""
  del one_reader  # Read by the sum that shifts it.
  return 0.5 + 0.5 * symmetric_uniform(seed, n, dtype)
