"""InMemoryTarget refuses bad data and construction arguments early, naming
the argument and the value: empty, ragged, text or non-finite data, parts
of different lengths, batch sizes out of range or not integers, bad chunk
sizes and parameter shapes, per-chain minibatches without parameter shapes.
Inputs accepted by design give the right energy.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.bad_inputs import X, Y, classify, clear, correct, data
from support.bad_inputs import exact_energy, location_ll, mem, prior
from support.linear_regression import LinearRegression
from support.per_chain_minibatches import BATCH, broadcasting_log_likelihood
from support.per_chain_minibatches import make_target


def data_target(batch_size=4, n=10):
  x = np.zeros((n, 2), np.float32)
  return sg.InMemoryTarget(
      lambda w, b: -0.5 * tf.reduce_sum((b - w[..., None, :]) ** 2, -1),
      x, batch_size)


@pytest.mark.parametrize("batch_size", [0, -3, 11])
def test_batch_size_out_of_range(batch_size):
  with pytest.raises(ValueError, match=r"`batch_size` must be an integer in "
                     rf"\[1, 10\]; got {batch_size}\. N = 10 is the number"):
    data_target(batch_size=batch_size)


def test_non_integer_batch_size():
  with pytest.raises(TypeError, match="`batch_size` must be an integer"):
    data_target(batch_size=2.5)


def test_data_parts_of_different_lengths():
  with pytest.raises(ValueError, match=r"different lengths \[10, 9\]"):
    sg.InMemoryTarget(lambda w, b: b[0][:, 0],
                      (np.zeros((10, 2)), np.zeros(9)), batch_size=2)


def test_empty_data():
  with pytest.raises(ValueError, match="empty"):
    sg.InMemoryTarget(lambda w, b: b[:, 0], np.zeros((0, 2)), batch_size=1)


@pytest.fixture(scope="module")
def problem():
  return LinearRegression(num_examples=500, dim=2, seed=1)


def test_independent_minibatches_need_parameter_shapes(problem):
  with pytest.raises(ValueError, match="needs `parameter_shapes`"):
    sg.InMemoryTarget(broadcasting_log_likelihood, problem.data, BATCH,
                      independent_minibatches=True)
  with pytest.raises(TypeError, match="`independent_minibatches` must be"):
    sg.InMemoryTarget(broadcasting_log_likelihood, problem.data, BATCH,
                      parameter_shapes=[2], independent_minibatches="yes")
  target = make_target(problem, True)
  with pytest.raises(ValueError, match="pass `state`"):
    target.minibatch_indices([1, 2])
  # A state that does not end in parameter_shapes is rejected by name.
  with pytest.raises(ValueError, match="parameter_shapes"):
    target.minibatch_energy(tf.zeros([4, 3]), [1, 2])


CLEAR_MESSAGES = [
    ("data not a tensor structure", lambda: sg.InMemoryTarget(
        location_ll, [], 2), ValueError, r"`data` is empty"),
    ("scalar data part", lambda: sg.InMemoryTarget(
        location_ll, (np.float32(1.),), 1), ValueError,
     r"leading example axis.*\(\)"),
    ("energy chunk size zero", lambda: sg.InMemoryTarget(
        location_ll, data(), 2, energy_chunk_size=0), ValueError,
     r"`energy_chunk_size` must be >= 1; got 0"),
    ("malformed parameter shapes", lambda: sg.InMemoryTarget(
        location_ll, data(), 2, parameter_shapes="2"), ValueError,
     r"`parameter_shapes` must be one shape.*got '2'"),
]


@pytest.mark.parametrize("case,call,error,pattern", CLEAR_MESSAGES,
                         ids=[c[0] for c in CLEAR_MESSAGES])
def test_bad_input_fails_early_with_a_clear_message(case, call, error,
                                                    pattern):
  del case
  with pytest.raises(error, match=pattern):
    call()


RAGGED = np.empty(2, dtype=object)
RAGGED[0], RAGGED[1] = [1., 2.], [3.]


def fractional_chunk_size_energy():
  # energy_chunk_size only splits the exact sum: 2.5 -> chunks of 2.
  target = mem(log_prior_fn=prior, energy_chunk_size=2.5)
  w = np.array([0.3, -0.2, 0.1], np.float32)
  np.testing.assert_allclose(target.energy(tf.constant(w)), exact_energy(w),
                             rtol=1e-5)


def list_data_as_tuple():
  # Data given as numpy float64 arrays in a list: the energy is the same as
  # with a tuple of float32 (within float32 rounding) in a float64 state.
  target = mem(data=[X.astype(np.float64), Y.astype(np.float64)],
               log_prior_fn=prior)
  w = np.array([0.3, -0.2, 0.1])
  np.testing.assert_allclose(target.energy(tf.constant(w)), exact_energy(w),
                             rtol=1e-5)


OUTCOMES = [
    clear("inf in the labels", lambda: mem(
        data=(X, np.where(np.arange(40) == 7, np.inf, Y))), "data",
          r"part 1 .* non-finite .* index \(7,\)"),
    clear("NaN in a ShardedTarget's inputs", lambda: sg.ShardedTarget(
        location_ll, np.where(np.arange(40)[:, None] == 5, np.nan, X), 8),
          "data", r"part 0 .* non-finite .* index \(5, 0\)"),
    clear("NaN in the data written to TFRecord shards", lambda tmp_path:
          sg.write_tfrecord_shards(
              (X, np.where(np.arange(40) == 9, np.nan, Y)), str(tmp_path), 2),
          "data", r"part 1 .* non-finite .* index \(9,\)"),
    clear("inf in a chunk written to TFRecord shards", lambda tmp_path:
          sg.write_tfrecord_shards(
              iter([(X[:20], Y[:20]), (X[20:], np.where(
                  np.arange(20) == 3, np.inf, Y[20:]))]), str(tmp_path), 2),
          "data", r"chunk 1 .* part 1 .* index \(3,\)"),
    clear("data parts of different lengths", lambda: mem(
        data=(X, Y[:30])), "data", r"different lengths \[40, 30\]"),
    clear("data as a nested Python list of numbers", lambda: mem(
        data=[[1., 2.], [3., 4.]], batch_size=1), "data",
          r"leading example axis"),
    clear("ragged rows in the data", lambda: mem(
        data=(RAGGED,), batch_size=1), "data", r"ragged"),
    clear("text data", lambda: mem(data=(X, np.array(["a"] * 40))), "data",
          r"dtype string"),
    clear("fractional batch size", lambda: mem(batch_size=2.5),
          "batch_size", r"integer in \[1, 40\]; got 2.5"),
    clear("boolean batch size", lambda: mem(batch_size=True), "batch_size",
          r"integer in \[1, 40\]; got True"),
    clear("string batch size", lambda: mem(batch_size="8"), "batch_size",
          r"got '8'"),
    clear("batch size above N", lambda: mem(batch_size=41), "batch_size",
          r"got 41\. N = 40"),
    clear("independent_minibatches as a string", lambda: mem(
        independent_minibatches="yes"), "independent_minibatches",
          r"got 'yes'"),
    clear("independent minibatches without parameter shapes", lambda: mem(
        independent_minibatches=True), "parameter_shapes",
          r"parameter_shapes=None"),
    correct("fractional energy chunk size (only splits the exact sum)",
            fractional_chunk_size_energy),
    correct("data as a list of float64 arrays, float64 state",
            list_data_as_tuple),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"
