"""Barker-proposal functions of `dynamics` (SGBD: Livingstone & Zanella
2022; Mauri & Zanella 2024) against numpy written from the papers. The
functions take the energy gradient grad U~, so delta = -grad U~ below.
(uniform_like's own tests are in tests/unit/test_random.py; eq. (5)'s
Proposition 2 and the move's law over many draws are tests/test_sgbd.py's.)
The whole moves (barker_update per variant, sgbd_update's seeds) and a step
of the multi-step proposal (barker_proposal_step, with a fake
energy_and_gradient that records its seeds) are composed from those pieces
and the documented seeds."""

import numpy as np
import pytest
import scipy.special
import scipy.stats
import tensorflow as tf

from tfp_sgmcmc import dynamics
from tfp_sgmcmc import random as random_lib
from .reference import CHAINS, SHAPES, TOL, FakeEnergy, check, const, draws
from .reference import f64


A = 1.702  # The probit-logit constant: Phi(x) ~= sigmoid(1.702 x).


def p_barker(delta, z):
  """p(delta, z) = 1 / (1 + exp(-z delta))."""
  return 1. / (1. + np.exp(-z * delta))


# --- increments ---------------------------------------------------------------


N = 100000  # Draws for the distribution checks (a few ms each).


def _flat(parts):
  return np.concatenate([np.ravel(p) for p in parts]).astype(np.float64)


@pytest.mark.parametrize("distribution", ["bimodal", "gaussian"])
@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_barker_increment_like_keeps_structure_shape_and_dtype(
    distribution, dtype):
  structure = [tf.zeros(s, dtype) for s in SHAPES]
  w = dynamics.barker_increment_like(structure, 0.5, [1, 2], distribution)
  assert isinstance(w, list) and len(w) == 2
  for part, x in zip(structure, w):
    assert x.dtype == dtype and x.shape == part.shape
  np.testing.assert_array_equal(
      _flat(w), _flat(dynamics.barker_increment_like(structure, 0.5, [1, 2],
                                                     distribution)))
  assert not np.any(_flat(w) == _flat(dynamics.barker_increment_like(
      structure, 0.5, [1, 3], distribution)))


def test_gaussian_increment_is_sigma_times_a_standard_normal():
  sigma = 0.35
  w = dynamics.barker_increment_like(tf.zeros([N], tf.float64), sigma,
                                     [4, 5], "gaussian").numpy()
  xi = w / sigma
  assert abs(xi.mean()) < 5. / np.sqrt(N)
  assert abs(xi.var() - 1.) < 5. * np.sqrt(2. / N)  # 1.1 is 22 se off.
  assert scipy.stats.kstest(xi, "norm").pvalue > 1e-4


def test_bimodal_increment_is_sigma_sign_times_one_plus_a_tenth_normal():
  # w = sigma s (1 + 0.1 xi): |w| / sigma ~ N(1, 0.1^2), s = +-1 fair and
  # independent of |w|; mu_sigma = 0.5 N(-sigma, (0.1 sigma)^2)
  # + 0.5 N(sigma, (0.1 sigma)^2).
  sigma = 0.35
  w = dynamics.barker_increment_like(tf.zeros([N], tf.float64), sigma,
                                     [4, 5], "bimodal").numpy()
  xi = (np.abs(w) / sigma - 1.) / 0.1
  assert abs(xi.mean()) < 5. / np.sqrt(N)
  assert abs(xi.var() - 1.) < 5. * np.sqrt(2. / N)
  assert scipy.stats.kstest(xi, "norm").pvalue > 1e-4
  up = w > 0
  assert abs(up.mean() - 0.5) < 5. * np.sqrt(0.25 / N)
  # The sign does not depend on the magnitude (nor the reverse).
  assert abs(xi[up].mean() - xi[~up].mean()) < 5. * np.sqrt(4. / N)
  # E[w^2] = sigma^2 (1 + 0.01).
  assert abs(np.mean(w ** 2) / sigma ** 2 - 1.01) < 5. * 0.2 / np.sqrt(N)


def test_gaussian_increments_are_symmetric_in_sign():
  w = dynamics.barker_increment_like(tf.zeros([N], tf.float64), 1.,
                                     [6, 7], "gaussian").numpy()
  assert abs(np.mean(w > 0) - 0.5) < 5. * np.sqrt(0.25 / N)
  # The law of w is that of -w: the quantiles mirror each other.
  q = np.quantile(w, [0.05, 0.25, 0.5, 0.75, 0.95])
  np.testing.assert_allclose(q, -q[::-1], atol=0.02)


@pytest.mark.parametrize("distribution", ["bimodal", "gaussian"])
def test_barker_increment_scales_with_the_step_size(distribution):
  structure = [tf.zeros(s, tf.float64) for s in SHAPES]
  unit = dynamics.barker_increment_like(structure, 1., [2, 2], distribution)
  # A scalar sigma.
  check(dynamics.barker_increment_like(structure, 0.3, [2, 2], distribution),
        [0.3 * u.numpy() for u in unit], tf.float64)
  # One sigma per part.
  check(dynamics.barker_increment_like(structure, [0.3, 2.], [2, 2],
                                       distribution),
        [0.3 * unit[0].numpy(), 2. * unit[1].numpy()], tf.float64)
  # One sigma per chain (broadcastable against each part).
  per_chain = [np.array([0.1, 1., 5.]).reshape(3, 1),
               np.array([0.2, 0.4, 3.]).reshape(3, 1, 1)]
  check(dynamics.barker_increment_like(structure,
                                       const(per_chain, tf.float64), [2, 2],
                                       distribution),
        [s * u.numpy() for s, u in zip(per_chain, unit)], tf.float64)


def test_barker_increment_like_rejects_an_unknown_distribution():
  assert set(dynamics.BARKER_INCREMENT_DISTRIBUTIONS) == {"bimodal",
                                                          "gaussian"}
  with pytest.raises(ValueError, match="increment_distribution"):
    dynamics.barker_increment_like(tf.zeros([2]), 1., [1, 2], "uniform")


# --- move probabilities -------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_barker_probability_is_the_logistic_of_w_delta(dtype):
  g, w = draws(0, 3.), draws(1)
  got = dynamics.barker_probability(const(g, dtype), const(w, dtype))
  g, w = f64(g, dtype), f64(w, dtype)
  check(got, [p_barker(-d, z) for d, z in zip(g, w)], dtype)
  # p(delta, -z) = 1 - p(delta, z): the move's law does not depend on the
  # sign of w.
  flipped = dynamics.barker_probability(const(g, dtype),
                                        const([-z for z in w], dtype))
  for a, b in zip(got, flipped):
    np.testing.assert_allclose(a.numpy() + b.numpy(), 1., **TOL[dtype])


def test_barker_probability_is_a_half_at_zero_gradient():
  got = dynamics.barker_probability(tf.zeros([4], tf.float64),
                                    tf.constant([-2., -0.1, 0.1, 2.],
                                                tf.float64))
  np.testing.assert_array_equal(got, np.full(4, 0.5))


def corrected_reference(delta, z, tau):
  """Mauri & Zanella, eq. (5)."""
  delta, z, tau = np.broadcast_arrays(delta, z, tau)
  out = (delta * z > 0).astype(np.float64)
  inside = tau * np.abs(z) < A  # |z| < 1.702 / tau.
  out[inside] = p_barker(
      A * delta[inside] / np.sqrt(A ** 2 - tau[inside] ** 2
                                  * z[inside] ** 2), z[inside])
  return out


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_corrected_barker_probability_matches_equation_5(dtype):
  g, w = draws(2, 2.), draws(3)
  # One tau per coordinate, about a third of them beyond 1.702 / |w|.
  tau = [np.abs(x) * 2.5 for x in draws(4)]
  got = dynamics.corrected_barker_probability(
      const(g, dtype), const(w, dtype), const(tau, dtype))
  g, w, tau = f64(g, dtype), f64(w, dtype), f64(tau, dtype)
  expected = [corrected_reference(-d, z, t) for d, z, t in zip(g, w, tau)]
  check(got, expected, dtype)
  beyond = np.concatenate([np.ravel(t * np.abs(z) >= A)
                           for t, z in zip(tau, w)])
  assert 0.1 < beyond.mean() < 0.9  # Both branches are exercised.
  # A scalar tau.
  got = dynamics.corrected_barker_probability(const(g, dtype),
                                              const(w, dtype), 0.8)
  check(got, [corrected_reference(-d, z, 0.8) for d, z in zip(g, w)], dtype)


def test_corrected_barker_probability_at_tau_zero_is_barker_probability():
  g, w = const(draws(5, 3.), tf.float64), const(draws(6), tf.float64)
  check(dynamics.corrected_barker_probability(g, w, 0.),
        [p.numpy() for p in dynamics.barker_probability(g, w)], tf.float64)


def test_corrected_barker_probability_is_the_indicator_beyond_1702_over_tau():
  tau = 2.
  z = np.array([0.86, -0.86, 1., -1., 5., -5.])  # tau |z| > 1.702.
  for delta in (0.3, -0.3):
    got = dynamics.corrected_barker_probability(
        tf.constant(np.full(6, -delta)), tf.constant(z), tau).numpy()
    np.testing.assert_array_equal(got, (delta * z > 0).astype(float))
  # Just inside the limit p~ is the logistic of the inflated gradient
  # (here a scale of 1.702 / sqrt(1.702^2 - 1.7^2) = 20.6).
  z = np.array([0.85, -0.85])
  got = dynamics.corrected_barker_probability(
      tf.constant(np.full(2, -0.05)), tf.constant(z), tau).numpy()
  scale = A / np.sqrt(A ** 2 - (tau * 0.85) ** 2)
  np.testing.assert_allclose(got, p_barker(scale * 0.05, z), rtol=1e-12)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_extreme_barker_probability_is_the_indicator_of_delta_w_positive(
    dtype):
  g, w = draws(7), draws(8)
  g[0][0, 0] = 0.  # No gradient: delta w = 0, not > 0.
  got = dynamics.extreme_barker_probability(const(g, dtype), const(w, dtype))
  check(got, [((-d * z) > 0).astype(np.float64) for d, z in zip(g, w)],
        dtype)
  assert got[0].numpy()[0, 0] == 0.


# --- the move -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_barker_move_adds_w_where_u_is_below_p_else_subtracts_it(dtype):
  theta, w = draws(9), draws(10)
  rng = np.random.default_rng(11)
  p = [rng.uniform(size=s) for s in SHAPES]
  u = [rng.uniform(size=s) for s in SHAPES]
  u[0][0, 0] = p[0][0, 0]  # u = p: not below, so -w.
  got = dynamics.barker_move(const(theta, dtype), const(w, dtype),
                             const(p, dtype), const(u, dtype))
  theta, w, p, u = (f64(x, dtype) for x in (theta, w, p, u))
  check(got, [t + np.where(v < q, 1., -1.) * z
              for t, z, q, v in zip(theta, w, p, u)], dtype)
  assert np.isclose(got[0].numpy()[0, 0], theta[0][0, 0] - w[0][0, 0],
                    **TOL[dtype])


# --- the noise estimate -------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("weight", [0.1, 0.75])
def test_gradient_noise_std_ema_averages_the_standard_deviation(
    dtype, weight):
  tau = [np.abs(x) for x in draws(12)]
  variance = [x ** 2 * 9. for x in draws(13)]
  got = dynamics.gradient_noise_std_ema(const(tau, dtype),
                                        const(variance, dtype), weight)
  tau, variance = f64(tau, dtype), f64(variance, dtype)
  # tau-hat <- (1 - beta) tau-hat + beta sqrt(V-hat): an average of
  # standard deviations, not of variances.
  check(got, [(1. - weight) * t + weight * np.sqrt(v)
              for t, v in zip(tau, variance)], dtype)


def test_gradient_noise_std_ema_takes_the_variance_in_another_dtype():
  got = dynamics.gradient_noise_std_ema(tf.constant([1.], tf.float64),
                                        tf.constant([4.], tf.float32), 0.5)
  assert got.dtype == tf.float64
  np.testing.assert_allclose(got, [1.5], rtol=1e-15)


# --- the proposal ratio -------------------------------------------------------


def _barker_move_data(seed, sigma):
  x, g_x, g_y = draws(seed), draws(seed + 1, 2.), draws(seed + 2, 2.)
  rng = np.random.default_rng(seed + 3)
  w = [sigma * rng.choice([-1., 1.], size=s) * (1. + 0.1 * rng.normal(size=s))
       for s in SHAPES]
  b = [rng.choice([-1., 1.], size=s) for s in SHAPES]
  y = [a + s * z for a, s, z in zip(x, b, w)]
  return x, y, g_x, g_y


def test_barker_log_proposal_ratio_is_a_sum_of_softplus_terms():
  x, y, g_x, g_y = _barker_move_data(14, 0.6)
  got = dynamics.barker_log_proposal_ratio(
      *(const(p, tf.float64) for p in (x, y, g_x, g_y)), batch_ndims=1)
  assert got.shape == (CHAINS,)
  softplus = lambda v: np.logaddexp(0., v)  # noqa: E731
  expected = sum(
      (softplus((b - a) * ga) - softplus(-(b - a) * gb)).reshape(CHAINS, -1)
      .sum(-1) for a, b, ga, gb in zip(x, y, g_x, g_y))
  np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
  total = dynamics.barker_log_proposal_ratio(
      *(const(p, tf.float64) for p in (x, y, g_x, g_y)))
  assert total.shape == ()
  np.testing.assert_allclose(total, expected.sum(), rtol=1e-12)


@pytest.mark.parametrize("distribution", ["bimodal", "gaussian"])
def test_barker_log_proposal_ratio_is_the_log_ratio_of_barker_densities(
    distribution):
  # q(x -> y) = prod_j 2 mu_sigma(z_j) p(delta_j(x), z_j), z = y - x, for
  # either symmetric mu_sigma; the ratio log q(y -> x) - log q(x -> y)
  # computed from the densities themselves.
  sigma = 0.6
  x, y, g_x, g_y = _barker_move_data(18, sigma)

  def log_mu(z):
    if distribution == "gaussian":
      return scipy.stats.norm.logpdf(z, 0., sigma)
    s = 0.1 * sigma
    return np.logaddexp(scipy.stats.norm.logpdf(z, sigma, s),
                        scipy.stats.norm.logpdf(z, -sigma, s)) + np.log(0.5)

  def log_q(a, b, grad_a):
    z = b - a
    return (np.log(2.) + log_mu(z)
            + np.log(scipy.special.expit(-z * grad_a))).reshape(
                CHAINS, -1).sum(-1)
  expected = sum(log_q(b, a, gb) - log_q(a, b, ga)
                 for a, b, ga, gb in zip(x, y, g_x, g_y))
  got = dynamics.barker_log_proposal_ratio(
      *(const(p, tf.float64) for p in (x, y, g_x, g_y)), batch_ndims=1)
  np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_barker_log_proposal_ratio_in_float32():
  x, y, g_x, g_y = _barker_move_data(22, 0.6)
  got = dynamics.barker_log_proposal_ratio(
      *(const(p, tf.float32) for p in (x, y, g_x, g_y)), batch_ndims=1)
  x, y, g_x, g_y = (f64(p, tf.float32) for p in (x, y, g_x, g_y))
  expected = sum(
      (np.logaddexp(0., (b - a) * ga) - np.logaddexp(0., -(b - a) * gb))
      .reshape(CHAINS, -1).sum(-1) for a, b, ga, gb in zip(x, y, g_x, g_y))
  assert got.dtype == tf.float32
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# --- whole moves: barker_update, sgbd_update ----------------------------------


INCREMENT_SEED, DIRECTION_SEED = tf.constant([3, -4]), tf.constant([-5, 6])


def barker_reference(theta, g, w, u, variant, tau=None):
  """theta'_j = theta_j + w_j if u_j < P(delta_j, w_j) else theta_j - w_j,
  P the variant's probability (delta = -grad U~)."""
  out = []
  for i, (x, d, z, v) in enumerate(zip(theta, g, w, u)):
    if variant == "vanilla":
      p = p_barker(-d, z)
    elif variant == "extreme":
      p = (-d * z > 0).astype(np.float64)
    else:
      p = corrected_reference(-d, z, tau[i])
    out.append(x + np.where(v < p, z, -z))
  return out


def draws_of(structure, step_size, distribution, dtype):
  """The increments and the uniforms a move draws from its two seeds."""
  w = dynamics.barker_increment_like(structure, step_size, INCREMENT_SEED,
                                     distribution)
  u = dynamics.uniform_like(structure, DIRECTION_SEED)
  return ([x.numpy().astype(np.float64) for x in w],
          [x.numpy().astype(np.float64) for x in u])


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("distribution", ["bimodal", "gaussian"])
@pytest.mark.parametrize("variant", ["vanilla", "extreme"])
def test_barker_update_moves_by_w_in_the_variants_direction(
    dtype, distribution, variant):
  theta, g = const(draws(30), dtype), const(draws(31, 2.), dtype)
  step_size = [0.4, 0.9]
  tau = const([np.abs(x) for x in draws(32)], dtype)
  got, got_tau = dynamics.barker_update(
      theta, g, step_size, INCREMENT_SEED, DIRECTION_SEED, variant,
      distribution, noise_std=tau, noise_variance=const(draws(33), dtype),
      noise_ema_weight=0.5)
  w, u = draws_of(theta, step_size, distribution, dtype)
  check(got, barker_reference(f64(draws(30), dtype), f64(draws(31, 2.), dtype),
                              w, u, variant), dtype)
  # The noise estimate passes through untouched but for "corrected".
  assert got_tau is tau
  # Both directions are taken, and |theta' - theta| = |w|.
  moved = np.concatenate([np.ravel(a.numpy() - b.numpy())
                          for a, b in zip(got, theta)])
  assert np.any(moved > 0) and np.any(moved < 0)
  np.testing.assert_allclose(np.abs(moved),
                             np.abs(np.concatenate([np.ravel(x) for x in w])),
                             **TOL[dtype])


def test_barker_update_defaults_to_vanilla_and_bimodal():
  theta, g = const(draws(34), tf.float64), const(draws(35), tf.float64)
  default, tau = dynamics.barker_update(theta, g, 0.5, INCREMENT_SEED,
                                        DIRECTION_SEED)
  explicit, _ = dynamics.barker_update(theta, g, 0.5, INCREMENT_SEED,
                                       DIRECTION_SEED, "vanilla", "bimodal")
  check(default, [x.numpy() for x in explicit], tf.float64)
  assert tau == ()


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("distribution", ["bimodal", "gaussian"])
def test_barker_update_corrected_first_moves_tau_by_the_ema(dtype,
                                                            distribution):
  theta, g = const(draws(36), dtype), const(draws(37, 2.), dtype)
  tau = [np.abs(x) for x in draws(38)]
  variance = [x ** 2 * 4. for x in draws(39)]
  weight, step_size = 0.3, 0.7
  got, got_tau = dynamics.barker_update(
      theta, g, step_size, INCREMENT_SEED, DIRECTION_SEED, "corrected",
      distribution, noise_std=const(tau, dtype),
      noise_variance=const(variance, dtype), noise_ema_weight=weight)
  tau, variance = f64(tau, dtype), f64(variance, dtype)
  new_tau = [(1. - weight) * t + weight * np.sqrt(v)
             for t, v in zip(tau, variance)]
  check(got_tau, new_tau, dtype)
  w, u = draws_of(theta, step_size, distribution, dtype)
  # The move uses the updated tau-hat, not the old one.
  check(got, barker_reference(f64(draws(36), dtype), f64(draws(37, 2.), dtype),
                              w, u, "corrected", new_tau), dtype)


SEED = tf.constant([77, -88])


@pytest.mark.parametrize("variant", ["vanilla", "corrected", "extreme"])
@pytest.mark.parametrize("distribution", ["bimodal", "gaussian"])
def test_sgbd_update_is_barker_update_with_the_steps_second_and_third_seeds(
    variant, distribution):
  theta, g = const(draws(40), tf.float64), const(draws(41), tf.float64)
  tau = const([np.abs(x) for x in draws(42)], tf.float64)
  variance = const([x ** 2 for x in draws(43)], tf.float64)
  kwargs = dict(variant=variant, increment_distribution=distribution,
                noise_std=tau, noise_variance=variance, noise_ema_weight=0.2)
  got, got_tau = dynamics.sgbd_update(theta, g, 0.6, SEED, **kwargs)
  _, increment_seed, direction_seed = dynamics.derive_seeds(SEED, 3)
  expected, expected_tau = dynamics.barker_update(
      theta, g, 0.6, increment_seed, direction_seed, **kwargs)
  check(got, [x.numpy() for x in expected], tf.float64)
  for a, b in zip(tf.nest.flatten(got_tau), tf.nest.flatten(expected_tau)):
    np.testing.assert_array_equal(a, b)
  # Not the step seed's first derived seed (the minibatch's).
  first, _, _ = dynamics.derive_seeds(SEED, 3)
  other, _ = dynamics.barker_update(theta, g, 0.6, first, direction_seed,
                                    **kwargs)
  assert not np.allclose(other[0], got[0])


# --- one step of the multi-step Barker proposal -------------------------------


def sum_parts(parts):
  return [p.reshape(CHAINS, -1) for p in parts]


def per_chain(parts):
  return sum(p.sum(-1) for p in parts)


@pytest.mark.parametrize("distribution", ["bimodal", "gaussian"])
@pytest.mark.parametrize("reverse", ["same", "independent"])
def test_barker_proposal_step_moves_and_scores_with_the_documented_seeds(
    distribution, reverse):
  theta = const(draws(44), tf.float64)
  fake = FakeEnergy()
  new, rho, energy, gradient, new_gradient, next_seed = (
      dynamics.barker.barker_proposal_step(
          theta, 0.5, SEED, fake, increment_distribution=distribution,
          reverse_minibatch=reverse, batch_ndims=1))
  batch, increment, direction, reverse_seed, expected_next = (
      random_lib.split_seed(SEED, 5))
  np.testing.assert_array_equal(next_seed, expected_next)
  # Two evaluations: at x_t on the batch seed, at x_{t+1} on the batch
  # seed again ("same") or on another one ("independent").
  assert len(fake.calls) == 2
  (x0, seed0), (x1, seed1) = fake.calls
  np.testing.assert_array_equal(seed0, batch)
  if reverse == "same":
    np.testing.assert_array_equal(seed1, batch)
  else:
    np.testing.assert_array_equal(seed1, reverse_seed)
    assert not np.array_equal(seed1, seed0)
  for a, b in zip(x0, theta):
    np.testing.assert_array_equal(a, b)
  # The move: barker_update (vanilla) with the gradient at x_t and the
  # split's increment and direction seeds.
  expected, _ = dynamics.barker_update(
      theta, [fake.lam * x + fake.shift(batch) for x in theta], 0.5,
      increment, direction, "vanilla", distribution)
  check(new, [x.numpy() for x in expected], tf.float64)
  for a, b in zip(x1, new):
    np.testing.assert_array_equal(a, b)
  # The energies and gradients it returns are the fake's.
  c0, c1 = fake.shift(seed0), fake.shift(seed1)
  x, y = [p.numpy() for p in theta], [p.numpy() for p in new]
  check(gradient, [fake.lam * p + c0 for p in x], tf.float64)
  check(new_gradient, [fake.lam * p + c1 for p in y], tf.float64)
  np.testing.assert_allclose(
      energy, per_chain(sum_parts([0.5 * fake.lam * p * p + c0 * p
                                   for p in x])), rtol=1e-12)
  # rho = barker_log_proposal_ratio: the softplus terms, per chain.
  softplus = lambda v: np.logaddexp(0., v)  # noqa: E731
  expected_rho = sum(
      (softplus((b - a) * (fake.lam * a + c0))
       - softplus(-(b - a) * (fake.lam * b + c1))).reshape(CHAINS, -1).sum(-1)
      for a, b in zip(x, y))
  assert rho.shape == (CHAINS,)
  np.testing.assert_allclose(rho, expected_rho, rtol=1e-12, atol=1e-12)


def test_barker_proposal_step_same_and_independent_differ_only_in_reverse():
  theta = const(draws(45), tf.float64)
  same = dynamics.barker.barker_proposal_step(
      theta, 0.5, SEED, FakeEnergy(), reverse_minibatch="same",
      batch_ndims=1)
  independent = dynamics.barker.barker_proposal_step(
      theta, 0.5, SEED, FakeEnergy(), reverse_minibatch="independent",
      batch_ndims=1)
  for i in (0, 2, 3, 5):  # Move, energy, gradient, next seed.
    for a, b in zip(tf.nest.flatten(same[i]),
                    tf.nest.flatten(independent[i])):
      np.testing.assert_array_equal(a, b)
  assert not np.allclose(same[1], independent[1])  # rho.
  assert not np.allclose(same[4][0], independent[4][0])  # grad at x_{t+1}.


def test_check_increment_distribution_accepts_the_two_laws_only():
  for name in dynamics.BARKER_INCREMENT_DISTRIBUTIONS:
    dynamics.barker.check_increment_distribution(name)
  for name in ("uniform", "Bimodal", None, ""):
    with pytest.raises(ValueError, match="increment_distribution"):
      dynamics.barker.check_increment_distribution(name)


def test_sgbd_variants_and_reverse_minibatches_are_the_documented_names():
  assert dynamics.barker.SGBD_VARIANTS == ("vanilla", "corrected", "extreme")
  assert dynamics.barker.REVERSE_MINIBATCHES == ("same", "independent")
  theta = tf.zeros([2000], tf.float64)
  g = tf.constant(np.random.default_rng(46).normal(size=2000))
  tau = tf.ones([2000], tf.float64)
  moves = [dynamics.barker_update(
      theta, g, 0.5, INCREMENT_SEED, DIRECTION_SEED, variant,
      noise_std=tau, noise_variance=tau, noise_ema_weight=0.5)[0].numpy()
           for variant in dynamics.barker.SGBD_VARIANTS]
  # Three different rules on the same draws.
  assert not np.array_equal(moves[0], moves[1])
  assert not np.array_equal(moves[0], moves[2])
  assert not np.array_equal(moves[1], moves[2])
  theta = const(draws(46), tf.float64)
  for reverse in dynamics.barker.REVERSE_MINIBATCHES:
    fake = FakeEnergy()
    dynamics.barker.barker_proposal_step(theta, 0.5, SEED, fake,
                                         reverse_minibatch=reverse)
    assert len(fake.calls) == 2


@pytest.mark.parametrize("name", ["Vanilla", "exact", "", None, 1])
def test_barker_update_refuses_a_variant_it_does_not_know(name):
  # Any other name used to take the corrected variant's branch silently.
  with pytest.raises(ValueError, match="`variant` must be one of"):
    dynamics.barker_update(
        tf.zeros([2]), tf.ones([2]), 0.5, increment_seed=[0, 1],
        direction_seed=[0, 2], variant=name)


def test_the_three_variants_move_every_coordinate_by_the_increment():
  for name in dynamics.barker.SGBD_VARIANTS:
    theta, _ = dynamics.barker_update(
        tf.zeros([3]), tf.ones([3]), 0.5, increment_seed=[0, 1],
        direction_seed=[0, 2], variant=name, noise_std=tf.zeros([3]),
        noise_variance=tf.zeros([3]), noise_ema_weight=0.5)
    increment = dynamics.barker_increment_like(tf.zeros([3]), 0.5, [0, 1])
    np.testing.assert_allclose(np.abs(theta), np.abs(increment), rtol=1e-6,
                               err_msg=name)
