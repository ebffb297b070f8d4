"""Stan's start for `tfp_sgmcmc.sample`: each chain uniform(-2, 2) in the
unconstrained space, drawn again where the log density there is not finite.

A model whose log density is -inf or NaN over part of that box (a positive
parameter left unconstrained, say) stranded every chain that started there:
no proposal from a non-finite energy is accepted, the warm-up's step size
fell to 0 and the call ended in an error about the step size. Stan draws
such a chain again, up to 100 times; so does this.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["uniform_states", "MAX_DRAWS"]

MAX_DRAWS = 100


def uniform_states(target, template, num_chains, seed):
  """(states with a leading chain axis, number of chains drawn again).

  The first draw is uniform(-2, 2) per part from `split_seed(seed, parts)`;
  a chain whose exact energy (where `target` has one) is not finite is
  drawn again from further seeds, up to `MAX_DRAWS` draws in all, and a
  chain still not finite then is an error that says what to do."""
  parts = tf.nest.flatten(template)

  def draw(s):
    seeds = tfp.random.split_seed(s, len(parts))
    return [tf.random.stateless_uniform(
        [num_chains] + p.shape.as_list(), sd, -2., 2., dtype=p.dtype)
            for p, sd in zip(parts, seeds)]
  states = draw(seed)
  if not target.has_exact_energy:
    return tf.nest.pack_sequence_as(template, states), 0
  bad = ~_finite(target, template, states)
  redrawn = np.zeros(num_chains, bool)
  for _ in range(MAX_DRAWS - 1):
    if not bad.any():
      break
    redrawn |= bad
    seed = tfp.random.split_seed(seed, 2, salt="uniform_start")[1]
    states = [tf.where(np.reshape(bad, [-1] + [1] * (s.shape.rank - 1)),
                       again, s) for s, again in zip(states, draw(seed))]
    bad = ~_finite(target, template, states)
  if bad.any():
    raise ValueError(
        f"the log density is not finite at any of {MAX_DRAWS} uniform(-2, "
        f"2) starts of chain{'s' * int(bad.sum() > 1)} "
        f"{', '.join(str(c) for c in np.flatnonzero(bad))} (Stan's start, "
        "in the unconstrained space): the model is -inf or NaN over most "
        "of that box, e.g. a positive parameter used without a bijector. "
        "Give such a parameter through a JointDistribution (its default "
        "bijector keeps it in its support) or transform it yourself (e.g. "
        "sigma = tf.exp(s)), or pass `initial_state=` (one chain's state "
        "where the log density is finite).")
  return tf.nest.pack_sequence_as(template, states), int(redrawn.sum())


def _finite(target, template, states):
  energy = target.energy(tf.nest.pack_sequence_as(template, states))
  return np.isfinite(np.asarray(energy))
