"""T steps of SGLD as one proposal, with the path ratio an amortized
Metropolis-Hastings test needs (the warm-up's test of SGLD's step size)."""

import collections

import numpy as np
import tensorflow as tf
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, finite_per_chain
from tfp_sgmcmc.dynamics import amagold
from tfp_sgmcmc.dynamics import langevin
from tfp_sgmcmc.kernels import base
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.targets.base import check_target

__all__ = ["UncalibratedLangevinPath", "UncalibratedLangevinPathResults"]


class UncalibratedLangevinPathResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("UncalibratedLangevinPathResults", [
        "log_acceptance_correction", "energy", "step_size", "step_count",
        "diverged", "seed", "target_log_prob"])):
  """Results of one T-step SGLD proposal.

  Fields:
    log_acceptance_correction: sum over the T steps of
      log q(x_{t+1} -> x_t; zeta_t) - log q(x_t -> x_{t+1}; zeta_t), one
      value per chain.
    energy, target_log_prob: NaN (not computed: the amortized test
      computes the exact energies it needs).
    step_size, step_count, diverged, seed: as for `SGLDResults`.
  """
  __slots__ = ()


class UncalibratedLangevinPath(base.StochasticGradientKernel):
  """T SGLD steps x_0 -> x_T with the log reverse-over-forward path ratio.

  Each step is `SGLD`'s own move on a fresh minibatch zeta_t,

      x_{t+1} = x_t - h grad U~_t(x_t) + sqrt(2 h T) xi_t,

  and the correction is eq. (6) of Zhang, Cooper & De Sa (2020) for it:

      sum_t log N(x_t; x_{t+1} - h grad U~_t(x_{t+1}), 2 h T)
                - log N(x_{t+1}; x_t - h grad U~_t(x_t), 2 h T),

  with the reverse move's gradient on the *same* minibatch zeta_t (so each
  step costs two minibatch gradients). `AmortizedMetropolisHastings` around
  it is an exact chain for any h (an amortized MALA); the warm-up uses its
  acceptance to tune SGLD's step size and then samples with `SGLD` alone.

  Args:
    target: a `tfp_sgmcmc` target.
    step_size: h > 0.
    num_steps: T >= 1, SGLD steps per proposal.
    temperature: T of the injected noise (1 for the posterior).
  """

  _results_type = UncalibratedLangevinPathResults
  _scope = "langevin_path"
  _per_chain_step_count = True

  def __init__(self, target=None, step_size=None, num_steps=10,
               temperature=1., name=None, target_log_prob_fn=None,
               store_parameters_in_results=False):
    self._target, target, target_log_prob_fn = interop.resolve_target(
        target, target_log_prob_fn, temperature, type(self).__name__)
    check_target(self._target)
    arguments.check_step_size(step_size)
    amagold.check_num_leapfrog_steps(num_steps)
    arguments.check_positive("temperature", temperature)
    self._parameters = dict(
        target=target, step_size=step_size, num_steps=num_steps,
        temperature=temperature, name=name,
        target_log_prob_fn=target_log_prob_fn,
        store_parameters_in_results=store_parameters_in_results)

  num_steps = arguments.parameter_property("num_steps")
  temperature = arguments.parameter_property("temperature")

  def _transition(self, state, prev, step):
    h = step.size
    t = as_dtype(self.temperature, step.dtype)
    batch_ndims = prev.log_acceptance_correction.shape.rank

    def body(i, position, ratio, seed):
      seed, step_seed = random.walk_seed(seed)
      batch_seed, noise_seed = random.derive_seeds(step_seed, 2)
      grad = self.target.gradient(position, batch_seed)
      noise = random.standard_normal_like(position, noise_seed)
      moved = langevin.langevin_step(position, grad, h, noise, t)
      moved_grad = self.target.gradient(moved, batch_seed)
      ratio = ratio + langevin.langevin_log_proposal_ratio(
          position, moved, grad, moved_grad, h, t, batch_ndims)
      return i + 1, moved, ratio, seed

    _, proposed, ratio, _ = tf.while_loop(
        lambda i, *_: i < self.num_steps, body,
        (tf.constant(0, tf.int32), state,
         tf.zeros_like(prev.log_acceptance_correction),
         random.derive_seeds(step.seed, 1)[0]))
    finite = finite_per_chain(ratio, [proposed])
    energy = tf.fill(tf.shape(ratio), tf.constant(np.nan, ratio.dtype))
    return base.Move(proposed, energy,
                     fields=dict(log_acceptance_correction=ratio,
                                 target_log_prob=-energy),
                     finite=finite)

  def _bootstrap_energy(self, init_state):
    energy = self.target.minibatch_energy(init_state, random.BOOTSTRAP_SEED)
    return tf.fill(tf.shape(energy), tf.constant(np.nan, energy.dtype)), {}

  def _initial_fields(self, init_state, energy):
    return dict(log_acceptance_correction=tf.zeros_like(energy))
