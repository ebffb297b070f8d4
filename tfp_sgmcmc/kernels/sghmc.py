"""Stochastic gradient Hamiltonian Monte Carlo as a `TransitionKernel`."""

import collections
import math

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import dynamics
from tfp_sgmcmc.kernels import _common

__all__ = ["SGHMC", "SGHMCResults", "NaiveSGHMC"]

INTEGRATORS = ("euler", "splitting")


class SGHMCResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("SGHMCResults", [
        "momentum", "energy", "step_size", "step_count", "diverged",
        "seed", "target_log_prob"])):
  """Results of one SGHMC step.

  Fields:
    momentum: r after the step, in the structure of the state. It lives here
      so that a chain continues across `sample_chain` calls
      (`previous_kernel_results=`).
    energy: minibatch estimate U~ where this step's gradient was evaluated;
      NaN (not computed) for a kernel built with `compute_energy=False`.
    step_size: h used by this step.
    step_count: number of steps taken so far.
    diverged: per chain, True once a non-finite energy, state or momentum was
      met (with `compute_energy=False`: gradient, state or momentum); such a
      chain stays at its last finite state.
    seed: the stateless seed this step used.
    target_log_prob: full-batch target: log density at the returned state;
      minibatch target: -U~, the estimate this step saw (see `SGLDResults`);
      NaN (not computed) with `compute_energy=False`.
  """
  __slots__ = ()


class SGHMC(_common.UncalibratedKernel):
  """Stochastic gradient HMC (Chen, Fox, Guestrin 2014).

  Simulates dtheta = r dt, dr = -grad U dt - C r dt + N(0, 2 C T dt) with a
  fresh minibatch gradient per step. The integrator is one of

  * `"euler"` (Chen et al. 2014, Algorithm 2, gradient at the current
    position):

        r'     = r - h grad U~(theta) - h C r + N(0, 2 (C T - B-hat) h)
        theta' = theta + h r'

  * `"splitting"`, the symmetric ABOBA splitting of Chen, Ding & Carin
    (2015), 2nd order, with the friction flow solved exactly:

        theta1 = theta + r h/2,      r1 = exp(-C h/2) r
        r2     = r1 - h grad U~(theta1) + N(0, 2 (C T - B-hat) h)
        r'     = exp(-C h/2) r2,     theta' = theta1 + r' h/2.

  B-hat, the estimate of the gradient-noise term B(theta) = h V(theta) / 2,
  is `noise_estimate`: 0 (the usual choice), a constant (scalar, or one value
  per coordinate in the state's structure), or `"empirical_fisher"`, which
  uses B-hat = h V-hat / 2 with V-hat the per-coordinate variance of the
  minibatch gradient estimated from the same minibatch's per-example
  gradients (`target.gradient_noise_variance`); where that exceeds C T the
  injected noise is clipped at zero. T is the temperature.

  The momentum is drawn from N(0, T I) at the first step and, with
  `momentum_resampling_period=m`, again every m steps (Algorithm 2's outer
  loop); otherwise it is carried in the results. The Euler step folds such
  a fresh draw into its injected noise, which it may since r enters r' only
  as (1 - h C) r: r' = -h grad U~ + N(0, (1 - h C)^2 T + 2 (C T - B-hat) h),
  the same distribution from one draw and no branch.

  `SGHMC.from_sgd_momentum(target, learning_rate, momentum_decay)` builds the
  same kernel from the SGD-with-momentum parameters (eta = h^2, alpha = h C,
  beta-hat = h B-hat).

  `compute_energy=False` skips the minibatch energy U~ that each step
  otherwise computes only to report it (`energy`, `target_log_prob`) and
  for the divergence flag: the chain is the same bit for bit, those two
  fields hold NaN (not computed), and a chain is flagged `diverged` when its
  gradient, state or momentum is non-finite. Minibatch targets only (see
  `SGLD`).

  #### Example

  ```python
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x**2, -1), gradient_noise_variance=4.)
  kernel = tfp_sgmcmc.SGHMC(target, step_size=0.1, friction=1.,
                            integrator="splitting")
  samples = tfp.mcmc.sample_chain(
      5000, tf.zeros([2]), kernel=kernel, trace_fn=None, seed=[0, 1])
  ```

  #### References

  [1] Chen, T., Fox, E. B. and Guestrin, C. Stochastic gradient Hamiltonian
      Monte Carlo. ICML 2014.
  [2] Chen, C., Ding, N. and Carin, L. On the convergence of stochastic
      gradient MCMC algorithms with high-order integrators. NeurIPS 2015.
  """

  def __init__(self, target=None, step_size=None, friction=None,
               noise_estimate=0., integrator="euler",
               momentum_resampling_period=None, temperature=1., name=None,
               target_log_prob_fn=None, compute_energy=True):
    self._target, target, target_log_prob_fn = _common.resolve_target(
        target, target_log_prob_fn)
    _common.check_step_size(step_size)
    _common.check_compute_energy(compute_energy, self._target)
    if friction is None:
      raise TypeError("`friction` (C) is required; got None.")
    self._check_friction(friction)
    check_parameters(friction, noise_estimate, integrator,
                     momentum_resampling_period, temperature)
    self._parameters = dict(
        target=target, step_size=step_size, friction=friction,
        noise_estimate=noise_estimate, integrator=integrator,
        momentum_resampling_period=momentum_resampling_period,
        temperature=temperature, name=name,
        target_log_prob_fn=target_log_prob_fn, compute_energy=compute_energy)

  def _check_friction(self, friction):
    _common.check_positive("friction", friction)

  @classmethod
  def from_sgd_momentum(cls, target, learning_rate, momentum_decay,
                        noise_estimate=0., **kwargs):
    """SGHMC in the SGD-with-momentum parameterisation (Chen et al. 2014).

        v' = v - eta grad U~(theta) - alpha v + N(0, 2 (alpha - beta-hat) eta)
        theta' = theta + v'

    is Euler SGHMC with v = h r, eta = h^2, alpha = h C, beta-hat = h B-hat,
    so h = sqrt(eta), C = alpha / sqrt(eta), B-hat = beta-hat / sqrt(eta).
    The kernel's `momentum` is r = v / h.
    """
    h, friction, b_hat = sgd_momentum_to_sghmc(learning_rate, momentum_decay,
                                               noise_estimate)
    return cls(target, step_size=h, friction=friction, noise_estimate=b_hat,
               **kwargs)

  target = _common.sampled_target_property()
  target_log_prob_fn = _common.parameter_property("target_log_prob_fn")
  step_size = _common.parameter_property("step_size")
  friction = _common.parameter_property("friction")
  noise_estimate = _common.parameter_property("noise_estimate")
  integrator = _common.parameter_property("integrator")
  momentum_resampling_period = _common.parameter_property("momentum_resampling_period")
  temperature = _common.parameter_property("temperature")
  compute_energy = _common.parameter_property("compute_energy")
  name = _common.parameter_property("name")

  def _noise_estimate(self, position, h, batch_seed):
    if isinstance(self.noise_estimate, str):
      variance = self.target.gradient_noise_variance(position, batch_seed)
      return tf.nest.map_structure(
          lambda v, h_part: 0.5 * h_part * v, variance,
          dynamics._broadcast_structure(h, variance))  # pylint: disable=protected-access
    return self.noise_estimate

  def one_step(self, current_state, previous_kernel_results, seed=None):
    current_state = _common.check_step(self, current_state,
                                       previous_kernel_results, SGHMCResults)
    with tf.name_scope(self.name or "sghmc_one_step"):
      batch_seed, _, _ = _common.step_seeds(seed, 3)
      prev = previous_kernel_results
      dtype = _common.state_dtype(current_state)
      h = _common.step_size_at(self.step_size, prev.step_count,
                               prev.step_size, dtype)
      t = _common.temperature_at(self.step_size, prev.step_count,
                                 self.temperature, dtype)
      refresh = is_refresh_step(prev.step_count,
                                self.momentum_resampling_period)
      if self.integrator == "euler":
        # Folded into the update's noise (`sghmc_update`).
        momentum = prev.momentum
      else:
        momentum = refresh_momentum(prev.momentum, prev.step_count,
                                    self.momentum_resampling_period,
                                    self.temperature, seed)
      grad_position = gradient_position(current_state, momentum, h,
                                        self.integrator)
      energy, grad = _common.minibatch_energy_and_gradient(
          self.target, grad_position, batch_seed, self.compute_energy)
      new_state, new_momentum = sghmc_update(
          grad_position, momentum, grad, h, self.friction,
          self._noise_estimate(grad_position, h, batch_seed), t,
          self.integrator, seed, refresh=refresh,
          refresh_temperature=self.temperature)
      if energy is None:  # compute_energy=False.
        # A non-finite gradient makes a non-finite momentum (the kick is
        # linear in it), and every integrator here moves theta last by the
        # new momentum (theta' = theta + h r', or + r' h / 2 after
        # splitting), so a non-finite momentum makes a non-finite theta':
        # checking theta' catches both.
        finite = _common.finite_per_chain(
            None, [new_state], chains=prev.diverged)
        energy = _common.not_computed(prev.diverged, dtype)
      else:
        finite = _common.finite_per_chain(energy, [new_state, new_momentum])
      diverged = tf.broadcast_to(prev.diverged, tf.shape(finite)) | ~finite
      new_state = _common.keep_where_diverged(diverged, current_state,
                                              new_state)
      new_momentum = _common.keep_where_diverged(diverged, prev.momentum,
                                                 new_momentum)
      return new_state, SGHMCResults(
          momentum=new_momentum, energy=energy, step_size=h,
          step_count=prev.step_count + 1, diverged=diverged,
          seed=tfp.random.sanitize_seed(seed),
          target_log_prob=_common.target_log_prob(self.target, new_state,
                                                  energy))

  def bootstrap_results(self, init_state):
    with tf.name_scope((self.name or "sghmc") + "_bootstrap_results"):
      _common.check_initial_state(init_state, self.target)
      dtype = _common.state_dtype(init_state)
      _common.refuse_minibatch_under_tfp_mh(self)
      energy = self.target.minibatch_energy(init_state,
                                            _common.BOOTSTRAP_SEED)
      if not self.compute_energy:
        energy = _common.not_computed(tf.math.is_finite(energy), dtype)
      return SGHMCResults(
          momentum=tf.nest.map_structure(tf.zeros_like, init_state),
          energy=energy,
          step_size=_common.initial_step_size(self.step_size, dtype),
          step_count=tf.constant(0, tf.int32),
          diverged=tf.zeros(tf.shape(energy), tf.bool),
          seed=tfp.random.sanitize_seed(_common.BOOTSTRAP_SEED),
          target_log_prob=-energy)


class NaiveSGHMC(SGHMC):
  """Naive SGHMC: HMC's dynamics with a stochastic gradient and no friction.

      r' = r - h grad U~(theta),   theta' = theta + h r'

  with the momentum resampled every `momentum_resampling_period` steps. Its
  stationary distribution is not the target: the gradient noise heats the
  chain (Chen et al. 2014, Corollary 3.1). Provided for the papers'
  comparisons; use `SGHMC` to sample.
  """

  def __init__(self, target=None, step_size=None,
               momentum_resampling_period=None, name=None,
               target_log_prob_fn=None, compute_energy=True):
    super().__init__(target, step_size, friction=0., noise_estimate=0.,
                     integrator="euler",
                     momentum_resampling_period=momentum_resampling_period,
                     temperature=1., name=name,
                     target_log_prob_fn=target_log_prob_fn,
                     compute_energy=compute_energy)
    self._parameters = dict(
        target=self._parameters["target"], step_size=step_size,
        momentum_resampling_period=momentum_resampling_period, name=name,
        target_log_prob_fn=self._parameters["target_log_prob_fn"],
        compute_energy=compute_energy)

  def _check_friction(self, friction):
    del friction  # Zero by construction.

  @property
  def friction(self):
    return 0.

  @property
  def noise_estimate(self):
    return 0.

  @property
  def integrator(self):
    return "euler"

  @property
  def temperature(self):
    return 1.


def check_parameters(friction, noise_estimate, integrator,
                     momentum_resampling_period, temperature):
  """The argument checks of SGHMC other than target, step size and the sign
  of the friction (the kernel's and the Keras sampler's)."""
  if integrator not in INTEGRATORS:
    raise ValueError(f"`integrator` must be one of {INTEGRATORS}; got "
                     f"{integrator!r}.")
  _common.check_positive("temperature", temperature)
  if isinstance(noise_estimate, str):
    if noise_estimate != "empirical_fisher":
      raise ValueError("`noise_estimate` must be a number, a structure of "
                       "per-coordinate values, or 'empirical_fisher'; got "
                       f"{noise_estimate!r}.")
  else:
    for value in tf.nest.flatten(noise_estimate):
      _common.check_positive("noise_estimate", value, allow_zero=True)
      b = _common.static_value(value)
      c = _common.static_value(friction)
      t = _common.static_value(temperature)
      if b is not None and c is not None and t is not None and (
          b > c * t).any():
        raise ValueError(
            f"`friction` C = {friction!r} must be >= `noise_estimate` "
            f"B-hat = {value!r} (times the temperature): the injected "
            "noise has variance 2 (C T - B-hat) h.")
  period = momentum_resampling_period
  if period is not None and (
      isinstance(period, bool) or not isinstance(period, (int, np.integer))
      or period < 1):
    raise ValueError("`momentum_resampling_period` must be None or an "
                     f"integer >= 1; got {period!r}.")


def is_refresh_step(step_count, period):
  """True where SGHMC's step `step_count` starts from a fresh momentum
  N(0, T I): step 0 and, with a resampling period m, every multiple of m."""
  if period is None:
    return tf.equal(step_count, 0)
  return tf.equal(step_count % period, 0)


def refresh_momentum(momentum, step_count, period, temperature, seed):
  """The momentum SGHMC's step `step_count` starts from, drawn.

  A fresh draw r ~ N(0, T I) at step 0 and, with a resampling period m, at
  every multiple of m (`is_refresh_step`); otherwise `momentum` as carried.
  The splitting integrator needs it drawn (its half drift moves theta by r
  before the gradient); the Euler update folds the fresh draw into its
  noise instead (`sghmc_update`), without a branch or a second draw.
  `seed` is the step's seed (that of `one_step`); the draw depends on
  nothing else, so a caller may make it ahead of the step (the Keras
  adapter does, to place the splitting integrator's half drift before the
  gradient).
  """
  _, _, momentum_seed = _common.step_seeds(seed, 3)
  dtype = tf.nest.flatten(momentum)[0].dtype
  momentum_scale = tf.sqrt(tf.cast(temperature, dtype))
  return tf.cond(
      is_refresh_step(step_count, period),
      lambda: tf.nest.map_structure(
          lambda z: momentum_scale * z,
          dynamics.standard_normal_like(momentum, momentum_seed)),
      lambda: momentum)


def gradient_position(position, momentum, step_size, integrator):
  """Where SGHMC's step evaluates grad U~: theta (Euler) or the half-drifted
  theta + r h/2 (splitting)."""
  if integrator == "euler":
    return position
  return dynamics.drift(position, momentum,
                        _common.scale_step(0.5, step_size))


def sghmc_update(grad_position, momentum, gradient, step_size, friction,
                 noise_estimate, temperature, integrator, seed,
                 refresh=None, refresh_temperature=1.):
  """One SGHMC transition given grad U~ at `grad_position` (the kernel's
  update, after `gradient_position`).

  Returns (theta', r'). `seed` is the step's seed, used as `one_step` uses
  it. Euler: `refresh` (`is_refresh_step`) says the step starts from a
  fresh momentum N(0, T0 I), T0 = `refresh_temperature`, in place of
  `momentum`; it is folded into the step's noise
  (`dynamics.sghmc_euler_momentum`). Splitting: `momentum` is already the
  refreshed one (`refresh_momentum`) and `refresh` is ignored.
  """
  _, noise_seed, _ = _common.step_seeds(seed, 3)
  noise = dynamics.standard_normal_like(momentum, noise_seed)
  if integrator == "euler":
    new_momentum = dynamics.sghmc_euler_momentum(
        momentum, gradient, step_size, friction, noise, noise_estimate,
        temperature, refresh=refresh, refresh_temperature=refresh_temperature)
  else:
    new_momentum = dynamics.sghmc_splitting_momentum(
        momentum, gradient, step_size, friction, noise, noise_estimate,
        temperature)
  drift_size = (step_size if integrator == "euler" else
                _common.scale_step(0.5, step_size))
  return dynamics.drift(grad_position, new_momentum, drift_size), new_momentum


def sgd_momentum_to_sghmc(learning_rate, momentum_decay, noise_estimate=0.):
  """(step_size h, friction C, noise_estimate B-hat) from the SGD-with-
  momentum units (eta, alpha, beta-hat): h = sqrt(eta), C = alpha / h,
  B-hat = beta-hat / h (Chen et al. 2014, Section 3.3)."""
  _common.check_positive("learning_rate", learning_rate)
  _common.check_positive("momentum_decay", momentum_decay)
  _common.check_positive("noise_estimate", noise_estimate, allow_zero=True)
  h = math.sqrt(float(learning_rate))
  return h, float(momentum_decay) / h, float(noise_estimate) / h
