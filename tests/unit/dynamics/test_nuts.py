"""SG-NUTS's pieces in `dynamics.nuts` against numpy: the per-chain inner
product, Hoffman & Gelman's (2014) U-turn criterion, the time-directed SGHMC
step of the SG-NUTS reproduction (papers/003, Section 5; forward: drift then
an Euler SGHMC kick, Chen et al. 2014; backward: the same step on (theta, -r))
with a fake energy_and_gradient that records where and with which seed it
is called, and the weight of a trajectory point."""

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc import dynamics
from tfp_sgmcmc import random as random_lib
from tfp_sgmcmc.dynamics import nuts
from .reference import CHAINS, TOL, FakeEnergy, check, const, draws, f64
from .reference import per_chain_sum


# --- dot_per_chain ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_dot_per_chain_sums_a_times_b_over_every_coordinate_of_every_part(
    dtype):
  a, b = draws(0), draws(1)
  got = nuts.dot_per_chain(const(a, dtype), const(b, dtype), 1)
  a, b = f64(a, dtype), f64(b, dtype)
  expected = per_chain_sum([x * y for x, y in zip(a, b)])
  assert got.dtype == dtype and got.shape == (CHAINS,)
  np.testing.assert_allclose(got, expected, **TOL[dtype])
  # No chain axes: one number.
  total = nuts.dot_per_chain(const(a, dtype), const(b, dtype), 0)
  assert total.shape == ()
  np.testing.assert_allclose(total, expected.sum(), **TOL[dtype])


def test_dot_per_chain_on_a_chain_grid():
  shapes = [(2, 3, 4), (2, 3, 5, 2)]
  a, b = draws(2, 1., shapes), draws(3, 1., shapes)
  got = nuts.dot_per_chain(const(a, tf.float64), const(b, tf.float64), 2)
  assert got.shape == (2, 3)
  np.testing.assert_allclose(
      got, per_chain_sum([x * y for x, y in zip(a, b)], (2, 3)), rtol=1e-13)


def test_dot_per_chain_takes_a_single_tensor_and_a_dict():
  x = tf.constant([[1., 2.], [3., -4.]], tf.float64)
  np.testing.assert_allclose(nuts.dot_per_chain(x, x, 1), [5., 25.])
  d = {"a": x, "b": tf.ones([2, 3], tf.float64)}
  np.testing.assert_allclose(nuts.dot_per_chain(d, d, 1), [8., 28.])


# --- no_u_turn ----------------------------------------------------------------


def test_no_u_turn_holds_while_both_ends_move_apart():
  # Chain 0: both momenta along the span; chain 1: the left end turned
  # back; chain 2: the right end turned back; chain 3: both.
  theta_l = tf.constant([[0., 0.]] * 4, tf.float64)
  theta_r = tf.constant([[1., 0.]] * 4, tf.float64)
  r_l = tf.constant([[1., 5.], [-1., 5.], [1., 5.], [-1., 0.]], tf.float64)
  r_r = tf.constant([[2., -3.], [2., -3.], [-0.5, 9.], [-1., 0.]],
                    tf.float64)
  got = nuts.no_u_turn((theta_l, r_l), (theta_r, r_r), 1)
  assert got.dtype == tf.bool
  np.testing.assert_array_equal(got, [True, False, False, False])


def test_no_u_turn_counts_a_zero_inner_product_as_no_turn():
  # (theta+ - theta-) . r = 0 on both ends: >= 0, not a U-turn.
  theta_l, theta_r = tf.zeros([1, 2]), tf.constant([[1., 0.]])
  r = tf.constant([[0., 1.]])
  np.testing.assert_array_equal(nuts.no_u_turn((theta_l, r), (theta_r, r), 1),
                                [True])


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_no_u_turn_is_hoffman_and_gelmans_criterion_over_all_parts(dtype):
  # Random ends for many chains, against the criterion in numpy.
  shapes = [(200, 3), (200, 2, 2)]
  t_l, t_r, r_l, r_r = (draws(s, 1., shapes) for s in (4, 5, 6, 7))
  got = nuts.no_u_turn((const(t_l, dtype), const(r_l, dtype)),
                       (const(t_r, dtype), const(r_r, dtype)), 1).numpy()
  t_l, t_r, r_l, r_r = (f64(p, dtype) for p in (t_l, t_r, r_l, r_r))
  span = [b - a for a, b in zip(t_l, t_r)]
  dot = lambda x, y: sum(  # noqa: E731
      (p * q).reshape(200, -1).sum(-1) for p, q in zip(x, y))
  expected = (dot(span, r_l) >= 0) & (dot(span, r_r) >= 0)
  np.testing.assert_array_equal(got, expected)
  assert 0 < expected.sum() < 200 and 0 < (dot(span, r_l) >= 0).sum() < 200
  # A single part alone can disagree with the sum over parts: the
  # criterion is one inner product over the whole state.
  one_part = (dot(span[:1], r_l[:1]) >= 0) & (dot(span[:1], r_r[:1]) >= 0)
  assert np.any(one_part != expected)


# --- sghmc_time_step ----------------------------------------------------------


SEED = tf.constant([-19, 23])
C, B, T = 1.3, 0.2, 0.6  # Friction, noise estimate, temperature.


def time_step_reference(theta, r, sign, h, c_of_seed, lam, xi):
  """Forward in time: theta' = theta + h r, then Euler's kick
  r' = r - h grad U~(theta') - h C r + N(0, 2 (C T - B) h); backward: the
  same on (theta, -r), with r' negated back."""
  out_theta, out_r = [], []
  for x, m, z, s in zip(theta, r, xi, h):
    sgn = np.reshape(sign, (-1,) + (1,) * (x.ndim - 1))
    m = sgn * m
    x = x + s * m
    g = lam * x + c_of_seed
    m = m - s * g - s * C * m + np.sqrt(2. * (C * T - B) * s) * z
    out_theta.append(x)
    out_r.append(sgn * m)
  return out_theta, out_r


STEPS = {"scalar": (0.08, [0.08, 0.08]), "per_part": ([0.08, 0.03],
                                                      [0.08, 0.03])}


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("direction", [[1., 1., 1.], [-1., -1., -1.],
                                       [1., -1., -1.]])
def test_sghmc_time_step_drifts_then_kicks_in_the_chains_direction(
    dtype, step, direction):
  theta, r = draws(10), draws(11)
  fake = FakeEnergy()
  got_theta, got_r, energy = nuts.sghmc_time_step(
      const(theta, dtype), const(r, dtype), tf.constant(direction, dtype),
      STEPS[step][0], C, B, T, SEED, fake)
  batch_seed, noise_seed = random_lib.split_seed(SEED, 2)
  # One evaluation, at the drifted position, on the first split seed.
  assert len(fake.calls) == 1
  at, seed = fake.calls[0]
  np.testing.assert_array_equal(seed, batch_seed)
  check(got_theta, [x.astype(np.float64) for x in at], dtype)
  xi = [z.numpy().astype(np.float64) for z in dynamics.standard_normal_like(
      const(r, dtype), noise_seed)]
  c = fake.shift(batch_seed)
  exp_theta, exp_r = time_step_reference(
      f64(theta, dtype), f64(r, dtype), np.array(direction), STEPS[step][1],
      c, fake.lam, xi)
  check(got_theta, exp_theta, dtype)
  check(got_r, exp_r, dtype)
  # U~ at theta', from the same call.
  np.testing.assert_allclose(
      energy, per_chain_sum([0.5 * fake.lam * x * x + c * x
                             for x in exp_theta]), **TOL[dtype])


def test_sghmc_time_step_backward_is_the_forward_step_on_minus_r():
  theta, r = const(draws(12), tf.float64), const(draws(13), tf.float64)
  back_theta, back_r, back_u = nuts.sghmc_time_step(
      theta, r, -tf.ones([CHAINS], tf.float64), 0.08, C, B, T, SEED,
      FakeEnergy())
  fwd_theta, fwd_r, fwd_u = nuts.sghmc_time_step(
      theta, [-x for x in r], tf.ones([CHAINS], tf.float64), 0.08, C, B, T,
      SEED, FakeEnergy())
  check(back_theta, [x.numpy() for x in fwd_theta], tf.float64)
  check(back_r, [-x.numpy() for x in fwd_r], tf.float64)
  np.testing.assert_array_equal(back_u, fwd_u)
  # ... and friction acts backward too: without gradient (lam = c = 0) and
  # noise (B = C T), r' = (1 - h C) r in both directions.
  zero = FakeEnergy(lam=0.)
  zero.shift = lambda seed: 0.
  for sign in (1., -1.):
    _, r1, _ = nuts.sghmc_time_step(
        theta, r, tf.fill([CHAINS], tf.constant(sign, tf.float64)), 0.1, 2.,
        2., 1., SEED, zero)
    for a, b in zip(r1, r):
      np.testing.assert_allclose(a, 0.8 * b.numpy(), rtol=1e-13)


# --- log_weight ---------------------------------------------------------------


def test_weightings_are_energy_and_uniform():
  assert nuts.WEIGHTINGS == ("energy", "uniform")


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("temperature", [1., 0.4])
def test_log_weight_is_minus_the_hamiltonian_over_t_or_zero(dtype,
                                                            temperature):
  r = draws(14)
  energy = np.array([3.5, -1.25, 40.])
  got = nuts.log_weight(tf.constant(energy, dtype), const(r, dtype),
                        temperature, 1)
  assert got.dtype == dtype and got.shape == (CHAINS,)
  kinetic = per_chain_sum([x ** 2 for x in f64(r, dtype)]) / 2.
  np.testing.assert_allclose(got, -(energy + kinetic) / temperature,
                             **TOL[dtype])
  energy_weighted = nuts.log_weight(tf.constant(energy, dtype),
                                    const(r, dtype), temperature, 1, "energy")
  np.testing.assert_array_equal(got, energy_weighted)
  uniform = nuts.log_weight(tf.constant(energy, dtype), const(r, dtype),
                            temperature, 1, "uniform")
  assert uniform.dtype == dtype
  np.testing.assert_array_equal(uniform, np.zeros(CHAINS))


@pytest.mark.parametrize("weighting", ["energy", "uniform"])
def test_log_weight_is_minus_infinity_where_the_momentum_is_not_finite(
    weighting):
  r = draws(15)
  r[1][2, 1, 0] = np.nan
  r[0][0, 3] = np.inf
  got = nuts.log_weight(tf.constant([1., 2., 3.], tf.float64),
                        const(r, tf.float64), 1., 1, weighting).numpy()
  assert got[0] == -np.inf and got[2] == -np.inf
  assert np.isfinite(got[1])


def test_log_weight_is_minus_infinity_where_the_energy_is_not_finite():
  r = const(draws(16), tf.float64)
  got = nuts.log_weight(tf.constant([np.nan, 2., np.inf], tf.float64), r,
                        1., 1).numpy()
  assert got[0] == -np.inf and got[2] == -np.inf
  assert np.isfinite(got[1])
  # -inf energy (log w = +inf) is not finite either.
  got = nuts.log_weight(tf.constant([-np.inf, 2., 0.], tf.float64), r, 1.,
                        1).numpy()
  assert got[0] == -np.inf and np.all(np.isfinite(got[1:]))


def test_log_weight_is_minus_infinity_where_log_w_itself_overflows():
  # Finite energy and momentum, but -(U + K) / T beyond float32's range:
  # log w is not finite, so the point gets no weight.
  r = const(draws(17), tf.float32)
  got = nuts.log_weight(tf.constant([-3e38, 2., 3e38], tf.float32), r, 0.1,
                        1).numpy()
  assert got[0] == -np.inf and got[2] == -np.inf
  assert np.isfinite(got[1])
