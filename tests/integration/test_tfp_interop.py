"""The kernels in TFP's workflow: every kernel takes target_log_prob_fn and
reports the exact log density, rebuilds itself with copy (a new target is
the one sampled), runs on tuple and dict states with a step size per part,
and under TFP's step-size adaptation (per part; SG-NUTS reporting its log
acceptance ratio to dual averaging).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.internal import unnest

import tfp_sgmcmc as sg
from support.helpers import sample


tfd, tfb = tfp.distributions, tfp.bijectors
MVN = tfd.MultivariateNormalDiag([1., -1.], [1., 2.])


def _kernels(**target):
  """One of every kernel on the given target (keyword target or fn)."""
  return {
      "SGLD": sg.SGLD(step_size=0.05, **target),
      "PreconditionedSGLD": sg.PreconditionedSGLD(step_size=0.01, **target),
      "SGHMC": sg.SGHMC(step_size=0.05, friction=1., **target),
      "NaiveSGHMC": sg.NaiveSGHMC(step_size=0.05, **target),
      "SGNHT": sg.SGNHT(step_size=0.05, **target),
      "SGNUTS": sg.SGNUTS(step_size=0.1, friction=1., max_tree_depth=3,
                          **target),
      "SGBD": sg.SGBD(step_size=0.5, **target),
      "AMAGOLD": sg.AMAGOLD(step_size=0.1, num_leapfrog_steps=3, friction=0.5,
                            **target),
      "UncalibratedAMAGOLD": sg.UncalibratedAMAGOLD(
          step_size=0.1, num_leapfrog_steps=3, friction=0.5, **target),
      "AmortizedBarker": sg.AmortizedBarker(step_size=0.5, num_steps=2,
                                            **target),
  }


@pytest.mark.parametrize("name", list(_kernels(target_log_prob_fn=MVN.log_prob)))
def test_every_kernel_takes_target_log_prob_fn_and_reports_it(name):
  kernel = _kernels(target_log_prob_fn=MVN.log_prob)[name]
  assert kernel.parameters["target_log_prob_fn"] == MVN.log_prob
  state = tf.zeros([3, 2])
  results = kernel.bootstrap_results(state)
  for _ in range(2):
    state, results = kernel.one_step(state, results, seed=[1, 2])
  tlp = unnest.get_innermost(results, "target_log_prob")
  # Full batch: the exact log density at the state the step returned.
  np.testing.assert_allclose(tlp, MVN.log_prob(state), rtol=1e-5, atol=1e-5)
  # And the kernel rebuilds itself from TFP's `copy`.
  copy = kernel.copy(target_log_prob_fn=lambda x: MVN.log_prob(x) + 1.)
  assert copy.parameters["target_log_prob_fn"] != MVN.log_prob


def _two_part_log_prob(a, b):
  return (tfd.Normal(0., 1.).log_prob(a) +
          tf.reduce_sum(tfd.Normal(0., 2.).log_prob(b), -1))


@pytest.mark.parametrize("make", [
    lambda fn: sg.SGLD(target_log_prob_fn=fn, step_size=[0.01, 0.04]),
    lambda fn: sg.SGHMC(target_log_prob_fn=fn, step_size=[0.05, 0.1],
                        friction=1.),
    lambda fn: sg.AMAGOLD(target_log_prob_fn=fn, step_size=[0.1, 0.2],
                          num_leapfrog_steps=3, friction=0.5),
])
def test_tuple_states_and_one_step_size_per_part(make):
  state = (tf.zeros([4]), tf.zeros([4, 3]))
  draws = sample(make(_two_part_log_prob), state, 5, seed=[1, 2], jit=False)
  assert isinstance(draws, tuple) and draws[1].shape == (5, 4, 3)
  # A dict state, as TFP's JointDistributionNamed gives.
  dict_draws = sample(make(lambda **d: _two_part_log_prob(d["a"], d["b"])),
                      {"a": tf.zeros([4]), "b": tf.zeros([4, 3])}, 5,
                      seed=[1, 2], jit=False)
  assert set(dict_draws) == {"a", "b"}


def test_per_part_step_sizes_under_step_size_adaptation():
  kernel = tfp.mcmc.SimpleStepSizeAdaptation(
      sg.AMAGOLD(target_log_prob_fn=_two_part_log_prob,
                 step_size=[0.05, 0.05], num_leapfrog_steps=3, friction=0.5),
      num_adaptation_steps=150, target_accept_prob=0.8)
  _, step_sizes = sample(
      kernel, (tf.zeros([4]), tf.zeros([4, 3])), 200, seed=[5, 6],
      trace_fn=lambda _, r: r.inner_results.accepted_results.step_size,
      jit=False)
  assert len(step_sizes) == 2
  assert all(s[-1] > 0.1 for s in step_sizes)  # Grown from 0.05.


def test_sgnuts_under_dual_averaging_reports_log_accept_ratio():
  target = sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x**2, -1),
                                  gradient_noise_variance=0.1)
  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      sg.SGNUTS(target, step_size=0.01, friction=1., max_tree_depth=4),
      num_adaptation_steps=100, target_accept_prob=0.75)
  _, (step_size, log_accept) = sample(
      kernel, tf.zeros([4, 2]), 200, seed=[7, 8],
      trace_fn=lambda _, r: (r.new_step_size,
                             r.inner_results.log_accept_ratio))
  assert step_size[-1] > 0.05  # Tuned up from a too-small start.
  accept = np.exp(np.minimum(log_accept[100:], 0.)).mean()
  assert 0.6 < accept < 0.9, accept


@pytest.mark.parametrize("make_kernel", [
    lambda t: sg.SGLD(t, step_size=1e-3),
    lambda t: sg.SGHMC(t, step_size=1e-2, friction=5.),
    lambda t: sg.AMAGOLD(t, step_size=1e-2, num_leapfrog_steps=3,
                         friction=1.),
], ids=["sgld", "sghmc", "amagold"])
def test_copy_with_a_new_target_samples_the_new_target(make_kernel):
  # `parameters` holds the old target's own `target_log_prob_fn`; a copy
  # given only a new `target` must sample the new one, not the old one.
  def target_at(centre):
    return sg.NoisyGradientTarget(
        lambda x: 0.5 * tf.reduce_sum((x - centre) ** 2, -1),
        gradient_noise_variance=0.)
  kernel = make_kernel(target_at(0.)).copy(target=target_at(3.))
  assert kernel.target_log_prob_fn.target is kernel.target
  state = tf.zeros([2, 1])
  kernel.bootstrap_results(state)
  np.testing.assert_allclose(kernel.target.energy(state), [4.5, 4.5])


# --- the mass matrix, as TFP's preconditioned HMC takes it --------------------


SCALES = np.array([0.02, 20.], np.float32)


def _scaled_target():
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x / SCALES) ** 2, -1),
      gradient_noise_variance=0.)


_MASS_KERNELS = {
    "SGHMC": lambda **kw: sg.SGHMC(_scaled_target(), step_size=0.01,
                                   friction=1., **kw),
    # Its results are a type of its own: TFP's wrappers still find them.
    "NaiveSGHMC": lambda **kw: sg.NaiveSGHMC(_scaled_target(),
                                             step_size=0.01, **kw),
    "SGNHT": lambda **kw: sg.SGNHT(_scaled_target(), step_size=0.01, **kw),
    "AMAGOLD": lambda **kw: sg.AMAGOLD(_scaled_target(), step_size=0.01,
                                       num_leapfrog_steps=3, friction=0.5,
                                       **kw),
}


def _inverse_mass(results, like):
  """The diagonal M^{-1} of the innermost results' momentum distribution."""
  dist = unnest.get_innermost(results, "momentum_distribution")
  return sg.dynamics.hamiltonian.velocity(tf.ones_like(like), dist)


@pytest.mark.parametrize("name", sorted(_MASS_KERNELS))
def test_diagonal_mass_matrix_adaptation_sets_the_mass_and_freezes_it(name):
  # TFP's DiagonalMassMatrixAdaptation around the kernel as it is: it finds
  # `momentum_distribution` in the results (after rebuilding the kernel with
  # store_parameters_in_results=True), sets M^{-1} to the running variance
  # of the first n states at step n, and the kernel uses it from then on.
  state = tf.constant(np.random.default_rng(0).normal(
      size=(4, 2)).astype(np.float32) * SCALES)
  n = 30
  kernel = tfp.experimental.mcmc.DiagonalMassMatrixAdaptation(
      _MASS_KERNELS[name](
          momentum_distribution=sg.diagonal_momentum_distribution(
              state, batch_ndims=1)),
      tfp.experimental.stats.RunningVariance.from_shape([2]),
      num_estimation_steps=n)
  draws, inverse_mass = sample(
      kernel, state, n + 5, seed=[3, 4],
      trace_fn=lambda s, pkr: _inverse_mass(pkr, s), jit=False)
  draws, inverse_mass = np.asarray(draws), np.asarray(inverse_mass)
  np.testing.assert_array_equal(inverse_mass[:n - 1], 1.)
  expected = np.var(draws[:n].reshape(-1, 2), axis=0)
  np.testing.assert_allclose(inverse_mass[n - 1:],
                             np.broadcast_to(expected, (6, 4, 2)), rtol=1e-4)
  # The scales differ 1000x, and so does the estimate.
  assert expected[1] / expected[0] > 100.


@pytest.mark.parametrize("name", ["SGHMC", "AMAGOLD"])
def test_diagonal_mass_matrix_adaptation_around_an_identity_kernel(name):
  # No momentum distribution (the identity): the adaptation builds one at
  # bootstrap from its initial running variance and updates it every step.
  state = tf.constant(np.random.default_rng(1).normal(
      size=(4, 2)).astype(np.float32) * SCALES)
  initial = tfp.experimental.stats.RunningVariance.from_stats(
      num_samples=10., mean=tf.zeros([2]), variance=tf.constant(SCALES ** 2))
  kernel = tfp.experimental.mcmc.DiagonalMassMatrixAdaptation(
      _MASS_KERNELS[name](), initial)
  draws, inverse_mass = sample(
      kernel, state, 20, seed=[5, 6],
      trace_fn=lambda s, pkr: _inverse_mass(pkr, s), jit=False)
  draws = np.asarray(draws).reshape(20, -1, 2)
  # Running variance after k steps: 10 prior samples, then 4 chains a step.
  for k in (1, 20):
    x = draws[:k].reshape(-1, 2)
    total = 10. + len(x)
    mean = x.sum(0) / total
    second = (10. * SCALES ** 2 + (x ** 2).sum(0)) / total
    np.testing.assert_allclose(inverse_mass[k - 1, 0], second - mean ** 2,
                               rtol=1e-3)
  assert np.all(np.isfinite(draws))


def test_a_momentum_distribution_survives_copy_and_step_size_adaptation():
  dist = sg.diagonal_momentum_distribution(tf.zeros([4, 2]), batch_ndims=1,
                                           inverse_mass=SCALES ** 2)
  kernel = _MASS_KERNELS["AMAGOLD"](momentum_distribution=dist)
  assert kernel.copy(step_size=0.02).momentum_distribution is dist
  assert kernel.inner_kernel.momentum_distribution is dist
  adaptive = tfp.mcmc.DualAveragingStepSizeAdaptation(kernel, 20)
  _, inverse_mass = sample(adaptive, tf.zeros([4, 2]), 25, seed=[1, 2],
                           trace_fn=lambda s, pkr: _inverse_mass(pkr, s),
                           jit=False)
  np.testing.assert_allclose(inverse_mass, np.broadcast_to(
      SCALES ** 2, (25, 4, 2)), rtol=1e-5)


_IDENTITY_KERNELS = {
    "SGHMC": lambda **kw: sg.SGHMC(_scaled_target(), step_size=0.01,
                                   friction=1., **kw),
    # Its results are a type of its own: TFP's wrappers still find them.
    "NaiveSGHMC": lambda **kw: sg.NaiveSGHMC(_scaled_target(),
                                             step_size=0.01, **kw),
    "SGNHT": lambda **kw: sg.SGNHT(_scaled_target(), step_size=0.01, **kw),
    "AMAGOLD": lambda **kw: sg.AMAGOLD(_scaled_target(), step_size=0.01,
                                       num_leapfrog_steps=3, friction=0.5,
                                       **kw),
    # TFP's own preconditioned HMC, the convention the others follow.
    "PreconditionedHamiltonianMonteCarlo": lambda **kw: (
        tfp.experimental.mcmc.PreconditionedHamiltonianMonteCarlo(
            lambda x: -0.5 * tf.reduce_sum((x / SCALES) ** 2, -1),
            step_size=0.01, num_leapfrog_steps=3, **kw)),
}


@pytest.mark.parametrize("name", sorted(_IDENTITY_KERNELS))
def test_frozen_mass_adaptation_of_a_kernel_without_a_mass_sets_it(name):
  # TFP's windowed convention: the kernel built with no momentum
  # distribution, reading its parameters from its results; the adaptation
  # replaces the identity it keeps there at step n with the inverse of the
  # draws' variance, which the kernel then steps with.
  state = tf.constant(np.random.default_rng(2).normal(
      size=(4, 2)).astype(np.float32) * SCALES)
  n = 30
  kernel = tfp.experimental.mcmc.DiagonalMassMatrixAdaptation(
      _IDENTITY_KERNELS[name](store_parameters_in_results=True),
      tfp.experimental.stats.RunningVariance.from_shape([2]),
      num_estimation_steps=n)
  draws, inverse_mass = sample(
      kernel, state, n + 5, seed=[7, 8],
      trace_fn=lambda s, pkr: _inverse_mass(pkr, s), jit=False)
  draws, inverse_mass = np.asarray(draws), np.asarray(inverse_mass)
  assert np.all(np.isfinite(draws))
  np.testing.assert_array_equal(inverse_mass[:n - 1], 1.)
  expected = np.var(draws[:n].reshape(-1, 2), axis=0)
  np.testing.assert_allclose(inverse_mass[n - 1:],
                             np.broadcast_to(expected, (6, 4, 2)), rtol=1e-4)
  # The posterior's scales differ 1000x (variances 1e6x): the mass follows.
  assert expected[1] / expected[0] > 100.


@pytest.mark.parametrize("name", ["SGHMC", "SGNHT", "AMAGOLD"])
def test_without_a_mass_the_identity_chain_is_unchanged(name):
  # Keeping the identity as TFP's diagonal form (M^{-1} = 1) in the results
  # of a kernel that reads them does not change the chain: the same draws
  # and the same real numbers, rounded alike up to the last bits. Bit for
  # bit on some CPUs; on others (AVX-512 Xeons) even eager runs of the two
  # round a few values differently, by about one float32 ulp of the
  # coordinate's scale per step, so 6 steps are held to 8 ulps of each
  # coordinate's (4e-8 and 5e-5 here). A mass of 1.1 instead of 1 moves
  # both coordinates by 3e-3 to 1e-2.
  state = tf.constant(np.random.default_rng(3).normal(
      size=(4, 2)).astype(np.float32) * SCALES)
  jit = name == "AMAGOLD"
  plain = np.asarray(sample(_MASS_KERNELS[name](), state, 6, seed=[1, 2],
                            jit=jit))
  stored = np.asarray(sample(
      _MASS_KERNELS[name](store_parameters_in_results=True), state, 6,
      seed=[1, 2], jit=jit))
  ulp = np.finfo(np.float32).eps * np.max(np.abs(plain), axis=(0, 1))
  assert np.all(np.abs(stored - plain) <= 8. * ulp), (stored - plain, ulp)
