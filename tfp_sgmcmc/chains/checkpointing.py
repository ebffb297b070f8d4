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

`StepSeeded` and `StepSeededResults` are defined in `step_seeded`, what the
header says about the writer in `checkpoint_header`; both are importable
from here.
"""

import json
import os
import warnings
import zipfile
import zlib

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import _files as files
from tfp_sgmcmc.chains import checkpoint_header as header_lib
from tfp_sgmcmc.chains.checkpoint_header import kernel_summary
from tfp_sgmcmc.chains.step_seeded import StepSeeded
from tfp_sgmcmc.chains.step_seeded import StepSeededResults
from tfp_sgmcmc.kernels import results_guard

__all__ = ["StepSeeded", "StepSeededResults", "save_chain", "load_chain"]


# A checkpoint is an .npz (zip) of one .npy entry per tensor, `leaf_00000.npy`
# ... in tf.nest order of (state, kernel_results), and `header.npy`: a JSON
# string with what wrote it (format 2; format 1 files have no header).

FORMAT_VERSION = 2
# Bounds on what is read before any check: the JSON header, an .npy header.
_MAX_HEADER_BYTES = 1 << 24
_MAX_NPY_HEADER_BYTES = 1 << 16


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
  paths = (header_lib.field_paths(state, "state") +
           header_lib.field_paths(kernel_results, "results"))
  leaves = header_lib.leaves((state, kernel_results))
  arrays = {}
  for i, leaf in enumerate(leaves):
    arrays[f"leaf_{i:05d}"] = np.asarray(leaf)
  seeds = [arrays[f"leaf_{i:05d}"].tolist()
           for i in header_lib.seed_paths(paths)]
  header = dict(format_version=FORMAT_VERSION, fields=paths,
                num_state_leaves=len(header_lib.leaves(state)),
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


def load_chain(path, results_template, state_template=None, *, kernel=None,
               allow_other_kernel=False, reseed=False):
  """Loads (state, kernel_results) saved by `save_chain`.

  Args:
    path: the .npz file.
    results_template: kernel results of the same kernel, e.g.
      `kernel.bootstrap_results(init_state)`, giving the structure.
    state_template: a state of the same structure (default: the saved
      state's dtypes and shapes, as one tensor, a dict of the saved keys
      or a list).
    kernel: the kernel that will continue the chain. When the checkpoint
      was saved with `kernel=`, its class and parameters must be the same.
      The loaded state and results are then checked with
      `check_kernel_results` (one full-data energy per value the results
      cache from the target, e.g. AMAGOLD's U(theta); none for minibatch
      kernels): results of another target (other data) are refused.
    allow_other_kernel: continue with a `kernel` of another class or other
      parameters anyway, and with results of another type that have the
      same fields (each kernel class has its own results type, so a
      checkpoint of another kernel is refused even without `kernel=`).
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
      kernel or seed are not the templates' (each named in the message),
      or its results cache another target's value than `kernel`'s.
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
      state, results = _load(archive, path, results_template,
                             state_template, kernel, allow_other_kernel,
                             reseed)
    except (_Corrupt, zipfile.BadZipFile, OSError, EOFError,
            NotImplementedError, KeyError, UnicodeDecodeError,
            json.JSONDecodeError, zlib.error) as e:
      raise ValueError(
          f"`path` = {path!r} is not a complete checkpoint written by "
          f"save_chain (truncated or corrupt: {type(e).__name__}: {e}); "
          "load an earlier checkpoint.") from e
  if kernel is not None:
    # The kernel's class and parameters name its target by type only: a
    # value the results cache from the target that wrote them (AMAGOLD's
    # full-data U(theta)) is compared with this target's at the state,
    # once, or the next steps would test against a stale energy.
    try:
      results_guard.check_kernel_results(kernel, state, results,
                                         "kernel_results")
    except ValueError as e:
      raise ValueError(f"{path} cannot continue with `kernel`: {e}") from e
  return state, results


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


def _saved_state_structure(header, num_state):
  """A template of the saved state's structure where `load_chain` has
  none: a dict of the keys the header names for a state that was a dict
  (a list in sorted key order would call a model's parts by position),
  else one tensor or a list."""
  paths = list((header or {}).get("fields") or [])[:num_state]
  keys = [p[len("state/"):] for p in paths]
  if (header is not None and len(keys) == num_state and
      int(header.get("num_state_leaves", -1)) == num_state and
      all(p.startswith("state/") for p in paths) and
      all(k and "/" not in k and not k.isdigit() for k in keys)):
    return {k: tf.zeros([]) for k in keys}
  return tf.zeros([]) if num_state == 1 else [tf.zeros([])] * num_state


def _load(archive, path, results_template, state_template, kernel,
          allow_other_kernel, reseed):
  infos = {info.filename: info for info in archive.infolist()}
  header = _read_header(archive, infos, path)
  names = sorted(n for n in infos if n.startswith("leaf_")
                 and n.endswith(".npy"))
  results_leaves = header_lib.leaves(results_template)
  if state_template is None:
    num_state = len(names) - len(results_leaves)
    if num_state < 1:
      raise ValueError(f"{path} holds {len(names)} tensors, fewer than the "
                       f"{len(results_leaves)} of `results_template`: it was "
                       "saved from another kernel.")
    state_template = _saved_state_structure(header, num_state)
    check_state_shapes = False
  else:
    check_state_shapes = True
  template = (state_template, results_template)
  leaves = header_lib.leaves(template)
  if len(leaves) != len(names):
    raise ValueError(f"{path} holds {len(names)} tensors but the templates "
                     f"have {len(leaves)}: it was saved from another kernel "
                     "or state structure.")
  num_state_leaves = len(header_lib.leaves(state_template))
  # Shapes and dtypes from the .npy headers, before any data is read: a
  # file of other (or crafted) shapes costs nothing to refuse.
  for i, (name, t) in enumerate(zip(names, leaves)):
    shape, dtype = _npy_header(archive, infos[name])
    t = tf.convert_to_tensor(t)
    what = (f"`state_template` part {i}" if i < num_state_leaves else
            f"`results_template` tensor {i - num_state_leaves}")
    # Without a state template the state's dtypes are the file's.
    if (i >= num_state_leaves or check_state_shapes) and (
        dtype != t.dtype.as_numpy_dtype):
      raise ValueError(f"{path}: tensor {i} ({what}) has dtype {dtype}, "
                       f"the template's is {t.dtype.name}.")
    if (i >= num_state_leaves or check_state_shapes) and (
        not t.shape.is_compatible_with(shape)):
      raise ValueError(
          f"{path}: tensor {i} ({what}) has shape {list(shape)} but the "
          f"template's is {list(t.shape)}: the checkpoint was saved with "
          "another number of chains or parameter shapes; build the template "
          "(bootstrap_results) from a state of the saved shape.")
  mine = header_lib.field_paths(results_template, "results")
  if header is not None:
    saved = list(header.get("fields") or [])
    saved_results = saved[int(header.get("num_state_leaves", 0)):]
    header_lib.check_results_paths(path, header, saved_results, mine,
                                   kernel, allow_other_kernel)
    if check_state_shapes:
      saved_state = saved[:int(header.get("num_state_leaves", 0))]
      state_paths = header_lib.field_paths(state_template, "state")
      if saved_state != state_paths:
        raise ValueError(
            f"{path} holds a state of other parts than `state_template`: "
            f"{header_lib.differences(saved_state, state_paths)}.")
    header_lib.check_kernel(path, header, kernel, allow_other_kernel)
  arrays = [_read_npy(archive, infos[name]) for name in names]
  for j in header_lib.seed_paths(mine):
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
      template, [tf.convert_to_tensor(a) for a in arrays],
      expand_composites=True)
