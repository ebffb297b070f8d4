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
  the minibatch test.

  Args:
    seed: the outer step's stateless seed, int32[2].

  Returns:
    (proposal seed, energy seed, accept seed), each int32[2].

  ```python
  proposal_seed, energy_seed, accept_seed = (
      tfp_sgmcmc.dynamics.acceptance.test_seeds(tf.constant([0, 1])))
  print(accept_seed.shape)  # (2,)
  ```
  """
  return random.split_seed(seed, 3)


def metropolis_hastings_test(energy, proposed_energy,
                             log_acceptance_correction, seed, dtype=None):
  """The amortized M-H decision, log a = U(theta) - U(theta*) + correction.

  The energy difference is taken in the energies' dtype (the Keras sampler
  sums them in float64, where U grows with N) and the test in `dtype`
  (default: the energies'). A non-finite log a rejects.

  Args:
    energy: U(theta), one per chain.
    proposed_energy: U(theta*), one per chain.
    log_acceptance_correction: the proposal's rho, one per chain.
    seed: the outer step's accept seed (`test_seeds`), int32[2].
    dtype: the dtype of the test, or None for the energies'.

  Returns:
    (is_accepted, log_accept_ratio), one per chain.

  ```python
  is_accepted, log_a = tfp_sgmcmc.dynamics.metropolis_hastings_test(
      tf.constant([1., 1.]), tf.constant([0., 50.]), tf.zeros([2]),
      seed=tf.constant([0, 1]))
  print(is_accepted.numpy(), log_a.numpy())  # [ True False] [  1. -49.]
  ```
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
  momentum the next proposal starts from.

  ```python
  chain = tfp_sgmcmc.dynamics.acceptance.ChainAfterTest(
      state=tf.zeros([2]), energy=tf.constant(0.), momentum=None)
  print(chain.state.shape)  # (2,)
  ```
  """
  __slots__ = ()


def after_test(is_accepted, state, proposed_state, energy,
                 proposed_energy, momentum=None, proposed_momentum=None):
  """Per chain, the chain after the test: the proposal and its energy where
  accepted, else the current ones; the momentum r* if accepted, else the
  one the proposal started from negated (`momentum_after_test`; None when
  not given).

  Args:
    is_accepted: one boolean per chain.
    state: theta, a structure of tensors.
    proposed_state: theta*, same structure.
    energy: U(theta), one per chain.
    proposed_energy: U(theta*), one per chain.
    momentum: the momentum the proposal started from, or None.
    proposed_momentum: r*, or None.

  Returns:
    A `ChainAfterTest` (state, energy, momentum).

  ```python
  chain = tfp_sgmcmc.dynamics.acceptance.after_test(
      tf.constant([True, False]), tf.zeros([2, 1]), tf.ones([2, 1]),
      tf.zeros([2]), tf.ones([2]))
  print(chain.state.numpy()[:, 0])  # [1. 0.]
  ```
  """
  return ChainAfterTest(
      choose(is_accepted, proposed_state, state),
      tf.where(is_accepted, proposed_energy, energy),
      None if momentum is None else momentum_after_test(
          is_accepted, proposed_momentum, momentum))


def momentum_after_test(is_accepted, proposed_momentum, previous_momentum):
  """The momentum the next proposal starts from: r* if accepted, else the
  previous one negated (the involution r -> -r).

  Args:
    is_accepted: one boolean per chain.
    proposed_momentum: r*, a structure of tensors.
    previous_momentum: the momentum the proposal started from, same
      structure.

  Returns:
    The momentum, the same structure as `proposed_momentum`.

  ```python
  r = tfp_sgmcmc.dynamics.momentum_after_test(
      tf.constant([True, False]), tf.fill([2, 1], 2.), tf.ones([2, 1]))
  print(r.numpy()[:, 0])  # [ 2. -1.]
  ```
  """
  return choose(is_accepted, proposed_momentum,
                tf.nest.map_structure(tf.negative, previous_momentum))


def check_acceptance_energy(acceptance_energy):
  """Raises unless `acceptance_energy` is "exact" or "minibatch".

  Args:
    acceptance_energy: the name given.

  Returns:
    None.

  Raises:
    ValueError: naming the value seen and the choices.

  ```python
  tfp_sgmcmc.dynamics.acceptance.check_acceptance_energy("exact")  # passes
  ```
  """
  if acceptance_energy not in ACCEPTANCE_ENERGIES:
    raise ValueError(f"`acceptance_energy` must be one of "
                     f"{ACCEPTANCE_ENERGIES}; got {acceptance_energy!r}.")
