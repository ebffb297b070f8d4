"""Loaders for the real data sets of the papers' experiments, original formats.

Each loader reads the file as published from a directory the caller names
(the project does not ship copies of the data); a missing or malformed file
raises an error that says what was expected and where.
"""

import os

import numpy as np

__all__ = ["load_statlog_australian"]

STATLOG_AUSTRALIAN_FILE = "australian.dat"
_AUSTRALIAN_SHAPE = (690, 15)


def _find(data_dir, filename, subdirectory):
  """data_dir/filename or data_dir/subdirectory/filename, whichever exists."""
  for path in (os.path.join(data_dir, filename),
               os.path.join(data_dir, subdirectory, filename)):
    if os.path.isfile(path):
      return path
  return None


def load_statlog_australian(data_dir):
  """Statlog (Australian credit approval), as published by the UCI archive.

  Reads `australian.dat` (690 rows of 14 whitespace-separated attributes and
  a 0/1 class label in the last column) from `data_dir` or from
  `data_dir/statlog/`. The covariates are returned unscaled: they range over
  five orders of magnitude (binary flags next to an attribute reaching
  100,001), which is what makes the posterior of a logistic regression on
  them badly scaled.

  Args:
    data_dir: a directory holding `australian.dat` (or
      `statlog/australian.dat`).

  Returns:
    (x, y): float64 arrays of shape [690, 14] and [690], y in {0, 1}.

  Raises:
    FileNotFoundError: the file is not there.
    ValueError: the file does not have the published shape or labels.

  ```python
  x, y = tfp_sgmcmc.datasets.load_statlog_australian("data")
  print(x.shape, y.mean())  # (690, 14), the share of label 1
  ```
  """
  data_dir = os.fspath(data_dir)
  path = _find(data_dir, STATLOG_AUSTRALIAN_FILE, "statlog")
  if path is None:
    raise FileNotFoundError(
        f"Statlog Australian not found: expected `{STATLOG_AUSTRALIAN_FILE}` "
        f"in {data_dir!r} or in {os.path.join(data_dir, 'statlog')!r}. It is "
        "the UCI file `australian.dat` (Statlog (Australian Credit Approval)),"
        " 690 rows, 14 features and a 0/1 label, whitespace-separated.")
  try:
    table = np.loadtxt(path, dtype=np.float64, ndmin=2)
  except ValueError as e:
    raise ValueError(f"{path!r} is not a whitespace-separated numeric table "
                     f"({e}).") from e
  if table.shape != _AUSTRALIAN_SHAPE:
    raise ValueError(f"{path!r} has shape {table.shape}; the Statlog "
                     f"Australian file has {_AUSTRALIAN_SHAPE} (14 features "
                     "and a label per row).")
  x, y = table[:, :-1], table[:, -1]
  if not np.all((y == 0) | (y == 1)):
    raise ValueError(f"{path!r}: the last column must be a 0/1 label; got "
                     f"values {np.unique(y)[:10]}.")
  return x, y


# --- Statlog (Heart), LIBSVM format ----------------------------------------

__all__ += ["load_statlog_heart"]

STATLOG_HEART_FILE = "heart_scale"


def load_statlog_heart(data_dir):
  """Statlog (Heart) in LIBSVM's `heart_scale` format.

  Reads `heart_scale` (270 rows `label index:value ...`, labels +1/-1, 13
  features scaled to [-1, 1], zeros omitted) from `data_dir` or
  `data_dir/statlog/`. The AMAGOLD paper's second logistic-regression
  data set (minibatch 16).

  Args:
    data_dir: a directory holding `heart_scale` (or
      `statlog/heart_scale`).

  Returns:
    (x, y): float64 arrays [270, 13] and [270], y in {0, 1} (1 for +1).

  Raises:
    FileNotFoundError: the file is not there.
    ValueError: a malformed line, a feature index outside 1..13, or not 270
      rows.

  ```python
  x, y = tfp_sgmcmc.datasets.load_statlog_heart("data")
  print(x.shape)  # (270, 13)
  ```
  """
  data_dir = os.fspath(data_dir)
  path = _find(data_dir, STATLOG_HEART_FILE, "statlog")
  if path is None:
    raise FileNotFoundError(
        f"Statlog Heart not found: expected `{STATLOG_HEART_FILE}` in "
        f"{data_dir!r} or in {os.path.join(data_dir, 'statlog')!r}. It is "
        "LIBSVM's `heart_scale` (270 rows, 13 features, labels +1/-1).")
  rows, labels = [], []
  with open(path) as f:
    for line_number, line in enumerate(f, 1):
      fields = line.split()
      if not fields:
        continue
      try:
        label = float(fields[0])
        features = {}
        for item in fields[1:]:
          index, value = item.split(":")
          features[int(index)] = float(value)
      except ValueError as e:
        raise ValueError(f"{path!r} line {line_number} is not LIBSVM "
                         f"`label index:value ...` ({e}).") from e
      if label not in (1., -1.):
        raise ValueError(f"{path!r} line {line_number}: label {label}; "
                         "expected +1 or -1.")
      if features and not all(1 <= j <= 13 for j in features):
        raise ValueError(f"{path!r} line {line_number}: feature indices "
                         f"{sorted(features)}; expected 1..13.")
      rows.append(features)
      labels.append(label)
  if len(rows) != 270:
    raise ValueError(f"{path!r} has {len(rows)} rows; Statlog Heart has "
                     "270.")
  x = np.zeros((len(rows), 13))
  for i, features in enumerate(rows):
    for j, value in features.items():
      x[i, j - 1] = value
  return x, (np.asarray(labels) > 0).astype(np.float64)


# --- MNIST and the Fashion-MNIST sprite (IDX format) -------------------------

__all__ += ["read_idx", "load_mnist", "load_fashion_mnist_sprite"]

MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
FASHION_MNIST_SPRITE_FILE = "images-idx3-ubyte.gz"

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4",
               0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
  """Reads an IDX file (LeCun's MNIST format), gzip-compressed or not.

  The header is two zero bytes, a type code, the number of dimensions and
  one big-endian uint32 per dimension; the data follow in C order.

  Args:
    path: the file's path; a gzip-compressed file is decompressed.

  Returns:
    A numpy array with the file's shape (uint8 for MNIST images and labels).

  Raises:
    ValueError: the file is not a well-formed IDX file.

  A 2 x 3 uint8 array written as IDX (type code 0x08, two dimensions) and
  read back:

  ```python
  with open("tiny-idx2-ubyte", "wb") as f:
    f.write(bytes([0, 0, 0x08, 2]) + np.array([2, 3], ">u4").tobytes()
            + bytes(range(6)))
  print(tfp_sgmcmc.datasets.read_idx("tiny-idx2-ubyte"))  # [[0 1 2] [3 4 5]]
  ```
  """
  import gzip  # pylint: disable=import-outside-toplevel
  path = os.fspath(path)
  with open(path, "rb") as f:
    raw = f.read()
  if raw[:2] == b"\x1f\x8b":
    raw = gzip.decompress(raw)
  if len(raw) < 4 or raw[:2] != b"\x00\x00" or raw[2] not in _IDX_DTYPES:
    raise ValueError(f"{path!r} is not an IDX file (bad magic number "
                     f"{raw[:4].hex()}).")
  ndim = raw[3]
  header = 4 + 4 * ndim
  shape = tuple(int(d) for d in np.frombuffer(raw[4:header], ">u4"))
  dtype = np.dtype(_IDX_DTYPES[raw[2]])
  expected = int(np.prod(shape)) * dtype.itemsize
  if len(raw) - header != expected:
    raise ValueError(f"{path!r}: the header announces shape {shape} "
                     f"({expected} bytes of data) but the file holds "
                     f"{len(raw) - header}.")
  return np.frombuffer(raw, dtype, offset=header).reshape(shape).astype(
      dtype.newbyteorder("="))


def load_mnist(data_dir, subset="test", download=False):
  """MNIST images and labels from the original IDX files.

  Reads `t10k-images-idx3-ubyte.gz` / `t10k-labels-idx1-ubyte.gz` (subset
  "test", 10,000 images) or the `train-*` files (subset "train", 60,000)
  from `data_dir` or `data_dir/mnist/`. With `download=True` and the files
  absent, the subset comes from `tensorflow-datasets` instead (needs
  internet the first time; the same images and labels).

  Args:
    data_dir: a directory holding the files (or an `mnist/` subdirectory).
    subset: "test" or "train".
    download: fall back to `tensorflow_datasets.load("mnist")`.

  Returns:
    (images, labels): uint8 arrays [n, 28, 28] and [n], labels in 0..9.

  Raises:
    FileNotFoundError: the files are missing (and `download` is False).
    ValueError: a file is malformed, or images and labels disagree.

  ```python
  images, labels = tfp_sgmcmc.datasets.load_mnist("data", subset="test")
  print(images.shape, labels[:10])  # (10000, 28, 28)
  ```
  """
  if subset not in MNIST_FILES:
    raise ValueError(f"`subset` must be one of {sorted(MNIST_FILES)}; got "
                     f"{subset!r}.")
  data_dir = os.fspath(data_dir)
  image_file, label_file = MNIST_FILES[subset]
  image_path = _find(data_dir, image_file, "mnist")
  label_path = _find(data_dir, label_file, "mnist")
  if image_path is None or label_path is None:
    if download:
      return _mnist_from_tfds(subset)
    missing = image_file if image_path is None else label_file
    raise FileNotFoundError(
        f"MNIST ({subset}) not found: expected `{missing}` in {data_dir!r} "
        f"or in {os.path.join(data_dir, 'mnist')!r}. These are the original "
        "IDX files (yann.lecun.com/exdb/mnist, also on the tensorflow-"
        "datasets mirrors); pass download=True to fetch the set through "
        "tensorflow-datasets.")
  images, labels = read_idx(image_path), read_idx(label_path)
  if images.ndim != 3 or images.shape[1:] != (28, 28):
    raise ValueError(f"{image_path!r} holds an array of shape "
                     f"{images.shape}; MNIST images are [n, 28, 28].")
  if labels.shape != (images.shape[0],):
    raise ValueError(f"{label_path!r} holds {labels.shape} labels for "
                     f"{images.shape[0]} images.")
  if labels.size and labels.max() > 9:
    raise ValueError(f"{label_path!r}: labels must be 0..9; got "
                     f"{np.unique(labels)[:20]}.")
  return images, labels


def _mnist_from_tfds(subset):
  import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  ds = tfds.load("mnist", split=subset, batch_size=-1, as_supervised=True)
  images, labels = tfds.as_numpy(ds)
  return images.reshape(-1, 28, 28).astype(np.uint8), labels.astype(np.uint8)


def load_fashion_mnist_sprite(data_dir):
  """The 900 Fashion-MNIST images cut from the data set's published sprite.

  Reads `images-idx3-ubyte.gz` (IDX) from `data_dir` or
  `data_dir/fashion-mnist-sprite/`: an out-of-distribution set for MNIST
  models (clothes instead of digits, same 28 x 28 grey-level format).

  Args:
    data_dir: a directory holding `images-idx3-ubyte.gz` (or
      `fashion-mnist-sprite/images-idx3-ubyte.gz`).

  Returns:
    uint8 array [900, 28, 28].

  Raises:
    FileNotFoundError: the file is missing.
    ValueError: it is not 28 x 28 images.

  ```python
  print(tfp_sgmcmc.datasets.load_fashion_mnist_sprite("data").shape)
  # (900, 28, 28)
  ```
  """
  data_dir = os.fspath(data_dir)
  path = _find(data_dir, FASHION_MNIST_SPRITE_FILE, "fashion-mnist-sprite")
  if path is None:
    raise FileNotFoundError(
        f"Fashion-MNIST sprite images not found: expected "
        f"`{FASHION_MNIST_SPRITE_FILE}` in {data_dir!r} or in "
        f"{os.path.join(data_dir, 'fashion-mnist-sprite')!r} (900 images "
        "28 x 28, IDX format, cut from Fashion-MNIST's sprite).")
  images = read_idx(path)
  if images.ndim != 3 or images.shape[1:] != (28, 28):
    raise ValueError(f"{path!r} holds an array of shape {images.shape}; "
                     "expected [n, 28, 28] images.")
  return images


# --- The MNIST test file split into parts (one function for every example) --

__all__ += ["load_mnist_split"]


def load_mnist_split(data_dir, seed=0, train=slice(0, 8000),
                     test=slice(8000, None), **parts):
  """The 10,000 MNIST test images split into parts by one fixed permutation.

  Where only the MNIST *test* file is at hand (as on this project's
  machines), an experiment trains on part of it and tests on the rest. This
  is that split, written once so that experiments which name the same seed
  and slices train and test on the same images:
  `numpy.random.default_rng(seed).permutation(10000)` orders the images, and
  each part takes the images at its slice of that order (by default the
  first 8,000 for training and the last 2,000 for testing).

  Args:
    data_dir: a directory holding the MNIST test files (see `load_mnist`).
    seed: the permutation's seed.
    train: the training part's slice of the permutation.
    test: the test part's slice of the permutation.
    **parts: more parts, each a slice, e.g. `validation=slice(6000, 8000)`.

  Returns:
    {name: (x, y)} for "train", "test" and each of `parts`: x float32
    [n, 784], pixel values / 255 in [0, 1]; y int32 [n], labels 0..9.

  Raises:
    FileNotFoundError, ValueError: as `load_mnist`.

  ```python
  parts = tfp_sgmcmc.datasets.load_mnist_split(
      "data", validation=slice(6000, 8000), train=slice(0, 6000))
  x_train, y_train = parts["train"]
  print(x_train.shape, parts["validation"][0].shape)  # (6000, 784) (2000, 784)
  ```
  """
  images, labels = load_mnist(data_dir, "test")
  x = (images.reshape(len(images), -1) / 255.).astype(np.float32)
  y = labels.astype(np.int32)
  order = np.random.default_rng(seed).permutation(len(images))
  parts = dict(train=train, test=test, **parts)
  return {name: (x[order[part]], y[order[part]])
          for name, part in parts.items()}
