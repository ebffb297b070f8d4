"""The energies, once for every front end: the minibatch estimate U~ and
the exact U accumulated over chunks of the data.

    U~(theta) = N * mean_{i in batch} -log p(y_i | x_i, theta) - log p(theta)

is an unbiased estimate of U(theta) = -sum_i log p(y_i | x_i, theta) -
log p(theta) from a batch of n of the N examples. The targets compute it
from their log-likelihood, the Keras adapter from Keras' mean loss (its
train step, its `energy` log, the minibatch M-H test): all call
`minibatch_energy`. The map is linear in (mean NLL, log prior), so applied
to their gradients it gives grad U~ (`minibatch_energy_gradient`).

The exact energy sums a log-likelihood over consecutive chunks of the data
(`sum_over_chunks`), so that N examples never pass through the model at
once; the in-memory targets and the Keras AMAGOLD test use it.
"""

import tensorflow as tf

__all__ = ["minibatch_energy", "minibatch_energy_gradient", "sum_over_chunks",
           "default_energy_chunk_size", "sum_of_examples"]

# Default data budget of one chunk of the exact-energy pass (see
# `InMemoryTarget`'s `energy_chunk_size`).
ENERGY_CHUNK_BYTES = 16 * 2**20


MIN_ENERGY_CHUNK = 4096

# Up to this many chunks (or Keras batches) an exact energy is written out
# chunk by chunk on static slices (`sum_over_chunks(..., unroll=True)`):
# XLA on CPU compiles that several times faster than a loop of dynamic
# slices. Beyond, a `tf.while_loop`.
MAX_UNROLLED_CHUNKS = 32


def default_energy_chunk_size(data, num_examples):
  """As many examples as fit in `ENERGY_CHUNK_BYTES` of `data`, at least
  `MIN_ENERGY_CHUNK`, at most `num_examples`."""
  row_bytes = sum(
      max(1, leaf.shape[1:].num_elements() or 1) * leaf.dtype.size
      for leaf in tf.nest.flatten(data))
  return int(min(num_examples,
                 max(MIN_ENERGY_CHUNK, ENERGY_CHUNK_BYTES // row_bytes)))


def minibatch_energy(mean_nll, log_prior, num_examples):
  """U~ = N * `mean_nll` - `log_prior`, in `mean_nll`'s dtype.

  Args:
    mean_nll: the mean over a batch of -log p(y_i | x_i, theta) (a tensor,
      batch dimensions for chains allowed).
    log_prior: log p(theta), broadcastable against `mean_nll`.
    num_examples: N, the size of the training set.
  """
  mean_nll = tf.convert_to_tensor(mean_nll)
  n = tf.cast(num_examples, mean_nll.dtype)
  return n * mean_nll - tf.cast(log_prior, mean_nll.dtype)


def minibatch_energy_gradient(mean_nll_gradient, log_prior_gradient,
                              num_examples):
  """grad U~ = N * grad(mean NLL) - grad log p, part by part over matching
  structures of gradients."""
  return tf.nest.map_structure(
      lambda g, p: minibatch_energy(g, p, num_examples), mean_nll_gradient,
      log_prior_gradient)


def sum_of_examples(log_likelihoods):
  """The sum over the examples (the last axis) of per-example
  log-likelihoods, accumulated in float64: in float32 the rounding of a sum
  over N examples grows with N and with the terms' size, and under XLA it
  reached a fraction of a nat in differences U(theta') - U(theta) at large
  N, which the exact M-H test compares (a float32 chain then accepted only
  tiny steps). The energy is cast back to the state's dtype at the end."""
  return tf.reduce_sum(tf.cast(log_likelihoods, tf.float64), axis=-1)


def sum_over_chunks(chunk_sum, num_examples, chunk_size, unroll=False):
  """sum_k `chunk_sum(start_k, size_k)` over the consecutive chunks of
  `chunk_size` examples that cover [0, N) (the last one may be shorter).

  The terms are added one after another in the order of the data. The
  first chunk is evaluated outside a loop (its result sets the sum's shape
  and dtype), the other full chunks in a `tf.while_loop` (one traced body,
  whatever N; `start` is then a scalar int32 tensor) or, with `unroll`, in
  Python (every `start` a Python int), the remainder last. `size` is
  always a Python int.
  """
  num_full, rem = divmod(num_examples, chunk_size)
  if not num_full:
    return chunk_sum(0, rem)
  total = chunk_sum(0, chunk_size)
  if unroll:
    for i in range(1, num_full):
      total = total + chunk_sum(i * chunk_size, chunk_size)
  elif num_full > 1:
    def body(i, acc):
      return i + 1, acc + chunk_sum(i * chunk_size, chunk_size)
    # The trip count, without which XLA cannot differentiate the loop (a
    # gradient keeps each iteration's values in a list whose size XLA must
    # know): the KSD's exact score, or HMC on the exact log density.
    _, total = tf.while_loop(lambda i, acc: i < num_full, body,
                             (tf.constant(1), total),
                             maximum_iterations=num_full - 1)
  if rem:
    total = total + chunk_sum(num_full * chunk_size, rem)
  return total
