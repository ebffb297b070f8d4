"""The `momentum_distribution` argument of SGHMC, NaiveSGHMC, SGNHT, AMAGOLD
and UncalibratedAMAGOLD: kept in `parameters` (so `copy` and TFP's wrappers
keep it), batched to the chains in the results' field of the same name
(`()` for the identity), read from the results when the kernel stores its
parameters there, and refused with a message when it does not fit the state
or clashes with `noise_estimate` / `momentum_std`."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd = tfp.distributions


def _target():
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2 * tf.constant([1., 100.]), -1),
      gradient_noise_variance=0.)


KERNELS = {
    "SGHMC": lambda **kw: sg.SGHMC(_target(), step_size=0.05, friction=1.,
                                   **kw),
    "NaiveSGHMC": lambda **kw: sg.NaiveSGHMC(
        _target(), step_size=0.05, momentum_resampling_period=5, **kw),
    "SGNHT": lambda **kw: sg.SGNHT(_target(), step_size=0.05, **kw),
    "AMAGOLD": lambda **kw: sg.AMAGOLD(_target(), step_size=0.05,
                                       num_leapfrog_steps=2, friction=0.5,
                                       **kw),
    "UncalibratedAMAGOLD": lambda **kw: sg.UncalibratedAMAGOLD(
        _target(), step_size=0.05, num_leapfrog_steps=2, friction=0.5, **kw),
}


def _field(results):
  results = getattr(results, "accepted_results", results)
  return results.momentum_distribution


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_identity_is_an_empty_field_and_a_mass_is_batched(name):
  state = tf.zeros([3, 2])
  kernel = KERNELS[name]()
  assert kernel.parameters["momentum_distribution"] is None
  assert _field(kernel.bootstrap_results(state)) == ()
  mass = tfd.MultivariateNormalDiag(scale_diag=[1., 10.])
  kernel = KERNELS[name](momentum_distribution=mass)
  assert kernel.momentum_distribution is mass
  assert kernel.copy(step_size=0.01).momentum_distribution is mass
  results = kernel.bootstrap_results(state)
  field = _field(results)
  assert [list(s.shape) for s in field.sample(seed=[1, 2])] == [[3, 2]]
  _, results = kernel.one_step(state, results, seed=[1, 2])
  assert _field(results) is field  # Carried to the next step as it was.


@pytest.mark.parametrize("name", ["SGHMC", "AMAGOLD"])
def test_a_kernel_storing_its_parameters_uses_the_results_distribution(name):
  # TFP's adaptation kernels rebuild a kernel with
  # store_parameters_in_results=True and set the distribution in its
  # results: the chain must follow the results', not the constructor's.
  state = tf.ones([3, 2])
  stored = KERNELS[name](momentum_distribution=tfd.MultivariateNormalDiag(
      scale_diag=[1., 1.]), store_parameters_in_results=True)
  results = stored.bootstrap_results(state)
  heavy = sg.dynamics.hamiltonian.batch_momentum_distribution(
      tfd.MultivariateNormalDiag(scale_diag=[1e3, 1e3]), [3])
  if name == "AMAGOLD":
    results = results._replace(accepted_results=(
        results.accepted_results._replace(momentum_distribution=heavy)))
  else:
    results = results._replace(momentum_distribution=heavy)
  moved, _ = stored.one_step(state, results, seed=[1, 2])
  direct = KERNELS[name](momentum_distribution=tfd.MultivariateNormalDiag(
      scale_diag=[1e3, 1e3]))
  expected, _ = direct.one_step(state, direct.bootstrap_results(state),
                                seed=[1, 2])
  np.testing.assert_allclose(moved, expected, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_distribution_not_shaped_like_the_state_is_refused_at_bootstrap(
    name):
  kernel = KERNELS[name](momentum_distribution=tfd.MultivariateNormalDiag(
      scale_diag=[1., 1., 1.]))
  with pytest.raises(ValueError, match=rf"`momentum_distribution` of "
                     rf"\w*{name[-6:]} draws momenta of shapes \[\[3, 3\]\].*"
                     r"state has shapes \[\[3, 2\]\].*"
                     "diagonal_momentum_distribution"):
    kernel.bootstrap_results(tf.zeros([3, 2]))


def test_clashing_arguments_are_refused_naming_both():
  mass = tfd.MultivariateNormalDiag(scale_diag=[1., 10.])
  with pytest.raises(ValueError, match="noise_estimate.*momentum_distrib"):
    sg.SGHMC(_target(), step_size=0.1, friction=1., noise_estimate=0.1,
             momentum_distribution=mass)
  with pytest.raises(ValueError, match="momentum_std.*momentum_distrib"):
    sg.AMAGOLD(_target(), step_size=0.1, num_leapfrog_steps=2, friction=0.5,
               momentum_std=2., momentum_distribution=mass)

