"""Streamed and distributed targets refuse bad inputs and say what went wrong:
DatasetTarget (not a dataset, no or a wrong N, an unbatched, empty or
exhausted stream, a full dataset that does not cover the data once, use
under XLA), TFRecordTarget (bad layouts) and ShardedTarget (bad arguments).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.bad_inputs import D, X, Y, batches, classify, clear, correct, data
from support.bad_inputs import exact_energy, ll, location_ll, prior, steps
from support.helpers import sample
from support.linear_regression import LinearRegression


def _dataset_target(dataset, **kwargs):
  return sg.DatasetTarget(lambda w, b: -(b[..., 0] - w) ** 2, dataset, 20,
                          **kwargs)


def test_a_dataset_target_under_xla_gets_a_clear_error():
  ds = tf.data.Dataset.from_tensor_slices(np.zeros([20, 1], np.float32))
  target = _dataset_target(ds.repeat().batch(5), full_dataset=ds.batch(5))
  kernel = sg.SGLD(target, step_size=0.01)
  # At trace time, in place of XLA's "unsupported operations:
  # IteratorGetNextAsOptional" at run time.
  with pytest.raises(ValueError, match=r"DatasetTarget(.|\n)*jit_compile=True"
                     r"(.|\n)*without jit_compile(.|\n)*InMemoryTarget"):
    sample(kernel, tf.zeros([2, 1]), 3, seed=[1, 2], jit=True)
  with pytest.raises(ValueError, match=r"full_dataset(.|\n)*jit_compile=True"):
    tf.function(target.energy, jit_compile=True)(tf.zeros([2, 1]))
  # Through tfp_sgmcmc's own compiled runs, whose argument is the fix.
  with pytest.raises(ValueError, match=r"`warm_up`(.|\n)*compile with XLA "
                     r"unless given jit_compile=False"):
    sg.warm_up(kernel, tf.zeros([2, 1]), num_steps=20, seed=[1, 2])
  warmed = sg.warm_up(kernel, tf.zeros([2, 1]), num_steps=20, seed=[1, 2],
                      jit_compile=False)
  assert np.all(np.isfinite(warmed.state))
  # The fix the message names works: tf.function without XLA.
  draws = sample(kernel, tf.zeros([2, 1]), 3, seed=[1, 2], jit=False)
  assert draws.shape == (3, 2, 1)
  np.testing.assert_allclose(
      tf.function(target.energy)(tf.zeros([2, 1])), target.energy(
          tf.zeros([2, 1])))


def test_an_exhausted_dataset_gets_a_clear_error_eagerly_and_in_graphs():
  ds = tf.data.Dataset.from_tensor_slices(np.zeros([20, 1], np.float32))
  # 4 batches; a chain of 10 SGLD steps needs 11 gradient evaluations.
  kernel = sg.SGLD(_dataset_target(ds.batch(5)), step_size=0.01)
  with pytest.raises(ValueError, match=r"`dataset` is exhausted.*repeat\(\)"):
    tfp.mcmc.sample_chain(10, tf.zeros([2, 1]), kernel=kernel,
                          trace_fn=None, seed=[1, 2])
  # In a graph the same message, not TF's "The given optional does not have
  # a value".
  kernel = sg.SGLD(_dataset_target(ds.batch(5)), step_size=0.01)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"`dataset` is exhausted.*repeat\(\)"):
    sample(kernel, tf.zeros([2, 1]), 10, seed=[1, 2], jit=False)


def test_bad_layouts_are_rejected(tmp_path):
  x = np.zeros([10, 2], np.float32)
  with pytest.raises(ValueError, match="record_size"):
    sg.write_tfrecord_shards((x, x[:, 0]), str(tmp_path), 2, record_size=3)
  with pytest.raises(ValueError, match="does not exist"):
    sg.TFRecordTarget(lambda w, b: b[1], str(tmp_path / "nowhere"), 1)
  layout = sg.write_tfrecord_shards((x, x[:, 0]), str(tmp_path), 2,
                                    record_size=5)
  with pytest.raises(ValueError, match="records_per_batch"):
    sg.TFRecordTarget(lambda w, b: b[1], layout, 3)


def test_sharded_target_rejects_bad_arguments():
  problem = LinearRegression(num_examples=100, dim=2)
  strategy = tf.distribute.get_strategy()
  with pytest.raises(ValueError, match="minibatch"):
    sg.ShardedTarget(problem.log_likelihood, problem.data, 10,
                     strategy=strategy, minibatch="stratified")
  with pytest.raises(TypeError, match="strategy"):
    sg.ShardedTarget(problem.log_likelihood, problem.data, 10,
                     strategy="mirrored")
  with pytest.raises(ValueError, match="batch_size"):
    sg.ShardedTarget(problem.log_likelihood, problem.data, 1000)


CLEAR_MESSAGES = [
    ("dataset that is not a tf.data.Dataset", lambda: sg.DatasetTarget(
        location_ll, data(), 10), TypeError,
     r"`dataset` must be a tf.data.Dataset; got ndarray"),
    ("dataset target without N", lambda: sg.DatasetTarget(
        location_ll, tf.data.Dataset.from_tensors(data()), None), ValueError,
     r"`num_examples` \(N, the training-set size\).*got None"),
]


@pytest.mark.parametrize("case,call,error,pattern", CLEAR_MESSAGES,
                         ids=[c[0] for c in CLEAR_MESSAGES])
def test_bad_input_fails_early_with_a_clear_message(case, call, error,
                                                    pattern):
  del case
  with pytest.raises(error, match=pattern):
    call()


def dataset_exact_count(unknown_size=False):
  full = batches(7, repeat=False)
  if unknown_size:
    full = full.filter(lambda *_: True)
  target = sg.DatasetTarget(ll, batches(), 40, log_prior_fn=prior,
                            full_dataset=full)
  w = np.array([0.3, -0.2, 0.1], np.float32)
  np.testing.assert_allclose(target.energy(tf.constant(w)), exact_energy(w),
                             rtol=1e-5)


OUTCOMES = [
    clear("zero training-set size", lambda: sg.DatasetTarget(
        ll, batches(), 0), "num_examples", r"got 0"),
    clear("fractional training-set size", lambda: sg.DatasetTarget(
        ll, batches(), 40.5), "num_examples", r"got 40.5"),
    clear("full dataset that is a numpy array", lambda: sg.DatasetTarget(
        ll, batches(), 40, full_dataset=X), "full_dataset", r"ndarray"),
    clear("full dataset with half the examples", lambda: sg.DatasetTarget(
        ll, batches(), 40, full_dataset=batches(repeat=False).take(2)),
          "num_examples", r"40 but `full_dataset` holds 16"),
    clear("full dataset covering the data three times",
          lambda: sg.DatasetTarget(ll, batches(), 40, full_dataset=batches(
              repeat=False).repeat(3)), "num_examples", r"holds 120"),
    # A `.filter` hides the size (cardinality unknown): the first exact
    # energy counts the examples as it counts the batches, and refuses.
    clear("full dataset of unknown size with half the examples",
          lambda: sg.DatasetTarget(
              ll, batches(), 40, log_prior_fn=prior,
              full_dataset=batches(repeat=False).take(2).filter(
                  lambda *_: True)).energy(tf.zeros([D])),
          "num_examples", r"40 but `full_dataset` holds 16"),
    correct("dataset target with an exact full dataset of unknown size",
            lambda: dataset_exact_count(unknown_size=True)),
    clear("full dataset of features only", lambda: sg.DatasetTarget(
        ll, batches(), 40, full_dataset=tf.data.Dataset.from_tensor_slices(
            X).batch(8)), "full_dataset", r"rank \[2\].*rank \[2, 1\]"),
    clear("unbatched minibatch dataset", lambda: sg.DatasetTarget(
        ll, tf.data.Dataset.from_tensor_slices((X, Y)).repeat(), 40),
          "dataset", r"\.batch\(batch_size\)"),
    clear("dataset filtered to nothing", lambda: sg.DatasetTarget(
        ll, batches(repeat=False).take(0), 40), "dataset", r"empty"),
    clear("finite dataset runs out during the chain", lambda: steps(
        sg.SGLD(sg.DatasetTarget(ll, batches(repeat=False), 40), 1e-3),
        tf.zeros([D]), n=6), "dataset", r"exhausted.*repeat"),
    correct("dataset target with an exact full dataset", dataset_exact_count),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"


@pytest.mark.parametrize("wrap", ["dataset", "full_dataset", "tempered"])
def test_non_finite_streamed_data_is_named_after_a_divergence(wrap):
  # A streamed target cannot check its data when it is built; after chains
  # diverged, sample_moments reads it once and names it, instead of
  # suggesting a smaller step size.
  import warnings  # pylint: disable=g-import-not-at-top
  bad_y = np.where(np.arange(40) == 13, np.nan, Y).astype(np.float32)
  stream = tf.data.Dataset.from_tensor_slices((X, bad_y)).batch(8)
  full = stream if wrap == "full_dataset" else None
  target = sg.DatasetTarget(ll, stream.repeat(), 40, log_prior_fn=prior,
                            full_dataset=full)
  if wrap == "tempered":
    target = sg.TemperedTarget(target, 2.)
  with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    moments = sg.sample_moments(sg.SGLD(target, 1e-3), tf.zeros([2, D]), 10,
                                seed=[1, 2], jit_compile=False)
  assert moments.num_diverged == 2
  name = "full_dataset" if wrap == "full_dataset" else "dataset"
  messages = [str(w.message) for w in seen
              if issubclass(w.category, sg.UnhealthyChainWarning)]
  assert len(messages) == 1 and (
      "2 of 2 chains diverged (flagged by the kernel" in messages[0] and
      f"the target's data is not finite: `{name}` part 1 has NaN or inf in "
      "1 of 8 examples (the first at index 5), in its batch 1") in messages[0]
  assert "smaller step size" not in messages[0]
