"""Finding a posterior mode, e.g. the centre of control-variate gradients."""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["find_mode"]


def find_mode(target, initial_state, num_steps=2000, learning_rate=1e-2,
              full_batch=None, seed=(0, 0)):
  """Minimises U with Adam and returns theta_hat (structure of the state).

  Uses the exact full-data gradient when the target has an exact energy
  (`full_batch=None` or True), otherwise minibatch gradients with fresh
  batches drawn from `seed`. Runs as one compiled loop.

  Args:
    target: a `tfp_sgmcmc` target.
    initial_state: starting point (one chain or several).
    num_steps: Adam steps.
    learning_rate: Adam's step size.
    full_batch: force full-batch (True) or minibatch (False) gradients.
    seed: stateless seed for minibatches.
  """
  from tfp_sgmcmc.kernels import _common  # pylint: disable=g-import-not-at-top
  _common.check_target(target)
  _common.check_positive("learning_rate", learning_rate)
  if (isinstance(num_steps, bool) or not isinstance(num_steps, (
      int, np.integer)) or num_steps < 1):
    raise ValueError(f"`num_steps` must be an integer >= 1; got "
                     f"{num_steps!r}.")
  if full_batch is None:
    full_batch = target.has_exact_energy
  elif full_batch and not target.has_exact_energy:
    raise ValueError("`full_batch` = True needs a target with an exact energy "
                     f"(has_exact_energy); {type(target).__name__} has none: "
                     "use full_batch=False (minibatch gradients).")
  state = tf.nest.map_structure(tf.convert_to_tensor, initial_state)
  _common.check_initial_state(state, target)
  flat = tf.nest.flatten(state)
  beta1, beta2, eps = 0.9, 0.999, 1e-8

  def gradient(parts, step_seed):
    structured = tf.nest.pack_sequence_as(state, parts)
    if full_batch:
      with tf.GradientTape() as tape:
        tape.watch(parts)
        energy = target.energy(structured)
      return tape.gradient(energy, parts)
    _, grads = target.energy_and_gradient(structured, step_seed)
    return tf.nest.flatten(grads)

  @tf.function(autograph=False)
  def run(parts, seed):
    def body(i, parts, m, v, seed):
      seed, step_seed = tfp.random.split_seed(seed)
      grads = gradient(parts, step_seed)
      t = tf.cast(i + 1, parts[0].dtype)
      m = [beta1 * mi + (1 - beta1) * g for mi, g in zip(m, grads)]
      v = [beta2 * vi + (1 - beta2) * g * g for vi, g in zip(v, grads)]
      parts = [p - learning_rate * (mi / (1 - beta1 ** t)) /
               (tf.sqrt(vi / (1 - beta2 ** t)) + eps)
               for p, mi, vi in zip(parts, m, v)]
      return i + 1, parts, m, v, seed
    zeros = [tf.zeros_like(p) for p in parts]
    _, parts, _, _, _ = tf.while_loop(
        lambda i, *_: i < num_steps, body,
        (tf.constant(0), parts, zeros, list(zeros), seed))
    return parts
  parts = run(flat, tfp.random.sanitize_seed(seed))
  return tf.nest.pack_sequence_as(state, parts)
