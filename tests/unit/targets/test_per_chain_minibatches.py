"""InMemoryTarget(independent_minibatches=True): every chain evaluates its own
minibatch (checked against NumPy on that chain's indices, under XLA, in
float32 and float64), each chain's gradient is unbiased with the one-batch
noise covariance and independent of the others', and control variates
reduce every chain's noise.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import NUM_SE
from support.linear_regression import LinearRegression
from support.per_chain_minibatches import BATCH, broadcasting_log_likelihood
from support.per_chain_minibatches import make_target


@pytest.fixture(scope="module")
def problem():
  return LinearRegression(num_examples=500, dim=2, seed=1)


def numpy_minibatch(problem, w, idx, batch_size=BATCH):
  """(U~, grad U~, gradient-noise variance) of one chain on indices idx."""
  x, y = (a.astype(np.float64) for a in problem.data)
  xb, yb = x[idx], y[idx]
  scale = problem.num_examples / batch_size
  r = yb - xb @ w
  energy = (scale * np.sum(0.5 * r ** 2 + 0.5 * np.log(2 * np.pi)) -
            problem.log_prior_np(w))
  per_example = xb * (-r)[:, None]
  grad = scale * per_example.sum(0) + w
  var = problem.num_examples ** 2 / batch_size * per_example.var(0, ddof=1)
  return energy, grad, var


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_chain_evaluates_its_own_minibatch_under_xla(problem, dtype):
  target = make_target(problem, True, dtype=dtype)
  rng = np.random.default_rng(0)
  # Two chain dimensions [2, 3]; chains (0, 0) and (0, 1) share a state.
  w = rng.normal(size=(2, 3, 2)) * 0.1 + problem.posterior_mean
  w[0, 1] = w[0, 0]
  state = tf.constant(w, dtype)
  seed = tf.constant([3, 4])

  @tf.function(jit_compile=True, autograph=False)
  def everything(state, seed):
    energy, grad = target.energy_and_gradient(state, seed)
    e_moved, e_same = target.minibatch_energies([state + 0.1, state], seed)
    return (energy, grad, target.gradient_noise_variance(state, seed),
            e_moved, e_same, target.minibatch_indices(seed, state))
  energy, grad, var, e_moved, e_same, idx = (
      np.asarray(t) for t in everything(state, seed))
  assert grad.dtype == dtype and idx.shape == (2, 3, BATCH)
  rtol = 1e-4 if dtype == np.float32 else 1e-10
  for c in np.ndindex(2, 3):
    want_e, want_g, want_v = numpy_minibatch(problem, w[c], idx[c])
    np.testing.assert_allclose(energy[c], want_e, rtol=rtol)
    np.testing.assert_allclose(grad[c], want_g, rtol=rtol, atol=rtol * 10)
    np.testing.assert_allclose(var[c], want_v, rtol=rtol)
    # minibatch_energies: both states on the chain's own batch (M-H test).
    np.testing.assert_allclose(e_same[c], want_e, rtol=rtol)
    np.testing.assert_allclose(
        e_moved[c], numpy_minibatch(problem, w[c] + 0.1, idx[c])[0],
        rtol=rtol)
  # Chains at one state see different batches, so different gradients.
  assert not np.array_equal(idx[0, 0], idx[0, 1])
  assert np.max(np.abs(grad[0, 0] - grad[0, 1])) > 1.
  # The default: one batch for all chains, identical gradients at one state.
  _, shared_grad = tf.function(
      make_target(problem, False, dtype=dtype).energy_and_gradient,
      jit_compile=True, autograph=False)(state, seed)
  np.testing.assert_array_equal(shared_grad[0, 0], shared_grad[0, 1])


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


def test_control_variates_reduce_every_chains_noise(problem):
  # Each chain's control variate must use the centre's gradient on that
  # chain's own minibatch; with one shared centre evaluation only chain 0
  # had its noise reduced (the other chains kept the full minibatch noise).
  centre = tf.constant(problem.posterior_mean, tf.float32)
  state = tf.constant(np.tile(problem.posterior_mean + 0.1, (3, 1)),
                      tf.float32)
  sds = {}
  for use_cv in (False, True):
    target = make_target(problem, independent=True, batch_size=10)
    if use_cv:
      target = sg.ControlVariateTarget(target, centre)

    @tf.function(jit_compile=True)
    def gradients(seeds, target=target):
      return tf.map_fn(lambda s: target.energy_and_gradient(state, s)[1],
                       seeds, fn_output_signature=tf.float32)
    seeds = tf.random.stateless_uniform([400, 2], [5, 6], minval=0,
                                        maxval=2**30, dtype=tf.int32)
    sds[use_cv] = np.asarray(gradients(seeds)).std(axis=0)  # [chains, d]
  # At 2 posterior sds from the centre, control variates cut every chain's
  # gradient sd about 6-7 fold (155-187 against 23-28 observed); a chain
  # left with its full noise would fail both checks.
  assert np.all(sds[False] > 3. * sds[True]), sds
  assert np.all(sds[True].max(0) < 2. * sds[True].min(0)), sds[True]
