"""Stochastic gradient Hamiltonian Monte Carlo as a `TransitionKernel`."""

import collections

import tensorflow as tf
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import broadcast_structure
from tfp_sgmcmc.dynamics import hamiltonian
from tfp_sgmcmc.kernels import base
from tfp_sgmcmc.kernels import checks
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.kernels import momentum as momentum_lib
from tfp_sgmcmc.kernels import tuning

__all__ = ["SGHMC", "SGHMCResults", "NaiveSGHMC", "NaiveSGHMCResults"]

INTEGRATORS = hamiltonian.INTEGRATORS


class SGHMCResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("SGHMCResults", [
        "momentum", "energy", "step_size", "step_count", "diverged",
        "seed", "target_log_prob", "momentum_distribution"])):
  """Results of one SGHMC step.

  Attributes:
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
    momentum_distribution: N(0, M), the mass matrix, batched to the chains
      (`()` for the identity). A kernel built with
      `store_parameters_in_results=True` reads it from here, where
      `tfp.experimental.mcmc.DiagonalMassMatrixAdaptation` sets it.
  """
  __slots__ = ()


class SGHMC(base.StochasticGradientKernel):
  """Stochastic gradient HMC (Chen, Fox, Guestrin 2014).

  Simulates dtheta = M^{-1} r dt, dr = -grad U dt - C r dt + N(0, 2 C T M dt)
  with a fresh minibatch gradient per step, which leaves
  exp(-U(theta) / T - r^T M^{-1} r / (2 T)) invariant; M is the mass matrix
  (`momentum_distribution`, N(0, M) in TFP's convention; the identity by
  default). The integrator is one of

  * `"euler"` (Chen et al. 2014, Algorithm 2, gradient at the current
    position):

        r'     = r - h grad U~(theta) - h C r + N(0, 2 (C T - B-hat) h M)
        theta' = theta + h M^{-1} r'

  * `"splitting"`, the symmetric ABOBA splitting of Chen, Ding & Carin
    (2015), 2nd order, with the friction flow solved exactly:

        theta1 = theta + M^{-1} r h/2,      r1 = exp(-C h/2) r
        r2     = r1 - h grad U~(theta1) + N(0, 2 (C T - B-hat) h M)
        r'     = exp(-C h/2) r2,            theta' = theta1 + M^{-1} r' h/2.

  A mass matrix is a preconditioner: in the velocity v = M^{-1} r the
  dynamics are dtheta = v dt, dv = -M^{-1} grad U dt - C v dt +
  N(0, 2 C T M^{-1} dt), so M^{-1} near the posterior covariance lets one
  step size serve coordinates whose scales differ by orders of magnitude.
  The friction C acts on r itself and the noise is scaled by M (friction
  matrix C M), the pairing that keeps N(0, T M) the momentum's law; with M
  the noise estimate B-hat must be 0.

  B-hat, the estimate of the gradient-noise term B(theta) = h V(theta) / 2,
  is `noise_estimate`: 0 (the usual choice), a constant (scalar, or one value
  per coordinate in the state's structure), or `"empirical_fisher"`, which
  uses B-hat = h V-hat / 2 with V-hat the per-coordinate variance of the
  minibatch gradient estimated from the same minibatch's per-example
  gradients (`target.gradient_noise_variance`); where that exceeds C T the
  injected noise is clipped at zero. T is the temperature.

  The momentum is drawn from N(0, T M) at the first step and, with
  `momentum_resampling_period=m`, again every m steps (Algorithm 2's outer
  loop); otherwise it is carried in the results. The Euler step folds such
  a fresh draw into its injected noise, which it may since r enters r' only
  as (1 - h C) r: r' = -h grad U~ + N(0, ((1 - h C)^2 T + 2 (C T - B-hat) h)
  M), the same distribution from one draw and no branch.

  `SGHMC.from_sgd_momentum(target, learning_rate, momentum_decay)` builds the
  same kernel from the SGD-with-momentum parameters (eta = h^2, alpha = h C,
  beta-hat = h B-hat).

  `compute_energy=False` skips the energy that each step otherwise
  computes only to report it (`energy`, `target_log_prob`) and for the
  divergence flag: the chain is the same bit for bit, those two fields hold
  NaN (not computed), and a chain is flagged `diverged` when its gradient,
  state or momentum is non-finite. With a full-batch target
  (`target_log_prob_fn=`) a step then evaluates the gradient only, not the
  log density at the new state too; its `target_log_prob` is then no log
  density, so `tfp.mcmc.MetropolisHastings` refuses the kernel.

  #### Examples

  ```python
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x**2, -1), gradient_noise_variance=4.)
  kernel = tfp_sgmcmc.SGHMC(target, step_size=0.1, friction=1.,
                            integrator="splitting")
  samples = tfp.mcmc.sample_chain(
      5000, tf.zeros([2]), kernel=kernel, trace_fn=None, seed=[0, 1])

  # Scales 0.01 and 10: a diagonal mass M^{-1} = the posterior variances,
  # fixed, or estimated by TFP's adaptation kernel during burn-in.
  scales = tf.constant([0.01, 10.])
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x / scales)**2, -1),
      gradient_noise_variance=0.)
  state = tf.zeros([4, 2])  # 4 chains
  kernel = tfp_sgmcmc.SGHMC(
      target, step_size=0.5, friction=1.,
      momentum_distribution=tfp_sgmcmc.diagonal_momentum_distribution(
          state, batch_ndims=1, inverse_mass=scales**2))
  # M^{-1} from the running variance of the first 500 states, then frozen
  # (the initial running variance is a guess worth 10 draws).
  adapted = tfp.experimental.mcmc.DiagonalMassMatrixAdaptation(
      tfp_sgmcmc.SGHMC(
          target, step_size=0.5, friction=1.,
          momentum_distribution=tfp_sgmcmc.diagonal_momentum_distribution(
              state, batch_ndims=1, inverse_mass=[1e-4, 1.])),
      tfp.experimental.stats.RunningVariance.from_stats(
          num_samples=10., mean=tf.zeros([2]), variance=[1e-4, 1.]),
      num_estimation_steps=500)
  ```

  Args:
    target: a `tfp_sgmcmc` target giving (minibatch) gradients; or None
      with `target_log_prob_fn`.
    step_size: h > 0: a scalar, a tensor broadcastable against each state
      part, a list with one per part, or a schedule `step_count -> h`.
    friction: C > 0.
    noise_estimate: B-hat >= 0: a number, one value per coordinate in the
      state's structure, or `"empirical_fisher"`; 0 with a
      `momentum_distribution`.
    integrator: `"euler"` or `"splitting"`.
    momentum_resampling_period: None (draw the momentum at the first step
      only) or m >= 1 (redraw it every m steps).
    temperature: T > 0; the chain samples exp(-U / T).
    name: name scope of the kernel's ops.
    target_log_prob_fn: a full-batch log density (TFP's convention), in
      place of `target`.
    compute_energy: False to skip the energy that is only reported (above).
    store_parameters_in_results: True when a TFP adaptation kernel wraps
      this one (they set it): the step size and the momentum distribution
      are read from the results.
    momentum_distribution: the mass matrix as TFP's
      `PreconditionedHamiltonianMonteCarlo` takes it: a distribution
      N(0, M) whose `sample` draws a momentum shaped like the state (a
      tensor, or a joint distribution with one part per state part;
      broadcast to the chains) and whose `log_prob` is -K(r) up to a
      constant. Diagonal (`tfp_sgmcmc.diagonal_momentum_distribution`,
      `tfd.MultivariateNormalDiag`) or dense (`tfd.MultivariateNormalTriL`,
      `tfp.experimental.distributions.
      MultivariateNormalPrecisionFactorLinearOperator`). None (the
      default): M = I.

  #### References

  [1] Chen, T., Fox, E. B. and Guestrin, C. Stochastic gradient Hamiltonian
      Monte Carlo. ICML 2014.
  [2] Chen, C., Ding, N. and Carin, L. On the convergence of stochastic
      gradient MCMC algorithms with high-order integrators. NeurIPS 2015.
  """

  _results_type = SGHMCResults
  _scope = "sghmc"

  def __init__(self, target=None, step_size=None, friction=None,
               noise_estimate=0., integrator="euler",
               momentum_resampling_period=None, temperature=1., name=None,
               target_log_prob_fn=None, compute_energy=True,
               store_parameters_in_results=False,
               momentum_distribution=None):
    self._target, target, target_log_prob_fn = interop.resolve_target(
        target, target_log_prob_fn, temperature, type(self).__name__)
    arguments.check_step_size(step_size)
    checks.check_compute_energy(compute_energy)
    if friction is None:
      raise TypeError("`friction` (C) is required; got None.")
    self._check_friction(friction)
    hamiltonian.check_sghmc_parameters(friction, noise_estimate, integrator,
                                       momentum_resampling_period,
                                       temperature, momentum_distribution)
    self._parameters = dict(
        target=target, step_size=step_size, friction=friction,
        noise_estimate=noise_estimate, integrator=integrator,
        momentum_resampling_period=momentum_resampling_period,
        temperature=temperature, name=name,
        target_log_prob_fn=target_log_prob_fn, compute_energy=compute_energy,
        store_parameters_in_results=store_parameters_in_results,
        momentum_distribution=momentum_distribution)

  def _check_friction(self, friction):
    arguments.check_positive("friction", friction)

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
    h, friction, b_hat = hamiltonian.sgd_momentum_to_sghmc(
        learning_rate, momentum_decay, noise_estimate)
    return cls(target, step_size=h, friction=friction, noise_estimate=b_hat,
               **kwargs)

  friction = arguments.parameter_property("friction")
  noise_estimate = arguments.parameter_property("noise_estimate")
  integrator = arguments.parameter_property("integrator")
  momentum_resampling_period = arguments.parameter_property(
      "momentum_resampling_period")
  temperature = arguments.parameter_property("temperature")
  momentum_distribution = arguments.parameter_property(
      "momentum_distribution")

  # The warm-up protocol (`kernels.tuning`): tested by AMAGOLD's test
  # around these dynamics; a mass only with noise_estimate 0.
  @property
  def _warmup_takes_mass(self):
    return not self.parameters.get("noise_estimate")

  def _warmup_check(self):
    tuning.check_temperature_one(self)

  def _warmup_test_kernel(self, num_test_steps, momentum_distribution):
    return tuning.friction_test_kernel(self, self.friction, num_test_steps,
                                       momentum_distribution)

  def _warmup_max_step_size(self, tolerance, scale):
    return tuning.stationary_bound(self.integrator, self.friction, tolerance,
                                   scale)

  def _noise_estimate(self, position, h, batch_seed):
    if isinstance(self.noise_estimate, str):
      variance = self.target.gradient_noise_variance(position, batch_seed)
      return tf.nest.map_structure(
          lambda v, h_part: 0.5 * h_part * v, variance,
          broadcast_structure(h, variance))
    return self.noise_estimate

  def _transition(self, state, prev, step):
    batch_seed, _, _ = random.derive_seeds(step.seed, 3)
    h = step.size
    t = self._temperature_at(step)
    refresh = hamiltonian.is_refresh_step(prev.step_count,
                                          self.momentum_resampling_period)
    mass = momentum_lib.of_step(self, prev)
    if self.integrator == "euler":
      # Folded into the update's noise (`sghmc_update`).
      momentum = prev.momentum
    else:
      momentum = hamiltonian.refresh_momentum(
          prev.momentum, prev.step_count, self.momentum_resampling_period,
          self.temperature, step.seed, mass)
    grad_position = hamiltonian.gradient_position(state, momentum, h,
                                                  self.integrator, mass)
    energy, grad = base.minibatch_energy_and_gradient(
        self.target, grad_position, batch_seed, self.compute_energy)
    new_state, new_momentum = hamiltonian.sghmc_update(
        grad_position, momentum, grad, h, self.friction,
        self._noise_estimate(grad_position, h, batch_seed), t,
        self.integrator, step.seed, refresh=refresh,
        refresh_temperature=self.temperature, momentum_distribution=mass)
    # Every integrator here moves theta last by the new momentum, which is
    # linear in the gradient: with the energy not computed, checking theta'
    # catches a non-finite gradient or momentum.
    checked = ([new_state] if energy is None else
               [new_state, new_momentum])
    valid = (None if isinstance(self.noise_estimate, str) else
             arguments.check_noise_within_friction(
                 self.friction, self.noise_estimate, self.temperature,
                 step.dtype))
    if valid is not None:
      checked.append(valid)
    return base.Move(new_state, energy, checked=checked,
                     kept=dict(momentum=new_momentum),
                     fields=dict(momentum_distribution=(
                         lambda _: prev.momentum_distribution)))

  def _initial_fields(self, init_state, energy):
    return dict(momentum=tf.nest.map_structure(tf.zeros_like, init_state),
                momentum_distribution=momentum_lib.initial_field(
                    self, init_state, energy))


class NaiveSGHMCResults(SGHMCResults):
  """Results of one naive SGHMC step: the fields of `SGHMCResults`.

  A type of its own so that the results say which kernel made them: a
  checkpoint of `NaiveSGHMC` (whose law is not the posterior) is not
  continued by `SGHMC`, nor the other way round, even by `load_chain`
  without `kernel=`, and `SGHMC.one_step` refuses them.
  """
  __slots__ = ()


class NaiveSGHMC(SGHMC):
  """Naive SGHMC: HMC's dynamics with a stochastic gradient and no friction.

      r' = r - h grad U~(theta),   theta' = theta + h r'

  with the momentum resampled every `momentum_resampling_period` steps
  (with a `momentum_distribution` N(0, M): r ~ N(0, M) and
  theta' = theta + h M^{-1} r'). Its stationary distribution is not the
  target: the gradient noise heats the chain (Chen et al. 2014, Corollary
  3.1). Provided for the papers' comparisons; use `SGHMC` to sample.

  Args:
    target: a `tfp_sgmcmc` target giving (minibatch) gradients; or None
      with `target_log_prob_fn`.
    step_size: h > 0: a scalar, a tensor broadcastable against each state
      part, a list with one per part, or a schedule `step_count -> h`.
    momentum_resampling_period: None (draw the momentum at the first step
      only) or m >= 1 (redraw it every m steps).
    name: name scope of the kernel's ops.
    target_log_prob_fn: a full-batch log density (TFP's convention), in
      place of `target`.
    compute_energy: False to skip the energy that is only reported.
    store_parameters_in_results: True when a TFP adaptation kernel wraps
      this one (they set it).
    momentum_distribution: the mass matrix N(0, M), as for `SGHMC`; None
      (the default): M = I.

  Returns:
    A `tfp.mcmc.TransitionKernel` (an `SGHMC` with friction 0, no noise
    injected and the Euler integrator) whose results are
    `NaiveSGHMCResults` (the fields of `SGHMCResults`).

  #### Example

  ```python
  kernel = tfp_sgmcmc.NaiveSGHMC(target, step_size=0.01,
                                 momentum_resampling_period=50)
  samples, energy = tf.function(lambda: tfp.mcmc.sample_chain(
      300, tf.zeros([4, d]), kernel=kernel,
      trace_fn=lambda _, r: r.energy, seed=[0, 1]), jit_compile=True)()
  print(samples.shape, energy.shape)   # (300, 4, 2) (300, 4)
  ```
  """

  def __init__(self, target=None, step_size=None,
               momentum_resampling_period=None, name=None,
               target_log_prob_fn=None, compute_energy=True,
               store_parameters_in_results=False,
               momentum_distribution=None):
    super().__init__(target, step_size, friction=0., noise_estimate=0.,
                     integrator="euler",
                     momentum_resampling_period=momentum_resampling_period,
                     temperature=1., name=name,
                     target_log_prob_fn=target_log_prob_fn,
                     compute_energy=compute_energy,
                     store_parameters_in_results=store_parameters_in_results,
                     momentum_distribution=momentum_distribution)
    self._parameters = dict(
        target=self._parameters["target"], step_size=step_size,
        momentum_resampling_period=momentum_resampling_period, name=name,
        target_log_prob_fn=self._parameters["target_log_prob_fn"],
        compute_energy=compute_energy,
        store_parameters_in_results=store_parameters_in_results,
        momentum_distribution=momentum_distribution)

  _results_type = NaiveSGHMCResults

  def _check_friction(self, friction):
    del friction  # Zero by construction.

  # Not tuned by `warm_up`: without friction the chain is not the one
  # SGHMC's test describes (and its law is not the posterior).
  _warmup_test_kernel = None

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
