"""`chains.loop_carry`: results carried through a while loop with their
distributions as tensors give the chain that carrying them whole gives."""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.internal import unnest

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import loop_carry

SCALES = np.array([0.02, 20.], np.float32)
NUM_STEPS = 12
NUM_ESTIMATION_STEPS = 5


def _adapted_amagold(state):
  """AMAGOLD with a diagonal mass that TFP's DiagonalMassMatrixAdaptation
  replaces at step 5: the distribution in the results changes mid-loop."""
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x / SCALES) ** 2, -1),
      gradient_noise_variance=0.)
  return tfp.experimental.mcmc.DiagonalMassMatrixAdaptation(
      sg.AMAGOLD(target, step_size=0.01, num_leapfrog_steps=3, friction=0.5,
                 momentum_distribution=sg.diagonal_momentum_distribution(
                     state, batch_ndims=1)),
      tfp.experimental.stats.RunningVariance.from_shape([2]),
      num_estimation_steps=NUM_ESTIMATION_STEPS)


def _inverse_mass(results, like):
  dist = unnest.get_innermost(results, "momentum_distribution")
  return sg.dynamics.hamiltonian.velocity(tf.ones_like(like), dist)


def _run(kernel, state, carried):
  def step(i, state, results):
    return kernel.one_step(state, results, seed=tf.stack([i, 7]))

  @tf.function(autograph=False)
  def run(state):
    results = kernel.bootstrap_results(state)
    if not carried:
      _, state, results = tf.while_loop(
          lambda i, *_: i < NUM_STEPS,
          lambda i, s, r: (i + 1,) + step(i, s, r), (0, state, results))
      return state, _inverse_mass(results, state)
    results, held, layout = loop_carry.split(results)
    carrying = loop_carry.Carrying(kernel, layout)
    _, state, (results, held) = tf.while_loop(
        lambda i, *_: i < NUM_STEPS,
        lambda i, s, r: (i + 1,) + carrying.one_step(
            s, r, seed=tf.stack([i, 7])), (0, state, (results, held)))
    return state, _inverse_mass(loop_carry.join(results, held, layout),
                                state)
  return [np.asarray(x) for x in run(state)]


def test_a_chain_carried_as_tensors_is_the_same_chain_bit_for_bit():
  state = tf.constant(np.random.default_rng(0).normal(
      size=(4, 2)).astype(np.float32) * SCALES)
  kernel = _adapted_amagold(state)
  whole_state, whole_mass = _run(kernel, state, carried=False)
  state_carried, mass_carried = _run(kernel, state, carried=True)
  np.testing.assert_array_equal(state_carried, whole_state)
  np.testing.assert_array_equal(mass_carried, whole_mass)
  # The adaptation replaced the distribution (M^{-1} was 1) within the
  # loop: a join from the first step's tensors would have kept the old one.
  assert np.all(whole_mass != 1.) and not np.all(whole_state == state)


def test_split_empties_every_distribution_and_join_puts_each_back():
  state = tf.zeros([4, 2])
  results = _adapted_amagold(state).bootstrap_results(state)
  stripped, held, (paths, _) = loop_carry.split(results)
  names = sorted(path[-1] for path in paths)
  # AMAGOLD's accepted and proposed results, and the adaptation's own.
  assert names.count("momentum_distribution") >= 2, paths
  assert loop_carry._paths(stripped) == []
  assert all(tf.is_tensor(t) for tensors in held for t in tensors)
  joined = loop_carry.join(stripped, held, (paths, _))
  for path in paths:
    assert isinstance(loop_carry._get(joined, path),
                      tfp.distributions.Distribution)
  tf.nest.assert_same_structure(joined, results, expand_composites=True)
