"""The amortized Metropolis-Hastings test itself (Zhang, Cooper & De Sa 2020,
eq. (6)): the accept/reject decision on a whole multi-step proposal and the
momentum the next proposal starts from.

    log a = U(theta) - U(theta*) + log_acceptance_correction

The `tfp.mcmc` wrapper (`AmortizedMetropolisHastings`) and the Keras
AMAGOLD sampler both decide with `metropolis_hastings_test`, from the seeds
of `test_seeds`.
"""

import collections

import tensorflow as tf

from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, choose

__all__ = ["ACCEPTANCE_ENERGIES", "ChainAfterTest", "test_seeds",
           "metropolis_hastings_test", "after_test", "momentum_after_test",
           "check_acceptance_energy"]

# "exact": the full-data U; "minibatch": both energies on one minibatch
# (Section 5.2; approximate).
ACCEPTANCE_ENERGIES = ("exact", "minibatch")


def test_seeds(seed):
  """(proposal seed, energy seed, accept seed) of one outer step: a real
  split of the outer step's seed. The energy seed chooses the minibatch of
  the minibatch test."""
  return random.split_seed(seed, 3)


def metropolis_hastings_test(energy, proposed_energy,
                             log_acceptance_correction, seed, dtype=None):
  """The amortized M-H decision, log a = U(theta) - U(theta*) + correction.

  The energy difference is taken in the energies' dtype (the Keras sampler
  sums them in float64, where U grows with N) and the test in `dtype`
  (default: the energies'). A non-finite log a rejects. Returns
  (is_accepted, log_accept_ratio), one per chain; `seed` is the outer
  step's accept seed (`test_seeds`).
  """
  difference = tf.convert_to_tensor(energy) - proposed_energy
  if dtype is not None:
    difference = tf.cast(difference, dtype)
  correction = as_dtype(log_acceptance_correction, difference.dtype)
  log_accept_ratio = difference + correction
  log_accept_ratio = tf.where(
      tf.math.is_finite(log_accept_ratio), log_accept_ratio,
      tf.constant(-float("inf"), log_accept_ratio.dtype))
  log_uniform = tf.math.log(random.philox_uniform(
      tf.shape(log_accept_ratio), seed, log_accept_ratio.dtype))
  return log_uniform < log_accept_ratio, log_accept_ratio


class ChainAfterTest(collections.namedtuple("ChainAfterTest",
                                         ["state", "energy", "momentum"])):
  """The chain after a test: its state, the energy of that state and the
  momentum the next proposal starts from."""
  __slots__ = ()


def after_test(is_accepted, state, proposed_state, energy,
                 proposed_energy, momentum=None, proposed_momentum=None):
  """Per chain, the chain after the test: the proposal and its energy where
  accepted, else the current ones; the momentum r* if accepted, else the
  one the proposal started from negated (`momentum_after_test`; None when
  not given)."""
  return ChainAfterTest(
      choose(is_accepted, proposed_state, state),
      tf.where(is_accepted, proposed_energy, energy),
      None if momentum is None else momentum_after_test(
          is_accepted, proposed_momentum, momentum))


def momentum_after_test(is_accepted, proposed_momentum, previous_momentum):
  """The momentum the next proposal starts from: r* if accepted, else the
  previous one negated (the involution r -> -r)."""
  return choose(is_accepted, proposed_momentum,
                tf.nest.map_structure(tf.negative, previous_momentum))


def check_acceptance_energy(acceptance_energy):
  if acceptance_energy not in ACCEPTANCE_ENERGIES:
    raise ValueError(f"`acceptance_energy` must be one of "
                     f"{ACCEPTANCE_ENERGIES}; got {acceptance_energy!r}.")
