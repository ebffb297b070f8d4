"""A kernel or wrapper that needs what its target cannot give says so, at
construction or at the first step: an exact full-data energy (exact AMAGOLD,
control variates), a gradient-noise estimate (SGHMC's empirical Fisher,
c-SGBD), minibatches chosen by the seed (amortized Barker), a full-batch
density (TFP's MetropolisHastings and ReplicaExchangeMC).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.barker_gaussian import gaussian_energy, noisy_gaussian
from support.linear_regression import LinearRegression
from support.variance_problem import variance_problem


def quadratic(x):
  return 0.5 * tf.reduce_sum(x ** 2, -1)


def data_target(batch_size=4, n=10):
  x = np.zeros((n, 2), np.float32)
  return sg.InMemoryTarget(
      lambda w, b: -0.5 * tf.reduce_sum((b - w[..., None, :]) ** 2, -1),
      x, batch_size)


def test_per_example_noise_estimate_needs_two_examples():
  kernel = sg.SGHMC(data_target(batch_size=1), 0.1, 1.,
                    noise_estimate="empirical_fisher")
  state = tf.zeros([2])
  results = kernel.bootstrap_results(state)
  with pytest.raises(ValueError, match="`batch_size` >= 2; got 1"):
    kernel.one_step(state, results, seed=[1, 2])


def test_noise_estimate_unavailable_for_streamed_target_without_grads():
  # NoisyGradientTarget knows V; a target that cannot estimate it says so.
  class NoNoise(sg.NoisyGradientTarget):
    def gradient_noise_variance(self, state, seed):
      return sg.MinibatchTarget.gradient_noise_variance(self, state, seed)
  kernel = sg.SGHMC(NoNoise(quadratic, gradient_noise_variance=1.), 0.1, 1.,
                    noise_estimate="empirical_fisher")
  state = tf.zeros([2])
  with pytest.raises(sg.TargetCapabilityError, match="cannot estimate"):
    kernel.one_step(state, kernel.bootstrap_results(state), seed=[1, 2])


def test_exact_acceptance_needs_a_target_with_full_data_energy():
  problem = LinearRegression(num_examples=20, dim=2, seed=5)
  dataset = tf.data.Dataset.from_tensor_slices(problem.data).repeat().batch(5)
  target = sg.DatasetTarget(problem.log_likelihood, dataset, 20)
  assert not target.has_exact_energy
  with pytest.raises(sg.TargetCapabilityError, match="full_dataset"):
    sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=10, friction=0.5)
  # The approximate test is allowed.
  sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=10, friction=0.5,
             acceptance_energy="minibatch")


def test_data_too_small_for_a_per_example_noise_estimate():
  problem = LinearRegression(num_examples=20, dim=2, seed=2)
  with pytest.raises(ValueError, match=r"variant='corrected'.*`batch_size` "
                     ">= 2; got 1"):
    sg.SGBD(problem.in_memory_target(batch_size=1), 0.1, variant="corrected")
  # The other variants need no noise estimate.
  sg.SGBD(problem.in_memory_target(batch_size=1), 0.1, variant="vanilla")


def test_target_without_a_noise_estimate():
  class NoNoise(sg.NoisyGradientTarget):
    def gradient_noise_variance(self, state, seed):
      return sg.MinibatchTarget.gradient_noise_variance(self, state, seed)
  kernel = sg.SGBD(NoNoise(gaussian_energy, gradient_noise_variance=1.), 0.1,
                   variant="corrected")
  with pytest.raises(sg.TargetCapabilityError, match="cannot estimate"):
    kernel.bootstrap_results(tf.zeros([2]))


def test_amortized_barker_needs_seed_chosen_minibatches():
  problem = LinearRegression(num_examples=20, dim=2, seed=3)
  dataset = tf.data.Dataset.from_tensor_slices(problem.data).repeat().batch(5)
  target = sg.DatasetTarget(problem.log_likelihood, dataset, 20)
  with pytest.raises(sg.TargetCapabilityError, match="chosen by the"):
    sg.UncalibratedBarker(target, 0.1, num_steps=2)
  with pytest.raises(ValueError, match="`reverse_minibatch` must be one of"):
    sg.AmortizedBarker(noisy_gaussian(), 0.1, 2, reverse_minibatch="fresh")


def test_amortized_barker_refuses_a_wrapped_dataset_target():
  x = np.zeros((10, 1), np.float32)
  ds = tf.data.Dataset.from_tensor_slices(x).batch(2).repeat()
  target = sg.DatasetTarget(lambda w, b: -tf.reduce_sum((b - w) ** 2, -1),
                            ds, 10)
  with pytest.raises(sg.TargetCapabilityError, match="DatasetTarget"):
    sg.UncalibratedBarker(sg.TemperedTarget(target, 0.5), 0.1, num_steps=2)


def test_control_variate_target_needs_an_exact_energy():
  x = np.zeros((10, 1), np.float32)
  ds = tf.data.Dataset.from_tensor_slices(x).batch(2).repeat()
  target = sg.DatasetTarget(lambda w, b: -tf.reduce_sum((b - w) ** 2, -1),
                            ds, 10)
  with pytest.raises(sg.TargetCapabilityError, match="exact full-data"):
    sg.ControlVariateTarget(target, tf.zeros([1]))


tfd, tfb = tfp.distributions, tfp.bijectors
MVN = tfd.MultivariateNormalDiag([1., -1.], [1., 2.])


def test_metropolis_hastings_refuses_minibatch_targets_at_its_first_step():
  # TFP's class is not changed: the kernel refuses at the first one_step
  # TFP's MetropolisHastings makes it take (when traced).
  target, _, _ = variance_problem(num_examples=100, batch_size=10)
  state = tf.ones([2, 1])
  for kernel in (tfp.mcmc.MetropolisHastings(sg.SGLD(target, 1e-3)),
                 tfp.mcmc.MetropolisHastings(
                     sg.SGHMC(target, 1e-3, friction=1.))):
    results = kernel.bootstrap_results(state)
    with pytest.raises(ValueError, match="minibatch energies"):
      kernel.one_step(state, results, seed=[1, 2])
    with pytest.raises(ValueError, match="minibatch energies"):
      tf.function(lambda k=kernel, r=results: k.one_step(
          state, r, seed=[1, 2]))()


@pytest.mark.parametrize("make", [
    lambda **t: sg.AMAGOLD(step_size=1e-3, num_leapfrog_steps=2,
                           friction=1., **t),
    lambda **t: sg.AmortizedBarker(step_size=0.1, num_steps=2, **t),
    lambda **t: sg.AmortizedMetropolisHastings(sg.UncalibratedAMAGOLD(
        step_size=1e-3, num_leapfrog_steps=2, friction=1., **t)),
])
@pytest.mark.parametrize("full_batch", [False, True])
def test_metropolis_hastings_refuses_a_kernel_with_its_own_test(make,
                                                               full_batch):
  # A kernel that already makes its own exact test leaves its chain pi-
  # invariant; TFP's second test (log_acceptance_correction 0) would accept
  # the corrected move with probability min(1, pi(x')/pi(x)) and narrow the
  # posterior. Refused at the first step, eagerly and when traced, so that
  # sample_chain says so instead of failing on a loop's changing shapes.
  target, _, _ = variance_problem(num_examples=100, batch_size=10)
  given = (dict(target_log_prob_fn=MVN.log_prob) if full_batch else
           dict(target=target))
  state = tf.zeros([2, 2]) if full_batch else tf.ones([2, 1])
  kernel = tfp.mcmc.MetropolisHastings(make(**given))
  results = kernel.bootstrap_results(state)
  message = r"own exact test.*min\(1, pi\(x'\) / pi\(x\)\).*without"
  with pytest.raises(ValueError, match=message):
    kernel.one_step(state, results, seed=[1, 2])
  with pytest.raises(ValueError, match=message):
    tfp.mcmc.sample_chain(3, state, kernel=kernel, trace_fn=None,
                          seed=[1, 2])


def test_metropolis_hastings_refuses_a_proposal_that_keeps_its_momentum():
  # Skew-reversible AMAGOLD's proposal carries its momentum over; TFP's
  # rejection keeps it where an exact one negates it (sd 1.235 for 1 on a
  # standard normal). Refused at the first step; the reversible proposal,
  # which redraws the momentum, stays TFP's to test.
  def proposal(resample_momentum):
    return sg.UncalibratedAMAGOLD(
        target_log_prob_fn=MVN.log_prob, step_size=0.5, num_leapfrog_steps=1,
        friction=0.05, resample_momentum=resample_momentum)
  state = tf.zeros([2, 2])
  kernel = tfp.mcmc.MetropolisHastings(proposal(False))
  with pytest.raises(ValueError, match=r"resample_momentum=False.*negate"):
    tfp.mcmc.sample_chain(3, state, kernel=kernel, trace_fn=None,
                          seed=[1, 2])
  tfp.mcmc.sample_chain(3, state, trace_fn=None, seed=[1, 2],
                        kernel=tfp.mcmc.MetropolisHastings(proposal(True)))
  # Its own exact test negates the momentum: not refused.
  tfp.mcmc.sample_chain(3, state, trace_fn=None, seed=[1, 2],
                        kernel=sg.AmortizedMetropolisHastings(proposal(False)))


def test_metropolis_hastings_refuses_a_temperature_it_would_drop():
  # SGLD's temperature scales its noise only; TFP's test compares the
  # untempered log density, so MALA at T = 2 sampled T = 1 (sd 1.00 for
  # 1.41 on a standard normal). Refused; T = 1 stays MALA.
  state = tf.zeros([2, 2])
  kernel = tfp.mcmc.MetropolisHastings(sg.SGLD(
      target_log_prob_fn=MVN.log_prob, step_size=0.5, temperature=2.))
  with pytest.raises(ValueError, match=r"`temperature`=2.0.*T = 1"):
    tfp.mcmc.sample_chain(3, state, kernel=kernel, trace_fn=None,
                          seed=[1, 2])
  tfp.mcmc.sample_chain(3, state, trace_fn=None, seed=[1, 2],
                        kernel=tfp.mcmc.MetropolisHastings(sg.SGLD(
                            target_log_prob_fn=MVN.log_prob, step_size=0.5,
                            temperature=1.)))


@pytest.mark.parametrize("jit", [False, True])
def test_metropolis_hastings_refuses_a_variable_temperature(jit):
  # A tf.Variable temperature has no value to check while the chain is
  # built; it passed unchecked, and MALA with a Variable T = 2 sampled
  # T = 1 (variance 1.00 on a standard normal, SGLD alone 2). TFP's test
  # drops whatever value it holds: refused, naming the Variable's value.
  state = tf.zeros([2, 2])
  kernel = tfp.mcmc.MetropolisHastings(sg.SGLD(
      target_log_prob_fn=MVN.log_prob, step_size=0.5,
      temperature=tf.Variable(2.)))
  run = tf.function(lambda: tfp.mcmc.sample_chain(
      3, state, kernel=kernel, trace_fn=None, seed=[1, 2]),
                    jit_compile=jit)
  with pytest.raises(ValueError,
                     match=r"`temperature` a tf.Variable \(.*2\.0.*T = 1"):
    run()


@pytest.mark.parametrize("make", [
    lambda f: sg.SGBD(target_log_prob_fn=f, step_size=0.5),
    lambda f: sg.SGHMC(target_log_prob_fn=f, step_size=0.3, friction=1.),
    lambda f: sg.NaiveSGHMC(target_log_prob_fn=f, step_size=0.3),
    lambda f: sg.SGNHT(target_log_prob_fn=f, step_size=0.3),
    lambda f: sg.PreconditionedSGLD(target_log_prob_fn=f, step_size=0.1),
], ids=["SGBD", "SGHMC", "NaiveSGHMC", "SGNHT", "PreconditionedSGLD"])
@pytest.mark.parametrize("state", [tf.zeros([]), tf.zeros([2, 2])],
                         ids=["one_chain", "two_chains"])
def test_metropolis_hastings_refuses_a_move_without_proposal_ratio(make,
                                                                  state):
  # These moves are not symmetric and report no log_acceptance_correction;
  # TFP's test took them as symmetric. With one chain it ran and was
  # wrong (variance 0.14-0.15 for 0.25 on N(1, 0.5^2), 40 standard errors
  # off); with several it failed in TensorFlow's words. Refused.
  axes = list(range(1, state.shape.rank))  # Events: all but the chains.
  def log_prob(x):
    return tf.reduce_sum(-2. * (x - 1.) ** 2, axes)
  kernel = tfp.mcmc.MetropolisHastings(make(log_prob))
  with pytest.raises(ValueError, match=r"no proposal ratio.*symmetric"):
    tfp.mcmc.sample_chain(3, state, kernel=kernel, trace_fn=None,
                          seed=[1, 2])


@pytest.mark.parametrize("make", [
    lambda f, t: sg.SGLD(target_log_prob_fn=f, step_size=0.01,
                         temperature=t),
    lambda f, t: sg.PreconditionedSGLD(target_log_prob_fn=f,
                                       step_size=0.01, temperature=t),
    lambda f, t: sg.SGHMC(target_log_prob_fn=f, step_size=0.1, friction=1.,
                          temperature=t),
    lambda f, t: sg.SGNHT(target_log_prob_fn=f, step_size=0.1,
                          temperature=t),
    lambda f, t: sg.SGNUTS(target_log_prob_fn=f, step_size=0.1,
                           friction=1., temperature=t),
    lambda f, t: sg.SGBD(target_log_prob_fn=f, step_size=0.1,
                         temperature=t),
    lambda f, t: sg.AMAGOLD(target_log_prob_fn=f, step_size=0.3,
                            num_leapfrog_steps=5, friction=0.5,
                            temperature=t),
    lambda f, t: sg.AmortizedBarker(target_log_prob_fn=f, step_size=0.4,
                                    num_steps=3, temperature=t),
], ids=["SGLD", "pSGLD", "SGHMC", "SGNHT", "SGNUTS", "SGBD", "AMAGOLD",
        "AmortizedBarker"])
def test_transformed_kernel_refuses_a_kernel_that_would_temper_the_jacobian(
    make):
  # The kernel tempered TFP's transformed density, log-Jacobian included:
  # AMAGOLD at T = 0.5 on a Gamma(3, 2) through Exp gave a mean of 1.50,
  # through Softplus 1.37, for the tempered posterior's 1.25. Refused when
  # the transformed kernel is built; T = 1 is built as before.
  log_prob = tfd.Gamma(3., 2.).log_prob
  with pytest.raises(ValueError, match=r"`temperature`=0.5.*log-Jacobian"
                     r".*TemperedTarget"):
    tfp.mcmc.TransformedTransitionKernel(make(log_prob, 0.5), tfb.Exp())
  with pytest.raises(ValueError, match=r"`temperature`=tf.Variable"):
    tfp.mcmc.TransformedTransitionKernel(make(log_prob, tf.Variable(1.)),
                                         tfb.Exp())
  tfp.mcmc.TransformedTransitionKernel(make(log_prob, 1.), tfb.Exp())


def test_a_minibatch_log_prob_fn_is_not_a_density():
  # ReplicaExchangeMC leaves no mark on the results of its replicas (see
  # docs/tfp_workflow.md); the kernel's own minibatch function cannot be
  # evaluated on its own, so it cannot be the exchange's target.
  target, _, _ = variance_problem(num_examples=100, batch_size=10)
  with pytest.raises(ValueError, match="ReplicaExchangeMC"):
    sg.SGLD(target, 1e-3).target_log_prob_fn(tf.ones([1]))
