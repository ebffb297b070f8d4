"""compute_energy=False: every kernel whose update uses only the gradient
gives the same chain, bit for bit under XLA, with NaN energies; the flag
survives TFP's copy and TransformedTransitionKernel; AMAGOLD's accept and
reject decisions are unchanged; a diverging chain is still flagged (from
the gradient).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import sample


tfd, tfb = tfp.distributions, tfp.bijectors


def _logistic_target(batch_size=20):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 3)).astype(np.float32)
  y = (rng.uniform(size=200) < 0.5).astype(np.float32)

  def log_likelihood(w, batch):
    xb, yb = batch
    logits = tf.einsum("nd,...d->...n", xb, w)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(yb, tf.shape(logits)), logits=logits)
  return sg.InMemoryTarget(log_likelihood, (x, y), batch_size,
                           log_prior_fn=lambda w: -0.5 * tf.reduce_sum(
                               w ** 2, -1))


# The kernels whose update uses only the gradient.
_ENERGY_FREE = {
    "sgld": lambda t, **kw: sg.SGLD(t, step_size=1e-3, **kw),
    "sghmc_fisher": lambda t, **kw: sg.SGHMC(
        t, step_size=1e-2, friction=5., noise_estimate="empirical_fisher",
        **kw),
    "sghmc_splitting": lambda t, **kw: sg.SGHMC(
        t, step_size=1e-2, friction=5., integrator="splitting",
        momentum_resampling_period=7, **kw),
    "psgld": lambda t, **kw: sg.PreconditionedSGLD(t, step_size=1e-3, **kw),
    "sgnht": lambda t, **kw: sg.SGNHT(t, step_size=1e-2, **kw),
    "sgbd_tempered": lambda t, **kw: sg.SGBD(
        t, step_size=0.1, variant="corrected", temperature=2., **kw),
}


@pytest.mark.parametrize("name", sorted(_ENERGY_FREE))
def test_compute_energy_false_is_the_same_chain_with_nan_energies(name):
  # TFP's UncalibratedLangevin(compute_acceptance=False) precedent: the
  # energy does not feed the update, so skipping it must leave the chain
  # bit for bit as it was (compiled with XLA, which then drops the energy's
  # log1p), and the fields it would fill hold NaN.
  make = _ENERGY_FREE[name]
  target = _logistic_target()
  init = tf.constant(np.random.default_rng(1).normal(
      size=(4, 3)).astype(np.float32))
  trace = lambda _, r: (r.energy, r.target_log_prob, r.diverged)
  draws, (energy, _, _) = sample(make(target), init, 25, seed=[3, 4],
                                 trace_fn=trace)
  kernel = make(target, compute_energy=False)
  same, (nan_energy, nan_tlp, diverged) = sample(kernel, init, 25,
                                                 seed=[3, 4], trace_fn=trace)
  np.testing.assert_array_equal(np.asarray(same), np.asarray(draws))
  assert np.all(np.isfinite(energy))
  assert np.all(np.isnan(nan_energy)) and np.all(np.isnan(nan_tlp))
  assert nan_energy.shape == energy.shape and not np.any(diverged)
  results = kernel.bootstrap_results(init)
  assert np.all(np.isnan(results.energy)) and results.energy.shape == [4]
  # Kept in `parameters`, so TFP's copy (and its wrappers) keep it.
  assert kernel.parameters["compute_energy"] is False
  assert kernel.copy(target=target).compute_energy is False
  assert make(target).compute_energy is True


def test_compute_energy_false_under_transformed_transition_kernel():
  # TransformedTransitionKernel rebuilds the kernel with `copy`: the flag
  # is kept and the step needs only the gradient through the bijector.
  kernel = tfp.mcmc.TransformedTransitionKernel(
      sg.SGLD(_logistic_target(), 1e-3, compute_energy=False), tfb.Exp())
  state = tf.ones([2, 3])
  results = kernel.bootstrap_results(state)
  assert results.inner_results is not None
  new_state, results = kernel.one_step(state, results, seed=[1, 2])
  assert kernel.inner_kernel.compute_energy is False
  assert np.all(np.isnan(results.inner_results.energy))
  assert np.all(np.isfinite(new_state)) and not np.any(
      results.inner_results.diverged)
  naive = sg.NaiveSGHMC(_logistic_target(), 1e-2, compute_energy=False)
  assert naive.copy().parameters["compute_energy"] is False


@pytest.mark.parametrize("acceptance_energy", ["exact", "minibatch"])
def test_amagold_compute_energy_false_is_the_same_chain(acceptance_energy):
  # The last leapfrog step's minibatch energy is a diagnostic: neither test
  # reads it (exact: U(theta*); minibatch: two energies on a batch of its
  # own), so skipping it leaves every accept/reject and state as it was.
  target = _logistic_target()
  init = tf.constant(np.random.default_rng(1).normal(
      size=(4, 3)).astype(np.float32))
  def make(**kw):
    return sg.AMAGOLD(target, 0.05, num_leapfrog_steps=3, friction=1.,
                      acceptance_energy=acceptance_energy, **kw)
  trace = lambda _, r: (r.is_accepted, r.accepted_results.minibatch_energy,
                        r.accepted_results.diverged)
  # A graph without XLA (the other kernels' test compiles with XLA).
  draws, (accepted, energy, _) = sample(make(), init, 15, seed=[3, 4],
                                        trace_fn=trace, jit=False)
  kernel = make(compute_energy=False)
  same, (same_accepted, nan_energy, diverged) = sample(
      kernel, init, 15, seed=[3, 4], trace_fn=trace, jit=False)
  np.testing.assert_array_equal(np.asarray(same), np.asarray(draws))
  np.testing.assert_array_equal(same_accepted, accepted)
  assert 0 < np.mean(accepted) < 1  # The test decided something.
  assert np.all(np.isfinite(energy)) and np.all(np.isnan(nan_energy))
  assert not np.any(diverged)
  assert kernel.copy().inner_kernel.compute_energy is False


_ENERGY_FREE_KERNELS = {
    "SGLD": lambda t, **kw: sg.SGLD(t, 0.1, **kw),
    "SGHMC": lambda t, **kw: sg.SGHMC(t, 0.1, friction=1., **kw),
    "PreconditionedSGLD": lambda t, **kw: sg.PreconditionedSGLD(t, 0.1, **kw),
    "SGNHT": lambda t, **kw: sg.SGNHT(t, 0.1, **kw),
    "SGBD": lambda t, **kw: sg.SGBD(t, 0.5, variant="extreme", **kw),
}


@pytest.mark.parametrize("name", sorted(_ENERGY_FREE_KERNELS))
def test_diverging_chain_is_flagged_without_the_energy(name):
  # U = -10 x, finite everywhere, with a NaN gradient from x = 3 on: every
  # kernel climbs from x = 0 and meets the NaN gradient; a chain at -1000
  # cannot reach it in 60 steps. With compute_energy=False the flag reads the
  # gradient (SGBD's move stays finite with a NaN gradient: without that
  # check its chain 0 is not flagged and this test fails).
  @tf.custom_gradient
  def energy_nan_gradient(x):
    def gradient(upstream):
      return upstream[..., None] * tf.where(
          x < 3., tf.fill(tf.shape(x), -10.), tf.fill(tf.shape(x), np.nan))
    return -10. * x[..., 0], gradient
  target = sg.NoisyGradientTarget(energy_nan_gradient,
                                  gradient_noise_variance=0.)
  kernel = _ENERGY_FREE_KERNELS[name](target, compute_energy=False)
  draws, (diverged, reported) = sample(
      kernel, tf.constant([[0.], [-1000.]]), 60, seed=[1, 2],
      trace_fn=lambda _, r: (r.diverged, r.energy), jit=False)
  draws, diverged = np.asarray(draws), np.asarray(diverged)
  assert np.all(np.isnan(reported))
  assert diverged[-1, 0] and not diverged[:, 1].any()
  assert np.all(np.isfinite(draws))
  first = np.argmax(diverged[:, 0])
  assert diverged[first:, 0].all()
  assert np.all(draws[first:, 0] == draws[first, 0])
  assert draws[first, 0, 0] >= 3.  # The state whose gradient was NaN.


def _full_batch_log_prob(w):
  return -0.5 * tf.reduce_sum((w - 1.) ** 2 * tf.constant([1., 4., 9.]), -1)


_FULL_BATCH = {
    "SGHMC": lambda **kw: sg.SGHMC(step_size=0.05, friction=1., **kw),
    "SGNHT": lambda **kw: sg.SGNHT(step_size=0.05, **kw),
    "AMAGOLD": lambda **kw: sg.AMAGOLD(step_size=0.1, num_leapfrog_steps=3,
                                       friction=0.5, **kw),
}


@pytest.mark.parametrize("name", sorted(_FULL_BATCH))
def test_full_batch_compute_energy_false_is_the_same_chain_without_log_prob(
    name):
  # With a full-batch target nothing in these kernels' own step reads the
  # log density: skipping it (and the energy at the gradient's point) leaves
  # the chain as it was, reports NaN, and MetropolisHastings, which would
  # compare it, refuses the kernel.
  init = tf.constant(np.random.default_rng(2).normal(
      size=(4, 3)).astype(np.float32))
  runs = {}
  for energy in (True, False):
    kernel = _FULL_BATCH[name](target_log_prob_fn=_full_batch_log_prob,
                               compute_energy=energy)
    # AMAGOLD as in its minibatch test: a graph without XLA.
    runs[energy] = sample(kernel, init, 30, seed=[4, 5],
                          trace_fn=lambda _, pkr: pkr,
                          jit=name != "AMAGOLD")
  np.testing.assert_array_equal(runs[True][0], runs[False][0])
  with_energy, without = runs[True][1], runs[False][1]
  if name == "AMAGOLD":
    # The exact test computes U(theta*) and reports it (also as the
    # proposal's target_log_prob) either way; the proposal skips its own
    # log density and the last step's energy.
    np.testing.assert_array_equal(with_energy.target_log_prob,
                                  without.target_log_prob)
    assert np.all(np.isfinite(
        with_energy.proposed_results.minibatch_energy))
    assert np.all(np.isnan(without.proposed_results.minibatch_energy))
  else:
    assert np.all(np.isfinite(with_energy.target_log_prob))
    assert np.all(np.isnan(without.target_log_prob))
  kernel = _FULL_BATCH[name](target_log_prob_fn=_full_batch_log_prob,
                             compute_energy=False)
  if name != "AMAGOLD":
    assert not kernel.reports_exact_log_prob
    with pytest.raises(ValueError, match=r"compute_energy=False`.*"
                       r"target_log_prob` holds NaN.*compute_energy=True"):
      mh = tfp.mcmc.MetropolisHastings(kernel)  # Refused at its first step.
      mh.one_step(init, mh.bootstrap_results(init), seed=[1, 2])
