"""What `SamplingCallback` adds to Keras' epoch logs.

`energy` = N * loss - log p(theta) (`tfp_sgmcmc.energy.minibatch_energy` of
Keras' running mean loss over the epoch and the prior at the epoch's end),
the sampler's `log_diagnostics` (`step_size`; SGNHT's `thermostat`;
AMAGOLD's `exact_energy`) and, for AMAGOLD, this epoch's `accept_rate`.
Every key is present at every epoch (NaN during burn-in), so that each
`History` list has one entry per epoch; `kept_samples` (the number of
samples the callback holds) is in every epoch's and train step's logs, so
the progress bar shows it. Nothing else here runs per train step.

The callback adds them in its `on_epoch_end`, to the logs dict every
callback of the epoch shares: a callback listed after it (`CSVLogger`,
`TensorBoard`, `History`, `EarlyStopping(monitor="energy")`) sees them, one
listed before it does not (CSVLogger would fix its columns without them at
the first epoch). `validation.fit_checks.check_callbacks` refuses Keras'
loggers listed before it and warns about other callbacks with an
`on_epoch_end` listed before it; list `SamplingCallback` first.
"""

import math

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.targets import energy as energy_lib

__all__ = ["EpochLogs"]

class EpochLogs:
  """The epoch-end log values, and the M-H tests counted in the epoch and
  in the fit.

  Args:
    sampler: the sampler (its `log_keys`).
    num_examples: N.
    log_prior: log p(theta), a function of the list of trainable weights.
  """

  def __init__(self, sampler, num_examples, log_prior):
    self._keys = ["energy"] + sampler.log_keys() + ["kept_samples"]
    self._num_examples = int(num_examples)
    self._log_prior = log_prior
    self._log_prior_function = None
    self.tests = 0
    self.accepted = 0
    # This fit's tests (from its start, or from where a backup resumed it)
    # at a frozen step size, and those run while an adaptation (the
    # warm-up) tuned it: the chain's own acceptance is the former's, which
    # `outcome.ChainOutcome._check_acceptance` reads.
    self.fit_tests = 0
    self.fit_accepted = 0
    self.fit_adapted = 0
    self.added = False  # Whether this epoch's values are in its logs.

  @property
  def keys(self):
    """The keys added to every epoch's logs (and `accept_rate` for a
    sampler with a test, while sampling)."""
    return list(self._keys)

  def begin_fit(self, model, strategy):
    """At the start of a fit: no test counted yet; compiles log p(theta)
    of the model's weights (once)."""
    self.fit_tests = self.fit_accepted = self.fit_adapted = 0
    if self._log_prior_function is not None:
      return
    with strategy.scope():
      self._log_prior_function = tf.function(
          lambda: self._log_prior(
              [v.value for v in model.trainable_variables]),
          autograph=False)

  def start_epoch(self):
    self.tests = 0
    self.accepted = 0
    self.added = False

  def count_test(self, accepted, adapted=False):
    """One M-H test; `adapted`: its trajectory ran at a step size the
    adaptation was still tuning."""
    self.tests += 1
    self.accepted += int(accepted)
    if adapted:
      self.fit_adapted += 1
    else:
      self.fit_tests += 1
      self.fit_accepted += int(accepted)

  def add(self, logs, strategy, sampler=None, kept_samples=0):
    """Adds the values to `logs`; `sampler` None during burn-in."""
    if logs is None:
      return
    values = dict.fromkeys(self._keys, math.nan)
    values["kept_samples"] = kept_samples
    self.added = True
    with strategy.scope():
      if "loss" in logs:
        values["energy"] = float(energy_lib.minibatch_energy(
            np.float64(logs["loss"]), self._log_prior_function(),
            self._num_examples))
      if sampler is not None:
        values.update(sampler.log_diagnostics())
        if sampler.has_acceptance_test:
          values["accept_rate"] = (self.accepted / self.tests if self.tests
                                   else math.nan)
    logs.update(values)
