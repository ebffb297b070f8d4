"""Helpers for chain states: structures of tensors with leading chain axes.

A state is one tensor or a (nested) list, tuple or dict of tensors; its
leading axes are chains, and per-chain quantities (energies,
flags) have exactly those axes. These helpers exist once for the whole
package. TFP's `mcmc_util.choose` is not used for the per-chain select: it
returns lists for any structure, and states may be dicts (JointDistribution
models).
"""

import numpy as np
import tensorflow as tf

__all__ = ["as_dtype", "broadcast_structure", "sum_event", "expand_to",
           "choose", "finite_per_chain", "state_dtype", "describe_structure",
           "pack_like", "merge_chain_axes", "by_name"]


def as_dtype(x, dtype):
  """x in `dtype`; Python numbers are converted directly (a float64 state
  keeps full precision instead of passing through float32)."""
  if tf.is_tensor(x):
    return tf.cast(x, dtype)
  return tf.constant(np.asarray(x, tf.as_dtype(dtype).as_numpy_dtype))


def broadcast_structure(value, structure):
  """A scalar becomes one value per part; a list or tuple of one value per
  part (e.g. per-part step sizes) takes the structure of `structure`."""
  if not tf.nest.is_nested(value):
    return tf.nest.map_structure(lambda _: value, structure)
  if isinstance(value, (list, tuple)):
    return tf.nest.pack_sequence_as(structure, tf.nest.flatten(value))
  return value


def sum_event(x, batch_ndims):
  """Sums `x` over its event axes, those after the first `batch_ndims`."""
  return tf.reduce_sum(x, axis=list(range(batch_ndims, x.shape.rank)))


def expand_to(per_chain, part):
  """`per_chain` (shape = the chain axes) with trailing axes of size 1, to
  broadcast against a state part."""
  extra = part.shape.rank - per_chain.shape.rank
  return tf.reshape(per_chain, tf.concat(
      [tf.shape(per_chain), tf.ones([extra], tf.int32)], 0))


def choose(mask, if_true, if_false):
  """Per chain, `if_true` where `mask` (one bool per chain), else
  `if_false`, part by part over matching structures."""
  return tf.nest.map_structure(
      lambda a, b: tf.where(expand_to(mask, a), a, b), if_true, if_false)


def finite_per_chain(energy, structures, chains=None):
  """True for chains whose energy and every value in `structures` are finite.

  `energy` None (a step that did not compute it): the chains are those of
  the boolean tensor `chains` (e.g. the previous `diverged` flags), and only
  `structures` are checked."""
  if energy is None:
    finite = tf.ones_like(chains, tf.bool)
    batch_rank = chains.shape.rank
  else:
    finite = tf.math.is_finite(energy)
    batch_rank = energy.shape.rank
  for part in tf.nest.flatten(structures):
    axes = list(range(batch_rank, part.shape.rank))
    part_finite = tf.reduce_all(tf.math.is_finite(part), axis=axes)
    finite = finite & tf.broadcast_to(part_finite, tf.shape(finite))
  return finite


def state_dtype(state):
  return tf.nest.flatten(state)[0].dtype


def describe_structure(x):
  """dtype and shape of each part, e.g. for an error message."""
  return tf.nest.map_structure(
      lambda t: f"{tf.as_dtype(t.dtype).name}{list(t.shape)}", x)


def pack_like(template, parts):
  """`parts` (a sequence) in the structure of `template` (a tuple stays a
  tuple, a dict a dict), as TFP's kernels return the state structure they
  were given."""
  return tf.nest.pack_sequence_as(template, list(parts))


def merge_chain_axes(draws, per_chain):
  """`draws` (parts [num_draws, chain axes..., event...]) with their chain
  axes merged into one, their number read from `per_chain`, a traced
  per-chain field (shape [num_draws, chain axes...], e.g. `diverged`) or
  None: chains batched as [2, 3] are then 6 chains for the diagnostics,
  which take one chain axis. A field of one value per draw says the run
  is one chain without a chain axis: each part gets one of size 1, or the
  diagnostics would take a vector state's coordinates for chains.
  Unchanged with one chain axis or no field."""
  if per_chain is None:
    return draws
  chains = tuple(np.shape(per_chain)[1:])
  if not chains and np.ndim(per_chain) == 1:
    return tf.nest.map_structure(lambda p: np.asarray(p)[:, np.newaxis],
                                 draws)
  if len(chains) < 2:
    return draws

  def merge(part):
    part = np.asarray(part)
    if part.shape[1:1 + len(chains)] != chains:
      return part  # Not of these chains: the shape checks say so.
    return part.reshape(part.shape[:1] + (int(np.prod(chains)),) +
                        part.shape[1 + len(chains):])
  return tf.nest.map_structure(merge, draws)


def by_name(values, names):
  """A JointDistribution's one-per-node structure (a dict, a namedtuple, or
  a list in the order of `names`) as a dict from node name to value."""
  if isinstance(values, dict):
    return dict(values)
  if hasattr(values, "_fields"):
    return dict(zip(values._fields, values))
  return dict(zip(names, values))
