"""The heating check: does the energy of a chain rise past what its
stationary law allows (`heating`, over the windows `energy_windows` cuts
an energy trace into), or still trend at the end of a run
(`energy_trend`)? `summarize` and the Keras callback use them.
"""

import numpy as np

__all__ = ["heating", "energy_windows", "energy_trend", "HEATING_THRESHOLD",
           "HEATING_WINDOWS"]


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
