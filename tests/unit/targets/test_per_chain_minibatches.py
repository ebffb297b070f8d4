"""InMemoryTarget(independent_minibatches=True): each chain's gradient is
unbiased with the one-batch noise covariance and independent of the others'.
(Each chain's own minibatch against NumPy under XLA, and control variates
reducing every chain's noise: tests/integration/test_compiled_targets.py.)
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from support.helpers import NUM_SE
from support.linear_regression import LinearRegression
from support.per_chain_minibatches import BATCH, broadcasting_log_likelihood
from support.per_chain_minibatches import make_target


@pytest.fixture(scope="module")
def problem():
  return LinearRegression(num_examples=500, dim=2, seed=1)


@pytest.mark.parametrize("log_likelihood", ["broadcasting", "one_chain"])
def test_each_chains_minibatch_gradient_is_unbiased_and_independent(
    problem, log_likelihood):
  # "one_chain": the einsum log-likelihood of linear_regression.py takes a
  # shared batch [n, d] only, so it runs through the vectorized_map fallback.
  fn = (broadcasting_log_likelihood if log_likelihood == "broadcasting"
        else problem.log_likelihood)
  target = make_target(problem, True, log_likelihood=fn)
  rng = np.random.default_rng(1)
  w = problem.posterior_mean + rng.normal(size=(4, 2)) * 0.2
  w[1] = w[0]
  state = tf.constant(w, tf.float32)
  num_seeds = 2000
  seeds = tf.stack(tfp.random.split_seed([5, 6], n=num_seeds))

  @tf.function(jit_compile=True, autograph=False)
  def gradients(seeds):
    return tf.map_fn(lambda s: target.energy_and_gradient(state, s)[1],
                     seeds, fn_output_signature=tf.float32)
  grads = np.asarray(gradients(seeds), np.float64)  # [seeds, chains, d]
  for c in range(4):
    exact = problem.gradient(w[c])
    se = grads[:, c].std(0) / np.sqrt(num_seeds)
    assert np.all(np.abs(grads[:, c].mean(0) - exact) < NUM_SE * se)
    # The per-chain noise has the minibatch covariance of one batch of n.
    want = np.diag(problem.minibatch_gradient_covariance(BATCH, w[c]))
    dev = (grads[:, c] - exact) ** 2
    assert np.all(np.abs(dev.mean(0) - want) <
                  NUM_SE * dev.std(0) / np.sqrt(num_seeds))
  # Chains 0 and 1 sit at one state: their noises are uncorrelated
  # (sd of a sample correlation of independent draws: 1 / sqrt(seeds)).
  # Over 5 sets of 2000 seeds the largest |z| of the 8 means was 2.15, of
  # the 8 variances 2.23, and of the 2 correlations 1.9 (the same numbers
  # with both log-likelihoods: the fallback sees the same batches).
  noise = grads - grads.mean(0)
  r = np.sum(noise[:, 0] * noise[:, 1], 0) / np.sqrt(
      np.sum(noise[:, 0] ** 2, 0) * np.sum(noise[:, 1] ** 2, 0))
  assert np.all(np.abs(r) < NUM_SE / np.sqrt(num_seeds))


def test_a_shared_batch_log_likelihood_is_not_run_eagerly_on_chain_batches(
    problem):
  # Run eagerly, an op that fails logs "OP_REQUIRES failed ..." from
  # TensorFlow's C++ before the fallback takes over: a user of `sample`
  # saw two such lines above a correct run. The probe of a log-likelihood
  # written for a shared batch [n, d] must fail in a trace instead, and
  # the energy be the fallback's.
  calls = []

  def log_likelihood(w, batch):
    calls.append((tf.executing_eagerly(), batch[0].shape.rank))
    return problem.log_likelihood(w, batch)
  target = make_target(problem, True, log_likelihood=log_likelihood)
  state = tf.constant(np.tile(problem.posterior_mean, (4, 1)), tf.float32)
  energy = target.minibatch_energy(state, [1, 2])
  assert (True, 3) not in calls, calls
  assert (False, 3) in calls, calls  # The probe, traced.
  fallback = make_target(problem, True, log_likelihood=problem.log_likelihood)
  fallback._log_likelihood_broadcasts = False  # Straight to vectorized_map.
  np.testing.assert_array_equal(energy, fallback.minibatch_energy(state,
                                                                  [1, 2]))


def test_a_broadcasting_log_likelihood_is_traced_for_its_probe_only(problem):
  # The trace that keeps an eager probe's failure quiet costs a tracing of
  # the user's function: once, at the first call, not at every eager step.
  calls = []

  def log_likelihood(w, batch):
    calls.append(tf.executing_eagerly())
    return broadcasting_log_likelihood(w, batch)
  target = make_target(problem, True, log_likelihood=log_likelihood)
  state = tf.constant(np.tile(problem.posterior_mean, (4, 1)), tf.float32)
  target.minibatch_energy(state, [1, 2])
  first = len(calls)
  for seed in ([3, 4], [5, 6]):
    target.minibatch_energy(state, seed)
  assert False in calls[:first] and all(calls[first:]), calls
  assert len(calls) == first + 2, calls
