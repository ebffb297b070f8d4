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
           "find_field", "heating", "energy_windows", "HEATING_THRESHOLD"]


class UnhealthyChainWarning(UserWarning):
  """Warned by `summarize`, `sample_moments` and the Keras callback when a
  run diverged, heated up, did not mix, or was rejected almost always."""


ChainHealth = collections.namedtuple("ChainHealth", [
    "num_draws", "num_chains", "divergences", "acceptance_rate",
    "step_size", "heating", "min_ess", "max_rhat", "problems"])
ChainHealth.__doc__ = """What `summarize` returns.

Attributes:
  num_draws: the number of draws per chain.
  num_chains: the number of chains.
  divergences: per chain, the number of traced steps flagged `diverged`
    (zeros without a trace).
  acceptance_rate: per chain, the mean of the traced `is_accepted`, or None.
  step_size: the last traced `step_size`, or None.
  heating: per chain, the `heating` statistic of the traced `energy`, or
    None.
  min_ess: the smallest effective sample size over coordinates (summed over
    chains); 0 when a draw is not finite.
  max_rhat: the largest split R-hat over coordinates (1 for one chain; inf
    when a draw is not finite).
  problems: the thresholds crossed, as sentences; empty for a healthy run.
"""


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


# The heating threshold: the energy's level may rise by d/2 plus this many
# units of its expected scale before a chain is called heating. Calibrated
# on correct chains (docs/long_runs.md, "Heating"): the largest statistic
# seen there is less than half of it.
HEATING_THRESHOLD = 8.
# Windows the energy trace is cut into (fewer for short traces).
HEATING_WINDOWS = 16


def energy_windows(energy, num_windows=HEATING_WINDOWS):
  """The window means of an energy trace and their noise, for `heating`.

  Args:
    energy: [num_draws, chains] energies (e.g. the traced `energy`).
    num_windows: at most this many windows (fewer for short traces).

  Returns:
    (means, noise): the [W, chains] means of W consecutive equal windows
    (the first draws that do not fill a window are dropped) and, per chain,
    the standard deviation of the difference of two window means made of
    white noise as large as the step-to-step noise of the trace (minibatch
    noise and fast motion: half the mean squared difference of successive
    energies, its median over the windows, so that a window where the chain
    blows up does not count); or None when the trace is too short for 4
    windows of 2.

  #### Example

  A cool chain's energy and one that heats up, each traced 400 steps:

  ```python
  rng = np.random.default_rng(0)
  cool = 100. + rng.normal(size=(400, 1))
  hot = cool + np.linspace(0., 300., 400)[:, None]
  for trace in (cool, hot):
    means, noise = tfp_sgmcmc.diagnostics.energy_windows(trace)
    print(tfp_sgmcmc.diagnostics.heating(means, num_parameters=2,
                                         noise=noise))
  # about [-1] (cool) and [210] (hot, above HEATING_THRESHOLD = 8)
  ```
  """
  energy = np.asarray(energy, np.float64)
  n = energy.shape[0]
  w = min(num_windows, n // 2)
  if w < 4:
    return None
  size = n // w
  windows = energy[n - w * size:].reshape((w, size) + energy.shape[1:])
  with np.errstate(invalid="ignore", over="ignore"):
    step_variance = np.median(
        0.5 * np.mean(np.diff(windows, axis=1) ** 2, axis=1), axis=0)
    noise = np.sqrt(2. * step_variance / size)
  return windows.mean(axis=1), noise


def heating(means, num_parameters, reference=None, noise=None):
  """How far a chain's energy has risen beyond what sampling explains.

  At stationarity the energy of d parameters sits about d/2 above its
  minimum (U - U_min is Gamma(d/2, 1) for a Gaussian posterior) and its
  exact value fluctuates by about sqrt(d/2). A chain that heats up (a step
  size too large for the integrator, too little friction) climbs far above
  that while every value stays finite. The statistic per chain is

      z = (m_last - reference - d/2) / (sqrt(d/2) + noise)

  where m_1..m_W are the energy's means over consecutive windows of the run
  (`energy_windows` of a trace, or Keras' epoch energies), `reference` is
  the level the run should stay near (default m_1, the start of the run;
  the Keras callback passes the burn-in's last energy) and `noise` is the
  standard deviation of `m_last - reference` that minibatch noise explains
  (`energy_windows` measures it from the step-to-step differences, the
  Keras callback from the spread of an epoch's batch losses). The slow
  wander of a correct chain's exact energy is bounded by its posterior
  scale sqrt(d/2); a hot chain's wander is not noise, so it is not
  measured from the windows themselves. A chain is heating when z exceeds
  `HEATING_THRESHOLD` (8). Its false-alarm rate, measured on 768 correct
  chains (SGLD, SGHMC and AMAGOLD at sound step sizes on a Gaussian and a
  logistic regression posterior, 4 seeds x 32 chains each; 36 Keras fits
  likewise), was 0: the largest z was 3.6 (1.1 in Keras), while SGHMC at
  10x the step size gave z above 1e7 with every value finite
  (docs/long_runs.md, "Heating").

  Args:
    means: [W, chains...] window means of the energy, W >= 2.
    num_parameters: d, the number of parameters per chain.
    reference: None, or a level (broadcast against a chain's) to compare
      the last window with.
    noise: the standard deviation of `m_last - reference` under a correct
      chain (per chain or one value); None estimates it from the windows'
      successive differences (1.4826 x their median absolute deviation),
      which also counts a hot chain's wander as noise.

  Returns:
    z per chain (0 for chains with non-finite windows, which the
    divergence flags report instead).

  #### Example

  ```python
  means = np.array([[10.], [10.2], [11.5], [40.]])   # 4 window means
  print(tfp_sgmcmc.diagnostics.heating(means, num_parameters=2, noise=0.))
  # [29.]: (40 - 10 - 1) / sqrt(1), far above HEATING_THRESHOLD = 8
  ```
  """
  m = np.asarray(means, np.float64)
  with np.errstate(invalid="ignore", over="ignore"):
    start = m[0] if reference is None else np.asarray(reference, np.float64)
    half_d = 0.5 * float(num_parameters)
    if noise is None:
      diffs = np.diff(m, axis=0)
      noise = 1.4826 * np.median(
          np.abs(diffs - np.median(diffs, axis=0)), axis=0)
    z = (m[-1] - start - half_d) / (np.sqrt(half_d) + noise)
  finite = np.all(np.isfinite(m), axis=0) & np.isfinite(z)
  return np.where(finite, z, 0.)


def summarize(samples, trace=None, print_report=True, max_rhat=1.05,
              min_ess=100., heating_threshold=HEATING_THRESHOLD, warn=True,
              reference_energy=None):
  """Per-chain health of a run, printed and returned.

  Args:
    samples: draws with shape [num_draws, num_chains, ...] (or a list of
      such parts, one per parameter).
    trace: the traced kernel results (e.g. `trace_fn=lambda _, r: r`), or
      None.
    print_report: print a short table.
    max_rhat, min_ess, heating_threshold: thresholds for the warnings
      (`heating_threshold`: see `heating`; its default is calibrated on
      correct chains, docs/long_runs.md).
    warn: issue `UnhealthyChainWarning` when a threshold is crossed.
    reference_energy: None, or the energy the run should stay near (per
      chain or one value), e.g. U at `find_mode`'s mode or the last burn-in
      energy: a chain whose energy ends more than d/2 + heating_threshold
      x (sqrt(d/2) + noise) above it is reported as heating. None compares
      the end of the run with its start, which catches a chain that heats
      up during the run but not one that was already hot when it started.

  The `heating` of a chain (`ChainHealth.heating`) is the statistic of
  `heating` on 16 window means of the traced `energy`: the rise of the
  energy beyond the d/2 that sampling d parameters explains, in units of
  sqrt(d/2) plus the minibatch noise of the windows. It catches chains that
  heat up while every value stays finite (a step size too large for SGHMC
  or SGNHT).

  Returns:
    A `ChainHealth(num_draws, num_chains, divergences, acceptance_rate,
    step_size, heating, min_ess, max_rhat, problems)`: per chain the number
    of diverged steps, the acceptance rate and `heating` (None where the
    trace has no such field), the last step size, the smallest ESS and
    largest split R-hat over coordinates, and `problems`, the list of
    crossed thresholds (empty for a healthy run).

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
  diverged = find_field(trace, "diverged")
  divergences = (np.zeros(num_chains, int) if diverged is None else
                 np.asarray(diverged).reshape(num_draws, -1).sum(axis=0))
  accepted = find_field(trace, "is_accepted")
  acceptance = (None if accepted is None else np.asarray(
      accepted, np.float64).reshape(num_draws, -1).mean(axis=0))
  step = find_field(trace, "step_size")
  step_size = None if step is None else np.asarray(step)[-1]
  energy = find_field(trace, "energy")
  windows = (None if energy is None else energy_windows(
      np.asarray(energy, np.float64).reshape(num_draws, -1)))
  heat = (None if windows is None else
          heating(windows[0], flat.shape[-1], reference_energy, windows[1]))

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
  if heat is not None and np.any(heat > heating_threshold):
    hot = np.flatnonzero(heat > heating_threshold)
    problems.append(
        f"energy grows far beyond sampling's d/2 in {hot.size} of "
        f"{num_chains} chains (heating {float(np.max(heat)):.0f} > "
        f"{heating_threshold:g}, chains {_short(hot)}): the chain heats up"
        " (step size too large or friction too small)")

  health = ChainHealth(
      num_draws=num_draws, num_chains=num_chains, divergences=divergences,
      acceptance_rate=acceptance, step_size=step_size,
      heating=heat, min_ess=worst_ess, max_rhat=worst_rhat,
      problems=problems)
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
  lines = [f"{health.num_chains} chains x {health.num_draws} draws: "
           f"min ESS {health.min_ess:.0f}, max R-hat {health.max_rhat:.3f}"]
  lines.append(f"{'chain':>5s} {'diverged':>8s} {'accept':>7s} "
               f"{'step':>9s} {'heating':>8s}")
  for c in range(health.num_chains):
    acc = ("" if health.acceptance_rate is None else
           f"{health.acceptance_rate[c]:.2f}")
    step = ""
    if health.step_size is not None:
      s = np.asarray(health.step_size).reshape(-1)
      step = f"{s[min(c, s.size - 1)]:.3g}"
    growth = ("" if health.heating is None else
              f"{health.heating[c]:+.1f}")
    lines.append(f"{c:5d} {int(health.divergences[c]):8d} {acc:>7s} "
                 f"{step:>9s} {growth:>8s}")
  lines.append("healthy" if not health.problems else
               "PROBLEMS: " + "; ".join(health.problems))
  return "\n".join(lines)
