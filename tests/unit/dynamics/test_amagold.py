"""AMAGOLD's update rules of `dynamics` (Zhang et al. 2020, Algorithm 2,
lines 12-13) against numpy: the time-symmetric momentum kick and the energy
accumulator, and the accumulator's documented identities (a frictionless
kick is exactly reversible, so K(r') - K(r) + increment = 0; over a
trajectory with exact gradients U(theta) - U(theta*) + rho is HMC's log
acceptance; with friction it is the log density ratio of the reverse and
forward noise)."""

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from tfp_sgmcmc import dynamics

CHAINS = 3
SHAPES = [(CHAINS, 4), (CHAINS, 2, 2)]  # Two parts, a leading chain axis.
TOL = {tf.float32: dict(rtol=1e-6, atol=1e-6),
       tf.float64: dict(rtol=1e-12, atol=1e-12)}


def draws(seed, scale=1.):
  rng = np.random.default_rng(seed)
  return [scale * rng.normal(size=s) for s in SHAPES]


def const(parts, dtype):
  return [tf.constant(p, dtype) for p in parts]


def f64(parts, dtype):
  """The parts as the function sees them (rounded to `dtype`), in float64."""
  return [tf.cast(tf.constant(p, dtype), tf.float64).numpy() for p in parts]


def per_chain_sum(parts):
  return sum(np.reshape(p, (CHAINS, -1)).sum(-1) for p in parts)


PER_CHAIN = [np.array([0.05, 0.011, 0.2]).reshape(3, 1),
             np.array([0.03, 0.07, 0.002]).reshape(3, 1, 1)]
# (argument, the per-part values the reference uses)
STEP_SIZES = {"scalar": (0.07, [0.07, 0.07]),
              "per_part": ([0.07, 0.013], [0.07, 0.013]),
              "per_chain": (PER_CHAIN, PER_CHAIN)}


def step_size_arg(name, dtype):
  arg, _ = STEP_SIZES[name]
  return const(arg, dtype) if name == "per_chain" else arg


# --- the momentum kick --------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("friction,sigma", [(0., 1.), (0.7, 1.), (2.5, 1.6)])
def test_amagold_momentum_solves_the_time_symmetric_kick(
    dtype, step, friction, sigma):
  r, g, xi = draws(0, sigma), draws(1, 3.), draws(2)
  got = dynamics.amagold_momentum(const(r, dtype), const(g, dtype),
                                  step_size_arg(step, dtype), friction,
                                  const(xi, dtype), momentum_std=sigma)
  r, g, xi = f64(r, dtype), f64(g, dtype), f64(xi, dtype)
  for r_new, m, d, x, eps in zip(got, r, g, xi, STEP_SIZES[step][1]):
    assert r_new.dtype == dtype and r_new.shape == m.shape
    # Algorithm 2, line 12: r' = r - eps grad U~ - eps beta (r + r') + eta,
    # eta ~ N(0, 4 eps beta sigma^2), solved for r'.
    eta = np.sqrt(4. * eps * friction) * sigma * x
    expected = (m - eps * d - eps * friction * m + eta) / (1. + eps * friction)
    np.testing.assert_allclose(r_new.numpy(), expected, **TOL[dtype])
    # The implicit equation itself holds for the returned r'.
    r_new = r_new.numpy().astype(np.float64)
    np.testing.assert_allclose(
        r_new, m - eps * d - eps * friction * (m + r_new) + eta, **TOL[dtype])


def test_amagold_momentum_without_friction_is_the_leapfrog_kick():
  r, g, xi = (const(draws(s), tf.float64) for s in (3, 4, 5))
  got = dynamics.amagold_momentum(r, g, [0.3, 0.05], 0., xi, 2.)
  for r_new, m, d, eps in zip(got, r, g, [0.3, 0.05]):
    np.testing.assert_allclose(r_new, m - eps * d, rtol=1e-14)


@pytest.mark.parametrize("friction,sigma", [(0.4, 1.), (3., 0.6)])
def test_amagold_momentum_leaves_n_0_sigma2_invariant_without_gradient(
    friction, sigma):
  # r' = A r + B xi with g = 0: N(0, sigma^2) is stationary exactly when
  # A^2 sigma^2 + B^2 = sigma^2 (friction and noise in balance). Read A and
  # B off the function with unit inputs.
  eps, one, zero = 0.2, tf.ones([1], tf.float64), tf.zeros([1], tf.float64)
  a = dynamics.amagold_momentum(one, zero, eps, friction, zero, sigma)
  b = dynamics.amagold_momentum(zero, zero, eps, friction, one, sigma)
  np.testing.assert_allclose(a ** 2 * sigma ** 2 + b ** 2, [sigma ** 2],
                             rtol=1e-13)


def test_amagold_momentum_in_sgd_units_matches_appendix_f():
  # v = eps sigma^-2 r, b = eps beta, h = eps^2 sigma^-2:
  # v' = ((1 - b) v - h grad U~ + 2 sqrt(b h) xi) / (1 + b).
  eps, beta, sigma = 0.15, 1.3, 1.8
  r, g, xi = draws(6, sigma), draws(7), draws(8)
  got = dynamics.amagold_momentum(const(r, tf.float64), const(g, tf.float64),
                                  eps, beta, const(xi, tf.float64), sigma)
  b, h = eps * beta, eps ** 2 / sigma ** 2
  for r_new, m, d, x in zip(got, r, g, xi):
    v = eps / sigma ** 2 * m
    v_new = ((1. - b) * v - h * d + 2. * np.sqrt(b * h) * x) / (1. + b)
    np.testing.assert_allclose(eps / sigma ** 2 * r_new.numpy(), v_new,
                               rtol=1e-12, atol=1e-14)


# --- the energy accumulator ---------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("sigma", [1., 1.6])
def test_energy_accumulator_increment_matches_algorithm_2_line_13(
    dtype, step, sigma):
  g, r, r_new = draws(9, 3.), draws(10), draws(11)
  got = dynamics.energy_accumulator_increment(
      const(g, dtype), const(r, dtype), const(r_new, dtype),
      step_size_arg(step, dtype), momentum_std=sigma, batch_ndims=1)
  total = dynamics.energy_accumulator_increment(
      const(g, dtype), const(r, dtype), const(r_new, dtype),
      step_size_arg(step, dtype), momentum_std=sigma)
  g, r, r_new = f64(g, dtype), f64(r, dtype), f64(r_new, dtype)
  # rho' - rho = 1/2 eps sigma^-2 grad U~^T (r + r'), per chain.
  expected = per_chain_sum(
      0.5 * np.broadcast_to(eps, d.shape) * d * (m + m_new) / sigma ** 2
      for d, m, m_new, eps in zip(g, r, r_new, STEP_SIZES[step][1]))
  assert got.dtype == dtype and got.shape == (CHAINS,)
  np.testing.assert_allclose(got, expected, **TOL[dtype])
  assert total.shape == ()
  np.testing.assert_allclose(total, expected.sum(), **TOL[dtype])


@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("sigma", [1., 1.6])
def test_frictionless_kick_is_reversible_so_k_new_minus_k_plus_rho_is_zero(
    step, sigma):
  # beta = 0: the kick r -> r' = r - eps grad U is deterministic and its
  # momentum-flipped reverse -r' -> -r is the same kick, so the log density
  # ratio of reverse over forward, K(r') - K(r) + increment, is 0.
  g, r = const(draws(12, 3.), tf.float64), const(draws(13, sigma), tf.float64)
  eps = step_size_arg(step, tf.float64)
  r_new = dynamics.amagold_momentum(r, g, eps, 0., [tf.zeros_like(p)
                                                    for p in r], sigma)
  rho = dynamics.energy_accumulator_increment(g, r, r_new, eps, sigma,
                                              batch_ndims=1).numpy()
  kinetic = lambda parts: per_chain_sum(  # noqa: E731
      [p.numpy() ** 2 for p in parts]) / (2. * sigma ** 2)
  np.testing.assert_allclose(kinetic(r_new) - kinetic(r) + rho,
                             np.zeros(CHAINS), atol=1e-12)
  assert np.min(np.abs(rho)) > 0.01  # Not vacuous.


def test_frictionless_trajectory_gives_hmcs_log_acceptance():
  # U(theta) = 1/2 theta^T diag(lam) theta, exact gradients, beta = 0, mass
  # sigma^2: a leapfrog trajectory (half drift, T kicks and drifts, the
  # last drift a half one) built from amagold_momentum and drift. Then
  # U(theta) - U(theta*) + rho, the log of eq. (6), is
  # H(theta, r) - H(theta*, r*), HMC's log acceptance, computed here
  # from a numpy leapfrog.
  lam, sigma, eps, steps = np.array([0.5, 2., 4.]), 1.4, 0.3, 7
  rng = np.random.default_rng(14)
  theta0, r0 = rng.normal(size=3), sigma * rng.normal(size=3)
  u = lambda x: 0.5 * np.sum(lam * x * x)  # noqa: E731

  theta = tf.constant(theta0 + 0.5 * eps / sigma ** 2 * r0)
  r, rho = tf.constant(r0), 0.
  for t in range(steps):
    g = lam * theta
    r_new = dynamics.amagold_momentum(r, g, eps, 0., tf.zeros_like(r), sigma)
    rho += dynamics.energy_accumulator_increment(g, r, r_new, eps,
                                                 sigma).numpy()
    drift = eps / sigma ** 2 * (0.5 if t == steps - 1 else 1.)
    theta, r = dynamics.drift(theta, r_new, drift), r_new

  # The same leapfrog in numpy (position flow theta' = theta + eps M^-1 r).
  x, p = theta0 + 0.5 * eps / sigma ** 2 * r0, r0.copy()
  for t in range(steps):
    p = p - eps * lam * x
    x = x + eps / sigma ** 2 * p * (0.5 if t == steps - 1 else 1.)
  np.testing.assert_allclose(theta, x, rtol=1e-13)
  np.testing.assert_allclose(r, p, rtol=1e-13)
  kinetic = lambda q: np.sum(q * q) / (2. * sigma ** 2)  # noqa: E731
  log_acceptance = (u(theta0) + kinetic(r0)) - (u(x) + kinetic(p))
  np.testing.assert_allclose(u(theta0) - u(x) + rho, log_acceptance,
                             rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("step", ["scalar", "per_part", "per_chain"])
def test_stochastic_kick_increment_is_the_reverse_over_forward_noise_density(
    step):
  # beta > 0: K(r') - K(r) + increment = log p(eta_rev) - log p(eta_fwd),
  # eta the N(0, 4 eps beta sigma^2) noise that makes the forward kick
  # r -> r' and its momentum-flipped reverse -r' -> -r (the single-tensor
  # case is tests/test_amagold.py's; here per part and per chain).
  beta, sigma = 0.9, 1.3
  g, r, xi = draws(15, 2.), draws(16, sigma), draws(17)
  eps_arg, eps_values = step_size_arg(step, tf.float64), STEP_SIZES[step][1]
  r_new = dynamics.amagold_momentum(const(r, tf.float64),
                                    const(g, tf.float64), eps_arg, beta,
                                    const(xi, tf.float64), sigma)
  rho = dynamics.energy_accumulator_increment(
      const(g, tf.float64), const(r, tf.float64), r_new, eps_arg, sigma,
      batch_ndims=1).numpy()
  r_new = [p.numpy() for p in r_new]
  log_ratio = np.zeros(CHAINS)
  for d, m, m_new, eps in zip(g, r, r_new, eps_values):
    a, std = eps * beta, np.sqrt(4. * eps * beta) * sigma
    std = np.broadcast_to(std, d.shape)
    # (1 + a) r' = (1 - a) r - eps g + eta, for each direction.
    eta_fwd = (1. + a) * m_new - (1. - a) * m + eps * d
    eta_rev = (1. + a) * (-m) - (1. - a) * (-m_new) + eps * d
    log_ratio += per_chain_sum([
        scipy.stats.norm.logpdf(eta_rev, 0., std)
        - scipy.stats.norm.logpdf(eta_fwd, 0., std)])
  kinetic = lambda parts: per_chain_sum(  # noqa: E731
      [p ** 2 for p in parts]) / (2. * sigma ** 2)
  np.testing.assert_allclose(kinetic(r_new) - kinetic(r) + rho, log_ratio,
                             rtol=1e-10, atol=1e-10)
