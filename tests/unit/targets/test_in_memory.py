"""InMemoryTarget: minibatch energy and gradient unbiased (on 203 examples),
the exact energy in chunks (under XLA: tests/integration/
test_compiled_targets.py), the default chunk size, the
per-example gradient-noise estimate (batched chains, list states),
reproducible minibatch indices, a full batch that uses every example once.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import NUM_SE
from support.linear_regression import LinearRegression


@pytest.fixture(scope="module")
def problem():
  return LinearRegression(num_examples=203, dim=3, seed=0)


def test_minibatch_energy_and_gradient_are_unbiased(problem):
  target = problem.in_memory_target(batch_size=10)
  w = tf.constant([0.3, -0.2, 0.5])
  seeds = tf.stack(tfp.random.split_seed([1, 2], n=4000))

  @tf.function(autograph=False)
  def draws(seeds):
    return tf.map_fn(lambda s: target.energy_and_gradient(w, s), seeds,
                     fn_output_signature=(tf.float32, tf.float32))
  energies, grads = (np.asarray(t, np.float64) for t in draws(seeds))
  exact_energy = problem.energy(w.numpy())
  exact_grad = problem.gradient(w.numpy())
  # Independent seeds give independent batches: the SE is std / sqrt(n).
  se_e = energies.std() / np.sqrt(len(energies))
  se_g = grads.std(axis=0) / np.sqrt(len(grads))
  assert abs(energies.mean() - exact_energy) < NUM_SE * se_e
  assert np.all(np.abs(grads.mean(axis=0) - exact_grad) < NUM_SE * se_g)
  # And the estimate is genuinely noisy (it is a minibatch estimate).
  assert se_e > 0 and np.all(se_g > 0)


@pytest.mark.parametrize("chunk", [None, 7, 50, 203, 1000])
def test_exact_energy_in_chunks_equals_direct_sum(problem, chunk):
  target = problem.in_memory_target(batch_size=10, energy_chunk_size=chunk)
  w = np.array([[0.3, -0.2, 0.5], [1., 2., -1.]], np.float32)
  got = target.energy(tf.constant(w)).numpy()
  want = [problem.energy(wi) for wi in w]
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_default_energy_chunk_is_a_data_budget():
  spec = lambda *shape: tf.TensorSpec(shape, tf.float32)
  chunk = sg.targets.default_energy_chunk_size
  # Small examples: all N in one pass (N = 1e5 logistic regression).
  assert chunk((spec(100_000, 20), spec(100_000)), 100_000) == 100_000
  # Large examples: 16 MiB of data per chunk (MNIST-sized rows) ...
  assert chunk((spec(60_000, 784), spec(60_000)), 60_000) == (
      16 * 2**20 // (785 * 4))
  # ... but never below 4096 examples, nor above N.
  assert chunk(spec(10**6, 3000), 10**6) == 4096
  assert chunk(spec(100, 3000), 100) == 100


def test_gradient_noise_variance_from_per_example_gradients(problem):
  target = problem.in_memory_target(batch_size=25)
  w = np.array([0.3, -0.2, 0.5], np.float32)
  seed = tf.constant([3, 4])
  got = target.gradient_noise_variance(tf.constant(w), seed).numpy()
  idx = target.minibatch_indices(seed).numpy()
  g = problem.per_example_gradients(w)[idx]  # [n, d]
  n, big_n = len(idx), problem.num_examples
  want = big_n ** 2 / n * g.var(axis=0, ddof=1)
  np.testing.assert_allclose(got, want, rtol=1e-4)


def test_per_example_noise_for_batched_chains_and_list_states(problem):
  x, y = problem.data

  def log_likelihood(params, batch):
    w, b = params
    xb, yb = batch
    pred = tf.einsum("nd,...d->...n", xb, w) + b
    return tfp.distributions.Normal(pred, problem.noise_scale).log_prob(yb)
  target = sg.InMemoryTarget(log_likelihood, (x, y), batch_size=12)
  w = tf.constant([[0.3, -0.2, 0.5], [0.1, 0.1, 0.1]])
  b = tf.constant([[0.], [0.5]])
  var = target.gradient_noise_variance([w, b], [5, 6])
  assert isinstance(var, list) and var[0].shape == (2, 3)
  assert var[1].shape == (2, 1)
  single = target.gradient_noise_variance([w[1], b[1]], [5, 6])
  np.testing.assert_allclose(var[0][1], single[0], rtol=1e-4)
  energy, grads = target.energy_and_gradient([w, b], [5, 6])
  assert energy.shape == (2,) and grads[1].shape == (2, 1)


def test_minibatch_indices_are_reproducible_from_the_seed(problem):
  target = problem.in_memory_target(batch_size=10)
  a = target.minibatch_indices([1, 2]).numpy()
  b = target.minibatch_indices([1, 2]).numpy()
  c = target.minibatch_indices([1, 3]).numpy()
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)
  assert a.min() >= 0 and a.max() < problem.num_examples


def test_in_memory_full_batch_uses_every_example_once_in_order():
  x = np.arange(50, dtype=np.float32)[:, None]
  full = sg.InMemoryTarget(lambda w, b: -(b[..., 0] - w) ** 2, x,
                           full_batch=True)
  np.testing.assert_array_equal(full.minibatch_indices([1, 2]), np.arange(50))
  assert full.is_full_batch and full.batch_size == 50
  w = tf.constant([[0.5]])
  np.testing.assert_allclose(full.minibatch_energy(w, [3, 4]), full.energy(w),
                             rtol=1e-6)
  draws = sg.InMemoryTarget(lambda w, b: -(b[..., 0] - w) ** 2, x,
                            batch_size=50).minibatch_indices([1, 2])
  assert len(np.unique(draws)) < 50  # With replacement, as documented.
  with pytest.raises(TypeError, match="full_batch=True"):
    sg.InMemoryTarget(lambda w, b: -(b[..., 0] - w) ** 2, x)


def test_a_full_batch_step_reads_the_data_as_stored_not_a_copy(problem):
  # A gather of range(N) copied the whole data set at every full-batch
  # gradient: at N = 200,000 and d = 200 a third of the gradient's time.
  target = problem.in_memory_target(batch_size=10).with_full_batch()
  w = tf.constant([[0.3, -0.2, 0.5], [0.1, 0.2, 0.3]])
  graph = tf.function(lambda w: target.energy_and_gradient(w, [1, 2]),
                      autograph=False).get_concrete_function(w).graph
  gathers = [op.name for op in graph.get_operations()
             if op.type in ("GatherV2", "ResourceGather", "GatherNd")]
  assert not gathers, gathers
  energy, gradient = target.energy_and_gradient(w, [1, 2])
  exact_energy, exact_gradient = target.exact_energy_and_gradient(w)
  np.testing.assert_allclose(energy, exact_energy, rtol=1e-6)
  np.testing.assert_allclose(gradient, exact_gradient, rtol=1e-5)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_the_exact_energy_is_accumulated_in_float64(jit_compile):
  # Summed in float32 under XLA, U over N = 200,000 examples of about 9
  # nats each was 5.7 nats (45 of its ulps) off the float64 sum of the same
  # per-example values; the exact M-H test compares such sums, and on a
  # large-N regression AMAGOLD then accepted only tiny steps. In float64
  # the sum is rounded once, when cast back to the state's dtype.
  y = (1000. * np.random.default_rng(0).normal(size=200_000)).astype(
      np.float32)

  def log_likelihood(w, b):
    return tfp.distributions.Normal(w[..., :1], 500.).log_prob(b)

  target = sg.InMemoryTarget(log_likelihood, y, batch_size=100,
                             parameter_shapes=[1])
  energy = tf.function(target.energy, jit_compile=jit_compile)
  for w in ([3.], [-40.], [700.]):
    w = tf.constant(w)
    per_example = log_likelihood(w, y).numpy().astype(np.float64)
    exact = -np.sum(per_example)
    value = float(energy(w))
    ulp = float(np.spacing(np.float32(exact)))
    assert abs(value - exact) <= ulp, (value, exact, ulp)
