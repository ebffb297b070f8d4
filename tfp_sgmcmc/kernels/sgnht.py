"""Stochastic gradient Nose-Hoover thermostat as a `TransitionKernel`."""

import collections

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import dynamics
from tfp_sgmcmc.kernels import _common

__all__ = ["SGNHT", "SGNHTResults"]


class SGNHTResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("SGNHTResults", [
        "momentum", "thermostat", "energy", "step_size", "step_count",
        "diverged", "seed", "target_log_prob"])):
  """Results of one SGNHT step.

  Fields:
    momentum: r after the step (structure of the state).
    thermostat: xi after the step, one per chain: the adaptive friction.
    energy: minibatch estimate U~ where the gradient was evaluated; NaN
      (not computed) for a kernel built with `compute_energy=False`.
    step_size, step_count, diverged, seed, target_log_prob: as for
      `SGHMCResults` (`target_log_prob` NaN with `compute_energy=False`).
  """
  __slots__ = ()


class SGNHT(_common.UncalibratedKernel):
  """Stochastic gradient Nose-Hoover thermostat (Ding et al. 2014).

      r'      = r - h xi r - h grad U~(theta) + sqrt(2 A h T) z
      theta'  = theta + h r'
      xi'     = xi + h (r'^T r' / d - T)

  SGHMC needs its friction matched to the unknown gradient noise; SGNHT's
  thermostat xi adapts the friction until the kinetic energy per dimension
  averages T (the temperature, 1 for the posterior), whatever the size of
  the noise. d counts the parameters of one chain (all parts); each chain has
  its own thermostat, initialised at A.

  `compute_energy=False` skips the minibatch energy U~ that each step
  otherwise computes only to report it (`energy`, `target_log_prob`) and for
  the divergence flag: the chain is the same bit for bit, those two fields
  hold NaN (not computed), and a chain is flagged `diverged` when its
  gradient, state, momentum or thermostat is non-finite. Minibatch targets
  only (see `SGLD`).

  #### Example

  ```python
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x**2, -1), gradient_noise_variance=25.)
  kernel = tfp_sgmcmc.SGNHT(target, step_size=0.05, diffusion=1.)
  samples = tfp.mcmc.sample_chain(5000, tf.zeros([10]), kernel=kernel,
                                  trace_fn=None, seed=[0, 1])
  ```

  #### References

  [1] Ding, N., Fang, Y., Babbush, R., Chen, C., Skeel, R. D. and Neven, H.
      Bayesian sampling using stochastic gradient thermostats. NeurIPS 2014.
  """

  def __init__(self, target=None, step_size=None, diffusion=1.,
               temperature=1., name=None, target_log_prob_fn=None,
               compute_energy=True):
    self._target, target, target_log_prob_fn = _common.resolve_target(
        target, target_log_prob_fn)
    _common.check_compute_energy(compute_energy, self._target)
    # One thermostat for all coordinates: one step size for all parts.
    _common.check_step_size(step_size, per_part=False)
    _common.check_positive("diffusion", diffusion, allow_zero=True)
    _common.check_positive("temperature", temperature)
    self._parameters = dict(target=target, step_size=step_size,
                            diffusion=diffusion, temperature=temperature,
                            name=name,
                            target_log_prob_fn=target_log_prob_fn,
                            compute_energy=compute_energy)

  target = _common.sampled_target_property()
  target_log_prob_fn = _common.parameter_property("target_log_prob_fn")
  step_size = _common.parameter_property("step_size")
  diffusion = _common.parameter_property("diffusion")
  temperature = _common.parameter_property("temperature")
  compute_energy = _common.parameter_property("compute_energy")
  name = _common.parameter_property("name")

  def one_step(self, current_state, previous_kernel_results, seed=None):
    current_state = _common.check_step(self, current_state,
                                       previous_kernel_results, SGNHTResults)
    with tf.name_scope(self.name or "sgnht_one_step"):
      batch_seed, _, _ = _common.step_seeds(seed, 3)
      prev = previous_kernel_results
      dtype = _common.state_dtype(current_state)
      h = _common.step_size_at(self.step_size, prev.step_count,
                               prev.step_size, dtype)
      t = _common.temperature_at(self.step_size, prev.step_count,
                                 self.temperature, dtype)
      energy, grad = _common.minibatch_energy_and_gradient(
          self.target, current_state, batch_seed, self.compute_energy)
      new_state, new_momentum, new_thermostat = sgnht_update(
          current_state, prev.momentum, prev.thermostat, grad,
          prev.step_count, h, self.diffusion, t, self.temperature, seed)
      if energy is None:  # compute_energy=False.
        # A non-finite gradient makes a non-finite momentum (the kick is
        # linear in it): checking the state, momentum and thermostat
        # catches it.
        finite = _common.finite_per_chain(
            None, [new_state, new_momentum, new_thermostat],
            chains=prev.diverged)
        energy = _common.not_computed(prev.diverged, dtype)
      else:
        finite = _common.finite_per_chain(
            energy, [new_state, new_momentum, new_thermostat])
      diverged = tf.broadcast_to(prev.diverged, tf.shape(finite)) | ~finite
      keep = lambda old, new: _common.keep_where_diverged(diverged, old, new)
      next_state = keep(current_state, new_state)
      return next_state, SGNHTResults(
          momentum=keep(prev.momentum, new_momentum),
          thermostat=keep(prev.thermostat, new_thermostat),
          energy=energy, step_size=h, step_count=prev.step_count + 1,
          diverged=diverged, seed=tfp.random.sanitize_seed(seed),
          target_log_prob=_common.target_log_prob(self.target, next_state,
                                                  energy))

  def bootstrap_results(self, init_state):
    with tf.name_scope((self.name or "sgnht") + "_bootstrap_results"):
      _common.check_initial_state(init_state, self.target)
      dtype = _common.state_dtype(init_state)
      _common.refuse_minibatch_under_tfp_mh(self)
      energy = self.target.minibatch_energy(init_state,
                                            _common.BOOTSTRAP_SEED)
      if not self.compute_energy:
        energy = _common.not_computed(tf.math.is_finite(energy), dtype)
      return SGNHTResults(
          momentum=tf.nest.map_structure(tf.zeros_like, init_state),
          thermostat=tf.fill(tf.shape(energy),
                             tf.cast(self.diffusion, dtype)),
          energy=energy,
          step_size=_common.initial_step_size(self.step_size, dtype),
          step_count=tf.constant(0, tf.int32),
          diverged=tf.zeros(tf.shape(energy), tf.bool),
          seed=tfp.random.sanitize_seed(_common.BOOTSTRAP_SEED),
          target_log_prob=-energy)


def sgnht_update(position, momentum, thermostat, gradient, step_count,
                 step_size, diffusion, temperature, momentum_temperature,
                 seed):
  """One SGNHT transition given grad U~ at `position` (the kernel's update).

  At `step_count` 0 the step starts from a fresh momentum N(0, T I) (T =
  `momentum_temperature`, the kernel's temperature), folded into the step's
  noise (`dynamics.sgnht_step(refresh=...)`: one draw and no branch).
  `seed` is the step's seed, used as `one_step` uses it. Returns (position,
  momentum, thermostat).
  """
  _, noise_seed, _ = _common.step_seeds(seed, 3)
  noise = dynamics.standard_normal_like(momentum, noise_seed)
  return dynamics.sgnht_step(position, momentum, thermostat, gradient,
                             step_size, noise, diffusion, temperature,
                             refresh=tf.equal(step_count, 0),
                             refresh_temperature=momentum_temperature)
