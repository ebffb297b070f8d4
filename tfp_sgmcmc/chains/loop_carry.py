"""Kernel results carried through a while loop with each distribution in
them (a kernel's `momentum_distribution`) as its component tensors.

TensorFlow's while loop flattens and rebuilds a composite tensor held in
its loop variables several times while it traces the loop, and rebuilding
a TFP distribution runs its constructor and recomputes its type spec. For
the distribution a mass matrix puts in a kernel's results (a joint
distribution of a batch broadcast of a transformed precision-form normal)
that was most of the work of tracing a chain of a small model. Carried as
its tensors, the distribution is rebuilt once per trace of the loop's
body, and the loop computes what it computed before, bit for bit: the same
tensors are its loop variables.

```python
results, held, layout = loop_carry.split(kernel.bootstrap_results(state))

def body(i, state, results, held):
  state, results = kernel.one_step(
      state, loop_carry.join(results, held, layout), seed=[i, 0])
  results, held, _ = loop_carry.split(results)
  return i + 1, state, results, held
```
"""

import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["split", "join", "Carrying"]


def _paths(results, prefix=()):
  """The paths (tuples of field names) to the distributions in `results`."""
  found = []
  for name in getattr(results, "_fields", ()):
    value = getattr(results, name)
    if isinstance(value, tfp.distributions.Distribution):
      found.append(prefix + (name,))
    else:
      found += _paths(value, prefix + (name,))
  return found


def _get(results, path):
  for name in path:
    results = getattr(results, name)
  return results


def _replaced(results, path, value):
  name = path[0]
  if len(path) > 1:
    value = _replaced(getattr(results, name), path[1:], value)
  return results._replace(**{name: value})


def split(results):
  """(`results` with each distribution field emptied, each distribution's
  component tensors, the layout `join` rebuilds them with)."""
  paths = _paths(results)
  distributions = [_get(results, path) for path in paths]
  for path in paths:
    results = _replaced(results, path, ())
  held = [tf.nest.flatten(d, expand_composites=True) for d in distributions]
  return results, held, (paths, distributions)


def join(results, held, layout):
  """The results `split` took apart, each distribution rebuilt from `held`
  (its tensors, perhaps updated by a step) in the form of `layout`'s."""
  for path, like, tensors in zip(*layout, held):
    results = _replaced(results, path, tf.nest.pack_sequence_as(
        like, tensors, expand_composites=True))
  return results


class Carrying(tfp.mcmc.TransitionKernel):
  """`inner` stepping on results in `split`'s form, (results, held), so
  that a loop it runs in (`tfp.mcmc.sample_chain`'s) carries tensors; its
  results are `inner`'s, `join`ed with `layout`, in each step."""

  def __init__(self, inner, layout):
    self._parameters = dict(inner=inner, layout=layout)

  @property
  def parameters(self):
    return self._parameters

  @property
  def is_calibrated(self):
    return self._parameters["inner"].is_calibrated

  def bootstrap_results(self, init_state):
    results, held, _ = split(
        self._parameters["inner"].bootstrap_results(init_state))
    return results, held

  def one_step(self, current_state, previous_kernel_results, seed=None):
    results = join(*previous_kernel_results, self._parameters["layout"])
    state, results = self._parameters["inner"].one_step(
        current_state, results, seed=seed)
    results, held, _ = split(results)
    return state, (results, held)
