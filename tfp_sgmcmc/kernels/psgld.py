"""Preconditioned SGLD (RMSprop preconditioner) as a `TransitionKernel`."""

import collections

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import dynamics
from tfp_sgmcmc.kernels import _common

__all__ = ["PreconditionedSGLD", "PreconditionedSGLDResults"]


class PreconditionedSGLDResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("PreconditionedSGLDResults", [
        "second_moment", "preconditioner", "energy", "step_size",
        "step_count", "diverged", "seed", "target_log_prob"])):
  """Results of one pSGLD step.

  Fields:
    second_moment: V, the running average of the squared scaled gradient.
    preconditioner: G = 1 / (lambda + sqrt(V)) used by this step.
    energy, step_size, step_count, diverged, seed, target_log_prob: as for
      `SGLDResults` (`energy` and `target_log_prob` NaN, not computed, with
      `compute_energy=False`).
  """
  __slots__ = ()


class PreconditionedSGLD(_common.UncalibratedKernel):
  """Preconditioned SGLD (Li, Chen, Carlson, Carin 2016).

      V'     = alpha V + (1 - alpha) g_bar * g_bar,   g_bar = grad U~ / N
      G      = 1 / (lambda + sqrt(V'))
      theta' = theta - h G grad U~(theta) + sqrt(2 h T G) xi

  (elementwise). The RMSprop-style diagonal preconditioner G equalises the
  scales of the coordinates, so one step size suits a badly conditioned
  posterior where plain SGLD must use the step of its stiffest direction.

  The paper's Gamma(theta) = sum_j d G_ij / d theta_j term is dropped (as in
  the paper's own experiments): G depends on theta only through the slowly
  moving average V, so the term is O(1 - alpha) small; the cost of keeping it
  would be a second derivative per step. The chain is therefore biased by
  the change of G; with alpha close to 1 that bias is small, and it vanishes
  once V has settled.

  `compute_energy=False` skips the minibatch energy U~ that each step
  otherwise computes only to report it (`energy`, `target_log_prob`) and for
  the divergence flag: the chain is the same bit for bit, those two fields
  hold NaN (not computed), and a chain is flagged `diverged` when its
  gradient or updated state is non-finite. Minibatch targets only (see
  `SGLD`).

  #### Example

  ```python
  kernel = tfp_sgmcmc.PreconditionedSGLD(target, step_size=1e-3, decay=0.99)
  ```

  #### References

  [1] Li, C., Chen, C., Carlson, D. and Carin, L. Preconditioned stochastic
      gradient Langevin dynamics for deep neural networks. AAAI 2016.
  """

  def __init__(self, target=None, step_size=None, decay=0.99,
               regularizer=1e-5, temperature=1., name=None,
               target_log_prob_fn=None, compute_energy=True):
    self._target, target, target_log_prob_fn = _common.resolve_target(
        target, target_log_prob_fn)
    _common.check_step_size(step_size)
    _common.check_compute_energy(compute_energy, self._target)
    check_parameters(decay, regularizer)
    _common.check_positive("temperature", temperature)
    self._parameters = dict(target=target, step_size=step_size, decay=decay,
                            regularizer=regularizer, temperature=temperature,
                            name=name, target_log_prob_fn=target_log_prob_fn,
                            compute_energy=compute_energy)

  target = _common.sampled_target_property()
  target_log_prob_fn = _common.parameter_property("target_log_prob_fn")
  step_size = _common.parameter_property("step_size")
  decay = _common.parameter_property("decay")
  regularizer = _common.parameter_property("regularizer")
  temperature = _common.parameter_property("temperature")
  compute_energy = _common.parameter_property("compute_energy")
  name = _common.parameter_property("name")

  def one_step(self, current_state, previous_kernel_results, seed=None):
    current_state = _common.check_step(self, current_state,
                                       previous_kernel_results, PreconditionedSGLDResults)
    with tf.name_scope(self.name or "psgld_one_step"):
      batch_seed, _ = _common.step_seeds(seed, 2)
      prev = previous_kernel_results
      dtype = _common.state_dtype(current_state)
      h = _common.step_size_at(self.step_size, prev.step_count,
                               prev.step_size, dtype)
      t = _common.temperature_at(self.step_size, prev.step_count,
                                 self.temperature, dtype)
      energy, grad = _common.minibatch_energy_and_gradient(
          self.target, current_state, batch_seed, self.compute_energy)
      new_state, second_moment, precond = psgld_update(
          current_state, prev.second_moment, grad, prev.step_count, h, t,
          self.decay, self.regularizer, self.target.num_examples, seed)
      if energy is None:  # compute_energy=False.
        # A non-finite gradient makes a non-finite state (inf: the
        # preconditioner goes to 0 and 0 * inf is NaN): the state check
        # catches it.
        finite = _common.finite_per_chain(None, [new_state],
                                          chains=prev.diverged)
        energy = _common.not_computed(prev.diverged, dtype)
      else:
        finite = _common.finite_per_chain(energy, new_state)
      diverged = tf.broadcast_to(prev.diverged, tf.shape(finite)) | ~finite
      keep = lambda old, new: _common.keep_where_diverged(diverged, old, new)
      next_state = keep(current_state, new_state)
      return next_state, PreconditionedSGLDResults(
          second_moment=keep(prev.second_moment, second_moment),
          preconditioner=precond, energy=energy, step_size=h,
          step_count=prev.step_count + 1, diverged=diverged,
          seed=tfp.random.sanitize_seed(seed),
          target_log_prob=_common.target_log_prob(self.target, next_state,
                                                  energy))

  def bootstrap_results(self, init_state):
    with tf.name_scope((self.name or "psgld") + "_bootstrap_results"):
      _common.check_initial_state(init_state, self.target)
      dtype = _common.state_dtype(init_state)
      _common.refuse_minibatch_under_tfp_mh(self)
      energy = self.target.minibatch_energy(init_state,
                                            _common.BOOTSTRAP_SEED)
      if not self.compute_energy:
        energy = _common.not_computed(tf.math.is_finite(energy), dtype)
      zeros = tf.nest.map_structure(tf.zeros_like, init_state)
      return PreconditionedSGLDResults(
          second_moment=zeros,
          preconditioner=tf.nest.map_structure(tf.ones_like, init_state),
          energy=energy,
          step_size=_common.initial_step_size(self.step_size, dtype),
          step_count=tf.constant(0, tf.int32),
          diverged=tf.zeros(tf.shape(energy), tf.bool),
          seed=tfp.random.sanitize_seed(_common.BOOTSTRAP_SEED),
          target_log_prob=-energy)


def check_parameters(decay, regularizer):
  """The argument checks of pSGLD's preconditioner (the kernel's and the
  Keras sampler's)."""
  d = _common.static_value(decay)
  if d is not None and not 0. <= float(d) < 1.:
    raise ValueError(f"`decay` (alpha) must be in [0, 1); got {decay!r}.")
  _common.check_positive("regularizer", regularizer)


def psgld_update(position, second_moment, gradient, step_count, step_size,
                 temperature, decay, regularizer, num_examples, seed):
  """One pSGLD transition given grad U~ at `position` (the kernel's update).

  Returns (new position, new second moment V, preconditioner G). The first
  step (`step_count` 0) has no history and starts the average at g_bar^2.
  `seed` is the step's seed, used as `one_step` uses it.
  """
  _, noise_seed = _common.step_seeds(seed, 2)
  dtype = tf.nest.flatten(position)[0].dtype
  decay = tf.where(tf.equal(step_count, 0), tf.constant(0., dtype),
                   tf.cast(decay, dtype))
  second_moment, precond = dynamics.rmsprop_preconditioner(
      second_moment, gradient, decay, num_examples, regularizer)
  noise = dynamics.standard_normal_like(position, noise_seed)
  new_position = dynamics.preconditioned_langevin_step(
      position, gradient, precond, step_size, noise, temperature)
  return new_position, second_moment, precond
