"""AMAGOLD: the stochastic-leapfrog proposal and its amortized M-H test."""

import collections
import math
import numbers

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import dynamics
from tfp_sgmcmc import targets as targets_lib
from tfp_sgmcmc.kernels import _common
from tfp_sgmcmc.kernels import amortized_mh

__all__ = ["AMAGOLD", "UncalibratedAMAGOLD", "UncalibratedAMAGOLDResults"]


class UncalibratedAMAGOLDResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("UncalibratedAMAGOLDResults", [
        "momentum", "log_acceptance_correction", "minibatch_energy",
        "step_size", "step_count", "diverged", "seed", "target_log_prob"])):
  """Results of one stochastic-leapfrog proposal (T inner steps).

  Fields:
    momentum: r* = r_{T-1/2}, the momentum at the end of the proposal, in the
      structure of the state; the next proposal starts from it unless the
      momentum is resampled. It lives here so that a chain continues across
      `sample_chain` calls; `AmortizedMetropolisHastings` negates it on
      rejection.
    log_acceptance_correction: rho_{T-1/2}, the energy accumulator
      sum_t 1/2 eps sigma^-2 grad U~_t(theta_t)^T (r_{t-1/2} + r_{t+1/2}),
      one value per chain: the M-H log ratio is U(theta) - U(theta*) + rho.
    minibatch_energy: U~_{T-1}(theta_{T-1}), the minibatch energy at the last
      gradient evaluation (a cheap diagnostic, not used by either M-H test);
      NaN (not computed) for a kernel built with `compute_energy=False`.
    step_size: eps used by this step (for step-size adaptation).
    step_count: number of proposals made so far.
    diverged: per chain, True once a non-finite gradient energy, position,
      momentum or rho (which sums every gradient of the proposal) was met;
      such a chain keeps its last finite state (and under the M-H wrapper
      the proposal is rejected).
    seed: the stateless seed this step used.
    target_log_prob: at the proposal: the exact log density with a
      full-batch target (so `tfp.mcmc.MetropolisHastings` around this kernel
      is AMAGOLD with the exact test), else -`minibatch_energy`, the
      estimate the proposal saw (NaN with `compute_energy=False`).
      `AmortizedMetropolisHastings` with the exact test sets it to
      -U(theta*), which it computes anyway.
  """
  __slots__ = ()


def _as_dtype(value, dtype):
  """`value` in `dtype`; a Python number is converted directly (tf.cast of a
  Python float would round it to float32 first)."""
  if tf.is_tensor(value):
    return tf.cast(value, dtype)
  return tf.convert_to_tensor(value, dtype=dtype)


def _check_num_leapfrog_steps(num_leapfrog_steps):
  if (isinstance(num_leapfrog_steps, bool) or
      not isinstance(num_leapfrog_steps, (numbers.Integral, np.integer))):
    raise TypeError(f"`num_leapfrog_steps` (T) must be a Python integer "
                    f">= 1; got {num_leapfrog_steps!r}.")
  if num_leapfrog_steps < 1:
    raise ValueError(f"`num_leapfrog_steps` (T) must be >= 1; got "
                     f"{num_leapfrog_steps}.")


def _check_parameters(target, step_size, num_leapfrog_steps, friction,
                      momentum_std, resample_momentum):
  _common.check_target(target)
  _common.check_step_size(step_size)
  check_parameters(num_leapfrog_steps, friction, momentum_std,
                   resample_momentum)


class UncalibratedAMAGOLD(_common.UncalibratedKernel):
  """AMAGOLD's proposal: T steps of stochastic leapfrog with friction.

  From (theta, r), with step size eps, friction beta, momentum standard
  deviation sigma (mass sigma^2) and a fresh minibatch for each gradient
  (Zhang et al. 2020, Algorithm 2, lines 3-16):

      r_{-1/2} = r   (or r ~ N(0, sigma^2 I) if `resample_momentum`)
      theta_0  = theta + 1/2 eps sigma^-2 r_{-1/2}
      for t = 0, ..., T - 1:
        theta_t     = theta_{t-1} + eps sigma^-2 r_{t-1/2}         (t > 0)
        r_{t+1/2}   = ((1 - eps beta) r_{t-1/2} - eps grad U~_t(theta_t)
                       + eta_t) / (1 + eps beta),
                      eta_t ~ N(0, 4 eps beta sigma^2 I)
        rho_{t+1/2} = rho_{t-1/2}
                      + 1/2 eps sigma^-2 grad U~_t(theta_t)^T
                        (r_{t-1/2} + r_{t+1/2})
      theta* = theta_{T-1} + 1/2 eps sigma^-2 r_{T-1/2},  r* = r_{T-1/2}.

  It returns (theta*, results) with `momentum` = r* and
  `log_acceptance_correction` = rho, which is what
  `AmortizedMetropolisHastings` needs: the test is
  log a = U(theta) - U(theta*) + rho. Used alone (uncorrected) it is an SGHMC
  variant with a time-symmetric integrator; like SGHMC it is then biased at
  large step sizes. With beta = 0 and exact gradients it is the leapfrog
  integrator (position Verlet form) of HMC, and rho = K(r) - K(r*).

  The step size is read from the previous results each step (TFP's
  convention), so a step-size adaptation kernel that sets `step_size` there
  changes eps everywhere it appears, including the noise variance
  4 eps beta sigma^2. A schedule `step_count -> eps` is also accepted.
  The inner loop is a `tf.while_loop`: T compiles once under XLA.

  The initial momentum (used only by the skew-reversible variant's first
  step) is drawn in `bootstrap_results` from a fixed seed, since
  `bootstrap_results` takes none; every later draw uses the step's seed.

  #### Examples

  ```python
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x**2, -1), gradient_noise_variance=1.)
  proposal = tfp_sgmcmc.UncalibratedAMAGOLD(
      target, step_size=0.1, num_leapfrog_steps=10, friction=0.5)
  theta_star, results = proposal.one_step(
      tf.zeros([4, 2]), proposal.bootstrap_results(tf.zeros([4, 2])),
      seed=[0, 1])
  results.log_acceptance_correction  # rho, one per chain
  ```

  #### References

  [1] Zhang, R., Cooper, A. F. and De Sa, C. AMAGOLD: Amortized Metropolis
      adjustment for efficient stochastic gradient MCMC. AISTATS 2020.

  Args:
    target: a `tfp_sgmcmc` target giving minibatch gradients.
    step_size: eps > 0, a scalar, a tensor broadcastable against each state
      part (e.g. shape `[num_chains, 1]` for one step size per chain), or a
      schedule.
    num_leapfrog_steps: T >= 1, gradient steps per proposal.
    friction: beta >= 0.
    momentum_std: sigma > 0 (momentum ~ N(0, sigma^2 I)).
    resample_momentum: draw r ~ N(0, sigma^2 I) at the start of every
      proposal (reversible AMAGOLD) or keep the carried momentum
      (skew-reversible AMAGOLD).
    name: name scope of the kernel's ops.
    compute_energy: False to skip the last leapfrog step's minibatch energy
      (`minibatch_energy` and, with a minibatch target, `target_log_prob`
      then hold NaN; the proposal is the same bit for bit). Minibatch
      targets only.
  """

  def __init__(self, target=None, step_size=None, num_leapfrog_steps=None,
               friction=None, momentum_std=1., resample_momentum=True,
               name=None, target_log_prob_fn=None, compute_energy=True):
    self._target, target, target_log_prob_fn = _common.resolve_target(
        target, target_log_prob_fn)
    _check_parameters(self._target, step_size, num_leapfrog_steps, friction,
                      momentum_std, resample_momentum)
    _common.check_compute_energy(compute_energy, self._target)
    self._parameters = dict(
        target=target, step_size=step_size,
        num_leapfrog_steps=num_leapfrog_steps, friction=friction,
        momentum_std=momentum_std, resample_momentum=resample_momentum,
        name=name, target_log_prob_fn=target_log_prob_fn,
        compute_energy=compute_energy)

  target = _common.sampled_target_property()
  target_log_prob_fn = _common.parameter_property("target_log_prob_fn")
  step_size = _common.parameter_property("step_size")
  num_leapfrog_steps = _common.parameter_property("num_leapfrog_steps")
  friction = _common.parameter_property("friction")
  momentum_std = _common.parameter_property("momentum_std")
  resample_momentum = _common.parameter_property("resample_momentum")
  compute_energy = _common.parameter_property("compute_energy")
  name = _common.parameter_property("name")

  def _draw_momentum(self, structure, seed):
    sigma = self.momentum_std
    return tf.nest.map_structure(
        lambda z: _as_dtype(sigma, z.dtype) * z,
        dynamics.standard_normal_like(structure, seed))

  def one_step(self, current_state, previous_kernel_results, seed=None):
    current_state = _common.check_step(self, current_state,
                                       previous_kernel_results, UncalibratedAMAGOLDResults)
    with tf.name_scope(self.name or "amagold_one_step"):
      prev = previous_kernel_results
      dtype = _common.state_dtype(current_state)
      eps = _common.step_size_at(self.step_size, _common.step_count_of(prev),
                                 prev.step_size, dtype)
      sigma = _as_dtype(self.momentum_std, dtype)
      beta = _as_dtype(self.friction, dtype)
      batch_ndims = prev.log_acceptance_correction.shape.rank
      num_steps = self.num_leapfrog_steps
      momentum, position, loop_seed = proposal_start(
          current_state, prev.momentum, eps, sigma, self.resample_momentum,
          seed)

      def leapfrog(t, position, momentum, rho, seed, compute_energy=True):
        next_seed, batch_seed, noise_seed = leapfrog_seeds(seed)
        energy, grad = _common.minibatch_energy_and_gradient(
            self.target, position, batch_seed, compute_energy)
        position, momentum, rho = leapfrog_step(
            t, position, momentum, rho, grad, eps, beta, sigma, num_steps,
            noise_seed, batch_ndims)
        return t + 1, position, momentum, rho, next_seed, energy

      # The first T - 1 steps need only their gradients; the last step's
      # minibatch energy is the one the results report (and the divergence
      # check reads), so it is evaluated once, after the loop, instead of
      # being carried through every step (where XLA must compute it: on the
      # N = 1e5 logistic regression with 256 chains an energy costs about
      # half a gradient; benchmarks/chains.py).
      rho = tf.zeros_like(prev.log_acceptance_correction)
      t, position, momentum, rho, loop_seed = tf.while_loop(
          lambda t, *_: t < num_steps - 1,
          lambda *args: leapfrog(*args)[:-1],
          (tf.constant(0, tf.int32), position, momentum, rho, loop_seed))
      _, proposed, new_momentum, rho, _, energy = leapfrog(
          t, position, momentum, rho, loop_seed, self.compute_energy)
      if energy is None:  # compute_energy=False: rho holds every gradient.
        finite = _common.finite_per_chain(rho, [proposed, new_momentum])
        energy = tf.fill(tf.shape(rho), tf.constant(np.nan, rho.dtype))
      else:
        energy = tf.cast(energy, rho.dtype)
        finite = _common.finite_per_chain(rho,
                                          [energy, proposed, new_momentum])
      diverged = tf.broadcast_to(prev.diverged, tf.shape(finite)) | ~finite
      proposed = _common.keep_where_diverged(diverged, current_state, proposed)
      new_momentum = _common.keep_where_diverged(diverged, prev.momentum,
                                                 new_momentum)
      return proposed, UncalibratedAMAGOLDResults(
          momentum=new_momentum, log_acceptance_correction=rho,
          minibatch_energy=energy, step_size=eps,
          step_count=prev.step_count + 1, diverged=diverged,
          seed=tfp.random.sanitize_seed(seed),
          target_log_prob=_common.target_log_prob(self.target, proposed,
                                                  energy))

  def bootstrap_results(self, init_state):
    with tf.name_scope((self.name or "amagold") + "_bootstrap_results"):
      _common.check_initial_state(init_state, self.target)
      dtype = _common.state_dtype(init_state)
      _common.refuse_minibatch_under_tfp_mh(self)
      energy = self.target.minibatch_energy(init_state,
                                            _common.BOOTSTRAP_SEED)
      energy = tf.cast(energy, dtype)
      if not self.compute_energy:
        energy = _common.not_computed(tf.math.is_finite(energy), dtype)
      tlp = _common.target_log_prob(self.target, init_state, energy)
      return UncalibratedAMAGOLDResults(
          momentum=self._draw_momentum(
              init_state, tfp.random.sanitize_seed(_common.BOOTSTRAP_SEED)),
          log_acceptance_correction=tf.zeros_like(energy),
          minibatch_energy=energy,
          step_size=(_common.initial_step_size(self.step_size, dtype)
                     if _common.is_schedule(self.step_size) or
                     _common.is_per_part(self.step_size)
                     else _as_dtype(self.step_size, dtype)),
          step_count=_common.initial_step_count(self.target, energy),
          diverged=tf.zeros(tf.shape(energy), tf.bool),
          seed=tfp.random.sanitize_seed(_common.BOOTSTRAP_SEED),
          target_log_prob=tlp)


class AMAGOLD(amortized_mh.AmortizedMetropolisHastings):
  """AMAGOLD: SGHMC made exact by an amortized Metropolis-Hastings test.

  Zhang, Cooper & De Sa (2020), Algorithm 2. Each outer step runs T steps of
  stochastic leapfrog (`UncalibratedAMAGOLD`) from (theta, r) to
  (theta*, r*), accumulating the energy accumulator rho, then accepts with
  probability

      min(1, exp(U(theta) - U(theta*) + rho)),

  with U the exact full-data energy (one evaluation per outer step; U(theta)
  is cached). On acceptance (theta, r) <- (theta*, r*); on rejection theta is
  kept and r <- -r (the momentum the proposal started from, negated).

  * `resample_momentum=True` (the default, the paper's "reversible AMAGOLD"
    used in its experiments): r ~ N(0, sigma^2 I) at each outer step.
  * `resample_momentum=False`: skew-reversible (non-reversible) AMAGOLD; the
    momentum is carried, only refreshed by the friction noise. With
    friction = 0 and exact gradients this variant is deterministic between
    flips and not ergodic; use beta > 0 or resampling.

  In both variants the stationary distribution is exactly
  pi(theta) proportional to exp(-U(theta)) for any eps > 0 and any gradient
  noise (Theorem 1). With exact gradients it is L2MC with amortized M-H; with
  exact gradients, beta = 0 and resampling it is HMC with T leapfrog steps.
  `acceptance_energy="minibatch"` uses a minibatch estimate of
  U(theta) - U(theta*) instead (Section 5.2; approximate).

  Parameters: step size eps, friction beta >= 0, momentum standard deviation
  sigma. Appendix F's SGD-style parameters, v = eps sigma^-2 r,
  b = eps beta, h = eps^2 sigma^-2, under which the inner step reads

      v' = ((1 - b) v - h grad U~ + 2 sqrt(b h) xi) / (1 + b),
      theta' = theta + v',   rho += 1/2 grad U~^T (v + v'),

  are available through `AMAGOLD.from_sgd_parameters(target, learning_rate=h,
  momentum_decay=b, ...)`.

  Step-size adaptation: the results expose `step_size` (in
  `accepted_results`) and `log_accept_ratio` where TFP's default getters and
  setters find them, and the proposal reads eps from its results each step,
  so everything that depends on eps (the drift, the kick and the noise
  variance 4 eps beta sigma^2) follows the adapted value. Wrap it in
  `tfp.mcmc.SimpleStepSizeAdaptation` or
  `tfp.mcmc.DualAveragingStepSizeAdaptation` (the paper tunes eps to 85%
  acceptance during burn-in, Section 5.2), and discard the adaptation steps.

  Continuing a chain: the results cache U(theta) and hold the step size;
  see "Continuing a chain" in `AmortizedMetropolisHastings` and
  docs/long_runs.md (results of another target are refused; the step size
  is the results', changed with `tfp_sgmcmc.with_step_size`).

  #### Examples

  ```python
  # The double well of Section 5 with grad U~ = grad U + N(0, 1).
  target = tfp_sgmcmc.NoisyGradientTarget(
      lambda x: ((x + 4) * (x + 1) * (x - 1) * (x - 3) / 14 + 0.5)[..., 0],
      gradient_noise_variance=1.)
  kernel = tfp_sgmcmc.AMAGOLD(target, step_size=0.25, num_leapfrog_steps=10,
                              friction=0.25)
  samples, is_accepted = tfp.mcmc.sample_chain(
      10000, tf.zeros([4, 1]), kernel=kernel, num_burnin_steps=1000,
      trace_fn=lambda _, pkr: pkr.is_accepted, seed=[0, 1])

  # Tuned to 85% acceptance during burn-in.
  adaptive = tfp.mcmc.SimpleStepSizeAdaptation(
      tfp_sgmcmc.AMAGOLD(target, step_size=0.01, num_leapfrog_steps=10,
                         friction=0.25),
      num_adaptation_steps=800, target_accept_prob=0.85)
  ```

  #### References

  [1] Zhang, R., Cooper, A. F. and De Sa, C. AMAGOLD: Amortized Metropolis
      adjustment for efficient stochastic gradient MCMC. AISTATS 2020.
  [2] Horowitz, A. M. A generalized guided Monte Carlo algorithm. Physics
      Letters B, 1991.

  Args:
    target: a `tfp_sgmcmc` target. With `acceptance_energy="exact"` it must
      have the full-data energy (`target.has_exact_energy`).
    step_size: eps > 0 (scalar, per-chain tensor broadcastable against the
      state parts, or a schedule).
    num_leapfrog_steps: T >= 1, gradient steps per M-H test.
    friction: beta >= 0.
    momentum_std: sigma > 0.
    resample_momentum: True for reversible, False for skew-reversible
      AMAGOLD.
    acceptance_energy: "exact" (full-data U, exact chain) or "minibatch".
    temperature: T > 0; the chain samples exp(-U / T) exactly (cold
      posteriors T < 1, warm T > 1) through `TemperedTarget`.
    name: name scope of the kernel's ops.
    compute_energy: False to skip the minibatch energy of each proposal's
      last leapfrog step, a diagnostic neither test uses (the exact test
      uses U(theta*), the minibatch test two energies on a batch of its
      own): the chain is the same bit for bit and the proposal results'
      `minibatch_energy` (and, with the minibatch test, `target_log_prob`)
      hold NaN. Minibatch targets only.
  """

  def __init__(self, target=None, step_size=None, num_leapfrog_steps=None,
               friction=None, momentum_std=1., resample_momentum=True,
               acceptance_energy="exact", temperature=1., name=None,
               target_log_prob_fn=None, compute_energy=True):
    _common.check_positive("temperature", temperature)
    base, target, target_log_prob_fn = _common.resolve_target(
        target, target_log_prob_fn)
    sampled = (base if float(temperature) == 1. else
               targets_lib.TemperedTarget(base, temperature))
    proposal = UncalibratedAMAGOLD(
        sampled, step_size=step_size, num_leapfrog_steps=num_leapfrog_steps,
        friction=friction, momentum_std=momentum_std,
        resample_momentum=resample_momentum, name=name,
        compute_energy=compute_energy)
    super().__init__(proposal, target=sampled,
                     acceptance_energy=acceptance_energy, name=name)
    self._parameters = dict(
        target=target, step_size=step_size,
        num_leapfrog_steps=num_leapfrog_steps, friction=friction,
        momentum_std=momentum_std, resample_momentum=resample_momentum,
        acceptance_energy=acceptance_energy, temperature=temperature,
        name=name, target_log_prob_fn=target_log_prob_fn,
        compute_energy=compute_energy)
    self._proposal = proposal
    self._sampled_target = sampled

  @property
  def target(self):
    """The target the chain samples: `TemperedTarget(target, T)` when
    T != 1 (the constructor's `target` stays in `parameters`)."""
    return self._sampled_target

  temperature = _common.parameter_property("temperature")
  target_log_prob_fn = _common.parameter_property("target_log_prob_fn")

  @classmethod
  def from_sgd_parameters(cls, target, learning_rate, momentum_decay,
                          num_leapfrog_steps, **kwargs):
    """AMAGOLD in the SGD-with-momentum units of Appendix F.

    With v = eps sigma^-2 r, b = eps beta and h = eps^2 sigma^-2 the inner
    step is

        v'     = ((1 - b) v - h grad U~(theta) + 2 sqrt(b h) xi) / (1 + b)
        theta' = theta + v'            (half steps at both ends)
        rho   += 1/2 grad U~(theta)^T (v + v'),

    with v ~ N(0, h I). Only (h, b) matter for the chain in theta, so sigma is
    fixed to 1: eps = sqrt(h), beta = b / sqrt(h), and the kernel's
    `momentum` is r = v / sqrt(h). An adapted step size rescales eps with
    beta fixed, i.e. h = eps^2 and b = eps beta both change.

    Args:
      target: as for `AMAGOLD`.
      learning_rate: h > 0.
      momentum_decay: b >= 0 (the paper's Table 2 uses 0.01 and 5e-6).
      num_leapfrog_steps: T.
      **kwargs: `resample_momentum`, `acceptance_energy`, `temperature`,
        `name`, `compute_energy`.
    """
    eps, friction, sigma = sgd_parameters_to_amagold(
        learning_rate, momentum_decay, kwargs)
    return cls(target, step_size=eps, num_leapfrog_steps=num_leapfrog_steps,
               friction=friction, momentum_std=sigma, **kwargs)

  @property
  def inner_kernel(self):
    return self._proposal

  step_size = _common.parameter_property("step_size")
  num_leapfrog_steps = _common.parameter_property("num_leapfrog_steps")
  friction = _common.parameter_property("friction")
  momentum_std = _common.parameter_property("momentum_std")
  resample_momentum = _common.parameter_property("resample_momentum")
  compute_energy = _common.parameter_property("compute_energy")


# --- AMAGOLD's update, one gradient at a time --------------------------------
#
# `UncalibratedAMAGOLD.one_step` runs these in its loop; the Keras adapter runs
# the same functions, one per train step, with the seeds derived the same way.


def sgd_parameters_to_amagold(learning_rate, momentum_decay, kwargs=None):
  """(eps, beta, sigma) from Appendix F's SGD units (h, b): eps = sqrt(h),
  beta = b / sqrt(h), sigma = 1. `kwargs`, the other constructor arguments,
  must not also set them."""
  _common.check_positive("learning_rate", learning_rate)
  _common.check_positive("momentum_decay", momentum_decay, allow_zero=True)
  if kwargs and ("momentum_std" in kwargs or "step_size" in kwargs or
                 "friction" in kwargs):
    raise TypeError("`from_sgd_parameters` sets `step_size`, `friction` and "
                    "`momentum_std` from `learning_rate` and "
                    "`momentum_decay`; do not pass them too.")
  eps = math.sqrt(float(learning_rate))
  return eps, float(momentum_decay) / eps, 1.


def check_parameters(num_leapfrog_steps, friction, momentum_std,
                     resample_momentum):
  """The argument checks of the proposal (other than target and step size)."""
  _check_num_leapfrog_steps(num_leapfrog_steps)
  _common.check_positive("friction", friction, allow_zero=True)
  _common.check_positive("momentum_std", momentum_std)
  if not isinstance(resample_momentum, bool):
    raise TypeError(f"`resample_momentum` must be True (reversible AMAGOLD) "
                    f"or False (skew-reversible); got {resample_momentum!r}.")


def proposal_start(position, momentum, step_size, momentum_std,
                   resample_momentum, seed):
  """The start of a proposal from (theta, r) with the proposal's `seed`.

  Returns (r_{-1/2}, theta_0, loop_seed): the momentum (redrawn from
  N(0, sigma^2 I) if `resample_momentum`), the half-drifted position
  theta_0 = theta + 1/2 eps sigma^-2 r_{-1/2} of the first gradient, and the
  seed that `leapfrog_seeds` carries through the T steps.
  """
  momentum_seed, loop_seed = _common.step_seeds(seed, 2)
  dtype = tf.nest.flatten(position)[0].dtype
  sigma = _as_dtype(momentum_std, dtype)
  if resample_momentum:
    momentum = tf.nest.map_structure(
        lambda z: sigma * z,
        dynamics.standard_normal_like(momentum, momentum_seed))
  # One step size, or one per state part.
  drift_scale = tf.nest.map_structure(
      lambda e: _as_dtype(e, dtype) / tf.square(sigma), step_size)
  return momentum, dynamics.drift(
      position, momentum, _common.scale_step(0.5, drift_scale)), loop_seed


def leapfrog_seeds(loop_seed):
  """(next loop seed, minibatch seed, noise seed) of one leapfrog step."""
  next_seed, step_seed = dynamics.walk_seed(loop_seed)
  batch_seed, noise_seed = _common.step_seeds(step_seed, 2)
  return next_seed, batch_seed, noise_seed


def leapfrog_step(step, position, momentum, rho, gradient, step_size,
                  friction, momentum_std, num_leapfrog_steps, noise_seed,
                  batch_ndims=0):
  """Leapfrog step `step` (0 <= step < T) of the proposal, given grad U~_t at
  theta_t = `position`.

      r_{t+1/2}   = `dynamics.amagold_momentum`(r_{t-1/2}, grad U~_t)
      rho        += `dynamics.energy_accumulator_increment`(...)
      theta_{t+1} = theta_t + eps sigma^-2 r_{t+1/2}   (half of it at t = T-1)

  Returns (theta_{t+1}, r_{t+1/2}, rho) with rho in its own dtype (the Keras
  adapter keeps it in float64).
  """
  dtype = tf.nest.flatten(position)[0].dtype
  eps = tf.nest.map_structure(lambda e: _as_dtype(e, dtype), step_size)
  sigma = _as_dtype(momentum_std, dtype)
  noise = dynamics.standard_normal_like(momentum, noise_seed)
  new_momentum = dynamics.amagold_momentum(momentum, gradient, eps, friction,
                                           noise, sigma)
  rho = rho + tf.cast(dynamics.energy_accumulator_increment(
      gradient, momentum, new_momentum, eps, sigma, batch_ndims), rho.dtype)
  # Full position steps between the kicks, a half step after the last.
  scale = tf.nest.map_structure(
      lambda e: tf.where(step < num_leapfrog_steps - 1, e / tf.square(sigma),
                         0.5 * e / tf.square(sigma)), eps)
  return dynamics.drift(position, new_momentum, scale), new_momentum, rho
