"""A warm-up in one call: the step size (and a mass matrix: diagonal, dense
or low rank plus diagonal) of a stochastic-gradient kernel tuned on an exact
amortized M-H test, then frozen.

`warm_up(kernel, initial_state, num_steps, seed)` runs Stan's window
adaptation (Stan Reference Manual, "HMC algorithm parameters"; BlackJAX's
`window_adaptation`) on a chain that an amortized Metropolis-Hastings test
makes exact (Zhang, Cooper & De Sa 2020, eq. 6):

* AMAGOLD is tested by its own test;
* SGHMC and SGNHT by AMAGOLD's test around their dynamics,
  dr = -grad U~ dt - C r dt + N(0, 2 C dt), dtheta = M^-1 r dt, integrated
  with AMAGOLD's time-symmetric kick (friction beta = C / 2; SGNHT's C is
  its diffusion A, where its thermostat settles without gradient noise), the
  one integrator of these dynamics whose reverse path has a tractable
  density: their Euler step moves theta with the new momentum, so its
  momentum-flipped reverse move has no density;
* SGLD by `UncalibratedLangevinPath`: T of SGLD's own steps with their
  Gaussian path ratio (two minibatch gradients per step, warm-up only).

The step size follows dual averaging (Hoffman & Gelman 2014, Stan's
constants) to `target_accept_prob` of that test, restarted at each new mass
matrix; the mass matrix (Hamiltonian kernels that take a
`momentum_distribution`) is the inverse of the warm-up draws' variance
(covariance, or its low-rank-plus-diagonal part) in expanding "slow" windows
between a fast first and last window, regularised relative to the window's
own scale (`window_adaptation.regularized_variance`). Then both are
frozen: the returned kernel is a plain kernel with a fixed step size (and
mass), so AMAGOLD's sampling phase is exact. AMAGOLD's trajectory length
can be tuned too (ChEES, `tfp_sgmcmc.chains.trajectory_length`) and frozen
at one integer T. Which mass and whether to tune T, where the user leaves
them to the warm-up, is one rule (`tfp_sgmcmc.chains.warmup_picks`). Each
window is one compiled loop (`jit_compile=True` by default).
"""

import collections
import time

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import random
from tfp_sgmcmc.chains import arrival as arrival_lib
from tfp_sgmcmc.chains import loop_carry, stein, warmup_picks as picks
from tfp_sgmcmc.chains import progress as progress_lib
from tfp_sgmcmc.chains import trajectory_length as length_lib
from tfp_sgmcmc.chains import window_adaptation as adaptation
from tfp_sgmcmc.chains.window_adaptation import (regularized_variance,
                                                 warmup_windows)
from tfp_sgmcmc.targets import log_prob as log_prob_lib
from tfp_sgmcmc.dynamics import mass as mass_lib

__all__ = ["warm_up", "WarmupResult", "WarmupReport", "warmup_windows",
           "regularized_variance"]


class WarmupReport(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("WarmupReport", [
        "step_size", "variance", "momentum_distribution", "windows",
        "acceptance", "num_steps", "num_gradients", "seconds", "arrived",
        "arrival", "covariance", "num_leapfrog_steps", "mass", "choices"],
        defaults=(None, None, None, None, None, None))):
  """What the warm-up tuned and how (`WarmupResult.report`).

  Attributes:
    step_size: the frozen step size (the dual-averaged value of the last
      window; for SGHMC and SGNHT at most the bound of their own chain,
      `choices` says when it capped).
    variance: per state part, the estimated posterior variance of each
      coordinate: the diagonal of M^{-1} (for a low-rank mass, of
      S (I + V (Lambda - I) V^T) S), or None where no mass matrix was
      adapted.
    momentum_distribution: the frozen momentum distribution (TFP's
      convention: p ~ N(0, M), log_prob = -K(p)), or None.
    windows: one dict per window: `kind` ("fast" or "slow"), `steps`,
      `step_size` at its end, `acceptance` (its mean acceptance
      probability), `seconds`.
    acceptance: mean acceptance probability of the test over the last
      window.
    num_steps: warm-up steps (tests) run.
    num_gradients: minibatch (or full-batch) gradient evaluations spent.
    seconds: wall time, compilation included.
    arrived: whether the chains ended at the posterior, as
      `tfp_sgmcmc.chains.arrival.check_arrival` tells from the energy's
      gradient where they stand (False comes with a
      `WarmupNotConvergedWarning`); None for a kernel without a target.
    arrival: the `Arrival` record behind `arrived` (distances, cause).
    covariance: with a dense mass, the [d, d] M^{-1} (the estimated
      posterior covariance, whose diagonal is `variance`); else None (the
      low-rank M^{-1} is in `momentum_distribution`).
    num_leapfrog_steps: with the length tuned, the frozen T of the
      returned kernel (each window's dict then has the mean T of its
      tests under `num_leapfrog_steps`); else None (the kernel's own T).
    mass: the form of the adapted mass, "diagonal", "dense" or
      "low_rank", or None where no mass was adapted.
    choices: what the warm-up chose for the mass and the trajectory length
      and why, in words (e.g. "dense mass: the state is one vector of 10
      <= 200 coordinates and the warm-up has 500 >= 200 steps; trajectory
      length tuned by ChEES: the gradients are exact (a full-batch
      target)").
  """
  __slots__ = ()


class WarmupResult(collections.namedtuple("WarmupResult",
                                          ["kernel", "state", "report"])):
  """What `warm_up` returns.

  Attributes:
    kernel: the tuned kernel (fixed step size, and mass where adapted).
    state: the chain's state at the end of the warm-up (start sampling
      there).
    report: a `WarmupReport`.
  """
  __slots__ = ()


def _test_kernel_of(kernel):
  """The kernel's `_warmup_test_kernel` (the warm-up protocol of
  `tfp_sgmcmc.kernels.tuning`), or a TypeError naming the fix."""
  make_test = getattr(kernel, "_warmup_test_kernel", None)
  if make_test is None:
    raise TypeError(
        f"`kernel` is a {type(kernel).__name__}; warm_up tunes AMAGOLD, "
        "SGHMC, SGNHT and SGLD (built on a tfp_sgmcmc target, not wrapped). "
        "Pass the bare kernel; wrap the tuned kernel it returns afterwards. "
        "(A kernel of your own is tuned once it implements the warm-up "
        "protocol of tfp_sgmcmc.kernels.tuning.)")
  return make_test


def _set_step_size(results, step_size):
  inner = results.accepted_results
  return results._replace(accepted_results=inner._replace(
      step_size=tf.cast(step_size, inner.step_size.dtype)))


def _momentum_distribution(state, batch_ndims, variance, mass="diagonal"):
  if mass == "dense":
    return mass_lib.dense_momentum_distribution(variance[0])
  if mass == "low_rank":
    return mass_lib.low_rank_momentum_distribution(*variance[0])
  return mass_lib.diagonal_momentum_distribution(
      tf.nest.flatten(state), batch_ndims, inverse_mass=variance)


def warm_up(kernel, initial_state, num_steps=1000, seed=None,
            target_accept_prob=0.75, num_test_steps=10, adapt_mass=None,
            initial_buffer=75, final_buffer=50, base_window=25,
            jit_compile=True, dense_mass=None, criterion="acceptance",
            step_sizes=None, adapt_num_leapfrog_steps=None,
            max_num_leapfrog_steps=256, mass=None, mass_rank=None,
            mass_estimate="draws", progress=False):
  """Tunes `kernel`'s step size (and mass, and, on exact gradients,
  AMAGOLD's trajectory length) and returns it frozen.

  By default the warm-up picks the mass (dense for a vector of at most 200
  coordinates and a warm-up of at least 200 steps, else diagonal) and
  whether to tune AMAGOLD's T (on a full-batch target); `report.choices`
  says what it picked and why. Pass `mass=`, `dense_mass=` or
  `adapt_num_leapfrog_steps=` to choose yourself.

  #### Examples

  ```python
  kernel = tfp_sgmcmc.AMAGOLD(target, step_size=0.01, num_leapfrog_steps=10,
                              friction=0.5)
  warm = tfp_sgmcmc.warm_up(kernel, tf.zeros([4, d]), num_steps=200,
                            seed=[1, 2])
  samples = tf.function(lambda: tfp.mcmc.sample_chain(   # one XLA program
      500, warm.state, kernel=warm.kernel, trace_fn=None, seed=[3, 4]),
      jit_compile=True)()
  print(warm.report.step_size, warm.report.variance)   # what was tuned
  print(warm.report.choices)   # the mass and length picked, and why
  ```

  Args:
    kernel: an `AMAGOLD`, `SGHMC`, `SGNHT` or `SGLD` with a constant step
      size, the starting guess (dual averaging starts its search at 10x it).
    initial_state: the chains' starting state (leading chain axes).
    num_steps: warm-up steps (each one amortized test of a trajectory).
    seed: stateless seed.
    target_accept_prob: the test's acceptance to reach (0.75: Stan's 0.8
      less a margin for the gradient noise, which the test also sees).
    num_test_steps: T, gradient steps per test for SGHMC, SGNHT and SGLD
      (AMAGOLD uses its `num_leapfrog_steps`).
    adapt_mass: estimate a mass matrix (default: where the kernel takes a
      `momentum_distribution`), of the form `mass` gives.
    initial_buffer, final_buffer, base_window: Stan's window sizes.
    jit_compile: compile each window with XLA.
    dense_mass: None (the default, with `mass=None`: the warm-up picks,
      see below), True: a dense mass matrix (Stan's `dense_e`): M^{-1} is
      each slow window's covariance, shrunk towards its diagonal
      (`window_adaptation.regularized_covariance`), for a state of one
      vector per chain, each step then costing a [d, d] product more (the
      same as `mass="dense"`); or False: diagonal.
    mass: the form of the mass matrix estimated. None (the default, with
      `dense_mass=None`): the warm-up picks (`chains.warmup_picks`):
      "dense" where the kernel adapts a mass, the state is one vector of at
      most `DENSE_MASS_MAX` (200) coordinates per chain and `num_steps` is
      at least `DENSE_MIN_STEPS` (200), else "diagonal". Or one of
      "diagonal", "dense" (as `dense_mass=True`) or "low_rank": M^{-1} =
      S (I + V (Lambda - I) V^T) S, the windows' variances S^2 and the
      `mass_rank` directions V in which their correlation matrix differs
      most from I (`window_adaptation.regularized_low_rank`; the frozen
      kernel's `momentum_distribution` is
      `dynamics.mass.low_rank_momentum_distribution`, O(d k) a step). The
      dense and low-rank masses need a state of one vector per chain; the
      low-rank estimate holds the windows' [d, d] sums during the warm-up.
    mass_rank: k of `mass="low_rank"`, 1 <= k <= d (default min(d, 10)).
    mass_estimate: what the diagonal M^{-1} is estimated from: "draws"
      (the default: each slow window's variance of the chain's draws) or
      "gradients": 1 / the window's mean of g_a g_b, two gradients of the
      kernel's target at each draw on independent minibatches
      (`window_adaptation.gradient_variance`: E[(d_i U)^2] is the
      posterior's precision P_ii for a Gaussian), two gradients more per
      test. It does not need the draws to have crossed the posterior, so
      it tracks variances the warm-up's draws cannot resolve (a network's
      weights over a few hundred tests); where the posterior is correlated
      it gives the conditional variances 1 / P_ii, smaller than the
      marginal ones. The target's minibatches must be independent draws
      (the seed-chosen batches of the package's in-memory targets are);
      the products' noise grows with N / n. It assumes the draws are in
      the posterior: a direction only the prior sees at the draws (a ReLU
      network's dead units) gets 1 / (w / s^2)^2, far too wide.
    criterion: "acceptance" (the amortized test above) or "ksd": for a
      kernel without an M-H test, whose bias an acceptance rate does not
      see, the step size of `step_sizes` whose draws have the lowest kernel
      Stein discrepancy (`tfp_sgmcmc.chains.stein.step_size_by_ksd`; each
      step size runs `num_steps // len(step_sizes)` steps from
      `initial_state`; no mass is adapted). The report's `windows` hold one
      entry per step size with its `ksd`.
    step_sizes: the grid of `criterion="ksd"` (default: the kernel's step
      size times 10^-2, 10^-1, 1, 10, 10^2).
    adapt_num_leapfrog_steps: None (the default): the warm-up picks: True
      for a kernel with a trajectory of its own (AMAGOLD) on a target whose
      gradients are exact (a full-batch target), with a mass that is not
      diagonal and 2 or more chains; False otherwise (on minibatch
      gradients and with a diagonal mass ChEES picks too short a T; see
      `chains.warmup_picks`). True: also tune the trajectory's length
      (AMAGOLD's `num_leapfrog_steps` T) by ChEES (Hoffman, Radul &
      Sountsov 2021; `tfp_sgmcmc.chains.trajectory_length`): each test
      runs a jittered length u L (u in (0, 1]), and L climbs the ChEES
      gradient alongside the step size and mass, starting from the
      kernel's T times its step size. The returned kernel has one fixed
      integer T = ceil(L / (2 h)), so its chain is exact (the test is
      exact for every fixed T). Only for a kernel whose test is its own trajectory.
    max_num_leapfrog_steps: the cap on T (warm-up and returned kernel).
    progress: False (the default), True (a tqdm bar, or lines on stderr)
      or a callable `report(done, total)`, as `sample_chain_with_progress`
      takes it: one report after each window (a window runs compiled).

  Returns:
    `WarmupResult(kernel, state, report)`; `report.mass`,
    `report.num_leapfrog_steps` and `report.choices` say what was picked
    and why.
  """
  make_test = _test_kernel_of(kernel)
  kind = type(kernel).__name__
  getattr(kernel, "_warmup_check", lambda: None)()
  if callable(kernel.step_size) and not tf.is_tensor(kernel.step_size):
    raise TypeError("`kernel.step_size` is a schedule; warm_up tunes one "
                    "constant step size. Build the kernel with a float.")
  if isinstance(kernel.step_size, (list, tuple)):
    raise TypeError("`kernel.step_size` is one per state part; warm_up tunes "
                    "one step size (the mass matrix scales the parts).")
  if criterion not in ("acceptance", "ksd"):
    raise ValueError(f"`criterion` must be 'acceptance' or 'ksd'; got "
                     f"{criterion!r}.")
  make_length = getattr(kernel, "_warmup_length_test", None)
  if criterion == "ksd":
    length_lib.check_options(
        picks.pick_length(kernel, adapt_num_leapfrog_steps, criterion).choice,
        max_num_leapfrog_steps, kind, make_length is not None, criterion)
    return _warm_up_by_ksd(kernel, initial_state, num_steps, seed,
                           step_sizes, jit_compile)
  if not 0. < target_accept_prob < 1.:
    raise ValueError(f"`target_accept_prob` must be in (0, 1); got "
                     f"{target_accept_prob!r}.")
  takes_mass = getattr(kernel, "_warmup_takes_mass", False)
  if adapt_mass is None:
    adapt_mass = takes_mass
  elif adapt_mass and not takes_mass:
    raise ValueError(
        f"`adapt_mass=True` but this {kind} takes no `momentum_distribution` "
        "(SGLD has no mass matrix; SGHMC takes one only with "
        "noise_estimate=0); use adapt_mass=False, or a Hamiltonian kernel "
        "(AMAGOLD, SGHMC, SGNHT).")
  windows = warmup_windows(num_steps, initial_buffer, final_buffer,
                           base_window)
  state = tf.nest.map_structure(tf.convert_to_tensor, initial_state)
  parts = tf.nest.flatten(state)
  dtype = parts[0].dtype
  seed = tfp.random.sanitize_seed(seed)
  probe = make_test(num_test_steps, None)
  batch_ndims = probe.bootstrap_results(state).log_accept_ratio.shape.rank
  num_chains = int(np.prod(parts[0].shape[:batch_ndims]))
  mass, mass_reason, mass_rank = picks.resolve_mass(
      kernel, parts, batch_ndims, num_steps, mass, dense_mass, adapt_mass,
      mass_rank, mass_estimate)
  length_pick = picks.pick_length(kernel, adapt_num_leapfrog_steps,
                                  criterion, num_chains,
                                  mass if adapt_mass else None)
  adapt_num_leapfrog_steps = length_pick.choice
  length_lib.check_options(adapt_num_leapfrog_steps, max_num_leapfrog_steps,
                           kind, make_length is not None, criterion, num_chains)
  from_gradients = mass_estimate == "gradients"
  target = getattr(kernel, "target", None)
  # A full-batch target's gradient is exact: one evaluation is both.
  full_batch = log_prob_lib.is_full_batch(target)
  extra_gradients = from_gradients * (1 if full_batch else 2)
  dense_mass = mass != "diagonal"  # The windows hold [d, d] sums.
  # Without a mass, a kernel with a stationary bound reads the posterior's
  # scale from the windows' draws (the test's chain, which is exact); with
  # a mass of its own, whose units those are not, it has no bound.
  track_variance = adapt_mass or hasattr(
      kernel, "_warmup_max_step_size") and kernel.parameters.get(
          "momentum_distribution") is None
  gradients_per_test = getattr(kernel, "_warmup_gradients_per_test",
                               lambda n: n)(num_test_steps)

  def run_window(state, seed, da, inverse_mass, num_window_steps, length):
    dist = (_momentum_distribution(state, batch_ndims, inverse_mass,
                                   mass) if adapt_mass else None)
    test = make_test(num_test_steps, dist)
    results, held, layout = loop_carry.split(test.bootstrap_results(state))
    window = (adaptation.begin_window(
        [tf.zeros_like(p) if from_gradients else p
         for p in tf.nest.flatten(state)], batch_ndims,
        dense=dense_mass and adapt_mass) if track_variance else ())

    def body(i, state, results, seed, da, window, accept_sum, length, grads,
             held):
      seed, step_seed = random.split_seed(seed, 2)
      results = _set_step_size(loop_carry.join(results, held, layout),
                               tf.exp(da.log_step_size))
      if adapt_num_leapfrog_steps:  # A test of a jittered length.
        state, results, length, steps = length_lib.test_step(
            make_length, dist, state, results, step_seed,
            tf.exp(da.log_step_size), length, max_num_leapfrog_steps,
            batch_ndims)
      else:
        state, results = test.one_step(state, results, step_seed)
        steps = gradients_per_test
      gradients = None
      if from_gradients:  # On minibatches the test's draws did not use.
        seeds = tfp.random.split_seed(step_seed, 2, salt="mass_gradients")
        # A copy of the state per call: a TFP distribution's bijector
        # caches by tensor, and a cache hit would cut the second gradient
        # off the tape.
        gradients = [tf.nest.flatten(target.gradient(
            tf.nest.map_structure(tf.identity, state), s))
                     for s in seeds[:1 if full_batch else 2]]
        gradients *= 2 if full_batch else 1
        steps += extra_gradients
      adapted, accept = adaptation.update(
          adaptation.WindowAdaptationState(da, window, inverse_mass),
          tf.nest.flatten(state), results.log_accept_ratio,
          target_accept_prob, batch_ndims, gradients=gradients)
      results, held, _ = loop_carry.split(results)
      return (i + 1, state, results, seed, adapted.dual_averaging,
              adapted.window, accept_sum + accept, length,
              grads + tf.cast(steps, tf.float64), held)

    _, state, _, seed, da, window, accept_sum, length, grads, _ = (
        tf.while_loop(lambda i, *_: i < num_window_steps, body, (
            tf.constant(0), state, results, seed, da, window,
            tf.zeros([], dtype), length, tf.zeros([], tf.float64), held)))
    variance = (() if not track_variance else
                adaptation.gradient_variance(window) if from_gradients
                and adapt_mass else
                adaptation.window_variance(window))
    return (state, seed, da, window, variance,
            accept_sum / tf.cast(num_window_steps, dtype), length, grads)

  compiled = tf.function(run_window, jit_compile=jit_compile,
                         autograph=False)
  report_windows = []
  num_gradients = 0.
  length = (length_lib.init(kernel.num_leapfrog_steps, kernel.step_size,
                            dtype) if adapt_num_leapfrog_steps else ())
  adapted = adaptation.init(
      parts, kernel.step_size, batch_ndims, adapt_mass=False,
      inverse_mass=_identity(parts[0], mass, mass_rank))
  start = time.perf_counter()
  report, close = progress_lib.reporter(
      progress, sum(n for _, n in windows), "warm-up")
  done, scale = 0, 1. if adapt_mass else None
  for number, (kind_w, steps) in enumerate(windows):
    t0 = time.perf_counter()
    state, seed, da, window, variance, accept, length, grads = compiled(
        state, seed, adapted.dual_averaging, adapted.inverse_mass,
        tf.constant(steps), length)
    done += steps
    report(done)
    num_gradients += float(grads)
    adapted = adapted._replace(dual_averaging=da, window=window)
    set_mass = kind_w == "slow" and adapt_mass
    if kind_w == "slow" and not adapt_mass and track_variance:
      scale = picks.draws_scale(variance)
    # Dual averaging starts again from the step size reached so far, its
    # search centred there (Stan): after each new mass, and after the first
    # window, so that the user's guess, which centres the first search, is
    # forgotten.
    adapted = adaptation.end_window(adapted, variance, set_mass=set_mass,
                                    restart=set_mass or number == 0)
    log_step = adapted.dual_averaging.log_averaging_step
    report_windows.append(dict(
        kind=kind_w, steps=steps, step_size=float(np.exp(log_step)),
        acceptance=float(accept), seconds=time.perf_counter() - t0,
        **(dict(num_leapfrog_steps=float(grads) / steps)
           if adapt_num_leapfrog_steps else {})))
  close()
  # The tuned step size in Python (numpy's exp of the averaged log step),
  # as the report shows it.
  step_size = float(np.exp(adapted.dual_averaging.log_averaging_step))
  step_pick = picks.pick_step_size(kernel, step_size, scale)
  step_size = step_pick.choice
  variance = adapted.inverse_mass
  dist = (_momentum_distribution(state, batch_ndims, variance, mass)
          if adapt_mass else None)
  tuned = getattr(kernel, "_warmup_tuned", None)
  tuned = (tuned(step_size, dist) if tuned is not None else kernel.copy(
      step_size=step_size,
      **({} if dist is None else dict(momentum_distribution=dist))))
  num_leapfrog_steps = (length_lib.tuned_num_leapfrog_steps(
      length, step_size, max_num_leapfrog_steps)
                        if adapt_num_leapfrog_steps else None)
  if num_leapfrog_steps is not None:
    tuned = tuned.copy(num_leapfrog_steps=num_leapfrog_steps)
  report = WarmupReport(
      step_size=step_size,
      variance=([_diagonal(v, mass) for v in variance] if adapt_mass
                else None),
      covariance=variance[0].numpy() if mass == "dense" else None,
      momentum_distribution=dist, windows=report_windows,
      acceptance=report_windows[-1]["acceptance"], num_steps=num_steps,
      num_gradients=(num_gradients if adapt_num_leapfrog_steps else
                     num_steps * gradients_per_test) + (
                         num_steps * extra_gradients),
      seconds=time.perf_counter() - start,
      num_leapfrog_steps=num_leapfrog_steps,
      mass=mass if adapt_mass else None,
      choices=f"{mass_reason}; {length_pick.reason}{step_pick.reason}")
  # A warm-up still on its way to the posterior is reported, not handed
  # back as if it had arrived (the check draws no number the chain uses).
  arrival = arrival_lib.check_warm_up(
      kernel, state, report.variance, batch_ndims, seed, report.covariance)
  if arrival is not None:
    report = report._replace(arrived=arrival.arrived, arrival=arrival)
    arrival_lib.warn_if_not_arrived(arrival)
  return WarmupResult(tuned, tf.nest.pack_sequence_as(
      initial_state, tf.nest.flatten(state)), report)


def _identity(part, mass, rank):
  """M^{-1} = I in the form of `mass` (None: ones, as `adaptation.init`)."""
  if mass == "dense":
    return [tf.eye(part.shape[-1], dtype=part.dtype)]
  if mass == "low_rank":
    d = part.shape[-1]
    return [(tf.ones([d], part.dtype), tf.zeros([d, rank], part.dtype),
             tf.ones([rank], part.dtype))]
  return None  # A diagonal mass; the part may be one chain's scalar.


def _diagonal(inverse_mass, mass):
  """The diagonal of M^{-1} in the form of `mass`, as numpy."""
  if mass == "dense":
    return np.diag(inverse_mass.numpy())
  if mass == "low_rank":
    return adaptation.low_rank_diagonal(inverse_mass).numpy()
  return inverse_mass.numpy()


def _warm_up_by_ksd(kernel, initial_state, num_steps, seed, step_sizes,
                    jit_compile):
  """`warm_up(criterion="ksd")`: the step size of a grid with the lowest
  kernel Stein discrepancy, as a `WarmupResult`."""
  if step_sizes is None:
    step_sizes = [float(kernel.step_size) * 10. ** k for k in range(-2, 3)]
  per_step_size = int(num_steps) // max(len(step_sizes), 1)
  start = time.perf_counter()
  choice = stein.step_size_by_ksd(kernel, initial_state, step_sizes,
                                  per_step_size, seed,
                                  jit_compile=jit_compile)
  best = choice.step_sizes.index(choice.step_size)
  report = WarmupReport(
      step_size=choice.step_size, variance=None, momentum_distribution=None,
      windows=[dict(kind="ksd", steps=per_step_size, step_size=h, ksd=v)
               for h, v in zip(choice.step_sizes, choice.ksd)],
      acceptance=None, num_steps=per_step_size * len(choice.step_sizes),
      num_gradients=sum(choice.num_gradients),
      seconds=time.perf_counter() - start,
      choices="criterion='ksd': the step size alone (no mass adapted, the "
      "kernel's own trajectory length)")
  return WarmupResult(choice.kernel, choice.final_states[best], report)
