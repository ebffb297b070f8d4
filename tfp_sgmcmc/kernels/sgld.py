"""Stochastic gradient Langevin dynamics as a `tfp.mcmc.TransitionKernel`."""

import collections

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import dynamics
from tfp_sgmcmc.kernels import _common

__all__ = ["SGLD", "SGLDResults"]


class SGLDResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("SGLDResults", [
        "energy", "step_size", "step_count", "diverged", "seed",
        "target_log_prob", "grads_target_log_prob",
        "log_acceptance_correction"])):
  """Results of one SGLD step.

  Fields:
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


class SGLD(_common.UncalibratedKernel):
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
  `target_log_prob` hold NaN (not computed). On the N = 1e5 logistic
  regression of `benchmarks/chains.py` the energy costs 0.08 of a gradient
  at one chain and about half of one at 64 chains. Minibatch targets only:
  a full-batch target (`target_log_prob_fn=`) refuses it.

  #### Example

  ```python
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x**2, -1), gradient_noise_variance=1.)
  kernel = tfp_sgmcmc.SGLD(target, step_size=0.01)
  samples = tfp.mcmc.sample_chain(
      2000, tf.zeros([2]), kernel=kernel, trace_fn=None, seed=[0, 1])
  ```

  #### References

  [1] Welling, M. and Teh, Y. W. Bayesian learning via stochastic gradient
      Langevin dynamics. ICML 2011.
  """

  def __init__(self, target=None, step_size=None, temperature=1., name=None,
               target_log_prob_fn=None, compute_energy=True):
    sampled, target, target_log_prob_fn = _common.resolve_target(
        target, target_log_prob_fn)
    _common.check_step_size(step_size)
    _common.check_positive("temperature", temperature)
    _common.check_compute_energy(compute_energy, sampled)
    self._target = sampled
    self._parameters = dict(target=target, step_size=step_size,
                            temperature=temperature, name=name,
                            target_log_prob_fn=target_log_prob_fn,
                            compute_energy=compute_energy)

  @property
  def has_log_acceptance_correction(self):
    """Whether the results' `log_acceptance_correction` is the move's log
    proposal ratio (full-batch target: MALA's), so an M-H test may use it;
    with a minibatch target it is zero and M-H wrappers refuse the kernel."""
    return _common.reports_exact_log_prob(self.target)

  target = _common.sampled_target_property()
  target_log_prob_fn = _common.parameter_property("target_log_prob_fn")
  step_size = _common.parameter_property("step_size")
  temperature = _common.parameter_property("temperature")
  compute_energy = _common.parameter_property("compute_energy")
  name = _common.parameter_property("name")

  def one_step(self, current_state, previous_kernel_results, seed=None):
    current_state = _common.check_step(self, current_state,
                                       previous_kernel_results, SGLDResults)
    with tf.name_scope(self.name or "sgld_one_step"):
      batch_seed, _ = _common.step_seeds(seed, 2)
      dtype = _common.state_dtype(current_state)
      prev = previous_kernel_results
      step_count = _common.step_count_of(prev)
      h = _common.step_size_at(self.step_size, step_count,
                               prev.step_size, dtype)
      full_batch = _common.reports_exact_log_prob(self.target)
      if full_batch:  # The gradient at this state, from the previous step.
        energy = -prev.target_log_prob
        grad = tf.nest.map_structure(tf.negative, prev.grads_target_log_prob)
      else:
        energy, grad = _common.minibatch_energy_and_gradient(
            self.target, current_state, batch_seed, self.compute_energy)
      t = _common.temperature_at(self.step_size, step_count,
                                 self.temperature, dtype)
      proposed = sgld_update(current_state, grad, h, t, seed)
      if full_batch:
        new_energy, new_grad = self.target.energy_and_gradient(proposed,
                                                               batch_seed)
        correction = dynamics.langevin_log_proposal_ratio(
            current_state, proposed, grad, new_grad, h, t,
            batch_ndims=energy.shape.rank)
        finite = _common.finite_per_chain(new_energy, [proposed, new_grad])
        finite = finite & tf.math.is_finite(correction)
      elif energy is None:  # compute_energy=False.
        # The move is linear in the gradient, so a non-finite gradient
        # makes a non-finite state: checking the state catches it.
        finite = _common.finite_per_chain(None, [proposed],
                                          chains=prev.diverged)
        energy = _common.not_computed(prev.diverged, dtype)
        correction = tf.zeros(tf.shape(energy), dtype)
      else:
        finite = _common.finite_per_chain(energy, proposed)
        correction = tf.zeros_like(energy)
      diverged = tf.broadcast_to(prev.diverged, tf.shape(finite)) | ~finite
      next_state = _common.keep_where_diverged(diverged, current_state,
                                               proposed)
      if full_batch:
        new_energy = tf.where(diverged, energy, new_energy)
        grads = _common.keep_where_diverged(diverged, grad, new_grad)
        correction = tf.where(diverged, tf.zeros_like(correction),
                              correction)
      else:
        new_energy, grads = energy, grad
      return next_state, SGLDResults(
          energy=energy, step_size=h, step_count=prev.step_count + 1,
          diverged=diverged, seed=tfp.random.sanitize_seed(seed),
          target_log_prob=-new_energy,
          grads_target_log_prob=tf.nest.map_structure(tf.negative, grads),
          log_acceptance_correction=correction)

  def bootstrap_results(self, init_state):
    with tf.name_scope((self.name or "sgld") + "_bootstrap_results"):
      _common.refuse_minibatch_under_tfp_mh(self)
      _common.check_initial_state(init_state, self.target)
      dtype = _common.state_dtype(init_state)
      energy, grad = self.target.energy_and_gradient(init_state,
                                                     _common.BOOTSTRAP_SEED)
      if not self.compute_energy:
        energy = _common.not_computed(tf.math.is_finite(energy), dtype)
      return SGLDResults(
          energy=energy,
          step_size=_common.initial_step_size(self.step_size, dtype),
          step_count=_common.initial_step_count(self.target, energy),
          diverged=tf.zeros(tf.shape(energy), tf.bool),
          seed=tfp.random.sanitize_seed(_common.BOOTSTRAP_SEED),
          target_log_prob=-energy,
          grads_target_log_prob=tf.nest.map_structure(tf.negative, grad),
          log_acceptance_correction=tf.zeros_like(energy))


def sgld_update(position, gradient, step_size, temperature, seed):
  """One SGLD transition given grad U~ at `position` (the kernel's update).

  `seed` is the step's seed (the one `one_step` receives); the noise is drawn
  from it exactly as the kernel draws it, so a caller that supplies the
  gradient itself (the Keras adapter) runs the kernel's chain.
  """
  _, noise_seed = _common.step_seeds(seed, 2)
  noise = dynamics.standard_normal_like(position, noise_seed)
  return dynamics.langevin_step(position, gradient, step_size, noise,
                                temperature)
