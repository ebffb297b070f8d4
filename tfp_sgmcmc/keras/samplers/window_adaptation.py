"""Stan's window adaptation of the Keras AMAGOLD's diagonal mass, driven by
its M-H tests (`SamplingCallback(warmup=n)`).

The schedule is `tfp_sgmcmc.warmup_windows(n)` (a fast window, doubling
slow windows, a fast window) and the rules are those of `tfp_sgmcmc.warm_up`:
in each slow window the running variance of the chain's position after each
test (`tfp.experimental.stats.RunningVariance`) is collected; at its end
M^{-1} becomes that variance, regularised as Stan does
(`chains.warmup.regularized_variance`). TFP's dual averaging of the step
size (`tfp.mcmc.DualAveragingStepSizeAdaptation` around `OuterStepProbe`)
restarts after the first window and after every new mass, from the
averaged step size reached so far, its search centred at 10x it (TFP's own
bootstrap), and ends, as TFP's kernel ends, at the averaged step size after
the n-th test. Then both are frozen. The window state lives in optimizer
variables, so a backup taken inside a window resumes it.
"""

import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.chains import warmup as warmup_lib
from tfp_sgmcmc.keras.samplers import adaptation as adaptation_lib
from tfp_sgmcmc.keras.samplers import base

__all__ = ["MassWindows"]


class MassWindows:
  """The window state of one sampler and its update after each test.

  Args:
    sampler: the `SamplerOptimizer` whose variables hold the state.
    variables: its trainable variables (the chain's position).
    adaptation: the `adaptation.WarmupAdaptation` (windows and length).
  """

  def __init__(self, sampler, variables, adaptation):
    self._adaptation = adaptation
    self._num_steps = adaptation.num_steps
    ends, end = [], 0
    for kind, steps in adaptation.windows:
      ends.append((kind, end, end + steps))
      end += steps
    self._windows = ends
    self._mean = sampler.add_optimizer_variables(variables,
                                                 "warmup_window_mean")
    self._ssr = sampler.add_optimizer_variables(
        variables, "warmup_window_sum_squared_residuals")
    self._count = sampler.add_variable((), dtype="int32",
                                       name="warmup_window_count")

  def _flags(self, number):
    """(in a slow window, at a slow window's end, at the end of a window
    before the last) for test `number`."""
    def any_of(flags):
      return tf.reduce_any(tf.stack(flags)) if flags else tf.constant(False)
    slow = [(s, e) for kind, s, e in self._windows if kind == "slow"]
    return (any_of([tf.logical_and(number > s, number <= e) for s, e in slow]),
            any_of([tf.equal(number, e) for _, e in slow]),
            any_of([tf.equal(number, e) for _, _, e in self._windows
                    if e < self._num_steps]))

  def after_test(self, number, state, inverse_mass, results):
    """After test `number` (1-based) with the chain at `state`: collects
    the draw in a slow window, sets M^{-1} at its end, and returns the
    adaptation's `results`, restarted where a window ended.

    Args:
      number: the tests made so far, this one included (int32 tensor).
      state: the chain's position after the test, one tensor per weight.
      inverse_mass: the sampler's M^{-1} variables, in the order of
        `state`.
      results: the dual averaging's results after this test.

    Returns:
      The results the next test adapts from.
    """
    in_slow, slow_end, restart = self._flags(number)
    count = base.read(self._count)
    for mean_v, ssr_v, mass_v, x in zip(self._mean, self._ssr, inverse_mass,
                                        state):
      dtype = x.dtype
      running = tfp.experimental.stats.RunningVariance(
          num_samples=tf.cast(count, dtype), mean=base.read(mean_v),
          sum_squared_residuals=base.read(ssr_v), event_ndims=0).update(x)
      variance = warmup_lib.regularized_variance(
          running.variance(), tf.cast(count + 1, dtype))
      base.write(mass_v, tf.where(slow_end, variance, base.read(mass_v)))
      zeros = tf.zeros_like(x)
      base.write(mean_v, tf.where(slow_end, zeros, tf.where(
          in_slow, running.mean, base.read(mean_v))))
      base.write(ssr_v, tf.where(slow_end, zeros, tf.where(
          in_slow, running.sum_squared_residuals, base.read(ssr_v))))
    base.write(self._count, tf.where(
        slow_end, 0, tf.where(in_slow, count + 1, count)))
    # TFP's bootstrap at the averaged step size: error sum and step count
    # reset, the search centred at 10x it; the kernel's final switch to the
    # averaged step size comes at the warm-up's last test.
    averaged = tf.exp(tf.nest.flatten(results.log_averaging_step)[0])
    restarted = self._adaptation(adaptation_lib.OuterStepProbe(
        averaged)).bootstrap_results(tf.zeros([], averaged.dtype))
    restarted = restarted._replace(
        num_adaptation_steps=self._num_steps - number)
    return tf.nest.map_structure(
        lambda new, old: tf.where(restart, tf.cast(new, old.dtype), old),
        restarted, results)
