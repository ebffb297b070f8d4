"""Stochastic gradient Nose-Hoover thermostat as a `TransitionKernel`."""

import collections

import tensorflow as tf
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype
from tfp_sgmcmc.dynamics import hamiltonian
from tfp_sgmcmc.kernels import base
from tfp_sgmcmc.kernels import checks
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.kernels import momentum as momentum_lib
from tfp_sgmcmc.kernels import tuning

__all__ = ["SGNHT", "SGNHTResults"]


class SGNHTResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("SGNHTResults", [
        "momentum", "thermostat", "energy", "step_size", "step_count",
        "diverged", "seed", "target_log_prob", "momentum_distribution"])):
  """Results of one SGNHT step.

  Attributes:
    momentum: r after the step (structure of the state).
    thermostat: xi after the step, one per chain: the adaptive friction.
    energy: minibatch estimate U~ where the gradient was evaluated; NaN
      (not computed) for a kernel built with `compute_energy=False`.
    step_size, step_count, diverged, seed: as for `SGHMCResults`.
    target_log_prob, momentum_distribution: as for `SGHMCResults`
      (`target_log_prob` NaN with `compute_energy=False`).
  """
  __slots__ = ()


class SGNHT(base.StochasticGradientKernel):
  """Stochastic gradient Nose-Hoover thermostat (Ding et al. 2014).

      r'      = r - h xi r - h grad U~(theta) + sqrt(2 A h T) z,  z ~ N(0, M)
      theta'  = theta + h M^{-1} r'
      xi'     = xi + h (r'^T M^{-1} r' / d - T)

  SGHMC needs its friction matched to the unknown gradient noise; SGNHT's
  thermostat xi adapts the friction until the kinetic energy per dimension,
  r^T M^{-1} r / d, averages T (the temperature, 1 for the posterior),
  whatever the size of the noise. d counts the parameters of one chain (all
  parts); each chain has its own thermostat, initialised at A. M is the
  mass matrix (`momentum_distribution`, N(0, M) in TFP's convention; the
  identity by default); the momentum starts from N(0, T M).

  `compute_energy=False` skips the energy U~ that each step otherwise
  computes only to report it (`energy`, `target_log_prob`) and for the
  divergence flag: the chain is the same bit for bit, those two fields hold
  NaN (not computed), and a chain is flagged `diverged` when its gradient,
  state, momentum or thermostat is non-finite. With a full-batch target a
  step then evaluates the gradient only.

  #### Example

  ```python
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x**2, -1), gradient_noise_variance=25.)
  kernel = tfp_sgmcmc.SGNHT(target, step_size=0.05, diffusion=1.)
  samples = tfp.mcmc.sample_chain(5000, tf.zeros([10]), kernel=kernel,
                                  trace_fn=None, seed=[0, 1])
  # With a diagonal mass matrix M = diag(1 / v):
  v = tf.linspace(0.1, 10., 10)
  kernel = tfp_sgmcmc.SGNHT(
      target, step_size=0.05, diffusion=1.,
      momentum_distribution=tfp_sgmcmc.diagonal_momentum_distribution(
          tf.zeros([10]), batch_ndims=0, inverse_mass=v))
  ```

  Args:
    target: a `tfp_sgmcmc` target giving (minibatch) gradients; or None
      with `target_log_prob_fn`.
    step_size: h > 0, one for all parts (a scalar, a tensor per chain or
      per coordinate, or a schedule).
    diffusion: A >= 0, the injected noise and the thermostat's start.
    temperature: T > 0.
    name: name scope of the kernel's ops.
    target_log_prob_fn: a full-batch log density (TFP's convention), in
      place of `target`.
    compute_energy: False to skip the energy that is only reported (above).
    store_parameters_in_results: True when a TFP adaptation kernel wraps
      this one (it sets it): the step size and the momentum distribution
      are read from the results.
    momentum_distribution: N(0, M) as TFP's
      `PreconditionedHamiltonianMonteCarlo` takes it (see `SGHMC`); None
      (the default): M = I.

  #### References

  [1] Ding, N., Fang, Y., Babbush, R., Chen, C., Skeel, R. D. and Neven, H.
      Bayesian sampling using stochastic gradient thermostats. NeurIPS 2014.
  """

  _results_type = SGNHTResults
  _scope = "sgnht"

  def __init__(self, target=None, step_size=None, diffusion=1.,
               temperature=1., name=None, target_log_prob_fn=None,
               compute_energy=True, store_parameters_in_results=False,
               momentum_distribution=None):
    self._target, target, target_log_prob_fn = interop.resolve_target(
        target, target_log_prob_fn, temperature, type(self).__name__)
    checks.check_compute_energy(compute_energy)
    # One thermostat for all coordinates: one step size for all parts.
    arguments.check_step_size(step_size, per_part=False)
    arguments.check_positive("diffusion", diffusion, allow_zero=True)
    arguments.check_positive("temperature", temperature)
    self._parameters = dict(
        target=target, step_size=step_size, diffusion=diffusion,
        temperature=temperature, name=name,
        target_log_prob_fn=target_log_prob_fn, compute_energy=compute_energy,
        store_parameters_in_results=store_parameters_in_results,
        momentum_distribution=momentum_distribution)

  diffusion = arguments.parameter_property("diffusion")
  temperature = arguments.parameter_property("temperature")
  momentum_distribution = arguments.parameter_property(
      "momentum_distribution")

  # The warm-up protocol (`kernels.tuning`): AMAGOLD's test around these
  # dynamics, with C the diffusion A (where the thermostat settles without
  # gradient noise).
  _warmup_takes_mass = True

  def _warmup_check(self):
    tuning.check_temperature_one(self)

  def _warmup_test_kernel(self, num_test_steps, momentum_distribution):
    return tuning.friction_test_kernel(self, self.diffusion, num_test_steps,
                                       momentum_distribution)

  def _warmup_max_step_size(self, tolerance, scale):
    return tuning.stationary_bound("thermostat", self.diffusion, tolerance,
                                   scale)

  def _transition(self, state, prev, step):
    batch_seed, _, _ = random.derive_seeds(step.seed, 3)
    t = self._temperature_at(step)
    energy, grad = base.minibatch_energy_and_gradient(
        self.target, state, batch_seed, self.compute_energy)
    new_state, new_momentum, new_thermostat = hamiltonian.sgnht_update(
        state, prev.momentum, prev.thermostat, grad, prev.step_count,
        step.size, self.diffusion, t, self.temperature, step.seed,
        momentum_lib.of_step(self, prev))
    # A non-finite gradient makes a non-finite momentum (the kick is linear
    # in it): with or without the energy, the three are checked.
    return base.Move(new_state, energy,
                     checked=[new_state, new_momentum, new_thermostat],
                     kept=dict(momentum=new_momentum,
                               thermostat=new_thermostat),
                     fields=dict(momentum_distribution=(
                         lambda _: prev.momentum_distribution)))

  def _initial_fields(self, init_state, energy):
    return dict(
        momentum=tf.nest.map_structure(tf.zeros_like, init_state),
        thermostat=tf.fill(tf.shape(energy),
                           as_dtype(self.diffusion, energy.dtype)),
        momentum_distribution=momentum_lib.initial_field(self, init_state,
                                                         energy))
