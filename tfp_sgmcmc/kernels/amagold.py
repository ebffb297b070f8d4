"""AMAGOLD: the stochastic-leapfrog proposal and its amortized M-H test."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, finite_per_chain
from tfp_sgmcmc.dynamics import amagold
from tfp_sgmcmc.dynamics import mass as mass_lib
from tfp_sgmcmc.kernels import amortized_mh
from tfp_sgmcmc.kernels import base
from tfp_sgmcmc.kernels import checks
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.kernels import momentum as momentum_lib
from tfp_sgmcmc.targets import log_prob as log_prob_lib
from tfp_sgmcmc.targets.wrappers import tempered

__all__ = ["AMAGOLD", "UncalibratedAMAGOLD", "UncalibratedAMAGOLDResults"]


class UncalibratedAMAGOLDResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("UncalibratedAMAGOLDResults", [
        "momentum", "log_acceptance_correction", "minibatch_energy",
        "step_size", "step_count", "diverged", "seed", "target_log_prob",
        "momentum_distribution"])):
  """Results of one stochastic-leapfrog proposal (T inner steps).

  Attributes:
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
    momentum_distribution: N(0, M), the mass matrix, batched to the chains
      (`()` for sigma^2 I). A kernel built with
      `store_parameters_in_results=True` reads it from here, where
      `tfp.experimental.mcmc.DiagonalMassMatrixAdaptation` sets it.
  """
  __slots__ = ()


class UncalibratedAMAGOLD(base.StochasticGradientKernel):
  """AMAGOLD's proposal: T steps of stochastic leapfrog with friction.

  From (theta, r), with step size eps, friction beta, mass matrix M
  (sigma^2 I from the momentum standard deviation sigma, or the
  `momentum_distribution` N(0, M)) and a fresh minibatch for each gradient
  (Zhang et al. 2020, Algorithm 2, lines 3-16, with sigma^2 I -> M):

      r_{-1/2} = r   (or r ~ N(0, M) if `resample_momentum`)
      theta_0  = theta + 1/2 eps M^{-1} r_{-1/2}
      for t = 0, ..., T - 1:
        theta_t     = theta_{t-1} + eps M^{-1} r_{t-1/2}           (t > 0)
        r_{t+1/2}   = ((1 - eps beta) r_{t-1/2} - eps grad U~_t(theta_t)
                       + eta_t) / (1 + eps beta),
                      eta_t ~ N(0, 4 eps beta M)
        rho_{t+1/2} = rho_{t-1/2}
                      + 1/2 eps grad U~_t(theta_t)^T M^{-1}
                        (r_{t-1/2} + r_{t+1/2})
      theta* = theta_{T-1} + 1/2 eps M^{-1} r_{T-1/2},  r* = r_{T-1/2}.

  It returns (theta*, results) with `momentum` = r* and
  `log_acceptance_correction` = rho, which is what
  `AmortizedMetropolisHastings` needs: the test is
  log a = U(theta) - U(theta*) + rho. Used alone (uncorrected) it is an SGHMC
  variant with a time-symmetric integrator; like SGHMC it is then biased at
  large step sizes. With beta = 0 and exact gradients it is the leapfrog
  integrator (position Verlet form) of HMC, and rho = K(r) - K(r*),
  K(r) = r^T M^{-1} r / 2.

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
    momentum_std: sigma > 0 (momentum ~ N(0, sigma^2 I)); 1 with a
      `momentum_distribution`.
    resample_momentum: draw r ~ N(0, M) at the start of every
      proposal (reversible AMAGOLD) or keep the carried momentum
      (skew-reversible AMAGOLD).
    name: name scope of the kernel's ops.
    target_log_prob_fn: a full-batch log density (TFP's convention), in
      place of `target`.
    compute_energy: False to skip the last leapfrog step's energy and, with
      a full-batch target, the log density at the proposal (the results'
      `minibatch_energy` and `target_log_prob` then hold NaN; the proposal
      is the same bit for bit).
    store_parameters_in_results: True when a TFP adaptation kernel wraps
      this one (it sets it): the step size and the momentum distribution
      are read from the results.
    momentum_distribution: the mass matrix as TFP's
      `PreconditionedHamiltonianMonteCarlo` takes it, N(0, M) (see
      `SGHMC`); None (the default): M = sigma^2 I.
  """

  _results_type = UncalibratedAMAGOLDResults
  _scope = "amagold"
  _energy_field = "minibatch_energy"
  _per_chain_step_count = True

  def __init__(self, target=None, step_size=None, num_leapfrog_steps=None,
               friction=None, momentum_std=1., resample_momentum=True,
               name=None, target_log_prob_fn=None, compute_energy=True,
               store_parameters_in_results=False,
               momentum_distribution=None):
    self._target, target, target_log_prob_fn = interop.resolve_target(
        target, target_log_prob_fn)
    self._keep_checked(dict(
        target=target, step_size=step_size,
        num_leapfrog_steps=num_leapfrog_steps, friction=friction,
        momentum_std=momentum_std, resample_momentum=resample_momentum,
        name=name, target_log_prob_fn=target_log_prob_fn,
        compute_energy=compute_energy,
        store_parameters_in_results=store_parameters_in_results,
        momentum_distribution=momentum_distribution))

  @classmethod
  def _on_resolved(cls, sampled, **parameters):
    """The proposal on a target its `AMAGOLD` shell resolved already
    (`interop.resolve_target`): the kernel `cls(sampled, **parameters)`
    builds, without resolving the target a second time."""
    proposal = cls.__new__(cls)
    proposal._target = sampled  # pylint: disable=protected-access
    proposal._keep_checked(dict(  # pylint: disable=protected-access
        parameters, target=sampled,
        target_log_prob_fn=log_prob_lib.minibatch_log_prob_fn(sampled)))
    return proposal

  def _keep_checked(self, parameters):
    """Checks the arguments other than the target and keeps them all."""
    arguments.check_step_size(parameters["step_size"])
    amagold.check_amagold_parameters(**{
        k: parameters[k] for k in ("num_leapfrog_steps", "friction",
                                   "momentum_std", "resample_momentum",
                                   "momentum_distribution")})
    checks.check_compute_energy(parameters["compute_energy"])
    self._parameters = parameters

  num_leapfrog_steps = arguments.parameter_property("num_leapfrog_steps")
  friction = arguments.parameter_property("friction")
  momentum_std = arguments.parameter_property("momentum_std")
  resample_momentum = arguments.parameter_property("resample_momentum")
  momentum_distribution = arguments.parameter_property(
      "momentum_distribution")

  @property
  def negates_momentum_on_rejection(self):
    """Whether a test around this proposal must negate the momentum where
    it rejects (the skew-reversible rejection r <- -r of
    `AmortizedMetropolisHastings`): the momentum is carried from proposal
    to proposal (`resample_momentum=False`)."""
    return not self.resample_momentum

  def _transition(self, state, prev, step):
    eps = step.size
    sigma = as_dtype(self.momentum_std, step.dtype)
    beta = as_dtype(self.friction, step.dtype)
    batch_ndims = prev.log_acceptance_correction.shape.rank
    num_steps = self.num_leapfrog_steps
    mass = momentum_lib.of_step(self, prev)
    momentum, position, loop_seed = amagold.proposal_start(
        state, prev.momentum, eps, sigma, self.resample_momentum, step.seed,
        mass)

    def leapfrog(t, position, momentum, rho, seed, compute_energy=True):
      next_seed, batch_seed, noise_seed = amagold.leapfrog_seeds(seed)
      energy, grad = base.minibatch_energy_and_gradient(
          self.target, position, batch_seed, compute_energy)
      position, momentum, rho = amagold.leapfrog_step(
          t, position, momentum, rho, grad, eps, beta, sigma, num_steps,
          noise_seed, batch_ndims, mass)
      return t + 1, position, momentum, rho, next_seed, energy

    # The first T - 1 steps need only their gradients; the last step's
    # minibatch energy is the one the results report (and the divergence
    # check reads), so it is evaluated once, after the loop, instead of
    # being carried through every step (where XLA would compute it).
    rho = tf.zeros_like(prev.log_acceptance_correction)
    t, position, momentum, rho, loop_seed = tf.while_loop(
        lambda t, *_: t < num_steps - 1,
        lambda *args: leapfrog(*args)[:-1],
        (tf.constant(0, tf.int32), position, momentum, rho, loop_seed))
    _, proposed, new_momentum, rho, _, energy = leapfrog(
        t, position, momentum, rho, loop_seed, self.compute_energy)
    if energy is None:  # compute_energy=False: rho holds every gradient.
      finite = finite_per_chain(rho, [proposed, new_momentum])
      energy = tf.fill(tf.shape(rho), tf.constant(np.nan, rho.dtype))
    else:
      energy = tf.cast(energy, rho.dtype)
      finite = finite_per_chain(rho, [energy, proposed, new_momentum])
    return base.Move(proposed, energy, kept=dict(momentum=new_momentum),
                     fields=dict(log_acceptance_correction=rho,
                                 momentum_distribution=(
                                     lambda _: prev.momentum_distribution)),
                     finite=finite)

  def _draw_momentum(self, structure, seed, mass):
    return mass_lib.as_mass(mass, self.momentum_std).sample(structure, seed)

  def _initial_fields(self, init_state, energy):
    field = momentum_lib.initial_field(self, init_state, energy)
    return dict(
        momentum=self._draw_momentum(
            init_state, tfp.random.sanitize_seed(random.BOOTSTRAP_SEED),
            None if field is momentum_lib.IDENTITY else field),
        log_acceptance_correction=tf.zeros_like(energy),
        momentum_distribution=field)

  def _initial_log_prob(self, init_state, energy):
    return interop.target_log_prob(self.target, init_state, energy)


class AMAGOLD(amortized_mh.AmortizedShell):
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

  Parameters: step size eps, friction beta >= 0, and the mass matrix M:
  sigma^2 I from the momentum standard deviation sigma, or any fixed
  Gaussian `momentum_distribution` N(0, M) in TFP's convention (the test
  stays exact for every fixed M: the inner steps and rho use M^{-1} where
  the paper has sigma^-2, see `UncalibratedAMAGOLD`). A diagonal M^{-1}
  near the posterior variances lets one eps serve coordinates whose scales
  differ by orders of magnitude; `tfp.experimental.mcmc.
  DiagonalMassMatrixAdaptation` estimates it during warm-up (an adapting M
  is not exact: freeze it, `num_estimation_steps=`, and discard the
  adaptation steps). Appendix F's SGD-style parameters, v = eps sigma^-2 r,
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

  # A diagonal mass estimated over 500 steps, then frozen.
  state = tf.zeros([4, 1])
  mass_adapted = tfp.experimental.mcmc.DiagonalMassMatrixAdaptation(
      tfp_sgmcmc.AMAGOLD(
          target, step_size=0.25, num_leapfrog_steps=10, friction=0.25,
          momentum_distribution=tfp_sgmcmc.diagonal_momentum_distribution(
              state, batch_ndims=1)),
      tfp.experimental.stats.RunningVariance.from_stats(
          num_samples=10., mean=tf.zeros([1]), variance=tf.ones([1])),
      num_estimation_steps=500)
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
    num_leapfrog_steps: T >= 1, gradient steps per M-H test (a Python
      integer, or a scalar integer tensor: a T drawn for each test).
    friction: beta >= 0.
    momentum_std: sigma > 0.
    resample_momentum: True for reversible, False for skew-reversible
      AMAGOLD.
    acceptance_energy: "exact" (full-data U, exact chain) or "minibatch".
    temperature: T > 0; the chain samples exp(-U / T) exactly (cold
      posteriors T < 1, warm T > 1) through `TemperedTarget`.
    name: name scope of the kernel's ops.
    target_log_prob_fn: a full-batch log density (TFP's convention), in
      place of `target`.
    compute_energy: False to skip the energy of each proposal's last
      leapfrog step, a diagnostic neither test uses (the exact test uses
      U(theta*), the minibatch test two energies on a batch of its own),
      and with a full-batch target the proposal's own log density (which
      the exact test computes anyway): the chain is the same bit for bit
      and the proposal results' `minibatch_energy` (and, with the
      minibatch test, `target_log_prob`) hold NaN.
    store_parameters_in_results: True when a TFP adaptation kernel wraps
      this one (they set it): the step size and the momentum distribution
      are read from the results.
    momentum_distribution: the mass matrix N(0, M) as TFP's
      `PreconditionedHamiltonianMonteCarlo` takes it (see `SGHMC`), with
      `momentum_std` 1; None (the default): M = sigma^2 I.
  """

  def __init__(self, target=None, step_size=None, num_leapfrog_steps=None,
               friction=None, momentum_std=1., resample_momentum=True,
               acceptance_energy="exact", temperature=1., name=None,
               target_log_prob_fn=None, compute_energy=True,
               store_parameters_in_results=False,
               momentum_distribution=None):
    arguments.check_positive("temperature", temperature)
    base_target, target, target_log_prob_fn = interop.resolve_target(
        target, target_log_prob_fn, temperature, type(self).__name__)
    sampled = tempered(base_target, temperature)
    proposal = UncalibratedAMAGOLD._on_resolved(  # pylint: disable=protected-access
        sampled, step_size=step_size, num_leapfrog_steps=num_leapfrog_steps,
        friction=friction, momentum_std=momentum_std,
        resample_momentum=resample_momentum, name=name,
        compute_energy=compute_energy,
        store_parameters_in_results=store_parameters_in_results,
        momentum_distribution=momentum_distribution)
    self._build(proposal, sampled, acceptance_energy, name)
    self._parameters = dict(
        target=target, step_size=step_size,
        num_leapfrog_steps=num_leapfrog_steps, friction=friction,
        momentum_std=momentum_std, resample_momentum=resample_momentum,
        acceptance_energy=acceptance_energy, temperature=temperature,
        name=name, target_log_prob_fn=target_log_prob_fn,
        compute_energy=compute_energy,
        store_parameters_in_results=store_parameters_in_results,
        momentum_distribution=momentum_distribution)

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
    eps, friction, sigma = amagold.sgd_parameters_to_amagold(
        learning_rate, momentum_decay, kwargs)
    return cls(target, step_size=eps, num_leapfrog_steps=num_leapfrog_steps,
               friction=friction, momentum_std=sigma, **kwargs)

  num_leapfrog_steps = arguments.parameter_property("num_leapfrog_steps")
  friction = arguments.parameter_property("friction")
  momentum_std = arguments.parameter_property("momentum_std")
  resample_momentum = arguments.parameter_property("resample_momentum")
  compute_energy = arguments.parameter_property("compute_energy")
  momentum_distribution = arguments.parameter_property(
      "momentum_distribution")

  # The warm-up protocol (`kernels.tuning`): tested by its own test, its T
  # leapfrog gradients per test; a mass replaces sigma (momentum_std 1).
  _warmup_takes_mass = True

  def _warmup_test_kernel(self, num_test_steps, momentum_distribution):
    del num_test_steps  # Its own num_leapfrog_steps.
    return self.copy(store_parameters_in_results=True,
                     **self._with_mass(momentum_distribution))

  def _warmup_length_test(self, num_leapfrog_steps, momentum_distribution):
    test = self._warmup_test_kernel(None, momentum_distribution).copy(
        num_leapfrog_steps=num_leapfrog_steps)
    mass = mass_lib.as_mass(test.momentum_distribution, test.momentum_std)
    return test, lambda r: mass.velocity(r.proposed_results.momentum)

  def _warmup_gradients_per_test(self, num_test_steps):
    del num_test_steps
    return self.num_leapfrog_steps

  def _warmup_tuned(self, step_size, momentum_distribution):
    return self.copy(step_size=step_size,
                     **self._with_mass(momentum_distribution))

  @staticmethod
  def _with_mass(momentum_distribution):
    if momentum_distribution is None:
      return {}
    return dict(momentum_distribution=momentum_distribution,
                momentum_std=1.)
