"""Unit tests of `tfp_sgmcmc.random`: the SplitMix64 functions
(derive_seeds, derive_inner_seeds, walk_seed, standard_normal_like,
uniform_like, uniform_indices) against a plain-Python SplitMix64 (Steele,
Lea & Flood 2014; Vigna's splitmix64.c) and the salting rule of
`derive_seeds`'s docstring; the functions that hand over to TF or TFP
(split_seed, fold_in, philox_indices, philox_uniform, philox_normal)
against the TF/TFP calls they document; the constants RNG_ALG and
BOOTSTRAP_SEED. The N(0, 1) statistics of the noise and the uniformity of the
indices across steps and chains are tests/test_noise.py's."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import dynamics
from tfp_sgmcmc import random as random_lib

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


# --- derive_inner_seeds -------------------------------------------------------

# The second salt family (MurmurHash3's finaliser constants).
INNER_SALTS = (0x85EBCA6B, 0xC2B2AE35)


def _salt(i, family):
  return np.array([(i * a) % 2**32 for a in family], np.uint32).view(np.int32)


def test_derive_inner_seeds_xors_the_seed_with_the_second_salt_family():
  seed = np.array([-123456789, 987654321], np.int32)
  derived = random_lib.derive_inner_seeds(tf.constant(seed), 5)
  assert len(derived) == 5
  for i, d in enumerate(derived):
    d = np.asarray(d)
    assert d.dtype == np.int32 and d.shape == (2,)
    np.testing.assert_array_equal(d, seed ^ _salt(i + 1, INNER_SALTS))
  # Not the first family.
  for a, b in zip(derived, random_lib.derive_seeds(seed, 5)):
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("seed", [[0, 0], [1, 2], [-1, 2**31 - 1]])
def test_derive_inner_seeds_of_a_derived_seed_never_give_back_a_step_seed(
    seed):
  # A step derives seeds from its seed; a draw derives inner seeds from one
  # of those. None may be the step's seed or another of its derived seeds
  # (derive_seeds twice would return the step's own seed).
  derived = random_lib.derive_seeds(seed, 8)
  taken = {tuple(seed)} | {tuple(np.asarray(d)) for d in derived}
  for d in derived:
    inner = [tuple(np.asarray(x)) for x in random_lib.derive_inner_seeds(d, 8)]
    assert len(set(inner)) == 8
    assert not taken & set(inner)


def test_no_inner_seed_of_300_derived_seeds_is_the_seed_or_a_derived_one():
  # By XOR's linearity: the salts are the seeds derived from [0, 0], and
  # inner(derived_i)_j = seed ^ s_i ^ t_j, which is seed or derived_k for
  # every seed exactly when s_i ^ t_j is 0 or s_k.
  salts = np.array([np.asarray(d) for d in random_lib.derive_seeds(
      [0, 0], 300)])
  inner = np.array([np.asarray(d) for d in random_lib.derive_inner_seeds(
      [0, 0], 300)])
  first = {tuple(s) for s in salts} | {(0, 0)}
  both = (salts[:, None, :] ^ inner[None, :, :]).reshape(-1, 2)
  assert not first & {tuple(s) for s in both}


# --- split_seed ---------------------------------------------------------------


@pytest.mark.parametrize("seed", [[5, -6], (0, 0), np.array([2**31 - 1, -7])])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_split_seed_is_tfps_split_of_the_sanitized_seed(seed, n):
  got = random_lib.split_seed(seed, n)
  expected = tfp.random.split_seed(tfp.random.sanitize_seed(seed), n=n)
  assert len(got) == n
  for g, e in zip(got, expected):
    assert g.dtype == tf.int32 and g.shape == (2,)
    np.testing.assert_array_equal(g, e)
  assert len({tuple(np.asarray(g)) for g in got}) == n


def test_split_seed_is_a_real_split_not_a_salt():
  # The seeds carried from step to step: unlike derive_seeds, splitting a
  # split seed again does not return the seed.
  seed = tf.constant([7, 11])
  for s in random_lib.split_seed(seed, 3):
    again = [tuple(np.asarray(x)) for x in random_lib.split_seed(s, 3)]
    assert (7, 11) not in again
  assert not any(np.array_equal(a, b) for a, b in zip(
      random_lib.split_seed(seed, 3), random_lib.derive_seeds(seed, 3)))


# --- fold_in ------------------------------------------------------------------


@pytest.mark.parametrize("data", [0, 1, 12345, 2**40])
def test_fold_in_is_tfs_stateless_fold_in(data):
  seed = tf.constant([-3, 99])
  default = random_lib.fold_in(seed, data)
  np.testing.assert_array_equal(
      default, tf.random.experimental.stateless_fold_in(seed, data))
  np.testing.assert_array_equal(
      random_lib.fold_in(seed, data, alg="philox"),
      tf.random.experimental.stateless_fold_in(seed, data, alg="philox"))
  # A tensor step index (as in a loop), int32 and int64.
  for dtype in (tf.int32, tf.int64):
    if dtype == tf.int32 and data >= 2**31:
      continue
    np.testing.assert_array_equal(
        random_lib.fold_in(seed, tf.constant(data, dtype)),
        tf.random.experimental.stateless_fold_in(seed,
                                                 tf.constant(data, dtype)))


def test_fold_in_passes_alg_on_and_gives_a_seed_per_index():
  seed = tf.constant([1, 2])
  # alg reaches TF (an unknown one is refused there), and None is TF's
  # default, not an error.
  with pytest.raises(ValueError, match="alg"):
    random_lib.fold_in(seed, 3, alg="no-such-generator")
  random_lib.fold_in(seed, 3, alg=None)
  folded = {tuple(np.asarray(random_lib.fold_in(seed, i))) for i in range(50)}
  assert len(folded) == 50 and (1, 2) not in folded


# --- Philox draws -------------------------------------------------------------


def test_rng_alg_and_bootstrap_seed_are_the_documented_constants():
  assert random_lib.RNG_ALG == "philox"
  assert dynamics.RNG_ALG == random_lib.RNG_ALG
  # BOOTSTRAP_SEED: a fixed, valid stateless seed (int32[2] after
  # sanitising, and the same every time).
  assert tuple(random_lib.BOOTSTRAP_SEED) == (0, 0)
  seed = tfp.random.sanitize_seed(random_lib.BOOTSTRAP_SEED)
  assert seed.dtype == tf.int32 and seed.shape == (2,)
  np.testing.assert_array_equal(seed, [0, 0])
  np.testing.assert_array_equal(
      random_lib.philox_normal([3], random_lib.BOOTSTRAP_SEED),
      random_lib.philox_normal([3], (0, 0)))


@pytest.mark.parametrize("seed", [[-3, 17], (2**31 - 1, 0)])
@pytest.mark.parametrize("maxval", [1, 7, 60000, 2**31 - 1])
def test_philox_indices_are_tfs_philox_uniform_integers(seed, maxval):
  got = random_lib.philox_indices(seed, [4, 6], maxval)
  assert got.dtype == tf.int32 and got.shape == (4, 6)
  expected = tf.random.stateless_uniform(
      [4, 6], seed=tfp.random.sanitize_seed(seed), minval=0, maxval=maxval,
      dtype=tf.int32, alg="philox")
  np.testing.assert_array_equal(got, expected)
  assert got.numpy().min() >= 0 and got.numpy().max() < maxval


def test_philox_indices_cover_zero_to_maxval_and_are_not_splitmix64():
  idx = random_lib.philox_indices([1, 1], [20000], 10).numpy()
  assert idx.min() == 0 and idx.max() == 9
  assert np.all(np.bincount(idx, minlength=10) > 1800)
  np.testing.assert_array_equal(
      random_lib.philox_indices([1, 1], tf.constant([3, 5]), 1000),
      random_lib.philox_indices(tf.constant([1, 1]), [3, 5], 1000))
  # Another generator than uniform_indices' (TFRecordTarget's records are
  # not InMemoryTarget's).
  assert not np.array_equal(random_lib.philox_indices([1, 1], [50], 1000),
                            random_lib.uniform_indices([1, 1], [50], 1000))


@pytest.mark.parametrize("dtype", [tf.float16, tf.float32, tf.float64])
def test_philox_uniform_and_normal_are_tfs_philox_draws(dtype):
  seed = tf.constant([8, -9])
  u = random_lib.philox_uniform([5, 3], seed, dtype)
  z = random_lib.philox_normal([5, 3], seed, dtype)
  for x in (u, z):
    assert x.dtype == dtype and x.shape == (5, 3)
  np.testing.assert_array_equal(u, tf.random.stateless_uniform(
      [5, 3], seed, dtype=dtype, alg="philox"))
  np.testing.assert_array_equal(z, tf.random.stateless_normal(
      [5, 3], seed=seed, dtype=dtype, alg="philox"))


def test_philox_uniform_and_normal_default_to_float32_and_have_their_laws():
  n = 100000
  u = random_lib.philox_uniform([n], [4, 4])
  z = random_lib.philox_normal([n], [4, 4])
  assert u.dtype == tf.float32 and z.dtype == tf.float32
  u, z = u.numpy().astype(np.float64), z.numpy().astype(np.float64)
  assert np.all(u >= 0.) and np.all(u < 1.)
  assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
  assert abs(z.mean()) < 5 / np.sqrt(n)
  assert abs(z.var() - 1.) < 5 * np.sqrt(2. / n)
  # Two different draws, not one in two forms.
  assert abs(np.corrcoef(u, z)[0, 1]) < 5 / np.sqrt(n)


# --- draws in a traced graph --------------------------------------------------

# Each draw of the module on a two-part, two-dtype structure.
DRAWS = {
    "standard_normal_like": lambda seed, like: dynamics.standard_normal_like(
        like, seed),
    "uniform_like": lambda seed, like: dynamics.uniform_like(like, seed),
    "uniform_indices": lambda seed, _: dynamics.uniform_indices(
        seed, [4, 32], 1000),
    "walk_seed": lambda seed, _: dynamics.walk_seed(seed),
    "philox_indices": lambda seed, _: random_lib.philox_indices(
        seed, [8], 100),
    "philox_uniform": lambda seed, _: random_lib.philox_uniform(
        [4, 3], seed, tf.float64),
    "philox_normal": lambda seed, _: random_lib.philox_normal([5], seed),
}
LIKE = [tf.TensorSpec([4, 3], tf.float32), tf.TensorSpec([6], tf.float32),
        tf.TensorSpec([2, 2], tf.float64)]


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_draw_traced_into_a_graph_is_a_few_ops(name):
  # Traced inline, a draw was 18 to 240 ops in every graph that drew, each
  # a Python call at every trace; it is one call of a function traced once
  # (per dtype of a structure, whose parts' sizes, split and reshapes make
  # the rest).
  added = []

  def trace(seed, *like):
    graph = tf.compat.v1.get_default_graph()
    before = len(graph.get_operations())
    out = DRAWS[name](seed, list(like))
    added.append(len(graph.get_operations()) - before)
    return out

  tf.function(trace, autograph=False).get_concrete_function(
      tf.TensorSpec([2], tf.int32), *LIKE)
  assert added[0] <= 16, added


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_draw_as_one_call_has_the_values_of_its_ops_inline(
    name, jit_compile, monkeypatch):
  # XLA and TensorFlow's graph runtime inline the call: the draws are the
  # ones the same ops give traced inline, bit for bit (the module's
  # one-call draws replaced by the functions they call).
  seed = tf.constant([-7, 1234])
  like = [tf.zeros(spec.shape, spec.dtype) for spec in LIKE]
  draw = lambda: tf.function(DRAWS[name], jit_compile=jit_compile,
                             autograph=False)(seed, like)
  one_call = draw()
  one_call_draws = {key: value for key, value in vars(random_lib).items()
                    if hasattr(value, "__wrapped__")}
  assert sorted(one_call_draws) == ["_flat_draw_of_size", "_indices_of_shape",
                                    "_philox_of_shape", "_walk"]
  for key, value in one_call_draws.items():
    monkeypatch.setattr(random_lib, key, value.__wrapped__)
  inline = draw()
  for a, b in zip(tf.nest.flatten(one_call), tf.nest.flatten(inline)):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)
