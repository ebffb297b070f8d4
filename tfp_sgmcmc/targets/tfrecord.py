"""Data larger than memory: sharded TFRecord files with i.i.d. minibatches.

`write_tfrecord_shards` writes a data set (given whole, or as an iterator of
chunks, so that it never has to fit in memory) into `num_shards` TFRecord
files whose records all have one length: each record holds `record_size`
consecutive examples as raw bytes, feature after feature. Fixed-length
records make record k's byte offset in its file computable, so a random
record is one `pread` away, without reading what precedes it.

`TFRecordTarget` is a `DatasetTarget` over those files:

* the exact energy U(theta) is a streaming pass, `tf.data.TFRecordDataset`
  over the shards in order, decoded and summed chunk by chunk (memory: a few
  chunks, whatever N), and so are its gradient and Hessian-vector products
  (`sample`'s start);
* each minibatch is `records_per_batch` records drawn uniformly, with
  replacement, from the kernel's stateless seed (like `InMemoryTarget`'s
  indices), read by offset. n = records_per_batch x record_size, and

      U~(theta) = -(N / n) sum_{i in batch} log p(x_i | theta) - log p(theta)

  is unbiased because every example lies in exactly one record and records
  are drawn uniformly. Batches of different steps are independent and their
  law does not depend on the state, which is what AMAGOLD's exactness
  argument (Zhang et al. 2020, Theorem 1) needs: AMAGOLD with
  `acceptance_energy="exact"` on this target is exact. The examples of one
  record always travel together (cluster sampling); written in a random
  order (as `write_tfrecord_shards(shuffle_seed=...)` does), a record is a
  simple random sample of the data, and with record_size = 1 the batches
  have `InMemoryTarget`'s law.

Minibatches are read in a `tf.numpy_function`: the target works eagerly and
inside `tf.function`, not under XLA, as any `DatasetTarget`.
"""

import json
import os
import struct

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc.targets.checks import check_finite_data, refuse_under_xla
from tfp_sgmcmc.targets.dataset import DatasetTarget

__all__ = ["TFRecordTarget", "write_tfrecord_shards", "LAYOUT_FILE"]

LAYOUT_FILE = "layout.json"
# A TFRecord record: uint64 length, uint32 masked CRC of the length, the
# data, uint32 masked CRC of the data.
_HEADER, _FOOTER = 12, 4


def _features(example_tree):
  """[(dtype name, shape per example)] for each leaf of one chunk."""
  return [(a.dtype.name, list(a.shape[1:])) for a in
          tf.nest.flatten(example_tree)]


def _looks_like_a_list_of_chunks(data):
  """A list (not a tuple) of two or more structures (tuples, lists or
  dicts) that all have the same nesting: what a list of chunks looks like."""
  if not isinstance(data, list) or len(data) < 2:
    return False
  if not all(isinstance(c, (tuple, list, dict)) for c in data):
    return False
  try:
    for c in data[1:]:
      tf.nest.assert_same_structure(data[0], c)
  except (ValueError, TypeError):
    return False
  return True


def write_tfrecord_shards(data, directory, num_shards, record_size=1,
                          shuffle_seed=None):
  """Writes `data` into `num_shards` TFRecord files of fixed-length records.

  Args:
    data: a nested structure of arrays with a common leading axis N, e.g.
      `(x, y)`, or an iterable of such structures (chunks, written in
      order), for data that does not fit in memory. Every chunk's length
      must be a multiple of `record_size`.
    directory: where to write `shard-XXXXX-of-YYYYY.tfrecord` and
      `layout.json` (the structure, dtypes, shapes and sizes).
    num_shards: number of files; records are dealt out round-robin.
    record_size: examples per record.
    shuffle_seed: if given, each chunk's examples are permuted before
      writing (a record is then a random sample of its chunk; pass chunks
      that are themselves in random order for data sorted by label or time).

  Returns:
    The path of `layout.json`, which `TFRecordTarget` reads.

  Raises:
    ValueError: `num_shards` or `record_size` < 1, a chunk that does not
      fit the layout (its length not a multiple of `record_size`), or a
      list of same-shaped structures (chunks passed as a list: pass an
      iterator).

  #### Example

  Data streamed in two chunks, into 4 shards of 32-example records (the
  example writes into the current folder). Chunks come from an iterator
  (here a generator): a list or tuple is read as one data structure.

  ```python
  chunks = ((x[i:i + 512], y[i:i + 512]) for i in (0, 512))
  layout = tfp_sgmcmc.write_tfrecord_shards(chunks, "shards", num_shards=4,
                                            record_size=32, shuffle_seed=0)
  print(layout)   # shards/layout.json
  streamed = tfp_sgmcmc.TFRecordTarget(log_likelihood, layout,
                                       records_per_batch=1,
                                       log_prior_fn=prior)
  print(streamed.num_examples)   # 1024
  ```
  """
  if int(num_shards) < 1 or int(record_size) < 1:
    raise ValueError(f"`num_shards` and `record_size` must be >= 1; got "
                     f"{num_shards!r} and {record_size!r}.")
  num_shards, record_size = int(num_shards), int(record_size)
  if _looks_like_a_list_of_chunks(data):
    raise ValueError(
        f"`data` is a list of {len(data)} structures of the same shape: "
        "a list is read as one data structure, so these would be written "
        f"as {len(data)}x the parts of one example. If they are chunks, "
        "pass an iterator over them (`iter(chunks)` or a generator); if "
        "they are parts of one example, pass a tuple.")
  if isinstance(data, (tuple, list, dict, np.ndarray)) or tf.is_tensor(data):
    chunks = [data]
  else:
    chunks = data
  rng = None if shuffle_seed is None else np.random.default_rng(shuffle_seed)
  tf.io.gfile.makedirs(directory)
  paths = [os.path.join(directory, f"shard-{i:05d}-of-{num_shards:05d}"
                        ".tfrecord") for i in range(num_shards)]
  writers = [tf.io.TFRecordWriter(p) for p in paths]
  structure, features, counts, total = None, None, [0] * num_shards, 0
  record_bytes = None
  try:
    for number, chunk in enumerate(chunks):
      arrays = tf.nest.map_structure(np.asarray, chunk)
      # On the host, once: a NaN in the files would make every chain that
      # reads its record diverge, with nothing to say why.
      try:
        check_finite_data(arrays)
      except ValueError as e:
        if isinstance(chunks, list):  # One structure, not chunks.
          raise
        raise ValueError(f"chunk {number} of the chunks in `data`: {e}"
                         ) from None
      leaves = tf.nest.flatten(arrays)
      if structure is None:
        structure = tf.nest.map_structure(lambda _: 0, arrays)
        features = _features(arrays)
      else:
        tf.nest.assert_same_structure(structure, arrays)
        if _features(arrays) != features:
          raise ValueError(f"chunk features {_features(arrays)} differ from "
                           f"the first chunk's {features}.")
      length = leaves[0].shape[0]
      if any(a.shape[0] != length for a in leaves):
        raise ValueError("the parts of a chunk have different lengths "
                         f"{[a.shape[0] for a in leaves]}.")
      if length % record_size:
        raise ValueError(
            f"a chunk of {length} examples is not a whole number of records "
            f"of `record_size` = {record_size}; pass chunks (and N) that are "
            "multiples of it.")
      if rng is not None:
        perm = rng.permutation(length)
        leaves = [a[perm] for a in leaves]
      for start in range(0, length, record_size):
        payload = b"".join(np.ascontiguousarray(
            a[start:start + record_size]).tobytes() for a in leaves)
        record_bytes = len(payload)
        shard = (total // record_size) % num_shards
        writers[shard].write(payload)
        counts[shard] += 1
        total += record_size
  finally:
    for w in writers:
      w.close()
  if total == 0:
    raise ValueError("`data` is empty: nothing written.")
  layout = dict(structure=_structure_to_json(structure), features=features,
                record_size=record_size, record_bytes=record_bytes,
                num_examples=total, records_per_shard=counts,
                files=[os.path.basename(p) for p in paths])
  layout_path = os.path.join(directory, LAYOUT_FILE)
  with tf.io.gfile.GFile(layout_path, "w") as f:
    json.dump(layout, f)
  return layout_path


def _structure_to_json(structure):
  if isinstance(structure, dict):
    return {"dict": {k: _structure_to_json(v) for k, v in structure.items()}}
  if isinstance(structure, (list, tuple)):
    return {"list" if isinstance(structure, list) else "tuple":
            [_structure_to_json(v) for v in structure]}
  return None


def _structure_from_json(obj):
  if obj is None:
    return 0
  if "dict" in obj:
    return {k: _structure_from_json(v) for k, v in obj["dict"].items()}
  if "list" in obj:
    return [_structure_from_json(v) for v in obj["list"]]
  return tuple(_structure_from_json(v) for v in obj["tuple"])


def _check_shard_sizes(paths, records_per_shard, stride):
  """Each shard holds the records `layout.json` counts for it, by its size:
  a missing or truncated shard (a copy cut short) is refused here, not
  where a minibatch or the energy's pass first reads past its end."""
  for path, count in zip(paths, records_per_shard):
    if not tf.io.gfile.exists(path):
      raise ValueError(f"The shard {path!r} that layout.json lists does not "
                       "exist: copy every shard beside layout.json, or "
                       "write the shards again (write_tfrecord_shards).")
    size = tf.io.gfile.stat(path).length
    if size != count * stride:
      raise ValueError(
          f"The shard {path!r} has {size} bytes, but layout.json gives it "
          f"{count} records of {stride} bytes ({count * stride}): it is "
          "truncated or not the file written with this layout. Copy it "
          "again, or write the shards again (write_tfrecord_shards).")


def _shard_paths(layout, directory, names, allow_outside_files):
  """The shard files `layout.json` lists, each inside its directory unless
  the caller allows otherwise."""
  if not isinstance(names, list) or not names or not all(
      isinstance(n, str) and n for n in names):
    raise ValueError(f"{layout!r}: `files` must be a non-empty list of file "
                     f"names; got {names!r}. Write the layout with "
                     "write_tfrecord_shards.")
  paths = [os.path.join(directory, name) for name in names]
  if allow_outside_files:
    return paths
  root = os.path.realpath(directory or ".")
  outside = [n for n, p in zip(names, paths)
             if os.path.commonpath([root, os.path.realpath(p)]) != root]
  if outside:
    raise ValueError(
        f"{layout!r} lists files outside its directory {root!r}: "
        f"{outside}. write_tfrecord_shards writes plain names beside the "
        "layout; pass allow_outside_files=True if these paths are meant.")
  return paths


class TFRecordTarget(DatasetTarget):
  """A posterior over TFRecord shards written by `write_tfrecord_shards`.

  Args:
    log_likelihood_fn: as for `InMemoryTarget`; `batch` has the structure of
      the data that was written.
    layout: the `layout.json` path (or its directory).
    records_per_batch: k, records per minibatch; n = k x record_size.
    log_prior_fn: as for `InMemoryTarget`.
    energy_chunk_records: records decoded per step of the exact-energy pass
      (default: about 4096 examples).
    parameter_shapes: as for `InMemoryTarget`.
    allow_outside_files: False (default): every file that `layout.json`
      lists must lie in the layout's directory (names such as `../x` or
      absolute paths elsewhere are refused, so a layout file cannot make
      the target read other files); True reads them where they point.

  See the module docstring for the minibatch law and why AMAGOLD stays
  exact on it (`AMAGOLD(TFRecordTarget(...)).is_calibrated` is True).

  #### Example

  ```python
  import tempfile
  folder = tempfile.mkdtemp()       # a folder of your own for large data
  layout = tfp_sgmcmc.write_tfrecord_shards((x, y), folder, num_shards=8,
                                            record_size=32, shuffle_seed=0)
  target = tfp_sgmcmc.TFRecordTarget(log_likelihood, layout,
                                     records_per_batch=4, log_prior_fn=prior)
  kernel = tfp_sgmcmc.AMAGOLD(target, step_size=1e-3, num_leapfrog_steps=10,
                              friction=1.)
  ```
  """

  def __init__(self, log_likelihood_fn, layout, records_per_batch,
               log_prior_fn=None, energy_chunk_records=None,
               parameter_shapes=None, allow_outside_files=False):
    if tf.io.gfile.isdir(layout):
      layout = os.path.join(layout, LAYOUT_FILE)
    if not tf.io.gfile.exists(layout):
      raise ValueError(f"`layout` = {layout!r} does not exist; pass the path "
                       "that write_tfrecord_shards returned.")
    with tf.io.gfile.GFile(layout) as f:
      spec = json.load(f)
    directory = os.path.dirname(layout)
    self._paths = _shard_paths(layout, directory, spec.get("files"),
                               allow_outside_files)
    self._structure = _structure_from_json(spec["structure"])
    self._features = [(tf.as_dtype(d), s) for d, s in spec["features"]]
    self._record_size = int(spec["record_size"])
    self._record_bytes = int(spec["record_bytes"])
    self._records_per_shard = [int(c) for c in spec["records_per_shard"]]
    self._num_records = sum(self._records_per_shard)
    _check_shard_sizes(self._paths, self._records_per_shard,
                       self._record_bytes + _HEADER + _FOOTER)
    self._records_per_batch = arguments.check_integer(
        "records_per_batch", records_per_batch, 1, self._num_records,
        hint=" (The most is the number of records.)")
    chunk = energy_chunk_records or max(1, 4096 // self._record_size)
    # Files in order, decoded in parallel (deterministic order, so the
    # energy's float rounding is the same on every pass), one chunk ahead.
    full = tf.data.TFRecordDataset(self._paths).batch(int(chunk)).map(
        self._decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)
    self._files = None
    super().__init__(log_likelihood_fn, full, int(spec["num_examples"]),
                     log_prior_fn=log_prior_fn, full_dataset=full,
                     parameter_shapes=parameter_shapes)

  @property
  def minibatches_from_seed(self):
    """True: each batch is `records_per_batch` records drawn uniformly, with
    replacement, from the kernel's seed (`record_indices`), so exact AMAGOLD
    and the amortized Barker test are exact here, as on `InMemoryTarget`."""
    return True

  @property
  def batch_size(self):
    """n = records_per_batch x record_size."""
    return self._records_per_batch * self._record_size

  @property
  def record_size(self):
    return self._record_size

  @property
  def num_records(self):
    return self._num_records

  # --- decoding -----------------------------------------------------------

  def _decode(self, records):
    """[k] raw records -> the data structure with k x record_size examples."""
    parts, pos = [], 0
    for dtype, shape in self._features:
      size = self._record_size * int(np.prod(shape, dtype=np.int64))
      nbytes = size * dtype.size
      raw = tf.io.decode_raw(tf.strings.substr(records, pos, nbytes), dtype)
      parts.append(tf.reshape(raw, [-1] + list(shape)))
      pos += nbytes
    return tf.nest.pack_sequence_as(self._structure, parts)

  # --- i.i.d. minibatches by offset ---------------------------------------

  def record_indices(self, seed):
    """The k global record indices the step with `seed` reads."""
    return random.philox_indices(seed, [self._records_per_batch],
                                 self._num_records)

  def _read_records(self, indices):
    """numpy: raw bytes of records `indices` (round-robin over shards)."""
    if self._files is None:
      self._files = [os.open(p, os.O_RDONLY) for p in self._paths]
    stride = self._record_bytes + _HEADER + _FOOTER
    num_shards = len(self._paths)
    out = []
    for i in np.asarray(indices).tolist():
      shard, k = i % num_shards, i // num_shards
      buf = os.pread(self._files[shard], stride, k * stride)
      (length,) = struct.unpack("<Q", buf[:8])
      if length != self._record_bytes:
        raise ValueError(f"record {i} of {self._paths[shard]} has {length} "
                         f"bytes, expected {self._record_bytes}: the files do "
                         "not match their layout.json.")
      out.append(buf[_HEADER:_HEADER + self._record_bytes])
    return np.array(out, dtype=object)

  def _minibatch(self, seed):
    refuse_under_xla("TFRecordTarget reads a minibatch from its files",
                     "its `tf.numpy_function` reading the records",
                     "a TFRecordTarget")
    records = tf.numpy_function(self._read_records,
                                [self.record_indices(seed)], tf.string,
                                stateful=False)
    records.set_shape([self._records_per_batch])
    return self._decode(records)

  def minibatch_energy(self, state, seed):
    return self._energy_from_batch(state, self._minibatch(seed),
                                   self.batch_size)

  def minibatch_energies(self, states, seed):
    batch = self._minibatch(seed)
    return [self._energy_from_batch(s, batch, self.batch_size)
            for s in states]

  def gradient_noise_variance(self, state, seed):
    return self._noise_variance_from_batch(state, self._minibatch(seed),
                                           self.batch_size)

  def __del__(self):
    for fd in getattr(self, "_files", None) or []:
      try:
        os.close(fd)
      except OSError:
        pass
