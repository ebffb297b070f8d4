"""The real data sets' loaders name what is wrong with a file: missing, a bad
label or feature index, the wrong number of rows or columns. A TFRecord
layout reads only files in its own directory unless the caller allows more.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg


def test_heart_loader_errors_name_the_problem(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"heart_scale"):
    sg.datasets.load_statlog_heart(tmp_path)
  (tmp_path / "heart_scale").write_text("2 1:0.5\n")
  with pytest.raises(ValueError, match=r"label 2\.0"):
    sg.datasets.load_statlog_heart(tmp_path)
  (tmp_path / "heart_scale").write_text("+1 14:0.5\n")
  with pytest.raises(ValueError, match=r"indices \[14\]"):
    sg.datasets.load_statlog_heart(tmp_path)
  (tmp_path / "heart_scale").write_text("+1 1:0.5\n-1 2:0.1\n")
  with pytest.raises(ValueError, match=r"2 rows.*270"):
    sg.datasets.load_statlog_heart(tmp_path)


def test_australian_loader_error_names_the_missing_file(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"australian\.dat.*"
                     + str(tmp_path).replace("\\", "\\\\")):
    sg.datasets.load_statlog_australian(tmp_path)


def test_australian_loader_rejects_a_file_of_the_wrong_shape(tmp_path):
  (tmp_path / "australian.dat").write_text("1 2 3\n4 5 6\n")
  with pytest.raises(ValueError, match=r"shape \(2, 3\).*\(690, 15\)"):
    sg.datasets.load_statlog_australian(tmp_path)


def _layout_listing(tmp_path, rewrite):
  """A layout in tmp_path/data whose `files` are rewritten by `rewrite`
  (given the shard names and the directory); a copy of the first shard
  lies outside, at tmp_path/outside.tfrecord."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  x = np.arange(12, dtype=np.float32).reshape(6, 2)
  data = tmp_path / "data"
  layout = sg.write_tfrecord_shards((x, x[:, 0]), str(data), 2, record_size=3)
  with open(layout) as f:
    spec = json.load(f)
  shutil.copy(data / spec["files"][0], tmp_path / "outside.tfrecord")
  spec["files"] = rewrite(spec["files"], data)
  with open(layout, "w") as f:
    json.dump(spec, f)
  return layout


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "symlink"])
def test_a_layout_cannot_point_outside_its_directory(tmp_path, how):
  def rewrite(names, data):
    if how == "dot-dot":
      return ["../outside.tfrecord", names[1]]
    if how == "absolute":
      return [str(tmp_path / "outside.tfrecord"), names[1]]
    os.symlink(tmp_path / "outside.tfrecord", data / "link.tfrecord")
    return ["link.tfrecord", names[1]]
  layout = _layout_listing(tmp_path, rewrite)
  log_likelihood = lambda w, batch: -tf.reduce_sum((batch[1] - w) ** 2, -1)
  with pytest.raises(ValueError, match=r"files outside its directory.*"
                     r"(outside|link)\.tfrecord.*allow_outside_files=True"):
    sg.TFRecordTarget(log_likelihood, layout, 1)
  # The caller may allow them explicitly.
  target = sg.TFRecordTarget(log_likelihood, layout, 1,
                             allow_outside_files=True)
  assert target.num_records == 2


def test_a_layout_listing_absolute_paths_inside_its_directory_is_read(
    tmp_path):
  layout = _layout_listing(tmp_path,
                           lambda names, data: [str(data / n) for n in names])
  target = sg.TFRecordTarget(lambda w, batch: -tf.reduce_sum(
      (batch[1] - w) ** 2, -1), layout, 1)
  assert target.num_records == 2


def test_chunks_given_as_a_list_are_refused_with_the_fix(tmp_path):
  # A list is one data structure: two (x, y) chunks in a list used to be
  # written as examples of four parts, (x1, y1, x2, y2).
  x = np.zeros((64, 3), np.float32)
  y = np.zeros((64,), np.int32)
  with pytest.raises(ValueError, match=r"list of 2 structures.*iter\(chunks\)"):
    sg.write_tfrecord_shards([(x, y), (x, y)], str(tmp_path / "a"),
                                     num_shards=2, record_size=8)
  # The same chunks from an iterator, and one (x, y) structure as a list of
  # arrays, are written.
  layout = sg.write_tfrecord_shards(
      iter([(x, y), (x, y)]), str(tmp_path / "b"), num_shards=2,
      record_size=8)
  assert layout.endswith("layout.json")
  sg.write_tfrecord_shards([x, y], str(tmp_path / "c"),
                                   num_shards=2, record_size=8)
