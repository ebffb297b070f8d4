"""The Keras AMAGOLD minibatch M-H test draws the kernel's minibatch.

With `acceptance_energy="minibatch"` and in-memory `energy_data`, each test
of a `fit` evaluates U~(theta) and U~(theta*) on a batch drawn by
`tfp_sgmcmc.keras.fit.energies.minibatch_indices(seed, b, N)` from the
outer step's energy seed. For the Keras chain to be the `tfp.mcmc` chain
that batch must be the one `AMAGOLD`'s kernel draws on an `InMemoryTarget`:
`InMemoryTarget(fn, (x, y), batch_size=b).minibatch_indices(seed)`, with
the seed `dynamics.acceptance.test_seeds(sampler.step_seed(k))[1]` of test
number k. One real fit (a linear model, 4 tests) with a spy on
`minibatch_indices` that records every call, and a callback that records
the sampler after every test.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc
import tfp_sgmcmc.keras as sgk
from tfp_sgmcmc.dynamics import acceptance
from tfp_sgmcmc.keras.fit import energies as energies_lib

N, DIM, ENERGY_BATCH, T, EPOCHS = 64, 2, 10, 3, 3
FIT_BATCH = 16  # 4 train steps per epoch: 12 steps, 4 tests.
NUM_TESTS = EPOCHS * (N // FIT_BATCH) // T
SCALE = 0.5  # The observation noise of the Gaussian likelihood.


def data():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(N, DIM)).astype(np.float32)
  y = (x @ np.array([[1.], [-2.]]) + SCALE * rng.normal(size=(N, 1))).astype(
      np.float32)
  return x, y


def log_prior(weights):
  """log N(w; 0, I) without its constant."""
  return -0.5 * tf.add_n([tf.reduce_sum(tf.square(w)) for w in weights])


class AfterEachTest(keras.callbacks.Callback):
  """Records U~ and the chain's state after each test (it runs after
  SamplingCallback, which tests at the end of every T-th train step)."""

  def __init__(self, sampling):
    super().__init__()
    self.sampling = sampling
    self.records = []

  def on_train_batch_end(self, batch, logs=None):
    if self.sampling.num_tests > len(self.records):
      sampler = self.sampling.sampler
      self.records.append((sampler.energy,
                           [np.array(w) for w in sampler.chain_state()]))


@pytest.fixture(scope="module")
def run():
  """A fit with the minibatch test; the (seed, indices, b, N) of every call
  of `minibatch_indices`, and what AfterEachTest saw."""
  x, y = data()
  calls = []
  draw = energies_lib.minibatch_indices

  def spy(seed, batch_size, num_examples):
    indices = draw(seed, batch_size, num_examples)
    calls.append((np.array(seed), np.array(indices), batch_size,
                  num_examples))
    return indices
  model = keras.Sequential([
      keras.Input((DIM,)),
      keras.layers.Dense(1, use_bias=False,
                         kernel_initializer=keras.initializers.Constant(
                             [[0.5], [-0.5]]))])
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(SCALE))
  sampling = sgk.SamplingCallback(
      sgk.AMAGOLD(step_size=0.05, num_leapfrog_steps=T, friction=1.,
                  acceptance_energy="minibatch", seed=7),
      num_examples=N, prior=log_prior, energy_data=(x, y),
      energy_batch_size=ENERGY_BATCH, thinning=1)
  after = AfterEachTest(sampling)
  with pytest.MonkeyPatch.context() as monkeypatch:
    monkeypatch.setattr(energies_lib, "minibatch_indices", spy)
    model.fit(x, y, batch_size=FIT_BATCH, epochs=EPOCHS, shuffle=False,
              verbose=0, callbacks=[sampling, after])
  return dict(x=x, y=y, sampling=sampling, calls=calls, after=after.records)


def test_each_test_draws_the_kernels_indices_from_its_outer_steps_energy_seed(
    run):
  sampling, calls = run["sampling"], run["calls"]
  assert sampling.num_tests == NUM_TESTS == 4
  # One draw per test, of b of the N examples.
  assert len(calls) == NUM_TESTS
  target = tfp_sgmcmc.InMemoryTarget(lambda *args: 0., (run["x"], run["y"]),
                                     batch_size=ENERGY_BATCH)
  sampler = sampling.sampler
  for k, (seed, indices, batch_size, num_examples) in enumerate(calls):
    assert (batch_size, num_examples) == (ENERGY_BATCH, N)
    # The energy seed of outer step k: the second of test_seeds(step seed).
    np.testing.assert_array_equal(
        seed, acceptance.test_seeds(sampler.step_seed(k))[1])
    # The batch is the kernel's for that seed.
    assert indices.shape == (ENERGY_BATCH,)
    np.testing.assert_array_equal(indices, target.minibatch_indices(seed))
  # A new batch at each test, not one reused.
  assert len({tuple(i) for _, i, _, _ in calls}) == NUM_TESTS
  # The trajectory under way after the last test is outer step NUM_TESTS.
  np.testing.assert_array_equal(
      sampler.outer_step_seeds()[1],
      acceptance.test_seeds(sampler.step_seed(NUM_TESTS))[1])


def test_each_tests_energy_is_u_tilde_on_the_drawn_batch(run):
  # After test k the sampler holds U~ of the chain's state (theta* if
  # accepted, theta if not) on the test's batch: N times the batch's mean
  # Gaussian NLL minus log p. So the drawn indices are the batch the test
  # used (a spy on a draw the test ignored would pass the test above).
  x, y, calls = run["x"], run["y"], run["calls"]
  records = run["after"]
  assert len(records) == NUM_TESTS
  energies_on_other_batches = []
  for (energy, (w,)), (_, indices, _, _) in zip(records, calls):
    def u_tilde(idx):
      residual = (y[idx] - x[idx] @ w.astype(np.float64)) / SCALE
      nll = 0.5 * residual ** 2 + np.log(SCALE) + 0.5 * np.log(2. * np.pi)
      return N * nll.mean() + 0.5 * np.sum(w.astype(np.float64) ** 2)
    np.testing.assert_allclose(energy, u_tilde(indices), rtol=1e-5)
    energies_on_other_batches.append(
        abs(energy - u_tilde((indices + 1) % N)) / abs(energy))
  assert min(energies_on_other_batches) > 1e-3  # The check can tell.
