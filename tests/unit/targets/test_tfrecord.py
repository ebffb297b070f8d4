"""TFRecordTarget: data in sharded TFRecord files (valid records in the data's
order), an unbiased minibatch energy, record minibatches as uniform draws of
the seed, exact AMAGOLD on it calibrated. (The streamed exact energy and
record minibatches giving the in-memory target's AMAGOLD chain:
tests/integration/test_compiled_targets.py.)
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.linear_regression import write_shards


RECORD = 4


@pytest.fixture(scope="module")
def written(tmp_path_factory):
  return write_shards(str(tmp_path_factory.mktemp("lr")), RECORD)


def test_files_are_tfrecords_holding_the_data(written):
  problem, layout = written
  target = sg.TFRecordTarget(problem.log_likelihood, layout,
                             records_per_batch=5,
                             log_prior_fn=problem.log_prior)
  assert target.num_examples == 600 and target.num_records == 150
  # tf.data reads the files (CRCs valid); record g is examples
  # g * RECORD ... in the data's order.
  records = tf.data.TFRecordDataset(target._paths[0]).take(2)  # pylint: disable=protected-access
  first = target._decode(tf.stack(list(records)))  # pylint: disable=protected-access
  np.testing.assert_array_equal(first[0][:RECORD], problem.data[0][:RECORD])
  np.testing.assert_array_equal(first[1][RECORD:],
                                problem.data[1][3 * RECORD:4 * RECORD])


def test_minibatch_energy_is_unbiased(written):
  problem, layout = written
  target = sg.TFRecordTarget(problem.log_likelihood, layout,
                             records_per_batch=2,
                             log_prior_fn=problem.log_prior)
  w = tf.constant([0.5, -1.])
  run = tf.function(lambda seeds: tf.map_fn(
      lambda s: target.minibatch_energy(w, s), seeds,
      fn_output_signature=tf.float32))
  seeds = tf.random.stateless_uniform([2000, 2], [0, 9], maxval=2**30,
                                      dtype=tf.int32)
  energies = np.asarray(run(seeds), np.float64)
  exact = problem.energy(w.numpy())
  se = energies.std() / np.sqrt(len(energies))
  assert abs(energies.mean() - exact) < 4 * se, (energies.mean(), exact, se)


# A false alarm rate of 1e-3 per chi-square check (the seeds are fixed, so
# the outcome is reproducible; a biased or seed-independent draw fails it
# with certainty at these sizes).
ALPHA = 1e-3


def test_record_minibatches_are_iid_uniform_draws_of_the_seed(written):
  # What exact AMAGOLD and the amortized Barker test need of a target
  # (minibatches_from_seed): the batch is a function of the kernel's seed
  # alone, uniform over records, independent within a batch and across the
  # independent seeds of successive steps.
  scipy_stats = pytest.importorskip("scipy.stats")
  problem, layout = written
  target = sg.TFRecordTarget(problem.log_likelihood, layout,
                             records_per_batch=2)
  assert target.minibatches_from_seed
  seed = tf.constant([3, 4])
  np.testing.assert_array_equal(target.record_indices(seed),
                                target.record_indices(seed))
  # The batch read is those records' examples (record g: examples
  # g * RECORD ...; the fixture writes the data in order).
  rows = np.ravel(np.asarray(target.record_indices(seed))[:, None] * RECORD
                  + np.arange(RECORD))
  np.testing.assert_array_equal(target._minibatch(seed)[1],  # pylint: disable=protected-access
                                problem.data[1][rows])
  seeds = tf.stack(tfp.random.split_seed([0, 9], 3000))  # [3000, 2]
  draws = np.asarray(tf.function(lambda s: tf.map_fn(
      target.record_indices, s, fn_output_signature=tf.int32))(seeds))
  counts = np.bincount(draws.ravel(), minlength=target.num_records)
  assert scipy_stats.chisquare(counts).pvalue > ALPHA, counts
  # Independence, on records grouped in 6 classes of 25: the two records of
  # one batch, and the first records of successive steps.
  groups = draws % 6
  for a, b in ((groups[:, 0], groups[:, 1]),
               (groups[:-1, 0], groups[1:, 0])):
    table = np.zeros([6, 6])
    np.add.at(table, (a, b), 1)
    assert scipy_stats.chi2_contingency(table).pvalue > ALPHA, table


def test_exact_amagold_on_tfrecords_is_calibrated(written):
  problem, layout = written

  class Recording(sg.TFRecordTarget):
    """Keeps the records each (eager) leapfrog step reads."""
    read = []

    def record_indices(self, seed):
      indices = super().record_indices(seed)
      self.read.append(np.asarray(indices))
      return indices

  target = Recording(problem.log_likelihood, layout, records_per_batch=3,
                     log_prior_fn=problem.log_prior)
  import warnings  # pylint: disable=g-import-not-at-top
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    kernel = sg.AMAGOLD(target, step_size=0.01, num_leapfrog_steps=3,
                        friction=1.)
    sg.AmortizedBarker(target, 0.01, num_steps=2)
  assert kernel.is_calibrated and kernel.calibration_note == ""
  # The records a step reads follow the kernel's seed, whatever the state:
  # the batches do not depend on where the chain is.
  reads = {}
  for name, state, seed in (("a", [0.5, -1.], [1, 2]),
                            ("b", [2., 0.3], [1, 2]),
                            ("c", [0.5, -1.], [1, 3])):
    state = tf.constant(state)
    results = kernel.bootstrap_results(state)
    Recording.read.clear()
    kernel.one_step(state, results, seed=tf.constant(seed))
    reads[name] = np.stack(Recording.read)
  assert len(reads["a"]) == 3  # one batch per leapfrog step
  np.testing.assert_array_equal(reads["a"], reads["b"])
  assert not np.array_equal(reads["a"], reads["c"])
  # A pipeline's batches are not the seed's: AMAGOLD says so.
  y = np.zeros([20, 1], np.float32)
  ds = tf.data.Dataset.from_tensor_slices(y)
  pipeline = sg.DatasetTarget(lambda w, b: -(b[..., 0] - w) ** 2,
                              ds.repeat().batch(5), 20,
                              full_dataset=ds.batch(5))
  assert not pipeline.minibatches_from_seed
  with pytest.warns(UserWarning, match="not guaranteed exact"):
    assert not sg.AMAGOLD(pipeline, step_size=0.1, num_leapfrog_steps=2,
                          friction=0.5).is_calibrated


def test_a_minibatch_under_xla_is_refused_naming_the_target_and_fix(written):
  # The records are read in a tf.numpy_function, which XLA cannot compile:
  # without the refusal, XLA's "PyFuncStateless" error comes at run time,
  # after a trace, and names neither the target nor the fix.
  problem, layout = written
  target = sg.TFRecordTarget(problem.log_likelihood, layout,
                             records_per_batch=2,
                             log_prior_fn=problem.log_prior)
  kernel = sg.SGLD(target, step_size=1e-3)
  with pytest.raises(ValueError, match=(
      r"TFRecordTarget reads a minibatch from its files, which XLA cannot "
      r"compile: its `tf.numpy_function` .* a TFRecordTarget cannot be used"
      r"(.|\n)*`sample_moments`(.|\n)*InMemoryTarget")):
    sg.sample_moments(kernel, tf.zeros([2, 2]), 3, seed=[0, 1])
  # Without XLA it runs.
  moments = sg.sample_moments(kernel, tf.zeros([2, 2]), 3, seed=[0, 1],
                              jit_compile=False)
  assert np.all(np.isfinite(np.asarray(tf.nest.flatten(moments)[0])))


def test_a_missing_or_truncated_shard_is_refused_when_the_target_is_built(
    written, tmp_path):
  # Before, a truncated shard failed only when a minibatch read past its end
  # ("unpack requires a buffer of 8 bytes", naming no file), and a missing
  # one when first read.
  import json  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  problem, layout = written
  copy = shutil.copytree(os.path.dirname(layout), tmp_path / "copy")
  with open(copy / "layout.json") as f:
    shards = [str(copy / name) for name in json.load(f)["files"]]
  build = lambda: sg.TFRecordTarget(problem.log_likelihood, str(copy),
                                    records_per_batch=2)
  build()  # Intact: taken.
  size = os.path.getsize(shards[1])
  with open(shards[1], "r+b") as f:
    f.truncate(size - 10)
  with pytest.raises(ValueError, match=(
      rf"shard '{shards[1]}' has {size - 10} bytes, but layout.json gives it "
      r"50 records")):
    build()
  os.remove(shards[1])
  with pytest.raises(ValueError, match=r"shard .* layout.json lists does not"
                     r" exist"):
    build()
