"""Per-step seeds from the step index: `StepSeeded` gives step i of a chain
the seed fold_in(seed, i), from a counter kept in its results, so a chain
restored from its saved state and results (`checkpointing.save_chain`,
`load_chain`) continues exactly as if it had never stopped, bit for bit
(within one compilation mode: XLA and non-XLA kernels convert random bits
to floats differently). `tfp.mcmc.sample_chain(seed=s)` instead splits `s`
into one seed per step of that call, so a chain run as 2k + k steps in two
calls draws different noise from one run of 3k steps.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import random

__all__ = ["StepSeeded", "StepSeededResults"]


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
  # Checkpoints name the kernel by module and class (`kernel_summary`):
  # files saved with a StepSeeded kernel name its public home, and still
  # load.
  __module__ = "tfp_sgmcmc.chains.checkpointing"

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
