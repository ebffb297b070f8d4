"""The injected noise (dynamics.standard_normal_like) is the same bits whatever
compiled loop consumes it: XLA programs that scale it by a compile-time
constant, by an argument, or not at all agree to the bit; and 16-bit states
get the float32 draws cast, for any seed, eager and under XLA. (Its
distribution: statistical/test_random_draws.py.)
"""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import dynamics


def test_draws_do_not_depend_on_how_the_consumer_is_compiled():
  # A kernel scales the noise by a scalar that is a compile-time constant
  # in one compiled loop and a loop value in another (progress chunks
  # against one sample_chain). With the draw computed as sqrt(2) * erfinv(u)
  # XLA's simplifier folded sqrt(2) into the constant scale in one of them
  # only, and about a third of the draws differed by an ulp.
  for dtype in (tf.float32, tf.float64):
    x = tf.zeros([256], dtype)
    scale = 0.4472136
    seed = tf.constant([3, 4])
    by_constant = tf.function(
        lambda s: dynamics.standard_normal_like(x, s) * scale,
        jit_compile=True)(seed)
    by_argument = tf.function(
        lambda s, c: dynamics.standard_normal_like(x, s) * c,
        jit_compile=True)(seed, tf.constant(scale, dtype))
    bare = tf.function(lambda s: dynamics.standard_normal_like(x, s),
                       jit_compile=True)(seed)
    np.testing.assert_array_equal(by_constant, by_argument)
    np.testing.assert_array_equal(by_argument,
                                  bare * tf.constant(scale, dtype))


def test_half_precision_draws_are_the_float32_draws_for_any_seed():
  # The draw is made in float32 for 16-bit states and cast; nothing in it may
  # depend on a float16 conversion of a seed word (2**30 overflows float16).
  seeds = [[1, 2], [123456789, 2], [-2147483647, 5]]
  for shape in ([64, 20], [1280]):
    for seed in seeds:
      reference = dynamics.standard_normal_like(tf.zeros(shape), seed)
      for dtype in (tf.float16, tf.bfloat16):
        state = tf.zeros(shape, dtype)
        eager = dynamics.standard_normal_like(state, seed)
        compiled = tf.function(
            lambda s, seed=seed: dynamics.standard_normal_like(s, seed),
            jit_compile=True)(state)
        for draw in (eager, compiled):
          assert draw.dtype == dtype
          np.testing.assert_array_equal(
              draw.numpy().astype(np.float32),
              tf.cast(reference, dtype).numpy().astype(np.float32))
