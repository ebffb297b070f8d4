"""Stochastic gradient Barker dynamics (SGBD) as a `TransitionKernel`."""

import collections

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc.dynamics import barker
from tfp_sgmcmc.kernels import base
from tfp_sgmcmc.kernels import checks
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.targets.wrappers import tempered

__all__ = ["SGBD", "SGBDResults", "SGBD_VARIANTS"]

SGBD_VARIANTS = barker.SGBD_VARIANTS


class SGBDResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("SGBDResults", [
        "noise_std", "energy", "step_size", "step_count", "diverged",
        "seed", "target_log_prob"])):
  """Results of one SGBD step.

  Attributes:
    noise_std: c-SGBD's online estimate tau-hat of the standard deviation of
      the (N/n-scaled) minibatch gradient estimator, per coordinate, in the
      structure of the state, after this step's update (the value this step
      used). It lives here so that a chain continues across `sample_chain`
      calls. The other variants estimate no noise: `()`.
    energy: minibatch estimate U~ where this step's gradient was evaluated
      (the previous state), one value per chain; NaN (not computed) for a
      kernel built with `compute_energy=False`.
    step_size: sigma used by this step (a schedule's value, or the constant
      read from the previous results, so TFP's adaptation kernels can set it).
    step_count: number of steps taken so far.
    diverged: per chain, True once a non-finite energy, gradient, noise
      estimate or state was met; such a chain stays at its last finite state.
    seed: the stateless seed this step used.
    target_log_prob: as for `SGLDResults` (exact at the returned state with a
      full-batch target, else -`energy`; NaN with `compute_energy=False`).
  """
  __slots__ = ()


class SGBD(base.StochasticGradientKernel):
  """Stochastic gradient Barker dynamics (Mauri & Zanella 2024).

  The Barker proposal (Livingstone & Zanella 2022) with a minibatch gradient.
  Writing g = log pi = -U and delta_j = -dU~/dtheta_j for the minibatch
  estimate of d_j g on a fresh minibatch (N/n-scaled, eq. (2) of the paper),
  each step moves every coordinate independently:

      w_j ~ mu_sigma,
      b_j = +1 with probability P(delta_j, w_j), else -1,
      theta'_j = theta_j + b_j w_j.

  The increment's size |w_j| does not depend on the gradient, only its
  direction does: this is what makes SGBD robust to the step size and to
  targets whose coordinates live on very different scales. mu_sigma is
  `increment_distribution`:
  `"bimodal"`, 0.5 N(-sigma, (0.1 sigma)^2) + 0.5 N(sigma, (0.1 sigma)^2)
  (the paper's choice, after Vogrinc et al. 2022), or `"gaussian"`,
  N(0, sigma^2). The step size is sigma.

  The probability P is the `variant`:

  * `"vanilla"` (v-SGBD): p(delta, w) = 1 / (1 + exp(-w delta)). If the
    estimate is delta ~ N(d_j g, tau^2), Proposition 1 gives
    E[p(delta, w)] ~= p(c d_j g, w) with c = 1.702 / sqrt(1.702^2 + w^2 tau^2)
    < 1: v-SGBD is Barker with the gradient shrunk towards zero, so its
    stationary distribution is too wide (for small sigma, a Gaussian
    target's variance grows by about 1 / c).
  * `"corrected"` (c-SGBD, eq. (5) and Algorithm 2):

        p~(delta, w) = p(1.702 delta / sqrt(1.702^2 - tau-hat^2 w^2), w)
                                                   if |w| < 1.702 / tau-hat,
                     = 1(delta w > 0)              otherwise,

    with tau-hat_j an online estimate of the gradient noise, updated before
    each move on the step's minibatch:

        tau-hat_j <- (1 - beta) tau-hat_j + beta sqrt(V-hat_j),

    V-hat_j = `target.gradient_noise_variance(theta, seed)` on the same
    minibatch as the gradient. Scaling: tau-hat estimates the standard
    deviation of the N/n-scaled estimator delta_j, i.e. (N / sqrt(n)) times
    the per-example standard deviation for batches drawn with replacement,
    since that is the tau_theta of eq. (5) and Proposition 2. (Algorithm 2
    of the slides, read literally, averages the per-example standard
    deviation sqrt(sum_i (d_j g_i - mean)^2 / (n - 1)); that is smaller by
    N / sqrt(n) and would leave most of the bias in place.) tau-hat starts
    from `initial_noise_std`, or, if None, from the estimate at the initial
    state on the bootstrap minibatch.
  * `"extreme"` (e-SGBD): p-bar(delta, w) = 1(delta w > 0); each coordinate
    moves by |w_j| in the direction of the stochastic gradient.

  None of the variants is calibrated: with exact gradients v-SGBD is the
  unadjusted Barker proposal, biased by O(sigma^2). For an exact chain, see
  `tfp_sgmcmc.AmortizedBarker`.

  `compute_energy=False` skips the minibatch energy U~ that each step
  otherwise computes only to report it (`energy`, `target_log_prob`) and for
  the divergence flag: the chain is the same bit for bit, those two fields
  hold NaN (not computed), and a chain is flagged `diverged` when its
  gradient, noise estimate or state is non-finite. Minibatch targets only
  (see `SGLD`).

  #### Examples

  ```python
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x**2, -1), gradient_noise_variance=4.)
  kernel = tfp_sgmcmc.SGBD(target, step_size=0.5, variant="corrected",
                           noise_ema_weight=0.1)
  samples = tfp.mcmc.sample_chain(
      5000, tf.zeros([4, 2]), kernel=kernel, trace_fn=None, seed=[0, 1])
  ```

  #### References

  [1] Livingstone, S. and Zanella, G. The Barker proposal: combining
      robustness and efficiency in gradient-based MCMC. JRSS-B, 2022.
  [2] Mauri, L. and Zanella, G. Robust approximate sampling via stochastic
      gradient Barker dynamics. AISTATS 2024.
  [3] Vogrinc, J., Livingstone, S. and Zanella, G. Optimal design of the
      Barker proposal and other locally balanced Metropolis-Hastings
      algorithms. Biometrika, 2022.

  Args:
    target: a `tfp_sgmcmc` target. The corrected variant needs
      `gradient_noise_variance` (per-example gradients: an `InMemoryTarget`
      with `batch_size` >= 2, or a `NoisyGradientTarget`).
    step_size: sigma > 0, a scalar, a tensor broadcastable against each state
      part (e.g. `[num_chains, 1]`), or a schedule `step_count -> sigma`.
    variant: `"vanilla"`, `"corrected"` or `"extreme"`.
    increment_distribution: `"bimodal"` or `"gaussian"`.
    noise_ema_weight: beta in (0, 1), the weight of the new estimate in
      tau-hat's moving average (corrected variant only).
    initial_noise_std: tau-hat at the start (scalar or the state's
      structure), or None to estimate it at the initial state.
    temperature: T > 0; the sampled target is `TemperedTarget(target, T)`.
    name: name scope of the kernel's ops.
    target_log_prob_fn: a full-batch log density instead of `target` (or a
      TFP wrapper's function built on the target's).
    compute_energy: False to skip the per-step minibatch energy (results'
      `energy` and `target_log_prob` NaN; minibatch targets only).
  """

  _results_type = SGBDResults
  _scope = "sgbd"

  def __init__(self, target=None, step_size=None, variant="vanilla",
               increment_distribution="bimodal", noise_ema_weight=0.1,
               initial_noise_std=None, temperature=1., name=None,
               target_log_prob_fn=None, compute_energy=True,
               store_parameters_in_results=False):
    base_target, target, target_log_prob_fn = interop.resolve_target(
        target, target_log_prob_fn, temperature, type(self).__name__)
    checks.check_compute_energy_for_log_density(compute_energy, base_target)
    arguments.check_positive("temperature", temperature)
    # Barker's move probability has no noise scale to temper: sample
    # exp(-U / T) through the target instead.
    self._target = tempered(base_target, temperature)
    arguments.check_step_size(step_size)
    barker.check_variant(variant)
    barker.check_increment_distribution(increment_distribution)
    beta = arguments.static_value(noise_ema_weight)
    if beta is None or beta.ndim or not 0. < float(beta) < 1.:
      raise ValueError(f"`noise_ema_weight` (beta) must be a number in the "
                       f"open interval (0, 1); got {noise_ema_weight!r}.")
    if initial_noise_std is not None:
      for value in tf.nest.flatten(initial_noise_std):
        arguments.check_positive("initial_noise_std", value, allow_zero=True)
    if variant == "corrected":
      batch_size = getattr(target, "batch_size", None)
      if batch_size is not None and batch_size < 2:
        raise ValueError(
            "variant='corrected' estimates the gradient noise from the "
            "per-example gradients of each minibatch, which needs the "
            f"target's `batch_size` >= 2; got {batch_size}.")
    self._parameters = dict(
        target=target, step_size=step_size, variant=variant,
        increment_distribution=increment_distribution,
        noise_ema_weight=noise_ema_weight,
        initial_noise_std=initial_noise_std, temperature=temperature,
        name=name, target_log_prob_fn=target_log_prob_fn,
        compute_energy=compute_energy,
        store_parameters_in_results=store_parameters_in_results)

  @property
  def target(self):
    """The target sampled: `TemperedTarget(target, T)` when T != 1."""
    return self._target

  temperature = arguments.parameter_property("temperature")
  variant = arguments.parameter_property("variant")
  increment_distribution = arguments.parameter_property(
      "increment_distribution")
  noise_ema_weight = arguments.parameter_property("noise_ema_weight")
  initial_noise_std = arguments.parameter_property("initial_noise_std")

  def _transition(self, state, prev, step):
    batch_seed, _, _ = random.derive_seeds(step.seed, 3)
    energy, grad = base.minibatch_energy_and_gradient(
        self.target, state, batch_seed, self.compute_energy)
    variance = None
    if self.variant == "corrected":
      # The same seed, hence the same minibatch, as the gradient.
      variance = self.target.gradient_noise_variance(state, batch_seed)
    proposed, noise_std = barker.sgbd_update(
        state, grad, step.size, step.seed, self.variant,
        self.increment_distribution, prev.noise_std, variance,
        self.noise_ema_weight)
    # A NaN gradient gives a NaN probability, and `u < NaN` is False: the
    # move would look finite. So the gradient is checked too.
    return base.Move(proposed, energy, checked=[proposed, grad, noise_std],
                     kept=dict(noise_std=noise_std))

  def _initial_noise_std(self, init_state):
    if self.variant != "corrected":
      return ()
    if self.initial_noise_std is None:
      variance = self.target.gradient_noise_variance(
          init_state, tfp.random.sanitize_seed(random.BOOTSTRAP_SEED))
      return tf.nest.map_structure(
          lambda v, x: tf.sqrt(tf.cast(v, x.dtype)), variance, init_state)
    value = self.initial_noise_std
    if not tf.nest.is_nested(value):  # One value for every coordinate.
      value = tf.nest.map_structure(lambda _: value, init_state)
    return tf.nest.map_structure(
        lambda v, x: tf.broadcast_to(tf.cast(v, x.dtype), tf.shape(x)),
        value, init_state, check_types=False)

  def _initial_fields(self, init_state, energy):
    return dict(noise_std=self._initial_noise_std(init_state))
