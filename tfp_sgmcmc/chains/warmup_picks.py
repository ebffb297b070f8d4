"""What `warm_up` picks when the mass and the trajectory length are left to
it (`mass=None`, `dense_mass=None`, `adapt_num_leapfrog_steps=None`), the
one rule that `warm_up` and `tfp_sgmcmc.sample` share.

* The mass: dense (Stan's `dense_e`) where the kernel adapts a mass, the
  state is one vector of at most `DENSE_MASS_MAX` coordinates per chain and
  the warm-up has at least `DENSE_MIN_STEPS` steps; else diagonal. A
  diagonal mass leaves the posterior's correlations: along the direction in
  which correlated coordinates move together the chains mix slowly, and
  R-hat and ESS show it (on the N = 200,000 logistic regression of
  benchmarks/one_call.py the smallest ESS rose from 562 to 1,820 of 4,000;
  on the ill-conditioned Gaussian of benchmarks/posteriors.py, from 4 to
  963). Below `DENSE_MIN_STEPS` the slow windows hold too few draws for a
  d x d covariance; above `DENSE_MASS_MAX` each step's [d, d] product
  costs more than a gradient of most models.
* The trajectory length: tuned by ChEES (`chains.trajectory_length`)
  where the kernel's test is its own trajectory (AMAGOLD) and its target's
  gradients are exact (a full-batch target, `targets.log_prob.is_full_batch`,
  which `kernels.interop.reports_exact_log_prob` reads too), on 2 or more
  chains (ChEES measures the trajectories against the chains' mean);
  else the kernel's fixed T. On minibatch gradients the noise makes the
  trajectories turn back early, and ChEES picks a T that mixes worse than
  the fixed one (German credit, minibatches of 64 with control variates:
  T = 6 and ESS per 1,000 gradients 1.07 -> 0.34). Nor with a diagonal
  mass adapted: on random intercepts (benchmarks/random_intercepts.py,
  4 seeds) ChEES froze T = 1-5 and never mixed (R-hat 1.73 or more),
  where T = 10 mixed on 3 of the 4 (R-hat 1.004-1.075).
* The step size of a kernel without an exact test of its own chain
  (SGHMC, SGNHT, SGLD): the test's, capped at the largest at which that
  chain on a standard normal in the mass's units settles with an sd within
  `STATIONARY_SD_TOLERANCE` of 1 (`dynamics.stationary`); without a
  mass, in the units of the smallest sd of the warm-up's draws. The test runs AMAGOLD's integrator of their dynamics, not their
  own step, and in a few dimensions it accepts steps at which their chains
  settle far off: on a standard normal (exact gradients) it tuned SGHMC
  (Euler, friction 1) to h = 1.21 in one dimension, where its chain
  diverges, and to 0.95 in five, where its sd is 1.33; SGNHT to 1.07 and
  0.86, where its thermostat runs away (it does from h = 0.45).

Each pick comes with its reason, in the words `WarmupReport.choices`
shows a user.
"""

import collections

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc.chains import trajectory_length as length_lib
from tfp_sgmcmc.chains.window_adaptation import MASS_ESTIMATES
from tfp_sgmcmc.targets import log_prob as log_prob_lib

__all__ = ["DENSE_MASS_MAX", "DENSE_MIN_STEPS", "MASSES", "Pick",
           "pick_mass", "pick_length", "resolve_mass", "vector_state_hint",
           "STATIONARY_SD_TOLERANCE", "pick_step_size", "draws_scale"]

DENSE_MASS_MAX = 200
DENSE_MIN_STEPS = 200
STATIONARY_SD_TOLERANCE = 0.05


class Pick(collections.namedtuple("Pick", ["choice", "reason", "refusal"])):
  """A pick: `choice` (the mass's form, or whether to tune the length),
  `reason` (a sentence for the report), and `refusal` (why an option the
  user forced cannot be had, else None)."""
  __slots__ = ()


def pick_mass(kernel, parts, batch_ndims, num_steps, dense_mass=None,
              adapt_mass=None):
  """The mass `warm_up` adapts: "dense", "diagonal" or None (no mass).

  Args:
    kernel: the kernel to warm up (`_warmup_takes_mass`: whether it takes
      a `momentum_distribution`).
    parts: the flat state parts, chain axes first.
    batch_ndims: the number of chain axes.
    num_steps: the warm-up's steps.
    dense_mass: None (the rule above), True (dense: `refusal` says why it
      cannot be) or False (diagonal).
    adapt_mass: None (where the kernel takes a mass), True or False.

  Returns:
    A `Pick`.
  """
  kind = type(kernel).__name__
  takes_mass = getattr(kernel, "_warmup_takes_mass", False)
  if adapt_mass is False or (adapt_mass is None and not takes_mass):
    why = ("adapt_mass=False" if adapt_mass is False else
           f"this {kind} takes no mass matrix")
    return Pick(None, f"no mass adapted: {why}",
                f"this {kind} takes no mass matrix" if dense_mass else None)
  if dense_mass is False:
    return Pick("diagonal", "diagonal mass: as asked (dense_mass=False)",
                None)
  why = None
  if len(parts) != 1 or parts[0].shape.rank != batch_ndims + 1:
    why = "the state is not one vector per chain"
  elif dense_mass is None and parts[0].shape[-1] > DENSE_MASS_MAX:
    why = (f"the state has more than {DENSE_MASS_MAX} coordinates "
           f"({parts[0].shape[-1]})")
  elif dense_mass is None and num_steps < DENSE_MIN_STEPS:
    why = (f"the warm-up has fewer than {DENSE_MIN_STEPS} steps "
           f"({num_steps}), too few draws for a covariance")
  if dense_mass:
    return Pick("dense", "dense mass: as asked (dense_mass=True)", why)
  if why is not None:
    return Pick("diagonal", f"diagonal mass: {why}", None)
  return Pick("dense", (
      f"dense mass: the state is one vector of {parts[0].shape[-1]} <= "
      f"{DENSE_MASS_MAX} coordinates and the warm-up has {num_steps} >= "
      f"{DENSE_MIN_STEPS} steps"), None)


def vector_state_hint(kernel, parts, batch_ndims, num_steps,
                      dense_mass=None, fix=None):
  """The cause and fix to add to an unhealthy run's problems where its mass
  was diagonal only because the state is not one vector per chain (a
  matrix, or several parts) while as one vector it would have been dense;
  else None. A diagonal mass leaves correlated coordinates, e.g. the
  direction a softmax's logits share, to mix by a random walk, and R-hat
  and ESS alone do not say that the state's shape is what to change.
  `fix`: how to make the state one vector, where the default (a
  `parameter_shapes=[d]` vector split inside the model's functions) is
  not the way (a `JointDistributionTarget`'s `flat_state=True`)."""
  chains = parts[0].shape[:batch_ndims]
  if len(parts) == 1 and parts[0].shape.rank == batch_ndims + 1:
    return None
  size = sum(int(np.prod(p.shape[batch_ndims:])) for p in parts)
  flat = tf.TensorSpec(chains.concatenate([size]), parts[0].dtype)
  if pick_mass(kernel, [flat], batch_ndims, num_steps,
               dense_mass).choice != "dense":
    return None
  shapes = [p.shape[batch_ndims:].as_list() for p in parts]
  fix = fix or (f"parameter_shapes=[{size}], reshaped or split inside the "
                "model's functions")
  return (
      "the mass was diagonal because the state is not one vector per chain "
      f"(shape{'s' * (len(parts) > 1)} "
      f"{shapes if len(parts) > 1 else shapes[0]}), which leaves correlated "
      f"coordinates to mix slowly; as one vector ({fix}) it gets a dense "
      "mass")


def pick_length(kernel, adapt_num_leapfrog_steps=None,
                criterion="acceptance", num_chains=None, mass=None):
  """Whether `warm_up` tunes the trajectory length, as a `Pick`
  (`adapt_num_leapfrog_steps`: None for the rule above, else kept as
  given; its checks are `trajectory_length.check_options`). `num_chains`
  (None: not known): ChEES needs at least two chains; `mass`: the form of
  the mass adapted (None: none)."""
  fixed = getattr(kernel, "num_leapfrog_steps", None)
  fixed = "" if fixed is None else f" (T = {fixed})"
  if adapt_num_leapfrog_steps is not None:
    return Pick(adapt_num_leapfrog_steps, (
        "trajectory length tuned by ChEES: as asked "
        "(adapt_num_leapfrog_steps=True)" if adapt_num_leapfrog_steps else
        f"trajectory length fixed{fixed}: as asked "
        "(adapt_num_leapfrog_steps=False)"), None)
  kind = type(kernel).__name__
  if getattr(kernel, "_warmup_length_test", None) is None:
    why = f"this {kind} has no trajectory length of its own to tune"
  elif criterion != "acceptance":
    why = f"criterion={criterion!r} tunes the step size alone"
  elif num_chains is not None and num_chains < 2:
    why = length_lib.ONE_CHAIN
  elif not log_prob_lib.is_full_batch(getattr(kernel, "target", None)):
    why = ("the gradients are minibatch estimates, whose noise misleads "
           "ChEES (a full-batch target would tune it)")
  elif mass == "diagonal":
    why = ("the mass is diagonal, with which ChEES cut T to 1-5 on a "
           "random-intercepts model that mixed at T = 10")
  else:
    return Pick(True, (
        "trajectory length tuned by ChEES: the gradients are exact "
        "(a full-batch target)"), None)
  return Pick(False, f"trajectory length fixed{fixed}: {why}", None)


MASSES = ("diagonal", "dense", "low_rank")


def resolve_mass(kernel, parts, batch_ndims, num_steps, mass, dense_mass,
                 adapt_mass, mass_rank, mass_estimate):
  """`warm_up`'s mass options resolved to what it adapts: returns (mass,
  the report's sentence on it, mass_rank), picking where `mass` and
  `dense_mass` are None (`pick_mass`), and refusing, naming the option
  and the fix, a form the kernel or state cannot take."""
  kind = type(kernel).__name__
  takes_mass = getattr(kernel, "_warmup_takes_mass", False)
  mass_pick = None
  asked = (f"mass={mass!r}" if mass is not None and not dense_mass else
           f"dense_mass={dense_mass!r}")
  if mass is None and dense_mass is None:  # The warm-up picks.
    gradients = mass_estimate == "gradients"  # They give a diagonal only.
    mass_pick = pick_mass(kernel, parts, batch_ndims, num_steps,
                           dense_mass=False if gradients else None,
                           adapt_mass=adapt_mass)
    mass, mass_reason = mass_pick.choice or "diagonal", (
        "diagonal mass: mass_estimate='gradients' estimates a diagonal one"
        if gradients and mass_pick.choice else mass_pick.reason)
  elif mass is None:
    mass = "dense" if dense_mass else "diagonal"
  elif mass not in MASSES or (dense_mass and mass != "dense"):
    raise ValueError(
        f"`mass` must be one of {MASSES} (with dense_mass=True: 'dense' or "
        f"None); got mass={mass!r}, dense_mass={dense_mass!r}.")
  named = "`dense_mass=True`" if dense_mass else f"`mass={mass!r}`"
  if mass_pick is None:
    mass_reason = (
        f"{mass.replace('_', '-')} mass: as asked ({asked})"
        if adapt_mass else "no mass adapted: " + (
            "adapt_mass=False" if takes_mass else
            f"this {kind} takes no mass matrix"))
  if mass != "diagonal" and (not adapt_mass or len(parts) != 1 or
                             parts[0].shape.rank != batch_ndims + 1):
    raise ValueError(
        f"{named} needs a {kind} that adapts a mass "
        f"(adapt_mass={adapt_mass}) and a state of one vector per chain; got "
        f"{len(parts)} part(s) of shape(s) {[p.shape.as_list() for p in parts]}"
        f" with {batch_ndims} chain axes. Use dense_mass=False (diagonal).")
  if mass == "low_rank":
    size = parts[0].shape[-1]
    mass_rank = min(size, 10) if mass_rank is None else mass_rank
    arguments.check_integer("mass_rank", mass_rank, 1, size,
                            hint=" (The most is the state's dimension.)")
  if mass_estimate not in MASS_ESTIMATES:
    raise ValueError(f"`mass_estimate` must be one of "
                     f"{MASS_ESTIMATES}; got {mass_estimate!r}.")
  from_gradients = mass_estimate == "gradients"
  target = getattr(kernel, "target", None)
  if from_gradients and (not adapt_mass or mass != "diagonal" or
                         target is None):
    raise ValueError(
        f"`mass_estimate='gradients'` estimates a diagonal mass from the "
        f"gradients of the kernel's target; got adapt_mass={adapt_mass}, "
        f"mass={mass!r} and a {kind} with target {target!r}. Use "
        "mass_estimate='draws', or a diagonal mass of a kernel built on a "
        "tfp_sgmcmc target.")
  return mass, mass_reason, mass_rank


def pick_step_size(kernel, step_size, scale):
  """`Pick(step size, reason)`: the test's `step_size`, or the kernel's
  stationary bound (`_warmup_max_step_size`) for a posterior whose
  smallest sd in the mass's units is `scale` (1 with an adapted mass; None:
  not known, no bound) where that is smaller; the reason is "" when not
  capped."""
  bound = getattr(kernel, "_warmup_max_step_size", None)
  bound = (bound(STATIONARY_SD_TOLERANCE, scale)
           if bound and scale is not None else None)
  if bound is None or step_size <= bound:
    return Pick(step_size, "", None)
  return Pick(bound, (
      f"; step size {bound:.3g}, where the test reached {step_size:.3g}: "
      f"the largest at which {type(kernel).__name__}'s own chain on a "
      "Gaussian with the posterior's scale keeps its sd within "
      f"{STATIONARY_SD_TOLERANCE:.0%}"), None)


def draws_scale(variance):
  """The smallest sd of a window's draws (per-part variances), the scale
  `pick_step_size` reads without a mass; None where no coordinate moved.
  A coordinate that did not move says nothing of the posterior's scale
  (its 0 would cap the step size at 0)."""
  spread = np.concatenate([np.ravel(v) for v in variance])
  spread = spread[np.isfinite(spread) & (spread > 0)]
  return float(np.sqrt(spread.min())) if spread.size else None
