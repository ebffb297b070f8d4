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

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

__all__ = ["StepSeeded", "StepSeededResults", "save_chain", "load_chain"]


class StepSeededResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("StepSeededResults",
                           ["inner_results", "step", "base_seed"])):
  """Results of `StepSeeded`: the inner results, the step counter and the
  chain's base seed."""
  __slots__ = ()


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
    seed = tfp.random.sanitize_seed(seed)
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
    step_seed = tf.random.experimental.stateless_fold_in(prev.base_seed,
                                                         prev.step)
    state, inner = self.inner_kernel.one_step(
        current_state, prev.inner_results, seed=step_seed)
    return state, StepSeededResults(inner_results=inner, step=prev.step + 1,
                                    base_seed=prev.base_seed)

  def bootstrap_results(self, init_state):
    return StepSeededResults(
        inner_results=self.inner_kernel.bootstrap_results(init_state),
        step=tf.constant(0, tf.int32),
        base_seed=tf.convert_to_tensor(self.seed, tf.int32))


def save_chain(path, state, kernel_results):
  """Saves the chain's state and kernel results, exactly, to `path` (.npz)."""
  leaves = tf.nest.flatten((state, kernel_results))
  arrays = {}
  for i, leaf in enumerate(leaves):
    arrays[f"leaf_{i:05d}"] = np.asarray(leaf)
  tmp = path + ".tmp.npz"
  np.savez(tmp, **arrays)
  os.replace(tmp, path)  # A crash mid-write never leaves half a checkpoint.
  return path


def load_chain(path, results_template, state_template=None):
  """Loads (state, kernel_results) saved by `save_chain`.

  Args:
    path: the .npz file.
    results_template: kernel results of the same kernel, e.g.
      `kernel.bootstrap_results(init_state)`, giving the structure.
    state_template: a state of the same structure (default: inferred from
      the number of saved tensors when the state is one tensor).
  """
  with np.load(path) as data:
    arrays = [data[k] for k in sorted(data.files)]
  results_leaves = tf.nest.flatten(results_template)
  if state_template is None:
    num_state = len(arrays) - len(results_leaves)
    if num_state < 1:
      raise ValueError(f"{path} holds {len(arrays)} tensors, fewer than the "
                       f"{len(results_leaves)} of `results_template`: it was "
                       "saved from another kernel.")
    state_template = (tf.zeros([]) if num_state == 1 else
                      [tf.zeros([])] * num_state)
  template = (state_template, results_template)
  leaves = tf.nest.flatten(template)
  if len(leaves) != len(arrays):
    raise ValueError(f"{path} holds {len(arrays)} tensors but the templates "
                     f"have {len(leaves)}: it was saved from another kernel "
                     "or state structure.")
  for i, (a, t) in enumerate(zip(arrays, leaves)):
    t = tf.convert_to_tensor(t)
    if a.dtype != t.dtype.as_numpy_dtype:
      raise ValueError(f"{path}: tensor {i} has dtype {a.dtype}, the "
                       f"template's is {t.dtype.name}.")
  return tf.nest.pack_sequence_as(
      template, [tf.convert_to_tensor(a) for a in arrays])
