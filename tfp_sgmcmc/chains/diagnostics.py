"""Run health: per-chain divergences, acceptance, step size, ESS and R-hat.

`summarize(samples, trace)` reads what every kernel of the library reports
(`diverged`, and where present `is_accepted`, `step_size`, `energy`),
wherever it sits in nested results (adaptation and M-H wrappers included),
and combines it with the effective sample size (TFP's
`effective_sample_size` formula, `effective_sample_size` here), TFP's
`potential_scale_reduction` and ArviZ's rank-normalised R-hat
(`chains.mixing`). It returns a `ChainHealth` record, prints a
short report, and warns (`UnhealthyChainWarning`) when the run looks wrong.

    samples, trace = tfp.mcmc.sample_chain(..., trace_fn=lambda _, r: r)
    health = tfp_sgmcmc.summarize(samples, trace)
"""

import collections
import time
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc._structure import merge_chain_axes
from tfp_sgmcmc.chains import stein
from tfp_sgmcmc.chains.heating import (HEATING_THRESHOLD, HEATING_WINDOWS,
                                       energy_trend, energy_windows,
                                       heating)
from tfp_sgmcmc.chains.minibatch_sharing import (FULL_BATCH, INDEPENDENT,
                                                 SHARED, minibatch_sharing)
from tfp_sgmcmc.chains.mixing import (RankDiagnostics,
                                      effective_sample_size,
                                      rank_diagnostics, rank_ess_note,
                                      rank_rhat_note, split_rhat)

__all__ = ["summarize", "ChainHealth", "UnhealthyChainWarning",
           "find_field", "divergent_transitions",
           "heating", "energy_windows", "HEATING_THRESHOLD", "energy_trend",
           "minibatch_sharing", "effective_sample_size", "RunVerdict",
           "divergence_and_heating", "SHARED", "INDEPENDENT", "FULL_BATCH"]


class UnhealthyChainWarning(UserWarning):
  """Warned by `summarize`, `sample_moments` and the Keras callback when a
  run diverged, heated up, did not mix, or was rejected almost always."""


ChainHealth = collections.namedtuple("ChainHealth", [
    "num_draws", "num_chains", "divergences", "acceptance_rate",
    "step_size", "heating", "min_ess", "max_rhat", "problems", "notes",
    "ksd", "max_rank_rhat", "min_bulk_ess", "min_tail_ess"],
                                 defaults=((), None, None, None, None))
ChainHealth.__doc__ = """What `summarize` returns.

Attributes:
  num_draws: the number of draws per chain.
  num_chains: the number of chains.
  divergences: per chain, the number of traced steps flagged `diverged`,
    plus the divergent transitions: traced steps whose `log_accept_ratio`
    is not finite (a proposal rejected for a non-finite energy); zeros
    without a trace.
  acceptance_rate: per chain, the mean of the traced `is_accepted`, or None.
  step_size: the last traced `step_size` (a list of per-part ones), or None.
  heating: per chain, the `heating` statistic of the traced `energy`, or
    None.
  min_ess: the smallest effective sample size over coordinates (summed over
    chains); 0 when a draw is not finite.
  max_rhat: the largest split R-hat over coordinates, TFP's (a ratio of
    variances; one chain: of its halves, 1 below 4 draws; chains unsplit
    below 4; inf if not finite).
  max_rank_rhat: the largest rank-normalised R-hat over coordinates,
    ArviZ's `az.rhat(method="rank")` (bulk and tail, on ArviZ's scale:
    about the square root of `max_rhat`); None below 4 draws.
  min_bulk_ess, min_tail_ess: the smallest of ArviZ's bulk and tail ESS
    over coordinates (`az.ess(method="bulk")`, `method="tail"`: chains
    together, so chains that disagree add few effective draws); None
    below 4 draws.
  problems: the thresholds crossed, as sentences; empty for a healthy run.
  notes: caveats that are not problems of the run, as sentences: with
    `summarize(..., kernel=...)` of chains that shared their minibatches,
    that R-hat and ESS are optimistic. Empty by default.
  ksd: with `summarize(..., target=...)`, the kernel Stein discrepancy of
    the draws (`tfp_sgmcmc.ksd`, chains pooled, in the draws' sds:
    `scale="diagonal"`; its cost is in `notes`), else None.
"""


# A chain whose sd is below this fraction of the median chain's in every
# coordinate has not moved: for an honest chain of at least
# STUCK_MIN_DRAWS draws with a few effective ones, so small an sd in one
# coordinate is already improbable.
STUCK_SD_RATIO = 0.01
STUCK_MIN_DRAWS = 10


def _stuck_chains(flat, diverged):
  """Chains ([draws, chains, coordinates]) that did not move: every draw
  the same, or (with other chains and `STUCK_MIN_DRAWS` draws) sds under
  `STUCK_SD_RATIO` of the median chain's in every coordinate. The median
  is over the chains that did not diverge (`diverged`, per chain), whose
  sds can be 1e13 and make a healthy chain look still; a diverged chain
  is reported as such, not as stuck."""
  sds = flat.std(axis=0)
  still = np.all(np.ptp(flat, axis=0) == 0., axis=-1)
  kept = ~diverged if np.any(~diverged) else np.ones_like(diverged)
  if kept.sum() > 1 and flat.shape[0] >= STUCK_MIN_DRAWS:
    median = np.median(sds[kept], axis=0)
    still |= np.all(sds < STUCK_SD_RATIO * median, axis=-1) & np.any(
        median > 0., axis=-1)
  return np.flatnonzero(still & kept)


RunVerdict = collections.namedtuple(
    "RunVerdict", ["divergences", "heating", "problems"])
RunVerdict.__doc__ = """What `divergence_and_heating` returns.

Attributes:
  divergences: per chain, the number of traced steps flagged `diverged`,
    plus those whose `log_accept_ratio` is not finite (zeros without
    either field).
  heating: per chain, the `heating` statistic of the traced `energy`, or
    None (no energy traced, or fewer than 8 draws).
  problems: sentences for what went wrong (non-finite draws, diverged
    chains, heating chains); empty for a run with none of them.
"""


def divergence_and_heating(samples, trace, heating_threshold=None,
                           reference_energy=None):
  """Did a run diverge or heat up? The verdict of `summarize` without ESS
  and R-hat, nothing printed or warned.

  For a report at the end of a run (e.g. `tfp_sgmcmc.sample`): an SG chain
  at too large a step size either overflows (its `diverged` flags, or
  non-finite draws) or heats up with every value finite (its energy climbs
  far beyond the d/2 that sampling explains, see `heating`).

  Args:
    samples: draws [num_draws, num_chains, ...] (or a structure of them).
    trace: the traced kernel results of the same run (or None).
    heating_threshold, reference_energy: as for `summarize` (None:
      `HEATING_THRESHOLD`).

  Returns:
    `RunVerdict(divergences, heating, problems)`.

  #### Example

  ```python
  run = tfp_sgmcmc.sample_chain_with_progress(
      300, tf.zeros([4, d]), tfp_sgmcmc.SGHMC(target, 0.01, friction=0.1),
      seed=[0, 1], progress=False)
  verdict = tfp_sgmcmc.diagnostics.divergence_and_heating(run.all_states,
                                                          run.trace)
  print(verdict.problems)   # []: no chain diverged or heated up
  print(verdict.heating)    # about [2, 2, 2, 2], below HEATING_THRESHOLD
  ```
  """
  divergences, heat, broken, hot, _ = _verdict(samples, trace,
                                               heating_threshold,
                                               reference_energy)
  return RunVerdict(divergences=divergences, heating=heat,
                    problems=broken + hot)


def _verdict(samples, trace, heating_threshold, reference_energy):
  """(divergences, heating, [non-finite and divergence problems],
  [heating problems]) of `divergence_and_heating`."""
  if heating_threshold is None:
    heating_threshold = HEATING_THRESHOLD
  samples = merge_chain_axes(samples, per_chain_field(trace))
  parts = [np.asarray(p) for p in tf.nest.flatten(samples)]
  num_draws = parts[0].shape[0]
  num_chains = parts[0].shape[1] if parts[0].ndim > 1 else 1
  num_parameters = sum(
      int(np.prod(p.shape[2:] if p.ndim > 1 else ())) for p in parts)
  finite = all(np.all(np.isfinite(p)) for p in parts)
  diverged = find_field(trace, "diverged")
  divergences = (np.zeros(num_chains, int) if diverged is None else
                 np.asarray(diverged).reshape(num_draws, -1).sum(axis=0))
  ratio = find_field(trace, "log_accept_ratio")
  rejected = (np.zeros(num_chains, int) if ratio is None else np.sum(
      divergent_transitions(ratio).reshape(num_draws, -1), axis=0))
  energy = find_field(trace, "energy")
  windows = (None if energy is None else energy_windows(
      np.asarray(energy, np.float64).reshape(num_draws, -1)))
  heat = (None if windows is None else
          heating(windows[0], num_parameters, reference_energy, windows[1]))
  broken, hot = [], []
  if not finite:
    broken.append("samples contain NaN or inf")
  if divergences.sum():
    broken.append(f"{int((divergences > 0).sum())} of {num_chains} chains "
                  "diverged (non-finite energy or state)")
  if rejected.sum():
    broken.append(
        f"{int(rejected.sum())} divergent transitions in "
        f"{int((rejected > 0).sum())} of {num_chains} chains (proposals "
        "with a non-finite energy, rejected): the chains may not enter a "
        "region of the posterior (e.g. a funnel's neck), whose draws are "
        "then missing; reparameterise it (e.g. non-centred) or lower the "
        "step size (`sample(..., target_accept_prob=0.95)` does)")
  diverged_chains = divergences > 0
  divergences = divergences + rejected
  if heat is not None and np.any(heat > heating_threshold):
    chains = np.flatnonzero(heat > heating_threshold)
    hot.append(
        f"energy grows far beyond sampling's d/2 in {chains.size} of "
        f"{num_chains} chains (heating {float(np.max(heat)):.0f} > "
        f"{heating_threshold:g}, chains {_short(chains)}): the chain heats "
        "up (step size too large or friction too small; under an exact "
        "kernel, its energy drifts: not yet stationary, or a posterior of "
        "heavy-tailed energy, such as a funnel)")
  return divergences, heat, broken, hot, diverged_chains


def per_chain_field(trace):
  """A traced per-chain field, whose shape gives the chain axes (TFP's own
  kernels trace no `diverged`)."""
  return next((f for f in (find_field(trace, n) for n in (
      "diverged", "is_accepted", "log_accept_ratio")) if f is not None), None)


def divergent_transitions(log_accept_ratio):
  """Where a traced `log_accept_ratio` marks a divergent transition: not
  finite, a proposal rejected for a non-finite energy while its chain
  stays finite (Stan's divergent transition). Where they gather, the
  chains do not enter a region (a funnel's neck), and the draws miss it
  with R-hat and ESS none the wiser. `summarize` counts them, and
  `to_inference_data` marks them in ArviZ's `diverging`."""
  return ~np.isfinite(np.asarray(log_accept_ratio, np.float64))


def find_field(results, name):
  """The innermost field `name` of nested kernel results, or None.

  Descends through `inner_results` and `accepted_results` as TFP's
  adaptation kernels do.

  Args:
    results: kernel results (a namedtuple, possibly nested in wrappers'
      results), a trace of them, or None.
    name: the field's name, e.g. "step_size" or "diverged".

  Returns:
    The innermost field called `name`, or None where no level has it.

  #### Example

  ```python
  kernel = tfp.mcmc.SimpleStepSizeAdaptation(
      tfp_sgmcmc.SGHMC(target, step_size=0.01, friction=1.),
      num_adaptation_steps=10)
  results = kernel.bootstrap_results(tf.zeros([d]))
  print(tfp_sgmcmc.diagnostics.find_field(results, "momentum"))
  print(tfp_sgmcmc.diagnostics.find_field(results, "no_such_field"))  # None
  ```
  """
  if results is None:
    return None
  if hasattr(results, name):
    inner = None
    for child in ("inner_results", "accepted_results"):
      if hasattr(results, child):
        inner = find_field(getattr(results, child), name)
        if inner is not None:
          return inner
    return getattr(results, name)
  for child in ("inner_results", "accepted_results"):
    if hasattr(results, child):
      found = find_field(getattr(results, child), name)
      if found is not None:
        return found
  return None


def summarize(samples, trace=None, print_report=True, max_rhat=1.05,
              min_ess=100., heating_threshold=HEATING_THRESHOLD, warn=True,
              reference_energy=None, kernel=None, target=None):
  """Per-chain health of a run, printed and returned.

  Args:
    samples: draws with shape [num_draws, num_chains, ...] (or a list of
      such parts); chains batched as [2, 3] are 6 chains with a `trace`.
    trace: the traced kernel results (e.g. `trace_fn=lambda _, r: r`), or
      None.
    print_report: print a short table.
    max_rhat, min_ess, heating_threshold: thresholds for the warnings
      (`max_rhat`: on TFP's split R-hat, a ratio of variances, and on the
      square of ArviZ's rank-normalised R-hat, which also sees chains that
      differ in spread; `heating_threshold`: see `heating`; its default is
      calibrated on correct chains, docs/long_runs.md).
    warn: issue `UnhealthyChainWarning` when a threshold is crossed.
    reference_energy: None, or the energy the run should stay near (per
      chain or one value), e.g. U at `find_mode`'s mode or the last burn-in
      energy: a chain whose energy ends more than d/2 + heating_threshold
      x (sqrt(d/2) + noise) above it is reported as heating. None compares
      the end of the run with its start, which catches a chain that heats
      up during the run but not one that was already hot when it started.
    kernel: None, or the kernel that made the run: when its chains shared
      each step's minibatch (`minibatch_sharing`), the report says that
      R-hat and ESS are optimistic (`ChainHealth.notes`).
    target: None, or the run's target (a `tfp_sgmcmc` target): then the
      draws' kernel Stein discrepancy is measured (`ChainHealth.ksd`), the
      bias measure of a kernel without an M-H test that R-hat and ESS lack
      (about one full-data gradient per draw measured, at most 1,000).

  The `heating` of a chain (`ChainHealth.heating`) is the statistic of
  `heating` on 16 window means of the traced `energy`: the rise of the
  energy beyond the d/2 that sampling d parameters explains, in units of
  sqrt(d/2) plus the minibatch noise of the windows. It catches chains that
  heat up while every value stays finite (a step size too large for SGHMC
  or SGNHT).

  Returns:
    A `ChainHealth` (see its attributes): per chain the diverged steps,
    acceptance rate and `heating`, the smallest ESS and largest split
    R-hat over coordinates, and `problems` (empty for a healthy run).

  Raises:
    ValueError: fewer than 2 draws, or a trace of another length.
    TypeError: `trace` is not traced kernel results.

  #### Example

  ```python
  run = tfp_sgmcmc.sample_chain_with_progress(
      300, tf.zeros([4, d]), tfp_sgmcmc.SGLD(target, step_size=4e-3),
      seed=[0, 1], num_burnin_steps=200, progress=False)
  health = tfp_sgmcmc.summarize(run.all_states, run.trace)  # prints a table
  print(health.max_rhat, health.problems)   # about 1.0, [] (healthy)
  ```
  """
  samples = merge_chain_axes(samples, per_chain_field(trace))
  parts = [np.asarray(p) for p in tf.nest.flatten(samples)]
  num_draws = parts[0].shape[0]
  num_chains = parts[0].shape[1] if parts[0].ndim > 1 else 1
  flat = np.concatenate(
      [p.reshape(num_draws, num_chains, -1) for p in parts], axis=-1)
  finite = np.all(np.isfinite(flat))

  if num_draws < 2:
    raise ValueError(f"`samples` must hold at least 2 draws along its first "
                     f"axis (shape [num_draws, num_chains, ...]); got shape "
                     f"{list(parts[0].shape)}.")
  if trace is not None and all(find_field(trace, f) is None for f in (
      "diverged", "is_accepted", "step_size", "energy")):
    raise TypeError(
        "`trace` must be the traced kernel results (sample_chain(..., "
        "trace_fn=lambda _, r: r)) with fields such as `diverged` and "
        f"`energy`, or None; got {type(trace).__name__} without any of "
        "them. To count divergences from a trace of flags, trace the results"
        " instead.")
  for field in ("diverged", "is_accepted", "energy"):
    value = find_field(trace, field)
    if value is not None and np.shape(value)[:1] != (num_draws,):
      raise ValueError(
          f"`trace` field `{field}` has shape {list(np.shape(value))} but "
          f"`samples` has {num_draws} draws: pass the trace of the same "
          "run (one entry per draw).")
  if reference_energy is not None:
    ref_shape = np.shape(reference_energy)
    if ref_shape not in ((), (num_chains,), (1,)):
      raise ValueError(
          f"`reference_energy` has shape {list(ref_shape)} but `samples` "
          f"hold {num_chains} chains: give one energy, or one per chain "
          f"(shape [{num_chains}]).")
  divergences, heat, broken, hot, diverged = _verdict(
      samples, trace, heating_threshold, reference_energy)
  accepted = find_field(trace, "is_accepted")
  acceptance = (None if accepted is None else np.asarray(
      accepted, np.float64).reshape(num_draws, -1).mean(axis=0))
  step = find_field(trace, "step_size")
  # TFP's HMC keeps `step_size` in its results only when told to (an
  # empty list otherwise).
  step_size = (None if step is None or not tf.nest.flatten(step) else
               tf.nest.map_structure(lambda s: np.asarray(s)[-1], step))

  stuck = []
  if finite:
    # A chain that did not move has no autocorrelation to speak of (NaN in
    # float32, noise in float64): it adds no effective draws.
    per_chain = effective_sample_size(flat)
    stuck = _stuck_chains(flat, diverged)
    per_chain[stuck] = 0.
    ess = np.where(np.isfinite(per_chain), per_chain, 0.).sum(axis=0)
    rhat = split_rhat(flat)
    rank = rank_diagnostics(flat)
    worst_ess, worst_rhat = float(ess.min()), float(np.max(rhat))
  else:
    worst_ess, worst_rhat = 0., float("inf")
    rank = RankDiagnostics(float("inf"), 0., 0.)
  rank_rhat = rank.max_rhat

  problems = list(broken)
  if len(stuck):
    problems.append(
        f"chain{'s' * int(len(stuck) > 1)} {', '.join(map(str, stuck))} "
        "did not move (every draw the same, or sds under "
        f"{STUCK_SD_RATIO:g} of the other chains' in every coordinate): "
        "stuck, e.g. every proposal rejected; its draws are not the "
        "posterior's")
  if worst_rhat > max_rhat:
    problems.append(f"R-hat {worst_rhat:.3f} > {max_rhat}: " + (
        "chains disagree" if num_chains > 1 else
        "the chain's halves disagree (one chain)"))
  elif rank_rhat is not None and rank_rhat**2 > max_rhat:
    problems.append(
        f"rank-normalised R-hat {rank_rhat:.3f} (ArviZ's; squared "
        f"{rank_rhat**2:.3f} > {max_rhat}): the chains (or one chain's "
        "halves) differ in spread or tails where their means agree, e.g. "
        "one confined to a narrower region")
  if worst_ess < min_ess:
    # What a user can act on: the run length that this run's ESS per draw
    # scales to. Where R-hat is high that is a floor: the ESS sums each
    # chain's own mixing, which says nothing of how far apart they are.
    draws = (int(np.ceil(num_draws * min_ess / worst_ess))
             if worst_ess > 0 else 0)
    needed = ("" if not draws else
              f" (this run's ESS per draw scales to {draws:,} draws per "
              "chain, but with R-hat that high more are needed: the chains "
              "have not mixed, and ESS counts each chain's own mixing only)"
              if worst_rhat > max_rhat else
              f" (at this run's ESS per draw, about {draws:,} draws per "
              "chain would reach it)")
    problems.append(f"min ESS {worst_ess:.0f} < {min_ess:.0f}{needed}")
  if acceptance is not None and np.any(acceptance < 0.1):
    problems.append("acceptance below 10% in some chain: step size too "
                    "large?")
  problems += hot
  notes = []
  if num_chains > 1 and minibatch_sharing(kernel) == SHARED:
    notes.append(
        "the chains shared each step's minibatch, so they are not "
        "independent: R-hat and ESS are optimistic (for independent chains "
        "build the target with InMemoryTarget(..., "
        "independent_minibatches=True), as tfp_sgmcmc.sample does)")

  discrepancy = None
  if target is not None and finite:
    start = time.perf_counter()
    # In the draws' sds, as `sample`'s: the unit kernel sees a narrow
    # posterior only through its score (tests/unit/chains/test_stein.py).
    discrepancy = float(stein.kernel_stein_discrepancy(
        samples, target, num_chain_dims=int(parts[0].ndim > 1),
        pool_chains=True, scale="diagonal"))
    notes.append(f"kernel Stein discrepancy {discrepancy:.3g} (chains "
                 f"pooled, {time.perf_counter() - start:.1f} s): lower is "
                 "closer to the posterior; compare runs of this model")
  health = ChainHealth(
      ksd=discrepancy,
      num_draws=num_draws, num_chains=num_chains, divergences=divergences,
      acceptance_rate=acceptance, step_size=step_size,
      heating=heat, min_ess=worst_ess, max_rhat=worst_rhat,
      max_rank_rhat=rank_rhat, min_bulk_ess=rank.min_bulk_ess,
      min_tail_ess=rank.min_tail_ess,
      problems=problems, notes=notes)
  if print_report:
    print(format_report(health))
  if warn and problems:
    warnings.warn("unhealthy run: " + "; ".join(problems),
                  UnhealthyChainWarning, stacklevel=2)
  return health


def _short(indices, limit=5):
  shown = ", ".join(str(int(i)) for i in indices[:limit])
  return shown + (", ..." if len(indices) > limit else "")


def format_report(health):
  chains = "chain" if health.num_chains == 1 else "chains"
  lines = [f"{health.num_chains} {chains} x {health.num_draws} draws: "
           f"min ESS {health.min_ess:.0f}"
           f"{rank_ess_note(health.min_bulk_ess, health.min_tail_ess)}, "
           f"max R-hat {health.max_rhat:.3f}"
           f"{rank_rhat_note(health.max_rank_rhat)}"]
  lines.append(f"{'chain':>5s} {'diverged':>8s} {'accept':>7s} "
               f"{'step':>9s} {'heating':>8s}")
  for c in range(health.num_chains):
    acc = ("" if health.acceptance_rate is None else
           f"{health.acceptance_rate[c]:.2f}")
    steps = [np.asarray(s).reshape(-1) for s in tf.nest.flatten(
        health.step_size)] if health.step_size is not None else []
    step = "/".join(f"{s[min(c, s.size - 1)]:.3g}" for s in steps)
    growth = ("" if health.heating is None else
              f"{health.heating[c]:+.1f}")
    lines.append(f"{c:5d} {int(health.divergences[c]):8d} {acc:>7s} "
                 f"{step:>9s} {growth:>8s}")
  lines.append("healthy" if not health.problems else
               "PROBLEMS: " + "; ".join(health.problems))
  lines.extend("note: " + n for n in getattr(health, "notes", ()))
  return "\n".join(lines)
