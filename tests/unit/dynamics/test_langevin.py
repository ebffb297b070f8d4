"""Langevin update rules of `dynamics` against numpy written from the papers:
SGLD (Welling & Teh 2011, with h = epsilon / 2), pSGLD's RMSprop
preconditioner and step (Li et al. 2016, Algorithm 1 without Gamma) and the
Gaussian proposal ratio of a Langevin move (MALA's correction); the whole
steps sgld_update and psgld_update (noise from the step seed's second
derived seed; pSGLD's first average is g_bar^2) and pSGLD's argument
checks."""

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from tfp_sgmcmc import dynamics
from .reference import CHAINS, SHAPES, STEP_SIZES, check, const, draws, f64
from .reference import step_size_arg


# --- SGLD ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("temperature", [1., 0.3])
def test_langevin_step_is_euler_maruyama_of_langevin_dynamics(
    dtype, step, temperature):
  theta, grad, xi = draws(0), draws(1, 3.), draws(2)
  got = dynamics.langevin_step(const(theta, dtype), const(grad, dtype),
                               step_size_arg(step, dtype), const(xi, dtype),
                               temperature=temperature)
  theta, grad, xi = f64(theta, dtype), f64(grad, dtype), f64(xi, dtype)
  # theta' = theta - h grad U + N(0, 2 h T): the drift of dtheta =
  # -grad U dt + sqrt(2 T) dW over a time h.
  expected = [t - h * g + np.sqrt(2. * h * temperature) * x
              for t, g, x, h in zip(theta, grad, xi, STEP_SIZES[step][1])]
  check(got, expected, dtype)


def test_langevin_step_is_welling_and_teh_with_half_their_step():
  # Welling & Teh: theta' = theta + eps/2 grad log p + N(0, eps).
  eps = 0.02
  theta, grad, xi = draws(3), draws(4), draws(5)
  got = dynamics.langevin_step(const(theta, tf.float64),
                               const(grad, tf.float64), eps / 2.,
                               const(xi, tf.float64))
  expected = [t + eps / 2. * (-g) + np.sqrt(eps) * x
              for t, g, x in zip(theta, grad, xi)]
  check(got, expected, tf.float64)


def test_langevin_step_takes_a_single_tensor():
  got = dynamics.langevin_step(tf.constant([1., 2.], tf.float64),
                               tf.constant([0.5, -1.], tf.float64), 0.1,
                               tf.constant([0.3, 0.], tf.float64), 2.)
  np.testing.assert_allclose(
      got, [1. - 0.05 + np.sqrt(0.4) * 0.3, 2. + 0.1], rtol=1e-14)


# --- pSGLD --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_rmsprop_preconditioner_matches_li_et_al_equations_4_and_5(dtype):
  v, grad = draws(6, 0.1), draws(7, 50.)
  v = [np.abs(x) for x in v]
  decay, n, lam = 0.93, 250, 1e-3
  new_v, precond = dynamics.rmsprop_preconditioner(
      const(v, dtype), const(grad, dtype), decay, n, lam)
  v, grad = f64(v, dtype), f64(grad, dtype)
  # V' = alpha V + (1 - alpha) g_bar g_bar, g_bar the per-example mean
  # gradient grad U~ / N; G = diag(1 / (lambda + sqrt(V'))).
  expected_v = [decay * x + (1. - decay) * (g / n) ** 2
                for x, g in zip(v, grad)]
  check(new_v, expected_v, dtype)
  check(precond, [1. / (lam + np.sqrt(x)) for x in expected_v], dtype)


def test_rmsprop_preconditioner_is_one_over_lambda_for_zero_gradients():
  new_v, precond = dynamics.rmsprop_preconditioner(
      [tf.zeros([3], tf.float64)], [tf.zeros([3], tf.float64)], 0.9, 10, 0.25)
  np.testing.assert_array_equal(new_v[0], np.zeros(3))
  np.testing.assert_allclose(precond[0], np.full(3, 4.), rtol=1e-15)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
def test_preconditioned_langevin_step_matches_psgld_algorithm_1(dtype, step):
  theta, grad, xi = draws(8), draws(9, 3.), draws(10)
  precond = [0.2 + np.abs(x) for x in draws(11)]
  temperature = 0.45
  got = dynamics.preconditioned_langevin_step(
      const(theta, dtype), const(grad, dtype), const(precond, dtype),
      step_size_arg(step, dtype), const(xi, dtype), temperature)
  theta, grad, xi, precond = (f64(p, dtype) for p in (theta, grad, xi,
                                                      precond))
  # theta' = theta - h G grad U~ + N(0, 2 h T G), G diagonal.
  expected = [t - h * p * g + np.sqrt(2. * h * temperature * p) * x
              for t, g, p, x, h in zip(theta, grad, precond, xi,
                                       STEP_SIZES[step][1])]
  check(got, expected, dtype)


def test_preconditioned_langevin_step_with_identity_is_langevin_step():
  theta, grad, xi = (const(draws(s), tf.float64) for s in (12, 13, 14))
  ones = [tf.ones(s, tf.float64) for s in SHAPES]
  check(dynamics.preconditioned_langevin_step(theta, grad, ones, 0.03, xi,
                                              0.7),
        [x.numpy() for x in dynamics.langevin_step(theta, grad, 0.03, xi,
                                                   0.7)], tf.float64)


# --- MALA's correction --------------------------------------------------------


@pytest.mark.parametrize("step", ["scalar", "per_part"])
@pytest.mark.parametrize("temperature", [1., 0.25])
def test_langevin_log_proposal_ratio_is_the_log_gaussian_density_ratio(
    step, temperature):
  x, g_x, g_y, xi = draws(15), draws(16), draws(17), draws(18)
  arg, per_part = STEP_SIZES[step]
  # A move the Langevin proposal makes, and the gradient where it lands.
  y = [p.numpy() for p in dynamics.langevin_step(
      const(x, tf.float64), const(g_x, tf.float64), arg,
      const(xi, tf.float64), temperature)]
  got = dynamics.langevin_log_proposal_ratio(
      const(x, tf.float64), const(y, tf.float64), const(g_x, tf.float64),
      const(g_y, tf.float64), arg, temperature=temperature, batch_ndims=1)
  assert got.shape == (CHAINS,)

  def log_q(a, b, grad_a, h):
    """log N(b; a - h grad U(a), 2 h T I), summed over a chain's
    coordinates."""
    logpdf = scipy.stats.norm.logpdf(b, a - h * grad_a,
                                     np.sqrt(2. * h * temperature))
    return logpdf.reshape(CHAINS, -1).sum(-1)
  expected = sum(log_q(b, a, gb, h) - log_q(a, b, ga, h)
                 for a, b, ga, gb, h in zip(x, y, g_x, g_y, per_part))
  np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-11)


def test_langevin_log_proposal_ratio_sums_everything_without_batch_ndims():
  x, y, g_x, g_y = (const(draws(s), tf.float64) for s in (19, 20, 21, 22))
  per_chain = dynamics.langevin_log_proposal_ratio(x, y, g_x, g_y, 0.1,
                                                   batch_ndims=1)
  total = dynamics.langevin_log_proposal_ratio(x, y, g_x, g_y, 0.1)
  assert total.shape == ()
  np.testing.assert_allclose(total, np.sum(per_chain), rtol=1e-13)


def test_langevin_log_proposal_ratio_has_the_closed_form_of_a_gaussian_target():
  # With exact gradients of U(x) = |x|^2 / 2 and T = 1 the ratio has a
  # closed form, and it is antisymmetric under swapping x and y (as the log
  # of q(y -> x) / q(x -> y) must be).
  rng = np.random.default_rng(23)
  x, y = rng.normal(size=(2, 5))
  ratio = lambda a, b, h: dynamics.langevin_log_proposal_ratio(  # noqa: E731
      tf.constant(a), tf.constant(b), tf.constant(a), tf.constant(b),
      h).numpy()
  np.testing.assert_allclose(ratio(x, y, 0.3), -ratio(y, x, 0.3), rtol=1e-13)
  # Closed form for this target: (|y|^2 - |x|^2) (1 - (1 - h)^2) / (4 h).
  h = 0.3
  expected = (y @ y - x @ x) * (1. - (1. - h) ** 2) / (4. * h)
  np.testing.assert_allclose(ratio(x, y, h), expected, rtol=1e-12)


# --- whole steps: sgld_update, psgld_update -----------------------------------


def step_noise(position, seed):
  """The noise a whole step draws: from the second of the step seed's
  derived seeds (the first is the minibatch's)."""
  _, noise_seed = dynamics.derive_seeds(seed, 2)
  return [z.numpy().astype(np.float64)
          for z in dynamics.standard_normal_like(position, noise_seed)]


SEED = tf.constant([31, -41])


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("temperature", [1., 0.3])
def test_sgld_update_is_langevin_step_with_the_steps_second_derived_seed(
    dtype, step, temperature):
  theta, grad = const(draws(30), dtype), const(draws(31, 3.), dtype)
  got = dynamics.langevin.sgld_update(theta, grad,
                                      step_size_arg(step, dtype),
                                      temperature, SEED)
  xi = step_noise(theta, SEED)
  theta, grad = f64(draws(30), dtype), f64(draws(31, 3.), dtype)
  expected = [t - h * g + np.sqrt(2. * h * temperature) * x
              for t, g, x, h in zip(theta, grad, xi, STEP_SIZES[step][1])]
  check(got, expected, dtype)


def test_sgld_update_is_deterministic_in_its_seed_and_draws_fresh_noise():
  theta, grad = const(draws(32), tf.float64), const(draws(33), tf.float64)
  a = dynamics.langevin.sgld_update(theta, grad, 0.01, 1., SEED)
  b = dynamics.langevin.sgld_update(theta, grad, 0.01, 1., SEED)
  c = dynamics.langevin.sgld_update(theta, grad, 0.01, 1., [31, -40])
  for x, y, z in zip(a, b, c):
    np.testing.assert_array_equal(x, y)
    assert not np.any(x.numpy() == z.numpy())
  # Not the seed itself nor its first derived seed (the minibatch's).
  for seed in (SEED, dynamics.derive_seeds(SEED, 2)[0]):
    noise = dynamics.standard_normal_like(theta, seed)
    other = dynamics.langevin_step(theta, grad, 0.01, noise, 1.)
    assert not np.allclose(a[0], other[0])


# A decay that float32 holds exactly (15/16).
PSGLD = dict(decay=0.9375, regularizer=1e-3, num_examples=250)


def psgld_reference(theta, v, grad, xi, h, t, first):
  """Li et al. (2016), Algorithm 1 without Gamma; the first step's average
  is g_bar^2 itself (no history)."""
  alpha = 0. if first else PSGLD["decay"]
  new_v, precond, new_theta = [], [], []
  for x, m, g, z, s in zip(theta, v, grad, xi, h):
    g_bar = g / PSGLD["num_examples"]
    m = alpha * m + (1. - alpha) * g_bar * g_bar
    p = 1. / (PSGLD["regularizer"] + np.sqrt(m))
    new_v.append(m)
    precond.append(p)
    new_theta.append(x - s * p * g + np.sqrt(2. * s * t * p) * z)
  return new_theta, new_v, precond


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("step", list(STEP_SIZES))
@pytest.mark.parametrize("step_count", [0, 1, 7])
def test_psgld_update_averages_from_g_bar_squared_then_with_the_decay(
    dtype, step, step_count):
  theta, grad = draws(34), draws(35, 50.)
  v = [np.abs(x) * 1e-3 for x in draws(36)]
  temperature = 0.6
  got_theta, got_v, got_p = dynamics.langevin.psgld_update(
      const(theta, dtype), const(v, dtype), const(grad, dtype),
      tf.constant(step_count), step_size_arg(step, dtype), temperature,
      seed=SEED, **PSGLD)
  xi = step_noise(const(theta, dtype), SEED)
  theta, v, grad = f64(theta, dtype), f64(v, dtype), f64(grad, dtype)
  exp_theta, exp_v, exp_p = psgld_reference(
      theta, v, grad, xi, STEP_SIZES[step][1], temperature,
      first=step_count == 0)
  check(got_v, exp_v, dtype)
  check(got_p, exp_p, dtype)
  check(got_theta, exp_theta, dtype)


def test_psgld_update_first_step_ignores_the_carried_average():
  theta, grad = const(draws(37), tf.float64), const(draws(38, 50.),
                                                    tf.float64)
  outs = [dynamics.langevin.psgld_update(
      theta, const([np.abs(x) * s for x in draws(39)], tf.float64), grad, 0,
      0.01, 1., seed=SEED, **PSGLD) for s in (0., 5.)]
  for a, b in zip(*outs):
    for x, y in zip(a, b):
      np.testing.assert_array_equal(x, y)
  # ... and a later step does not: the carried V enters with weight alpha.
  later = [dynamics.langevin.psgld_update(
      theta, const([np.abs(x) * s for x in draws(39)], tf.float64), grad, 3,
      0.01, 1., seed=SEED, **PSGLD)[1] for s in (0., 5.)]
  assert not np.allclose(later[0][0], later[1][0])


def test_psgld_update_keeps_a_float64_decay_at_full_precision():
  # A Python decay is converted straight to the chain's dtype: through
  # float32 a float64 chain would use 0.93000000715...
  theta, grad = const(draws(40), tf.float64), const(draws(41, 50.),
                                                    tf.float64)
  v = const([np.abs(x) for x in draws(42)], tf.float64)
  _, got_v, _ = dynamics.langevin.psgld_update(
      theta, v, grad, 1, 0.01, 1., decay=0.93, regularizer=1e-3,
      num_examples=250, seed=SEED)
  expected_v, _ = dynamics.rmsprop_preconditioner(v, grad, 0.93, 250, 1e-3)
  check(got_v, [x.numpy() for x in expected_v], tf.float64)


def test_check_psgld_parameters_accepts_the_documented_ranges():
  for decay in (0., 0.5, 0.999, tf.constant(0.9)):
    dynamics.langevin.check_psgld_parameters(decay, 1e-5)


@pytest.mark.parametrize("decay", [1., 1.5, -0.1, tf.constant(1.),
                                   np.float64(-1e-9)])
def test_check_psgld_parameters_rejects_a_decay_outside_0_1(decay):
  with pytest.raises(ValueError, match="decay"):
    dynamics.langevin.check_psgld_parameters(decay, 1e-5)


@pytest.mark.parametrize("regularizer,error", [
    (0., ValueError), (-1e-5, ValueError), (float("inf"), ValueError),
    ("1e-5", TypeError), (None, TypeError), (True, TypeError)])
def test_check_psgld_parameters_wants_a_positive_regularizer(regularizer,
                                                             error):
  with pytest.raises(error, match="regularizer"):
    dynamics.langevin.check_psgld_parameters(0.9, regularizer)
