"""Resumable chains: per-step seeds from the step index, and saved results.

`tfp.mcmc.sample_chain(seed=s)` splits `s` into one seed per step of that
call, so a chain run as 2k + k steps in two calls draws different noise from
one run of 3k steps. `StepSeeded` instead derives step i's seed as
`fold_in(seed, i)` from a counter kept in its results: any chain restored
from its saved state and results continues exactly as if it had never
stopped, in the same process or a new one, bit for bit (within one
compilation mode: XLA and non-XLA kernels convert random bits to floats
differently).

    kernel = tfp_sgmcmc.StepSeeded(tfp_sgmcmc.SGHMC(...), seed=[1, 2])
    state, results = ..., kernel.bootstrap_results(init)
    samples, results = run(state, results)            # 2k steps
    tfp_sgmcmc.save_chain("ckpt.npz", samples[-1], results, kernel=kernel)
    # ... new process ...
    state, results = tfp_sgmcmc.load_chain(
        "ckpt.npz", kernel.bootstrap_results(init), init,
        kernel=kernel)                                 # then k more steps

`save_chain` / `load_chain` store every tensor of the state and of the
(nested) kernel results, momentum, adaptation state, thermostats, noise
estimates and step counters included, as exact bytes in one `.npz` file,
with what wrote them: the kernel's class and parameters, the results'
field paths and the chain's seed, which `load_chain` checks.
"""

import collections
import hashlib
import json
import os
import warnings
import zipfile
import zlib

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import _files as files
from tfp_sgmcmc import random

__all__ = ["StepSeeded", "StepSeededResults", "save_chain", "load_chain"]


class StepSeededResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("StepSeededResults",
                           ["inner_results", "step", "base_seed"])):
  """Results of `StepSeeded`.

  Attributes:
    inner_results: the results of the wrapped kernel.
    step: int32, the number of steps taken so far; step i uses the seed
      fold_in(base_seed, i).
    base_seed: the chain's stateless int32[2] seed (`StepSeeded`'s `seed`).
  """
  __slots__ = ()


def _check_seed(seed):
  """A stateless int32[2] seed, or a clear error (`StepSeeded` needs one:
  an int seed would make TFP's sanitize_seed draw a stateful one)."""
  if tf.is_tensor(seed):
    if not seed.dtype.is_integer or seed.shape.as_list() not in ([2], None):
      raise TypeError(f"`seed` must be a stateless int32[2] seed, e.g. "
                      f"[1, 2]; got a {seed.dtype.name} tensor of shape "
                      f"{seed.shape}.")
    return tfp.random.sanitize_seed(seed)
  values = np.asarray(seed) if isinstance(seed, (list, tuple, np.ndarray)) \
      else None
  if (values is None or values.shape != (2,) or
      not np.issubdtype(values.dtype, np.integer)):
    raise TypeError(f"`seed` must be a stateless int32[2] seed, e.g. [1, 2] "
                    f"(two integers); got {seed!r}.")
  return tfp.random.sanitize_seed(seed)


class StepSeeded(tfp.mcmc.TransitionKernel):
  """Gives step i of the chain the seed fold_in(seed, i).

  Wrap the outermost kernel (after any step-size adaptation) in it. The seed
  passed to `one_step` (e.g. by `sample_chain`) is ignored: the chain's noise
  depends only on `seed` and the step index, so a chain resumed from saved
  results is bit-identical to one that never stopped.

  Args:
    inner_kernel: the `tfp.mcmc.TransitionKernel` to drive.
    seed: the chain's stateless int32[2] seed, e.g. `[1, 2]` (an int is
      refused: it would make TFP draw a stateful seed).
    name: a name for the kernel (stored in its parameters).

  Returns:
    A `tfp.mcmc.TransitionKernel` whose results are `StepSeededResults`.

  #### Example

  Two runs of 10 + 10 steps give the draws of one run of 20, bit for bit:

  ```python
  kernel = tfp_sgmcmc.StepSeeded(tfp_sgmcmc.SGLD(target, step_size=1e-4),
                                 seed=[1, 2])
  init = tf.zeros([d])
  run = lambda n, state, results: tfp.mcmc.sample_chain(
      n, state, kernel=kernel, previous_kernel_results=results,
      trace_fn=None, return_final_kernel_results=True, seed=[0, 0])
  once = run(20, init, kernel.bootstrap_results(init))
  first = run(10, init, kernel.bootstrap_results(init))
  second = run(10, first.all_states[-1], first.final_kernel_results)
  np.testing.assert_array_equal(once.all_states[-1], second.all_states[-1])
  ```
  """

  def __init__(self, inner_kernel, seed, name=None):
    if not isinstance(inner_kernel, tfp.mcmc.TransitionKernel):
      raise TypeError("`inner_kernel` must be a tfp.mcmc.TransitionKernel; "
                      f"got {type(inner_kernel).__name__}.")
    seed = _check_seed(seed)
    self._parameters = dict(inner_kernel=inner_kernel, seed=seed, name=name)

  @property
  def inner_kernel(self):
    return self._parameters["inner_kernel"]

  @property
  def seed(self):
    return self._parameters["seed"]

  @property
  def parameters(self):
    return self._parameters

  @property
  def is_calibrated(self):
    return self.inner_kernel.is_calibrated

  def one_step(self, current_state, previous_kernel_results, seed=None):
    del seed  # The step index chooses the seed.
    prev = previous_kernel_results
    step_seed = random.fold_in(prev.base_seed, prev.step)
    state, inner = self.inner_kernel.one_step(
        current_state, prev.inner_results, seed=step_seed)
    return state, StepSeededResults(inner_results=inner, step=prev.step + 1,
                                    base_seed=prev.base_seed)

  def bootstrap_results(self, init_state):
    return StepSeededResults(
        inner_results=self.inner_kernel.bootstrap_results(init_state),
        step=tf.constant(0, tf.int32),
        base_seed=tf.convert_to_tensor(self.seed, tf.int32))


# --- Files ------------------------------------------------------------------
# A checkpoint is an .npz (zip) of one .npy entry per tensor, `leaf_00000.npy`
# ... in tf.nest order of (state, kernel_results), and `header.npy`: a JSON
# string with what wrote it (format 2; format 1 files have no header).

FORMAT_VERSION = 2
# Bounds on what is read before any check: the JSON header, an .npy header.
_MAX_HEADER_BYTES = 1 << 24
_MAX_NPY_HEADER_BYTES = 1 << 16


def _type_name(obj):
  return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _field_paths(structure, prefix):
  """One path per tf.nest leaf, naming each results type and field (e.g.
  `results/StepSeededResults.inner_results/SGHMCResults.momentum`), so that
  a checkpoint of another kernel, or with fields in another order, is told
  apart even when every shape and dtype agrees."""
  paths = []

  def walk(node, path):
    if isinstance(node, tuple) and hasattr(node, "_fields"):
      for field in node._fields:
        walk(getattr(node, field), f"{path}/{type(node).__name__}.{field}")
    elif isinstance(node, dict):
      for key in sorted(node):
        walk(node[key], f"{path}/{key}")
    elif isinstance(node, (list, tuple)):
      for i, item in enumerate(node):
        walk(item, f"{path}/{i}")
    else:
      paths.append(path)

  walk(structure, prefix)
  if len(paths) != len(tf.nest.flatten(structure)):
    # A structure tf.nest flattens its own way (attrs, composites): its
    # own paths, which still name every field.
    paths = [f"{prefix}/{p}" for p, _ in
             tf.nest.flatten_with_joined_string_paths(structure)]
  return paths


def _jsonable(value, depth=0):
  """A stable, JSON-able summary of a kernel parameter: numbers and strings
  as they are, small arrays by value, large ones by digest, kernels by
  class and parameters, anything else (targets, functions) by its type."""
  if depth > 8:
    return _type_name(value)
  if value is None or isinstance(value, (bool, int, str)):
    return value
  if isinstance(value, float):
    return value if np.isfinite(value) else repr(value)
  if isinstance(value, tfp.mcmc.TransitionKernel):
    return kernel_summary(value, depth + 1)
  if isinstance(value, (list, tuple)):
    return [_jsonable(v, depth + 1) for v in value]
  if isinstance(value, dict):
    return {str(k): _jsonable(v, depth + 1) for k, v in sorted(value.items())}
  if isinstance(value, (np.ndarray, np.generic)) or tf.is_tensor(value):
    try:
      array = np.asarray(value)
    except Exception:  # pylint: disable=broad-except
      return _type_name(value)  # A symbolic tensor: no value to compare.
    if array.size <= 64:
      values = array.ravel().tolist()
      if array.dtype.kind == "f":  # JSON has no inf or NaN.
        values = [v if np.isfinite(v) else repr(v) for v in values]
      elif array.dtype.kind not in "biu":
        values = [repr(v) for v in values]
      return dict(dtype=array.dtype.name, shape=list(array.shape),
                  value=values)
    return dict(dtype=array.dtype.name, shape=list(array.shape),
                sha256=hashlib.sha256(array.tobytes()).hexdigest())
  if callable(value) and hasattr(value, "__qualname__"):
    return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
  return _type_name(value)


def kernel_summary(kernel, depth=0):
  """The kernel's class and parameters as stored in a checkpoint: the
  seed and the name are left out (the seed is checked on its own)."""
  parameters = getattr(kernel, "parameters", None) or {}
  return {"class": _type_name(kernel),
          "parameters": {k: _jsonable(v, depth + 1)
                         for k, v in sorted(parameters.items())
                         if k not in ("seed", "name")}}


def _seed_paths(paths):
  return [i for i, p in enumerate(paths)
          if p.endswith("StepSeededResults.base_seed")]


def save_chain(path, state, kernel_results, kernel=None):
  """Saves the chain's state and kernel results, exactly, to `path` (.npz).

  Args:
    path: the file (str or os.PathLike).
    state: the chain's state (a tensor or a structure of tensors).
    kernel_results: the kernel's results at `state`.
    kernel: the kernel that made them. Its class and parameters are stored,
      so that `load_chain(..., kernel=...)` refuses a checkpoint of another
      kernel (e.g. `NaiveSGHMC` for `SGHMC`) or other parameters.

  Beside the tensors the file holds a format version, the field paths of
  the state and results (so fields in another order are refused, not
  swapped), the chain's seed (`StepSeeded`) and the kernel's summary.

  The file is written under a temporary name unique to this writer,
  flushed to disk (fsync), renamed over `path` and the directory entry is
  synced: a crash at any point leaves either the old checkpoint or the new
  one, never half a file. Temporaries left by killed writers of this host
  are removed; another live writer's never are.

  Returns:
    `path`, as a str.

  #### Example

  ```python
  kernel = tfp_sgmcmc.StepSeeded(tfp_sgmcmc.SGLD(target, step_size=1e-4),
                                 seed=[1, 2])
  init = tf.zeros([d])
  state, results = kernel.one_step(init, kernel.bootstrap_results(init))
  tfp_sgmcmc.save_chain("chain.npz", state, results, kernel=kernel)
  ```
  """
  if not isinstance(path, (str, bytes, os.PathLike)):
    raise TypeError(f"`path` must be a str or os.PathLike; got "
                    f"{type(path).__name__}.")
  if kernel is not None and not isinstance(kernel, tfp.mcmc.TransitionKernel):
    raise TypeError("`kernel` must be the tfp.mcmc.TransitionKernel that made "
                    f"`kernel_results`; got {type(kernel).__name__}.")
  path = os.fsdecode(os.fspath(path))
  paths = (_field_paths(state, "state") +
           _field_paths(kernel_results, "results"))
  leaves = tf.nest.flatten((state, kernel_results))
  arrays = {}
  for i, leaf in enumerate(leaves):
    arrays[f"leaf_{i:05d}"] = np.asarray(leaf)
  seeds = [arrays[f"leaf_{i:05d}"].tolist() for i in _seed_paths(paths)]
  header = dict(format_version=FORMAT_VERSION, fields=paths,
                num_state_leaves=len(tf.nest.flatten(state)),
                seed=seeds or None,
                kernel=None if kernel is None else kernel_summary(kernel))
  arrays["header"] = np.array(json.dumps(header, sort_keys=True))
  return files.atomic_write(path, lambda f: np.savez(f, **arrays))


class _Corrupt(Exception):
  """A checkpoint entry that save_chain cannot have written."""


def _npy_header(archive, info):
  """(shape, dtype, header bytes) of one .npy entry, from its first bytes
  only: nothing of the data is decompressed."""
  if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
    raise _Corrupt(f"entry {info.filename!r} uses zip compression method "
                   f"{info.compress_type}, which save_chain never writes")
  with archive.open(info) as f:
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
      shape, fortran, dtype = np.lib.format.read_array_header_1_0(
          f, max_header_size=_MAX_NPY_HEADER_BYTES)
    elif version == (2, 0):
      shape, fortran, dtype = np.lib.format.read_array_header_2_0(
          f, max_header_size=_MAX_NPY_HEADER_BYTES)
    else:
      raise _Corrupt(f"entry {info.filename!r} has .npy version {version}")
    offset = f.tell()
  if dtype.hasobject:
    raise _Corrupt(f"entry {info.filename!r} holds Python objects ({dtype})")
  if fortran and len(shape) > 1:
    raise _Corrupt(f"entry {info.filename!r} is in Fortran order")
  expected = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
  if info.file_size != expected:
    raise _Corrupt(f"entry {info.filename!r} declares {info.file_size} "
                   f"bytes, but its .npy header ({dtype}, shape "
                   f"{list(shape)}) needs {expected}")
  return tuple(shape), dtype


def _read_npy(archive, info):
  with archive.open(info) as f:
    return np.lib.format.read_array(f, allow_pickle=False)


def _differences(saved, mine):
  """The entries of two equal-length lists that differ, as text."""
  return "; ".join(f"{i}: {a!r} (file) vs {b!r} (template)"
                   for i, (a, b) in enumerate(zip(saved, mine)) if a != b)


def _dict_differences(saved, mine):
  keys = sorted(set(saved) | set(mine))
  return {k: (saved.get(k, "<absent>"), mine.get(k, "<absent>"))
          for k in keys if saved.get(k) != mine.get(k)}


def _check_kernel(path, header, kernel, allow_other_kernel):
  saved = header.get("kernel")
  if kernel is None:
    if saved is not None:
      warnings.warn(
          f"{path} was written by {saved['class']}; pass `kernel=` to "
          "load_chain to check that the chain continues with the same "
          "kernel class and parameters.", UserWarning, stacklevel=3)
    return
  mine = kernel_summary(kernel)
  if saved is None:
    warnings.warn(
        f"{path} was saved without `kernel=`: load_chain cannot check that "
        f"it was written by a {mine['class']} with the same parameters. "
        "Pass `kernel=` to save_chain.", UserWarning, stacklevel=3)
    return
  if saved == mine or allow_other_kernel:
    return
  diffs = _dict_differences(_flat(saved), _flat(mine))
  classes = {k: v for k, v in diffs.items() if k.endswith("class")}
  if classes:
    raise ValueError(
        f"{path} was written by another kernel, (file, `kernel`): "
        f"{classes}. Its results mean other things even where their shapes "
        "agree. Load it with the kernel that wrote it, or pass "
        "allow_other_kernel=True to continue the chain with this kernel "
        "anyway.")
  raise ValueError(
      f"{path} was written by a {saved['class'].rsplit('.', 1)[-1]} with "
      f"other parameters, (file, `kernel`): {diffs}. Build the kernel with "
      "the checkpoint's parameters, or pass allow_other_kernel=True to "
      "continue the chain with the new ones.")


def _flat(summary, prefix=""):
  """A kernel summary as {dotted name: value}: nested kernels' classes and
  parameters side by side, so a difference names where it is."""
  out = {}
  for key, value in summary.items():
    name = f"{prefix}{key}"
    if key == "parameters" and isinstance(value, dict):
      for k, v in value.items():
        if isinstance(v, dict) and "class" in v and "parameters" in v:
          out.update(_flat(v, f"{prefix}{k}."))
        else:
          out[f"{prefix}{k}"] = v
    else:
      out[name] = value
  return out


def load_chain(path, results_template, state_template=None, *, kernel=None,
               allow_other_kernel=False, reseed=False):
  """Loads (state, kernel_results) saved by `save_chain`.

  Args:
    path: the .npz file.
    results_template: kernel results of the same kernel, e.g.
      `kernel.bootstrap_results(init_state)`, giving the structure.
    state_template: a state of the same structure (default: inferred from
      the number of saved tensors when the state is one tensor).
    kernel: the kernel that will continue the chain. When the checkpoint
      was saved with `kernel=`, its class and parameters must be the same.
    allow_other_kernel: continue with a `kernel` of another class or other
      parameters anyway.
    reseed: the chain's seed (`StepSeeded`) in the file must be the one in
      `results_template`; True continues with the template's seed instead.

  Before any data is read, every tensor's dtype and shape are read from
  the file's .npy headers and must be the template's (the shape where the
  template's is known, e.g. the same number of chains); then the field
  paths (the results' types and fields, in order) must be the template's.
  Files written before format version 2 (no header) load with a warning.

  Returns:
    `(state, kernel_results)` as saved, as tensors in the templates'
    structures: pass them to `tfp.mcmc.sample_chain(...,
    previous_kernel_results=kernel_results)` to continue the chain.

  Raises:
    ValueError: the file is truncated or corrupt, or its tensors, fields,
      kernel or seed are not the templates' (each named in the message).
    FileNotFoundError: no file at `path`.

  #### Example

  Save a chain after one step and continue it from the file:

  ```python
  kernel = tfp_sgmcmc.StepSeeded(tfp_sgmcmc.SGLD(target, step_size=1e-4),
                                 seed=[1, 2])
  init = tf.zeros([d])
  state, results = kernel.one_step(init, kernel.bootstrap_results(init))
  tfp_sgmcmc.save_chain("chain.npz", state, results, kernel=kernel)

  state, results = tfp_sgmcmc.load_chain(
      "chain.npz", kernel.bootstrap_results(init), init, kernel=kernel)
  samples = tfp.mcmc.sample_chain(5, state, kernel=kernel,
                                  previous_kernel_results=results,
                                  trace_fn=None, seed=[0, 0])
  print(int(results.step))   # 1: the next step uses fold_in(seed, 1)
  ```
  """
  if not isinstance(path, (str, bytes, os.PathLike)):
    raise TypeError(f"`path` must be a str or os.PathLike; got "
                    f"{type(path).__name__}.")
  if kernel is not None and not isinstance(kernel, tfp.mcmc.TransitionKernel):
    raise TypeError("`kernel` must be the tfp.mcmc.TransitionKernel that "
                    f"continues the chain; got {type(kernel).__name__}.")
  path = os.fsdecode(os.fspath(path))
  try:
    archive = zipfile.ZipFile(path)
  except FileNotFoundError as e:
    raise FileNotFoundError(f"`path` = {path!r}: no such checkpoint file "
                            "(written by save_chain).") from e
  except (zipfile.BadZipFile, ValueError, OSError, EOFError,
          NotImplementedError) as e:
    raise ValueError(
        f"`path` = {path!r} is not a complete checkpoint written by "
        f"save_chain (truncated or corrupt: {type(e).__name__}: {e}); load "
        "an earlier checkpoint.") from e
  with archive:
    try:
      return _load(archive, path, results_template, state_template, kernel,
                   allow_other_kernel, reseed)
    except (_Corrupt, zipfile.BadZipFile, OSError, EOFError,
            NotImplementedError, KeyError, UnicodeDecodeError,
            json.JSONDecodeError, zlib.error) as e:
      raise ValueError(
          f"`path` = {path!r} is not a complete checkpoint written by "
          f"save_chain (truncated or corrupt: {type(e).__name__}: {e}); "
          "load an earlier checkpoint.") from e


def _read_header(archive, infos, path):
  info = infos.get("header.npy")
  if info is None:
    warnings.warn(
        f"{path} was written by an older save_chain (format version 1, no "
        "header): the kernel, the order of the results' fields and the "
        "chain's seed cannot be checked. Save it again with "
        "save_chain(..., kernel=kernel) to store them.", UserWarning,
        stacklevel=4)
    return None
  shape, dtype = _npy_header(archive, info)
  if shape != () or dtype.kind != "U" or info.file_size > _MAX_HEADER_BYTES:
    raise _Corrupt(f"its header entry is a {dtype} array of shape "
                   f"{list(shape)}, not a JSON string")
  header = json.loads(str(_read_npy(archive, info)))
  if not isinstance(header, dict) or not isinstance(
      header.get("format_version"), int):
    raise _Corrupt("its header has no format version")
  if header["format_version"] > FORMAT_VERSION:
    raise ValueError(
        f"{path} has checkpoint format version {header['format_version']}, "
        f"newer than this tfp_sgmcmc's ({FORMAT_VERSION}): load it with the "
        "version that wrote it.")
  return header


def _load(archive, path, results_template, state_template, kernel,
          allow_other_kernel, reseed):
  infos = {info.filename: info for info in archive.infolist()}
  header = _read_header(archive, infos, path)
  names = sorted(n for n in infos if n.startswith("leaf_")
                 and n.endswith(".npy"))
  results_leaves = tf.nest.flatten(results_template)
  if state_template is None:
    num_state = len(names) - len(results_leaves)
    if num_state < 1:
      raise ValueError(f"{path} holds {len(names)} tensors, fewer than the "
                       f"{len(results_leaves)} of `results_template`: it was "
                       "saved from another kernel.")
    state_template = (tf.zeros([]) if num_state == 1 else
                      [tf.zeros([])] * num_state)
    check_state_shapes = False
  else:
    check_state_shapes = True
  template = (state_template, results_template)
  leaves = tf.nest.flatten(template)
  if len(leaves) != len(names):
    raise ValueError(f"{path} holds {len(names)} tensors but the templates "
                     f"have {len(leaves)}: it was saved from another kernel "
                     "or state structure.")
  num_state_leaves = len(tf.nest.flatten(state_template))
  # Shapes and dtypes from the .npy headers, before any data is read: a
  # file of other (or crafted) shapes costs nothing to refuse.
  for i, (name, t) in enumerate(zip(names, leaves)):
    shape, dtype = _npy_header(archive, infos[name])
    t = tf.convert_to_tensor(t)
    what = (f"`state_template` part {i}" if i < num_state_leaves else
            f"`results_template` tensor {i - num_state_leaves}")
    if dtype != t.dtype.as_numpy_dtype:
      raise ValueError(f"{path}: tensor {i} ({what}) has dtype {dtype}, "
                       f"the template's is {t.dtype.name}.")
    if (i >= num_state_leaves or check_state_shapes) and (
        not t.shape.is_compatible_with(shape)):
      raise ValueError(
          f"{path}: tensor {i} ({what}) has shape {list(shape)} but the "
          f"template's is {list(t.shape)}: the checkpoint was saved with "
          "another number of chains or parameter shapes; build the template "
          "(bootstrap_results) from a state of the saved shape.")
  mine = _field_paths(results_template, "results")
  if header is not None:
    saved = list(header.get("fields") or [])
    saved_results = saved[int(header.get("num_state_leaves", 0)):]
    if saved_results != mine:
      raise ValueError(
          f"{path} holds results with other fields than "
          f"`results_template` (another kernel, or fields in another "
          f"order): {_differences(saved_results, mine)}. Load it with "
          "the kernel that wrote it.")
    if check_state_shapes:
      saved_state = saved[:int(header.get("num_state_leaves", 0))]
      state_paths = _field_paths(state_template, "state")
      if saved_state != state_paths:
        raise ValueError(
            f"{path} holds a state of other parts than `state_template`: "
            f"{_differences(saved_state, state_paths)}.")
    _check_kernel(path, header, kernel, allow_other_kernel)
  arrays = [_read_npy(archive, infos[name]) for name in names]
  for j in _seed_paths(mine):
    i = num_state_leaves + j
    saved_seed = arrays[i]
    template_seed = np.asarray(leaves[i])
    if np.array_equal(saved_seed, template_seed):
      continue
    if not reseed:
      raise ValueError(
          f"{path} continues the chain with seed {saved_seed.tolist()} "
          f"(file), but `results_template` has seed "
          f"{template_seed.tolist()} (its kernel's): the chain would "
          "silently keep the file's. Build the kernel with the file's seed, "
          "or pass reseed=True to continue with the template's.")
    arrays[i] = template_seed.astype(saved_seed.dtype)
  return tf.nest.pack_sequence_as(
      template, [tf.convert_to_tensor(a) for a in arrays])
