"""The minibatch energy, once for every front end.

    U~(theta) = N * mean_{i in batch} -log p(y_i | x_i, theta) - log p(theta)

is an unbiased estimate of U(theta) = -sum_i log p(y_i | x_i, theta) -
log p(theta) from a batch of n of the N examples. The targets compute it
from their log-likelihood, the Keras adapter from Keras' mean loss (its
train step, its `energy` log, the minibatch M-H test): all call
`minibatch_energy`. The map is linear in (mean NLL, log prior), so applied
to their gradients it gives grad U~ (`minibatch_energy_gradient`).
"""

import tensorflow as tf

__all__ = ["minibatch_energy", "minibatch_energy_gradient"]


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
