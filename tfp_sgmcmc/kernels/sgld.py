"""Stochastic gradient Langevin dynamics as a `tfp.mcmc.TransitionKernel`."""

import collections

import tensorflow as tf
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments
from tfp_sgmcmc import dynamics
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import choose, finite_per_chain
from tfp_sgmcmc.kernels import base
from tfp_sgmcmc.kernels import checks
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.kernels import tuning

__all__ = ["SGLD", "SGLDResults"]


class SGLDResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("SGLDResults", [
        "energy", "step_size", "step_count", "diverged", "seed",
        "target_log_prob", "grads_target_log_prob",
        "log_acceptance_correction"])):
  """Results of one SGLD step.

  Attributes:
    energy: minibatch estimate U~ at the position where this step's gradient
      was evaluated (the previous state), one value per chain; NaN (not
      computed) for a kernel built with `compute_energy=False`.
    step_size: h used by this step (a schedule's value, or the constant).
    step_count: number of steps taken so far (per chain with a full-batch
      target, where TFP's MetropolisHastings keeps a rejected chain's).
    diverged: per chain, True once the chain met a non-finite energy or
      state (with `compute_energy=False`: a non-finite gradient or state);
      such a chain stays at its last finite state.
    seed: the stateless seed this step used.
    target_log_prob: with a full-batch target (`target_log_prob_fn=`), the
      exact log density at the state this step returned; with a minibatch
      target, -U~ on this step's batch at the previous state (the estimate
      the step saw; not a density to compare states with); NaN (not
      computed) with `compute_energy=False`.
    grads_target_log_prob: its gradient, in the structure of the state
      (full batch: at the returned state, reused by the next step, so a
      full-batch step costs one gradient as MALA's does).
    log_acceptance_correction: full batch: log q(new -> old) - log q(old ->
      new) of the Gaussian move, so `tfp.mcmc.MetropolisHastings` around
      this kernel is MALA; zero with a minibatch target (where TFP's
      MetropolisHastings is refused).
  """
  __slots__ = ()


class SGLD(base.StochasticGradientKernel):
  """Stochastic gradient Langevin dynamics (Welling & Teh 2011).

  Each step draws a fresh minibatch and moves

      theta_{l+1} = theta_l - h_l grad U~_l(theta_l) + sqrt(2 h_l T) xi_l,
      xi_l ~ N(0, I),

  with a constant step size h or a decreasing schedule such as
  `PolynomialDecay(a, b, gamma)`: h_l = a (b + l)^(-gamma). With a decreasing
  schedule, posterior averages should weight each draw by its h_l
  (`tfp_sgmcmc.step_size_weighted_mean`). T is the temperature (1 for the
  posterior).

  SGLD is not calibrated: its stationary distribution differs from the target
  by O(h) (Euler discretisation) plus the effect of gradient noise.

  The update uses only the gradient. The minibatch energy U~ each step also
  computes is reported (`energy`, `target_log_prob`) and read by the
  divergence flag; `compute_energy=False` skips it (as TFP's
  `UncalibratedLangevin(compute_acceptance=False)` skips its acceptance
  term): the chain is the same, bit for bit, and the results' `energy` and
  `target_log_prob` hold NaN (not computed). With many chains the energy
  can cost a good part of a gradient (docs/performance.md). Minibatch
  targets only: a full-batch target (`target_log_prob_fn=`) refuses it.

  Args:
    target: a minibatch target (`InMemoryTarget`, `DatasetTarget`,
      `JointDistributionTarget`, ...) that gives U~ and grad U~ on a fresh
      minibatch per step. Give this or `target_log_prob_fn`, not both.
    step_size: h, a positive float, one per part of a structured state
      (a list), or a schedule (`PolynomialDecay`, `CyclicalSchedule`).
    temperature: T > 0; 1 samples the posterior, T < 1 a cold posterior
      proportional to exp(-U / T), through the injected noise.
    name: a name for the ops the kernel creates.
    target_log_prob_fn: a full-batch log density (TFP's convention): the
      gradient is exact, `target_log_prob` is the exact log density, and
      `tfp.mcmc.MetropolisHastings` around the kernel is MALA.
    compute_energy: False skips the minibatch energy, which the update does
      not use (minibatch targets only).
    store_parameters_in_results: TFP's flag, set by TFP's step-size
      adaptation kernels when they wrap this one.

  Returns:
    A `tfp.mcmc.TransitionKernel`: `one_step(state, results, seed)` returns
    the new state and `SGLDResults`.

  Raises:
    ValueError: a step size, temperature or target that cannot work, named
      with the value received.

  #### Example

  SGLD on a Gaussian with noisy gradients, four chains, compiled:

  ```python
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x**2, -1), gradient_noise_variance=1.)
  kernel = tfp_sgmcmc.SGLD(target, step_size=0.01)
  samples = tf.function(lambda: tfp.mcmc.sample_chain(
      2000, tf.zeros([4, 2]), kernel=kernel, num_burnin_steps=200,
      trace_fn=None, seed=[0, 1]), jit_compile=True)()
  print(tf.math.reduce_variance(samples, [0, 1]))   # about 1 (O(h) bias)
  ```

  #### References

  [1] Welling, M. and Teh, Y. W. Bayesian learning via stochastic gradient
      Langevin dynamics. ICML 2011.
  """

  _results_type = SGLDResults
  _scope = "sgld"
  _per_chain_step_count = True

  def __init__(self, target=None, step_size=None, temperature=1., name=None,
               target_log_prob_fn=None, compute_energy=True,
               store_parameters_in_results=False):
    sampled, target, target_log_prob_fn = interop.resolve_target(
        target, target_log_prob_fn, temperature, type(self).__name__)
    arguments.check_step_size(step_size)
    arguments.check_positive("temperature", temperature)
    checks.check_compute_energy_for_log_density(compute_energy, sampled)
    self._target = sampled
    self._parameters = dict(
        target=target, step_size=step_size, temperature=temperature,
        name=name, target_log_prob_fn=target_log_prob_fn,
        compute_energy=compute_energy,
        store_parameters_in_results=store_parameters_in_results)

  @property
  def has_log_acceptance_correction(self):
    """Whether the results' `log_acceptance_correction` is the move's log
    proposal ratio (full-batch target: MALA's), so an M-H test may use it;
    with a minibatch target it is zero and M-H wrappers refuse the kernel."""
    return interop.reports_exact_log_prob(self.target)

  temperature = arguments.parameter_property("temperature")

  # The warm-up protocol (`kernels.tuning`): T of its own steps tested with
  # their path ratio, two minibatch gradients per step; no mass matrix.
  def _warmup_check(self):
    tuning.check_temperature_one(self)

  def _warmup_test_kernel(self, num_test_steps, momentum_distribution):
    del momentum_distribution  # SGLD has no mass matrix.
    return tuning.langevin_path_test_kernel(self, num_test_steps)

  def _warmup_gradients_per_test(self, num_test_steps):
    return 2 * num_test_steps

  def _warmup_max_step_size(self, tolerance, scale):
    return tuning.stationary_bound("langevin", 0., tolerance, scale)

  def _transition(self, state, prev, step):
    batch_seed, _ = random.derive_seeds(step.seed, 2)
    t = self._temperature_at(step)
    if interop.reports_exact_log_prob(self.target):
      return self._exact_transition(state, prev, step, t, batch_seed)
    energy, grad = base.minibatch_energy_and_gradient(
        self.target, state, batch_seed, self.compute_energy)
    proposed = dynamics.sgld_update(state, grad, step.size, t, step.seed)
    fields = dict(
        grads_target_log_prob=tf.nest.map_structure(tf.negative, grad),
        log_acceptance_correction=lambda diverged: tf.zeros(
            tf.shape(diverged), step.dtype))
    # The move is linear in the gradient, so a non-finite gradient makes a
    # non-finite state: with the energy not computed, the state is checked.
    return base.Move(proposed, energy, checked=[proposed], fields=fields)

  def _exact_transition(self, state, prev, step, t, batch_seed):
    """Full-batch target: the gradient at this state comes from the
    previous step, the one at the proposal is reused by the next, and the
    results carry MALA's proposal ratio."""
    energy = -prev.target_log_prob
    grad = tf.nest.map_structure(tf.negative, prev.grads_target_log_prob)
    proposed = dynamics.sgld_update(state, grad, step.size, t, step.seed)
    new_energy, new_grad = self.target.energy_and_gradient(proposed,
                                                           batch_seed)
    correction = dynamics.langevin_log_proposal_ratio(
        state, proposed, grad, new_grad, step.size, t,
        batch_ndims=energy.shape.rank)
    finite = finite_per_chain(new_energy, [proposed, new_grad])
    finite = finite & tf.math.is_finite(correction)
    fields = dict(
        target_log_prob=lambda diverged: -tf.where(diverged, energy,
                                                   new_energy),
        grads_target_log_prob=lambda diverged: tf.nest.map_structure(
            tf.negative, choose(diverged, grad, new_grad)),
        log_acceptance_correction=lambda diverged: tf.where(
            diverged, tf.zeros_like(correction), correction))
    return base.Move(proposed, energy, fields=fields, finite=finite)

  def _bootstrap_energy(self, init_state):
    energy, grad = self.target.energy_and_gradient(init_state,
                                                   random.BOOTSTRAP_SEED)
    return energy, dict(
        grads_target_log_prob=tf.nest.map_structure(tf.negative, grad))

  def _initial_fields(self, init_state, energy):
    return dict(log_acceptance_correction=tf.zeros_like(energy))
