"""Unit tests of the stateless random-number functions of `dynamics`
(derive_seeds, walk_seed, standard_normal_like, uniform_like,
uniform_indices), against a plain-Python SplitMix64 (Steele, Lea & Flood
2014; Vigna's splitmix64.c) and the salting rule of `derive_seeds`'s
docstring. The N(0, 1) statistics of the noise and the uniformity of the
indices across steps and chains are tests/test_noise.py's."""

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc import dynamics

M64 = 2**64 - 1
GAMMA = 0x9E3779B97F4A7C15  # SplitMix64's increment (the golden ratio).
# The odd 32-bit salts of derive_seeds (golden ratio, Weyl sequence).
SALTS = (0x9E3779B9, 0x7F4A7C15)


def mix64(z):
  """SplitMix64's output function (Steele et al. 2014, Vigna's constants)."""
  z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
  z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
  return z ^ (z >> 31)


def as_u64(seed):
  """The int32[2] seed as the 64-bit word it is bitcast to (little-endian:
  word 0 holds the low 32 bits)."""
  lo, hi = (int(v) & 0xFFFFFFFF for v in np.asarray(seed))
  return lo | (hi << 32)


def as_seed(word):
  return np.array([word & 0xFFFFFFFF, word >> 32], np.uint32).view(np.int32)


def words(seed, n):
  """The module's counter-based stream: word i = mix64(mix64(key) + i gamma),
  i = 1..n."""
  key = mix64(as_u64(seed))
  return [mix64((key + i * GAMMA) & M64) for i in range(1, n + 1)]


def test_reference_splitmix64_reproduces_the_published_test_vector():
  # splitmix64.c seeded with 0: the first output is 0xE220A8397B1DCDAF.
  assert mix64(GAMMA) == 0xE220A8397B1DCDAF


# --- derive_seeds -------------------------------------------------------------


def test_derive_seeds_xors_the_seed_with_i_plus_1_times_the_salt():
  seed = np.array([123456789, -987654321], np.int32)
  derived = dynamics.derive_seeds(tf.constant(seed), 5)
  assert len(derived) == 5
  for i, d in enumerate(derived):
    d = np.asarray(d)
    assert d.dtype == np.int32 and d.shape == (2,)
    salt = np.array([((i + 1) * a) % 2**32 for a in SALTS],
                    np.uint32).view(np.int32)
    np.testing.assert_array_equal(d, seed ^ salt)


def test_derive_seeds_gives_n_distinct_seeds_none_equal_to_the_seed():
  for seed in ([0, 0], [1, 2], [-1, 2**31 - 1]):
    derived = [tuple(np.asarray(d)) for d in dynamics.derive_seeds(seed, 50)]
    assert len(set(derived)) == 50
    assert tuple(seed) not in derived


def test_derive_seeds_is_deterministic_and_salting_twice_returns_the_seed():
  seed = tf.constant([7, 11])
  first = dynamics.derive_seeds(seed, 4)
  again = tf.function(lambda s: dynamics.derive_seeds(s, 4))(seed)
  for a, b in zip(first, again):
    np.testing.assert_array_equal(a, b)
  # XOR with the same salt twice returns the seed (why carried seeds must
  # not go through derive_seeds, as its docstring says).
  for k in range(4):
    np.testing.assert_array_equal(
        dynamics.derive_seeds(first[k], 4)[k], seed)


# --- walk_seed ----------------------------------------------------------------


def test_walk_seed_is_the_splitmix64_generator_over_the_seeds_64_bits():
  seed = np.array([-559038737, 305419896], np.int32)
  state = as_u64(seed)
  carried = tf.constant(seed)
  for _ in range(5):
    carried, step = dynamics.walk_seed(carried)
    state = (state + GAMMA) & M64
    np.testing.assert_array_equal(carried, as_seed(state))
    np.testing.assert_array_equal(step, as_seed(mix64(state)))


def test_walk_seed_advances_and_its_step_seeds_differ():
  carried = tf.constant([3, 4])
  seen, steps = {(3, 4)}, set()
  for _ in range(100):
    carried, step = dynamics.walk_seed(carried)
    seen.add(tuple(np.asarray(carried)))
    steps.add(tuple(np.asarray(step)))
  assert len(seen) == 101 and len(steps) == 100


def test_walk_seed_is_deterministic_and_the_same_under_xla():
  seed = tf.constant([3, 4])
  eager = dynamics.walk_seed(seed)
  compiled = tf.function(dynamics.walk_seed, jit_compile=True)(seed)
  for a, b, c in zip(eager, dynamics.walk_seed(seed), compiled):
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


# --- standard_normal_like -----------------------------------------------------


def _nested(dtype):
  return {"w": [tf.zeros([3, 4], dtype), tf.zeros([5], dtype)],
          "b": (tf.zeros([2, 1, 3], dtype),), "s": tf.zeros([], dtype)}


@pytest.mark.parametrize(
    "dtype", [tf.float16, tf.bfloat16, tf.float32, tf.float64])
def test_standard_normal_like_keeps_structure_shape_and_dtype(dtype):
  structure = _nested(dtype)
  draw = dynamics.standard_normal_like(structure, [1, 2])
  tf.nest.assert_same_structure(structure, draw)
  for part, z in zip(tf.nest.flatten(structure), tf.nest.flatten(draw)):
    assert z.dtype == dtype and z.shape == part.shape
    assert np.all(np.isfinite(np.asarray(tf.cast(z, tf.float64))))


def test_standard_normal_like_keeps_mixed_dtypes_and_draws_them_apart():
  structure = [tf.zeros([64], tf.float32), tf.zeros([64], tf.float64)]
  z32, z64 = dynamics.standard_normal_like(structure, [5, 6])
  assert z32.dtype == tf.float32 and z64.dtype == tf.float64
  # The float64 part is not the float32 draw in other clothes.
  assert np.max(np.abs(z32.numpy() - z64.numpy())) > 0.1


def test_standard_normal_like_is_deterministic_and_seeds_differ():
  structure = _nested(tf.float64)
  a = tf.nest.flatten(dynamics.standard_normal_like(structure, [1, 2]))
  b = tf.nest.flatten(dynamics.standard_normal_like(
      structure, tf.constant([1, 2])))
  c = tf.nest.flatten(dynamics.standard_normal_like(structure, [1, 3]))
  for x, y, z in zip(a, b, c):
    np.testing.assert_array_equal(x, y)
    if x.shape.num_elements() > 1:
      assert not np.any(x.numpy() == z.numpy())


def test_parts_of_one_dtype_are_pieces_of_one_flat_draw():
  # "All parts of the same dtype come from one flat draw": the parts,
  # flattened and joined, are the draw for one flat tensor of their size.
  for dtype in (tf.float32, tf.float64):
    parts = [tf.zeros([3, 4], dtype), tf.zeros([5], dtype),
             tf.zeros([2, 3], dtype)]
    draw = dynamics.standard_normal_like(parts, [9, 8])
    flat = dynamics.standard_normal_like(tf.zeros([23], dtype), [9, 8])
    np.testing.assert_array_equal(
        np.concatenate([np.ravel(z) for z in draw]), flat)
    # Distinct parts are distinct stretches of the stream.
    assert not np.any(np.isin(np.ravel(draw[0]), np.ravel(draw[1])))


def test_standard_normal_like_stays_within_the_documented_range():
  # |z| <= 5.3 in float32 and 8.1 in float64 (the grid's extreme points).
  for dtype, bound in ((tf.float32, 5.3), (tf.float64, 8.1)):
    z = dynamics.standard_normal_like(tf.zeros([100000], dtype), [4, 2])
    assert np.max(np.abs(z)) <= bound


# --- uniform_like -------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_uniform_like_is_in_the_open_unit_interval_and_uniform(dtype):
  n = 100000
  structure = [tf.zeros([n // 4, 2], dtype), tf.zeros([n // 2], dtype)]
  draw = dynamics.uniform_like(structure, [3, 1])
  for part, u in zip(structure, draw):
    assert u.dtype == dtype and u.shape == part.shape
  u = np.concatenate([np.ravel(p) for p in draw]).astype(np.float64)
  assert np.all(u > 0.) and np.all(u < 1.)
  # Mean 1/2 and variance 1/12 within 5 standard errors; deciles even.
  assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / u.size)
  assert abs(u.var() - 1 / 12) < 5 * np.sqrt(1 / 180 / u.size)
  counts = np.histogram(u, bins=10, range=(0., 1.))[0]
  chi2 = np.sum((counts - u.size / 10) ** 2 / (u.size / 10))
  assert chi2 < 9 + 5 * np.sqrt(18), chi2


def test_uniform_like_is_deterministic_and_seeds_differ():
  x = tf.zeros([1000], tf.float64)
  a = dynamics.uniform_like(x, [1, 2]).numpy()
  np.testing.assert_array_equal(a, dynamics.uniform_like(x, [1, 2]))
  assert not np.any(a == dynamics.uniform_like(x, [2, 1]).numpy())


# --- uniform_indices ----------------------------------------------------------


def _lemire_indices(seed, n, maxval):
  """index = (w_hi * maxval) >> 32, w_hi the high 32 bits of each word."""
  return np.array([((w >> 32) * maxval) >> 32 for w in words(seed, n)])


@pytest.mark.parametrize("maxval", [1, 7, 270, 2**31 - 1])
def test_uniform_indices_are_lemire_reductions_of_the_splitmix64_stream(
    maxval):
  seed = [-3, 17]
  got = dynamics.uniform_indices(seed, [4, 6], maxval)
  assert got.dtype == tf.int32 and got.shape == (4, 6)
  np.testing.assert_array_equal(np.ravel(got),
                                _lemire_indices(seed, 24, maxval))
  assert got.numpy().min() >= 0 and got.numpy().max() < maxval


def test_uniform_indices_cover_exactly_zero_to_maxval():
  idx = dynamics.uniform_indices([1, 1], [20000], 10).numpy()
  assert idx.min() == 0 and idx.max() == 9
  np.testing.assert_array_equal(
      dynamics.uniform_indices([1, 1], [50], 1), np.zeros(50))


def test_uniform_indices_take_a_tensor_shape_and_are_deterministic():
  seed = tf.constant([8, 9])
  by_list = dynamics.uniform_indices(seed, [3, 5, 2], 1000)
  by_tensor = dynamics.uniform_indices(seed, tf.constant([3, 5, 2]), 1000)
  assert by_tensor.shape == (3, 5, 2)
  np.testing.assert_array_equal(by_list, by_tensor)
  assert not np.array_equal(
      by_list, dynamics.uniform_indices([8, 10], [3, 5, 2], 1000))


def test_uniform_indices_eager_equal_xla():
  seed = tf.constant([-12345, 678])
  compiled = tf.function(
      lambda s, shape: dynamics.uniform_indices(s, shape, 60000),
      jit_compile=True)
  for shape in ([7], [4, 33]):
    np.testing.assert_array_equal(
        dynamics.uniform_indices(seed, shape, 60000),
        compiled(seed, tf.constant(shape)))
