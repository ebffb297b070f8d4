"""How the kernels take part in TFP's `tfp.mcmc` protocol.

* `resolve_target`: a kernel built from a minibatch `target`, from TFP's
  full-batch `target_log_prob_fn`, or from a function a TFP wrapper built
  on a target's own (`TransformedTransitionKernel` rebuilds the innermost
  kernel with `copy(target_log_prob_fn=...)`).
* The `target_log_prob` results field and the step count, which TFP's
  `MetropolisHastings` compares and chooses per chain.
* Exact wrappers: TFP's `MetropolisHastings` and `ReplicaExchangeMC`
  compare `target_log_prob` across states as a log density. Around a kernel
  whose `target_log_prob` is a minibatch estimate that is a silent wrong
  answer. TFP's classes are left as they are; the kernel itself refuses
  `MetropolisHastings` at its first `one_step`, from the mark TFP leaves on
  the results it passes back (`refuse_metropolis_hastings_around_inexact`).
  `ReplicaExchangeMC` leaves no such mark: a kernel on a minibatch target
  inside it is the user's to avoid (docs/tfp_workflow.md); the kernel's
  minibatch `target_log_prob_fn` refuses to be evaluated as a density.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import arguments
from tfp_sgmcmc.targets import log_prob as log_prob_lib
from tfp_sgmcmc.targets.base import check_target

__all__ = ["resolve_target", "sampled_target_property", "step_count_of",
           "initial_step_count", "reports_exact_log_prob", "target_log_prob",
           "refuse_metropolis_hastings_around_inexact",
           "without_strip_mark", "refuse_inexact", "refuse_second_test",
           "refuse_rejection_keeping_momentum", "refuse_tempered_noise",
           "refuse_unknown_temperature", "refuse_without_proposal_ratio",
           "refuse_tempered_transform"]


def resolve_target(target, target_log_prob_fn, temperature=1.,
                   kernel=None):
  """The target a kernel samples, from its `target` / `target_log_prob_fn`
  (a kernel of another `temperature` than 1, named `kernel`, is refused
  where TFP's `TransformedTransitionKernel` built the function:
  `refuse_tempered_transform`).

  Returns (target to sample, `target` parameter, `target_log_prob_fn`
  parameter). A kernel keeps the two parameters (so TFP's wrappers find
  `target_log_prob_fn` and `kernel.copy(target_log_prob_fn=f)` rebuilds
  it) and samples the first:

  * `target` alone: that minibatch target; the reported
    `target_log_prob_fn` is its `MinibatchLogProb`.
  * `target_log_prob_fn` alone: a full-batch log density (exact gradients).
  * both, the function not the target's own: a function a TFP wrapper built
    on the target's (`LogProbFnTarget(fn, base_target=target)`).
  """
  resolved = _resolve(target, target_log_prob_fn)
  refuse_tempered_transform(target_log_prob_fn, temperature, kernel)
  return resolved


def _resolve(target, target_log_prob_fn):
  if target is None and target_log_prob_fn is None:
    raise TypeError(
        "got `target`=None (NoneType) and no `target_log_prob_fn`: give "
        "`target` (a tfp_sgmcmc minibatch target such as InMemoryTarget) or "
        "`target_log_prob_fn` (a full-batch log density taking one argument "
        "per state part, as TFP's HMC does).")
  if target is not None:
    check_target(target)
  if target_log_prob_fn is None:
    return target, target, log_prob_lib.minibatch_log_prob_fn(target)
  if not callable(target_log_prob_fn):
    raise TypeError("`target_log_prob_fn` must be callable (state parts -> "
                    f"log density per chain); got {target_log_prob_fn!r}.")
  if target is None:
    return (log_prob_lib.LogProbFnTarget(target_log_prob_fn), None,
            target_log_prob_fn)
  if target_log_prob_fn is log_prob_lib.minibatch_log_prob_fn(target):
    return target, target, target_log_prob_fn
  if isinstance(target_log_prob_fn, log_prob_lib.MinibatchLogProb):
    # Another target's own function: `kernel.copy(target=new)` carries the
    # old target's function in `parameters`; the new target replaces both.
    return target, target, log_prob_lib.minibatch_log_prob_fn(target)
  return (log_prob_lib.LogProbFnTarget(target_log_prob_fn, target), target,
          target_log_prob_fn)


def refuse_tempered_transform(target_log_prob_fn, temperature, kernel):
  """Raises where TFP's `TransformedTransitionKernel` rebuilt `kernel` (of
  `temperature` other than the number 1) on its transformed density
  log pi(b(z)) + log |det J_b(z)|. The kernel tempers that whole function,
  the Jacobian too, so the draws b(z) do not follow pi^(1/T) and their law
  depends on the bijector (AMAGOLD at T = 0.5 on a Gamma(3, 2): mean 1.50
  with Exp, 1.37 with Softplus, for 1.25). A Variable is refused too: its
  value may change after the check."""
  if (getattr(target_log_prob_fn, "__module__", None)
      != tfp.mcmc.TransformedTransitionKernel.__module__):
    return
  value = arguments.static_value(temperature)
  if value is not None and np.all(value == 1.):
    return
  raise ValueError(
      f"tfp.mcmc.TransformedTransitionKernel around {kernel} with "
      f"`temperature`={arguments.describe(temperature)}: the kernel would "
      "temper the transformed density, the bijector's log-Jacobian "
      "included, so the draws would not follow pi^(1/T) (and would change "
      "with the bijector). Temper the density before the transform and "
      "keep temperature=1: `target_log_prob_fn=lambda *x: log_prob(*x) / "
      "T`, or for a minibatch target tfp_sgmcmc.TemperedTarget(target, "
      "T).")


def sampled_target_property():
  """`kernel.target`: the target the kernel samples (see `resolve_target`)."""
  return property(lambda self: self._target,  # pylint: disable=protected-access
                  doc="The target the kernel samples: its `target`, the "
                  "full-batch `target_log_prob_fn`, or a TFP wrapper's "
                  "function built on the target's.")


def reports_exact_log_prob(target):
  """Whether `target`'s energies and gradients are exact (no minibatch), so
  that a kernel's `target_log_prob` is the log density."""
  return log_prob_lib.is_full_batch(target)


def step_count_of(results):
  """The kernel's step count as one scalar.

  Kernels with a full-batch target keep `step_count` per chain, because
  `tfp.mcmc.MetropolisHastings` chooses every results field per chain (a
  scalar would change shape after one step); a rejected chain's count then
  lags, and the clock is the largest count."""
  count = results.step_count
  if count.shape.rank:
    return tf.reduce_max(count)
  return count


def initial_step_count(target, energy):
  """0, per chain for a full-batch target (see `step_count_of`)."""
  if reports_exact_log_prob(target):
    return tf.zeros(tf.shape(energy), tf.int32)
  return tf.constant(0, tf.int32)


def target_log_prob(target, state, energy_seen):
  """The `target_log_prob` results field.

  Full-batch target: the exact log density at `state` (the state the step
  returns; one extra evaluation, no gradient), which TFP's
  MetropolisHastings and ReplicaExchangeMC compare. Minibatch target:
  -`energy_seen`, the minibatch estimate the step computed anyway (at the
  point where it evaluated it, not necessarily `state`)."""
  if log_prob_lib.is_full_batch(target):
    return tf.cast(-target.energy(state), energy_seen.dtype)
  return -energy_seen


# --- TFP's exact wrappers ----------------------------------------------------


def without_strip_mark(results, seed):
  """`results` with `seed` in its `seed` field where that holds TFP's mark
  `[]` (see `refuse_metropolis_hastings_around_inexact`): for an exact
  wrapper of ours (AMAGOLD around its minibatch proposal) to hand its
  proposal, whose `target_log_prob` only the wrapper's own test compares.
  Our proposals' results are flat (no inner results), so their own `seed`
  is the one TFP marks. A results' `seed` is a report; no step reads
  it."""
  marked = getattr(results, "seed", None)
  return (results._replace(seed=tfp.random.sanitize_seed(seed))
          if isinstance(marked, list) and not marked else results)


def refuse_metropolis_hastings_around_inexact(kernel, previous_results):
  """Raises, at the first `one_step` (when traced), if TFP's
  `MetropolisHastings` holds `kernel` (directly or through wrappers) while
  `kernel` reports a minibatch estimate as `target_log_prob` (TFP's test
  would compare minibatch energies across states), makes its own test
  (`corrects_with_own_test`: a second test biases an exact chain) or
  carries its momentum over (`negates_momentum_on_rejection`: TFP's
  rejection keeps it, where an exact one negates it) or has a temperature
  other than 1 (its noise's only: TFP's test would sample T = 1).

  Nothing in TFP is changed for this: the results TFP's
  `MetropolisHastings` passes back carry its mark. It keeps its inner
  kernel's results with every `seed` field set to `[]`
  (`mcmc_util.strip_seeds`, recursively through wrappers in between), and
  hands those back to the inner kernel at the next step. Our kernels always
  report a seed, so `[]` only ever comes from there."""
  seed = getattr(previous_results, "seed", None)
  if not (isinstance(seed, list) and not seed):
    return
  if getattr(kernel, "corrects_with_own_test", False):
    refuse_second_test(kernel)
  if getattr(kernel, "negates_momentum_on_rejection", False):
    refuse_rejection_keeping_momentum(kernel)
  given = getattr(kernel, "temperature", 1.)
  temperature = arguments.static_value(given)
  if temperature is None:
    refuse_unknown_temperature(kernel, given)
  if np.any(temperature != 1.):
    refuse_tempered_noise(kernel, temperature)
  if not kernel.reports_exact_log_prob:
    refuse_inexact(kernel, "MetropolisHastings")
  if "log_acceptance_correction" not in getattr(previous_results, "_fields",
                                                ()):
    refuse_without_proposal_ratio(kernel)


def refuse_tempered_noise(kernel, temperature):
  """Raises: TFP's `MetropolisHastings` around `kernel`, whose temperature
  T only scales its injected noise: TFP's test compares the untempered
  `target_log_prob`, so the chain samples pi, not pi^(1/T), and T is lost
  (SGLD at T = 2 on a standard normal under it: sd 1.00, where SGLD alone
  and AMAGOLD at T = 2 give 1.41)."""
  raise ValueError(
      f"tfp.mcmc.MetropolisHastings around {type(kernel).__name__} with "
      f"`temperature`={temperature.tolist()}: the temperature only scales "
      "the kernel's noise, and TFP's test compares the untempered "
      "`target_log_prob`, so the chain would sample the T = 1 posterior. "
      "For an exact tempered posterior give the tempered density (a "
      "`target_log_prob_fn` divided by T, with temperature=1), or use "
      "tfp_sgmcmc.AMAGOLD(..., temperature=T).")


def refuse_unknown_temperature(kernel, temperature):
  """Raises: TFP's `MetropolisHastings` around `kernel`, whose temperature
  is a `tf.Variable` (or a tensor) with no value known while the chain is
  built. TFP's test samples T = 1 whatever it holds at run time (SGLD with
  a Variable T = 2 under it: variance 1.00 on a standard normal, where
  SGLD alone gives 2), so `refuse_tempered_noise` must not be skipped for
  want of a value to check."""
  if isinstance(temperature, tf.Variable):
    with tf.init_scope():  # Its value now, also while tracing.
      seen = f"a tf.Variable ({temperature.numpy()!r} now)"
  else:
    seen = f"a tensor of unknown value ({temperature!r})"
  raise ValueError(
      f"tfp.mcmc.MetropolisHastings around {type(kernel).__name__} with "
      f"`temperature` {seen}: TFP's test compares the untempered "
      "`target_log_prob`, so the chain samples the T = 1 posterior "
      "whatever value the temperature takes. Give temperature=1. (a "
      "number) for MALA; for an exact tempered posterior give the "
      "tempered density (a `target_log_prob_fn` divided by T), or use "
      "tfp_sgmcmc.AMAGOLD(..., temperature=T), which reads a Variable at "
      "run time.")


def refuse_without_proposal_ratio(kernel):
  """Raises: TFP's `MetropolisHastings` around `kernel`, whose results have
  no `log_acceptance_correction` (SGHMC, SGNHT, pSGLD, SGBD, SG-NUTS):
  their moves are not symmetric proposals (momentum carried over, a
  preconditioner or a sign flip that depends on the position), so TFP's
  test with its assumed ratio of 0 would not sample pi; and TFP's choice
  per chain cannot select their per-part results, so it failed in
  TensorFlow's words (a loop whose shapes change) instead of saying so."""
  raise ValueError(
      f"tfp.mcmc.MetropolisHastings around {type(kernel).__name__}: its "
      "move has no proposal ratio (`log_acceptance_correction`), and "
      "TFP's test would take it as symmetric, which it is not, so the "
      "chain would not sample the posterior. For an exact chain use "
      "MetropolisHastings(tfp_sgmcmc.SGLD(target_log_prob_fn=...)) (MALA), "
      "MetropolisHastings(tfp_sgmcmc.UncalibratedBarker(...)), "
      "tfp_sgmcmc.AMAGOLD or tfp_sgmcmc.AmortizedBarker.")


def refuse_rejection_keeping_momentum(kernel):
  """Raises: TFP's `MetropolisHastings` around `kernel`, a proposal whose
  momentum carries over (`negates_momentum_on_rejection`). Where TFP's test
  rejects, it keeps the previous results, momentum included; the chain is
  pi-invariant only if the rejection also negates the momentum, as
  `AmortizedMetropolisHastings` does: on a standard normal, skew-reversible
  AMAGOLD's proposal under TFP's test had sd 1.235 (10 standard errors
  high), under AMAGOLD's own 1.005."""
  raise ValueError(
      f"tfp.mcmc.MetropolisHastings around {type(kernel).__name__} with "
      "`resample_momentum=False`: the momentum is carried from proposal to "
      "proposal, and TFP's test keeps it unchanged where it rejects, while "
      "an exact chain must negate it there. Use tfp_sgmcmc.AMAGOLD (or "
      "tfp_sgmcmc.AmortizedMetropolisHastings around this proposal), whose "
      "test negates it, or build the proposal with resample_momentum=True.")


def refuse_second_test(kernel):
  """Raises: TFP's `MetropolisHastings` around `kernel`, which makes its own
  M-H test (AMAGOLD, the amortized Barker). Its move K already leaves pi
  invariant; TFP's test treats it as a symmetric proposal
  (`log_acceptance_correction` 0, its results have none) and accepts it
  with probability min(1, pi(x') / pi(x)), which pulls the chain towards
  the mode: on a Gaussian of sds (0.1, 3), AMAGOLD's draws stepped by
  `one_step` had sds 0.071 and 2.01."""
  raise ValueError(
      f"tfp.mcmc.MetropolisHastings around {type(kernel).__name__}: "
      f"{type(kernel).__name__} makes its own exact test, and TFP's second "
      "test would accept each already-corrected move with probability "
      "min(1, pi(x') / pi(x)) (no `log_acceptance_correction`), which "
      "narrows the posterior. Use the kernel without MetropolisHastings; "
      "its `is_accepted` and `log_accept_ratio` are in its own results.")


def refuse_inexact(kernel, wrapper):
  """Raises: `kernel` (a tfp_sgmcmc kernel) reports a minibatch estimate
  (or, built with `compute_energy=False`, NaN) as `target_log_prob`, for
  TFP's `wrapper` to compare."""
  if reports_exact_log_prob(kernel.target):
    raise ValueError(
        f"tfp.mcmc.{wrapper} around {type(kernel).__name__} built with "
        "`compute_energy=False`: its full-batch target's log density is not "
        "computed, so `target_log_prob` holds NaN and the test would reject "
        "every proposal. Build the kernel with compute_energy=True (the "
        "default) to wrap it.")
  raise ValueError(
      f"tfp.mcmc.{wrapper} around {type(kernel).__name__} with a minibatch "
      "target: its `target_log_prob` is a minibatch estimate (-U~ on one "
      "batch), and an accept/reject or replica-swap test on minibatch "
      "energies does not sample the posterior. Give the kernel a "
      "full-batch log density (`target_log_prob_fn=...`, e.g. through "
      "make_kernel_fn=lambda fn: tfp_sgmcmc.SGLD(target_log_prob_fn=fn"
      ", step_size=...), or InMemoryTarget(..., full_batch=True)), or "
      "use tfp_sgmcmc.AMAGOLD, whose amortized test is exact on "
      "minibatches.")
