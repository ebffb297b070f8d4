"""The one random-number engine and seed scheme of the package.

Every random draw of a chain comes from here, from a stateless int32[2]
seed, so a chain is reproducible from its seed and compiles under XLA:

* the injected noise of every update rule (`standard_normal_like`,
  `uniform_like`), from SplitMix64 used as a counter-based generator;
* minibatch indices: `uniform_indices` (SplitMix64; `InMemoryTarget`, the
  "global" scheme of `ShardedTarget`, the Keras minibatch M-H test) and
  `philox_indices` (TF's Philox; `TFRecordTarget`'s records and
  `ShardedTarget`'s per-shard draws);
* the few scalar draws TF makes well (`philox_uniform`, `philox_normal`:
  an M-H test's uniform, SG-NUTS's directions, a noisy-gradient target's
  noise);
* the seeds themselves: `derive_seeds` for the separate draws within one
  step, `split_seed` and `walk_seed` for seeds carried from step to step,
  `fold_in` for a seed per step index or replica.

Integer draws agree between XLA and TF's own kernels; float draws do not
(TF computes erfinv differently under XLA), so a chain is reproducible
from its seed within one compilation mode.

In a graph being traced (a `tf.function`, XLA or not), a draw of known
size is one call of a function traced once per size, not its dozens of
ops: tracing them into every graph of a chain was a visible part of the
time to build it. XLA and TF's graph runtime inline the call, so the
values are those of the ops inline.
"""

import functools

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import _splitmix

__all__ = [
    "RNG_ALG",
    "BOOTSTRAP_SEED",
    "derive_seeds",
    "derive_inner_seeds",
    "split_seed",
    "walk_seed",
    "fold_in",
    "uniform_indices",
    "philox_indices",
    "philox_uniform",
    "philox_normal",
    "standard_normal_like",
    "uniform_like",
]

# TF's own stateless draws use one explicit counter-based generator rather
# than "auto_select", whose choice may change between TF versions.
RNG_ALG = "philox"

# The seed `bootstrap_results` uses for its one energy evaluation: the
# TransitionKernel protocol gives bootstrap no seed.
BOOTSTRAP_SEED = (0, 0)

# Odd 32-bit constants (golden ratio, Weyl sequence) that salt a seed.
_SALTS = (0x9E3779B9, 0x7F4A7C15)

# A second family, for seeds derived from an already derived seed: XOR-ing
# the same family twice would return the step's own seed
# (i * salt XOR i * salt = 0); between the two families no combination
# coincides (checked for up to 300 x 300 seeds).
_INNER_SALTS = (0x85EBCA6B, 0xC2B2AE35)

# Salts for the seeds of a structure's second, third... dtype.
_GROUP_SALTS = (0x27D4EB2F, 0x165667B1)


def _one_call_op(fn):
  """`fn(seed, **static)` as one call op in a graph being traced, the call
  of a `tf.function` traced once per `static` (sizes, dtypes, flags: Python
  values); run as itself eagerly.

  A draw is dozens of integer ops, each a Python call while a graph is
  traced, and every graph of a chain is traced with several draws in it:
  called as a function traced once, a draw costs one op. XLA and
  TensorFlow's graph runtime inline the call, so the program that runs is
  the one the ops built inline give, and the values are the same."""
  functions = {}

  @functools.wraps(fn)
  def call(seed, **static):
    if tf.executing_eagerly():
      return fn(seed, **static)
    seed = tf.convert_to_tensor(seed)  # A list would key a new trace.
    key = tuple(sorted(static.items(), key=lambda item: item[0]))
    if key not in functions:
      functions[key] = tf.function(functools.partial(fn, **static),
                                   autograph=False)
    return functions[key](seed)
  return call


def _static_shape(shape):
  """`shape` as a tuple of Python ints when it is known while tracing (a
  list of ints, or a vector tensor of constant value), else None."""
  if tf.is_tensor(shape):
    value = tf.get_static_value(shape)
  elif isinstance(shape, (list, tuple)) and all(
      isinstance(d, (int, np.integer)) for d in shape):
    value = np.asarray(shape, np.int64).reshape([len(shape)])
  else:
    return None
  if value is None or np.ndim(value) != 1:
    return None
  return tuple(int(d) for d in value)


def derive_seeds(seed, n):
  """`n` seeds for separate draws made from one stateless `seed`.

  seed_i = seed XOR (i + 1) * salt, word by word: the integer fold-in that
  TFP uses to salt seeds (`samplers.fold_in`). Distinct seeds give unrelated
  streams (`tf.random.stateless_*` scramble a seed through Philox before
  use; `standard_normal_like` mixes it with SplitMix64's finaliser), and no
  random-number op is spent, which next to a small minibatch gradient would
  be a visible part of a step. The i-th seed does not depend on `n`.

  Use it for seeds that are consumed by draws within one step, never to
  carry a seed from step to step (XOR with the same salt twice returns the
  seed): carried seeds go through `split_seed` or `walk_seed`.

  Args:
    seed: a stateless int32[2] seed (anything `tfp.random.sanitize_seed`
      takes).
    n: the number of seeds, a Python int.

  Returns:
    A list of `n` int32[2] seed tensors.

  #### Example

  ```python
  batch_seed, noise_seed = tfp_sgmcmc.random.derive_seeds([1, 2], 2)
  noise = tf.random.stateless_normal([3], noise_seed)
  ```
  """
  return _salted(seed, n, _SALTS)


def derive_inner_seeds(seed, n):
  """`n` seeds derived from a seed that `derive_seeds` already derived
  (a second salt family, so that no seed comes back).

  Args:
    seed: a stateless int32[2] seed, itself from `derive_seeds`.
    n: the number of seeds, a Python int.

  Returns:
    A list of `n` int32[2] seed tensors.

  ```python
  _, step_seed = tfp_sgmcmc.random.derive_seeds([1, 2], 2)
  normal_seed, sign_seed = tfp_sgmcmc.random.derive_inner_seeds(step_seed, 2)
  print(normal_seed.shape)  # (2,)
  ```
  """
  return _salted(seed, n, _INNER_SALTS)


def _salted(seed, n, family):
  seed = tfp.random.sanitize_seed(seed)
  salts = [np.array([(i * a) % 2**32 for a in family], np.uint32)
           .view(np.int32) for i in range(1, n + 1)]
  return [tf.bitwise.bitwise_xor(seed, tf.constant(v)) for v in salts]


def split_seed(seed, n):
  """`n` unrelated seeds from one, by a real split (one random-number op):
  for seeds carried between steps (`tfp.random.split_seed`).

  Args:
    seed: a stateless int32[2] seed.
    n: the number of seeds.

  Returns:
    An int32 tensor of shape [n, 2] (unstack it for separate seeds).

  #### Example

  ```python
  carried, step_seed = tf.unstack(tfp_sgmcmc.random.split_seed([1, 2], 2))
  ```
  """
  return tfp.random.split_seed(tfp.random.sanitize_seed(seed), n=n)


def fold_in(seed, data, alg=None):
  """The seed of `data` (a step index, a replica id) under `seed`
  (`tf.random.experimental.stateless_fold_in`; `alg` None keeps TF's
  default).

  Args:
    seed: a stateless int32[2] seed.
    data: an integer (e.g. the step index) to fold in.
    alg: TF's random algorithm, or None for TF's default.

  Returns:
    An int32[2] seed tensor: the same for the same `seed` and `data`.

  #### Example

  The seed of step 10 of a chain, as `StepSeeded` derives it:

  ```python
  step_seed = tfp_sgmcmc.random.fold_in(tf.constant([1, 2]), 10)
  ```
  """
  if alg is None:
    return tf.random.experimental.stateless_fold_in(seed, data)
  return tf.random.experimental.stateless_fold_in(seed, data, alg=alg)


def walk_seed(seed):
  """(next seed, this step's seed) of a seed carried through a loop, with no
  random-number op: SplitMix64 used as the generator it is, over the seed's
  64 bits (state += gamma; output mix64(state)).

  The step seeds of one walk are consecutive SplitMix64 outputs; walks from
  two starting seeds share a state only if the starts lie within a loop's
  length of gammas of each other (probability about T / 2^64 for T steps).
  AMAGOLD's leapfrog loop carries its seed this way rather than by a
  threefry split per gradient.

  Args:
    seed: the carried stateless int32[2] seed.

  Returns:
    (next seed, this step's seed), each an int32[2] tensor.

  ```python
  carried, step_seed = tfp_sgmcmc.random.walk_seed([1, 2])
  carried, next_step_seed = tfp_sgmcmc.random.walk_seed(carried)
  print(step_seed.numpy(), next_step_seed.numpy())
  ```
  """
  return _walk(tfp.random.sanitize_seed(seed))


@_one_call_op
def _walk(seed):
  state = tf.bitcast(seed, tf.uint64) + tf.constant(_splitmix.GAMMA,
                                                    tf.uint64)
  return (tf.bitcast(state, tf.int32),
          tf.bitcast(_splitmix.mix64(state), tf.int32))


def uniform_indices(seed, shape, maxval):
  """int32 indices uniform on [0, maxval), of `shape` (a list or an int32
  tensor), from one flat SplitMix64 draw: index = (w_hi * maxval) >> 32 for
  the high 32 bits w_hi of each word (Lemire's multiply-shift; each index
  has probability within maxval / 2^32 of 1 / maxval, as for TF's modulo
  reduction of 32 random bits).

  The minibatch indices of `InMemoryTarget` ([n] shared, or [chains, n] in
  one draw) and of every front end that draws as it does. Integer
  arithmetic only, so eager and XLA agree.

  Args:
    seed: a stateless int32[2] seed.
    shape: the shape of the draw, a list or an int32 tensor.
    maxval: the number of examples, a Python int.

  Returns:
    An int32 tensor of `shape`.

  ```python
  idx = tfp_sgmcmc.random.uniform_indices([1, 2], [4, 32], 1024)
  print(idx.shape, idx.numpy().max() < 1024)  # (4, 32) True
  ```
  """
  static = _static_shape(shape)
  if static is not None:
    return _indices_of_shape(tfp.random.sanitize_seed(seed), shape=static,
                             maxval=int(maxval))
  return _splitmix.indices(
      seed, tf.cast(shape, tf.int32) if tf.is_tensor(shape) else shape,
      maxval)


_indices_of_shape = _one_call_op(
    lambda seed, shape, maxval: _splitmix.indices(seed, list(shape), maxval))


def philox_indices(seed, shape, maxval):
  """int32 indices uniform on [0, maxval) from TF's Philox
  (`tf.random.stateless_uniform`): `TFRecordTarget`'s record draws and
  `ShardedTarget`'s per-shard draws.

  Args:
    seed: a stateless int32[2] seed.
    shape: the shape of the draw.
    maxval: the exclusive upper bound.

  Returns:
    An int32 tensor of `shape`.

  ```python
  print(tfp_sgmcmc.random.philox_indices([1, 2], [8], 100).shape)  # (8,)
  ```
  """
  return _philox(tfp.random.sanitize_seed(seed), shape, tf.int32,
                 "uniform", maxval=maxval)


def philox_uniform(shape, seed, dtype=tf.float32):
  """U(0, 1) draws from TF's Philox, for a few scalars per step.

  Args:
    shape: the shape of the draw.
    seed: a stateless int32[2] seed.
    dtype: a float dtype.

  Returns:
    A tensor of `shape` and `dtype`.

  ```python
  print(tfp_sgmcmc.random.philox_uniform([3], [1, 2]).shape)  # (3,)
  ```
  """
  return _philox(seed, shape, dtype, "uniform")


def philox_normal(shape, seed, dtype=tf.float32):
  """N(0, 1) draws from TF's Philox.

  Args:
    shape: the shape of the draw.
    seed: a stateless int32[2] seed.
    dtype: a float dtype.

  Returns:
    A tensor of `shape` and `dtype`.

  ```python
  print(tfp_sgmcmc.random.philox_normal([3], [1, 2], tf.float64).dtype)
  ```
  """
  return _philox(seed, shape, dtype, "normal")


def _philox_draw(seed, shape, dtype, law, **bounds):
  if law == "normal":
    return tf.random.stateless_normal(shape, seed=seed, dtype=dtype,
                                      alg=RNG_ALG)
  return tf.random.stateless_uniform(shape, seed=seed, dtype=dtype,
                                     alg=RNG_ALG, **bounds)


_philox_of_shape = _one_call_op(
    lambda seed, shape, **static: _philox_draw(seed, list(shape), **static))


def _philox(seed, shape, dtype, law, **bounds):
  """TF's stateless Philox draw of `law`; one call op when `shape` is
  known while tracing."""
  static = _static_shape(shape)
  if static is None or not all(isinstance(b, (int, float))
                               for b in bounds.values()):
    return _philox_draw(seed, shape, dtype, law, **bounds)
  return _philox_of_shape(seed, shape=static, dtype=tf.as_dtype(dtype),
                          law=law, **bounds)


def _flat_draws(structure, seed, draw):
  """One flat draw per dtype for all parts of `structure`, split and
  reshaped into the parts. `draw(seed, n, dtype, one_reader)` -> n values
  (`one_reader`: one fusion reads the result, which is neither split into
  several parts nor read by `_splitmix.computed_once`'s two readers).

  A draw that fills a part of two or more dimensions is first computed
  flat, into a buffer (`_splitmix.computed_once`): fused into the
  consumer's loop over, e.g., a [64, 20] state, the transform ran in short
  rows that vectorise badly. A flat state, where the extra pass would only
  cost, is left fused."""
  parts = tf.nest.flatten(structure)
  out = [None] * len(parts)
  dtypes = []
  for p in parts:
    if p.dtype not in dtypes:
      dtypes.append(p.dtype)
  for j, dtype in enumerate(dtypes):
    idx = [i for i, p in enumerate(parts) if p.dtype == dtype]
    sizes = [tf.size(parts[i], out_type=tf.int64) for i in idx]
    group_seed = seed if j == 0 else _salted(seed, j, _GROUP_SALTS)[-1]
    computed_flat = any(parts[i].shape.rank != 1 for i in idx)
    total = [parts[i].shape.num_elements() for i in idx]
    flags = dict(dtype=dtype, draw=draw, one_reader=len(idx) == 1 or
                 computed_flat, computed_flat=computed_flat)
    flat = (_splitmix.flat_draw(group_seed, tf.add_n(sizes), **flags)
            if None in total else
            _flat_draw_of_size(group_seed, n=sum(total), **flags))
    pieces = [flat] if len(idx) == 1 else tf.split(flat, tf.stack(sizes))
    for i, piece in zip(idx, pieces):
      out[i] = tf.reshape(piece, tf.shape(parts[i]))
  return tf.nest.pack_sequence_as(structure, out)


_flat_draw_of_size = _one_call_op(
    lambda seed, n, **flags: _splitmix.flat_draw(
        seed, tf.constant(n, tf.int64), **flags))


def standard_normal_like(structure, seed):
  """Independent N(0, 1) draws shaped like `structure`, from a stateless seed.

  All parts of the same dtype come from one flat draw: SplitMix64 words
  keyed by `seed`, each turned into a uniform u on a symmetric grid in
  (-1, 1) and then into sqrt(2) erfinv(u) (the inverse-CDF transform XLA
  uses for its own normals; |z| <= 5.3 in float32, 8.1 in float64).

  Args:
    structure: a structure of tensors (their shapes and dtypes are used).
    seed: a stateless int32[2] seed.

  Returns:
    Draws in the structure, shapes and dtypes of `structure`.

  ```python
  noise = tfp_sgmcmc.random.standard_normal_like(
      [tf.zeros([4, 2]), tf.zeros([3], tf.float64)], [1, 2])
  print([z.shape for z in noise], noise[1].dtype)
  ```
  """
  return _flat_draws(structure, seed, _splitmix.normal)


def uniform_like(structure, seed):
  """Independent U(0, 1) draws shaped like `structure`, from a stateless
  seed (one flat SplitMix64 draw per dtype, as `standard_normal_like`),
  on a grid symmetric about 1/2, never 0 or 1.

  Args:
    structure: a structure of tensors (their shapes and dtypes are used).
    seed: a stateless int32[2] seed.

  Returns:
    Draws in (0, 1) in the structure, shapes and dtypes of `structure`.

  ```python
  u = tfp_sgmcmc.random.uniform_like(tf.zeros([4, 2]), [1, 2])
  print(u.shape)  # (4, 2)
  ```
  """
  return _flat_draws(structure, seed, _splitmix.uniform)
