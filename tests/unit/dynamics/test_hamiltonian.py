"""Hamiltonian update rules of `dynamics` against numpy written from the
papers: the drift, SGHMC's Euler step (Chen et al. 2014, Algorithm 2), the
B-O-B core of the symmetric splitting integrator (Chen, Ding & Carin 2015),
the kinetic energy and SGNHT (Ding et al. 2014, Algorithm 2); sgnht_step's
event_ndims check; the whole steps (sghmc_update, sgnht_update) and their
pieces (is_refresh_step, refresh_momentum, gradient_position) with the
documented seeds, composed into ABOBA and Euler steps; SGD-with-momentum
units (Section 3.3) and SGHMC's argument checks."""

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc import dynamics
from .reference import CHAINS, SHAPES, STEP_SIZES, TOL, check, const, draws, f64
from .reference import step_size_arg


# --- drift --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
def test_drift_is_the_position_flow_theta_plus_h_r(dtype, step):
  theta, r = draws(0), draws(1)
  got = dynamics.drift(const(theta, dtype), const(r, dtype),
                       step_size_arg(step, dtype))
  theta, r = f64(theta, dtype), f64(r, dtype)
  check(got, [t + h * m for t, m, h in zip(theta, r, STEP_SIZES[step][1])],
        dtype)


# --- SGHMC, Euler form --------------------------------------------------------


def sghmc_reference(r, g, xi, h, c, t, b_hat):
  """Chen et al. (2014), Algorithm 2, in momentum units (v = h r,
  eta = h^2, alpha = h C, beta-hat = h B-hat):

      v' = v - eta grad U~ - alpha v + N(0, 2 (alpha - beta-hat) eta),

  at temperature T (friction and noise in balance at C T), with the
  injected variance never negative."""
  v = h * r
  eta, alpha, beta_hat = h * h, h * c, h * b_hat
  variance = np.maximum(2. * (alpha * t - beta_hat) * eta, 0.)
  return (v - eta * g - alpha * v + np.sqrt(variance) * xi) / h


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("friction,temperature,noise_estimate",
                         [(0.8, 1., 0.), (2.3, 0.4, 0.3), (0., 1., 0.)])
def test_sghmc_euler_momentum_matches_algorithm_2(
    dtype, step, friction, temperature, noise_estimate):
  r, g, xi = draws(2), draws(3, 4.), draws(4)
  got = dynamics.sghmc_euler_momentum(
      const(r, dtype), const(g, dtype), step_size_arg(step, dtype), friction,
      const(xi, dtype), noise_estimate=noise_estimate,
      temperature=temperature)
  r, g, xi = f64(r, dtype), f64(g, dtype), f64(xi, dtype)
  expected = [sghmc_reference(*p, h, friction, temperature, noise_estimate)
              for *p, h in zip(r, g, xi, STEP_SIZES[step][1])]
  check(got, expected, dtype)


def test_sghmc_euler_momentum_clips_the_injected_variance_at_zero():
  # A per-coordinate B-hat: above C T on some coordinates (no noise there,
  # rather than a NaN), below it on others.
  r, g, xi = draws(5), draws(6), draws(7)
  friction, temperature, h = 1.5, 0.6, 0.05  # C T = 0.9.
  b_hat = [np.where(np.arange(np.prod(s)).reshape(s) % 2 == 0, 2.5, 0.2)
           for s in SHAPES]
  got = dynamics.sghmc_euler_momentum(
      const(r, tf.float64), const(g, tf.float64), h, friction,
      const(xi, tf.float64), noise_estimate=const(b_hat, tf.float64),
      temperature=temperature)
  expected = [sghmc_reference(*p, h, friction, temperature, b)
              for *p, b in zip(r, g, xi, b_hat)]
  check(got, expected, tf.float64)
  # Where B-hat > C T, r' is the noiseless r - h grad U - h C r.
  noiseless = r[0] - h * g[0] - h * friction * r[0]
  clipped = b_hat[0] > friction * temperature
  np.testing.assert_allclose(got[0].numpy()[clipped], noiseless[clipped],
                             rtol=1e-13)
  # A scalar B-hat above C T: the noise does not enter at all.
  quiet = dynamics.sghmc_euler_momentum(
      const(r, tf.float64), const(g, tf.float64), h, friction,
      const(xi, tf.float64), noise_estimate=5., temperature=temperature)
  check(quiet, [m - h * d - h * friction * m for m, d in zip(r, g)],
        tf.float64)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("noise_estimate", [0., 0.3, 9.])
def test_sghmc_euler_momentum_refresh_folds_a_fresh_momentum_into_the_noise(
    dtype, step, noise_estimate):
  r, g, xi = draws(8), draws(9, 4.), draws(10)
  friction, temperature, t0 = 2.3, 0.4, 0.7
  args = (const(g, dtype), step_size_arg(step, dtype), friction,
          const(xi, dtype))
  kwargs = dict(noise_estimate=noise_estimate, temperature=temperature,
                refresh_temperature=t0)
  refreshed = dynamics.sghmc_euler_momentum(
      const(r, dtype), *args, refresh=tf.constant(True), **kwargs)
  kept = dynamics.sghmc_euler_momentum(
      const(r, dtype), *args, refresh=tf.constant(False), **kwargs)
  g, xi, r = f64(g, dtype), f64(xi, dtype), f64(r, dtype)
  # r0 ~ N(0, T0) then r' = (1 - h C) r0 - h grad U~ + N(0, s^2), s^2 the
  # clipped injected variance: r' = -h grad U~ + N(0, (1 - h C)^2 T0 + s^2),
  # here with the step's one standard normal xi.
  expected = []
  for d, x, h in zip(g, xi, STEP_SIZES[step][1]):
    injected = np.maximum(2. * (friction * temperature - noise_estimate) * h,
                          0.)
    expected.append(-h * d + np.sqrt((1. - h * friction) ** 2 * t0
                                     + injected) * x)
  check(refreshed, expected, dtype)
  # refresh=False is the plain step.
  check(kept, [sghmc_reference(m, d, x, h, friction, temperature,
                               noise_estimate)
               for m, d, x, h in zip(r, g, xi, STEP_SIZES[step][1])], dtype)


def test_sghmc_euler_momentum_refresh_ignores_the_old_momentum():
  g, xi = const(draws(11), tf.float64), const(draws(12), tf.float64)
  outs = [dynamics.sghmc_euler_momentum(
      const(draws(seed, 5.), tf.float64), g, 0.1, 1.2, xi,
      refresh=tf.constant(True)) for seed in (13, 14)]
  for a, b in zip(*outs):
    np.testing.assert_array_equal(a, b)


def test_sghmc_euler_momentum_refresh_has_the_documented_law():
  # In distribution: the folded step equals drawing r0 ~ N(0, T0) and taking
  # the plain step with independent noise; compare their variances.
  n, h, c, t, t0 = 200000, 0.2, 1.5, 0.5, 2.
  rng = np.random.default_rng(15)
  folded = dynamics.sghmc_euler_momentum(
      tf.zeros([n], tf.float64), tf.zeros([n], tf.float64), h, c,
      tf.constant(rng.normal(size=n)), temperature=t,
      refresh=tf.constant(True), refresh_temperature=t0).numpy()
  two_draws = dynamics.sghmc_euler_momentum(
      tf.constant(np.sqrt(t0) * rng.normal(size=n)), tf.zeros([n], tf.float64),
      h, c, tf.constant(rng.normal(size=n)), temperature=t).numpy()
  variance = (1 - h * c) ** 2 * t0 + 2 * c * t * h  # 0.98 + 0.3
  for x in (folded, two_draws):
    assert abs(x.var() - variance) < 5 * variance * np.sqrt(2. / n)


# --- SGHMC, symmetric splitting -----------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("friction,temperature,noise_estimate",
                         [(0.8, 1., 0.), (2.3, 0.4, 0.3), (1.5, 0.6, 2.)])
def test_sghmc_splitting_momentum_is_b_o_b_of_chen_ding_carin(
    dtype, step, friction, temperature, noise_estimate):
  r, g, xi = draws(16), draws(17, 4.), draws(18)
  got = dynamics.sghmc_splitting_momentum(
      const(r, dtype), const(g, dtype), step_size_arg(step, dtype), friction,
      const(xi, dtype), noise_estimate=noise_estimate,
      temperature=temperature)
  r, g, xi = f64(r, dtype), f64(g, dtype), f64(xi, dtype)
  expected = []
  for m, d, x, h in zip(r, g, xi, STEP_SIZES[step][1]):
    # B: the friction flow dr = -C r dt solved over h/2.
    m = np.exp(-friction * h / 2.) * m
    # O: the gradient kick and the injected noise over h.
    m = m - h * d + np.sqrt(np.maximum(2. * (friction * temperature
                                      - noise_estimate) * h, 0.)) * x
    # B again.
    expected.append(np.exp(-friction * h / 2.) * m)
  check(got, expected, dtype)


def test_sghmc_splitting_momentum_solves_the_friction_flow_exactly():
  # Without gradient and noise two half-step B's give r exp(-C h) exactly
  # (where Euler's 1 - h C would go negative at h C > 1).
  r = const(draws(19), tf.float64)
  zeros = [tf.zeros_like(p) for p in r]
  got = dynamics.sghmc_splitting_momentum(r, zeros, 0.9, 3., zeros,
                                          noise_estimate=10.)
  check(got, [np.exp(-2.7) * p.numpy() for p in r], tf.float64)


# --- kinetic energy -----------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("sigma", [1., 1.7])
def test_kinetic_energy_is_half_r_squared_over_the_mass(dtype, sigma):
  r = draws(20)
  per_chain = dynamics.kinetic_energy(const(r, dtype), sigma, batch_ndims=1)
  total = dynamics.kinetic_energy(const(r, dtype), sigma)
  r = f64(r, dtype)
  expected = sum((p ** 2).reshape(CHAINS, -1).sum(-1) for p in r) / (
      2. * sigma ** 2)
  assert per_chain.dtype == dtype and per_chain.shape == (CHAINS,)
  np.testing.assert_allclose(per_chain, expected, **TOL[dtype])
  assert total.shape == ()
  np.testing.assert_allclose(total, expected.sum(), **TOL[dtype])
  # K is -log N(r; 0, sigma^2 I) up to its normaliser.
  single = dynamics.kinetic_energy(tf.constant([3., 4.], tf.float64), sigma)
  np.testing.assert_allclose(single, 25. / (2. * sigma ** 2), rtol=1e-15)


# --- SGNHT --------------------------------------------------------------------


def sgnht_reference(theta, r, xi, g, z, h, a, t, batch_rank, refresh=False,
                    t0=1.):
  """Ding et al. (2014), Algorithm 2, at temperature T (their T = 1):

      p'  = p - xi p h - grad U~ h + sqrt(2 A h T) N(0, I)
      th' = th + p' h
      xi' = xi + (p'^T p' / n - T) h,   n = all parameters of a chain.

  With `refresh` p is first drawn from N(0, T0 I) and folded into the
  noise: p' = -grad U~ h + sqrt((1 - xi h)^2 T0 + 2 A h T) z.

  h may be an array broadcasting against each part (one per chain or per
  coordinate): coordinate j then moves with its own h_j, and the thermostat
  by the mean over the chain's coordinates of (p'_j^2 - T) h_j (for one h,
  the line above)."""
  def per_chain(x, part):
    return np.reshape(x, np.shape(x) + (1,) * (part.ndim - batch_rank))
  new_r = []
  for p, d, w in zip(r, g, z):
    if refresh:
      scale = np.sqrt((1. - per_chain(xi, p) * h) ** 2 * t0 + 2. * a * h * t)
      new_r.append(-d * h + scale * w)
    else:
      new_r.append(p - per_chain(xi, p) * p * h - d * h
                   + np.sqrt(2. * a * h * t) * w)
  new_theta = [x + p * h for x, p in zip(theta, new_r)]
  drift = sum(((p ** 2 - t) * h * np.ones_like(p)).reshape(
      np.shape(xi) + (-1,)).sum(-1) for p in new_r)
  n = sum(p[(0,) * batch_rank].size for p in new_r)
  new_xi = xi + drift / n
  return new_theta, new_r, new_xi


# Chain batch shapes: none (one chain), [3] and [2, 3].
BATCHES = {"one_chain": (), "chains": (3,), "chain_grid": (2, 3)}


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("batch", list(BATCHES))
@pytest.mark.parametrize("refresh", [None, False, True])
@pytest.mark.parametrize("temperature,diffusion", [(1., 0.5), (0.3, 2.)])
def test_sgnht_step_matches_ding_et_al_algorithm_2(
    dtype, batch, refresh, temperature, diffusion):
  batch_shape = BATCHES[batch]
  shapes = [batch_shape + (4,), batch_shape + (2, 3)]  # d = 4 + 6 = 10.
  theta, r, g, z = (draws(s, 1., shapes) for s in (21, 22, 23, 24))
  g = [4. * x for x in g]
  xi = np.random.default_rng(25).uniform(-1., 3., size=batch_shape)
  h, t0 = 0.06, 0.8
  kwargs = {} if refresh is None else dict(refresh=tf.constant(refresh),
                                           refresh_temperature=t0)
  got_theta, got_r, got_xi = dynamics.sgnht_step(
      const(theta, dtype), const(r, dtype), tf.constant(xi, dtype),
      const(g, dtype), h, const(z, dtype), diffusion, temperature, **kwargs)
  theta, r, g, z = (f64(p, dtype) for p in (theta, r, g, z))
  xi = f64([xi], dtype)[0]
  exp_theta, exp_r, exp_xi = sgnht_reference(
      theta, r, xi, g, z, h, diffusion, temperature, len(batch_shape),
      refresh=bool(refresh), t0=t0)
  check(got_r, exp_r, dtype)
  check(got_theta, exp_theta, dtype)
  check([got_xi], [np.asarray(exp_xi)], dtype)


@pytest.mark.parametrize("refresh", [False, True])
@pytest.mark.parametrize("h", [
    np.array([[0.02], [0.05], [0.03], [0.06]]),    # One per chain.
    np.array([0.01, 0.02, 0.04, 0.08]),            # One per coordinate.
    np.linspace(0.01, 0.08, 16).reshape(4, 4),     # Per chain and coordinate.
], ids=["per_chain", "per_coordinate", "per_chain_and_coordinate"])
def test_sgnht_step_with_a_step_size_per_chain_or_per_coordinate(h, refresh):
  # Four chains of d = 4: each coordinate moves with its own h_j and the
  # chain's one thermostat by the mean of (r'_j^2 - T) h_j, the drift that
  # keeps exp(-U - |r|^2 / 2T) invariant. The thermostat took h as it came:
  # h per chain (or per chain and coordinate) made it 4 x 4, and h per
  # coordinate gave chain c coordinate c's step, without a word, wherever d
  # equals the number of chains, as here.
  shapes = [(4, 4)]
  theta, r, g, z = (draws(s, 1., shapes) for s in (31, 32, 33, 34))
  xi = np.array([0.7, 1.6, 1.1, 0.4])
  a, t, t0 = 0.5, 0.3, 0.8
  got = dynamics.sgnht_step(
      const(theta), const(r), tf.constant(xi, tf.float64), const(g),
      tf.constant(h, tf.float64), const(z), a, t,
      refresh=tf.constant(refresh), refresh_temperature=t0)
  expected = sgnht_reference(theta, r, xi, g, z, h, a, t, 1,
                             refresh=refresh, t0=t0)
  for got_part, expected_part in zip(got, expected):
    check(tf.nest.flatten(got_part), [np.asarray(x) for x in
                                      tf.nest.flatten(expected_part)],
          tf.float64)


def test_sgnht_thermostat_counts_d_over_all_parts():
  # Each chain's kinetic energy per dimension is exactly T after the step
  # (r' chosen so), so the thermostat stays put; counting d per part, or
  # over one part only, would move it.
  h, t = 0.1, 0.5
  chains = 2
  r_new = [np.full((chains, 3), np.sqrt(t) * 2.), np.zeros((chains, 9))]
  # |r'|^2 / d = 3 * 4 t / 12 = t, with d = 3 + 9 = 12.
  zeros = lambda parts: [tf.zeros_like(tf.constant(p)) for p in parts]  # noqa
  _, got_r, got_xi = dynamics.sgnht_step(
      zeros(r_new), const(r_new, tf.float64), tf.zeros([chains], tf.float64),
      zeros(r_new), h, zeros(r_new), 0., t)
  check(got_r, r_new, tf.float64)
  np.testing.assert_allclose(got_xi, np.zeros(chains), atol=1e-15)
  # Half that kinetic energy: xi' = h (t / 2 - t).
  _, _, got_xi = dynamics.sgnht_step(
      zeros(r_new), const([p / np.sqrt(2.) for p in r_new], tf.float64),
      tf.zeros([chains], tf.float64), zeros(r_new), h, zeros(r_new), 0., t)
  np.testing.assert_allclose(got_xi, np.full(chains, -h * t / 2.),
                             rtol=1e-13)


# --- sgnht_step's event_ndims ------------------------------------------------


SGNHT_SHAPES = [(3, 4), (3, 2, 3)]  # One chain axis; the thermostat is [3].


def _sgnht_args(dtype=tf.float64):
  theta, r, g, z = (const(draws(s, 1., SGNHT_SHAPES), dtype)
                    for s in (50, 51, 52, 53))
  xi = tf.constant([0.2, -0.4, 1.1], dtype)
  return theta, r, xi, g, 0.05, z, 0.7, 0.9


@pytest.mark.parametrize("event_ndims", [[1, 2], (1, 2)])
def test_sgnht_step_takes_an_event_ndims_that_fits_the_thermostat(
    event_ndims):
  args = _sgnht_args()
  default = dynamics.sgnht_step(*args)
  given = dynamics.sgnht_step(*args, event_ndims=event_ndims)
  for a, b in zip(tf.nest.flatten(default), tf.nest.flatten(given)):
    np.testing.assert_array_equal(a, b)
  # One value for all parts, where all parts have that many event axes.
  theta, r, xi, g, h, z, a, t = args
  flat = [p[:, :, 0] for p in (theta[1], r[1], g[1], z[1])]
  parts = [[theta[0], flat[0]], [r[0], flat[1]], xi, [g[0], flat[2]], h,
           [z[0], flat[3]], a, t]
  for x, y in zip(tf.nest.flatten(dynamics.sgnht_step(*parts)),
                  tf.nest.flatten(dynamics.sgnht_step(*parts,
                                                      event_ndims=1))):
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("event_ndims", [
    1,          # Part 2 would have two chain axes.
    2,          # Part 1 would have none.
    [2, 3],     # Both off by one.
    [1, 2, 3],  # Not one per part.
    [1, 1.5],   # Not integers.
    [1., 2.],   # Not integers, though they would fit.
    [0, 1],     # The thermostat is one per chain, not per coordinate.
])
def test_sgnht_step_refuses_an_event_ndims_that_disagrees_with_the_thermostat(
    event_ndims):
  with pytest.raises(ValueError, match="event_ndims"):
    dynamics.sgnht_step(*_sgnht_args(), event_ndims=event_ndims)


def test_sgnht_step_event_ndims_for_a_single_chain_is_the_whole_rank():
  theta, r, g, z = (const(draws(s, 1., [(4,), (2, 3)]), tf.float64)
                    for s in (54, 55, 56, 57))
  xi = tf.constant(0.3, tf.float64)
  a = dynamics.sgnht_step(theta, r, xi, g, 0.05, z, 0.7,
                          event_ndims=[1, 2])
  b = dynamics.sgnht_step(theta, r, xi, g, 0.05, z, 0.7)
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_array_equal(x, y)
  with pytest.raises(ValueError, match="event_ndims"):
    dynamics.sgnht_step(theta, r, xi, g, 0.05, z, 0.7, event_ndims=1)


# --- SGHMC's refresh and gradient position ------------------------------------


@pytest.mark.parametrize("period,refreshing", [
    (None, {0}), (1, set(range(13))), (3, {0, 3, 6, 9, 12}),
    (5, {0, 5, 10})])
def test_is_refresh_step_is_step_0_and_every_multiple_of_the_period(
    period, refreshing):
  for step in range(13):
    for count in (step, tf.constant(step), tf.constant(step, tf.int64)):
      got = dynamics.hamiltonian.is_refresh_step(count, period)
      assert got.dtype == tf.bool and got.shape == ()
      assert bool(got) == (step in refreshing), (step, period)


def momentum_seed(seed):
  """The momentum draw's seed: the step seed's third derived seed (the
  first is the minibatch's, the second the step noise's)."""
  return dynamics.derive_seeds(seed, 3)[2]


SEED = tf.constant([-17, 29])


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("temperature", [1., 0.25, 4.])
@pytest.mark.parametrize("period,step_count,refresh", [
    (None, 0, True), (None, 4, False), (3, 6, True), (3, 7, False)])
def test_refresh_momentum_draws_sqrt_t_times_the_third_derived_normal(
    dtype, temperature, period, step_count, refresh):
  r = const(draws(60, 5.), dtype)
  got = dynamics.hamiltonian.refresh_momentum(
      r, tf.constant(step_count), period, temperature, SEED)
  if refresh:
    z = dynamics.standard_normal_like(r, momentum_seed(SEED))
    expected = [np.sqrt(temperature) * x.numpy().astype(np.float64)
                for x in z]
  else:
    expected = [x.numpy() for x in r]
  check(got, expected, dtype)


def test_refresh_momentum_keeps_a_float64_temperature_at_full_precision():
  # A Python temperature is converted straight to the state's dtype, not
  # through float32 (sqrt(float32(0.4)) would be 1e-8 off).
  r = const(draws(61), tf.float64)
  got = dynamics.hamiltonian.refresh_momentum(r, 0, None, 0.4, SEED)
  z = dynamics.standard_normal_like(r, momentum_seed(SEED))
  check(got, [np.sqrt(0.4) * x.numpy() for x in z], tf.float64)


def test_refresh_momentum_draw_depends_only_on_the_seed():
  # So a caller may draw it ahead of the step (the Keras adapter does).
  a = dynamics.hamiltonian.refresh_momentum(
      const(draws(62), tf.float64), 0, None, 1., SEED)
  b = dynamics.hamiltonian.refresh_momentum(
      const(draws(63, 9.), tf.float64), 0, 4, 1., SEED)
  c = dynamics.hamiltonian.refresh_momentum(
      const(draws(62), tf.float64), 0, None, 1., [-17, 30])
  for x, y, w in zip(a, b, c):
    np.testing.assert_array_equal(x, y)
    assert not np.any(x.numpy() == w.numpy())


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
def test_gradient_position_is_theta_for_euler_and_half_drifted_for_splitting(
    dtype, step):
  theta, r = const(draws(64), dtype), const(draws(65), dtype)
  euler = dynamics.hamiltonian.gradient_position(
      theta, r, step_size_arg(step, dtype), "euler")
  check(euler, [x.numpy() for x in theta], dtype)
  split = dynamics.hamiltonian.gradient_position(
      theta, r, step_size_arg(step, dtype), "splitting")
  theta, r = f64(draws(64), dtype), f64(draws(65), dtype)
  check(split, [t + 0.5 * h * m for t, m, h in
                zip(theta, r, STEP_SIZES[step][1])], dtype)


# --- SGHMC's and SGNHT's whole steps ------------------------------------------


def noise_of(structure, seed):
  """The step noise: the step seed's second derived seed."""
  return [z.numpy().astype(np.float64) for z in dynamics.standard_normal_like(
      structure, dynamics.derive_seeds(seed, 3)[1])]


SGHMC = dict(friction=2.3, noise_estimate=0.3, temperature=0.4)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("refresh", [None, False, True])
def test_sghmc_update_euler_kicks_with_the_second_derived_noise_then_drifts(
    dtype, step, refresh):
  theta, r, g = draws(66), draws(67), draws(68, 4.)
  t0 = 0.7
  kwargs = {} if refresh is None else dict(refresh=tf.constant(refresh),
                                           refresh_temperature=t0)
  got_theta, got_r = dynamics.sghmc_update(
      const(theta, dtype), const(r, dtype), const(g, dtype),
      step_size_arg(step, dtype), integrator="euler", seed=SEED, **SGHMC,
      **kwargs)
  xi = noise_of(const(r, dtype), SEED)
  theta, r, g = (f64(p, dtype) for p in (theta, r, g))
  c, t, b = SGHMC["friction"], SGHMC["temperature"], SGHMC["noise_estimate"]
  exp_r, exp_theta = [], []
  for x, m, d, z, h in zip(theta, r, g, xi, STEP_SIZES[step][1]):
    if refresh:
      # r0 ~ N(0, T0) folded into the noise (sghmc_euler_momentum).
      new = -h * d + np.sqrt((1. - h * c) ** 2 * t0
                             + 2. * (c * t - b) * h) * z
    else:
      new = sghmc_reference(m, d, z, h, c, t, b)
    exp_r.append(new)
    exp_theta.append(x + h * new)
  check(got_r, exp_r, dtype)
  check(got_theta, exp_theta, dtype)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
def test_sghmc_update_splitting_is_b_o_b_then_a_half_drift(dtype, step):
  theta1, r, g = draws(69), draws(70), draws(71, 4.)
  got_theta, got_r = dynamics.sghmc_update(
      const(theta1, dtype), const(r, dtype), const(g, dtype),
      step_size_arg(step, dtype), integrator="splitting", seed=SEED,
      refresh=tf.constant(True), **SGHMC)  # refresh: ignored.
  xi = noise_of(const(r, dtype), SEED)
  theta1, r, g = (f64(p, dtype) for p in (theta1, r, g))
  c, t, b = SGHMC["friction"], SGHMC["temperature"], SGHMC["noise_estimate"]
  exp_r, exp_theta = [], []
  for x, m, d, z, h in zip(theta1, r, g, xi, STEP_SIZES[step][1]):
    decay = np.exp(-c * h / 2.)
    new = decay * (decay * m - h * d + np.sqrt(2. * (c * t - b) * h) * z)
    exp_r.append(new)
    exp_theta.append(x + 0.5 * h * new)  # The second half drift.
  check(got_r, exp_r, dtype)
  check(got_theta, exp_theta, dtype)


@pytest.mark.parametrize("integrator", ["euler", "splitting"])
@pytest.mark.parametrize("step_count", [0, 5, 6])
def test_sghmc_step_composed_of_its_pieces_is_aboba_or_euler_from_one_seed(
    integrator, step_count):
  # A whole SGHMC step as the kernel composes it, for U(theta) = |theta|^2
  # lam / 2 (exact gradient), period 3, against numpy with the documented
  # draws: the fresh momentum sqrt(T) z3 (third derived seed), the step
  # noise z2 (second).
  h, c, t, b, period, lam = 0.09, 1.7, 0.25, 0.2, 3, 2.5
  theta, r = const(draws(72), tf.float64), const(draws(73), tf.float64)
  refresh = dynamics.hamiltonian.is_refresh_step(tf.constant(step_count),
                                                 period)
  start = (dynamics.hamiltonian.refresh_momentum(r, step_count, period, t,
                                                 SEED)
           if integrator == "splitting" else r)
  at = dynamics.hamiltonian.gradient_position(theta, start, h, integrator)
  got_theta, got_r = dynamics.sghmc_update(
      at, start, [lam * x for x in at], h, c, b, t, integrator, SEED,
      refresh=refresh, refresh_temperature=t)

  z2 = noise_of(r, SEED)
  z3 = [x.numpy() for x in dynamics.standard_normal_like(
      r, momentum_seed(SEED))]
  fresh = step_count % period == 0
  exp_theta, exp_r = [], []
  for x, m, w2, w3 in zip(draws(72), draws(73), z2, z3):
    if integrator == "splitting":
      m = np.sqrt(t) * w3 if fresh else m
      x = x + h / 2. * m                                   # A
      m = np.exp(-c * h / 2.) * m                          # B
      m = m - h * lam * x + np.sqrt(2. * (c * t - b) * h) * w2  # O
      m = np.exp(-c * h / 2.) * m                          # B
      x = x + h / 2. * m                                   # A
    else:
      if fresh:  # Drawn (in distribution: folded into the noise).
        m = -h * lam * x + np.sqrt((1. - h * c) ** 2 * t
                                   + 2. * (c * t - b) * h) * w2
      else:
        m = m - h * lam * x - h * c * m + np.sqrt(2. * (c * t - b) * h) * w2
      x = x + h * m
    exp_theta.append(x)
    exp_r.append(m)
  check(got_r, exp_r, tf.float64)
  check(got_theta, exp_theta, tf.float64)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step_count", [0, 1, 5])
def test_sgnht_update_is_sgnht_step_refreshed_at_step_0_with_the_seeds_noise(
    dtype, step_count):
  shapes = [(3, 4), (3, 2, 3)]
  theta, r, g = (draws(s, 1., shapes) for s in (74, 75, 76))
  g = [4. * x for x in g]
  xi = np.array([0.2, -0.4, 1.1])
  h, a, t, t0 = 0.06, 0.5, 0.3, 0.8
  got_theta, got_r, got_xi = dynamics.hamiltonian.sgnht_update(
      const(theta, dtype), const(r, dtype), tf.constant(xi, dtype),
      const(g, dtype), tf.constant(step_count), h, a, t, t0, SEED)
  z = noise_of(const(r, dtype), SEED)
  theta, r, g = (f64(p, dtype) for p in (theta, r, g))
  exp_theta, exp_r, exp_xi = sgnht_reference(
      theta, r, f64([xi], dtype)[0], g, z, h, a, t, 1,
      refresh=step_count == 0, t0=t0)
  check(got_r, exp_r, dtype)
  check(got_theta, exp_theta, dtype)
  check([got_xi], [np.asarray(exp_xi)], dtype)


# --- SGD-with-momentum units and argument checks ------------------------------


@pytest.mark.parametrize("eta,alpha,beta_hat", [
    (1e-4, 0.01, 0.), (0.04, 0.1, 0.05), (2.25, 0.9, 0.3)])
def test_sgd_momentum_to_sghmc_is_section_3_3s_change_of_units(
    eta, alpha, beta_hat):
  h, c, b = dynamics.hamiltonian.sgd_momentum_to_sghmc(eta, alpha, beta_hat)
  assert all(isinstance(v, float) for v in (h, c, b))
  np.testing.assert_allclose([h, c, b], [np.sqrt(eta), alpha / np.sqrt(eta),
                                         beta_hat / np.sqrt(eta)],
                             rtol=1e-15)
  # In those units the Euler step is SGD with momentum, v = h r:
  # v' = v - eta grad U~ - alpha v + N(0, 2 (alpha - beta-hat) eta).
  r, g, xi = draws(77), draws(78), draws(79)
  got = dynamics.sghmc_euler_momentum(
      const(r, tf.float64), const(g, tf.float64), h, c,
      const(xi, tf.float64), noise_estimate=b)
  for r_new, m, d, x in zip(got, r, g, xi):
    v = h * m
    np.testing.assert_allclose(
        h * r_new.numpy(),
        v - eta * d - alpha * v + np.sqrt(2. * (alpha - beta_hat) * eta) * x,
        rtol=1e-12, atol=1e-14)
  assert dynamics.hamiltonian.sgd_momentum_to_sghmc(eta, alpha)[2] == 0.


@pytest.mark.parametrize("args,error,name", [
    ((0., 0.1), ValueError, "learning_rate"),
    ((-1e-3, 0.1), ValueError, "learning_rate"),
    (("0.1", 0.1), TypeError, "learning_rate"),
    ((1e-3, 0.), ValueError, "momentum_decay"),
    ((1e-3, -0.1), ValueError, "momentum_decay"),
    ((1e-3, 0.1, -0.01), ValueError, "noise_estimate"),
    ((1e-3, 0.1, None), TypeError, "noise_estimate"),
])
def test_sgd_momentum_to_sghmc_rejects_bad_units(args, error, name):
  with pytest.raises(error, match=name):
    dynamics.hamiltonian.sgd_momentum_to_sghmc(*args)


GOOD_SGHMC = dict(friction=1., noise_estimate=0.5, integrator="euler",
                  momentum_resampling_period=None, temperature=1.)


@pytest.mark.parametrize("changes", [
    {}, dict(integrator="splitting"), dict(noise_estimate="empirical_fisher"),
    dict(noise_estimate=1.), dict(noise_estimate=[0.2, np.array([0.5, 1.])]),
    dict(noise_estimate=0.4, temperature=0.4),
    dict(momentum_resampling_period=1),
    dict(momentum_resampling_period=np.int64(50)),
    dict(friction=tf.Variable(1.)),  # Not known statically: no comparison.
])
def test_check_sghmc_parameters_accepts_valid_arguments(changes):
  dynamics.hamiltonian.check_sghmc_parameters(**{**GOOD_SGHMC, **changes})


@pytest.mark.parametrize("changes,error,match", [
    (dict(integrator="leapfrog"), ValueError, "`integrator`"),
    (dict(integrator=None), ValueError, "`integrator`"),
    (dict(temperature=0., noise_estimate=0.), ValueError, "`temperature`"),
    (dict(temperature=-1., noise_estimate=0.), ValueError, "`temperature`"),
    (dict(temperature="1"), TypeError, "`temperature`"),
    (dict(noise_estimate="fisher"), ValueError, "empirical_fisher"),
    (dict(noise_estimate=-0.1), ValueError, "`noise_estimate` must be >= 0"),
    (dict(noise_estimate=[0.1, -0.1]), ValueError,
     "`noise_estimate` must be >= 0"),
    # B-hat above C T: the injected variance 2 (C T - B-hat) h < 0.
    (dict(noise_estimate=1.5), ValueError, "`friction`"),
    (dict(noise_estimate=0.5, temperature=0.4), ValueError, "`friction`"),
    (dict(noise_estimate=[0.2, np.array([0.5, 1.1])]), ValueError,
     "`friction`"),
    (dict(momentum_resampling_period=0), ValueError,
     "momentum_resampling_period"),
    (dict(momentum_resampling_period=-2), ValueError,
     "momentum_resampling_period"),
    (dict(momentum_resampling_period=2.), TypeError,
     "momentum_resampling_period"),
    (dict(momentum_resampling_period=True), TypeError,
     "momentum_resampling_period"),
])
def test_check_sghmc_parameters_rejects_each_bad_argument(changes, error,
                                                          match):
  with pytest.raises(error, match=match):
    dynamics.hamiltonian.check_sghmc_parameters(**{**GOOD_SGHMC, **changes})


def test_integrators_are_euler_and_splitting_and_each_is_accepted():
  assert dynamics.hamiltonian.INTEGRATORS == ("euler", "splitting")
  theta, r = const(draws(80), tf.float64), const(draws(81), tf.float64)
  for name in dynamics.hamiltonian.INTEGRATORS:
    dynamics.hamiltonian.check_sghmc_parameters(
        **{**GOOD_SGHMC, "integrator": name})
    dynamics.sghmc_update(theta, r, r, 0.1, 1., 0., 1., name, SEED)
