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
    tfp_sgmcmc.save_chain("ckpt.npz", samples[-1], results)
    # ... new process ...
    state, results = tfp_sgmcmc.load_chain(
        "ckpt.npz", kernel.bootstrap_results(init))  # then k more steps

`save_chain` / `load_chain` store every tensor of the state and of the
(nested) kernel results, momentum, adaptation state, thermostats, noise
estimates and step counters included, as exact bytes in one `.npz` file.
"""

import collections
import os
import zipfile

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import random

__all__ = ["StepSeeded", "StepSeededResults", "save_chain", "load_chain"]


class StepSeededResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("StepSeededResults",
                           ["inner_results", "step", "base_seed"])):
  """Results of `StepSeeded`: the inner results, the step counter and the
  chain's base seed."""
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
    inner_kernel: the kernel to drive.
    seed: the chain's stateless int32[2] seed.
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


def _stale_temporaries(path):
  directory = os.path.dirname(os.path.abspath(path))
  prefix = os.path.basename(path) + ".tmp"
  try:
    names = os.listdir(directory)
  except OSError:
    return []
  return [os.path.join(directory, n) for n in names
          if n.startswith(prefix) and n.endswith(".npz")]


def save_chain(path, state, kernel_results):
  """Saves the chain's state and kernel results, exactly, to `path` (.npz).

  The file is written under a temporary name, flushed to disk (fsync) and
  then renamed over `path`, and the directory entry is synced: a crash at
  any point leaves either the old checkpoint or the new one, never half a
  file. Temporaries left by a process killed mid-write are removed here.
  """
  if not isinstance(path, (str, bytes, os.PathLike)):
    raise TypeError(f"`path` must be a str or os.PathLike; got "
                    f"{type(path).__name__}.")
  path = os.fsdecode(os.fspath(path))
  leaves = tf.nest.flatten((state, kernel_results))
  arrays = {}
  for i, leaf in enumerate(leaves):
    arrays[f"leaf_{i:05d}"] = np.asarray(leaf)
  for stale in _stale_temporaries(path):
    try:
      os.remove(stale)
    except OSError:
      pass
  tmp = f"{path}.tmp{os.getpid()}.npz"
  try:
    with open(tmp, "wb") as f:
      np.savez(f, **arrays)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)  # Atomic: never half a checkpoint at `path`.
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
  try:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
      os.fsync(fd)  # The rename itself survives a power loss.
    finally:
      os.close(fd)
  except OSError:
    pass  # Some file systems cannot sync a directory.
  return path


def load_chain(path, results_template, state_template=None):
  """Loads (state, kernel_results) saved by `save_chain`.

  Args:
    path: the .npz file.
    results_template: kernel results of the same kernel, e.g.
      `kernel.bootstrap_results(init_state)`, giving the structure.
    state_template: a state of the same structure (default: inferred from
      the number of saved tensors when the state is one tensor).

  Every saved tensor must have the template's dtype and, where the
  template's shape is known, its shape (e.g. the same number of chains).
  """
  if not isinstance(path, (str, bytes, os.PathLike)):
    raise TypeError(f"`path` must be a str or os.PathLike; got "
                    f"{type(path).__name__}.")
  path = os.fsdecode(os.fspath(path))
  try:
    with np.load(path) as data:
      arrays = [data[k] for k in sorted(data.files)]
  except FileNotFoundError as e:
    raise FileNotFoundError(f"`path` = {path!r}: no such checkpoint file "
                            "(written by save_chain).") from e
  except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
    raise ValueError(
        f"`path` = {path!r} is not a complete checkpoint written by "
        f"save_chain (truncated or corrupt: {type(e).__name__}: {e}); load "
        "an earlier checkpoint.") from e
  results_leaves = tf.nest.flatten(results_template)
  if state_template is None:
    num_state = len(arrays) - len(results_leaves)
    if num_state < 1:
      raise ValueError(f"{path} holds {len(arrays)} tensors, fewer than the "
                       f"{len(results_leaves)} of `results_template`: it was "
                       "saved from another kernel.")
    state_template = (tf.zeros([]) if num_state == 1 else
                      [tf.zeros([])] * num_state)
    check_state_shapes = False
  else:
    check_state_shapes = True
  template = (state_template, results_template)
  leaves = tf.nest.flatten(template)
  if len(leaves) != len(arrays):
    raise ValueError(f"{path} holds {len(arrays)} tensors but the templates "
                     f"have {len(leaves)}: it was saved from another kernel "
                     "or state structure.")
  num_state_leaves = len(tf.nest.flatten(state_template))
  for i, (a, t) in enumerate(zip(arrays, leaves)):
    t = tf.convert_to_tensor(t)
    what = (f"`state_template` part {i}" if i < num_state_leaves else
            f"`results_template` tensor {i - num_state_leaves}")
    if a.dtype != t.dtype.as_numpy_dtype:
      raise ValueError(f"{path}: tensor {i} ({what}) has dtype {a.dtype}, "
                       f"the template's is {t.dtype.name}.")
    if (i >= num_state_leaves or check_state_shapes) and (
        not t.shape.is_compatible_with(a.shape)):
      raise ValueError(
          f"{path}: tensor {i} ({what}) has shape {list(a.shape)} but the "
          f"template's is {list(t.shape)}: the checkpoint was saved with "
          "another number of chains or parameter shapes; build the template "
          "(bootstrap_results) from a state of the saved shape.")
  return tf.nest.pack_sequence_as(
      template, [tf.convert_to_tensor(a) for a in arrays])
