"""What the warm-up picks when the mass and the trajectory length are left to
it (`chains.warmup_picks`): a dense mass for a short vector and a long
enough warm-up, a tuned T on exact gradients only, and explicit options
kept as given. The rule is checked without a run, then once through
`warm_up`'s report. That the pair it picks on exact gradients, a dense mass
and a tuned T, leaves AMAGOLD exact is
tests/statistical/test_adapted_length_exactness.py; that `sample` takes
the same picks (minibatch gradients included),
tests/integration/test_sample_one_call.py."""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import sample as sample_lib
from tfp_sgmcmc.chains import warmup_picks as picks

from support.sample_problems import logistic


def _energy(x):
  return 0.5 * tf.reduce_sum(x ** 2, -1)


def _full_batch():
  return sg.LogProbFnTarget(lambda x: -_energy(x))


def _amagold(target):
  return sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=10,
                    friction=0.5)


def _vector(d):
  return [tf.zeros([4, d])]


def test_full_batch_amagold_on_a_short_vector_gets_dense_and_tuned_length():
  kernel = _amagold(_full_batch())
  mass = picks.pick_mass(kernel, _vector(picks.DENSE_MASS_MAX), 1,
                         picks.DENSE_MIN_STEPS)
  assert mass.choice == "dense" and mass.refusal is None
  assert mass.reason.startswith("dense mass: the state is one vector of 200")
  length = picks.pick_length(kernel)
  assert length.choice is True
  assert "the gradients are exact" in length.reason
  # An in-memory target's full batch is exact too.
  target, _, _ = logistic()
  assert picks.pick_length(_amagold(target.with_full_batch())).choice


@pytest.mark.parametrize("target", [
    lambda: logistic()[0],                              # minibatches
    lambda: sg.ControlVariateTarget(logistic()[0], tf.zeros([3])),
    lambda: sg.NoisyGradientTarget(_energy, gradient_noise_variance=1.)])
def test_minibatch_gradients_keep_the_kernels_length(target):
  length = picks.pick_length(_amagold(target()))
  assert length.choice is False
  assert length.reason.startswith("trajectory length fixed (T = 10): the "
                                  "gradients are minibatch estimates")


def test_exact_gradients_with_a_diagonal_mass_keep_the_kernels_length():
  # With a diagonal mass ChEES froze T = 1-5 on random intercepts and
  # never mixed (R-hat 1.73 or more), where T = 10 mixed on 3 seeds of 4.
  kernel = _amagold(_full_batch())
  length = picks.pick_length(kernel, mass="diagonal")
  assert length.choice is False
  assert length.reason.startswith("trajectory length fixed (T = 10): the "
                                  "mass is diagonal")
  for mass in ("dense", "low_rank", None):
    assert picks.pick_length(kernel, mass=mass).choice is True
  assert picks.pick_length(kernel, True, mass="diagonal").choice is True
  two_parts = _amagold(sg.LogProbFnTarget(
      lambda a, b: -_energy(a) - _energy(b)))
  report = sg.warm_up(two_parts, [tf.zeros([4, 2]), tf.zeros([4, 2])],
                      num_steps=40, seed=[1, 2], jit_compile=False).report
  assert report.mass == "diagonal" and report.num_leapfrog_steps is None
  assert "trajectory length fixed (T = 10): the mass is diagonal" in (
      report.choices)

def test_a_long_vector_a_short_warm_up_or_parts_get_a_diagonal_mass():
  kernel = _amagold(_full_batch())
  long = picks.pick_mass(kernel, _vector(picks.DENSE_MASS_MAX + 1), 1, 1000)
  assert long.choice == "diagonal" and "more than 200 coordinates" in (
      long.reason)
  short = picks.pick_mass(kernel, _vector(3), 1, picks.DENSE_MIN_STEPS - 1)
  assert short.choice == "diagonal" and "fewer than 200 steps" in (
      short.reason)
  parts = picks.pick_mass(kernel, [tf.zeros([4, 2]), tf.zeros([4, 2])], 1,
                          1000)
  assert parts.choice == "diagonal" and "not one vector" in parts.reason
  # Two chain axes: a [2, 4, 3] state is one vector per chain.
  assert picks.pick_mass(kernel, [tf.zeros([2, 4, 3])], 2, 1000).choice == (
      "dense")
  # A kernel without a mass, or without a trajectory of its own.
  sgld = sg.SGLD(_full_batch(), step_size=0.1)
  assert picks.pick_mass(sgld, _vector(3), 1, 1000).choice is None
  assert not picks.pick_length(sgld).choice
  sghmc = sg.SGHMC(_full_batch(), step_size=0.1, friction=1.)
  assert "no trajectory length of its own" in picks.pick_length(
      sghmc).reason


def test_explicit_options_are_kept():
  kernel = _amagold(_full_batch())
  state = _vector(3)
  assert picks.pick_mass(kernel, state, 1, 1000, dense_mass=False).choice == (
      "diagonal")
  assert picks.pick_mass(kernel, _vector(500), 1, 10,
                         dense_mass=True).choice == "dense"
  assert picks.pick_mass(kernel, state, 1, 1000,
                         adapt_mass=False).choice is None
  assert picks.pick_length(kernel, False).choice is False
  minibatch = _amagold(logistic()[0])
  assert picks.pick_length(minibatch, True).choice is True
  assert picks.pick_length(kernel, None, "ksd").choice is False
  # sample's rule is this one, with its refusal of what cannot be dense.
  assert sample_lib.DENSE_MASS_MAX == picks.DENSE_MASS_MAX
  with pytest.raises(ValueError, match="`dense_mass=True` but this SGLD "
                     "takes no mass matrix"):
    sample_lib._dense_applies(sg.SGLD(_full_batch(), step_size=0.1), state,
                              True, 1000)


def test_warm_up_reports_what_it_picked_and_why():
  kernel = _amagold(_full_batch())
  picked = sg.warm_up(kernel, tf.zeros([4, 3]), num_steps=picks.DENSE_MIN_STEPS,
                      seed=[1, 2], jit_compile=False)
  report = picked.report
  assert report.mass == "dense" and report.covariance.shape == (3, 3)
  assert isinstance(report.num_leapfrog_steps, int)
  assert picked.kernel.num_leapfrog_steps == report.num_leapfrog_steps
  assert report.choices == (
      "dense mass: the state is one vector of 3 <= 200 coordinates and the "
      "warm-up has 200 >= 200 steps; trajectory length tuned by ChEES: the "
      "gradients are exact (a full-batch target)")
  # The old default, asked for: diagonal and the kernel's T.
  asked = sg.warm_up(kernel, tf.zeros([4, 3]), num_steps=40, seed=[1, 2],
                     jit_compile=False, mass="diagonal",
                     adapt_num_leapfrog_steps=False)
  assert asked.report.mass == "diagonal" and asked.report.covariance is None
  assert asked.report.num_leapfrog_steps is None
  assert asked.kernel.num_leapfrog_steps == 10
  assert asked.report.choices == (
      "diagonal mass: as asked (mass='diagonal'); trajectory length fixed "
      "(T = 10): as asked (adapt_num_leapfrog_steps=False)")



@pytest.mark.parametrize("state", [tf.zeros([3]), tf.zeros([1, 3])])
def test_one_chain_keeps_the_kernels_length(state):
  # ChEES measures each trajectory against the chains' mean, the chain
  # itself when there is one: its gradient was 0, L stayed the kernel's
  # T h0 = 10 x 0.1, and the "tuned" T was ceil(1 / (2 h)) = 1 at the
  # tuned h of about 0.6, with no trace of the user's 10.
  length = picks.pick_length(_amagold(_full_batch()), num_chains=1)
  assert length.choice is False
  assert "ChEES needs at least 2 chains" in length.reason
  assert picks.pick_length(_amagold(_full_batch()), num_chains=2).choice
  warm = sg.warm_up(_amagold(_full_batch()), state, num_steps=40,
                    seed=[1, 2], jit_compile=False, mass="diagonal")
  assert warm.kernel.num_leapfrog_steps == 10
  assert warm.report.num_leapfrog_steps is None
  assert "(T = 10): ChEES needs at least 2 chains" in warm.report.choices

def test_the_gradient_mass_is_picked_diagonal_and_its_gradients_counted():
  # Where the warm-up would pick a dense mass, the gradients' estimate (a
  # diagonal one) makes it pick the diagonal; with the length tuned too, the
  # gradient taken per test for the mass is counted beside the test's own.
  kernel = _amagold(_full_batch())
  args = dict(num_steps=picks.DENSE_MIN_STEPS, seed=[1, 2], jit_compile=False)
  grads = sg.warm_up(kernel, tf.zeros([4, 3]), mass_estimate="gradients",
                     adapt_num_leapfrog_steps=True, **args).report
  assert grads.mass == "diagonal" and grads.covariance is None
  assert grads.choices.startswith(
      "diagonal mass: mass_estimate='gradients' estimates a diagonal one; "
      "trajectory length tuned by ChEES: as asked")
  tests = sum(w["num_leapfrog_steps"] * w["steps"] for w in grads.windows)
  assert grads.num_gradients == pytest.approx(
      tests + picks.DENSE_MIN_STEPS, rel=1e-6), (grads.num_gradients, tests)


def test_the_draws_scale_leaves_out_coordinates_that_did_not_move():
  # A frozen coordinate's variance 0 would cap the step size at 0.
  scale = picks.draws_scale([np.array([0., 4.]), np.array([[9.]])])
  assert scale == 2.
  assert picks.draws_scale([np.zeros(3)]) is None


def test_a_state_dense_only_as_one_vector_names_that_fix():
  kernel = _amagold(_full_batch())
  # A matrix, or several parts, that as one vector would be dense.
  hint = picks.vector_state_hint(kernel, [tf.zeros([4, 3, 4])], 1, 1000)
  assert "shape [3, 4]" in hint and "parameter_shapes=[12]" in hint
  hint = picks.vector_state_hint(
      kernel, [tf.zeros([4, 3]), tf.zeros([4])], 1, 1000)
  assert "shapes [[3], []]" in hint and "parameter_shapes=[4]" in hint
  # A JointDistributionTarget's nodes become one vector by its own option.
  hint = picks.vector_state_hint(
      kernel, [tf.zeros([4, 3]), tf.zeros([4])], 1, 1000,
      fix="JointDistributionTarget(..., flat_state=True)")
  assert "as one vector (JointDistributionTarget(..., flat_state=True))" in (
      hint) and "parameter_shapes" not in hint
  # Nothing to say where the state is one vector, or would be diagonal
  # anyway: too many coordinates, too short a warm-up, or as asked.
  assert picks.vector_state_hint(kernel, _vector(5), 1, 1000) is None
  assert picks.vector_state_hint(
      kernel, [tf.zeros([4, 20, 20])], 1, 1000) is None
  assert picks.vector_state_hint(
      kernel, [tf.zeros([4, 3, 4])], 1, 100) is None
  assert picks.vector_state_hint(
      kernel, [tf.zeros([4, 3, 4])], 1, 1000, dense_mass=False) is None
