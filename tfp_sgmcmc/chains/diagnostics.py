"""Run health: per-chain divergences, acceptance, step size, ESS and R-hat.

`summarize(samples, trace)` reads what every kernel of the library reports
(`diverged`, and where present `is_accepted`, `step_size`, `energy`),
wherever it sits in nested results (adaptation and M-H wrappers included),
and combines it with TFP's `effective_sample_size` and
`potential_scale_reduction`. It returns a `ChainHealth` record, prints a
short report, and warns (`UnhealthyChainWarning`) when the run looks wrong.

    samples, trace = tfp.mcmc.sample_chain(..., trace_fn=lambda _, r: r)
    health = tfp_sgmcmc.summarize(samples, trace)
"""

import collections
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["summarize", "ChainHealth", "UnhealthyChainWarning",
           "find_field"]


class UnhealthyChainWarning(UserWarning):
  """A run that diverged, did not mix, or was rejected almost always."""


ChainHealth = collections.namedtuple("ChainHealth", [
    "num_draws", "num_chains", "divergences", "acceptance_rate",
    "step_size", "energy_growth", "min_ess", "max_rhat", "problems"])


def find_field(results, name):
  """The innermost field `name` of nested kernel results, or None.

  Descends through `inner_results` and `accepted_results` as TFP's
  adaptation kernels do.
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


def _energy_growth(energy):
  """Per chain: rise of the mean energy from the 2nd to the 4th quarter of
  the run, in units of its standard deviation over the 2nd quarter."""
  n = energy.shape[0]
  if n < 8:
    return np.zeros(energy.shape[1:])
  q = n // 4
  early, late = energy[q:2 * q], energy[3 * q:]
  with np.errstate(invalid="ignore", over="ignore"):
    spread = early.std(axis=0) + 1e-12
    growth = (late.mean(axis=0) - early.mean(axis=0)) / spread
  # A chain with non-finite energies is reported as diverged instead.
  return np.where(np.isfinite(growth), growth, 0.)


def summarize(samples, trace=None, print_report=True, max_rhat=1.05,
              min_ess=100., energy_growth_limit=10., warn=True):
  """Per-chain health of a run, printed and returned.

  Args:
    samples: draws with shape [num_draws, num_chains, ...] (or a list of
      such parts, one per parameter).
    trace: the traced kernel results (e.g. `trace_fn=lambda _, r: r`), or
      None.
    print_report: print a short table.
    max_rhat, min_ess, energy_growth_limit: thresholds for the warnings.
    warn: issue `UnhealthyChainWarning` when a threshold is crossed.
  """
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
  diverged = find_field(trace, "diverged")
  divergences = (np.zeros(num_chains, int) if diverged is None else
                 np.asarray(diverged).reshape(num_draws, -1).sum(axis=0))
  accepted = find_field(trace, "is_accepted")
  acceptance = (None if accepted is None else np.asarray(
      accepted, np.float64).reshape(num_draws, -1).mean(axis=0))
  step = find_field(trace, "step_size")
  step_size = None if step is None else np.asarray(step)[-1]
  energy = find_field(trace, "energy")
  growth = (None if energy is None else _energy_growth(
      np.asarray(energy, np.float64).reshape(num_draws, -1)))

  if finite:
    ess = np.asarray(tfp.mcmc.effective_sample_size(
        tf.constant(flat), filter_beyond_positive_pairs=True)).sum(axis=0)
    rhat = (np.asarray(tfp.mcmc.potential_scale_reduction(
        tf.constant(flat), split_chains=True)) if num_chains > 1 else
            np.ones(flat.shape[-1]))
    worst_ess, worst_rhat = float(ess.min()), float(np.max(rhat))
  else:
    worst_ess, worst_rhat = 0., float("inf")

  problems = []
  if not finite:
    problems.append("samples contain NaN or inf")
  if divergences.sum():
    problems.append(f"{int((divergences > 0).sum())} of {num_chains} chains "
                    "diverged (non-finite energy or state)")
  if worst_rhat > max_rhat:
    problems.append(f"R-hat {worst_rhat:.3f} > {max_rhat}: chains disagree")
  if worst_ess < min_ess:
    problems.append(f"min ESS {worst_ess:.0f} < {min_ess:.0f}")
  if acceptance is not None and np.any(acceptance < 0.1):
    problems.append("acceptance below 10% in some chain: step size too "
                    "large?")
  if growth is not None and np.any(growth > energy_growth_limit):
    problems.append("energy grows without bound in some chain "
                    f"(+{float(np.max(growth)):.0f} sd): the dynamics are "
                    "unstable (step size too large or friction too small)")

  health = ChainHealth(
      num_draws=num_draws, num_chains=num_chains, divergences=divergences,
      acceptance_rate=acceptance, step_size=step_size,
      energy_growth=growth, min_ess=worst_ess, max_rhat=worst_rhat,
      problems=problems)
  if print_report:
    print(format_report(health))
  if warn and problems:
    warnings.warn("unhealthy run: " + "; ".join(problems),
                  UnhealthyChainWarning, stacklevel=2)
  return health


def format_report(health):
  lines = [f"{health.num_chains} chains x {health.num_draws} draws: "
           f"min ESS {health.min_ess:.0f}, max R-hat {health.max_rhat:.3f}"]
  lines.append(f"{'chain':>5s} {'diverged':>8s} {'accept':>7s} "
               f"{'step':>9s} {'E growth':>8s}")
  for c in range(health.num_chains):
    acc = ("" if health.acceptance_rate is None else
           f"{health.acceptance_rate[c]:.2f}")
    step = ""
    if health.step_size is not None:
      s = np.asarray(health.step_size).reshape(-1)
      step = f"{s[min(c, s.size - 1)]:.3g}"
    growth = ("" if health.energy_growth is None else
              f"{health.energy_growth[c]:+.1f}")
    lines.append(f"{c:5d} {int(health.divergences[c]):8d} {acc:>7s} "
                 f"{step:>9s} {growth:>8s}")
  lines.append("healthy" if not health.problems else
               "PROBLEMS: " + "; ".join(health.problems))
  return "\n".join(lines)
