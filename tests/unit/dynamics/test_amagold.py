"""AMAGOLD's update rules of `dynamics` (Zhang et al. 2020, Algorithm 2,
lines 12-13) against numpy: the time-symmetric momentum kick and the energy
accumulator, and the accumulator's documented identities (a frictionless
kick is exactly reversible, so K(r') - K(r) + increment = 0; over a
trajectory with exact gradients U(theta) - U(theta*) + rho is HMC's log
acceptance; with friction it is the log density ratio of the reverse and
forward noise). Then a proposal one piece at a time: proposal_start
(momentum drawn from the first derived seed or carried, the half drift,
the loop seed), leapfrog_seeds (walk_seed, then derive_seeds), leapfrog_step
(full drifts, a half one at t = T - 1, rho accumulated in its own dtype),
all of them composed into a trajectory; Appendix F's units and the
argument checks."""

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from tfp_sgmcmc import dynamics
from .reference import CHAINS, STEP_SIZES, TOL, check, const, draws, f64
from .reference import per_chain_sum, step_size_arg


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


# --- a proposal, one piece at a time ------------------------------------------


SEED = tf.constant([123, -456])


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("sigma", [1., 1.6])
@pytest.mark.parametrize("resample", [True, False])
def test_proposal_start_draws_or_carries_r_and_half_drifts_by_eps_over_sigma2(
    dtype, step, sigma, resample):
  theta, r = draws(30), draws(31, sigma)
  got_r, got_theta, loop_seed = dynamics.proposal_start(
      const(theta, dtype), const(r, dtype), step_size_arg(step, dtype),
      sigma, resample, SEED)
  momentum_seed, expected_loop_seed = dynamics.derive_seeds(SEED, 2)
  np.testing.assert_array_equal(loop_seed, expected_loop_seed)
  if resample:  # r ~ N(0, sigma^2 I) from the first derived seed.
    r = [sigma * z.numpy().astype(np.float64)
         for z in dynamics.standard_normal_like(const(r, dtype),
                                                momentum_seed)]
  else:
    r = f64(r, dtype)
  check(got_r, r, dtype)
  # theta_0 = theta + 1/2 eps sigma^-2 r_{-1/2}.
  check(got_theta, [t + 0.5 * eps / sigma ** 2 * m for t, m, eps in
                    zip(f64(theta, dtype), r, STEP_SIZES[step][1])], dtype)


def test_proposal_start_resampled_momentum_ignores_the_carried_one():
  theta = const(draws(32), tf.float64)
  a = dynamics.proposal_start(theta, const(draws(33), tf.float64), 0.1, 1.3,
                              True, SEED)
  b = dynamics.proposal_start(theta, const(draws(34, 7.), tf.float64), 0.1,
                              1.3, True, SEED)
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_array_equal(x, y)


def test_leapfrog_seeds_walk_the_loop_seed_then_derive_batch_and_noise():
  loop_seed = dynamics.derive_seeds(SEED, 2)[1]
  seen = set()
  for _ in range(6):
    next_seed, batch_seed, noise_seed = dynamics.leapfrog_seeds(loop_seed)
    walked, step_seed = dynamics.walk_seed(loop_seed)
    expected_batch, expected_noise = dynamics.derive_seeds(step_seed, 2)
    np.testing.assert_array_equal(next_seed, walked)
    np.testing.assert_array_equal(batch_seed, expected_batch)
    np.testing.assert_array_equal(noise_seed, expected_noise)
    seen |= {tuple(np.asarray(s)) for s in (batch_seed, noise_seed)}
    loop_seed = next_seed
  assert len(seen) == 12  # A new minibatch and new noise at every step.


def leapfrog_reference(t, theta, r, g, xi, eps, beta, sigma, num_steps):
  """Algorithm 2, lines 12-14: the kick, rho's increment, the drift (a half
  one after the last kick)."""
  a = eps * beta
  r_new = ((1. - a) * r - eps * g + np.sqrt(4. * a) * sigma * xi) / (1. + a)
  increment = per_chain_sum(
      [0.5 * np.broadcast_to(eps, g.shape) * g * (r + r_new) / sigma ** 2])
  drift = eps / sigma ** 2 * (0.5 if t == num_steps - 1 else 1.)
  return theta + drift * r_new, r_new, increment


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("rho_dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("t,num_steps", [(0, 4), (2, 4), (3, 4), (0, 1)])
def test_leapfrog_step_kicks_accumulates_rho_and_drifts_half_at_the_end(
    dtype, rho_dtype, step, t, num_steps):
  theta, r, g = draws(35), draws(36, 1.6), draws(37, 3.)
  beta, sigma = 0.7, 1.6
  rho0 = np.array([0.25, -1.5, 3.])
  noise_seed = tf.constant([5, 6])
  got_theta, got_r, got_rho = dynamics.leapfrog_step(
      tf.constant(t), const(theta, dtype), const(r, dtype),
      tf.constant(rho0, rho_dtype), const(g, dtype),
      step_size_arg(step, dtype), beta, sigma, num_steps, noise_seed,
      batch_ndims=1)
  xi = [z.numpy().astype(np.float64) for z in dynamics.standard_normal_like(
      const(r, dtype), noise_seed)]
  exp_theta, exp_r, exp_rho = [], [], rho0.copy()
  for x, m, d, z, eps in zip(f64(theta, dtype), f64(r, dtype), f64(g, dtype),
                             xi, STEP_SIZES[step][1]):
    x, m, inc = leapfrog_reference(t, x, m, d, z, eps, beta, sigma, num_steps)
    exp_theta.append(x)
    exp_r.append(m)
    exp_rho += inc
  check(got_r, exp_r, dtype)
  check(got_theta, exp_theta, dtype)
  # rho in its own dtype; the increment summed in the state's.
  assert got_rho.dtype == rho_dtype and got_rho.shape == (CHAINS,)
  tol = TOL[tf.float32] if tf.float32 in (dtype, rho_dtype) else TOL[
      tf.float64]
  np.testing.assert_allclose(got_rho, exp_rho, **tol)


def test_proposal_from_its_pieces_is_the_numpy_trajectory_with_those_seeds():
  # proposal_start, then T = 5 leapfrog_steps with leapfrog_seeds' noise,
  # U = sum lam theta^2 / 2: the numpy trajectory with the same draws.
  lam, eps, beta, sigma, num_steps = 1.8, 0.12, 0.6, 1.3, 5
  theta, r = const(draws(38), tf.float64), const(draws(39), tf.float64)
  r, theta, loop_seed = dynamics.proposal_start(theta, r, eps, sigma, True,
                                                SEED)
  x, m = [p.numpy() for p in theta], [p.numpy() for p in r]
  rho, exp_rho = tf.zeros([CHAINS], tf.float64), np.zeros(CHAINS)
  for t in range(num_steps):
    loop_seed, _, noise_seed = dynamics.leapfrog_seeds(loop_seed)
    xi = [z.numpy() for z in dynamics.standard_normal_like(r, noise_seed)]
    theta, r, rho = dynamics.leapfrog_step(
        t, theta, r, rho, [lam * p for p in theta], eps, beta, sigma,
        num_steps, noise_seed, batch_ndims=1)
    for i in range(2):
      x[i], m[i], inc = leapfrog_reference(t, x[i], m[i], lam * x[i], xi[i],
                                           eps, beta, sigma, num_steps)
      exp_rho += inc
  check(theta, x, tf.float64)
  check(r, m, tf.float64)
  np.testing.assert_allclose(rho, exp_rho, rtol=1e-12, atol=1e-12)


# --- units and argument checks ------------------------------------------------


@pytest.mark.parametrize("h,b", [(1e-4, 0.), (0.04, 0.1), (5e-4 / 50000,
                                                           5e-6)])
def test_sgd_parameters_to_amagold_is_appendix_fs_change_of_units(h, b):
  eps, beta, sigma = dynamics.amagold.sgd_parameters_to_amagold(h, b)
  assert all(isinstance(v, float) for v in (eps, beta, sigma))
  np.testing.assert_allclose([eps, beta, sigma],
                             [np.sqrt(h), b / np.sqrt(h), 1.], rtol=1e-15)
  # In those units the kick is Appendix F's v-update (v = eps sigma^-2 r).
  r, g, xi = draws(40), draws(41), draws(42)
  got = dynamics.amagold_momentum(const(r, tf.float64), const(g, tf.float64),
                                  eps, beta, const(xi, tf.float64), sigma)
  for r_new, m, d, x in zip(got, r, g, xi):
    v_new = ((1. - b) * eps * m - h * d + 2. * np.sqrt(b * h) * x) / (1. + b)
    np.testing.assert_allclose(eps * r_new.numpy(), v_new, rtol=1e-11,
                               atol=1e-15)
  # Other constructor arguments pass.
  assert dynamics.amagold.sgd_parameters_to_amagold(
      h, b, dict(num_leapfrog_steps=3, seed=1))[0] == eps


@pytest.mark.parametrize("args,error,match", [
    ((0., 0.1), ValueError, "learning_rate"),
    ((-1e-3, 0.1), ValueError, "learning_rate"),
    ((None, 0.1), TypeError, "learning_rate"),
    ((1e-3, -0.1), ValueError, "momentum_decay"),
    ((1e-3, "0.1"), TypeError, "momentum_decay"),
    ((1e-3, 0.1, dict(step_size=0.1)), TypeError, "do not pass them"),
    ((1e-3, 0.1, dict(friction=0.1)), TypeError, "do not pass them"),
    ((1e-3, 0.1, dict(momentum_std=1.)), TypeError, "do not pass them"),
])
def test_sgd_parameters_to_amagold_rejects_bad_units_and_double_settings(
    args, error, match):
  with pytest.raises(error, match=match):
    dynamics.amagold.sgd_parameters_to_amagold(*args)


@pytest.mark.parametrize("value", [1, 10, np.int32(4), np.int64(1),
                                   tf.constant(5)])
def test_check_num_leapfrog_steps_accepts_integers_from_1(value):
  # A scalar integer tensor too: the warm-up draws a T per test.
  dynamics.amagold.check_num_leapfrog_steps(value)


@pytest.mark.parametrize("value,error", [
    (0, ValueError), (-3, ValueError), (np.int64(0), ValueError),
    (True, TypeError), (2., TypeError), ("5", TypeError), (None, TypeError),
    (tf.constant(5.), TypeError), (tf.constant([5]), TypeError)])
def test_check_num_leapfrog_steps_rejects_anything_else(value, error):
  with pytest.raises(error, match="num_leapfrog_steps"):
    dynamics.amagold.check_num_leapfrog_steps(value)


def test_check_amagold_parameters_accepts_valid_arguments():
  dynamics.amagold.check_amagold_parameters(5, 0., 1., True)
  dynamics.amagold.check_amagold_parameters(1, 2.5, 0.3, False)


@pytest.mark.parametrize("args,error,match", [
    ((0, 0.1, 1., True), ValueError, "num_leapfrog_steps"),
    ((2.5, 0.1, 1., True), TypeError, "num_leapfrog_steps"),
    ((5, -0.1, 1., True), ValueError, "friction"),
    ((5, "0.1", 1., True), TypeError, "friction"),
    ((5, 0.1, 0., True), ValueError, "momentum_std"),
    ((5, 0.1, -1., True), ValueError, "momentum_std"),
    ((5, 0.1, 1., 1), TypeError, "resample_momentum"),
    ((5, 0.1, 1., "yes"), TypeError, "resample_momentum"),
    ((5, 0.1, 1., None), TypeError, "resample_momentum"),
])
def test_check_amagold_parameters_rejects_each_bad_argument(args, error,
                                                            match):
  with pytest.raises(error, match=match):
    dynamics.amagold.check_amagold_parameters(*args)
