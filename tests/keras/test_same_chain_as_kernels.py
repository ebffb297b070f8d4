"""The Keras sampler's chain is the tfp.mcmc kernel's: run with `one_step` on
the same minibatches (a DatasetTarget over the batches `fit` sees) and the
same per-step seeds (`sampler.step_seed(k)`), SGLD, pSGLD, SGHMC (Euler,
splitting), SGNHT and AMAGOLD (reversible and skew-reversible) agree up to
float32 rounding of the gradient (Keras: N times the gradient of the mean
loss; the target: of the summed energy). Within Keras, AMAGOLD's exact test
over a tf.data energy set is the chain of arrays, and the minibatch test on
every example once is the exact test.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
import tfp_sgmcmc.keras as sgk
from tfp_sgmcmc.keras.fit import energies
from tfp_sgmcmc.keras.samplers import base as keras_base
from support.keras_fits import batch_indices, batches, fit, fit_regression
from support.keras_fits import kept_draws


def kernel_target(problem, indices):
  """A DatasetTarget over the batches `fit` sees, for a [dim, 1] state."""
  def log_likelihood(w, batch):
    xb, yb = batch
    pred = tf.linalg.matvec(xb, w[..., 0])
    return -0.5 * (yb - pred) ** 2 / problem.noise_scale ** 2 - (
        np.log(problem.noise_scale) + 0.5 * np.log(2 * np.pi))

  def log_prior(w):
    return tf.reduce_sum(-0.5 * w ** 2 / problem.prior_scale ** 2)
  x, y = problem.data
  return sg.DatasetTarget(
      log_likelihood, batches(problem, indices), problem.num_examples,
      log_prior_fn=log_prior,
      full_dataset=tf.data.Dataset.from_tensor_slices((x, y)).batch(500))


def run_kernel(kernel, problem, indices, sampler, num_steps,
               results_fn=None):
  """`kernel.one_step` with the Keras sampler's seeds, on its batches."""
  init = tf.constant(problem.posterior_mean.reshape(-1, 1), tf.float32)
  results = kernel.bootstrap_results(init)
  if results_fn is not None:
    results = results_fn(results)
  # The bootstrap drew a batch; the chain starts on the first one.
  kernel = kernel.copy(target=kernel_target(problem, indices))
  # One graph for every step (traced once): the chain is the same as
  # eager `one_step`'s, which costs seconds per AMAGOLD chain.
  one_step = tf.function(kernel.one_step, autograph=False)
  state, states, accepted = init, [], []
  for k in range(num_steps):
    state, results = one_step(state, results, seed=sampler.step_seed(k))
    states.append(state.numpy()[:, 0])
    if hasattr(results, "is_accepted"):
      accepted.append(bool(results.is_accepted))
  return np.array(states), accepted


SAME_CHAIN = {
    "sgld": (lambda: sgk.SGLD(step_size=1e-3, seed=3),
             lambda t: sg.SGLD(t, step_size=1e-3)),
    "psgld": (lambda: sgk.PreconditionedSGLD(step_size=1e-4, decay=0.9,
                                             seed=3),
              lambda t: sg.PreconditionedSGLD(t, step_size=1e-4, decay=0.9)),
    "sghmc_euler": (
        lambda: sgk.SGHMC(step_size=0.02, friction=20., seed=3,
                          momentum_resampling_period=7),
        lambda t: sg.SGHMC(t, step_size=0.02, friction=20.,
                           momentum_resampling_period=7)),
    "sghmc_splitting": (
        lambda: sgk.SGHMC(step_size=0.02, friction=20., seed=3,
                          integrator="splitting",
                          momentum_resampling_period=7),
        lambda t: sg.SGHMC(t, step_size=0.02, friction=20.,
                           integrator="splitting",
                           momentum_resampling_period=7)),
    "sgnht": (lambda: sgk.SGNHT(step_size=0.01, diffusion=5., seed=3),
              lambda t: sg.SGNHT(t, step_size=0.01, diffusion=5.)),
}


@pytest.mark.parametrize("name", sorted(SAME_CHAIN))
def test_keras_chain_is_the_kernel_chain(problem, name):
  make_sampler, make_kernel = SAME_CHAIN[name]
  num_steps = 60
  indices = batch_indices(problem, num_steps, seed=4)
  callback = fit(problem, make_sampler(), indices)
  keras_states = kept_draws(callback)[:, 0]
  kernel_states, _ = run_kernel(make_kernel(kernel_target(problem, indices)),
                                problem, indices, callback.sampler,
                                num_steps)
  assert keras_states.shape == kernel_states.shape == (num_steps, 2)
  # The chain moves (by many times the tolerance) and both agree.
  assert np.ptp(kernel_states, axis=0).min() > 1e-2
  np.testing.assert_allclose(keras_states, kernel_states, rtol=0, atol=2e-5)


@pytest.mark.parametrize("resample_momentum", [True, False])
def test_keras_amagold_is_the_kernel_chain(problem, resample_momentum):
  sigma = float(np.sqrt(np.max(np.linalg.eigvalsh(problem.precision))))
  t, num_tests = 5, 40
  indices = batch_indices(problem, t * num_tests, seed=5)
  x, y = problem.data
  args = dict(step_size=0.15, num_leapfrog_steps=t, friction=1.,
              momentum_std=sigma, resample_momentum=resample_momentum)
  callback = fit(problem, sgk.AMAGOLD(seed=6, **args), indices,
                 energy_data=(x, y), energy_batch_size=500)
  sampler = callback.sampler
  # The carried momentum the Keras chain starts from (skew-reversible).
  r0 = sigma * sg.dynamics.standard_normal_like(
      [tf.zeros([2, 1])], keras_base.seed_for(sampler.seed, keras_base.BEGIN,
                                              0))[0]

  def start_from_keras_momentum(results):
    inner = results.accepted_results._replace(momentum=r0)
    return results._replace(accepted_results=inner)
  kernel_states, accepted = run_kernel(
      sg.AMAGOLD(kernel_target(problem, indices), **args), problem, indices,
      sampler, num_tests, results_fn=start_from_keras_momentum)
  keras_states = kept_draws(callback)[:, 0]
  assert callback.num_tests == num_tests
  assert 0 < sum(accepted) < num_tests  # both outcomes are exercised
  assert callback.num_accepted == sum(accepted)
  np.testing.assert_allclose(keras_states, kernel_states, rtol=0, atol=2e-5)


def test_amagold_energy_data_as_a_dataset_gives_the_chain_of_arrays(problem):
  # The exact test's U over a tf.data.Dataset (summed from Python, then
  # handed to the compiled test) equals U over the same arrays in the same
  # batches (summed inside the compiled test): the same chain.
  x, y = problem.data
  chains = []
  for energy_data in ((x, y), tf.data.Dataset.from_tensor_slices(
      (x, y)).batch(128)):
    _, callback = fit_regression(
        problem, sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=5,
                             friction=1., momentum_std=20., seed=3),
        num_steps=100, thinning=1, energy_data=energy_data,
        energy_batch_size=128)
    chains.append((kept_draws(callback), callback.num_accepted))
  (a, accepted_a), (b, accepted_b) = chains
  assert len(a) == 20 and 0 < accepted_a < 20
  assert accepted_a == accepted_b
  np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_minibatch_acceptance_on_the_whole_data_is_the_exact_test(
    problem, monkeypatch):
  # acceptance_energy="minibatch" estimates U(theta) (via stateless_call,
  # the weights untouched) and U(theta*) on one batch; on a "batch" of all
  # N examples the estimates are the exact energies, so the chain must be
  # the exact chain (same seed, same data). The test's batch is drawn as
  # the kernel draws it, with replacement (tests/unit/keras); here it is
  # made every example once, so that only the energies are compared.
  monkeypatch.setattr(energies, "minibatch_indices",
                      lambda seed, batch_size, num_examples: tf.range(
                          num_examples))
  x, y = problem.data
  chains = []
  for acceptance in ("exact", "minibatch"):
    _, callback = fit_regression(
        problem, sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=5,
                             friction=1., momentum_std=20.,
                             acceptance_energy=acceptance, seed=3),
        num_steps=400, thinning=1, energy_data=(x, y),
        energy_batch_size=problem.num_examples)
    chains.append((kept_draws(callback), callback.num_accepted))
  (exact, accepted_exact), (minibatch, accepted_minibatch) = chains
  assert accepted_exact == accepted_minibatch
  assert 0 < accepted_exact < 80
  np.testing.assert_allclose(minibatch, exact, rtol=1e-5, atol=1e-6)


def test_keras_amagold_with_a_mass_is_the_kernel_chain_with_that_mass(
    problem):
  # inverse_mass= on the Keras sampler is the kernel's
  # momentum_distribution=diagonal_momentum_distribution(..., inverse_mass)
  # (whose exactness the kernel tests check): the same chain.
  t, num_tests = 5, 40
  indices = batch_indices(problem, t * num_tests, seed=5)
  x, y = problem.data
  inverse_mass = np.diag(problem.posterior_cov).reshape(2, 1) * [[1.], [3.]]
  args = dict(step_size=0.4, num_leapfrog_steps=t, friction=1.)
  callback = fit(problem, sgk.AMAGOLD(seed=6, inverse_mass=[inverse_mass],
                                      **args), indices,
                 energy_data=(x, y), energy_batch_size=500)
  kernel = sg.AMAGOLD(
      kernel_target(problem, indices), momentum_distribution=(
          sg.diagonal_momentum_distribution(tf.zeros([2, 1]), batch_ndims=0,
                                            inverse_mass=inverse_mass)),
      **args)
  kernel_states, accepted = run_kernel(kernel, problem, indices,
                                       callback.sampler, num_tests)
  keras_states = kept_draws(callback)[:, 0]
  assert 0 < sum(accepted) < num_tests
  assert callback.num_accepted == sum(accepted)
  np.testing.assert_allclose(keras_states, kernel_states, rtol=0, atol=2e-5)
