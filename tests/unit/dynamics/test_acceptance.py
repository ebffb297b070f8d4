"""The amortized Metropolis-Hastings test of `dynamics.acceptance` (Zhang,
Cooper & De Sa 2020, eq. (6)) against numpy: the outer step's seeds, the
decision log u < log a with log a = U(theta) - U(theta*) + correction and u
the Philox uniform of the accept seed (non-finite log a rejects; the
difference taken in the energies' dtype and the test in `dtype`), the chain
after the test per chain (state and energy chosen, momentum r* or -r), and
the argument check.

The module's `test_seeds` is reached through the module: imported by name
into a test file, pytest would collect it as a test."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import random as random_lib
from tfp_sgmcmc.dynamics import acceptance
from .reference import CHAINS, const, draws


def per_chain(mask, part):
  return np.reshape(mask, mask.shape + (1,) * (part.ndim - mask.ndim))


# --- the outer step's seeds ---------------------------------------------------


@pytest.mark.parametrize("seed", [[1, 2], (0, 0), np.array([-5, 2**31 - 1])])
def test_test_seeds_are_the_three_way_split_of_the_outer_step_seed(seed):
  got = acceptance.test_seeds(seed)
  assert len(got) == 3
  for g, a, b in zip(got, random_lib.split_seed(seed, 3),
                     tfp.random.split_seed(tfp.random.sanitize_seed(seed),
                                           n=3)):
    assert g.dtype == tf.int32 and g.shape == (2,)
    np.testing.assert_array_equal(g, a)
    np.testing.assert_array_equal(g, b)
  assert len({tuple(np.asarray(g)) for g in got}) == 3


# --- metropolis_hastings_test -------------------------------------------------


SEED = tf.constant([11, -13])


def uniforms(shape, seed, dtype):
  return random_lib.philox_uniform(shape, seed, dtype).numpy()


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_metropolis_hastings_accepts_iff_log_u_is_below_log_a(dtype):
  # Many chains, log a spread around the log uniforms so that both
  # decisions occur; log a = U - U* + correction exactly as in eq. (6).
  n = 400
  rng = np.random.default_rng(0)
  energy = rng.normal(5., 2., size=n)
  proposed = rng.normal(5., 2., size=n)
  correction = rng.normal(0., 1., size=n)
  accepted, log_a = acceptance.metropolis_hastings_test(
      tf.constant(energy, dtype), tf.constant(proposed, dtype),
      tf.constant(correction, dtype), SEED)
  assert accepted.dtype == tf.bool and accepted.shape == (n,)
  assert log_a.dtype == dtype and log_a.shape == (n,)
  e, p, c = (tf.constant(x, dtype).numpy() for x in (energy, proposed,
                                                     correction))
  expected = (e - p) + c
  np.testing.assert_array_equal(log_a, expected)
  u = uniforms([n], SEED, dtype)
  np.testing.assert_array_equal(accepted, np.log(u) < expected)
  assert 0.1 < accepted.numpy().mean() < 0.9
  # A ratio of at least 1 is always accepted, a ratio far below never.
  always, _ = acceptance.metropolis_hastings_test(
      tf.zeros([n], dtype), tf.zeros([n], dtype), tf.zeros([n], dtype), SEED)
  never, _ = acceptance.metropolis_hastings_test(
      tf.zeros([n], dtype), tf.fill([n], tf.constant(50., dtype)),
      tf.zeros([n], dtype), SEED)
  assert np.all(always) and not np.any(never)


def test_metropolis_hastings_draws_u_from_the_seed():
  n = 1000
  log_a = np.log(np.full(n, 0.5))
  decisions = [acceptance.metropolis_hastings_test(
      tf.constant(log_a), tf.zeros([n], tf.float64), 0., seed)[0].numpy()
               for seed in ([1, 2], [1, 2], [1, 3])]
  np.testing.assert_array_equal(decisions[0], decisions[1])
  assert np.any(decisions[0] != decisions[2])
  np.testing.assert_array_equal(
      decisions[0], uniforms([n], [1, 2], tf.float64) < 0.5)
  assert abs(decisions[0].mean() - 0.5) < 5 * np.sqrt(0.25 / n)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_metropolis_hastings_rejects_a_tie_log_u_equal_to_log_a(dtype):
  # Strictly below: where log a is exactly log u the proposal is rejected,
  # a hair above it accepted.
  n = 50
  log_u = tf.math.log(random_lib.philox_uniform([n], SEED, dtype))
  tie, log_a = acceptance.metropolis_hastings_test(
      log_u, tf.zeros([n], dtype), tf.zeros([n], dtype), SEED)
  np.testing.assert_array_equal(log_a, log_u)
  assert not np.any(tie)
  above, _ = acceptance.metropolis_hastings_test(
      log_u, tf.zeros([n], dtype), tf.fill([n], tf.constant(1e-3, dtype)),
      SEED)
  assert np.all(above)


@pytest.mark.parametrize("energy,proposed,correction", [
    (np.nan, 1., 0.), (1., np.nan, 0.), (1., 2., np.nan),
    (np.inf, 1., 0.), (1., np.inf, 0.), (1., 2., -np.inf),
    # U* = -inf, or a correction of +inf, would make log a = +inf: still
    # not finite, so rejected rather than accepted.
    (1., -np.inf, 0.), (1., 2., np.inf), (np.inf, np.inf, 0.)])
def test_metropolis_hastings_rejects_a_non_finite_log_a(energy, proposed,
                                                        correction):
  # Chain 1 is the non-finite one; its neighbours are tested as usual.
  e = tf.constant([0., energy, 0.], tf.float64)
  p = tf.constant([0., proposed, 0.], tf.float64)
  c = tf.constant([0., correction, 0.], tf.float64)
  accepted, log_a = acceptance.metropolis_hastings_test(e, p, c, SEED)
  np.testing.assert_array_equal(log_a, [0., -np.inf, 0.])
  np.testing.assert_array_equal(accepted, [True, False, True])


def test_metropolis_hastings_takes_the_difference_in_the_energies_dtype():
  # Keras sums U in float64 (it grows with N); the test runs in float32.
  # U ~ 1e9 differs from U* by 0.375: in float32 both would round to the
  # same multiple of 64.
  energy = tf.constant([1e9 + 0.375, 1e9], tf.float64)
  proposed = tf.constant([1e9, 1e9 + 0.375], tf.float64)
  correction = tf.constant([0.25, 0.25], tf.float64)
  accepted, log_a = acceptance.metropolis_hastings_test(
      energy, proposed, correction, SEED, dtype=tf.float32)
  assert log_a.dtype == tf.float32
  np.testing.assert_array_equal(log_a, np.float32([0.625, -0.125]))
  u = uniforms([2], SEED, tf.float32)
  np.testing.assert_array_equal(accepted,
                                np.log(u) < np.float32([0.625, -0.125]))
  # Without `dtype` the test is in the energies' dtype.
  _, log_a = acceptance.metropolis_hastings_test(energy, proposed, correction,
                                                 SEED)
  assert log_a.dtype == tf.float64
  np.testing.assert_allclose(log_a, [0.625, -0.125], rtol=1e-15)
  # float32 energies: the difference in float32 (here 0), whatever `dtype`.
  _, log_a = acceptance.metropolis_hastings_test(
      tf.cast(energy, tf.float32), tf.cast(proposed, tf.float32),
      correction, SEED, dtype=tf.float64)
  assert log_a.dtype == tf.float64
  np.testing.assert_array_equal(log_a, [0.25, 0.25])


def test_metropolis_hastings_takes_scalars_and_a_chain_grid():
  accepted, log_a = acceptance.metropolis_hastings_test(
      tf.constant(2., tf.float64), tf.constant(1.5, tf.float64), -0.25, SEED)
  assert accepted.shape == () and log_a.shape == ()
  np.testing.assert_allclose(log_a, 0.25)
  assert bool(accepted)
  rng = np.random.default_rng(1)
  e, p = rng.normal(size=(2, 2, 5))
  accepted, log_a = acceptance.metropolis_hastings_test(
      tf.constant(e), tf.constant(p), tf.zeros([2, 5], tf.float64), SEED)
  assert accepted.shape == (2, 5)
  np.testing.assert_array_equal(
      accepted, np.log(uniforms([2, 5], SEED, tf.float64)) < e - p)


# --- the chain after the test -------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_after_test_takes_the_proposal_where_accepted_per_chain(dtype):
  accepted = np.array([True, False, True])
  state, proposed = draws(1), draws(2)
  r, r_star = draws(3), draws(4)
  energy, proposed_energy = np.array([1., 2., 3.]), np.array([4., 5., 6.])
  after = acceptance.after_test(
      tf.constant(accepted), const(state, dtype), const(proposed, dtype),
      tf.constant(energy, dtype), tf.constant(proposed_energy, dtype),
      const(r, dtype), const(r_star, dtype))
  assert isinstance(after, acceptance.ChainAfterTest)
  assert after._fields == ("state", "energy", "momentum")
  for got, a, b in zip(after.state, state, proposed):
    assert got.dtype == dtype
    np.testing.assert_array_equal(
        got, np.where(per_chain(accepted, a), tf.constant(b, dtype),
                      tf.constant(a, dtype)))
  np.testing.assert_array_equal(after.energy, [4., 2., 6.])
  # Momentum: r* where accepted, else the starting r negated.
  for got, a, b in zip(after.momentum, r, r_star):
    np.testing.assert_array_equal(
        got, np.where(per_chain(accepted, a), tf.constant(b, dtype),
                      -tf.constant(a, dtype).numpy()))


def test_after_test_without_momentum_gives_none_and_keeps_a_dict_state():
  accepted = tf.constant([False, True, False])
  state = {"w": tf.zeros([3, 2]), "b": tf.zeros([3])}
  proposed = {"w": tf.ones([3, 2]), "b": tf.ones([3])}
  after = acceptance.after_test(accepted, state, proposed,
                                tf.zeros([3]), tf.ones([3]))
  assert after.momentum is None
  assert isinstance(after.state, dict) and set(after.state) == {"w", "b"}
  np.testing.assert_array_equal(after.state["w"],
                                [[0., 0.], [1., 1.], [0., 0.]])
  np.testing.assert_array_equal(after.state["b"], [0., 1., 0.])
  np.testing.assert_array_equal(after.energy, [0., 1., 0.])


def test_momentum_after_test_is_r_star_or_minus_r_per_chain():
  accepted = np.array([True, False, False])
  r, r_star = draws(5), draws(6)
  got = acceptance.momentum_after_test(tf.constant(accepted), const(r_star),
                                       const(r))
  for g, a, b in zip(got, r, r_star):
    np.testing.assert_array_equal(g, np.where(per_chain(accepted, a), b, -a))
  # All rejected: the involution r -> -r, twice the identity.
  rejected = tf.zeros([CHAINS], tf.bool)
  twice = acceptance.momentum_after_test(
      rejected, const(r_star),
      acceptance.momentum_after_test(rejected, const(r_star), const(r)))
  for g, a in zip(twice, r):
    np.testing.assert_array_equal(g, a)


def test_check_acceptance_energy_accepts_exact_and_minibatch_only():
  assert acceptance.ACCEPTANCE_ENERGIES == ("exact", "minibatch")
  for name in acceptance.ACCEPTANCE_ENERGIES:
    acceptance.check_acceptance_energy(name)
  for name in ("Exact", "full", None, ""):
    with pytest.raises(ValueError, match="acceptance_energy"):
      acceptance.check_acceptance_energy(name)
