"""AMAGOLD's kernel step by step (tfp_sgmcmc/kernels/amagold.py): the proposal
and log acceptance ratio against float64 NumPy, the energy accumulator as
the log reverse-over-forward path ratio, rejection (state kept, momentum
negated), a diverged proposal, the cached energy, and what the kernel says
about its own exactness (same seed, same chain under XLA: tests/integration/
test_seeded_chains.py; the minibatch test on one minibatch and the SGD
parameterisation, which run chains: tests/integration/test_kernel_chains.py).
"""

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.amagold_targets import FRICTION, STEP_SIZE
from support.amagold_targets import exact_gradient_target
from support.amagold_targets import gaussian_energy, noisy_gaussian
from support.amagold_targets import quartic_energy


def test_one_step_log_accept_ratio_is_minus_hmc_energy_change():
  # beta = 0, exact gradients, one outer step from a given momentum: the
  # proposal is T leapfrog steps (drift-kick-drift) and the log acceptance
  # ratio is HMC's -(delta U + delta K), checked against float64 NumPy.
  eps, num_steps = 0.15, 7
  theta0 = np.array([[0.3, -1.2], [1.5, 0.4], [-0.7, 2.0]])
  r0 = np.array([[0.5, 1.0], [-1.3, 0.2], [0.1, -0.4]])
  kernel = sg.AMAGOLD(exact_gradient_target(quartic_energy), step_size=eps,
                      num_leapfrog_steps=num_steps, friction=0.,
                      resample_momentum=False)
  state = tf.constant(theta0)
  results = kernel.bootstrap_results(state)
  results = results._replace(accepted_results=results.accepted_results._replace(
      momentum=tf.constant(r0)))
  _, results = kernel.one_step(state, results, seed=[1, 2])

  def grad(x):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
      tape.watch(x)
      u = quartic_energy(x)
    return tape.gradient(u, x).numpy(), u.numpy()

  theta, r = theta0 + 0.5 * eps * r0, r0.copy()
  for t in range(num_steps):
    r = r - eps * grad(theta)[0]
    theta = theta + (eps if t < num_steps - 1 else 0.5 * eps) * r
  delta_u = grad(theta)[1] - grad(theta0)[1]
  delta_k = 0.5 * np.sum(r ** 2, -1) - 0.5 * np.sum(r0 ** 2, -1)
  np.testing.assert_allclose(results.proposed_state, theta, rtol=1e-10)
  np.testing.assert_allclose(results.proposed_results.momentum, r, rtol=1e-10)
  np.testing.assert_allclose(results.log_accept_ratio, -(delta_u + delta_k),
                             rtol=1e-8, atol=1e-10)
  # rho = K(r0) - K(r*) exactly when the kicks are deterministic.
  np.testing.assert_allclose(
      results.proposed_results.log_acceptance_correction, -delta_k,
      rtol=1e-8, atol=1e-10)


def test_energy_accumulator_is_the_log_reverse_over_forward_path_ratio():
  # One stochastic kick with beta > 0: rho + K(r') - K(r) must equal
  # log N(eta_rev) - log N(eta_fwd), the densities of the noise that makes
  # the forward move r -> r' and the momentum-flipped reverse -r' -> -r.
  # (The K terms then cancel in pi(theta*, -r*) / pi(theta, r).)
  eps, beta, sigma = (tf.constant(v, tf.float64) for v in (0.3, 0.7, 1.6))
  rng = np.random.default_rng(0)
  r, g, xi = rng.normal(size=(3, 4, 5))
  r = 1.6 * r
  r_new = sg.dynamics.amagold_momentum(tf.constant(r), tf.constant(g), eps,
                                       beta, tf.constant(xi), sigma).numpy()
  rho = sg.dynamics.energy_accumulator_increment(
      tf.constant(g), tf.constant(r), tf.constant(r_new), eps, sigma,
      batch_ndims=1).numpy()
  eps, a = eps.numpy(), (eps * beta).numpy()
  noise_var = 4. * a * sigma.numpy() ** 2
  eta_fwd = (1 + a) * r_new - (1 - a) * r + eps * g
  eta_rev = (1 + a) * (-r) - (1 - a) * (-r_new) + eps * g
  log_ratio = -0.5 * np.sum(eta_rev ** 2 - eta_fwd ** 2, -1) / noise_var
  kinetic = lambda p: sg.dynamics.kinetic_energy(  # noqa: E731
      tf.constant(p), sigma, batch_ndims=1).numpy()
  np.testing.assert_allclose(rho + kinetic(r_new) - kinetic(r), log_ratio,
                             rtol=1e-10, atol=1e-10)


def test_rejection_keeps_state_and_negates_momentum():
  # A huge step size makes every proposal non-finite or hopeless.
  kernel = sg.AMAGOLD(noisy_gaussian(), step_size=50.,
                      num_leapfrog_steps=10, friction=FRICTION,
                      resample_momentum=False)
  state = tf.constant([[0.5, -0.5], [1., 0.2]])
  results = kernel.bootstrap_results(state)
  new_state, new_results = kernel.one_step(state, results, seed=[1, 2])
  assert not np.any(new_results.is_accepted)
  np.testing.assert_array_equal(new_state, state)
  np.testing.assert_array_equal(new_results.accepted_results.momentum,
                                -results.accepted_results.momentum)
  assert new_results.accepted_results.step_count == 1
  np.testing.assert_array_equal(new_results.energy, results.energy)
  assert np.all(np.isneginf(new_results.log_accept_ratio) |
                (new_results.log_accept_ratio < -100.))


def test_diverged_proposal_is_flagged_and_rejected():
  kernel = sg.AMAGOLD(noisy_gaussian(), step_size=1e3, num_leapfrog_steps=50,
                      friction=0.)
  state = tf.constant([[0.5, -0.5]])
  _, results = kernel.one_step(state, kernel.bootstrap_results(state),
                               seed=[1, 2])
  assert results.proposed_results.diverged.numpy().all()
  assert np.isneginf(results.log_accept_ratio.numpy()).all()
  assert not results.is_accepted.numpy().any()
  assert not results.accepted_results.diverged.numpy().any()


def test_energy_is_cached_not_recomputed():
  calls = []

  def energy(x):
    calls.append(1)
    return gaussian_energy(x)

  class CountingTarget(sg.NoisyGradientTarget):

    def energy(self, state):
      calls.append("full")
      return super().energy(state)

  target = CountingTarget(energy, gradient_noise_variance=1.)
  kernel = sg.AMAGOLD(target, step_size=STEP_SIZE, num_leapfrog_steps=2,
                      friction=FRICTION)
  state = tf.zeros([2, 2])
  results = kernel.bootstrap_results(state)
  assert calls.count("full") == 1
  for i in range(3):
    state, results = kernel.one_step(state, results, seed=[i, 0])
  assert calls.count("full") == 4  # One full-data energy per outer step.
  np.testing.assert_allclose(results.energy, gaussian_energy(state),
                             rtol=1e-6)


def test_amagold_on_a_dataset_target_says_it_is_not_exact():
  y = np.zeros([20, 1], np.float32)
  ds = tf.data.Dataset.from_tensor_slices(y)
  target = sg.DatasetTarget(lambda w, b: -(b[..., 0] - w) ** 2,
                            ds.repeat().batch(5), 20,
                            full_dataset=ds.batch(5))
  with pytest.warns(UserWarning, match="not guaranteed exact"):
    kernel = sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=2,
                        friction=0.5)
  assert not kernel.is_calibrated and "DatasetTarget" in (
      kernel.calibration_note)
  exact = sg.AMAGOLD(sg.InMemoryTarget(lambda w, b: -(b[..., 0] - w) ** 2, y,
                                       batch_size=5),
                     step_size=0.1, num_leapfrog_steps=2, friction=0.5)
  assert exact.is_calibrated and not exact.calibration_note


def test_naive_sghmc_mh_test_is_the_hmc_energy_test():
  # Why AmortizedMetropolisHastings(UncalibratedAMAGOLD(friction=0)) is the
  # paper's "naive SGHMC with M-H": with beta = 0 the proposal's correction
  # is exactly K(r) - K(r*), whatever the gradient noise, so the test is
  # exp(H(theta, r) - H(theta*, r*)) on the exact energy.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tfp_sgmcmc as sg  # pylint: disable=g-import-not-at-top
  from tfp_sgmcmc import synthetic  # pylint: disable=g-import-not-at-top
  target = synthetic.noisy_target(synthetic.sghmc_toy_energy, 4.)
  kernel = sg.UncalibratedAMAGOLD(target, 0.1, 10, friction=0.,
                                  resample_momentum=False)
  x = tf.constant([[0.3], [1.2], [-0.7]], tf.float64)
  results = kernel.bootstrap_results(x)
  _, new = kernel.one_step(x, results, seed=[1, 2])
  kinetic_change = 0.5 * tf.reduce_sum(
      results.momentum ** 2 - new.momentum ** 2, -1)
  np.testing.assert_allclose(new.log_acceptance_correction, kinetic_change,
                             rtol=1e-9, atol=1e-12)


def _mass_distributions():
  """(M, momentum distribution N(0, M) in float64) for a 2-D state."""
  diagonal = np.diag([40., 0.02])
  dense = np.array([[3., -1.2], [-1.2, 0.9]])
  return {
      "diagonal": (diagonal, sg.diagonal_momentum_distribution(
          tf.zeros([3, 2], tf.float64), batch_ndims=1,
          inverse_mass=tf.constant(1. / np.diag(diagonal)))),
      "dense": (dense, tfp.distributions.MultivariateNormalTriL(
          scale_tril=tf.linalg.cholesky(tf.constant(dense)))),
  }


@pytest.mark.parametrize("kind", ["diagonal", "dense"])
def test_log_accept_ratio_with_a_mass_matrix_is_the_independent_path_ratio(
    kind):
  # One kick (T = 1) with friction and exact gradients, from a given
  # momentum r0 with mass M. Independently of the kernel's rho, in float64:
  # theta0 = theta + eps/2 M^{-1} r0, g = grad U(theta0); the kick's noise
  # eta is read off the returned r*, (1 + a) r* = (1 - a) r0 - eps g + eta;
  # the reverse move -r* -> -r0 needs eta_rev = (1 + a)(-r0) - (1 - a)(-r*)
  # + eps g; then log a = log pi(theta*, -r*) - log pi(theta, r0)
  # + log N(eta_rev; 0, 4 a M) - log N(eta_fwd; 0, 4 a M), with
  # pi(theta, r) = exp(-U(theta)) N(r; 0, M), all from scipy.
  mass, dist = _mass_distributions()[kind]
  eps, beta = 0.4, 0.7
  a = eps * beta
  theta = np.array([[0.3, -1.2], [1.5, 0.4], [-0.7, 2.0]])
  r0 = np.array([[2.5, 0.1], [-4.3, 0.2], [0.1, -0.4]])
  kernel = sg.AMAGOLD(exact_gradient_target(quartic_energy), step_size=eps,
                      num_leapfrog_steps=1, friction=beta,
                      resample_momentum=False, momentum_distribution=dist)
  state = tf.constant(theta)
  results = kernel.bootstrap_results(state)
  results = results._replace(accepted_results=results.accepted_results._replace(
      momentum=tf.constant(r0)))
  _, results = kernel.one_step(state, results, seed=[1, 2])
  theta_star = results.proposed_state.numpy()
  r_star = results.proposed_results.momentum.numpy()

  def u_and_grad(x):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
      tape.watch(x)
      u = quartic_energy(x)
    return u.numpy(), tape.gradient(u, x).numpy()

  m_inv = np.linalg.inv(mass)
  theta0 = theta + 0.5 * eps * r0 @ m_inv
  np.testing.assert_allclose(theta_star, theta0 + 0.5 * eps * r_star @ m_inv,
                             rtol=1e-10, atol=1e-12)
  _, g = u_and_grad(theta0)
  eta_fwd = (1 + a) * r_star - (1 - a) * r0 + eps * g
  eta_rev = (1 + a) * (-r0) - (1 - a) * (-r_star) + eps * g
  noise = scipy.stats.multivariate_normal(np.zeros(2), 4. * a * mass)
  momentum = scipy.stats.multivariate_normal(np.zeros(2), mass)
  expected = (u_and_grad(theta)[0] - u_and_grad(theta_star)[0]
              + momentum.logpdf(-r_star) - momentum.logpdf(r0)
              + noise.logpdf(eta_rev) - noise.logpdf(eta_fwd))
  np.testing.assert_allclose(results.log_accept_ratio, expected, rtol=1e-8,
                             atol=1e-9)
