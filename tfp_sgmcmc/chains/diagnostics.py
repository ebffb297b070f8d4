"""Run health: per-chain divergences, acceptance, step size, ESS and R-hat.

`summarize(samples, trace)` reads what every kernel of the library reports
(`diverged`, and where present `is_accepted`, `step_size`, `energy`),
wherever it sits in nested results (adaptation and M-H wrappers included),
and combines it with the effective sample size (TFP's
`effective_sample_size` formula, `effective_sample_size` here) and TFP's
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
           "find_field", "heating", "energy_windows", "HEATING_THRESHOLD",
           "minibatch_sharing", "effective_sample_size", "RunVerdict",
           "energy_trend",
           "divergence_and_heating", "SHARED", "INDEPENDENT", "FULL_BATCH"]


class UnhealthyChainWarning(UserWarning):
  """Warned by `summarize`, `sample_moments` and the Keras callback when a
  run diverged, heated up, did not mix, or was rejected almost always."""


ChainHealth = collections.namedtuple("ChainHealth", [
    "num_draws", "num_chains", "divergences", "acceptance_rate",
    "step_size", "heating", "min_ess", "max_rhat", "problems", "notes"],
                                     defaults=((),))
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
  notes: caveats that are not problems of the run, as sentences: with
    `summarize(..., kernel=...)` of chains that shared their minibatches,
    that R-hat and ESS are optimistic. Empty by default.
"""


# What `minibatch_sharing` returns.
SHARED = "shared by all chains"
INDEPENDENT = "independent per chain"
FULL_BATCH = "full batch"


def _sampled_target(kernel):
  """The tfp_sgmcmc target a kernel samples, looking through TFP's wrappers
  (`inner_kernel`: step-size adaptation, `TransformedTransitionKernel`,
  `MetropolisHastings`, our `StepSeeded`); None if there is none."""
  seen = 0
  while kernel is not None and seen < 64:
    target = getattr(kernel, "target", None)
    if target is not None and hasattr(target, "minibatch_energy"):
      return target
    kernel = getattr(kernel, "inner_kernel", None)
    seen += 1
  return None


def minibatch_sharing(kernel):
  """Whether the chains of a run of `kernel` shared their minibatches.

  The chains of one `sample_chain` call (the leading dimensions of the
  state) see the same minibatch at each step unless the target draws one per
  chain. Chains that share their gradient noise are not independent: R-hat
  and cross-chain ESS come out optimistic (too close to 1, too large).

  Args:
    kernel: a kernel of this package, or TFP's wrappers around one
      (looked through by their `inner_kernel`), or None.

  Returns:
    `SHARED` ("shared by all chains": `InMemoryTarget` by default,
    `DatasetTarget`, `TFRecordTarget`, `ShardedTarget`), `INDEPENDENT`
    ("independent per chain": `InMemoryTarget(independent_minibatches=True)`,
    or a `NoisyGradientTarget`, whose noise is drawn per chain),
    `FULL_BATCH` ("full batch": exact gradients, no minibatch), or None
    when it cannot tell (no kernel, a kernel of another library, a target
    of the user's own class). `ControlVariateTarget`, `TemperedTarget` and
    the `LogProbFnTarget` of a TFP wrapper answer as the target they are
    built on.

  #### Example

  ```python
  shared = tfp_sgmcmc.InMemoryTarget(log_likelihood, (x, y), batch_size=32)
  print(tfp_sgmcmc.diagnostics.minibatch_sharing(
      tfp_sgmcmc.SGLD(shared, 1e-3)))            # shared by all chains
  own = tfp_sgmcmc.InMemoryTarget(log_likelihood, (x, y), batch_size=32,
                                  parameter_shapes=[d],
                                  independent_minibatches=True)
  print(tfp_sgmcmc.diagnostics.minibatch_sharing(
      tfp_sgmcmc.SGLD(own, 1e-3)))               # independent per chain
  ```
  """
  target = _sampled_target(kernel)
  # Local imports: the targets import nothing from chains, and this module
  # is imported by them indirectly through the package.
  from tfp_sgmcmc.targets import dataset  # pylint: disable=g-import-not-at-top
  from tfp_sgmcmc.targets import in_memory  # pylint: disable=g-import-not-at-top
  from tfp_sgmcmc.targets import sharded  # pylint: disable=g-import-not-at-top
  from tfp_sgmcmc.targets import synthetic  # pylint: disable=g-import-not-at-top
  for _ in range(64):
    if target is None:
      return None
    if bool(getattr(target, "is_full_batch", False)):
      return FULL_BATCH
    if isinstance(target, in_memory.InMemoryTarget):
      return INDEPENDENT if target.independent_minibatches else SHARED
    if isinstance(target, (dataset.DatasetTarget, sharded.ShardedTarget)):
      return SHARED
    if isinstance(target, synthetic.NoisyGradientTarget):
      return INDEPENDENT
    target = getattr(target, "base_target", None)
  return None


def effective_sample_size(draws):
  """Per-chain ESS of each coordinate, as TFP's
  `tfp.mcmc.effective_sample_size(draws, filter_beyond_positive_pairs=True)`
  computes it (Geyer's initial positive sequence on the autocorrelations),
  in NumPy float64.

  TFP's own computes the autocorrelations by a complex FFT and casts the
  result back to real with `tf.cast`, which makes TensorFlow log a "casting
  complex64 to float32" warning at each call; a real FFT gives the same
  numbers without it.

  Args:
    draws: [num_draws, ...] array; every axis after the first is a batch
      (chains, coordinates).

  Returns:
    ESS with the shape of `draws` less its first axis.
  """
  x = np.asarray(draws, np.float64)
  n = x.shape[0]
  centred = x - x.mean(axis=0)
  size = 1 << int(np.ceil(np.log2(2 * n)))  # No wrap-around of lags.
  spectrum = np.fft.rfft(centred, n=size, axis=0)
  auto_cov = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=0)[:n]
  shape = (n,) + (1,) * (x.ndim - 1)
  auto_cov = auto_cov / (n - np.arange(n)).reshape(shape)
  with np.errstate(invalid="ignore", divide="ignore"):
    auto_corr = auto_cov / auto_cov[:1]
    weighted = ((n - np.arange(n)) / n).reshape(shape) * auto_corr

    def sum_pairs(a):
      a = a[:n - n % 2]
      return a.reshape((n // 2, 2) + a.shape[1:]).sum(axis=1)
    # Pairwise sums of a reversible chain's autocorrelations are positive:
    # everything from the first negative pair on is noise.
    mask = np.maximum(1. - np.cumsum(sum_pairs(auto_corr) < 0., axis=0), 0.)
    return n / (-1. + 2. * np.sum(sum_pairs(weighted) * mask, axis=0))


RunVerdict = collections.namedtuple(
    "RunVerdict", ["divergences", "heating", "problems"])
RunVerdict.__doc__ = """What `divergence_and_heating` returns.

Attributes:
  divergences: per chain, the number of traced steps flagged `diverged`
    (zeros without the field).
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
  divergences, heat, broken, hot = _verdict(samples, trace,
                                            heating_threshold,
                                            reference_energy)
  return RunVerdict(divergences=divergences, heating=heat,
                    problems=broken + hot)


def _verdict(samples, trace, heating_threshold, reference_energy):
  """(divergences, heating, [non-finite and divergence problems],
  [heating problems]) of `divergence_and_heating`."""
  if heating_threshold is None:
    heating_threshold = HEATING_THRESHOLD
  parts = [np.asarray(p) for p in tf.nest.flatten(samples)]
  num_draws = parts[0].shape[0]
  num_chains = parts[0].shape[1] if parts[0].ndim > 1 else 1
  num_parameters = sum(
      int(np.prod(p.shape[2:] if p.ndim > 1 else ())) for p in parts)
  finite = all(np.all(np.isfinite(p)) for p in parts)
  diverged = find_field(trace, "diverged")
  divergences = (np.zeros(num_chains, int) if diverged is None else
                 np.asarray(diverged).reshape(num_draws, -1).sum(axis=0))
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
  if heat is not None and np.any(heat > heating_threshold):
    chains = np.flatnonzero(heat > heating_threshold)
    hot.append(
        f"energy grows far beyond sampling's d/2 in {chains.size} of "
        f"{num_chains} chains (heating {float(np.max(heat)):.0f} > "
        f"{heating_threshold:g}, chains {_short(chains)}): the chain heats "
        "up (step size too large or friction too small)")
  return divergences, heat, broken, hot


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


def energy_trend(means, num_parameters, window_noise=0.):
  """How far the energy still rose over the last part of a run.

  `heating` compares the end of a run with its start and allows the d/2
  that sampling explains, so a chain whose energy climbs slowly (still
  relaxing from the mode with too small a step size, or heating slowly)
  can end below its threshold while still rising. Here the W window means
  are cut into three consecutive parts, and the statistic is the rise of
  the last part's mean over the middle part's,

      z = (mean(m_last part) - mean(m_middle part)) /
          (sqrt(d/2) + window_noise * sqrt(1/W_middle + 1/W_last)),

  with no d/2 allowed: both parts are sampling, so at stationarity they
  sit at the same level, and the exact energy's slow wander is bounded by
  its posterior scale sqrt(d/2) (as in `heating`); `window_noise` is the
  minibatch noise of one window mean. A chain whose energy settled during
  the first third (a rise from the mode) gives z near 0. Compared with
  `HEATING_THRESHOLD` like `heating`.

  Args:
    means: [W, chains...] window means of the energy, W >= 3.
    num_parameters: d.
    window_noise: the standard deviation of one window mean under a
      correct chain (per chain or one value).

  Returns:
    z per chain (0 for chains with non-finite windows, or fewer than 3).

  #### Example

  ```python
  rising = np.array([[6694.], [6900.], [7150.], [7400.], [7650.], [7931.]])
  print(tfp_sgmcmc.diagnostics.energy_trend(rising, num_parameters=2000))
  # about [16]: still rising (HEATING_THRESHOLD = 8), while
  # heating(rising, 2000, noise=0.) is about [7.5]
  ```
  """
  m = np.asarray(means, np.float64)
  if m.shape[0] < 3:
    return np.zeros(m.shape[1:])
  parts = np.array_split(m, 3, axis=0)
  middle, last = parts[1], parts[2]
  with np.errstate(invalid="ignore", over="ignore"):
    noise = np.asarray(window_noise, np.float64) * np.sqrt(
        1. / middle.shape[0] + 1. / last.shape[0])
    z = (last.mean(axis=0) - middle.mean(axis=0)) / (
        np.sqrt(0.5 * float(num_parameters)) + noise)
  finite = np.all(np.isfinite(m), axis=0) & np.isfinite(z)
  return np.where(finite, z, 0.)


def summarize(samples, trace=None, print_report=True, max_rhat=1.05,
              min_ess=100., heating_threshold=HEATING_THRESHOLD, warn=True,
              reference_energy=None, kernel=None):
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
    kernel: None, or the kernel that made the run: when its chains shared
      each step's minibatch (`minibatch_sharing`), the report says that
      R-hat and ESS are optimistic (`ChainHealth.notes`).

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
  divergences, heat, broken, hot = _verdict(samples, trace,
                                            heating_threshold,
                                            reference_energy)
  accepted = find_field(trace, "is_accepted")
  acceptance = (None if accepted is None else np.asarray(
      accepted, np.float64).reshape(num_draws, -1).mean(axis=0))
  step = find_field(trace, "step_size")
  step_size = None if step is None else np.asarray(step)[-1]

  if finite:
    ess = effective_sample_size(flat).sum(axis=0)
    rhat = (np.asarray(tfp.mcmc.potential_scale_reduction(
        tf.constant(flat), split_chains=True)) if num_chains > 1 else
            np.ones(flat.shape[-1]))
    worst_ess, worst_rhat = float(ess.min()), float(np.max(rhat))
  else:
    worst_ess, worst_rhat = 0., float("inf")

  problems = list(broken)
  if worst_rhat > max_rhat:
    problems.append(f"R-hat {worst_rhat:.3f} > {max_rhat}: chains disagree")
  if worst_ess < min_ess:
    problems.append(f"min ESS {worst_ess:.0f} < {min_ess:.0f}")
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

  health = ChainHealth(
      num_draws=num_draws, num_chains=num_chains, divergences=divergences,
      acceptance_rate=acceptance, step_size=step_size,
      heating=heat, min_ess=worst_ess, max_rhat=worst_rhat,
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
  lines.extend("note: " + n for n in getattr(health, "notes", ()))
  return "\n".join(lines)
