"""Targets compiled with XLA and run in chains: InMemoryTarget's exact energy
under XLA; per-chain minibatches (InMemoryTarget(independent_minibatches=True))
checked against NumPy on each chain's indices under XLA, in float32 and
float64, and control variates cutting every chain's noise in a compiled loop
over seeds; TFRecordTarget's streamed exact energy and record minibatches
giving the in-memory target's AMAGOLD chain. (The targets' single functions:
tests/unit/targets/.)
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import laplace
from support.linear_regression import LinearRegression, write_shards
from support.per_chain_minibatches import BATCH, make_target

RECORD = 4


@pytest.fixture(scope="module")
def problem():
  return LinearRegression(num_examples=500, dim=2, seed=1)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
  return write_shards(str(tmp_path_factory.mktemp("lr")), RECORD)


def test_exact_energy_compiles_under_xla():
  problem = LinearRegression(num_examples=203, dim=3, seed=0)
  target = problem.in_memory_target(batch_size=10, energy_chunk_size=20)
  w = tf.constant([0.3, -0.2, 0.5])
  got = tf.function(target.energy, jit_compile=True)(w)
  np.testing.assert_allclose(got, problem.energy(w.numpy()), rtol=1e-5)


@pytest.mark.parametrize("chunk", [20, 5])
def test_exact_energy_over_chunks_differentiates_under_xla(chunk):
  # 203 examples in chunks of 20 (ten written out, and a remainder of 3)
  # or of 5 (the first, a loop over 39, the remainder). Every use that
  # differentiates the exact energy inside an XLA-compiled function: its
  # gradient, the KSD's exact score, control variates built there, and
  # TFP's NUTS on the exact log density.
  assert 203 // 20 <= sg.targets.energy.MAX_UNROLLED_CHUNKS < 203 // 5
  problem = LinearRegression(num_examples=203, dim=3, seed=0)
  target = problem.in_memory_target(batch_size=10, energy_chunk_size=chunk)
  w = tf.constant([0.3, -0.2, 0.5])

  def gradient(state):
    with tf.GradientTape() as tape:
      tape.watch(state)
      energy = target.energy(state)
    return tape.gradient(energy, state)
  np.testing.assert_allclose(tf.function(gradient, jit_compile=True)(w),
                             problem.gradient(w.numpy()), rtol=1e-4)

  draws = w + 0.01 * tf.random.stateless_normal([50, 2, 3], [1, 2])
  ksd = {jit: float(sg.ksd(draws, target, pool_chains=True, jit_compile=jit))
         for jit in (False, True)}
  np.testing.assert_allclose(ksd[True], ksd[False], rtol=1e-4)

  centred = tf.function(lambda s: sg.ControlVariateTarget(
      target, w).minibatch_energy(s, tf.constant([3, 4])), jit_compile=True)
  assert np.isfinite(centred(w).numpy())

  nuts = tfp.mcmc.NoUTurnSampler(lambda s: -target.energy(s), step_size=0.01)
  draws = tf.function(lambda: tfp.mcmc.sample_chain(
      3, w, kernel=nuts, trace_fn=None, seed=tf.constant([5, 6])),
                      jit_compile=True)()
  assert draws.shape == [3, 3] and np.all(np.isfinite(draws.numpy()))


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
  # The default: one batch for all chains. Compiled in the same program.
  shared = make_target(problem, False, dtype=dtype)

  @tf.function(jit_compile=True, autograph=False)
  def everything(state, seed):
    energy, grad = target.energy_and_gradient(state, seed)
    e_moved, e_same = target.minibatch_energies([state + 0.1, state], seed)
    return (energy, grad, target.gradient_noise_variance(state, seed),
            e_moved, e_same, target.minibatch_indices(seed, state),
            shared.energy_and_gradient(state, seed)[1])
  energy, grad, var, e_moved, e_same, idx, shared_grad = (
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
  # The default target: identical gradients at one state.
  np.testing.assert_array_equal(shared_grad[0, 0], shared_grad[0, 1])


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


def test_streamed_energy_and_record_minibatches_match_in_memory(written):
  problem, layout = written
  target = sg.TFRecordTarget(problem.log_likelihood, layout,
                             records_per_batch=25,
                             log_prior_fn=problem.log_prior,
                             energy_chunk_records=16)

  class SameBatches(sg.InMemoryTarget):
    """The in-memory target reading the examples of the same records."""

    def minibatch_indices(self, seed, state=None):
      records = target.record_indices(seed)
      return tf.reshape(records[:, None] * RECORD + tf.range(RECORD), [-1])

  single = SameBatches(problem.log_likelihood, problem.data, 25 * RECORD,
                       log_prior_fn=problem.log_prior)
  w = tf.constant([[0.5, -1.], [2., 0.3]])
  np.testing.assert_allclose(target.energy(w), single.energy(w), rtol=1e-5)
  np.testing.assert_allclose(
      target.energy(w), [problem.energy(v) for v in w.numpy()], rtol=1e-5)
  # Exact AMAGOLD: same records each step, same streamed exact energies, so
  # the chain is the in-memory chain up to float rounding.
  init = tf.constant(problem.posterior_mean, tf.float32) + tf.zeros([2, 2])
  draws = []
  for t in (target, single):
    kernel = sg.AMAGOLD(t, step_size=0.01, num_leapfrog_steps=4,
                        friction=1.)
    run = tf.function(lambda s, k=kernel: tfp.mcmc.sample_chain(
        40, init, kernel=k, seed=s,
        trace_fn=lambda _, r: r.is_accepted), autograph=False)
    draws.append(tf.nest.map_structure(np.asarray, run(tf.constant([1, 2]))))
  np.testing.assert_allclose(draws[0][0], draws[1][0], atol=1e-5)
  np.testing.assert_array_equal(draws[0][1], draws[1][1])
  # The chain moved (posterior sd about 0.04) with some rejections.
  assert 0.2 < draws[0][1].mean() < 1., draws[0][1].mean()
  assert draws[0][0].std(axis=0).min() > 0.005, draws[0][0].std(axis=0)


def test_newton_hessian_over_chunks_is_the_same_at_every_evaluation():
  # 500,000 examples of a 20-coordinate logistic regression, in 3 chunks:
  # the Hessian-vector products of the Newton start (`tf.vectorized_map`)
  # through gathered chunks differed from one evaluation to the next (6
  # of 7 in one process), and so did `sample`'s chains from one seed.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(500_000, 20)).astype(np.float32)
  y = (rng.uniform(size=500_000) < 0.5).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: tfp.distributions.Bernoulli(
          logits=tf.linalg.matvec(b[0], w)).log_prob(b[1]),
      (x, y), 100, parameter_shapes=[20], energy_chunk_size=200_000)
  w = tf.fill([20], 0.1)
  hvps, _ = laplace.hessian_products(target, w)
  first = laplace.full_hessian(hvps, w)
  for _ in range(4):
    np.testing.assert_array_equal(laplace.full_hessian(hvps, w), first)
