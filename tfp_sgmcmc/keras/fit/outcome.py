"""What a fit's chain produces: its kept samples, its health (divergence,
heating, a chain that barely moves) and the `Posterior` of its samples.
`SamplingCallback` mixes in `ChainOutcome`; its attributes are created in
`SamplingCallback.__init__`."""

import math
import warnings

import numpy as np

from tfp_sgmcmc.keras.fit import backup as backup_lib
from tfp_sgmcmc.keras.fit import health as health_lib
from tfp_sgmcmc.keras.posterior import io as posterior_io
from tfp_sgmcmc.keras.posterior import posterior as posterior_lib
from tfp_sgmcmc.keras.samplers import window_adaptation
from tfp_sgmcmc.keras.validation import finite_data
from tfp_sgmcmc.keras.validation import fit_arguments
from tfp_sgmcmc.keras.validation import probabilities as probabilities_lib

__all__ = ["ChainOutcome", "posterior_of"]

# Below this acceptance of the M-H test a fit warns: the step sizes TFP
# and Stan tune to accept 65-80% of the trajectories, and one accepting
# under 10% leaves the chain where it was for ten trajectories or more on
# average, so its kept samples are a few points repeated.
LOW_ACCEPTANCE = 0.1
# Fewer tests than this say too little to warn: at 10 tests "under 10%"
# means none accepted, which a chain accepting 30% shows 3% of the time
# (0.7^10); at 20 it takes at most one, under 1% of the time (and one
# accepting none is then usually the one-point warning's).
MIN_TESTS_FOR_ACCEPTANCE = 20


class ChainOutcome:
  """The kept samples and the health checks of `SamplingCallback`."""

  @property
  def heating_trend(self):
    """The trend statistic of the sampling epochs' energies at the end of
    the last fit (see `tfp_sgmcmc.diagnostics.energy_trend`; None before a
    fit with three sampling epochs)."""
    return self._heating.trend

  @property
  def energy_descent(self):
    """How far below its start the sampling epochs' energy settled at the
    end of the last fit, in units of sqrt(d/2) plus the noise: large when
    sampling began away from the posterior (None before a fit with three
    sampling epochs, or when heating or a rising trend was warned of)."""
    return self._heating.descent

  @property
  def heating(self):
    """The heating statistic of the epoch energies (see
    `tfp_sgmcmc.diagnostics.heating`; None before three sampling epochs)."""
    return self._heating.heating

  @property
  def samples(self):
    """The kept samples: a list (oldest first) of lists of arrays, one per
    trainable variable."""
    return list(self._samples)

  @property
  def acceptance_rate(self):
    """AMAGOLD: accepted / tested trajectories over the whole run."""
    return self.num_accepted / self.num_tests if self.num_tests else math.nan

  @property
  def posterior(self):
    """A `Posterior` of the kept samples and the running moments."""
    return posterior_of(self)

  def predict(self, x, batch_size=256):
    """The Bayesian model average over the kept samples (see
    `Posterior.predict`)."""
    if self.model is not None and not self._samples:
      raise ValueError(self._no_sample_message())
    return self.posterior.predict(x, batch_size=batch_size)

  def _no_sample_message(self):
    """Why nothing is kept, with the numbers and the fix: the fits so far
    ended in burn-in, or made fewer transitions than `thinning`."""
    if self.divergence is not None:
      return (f"no sample kept: the chain diverged before its first "
              f"({self.divergence['message']})")
    if not self._sampling:
      if self.burnin_epochs is not None:
        seen, burnin, unit = (self._epochs_seen, self.burnin_epochs,
                              "epoch(s)")
      else:
        seen, burnin, unit = (self._steps_seen, self.burnin_steps,
                              "step(s)")
      name = "burnin_epochs" if unit == "epoch(s)" else "burnin_steps"
      return (f"no sample kept: the fits of this callback ran {seen} "
              f"{unit}, all of them burn-in ({name}={burnin}), so the "
              "sampler has not started. Fit this callback again for more "
              f"than {burnin - seen} {unit} (it continues where it "
              f"stopped), or give a smaller {name}.")
    unit = "M-H test(s)" if self._amagold else "transition(s)"
    return (f"no sample kept: the chain made {self._transitions} {unit} "
            f"since its burn-in, fewer than thinning={self.thinning}. Fit "
            "this callback again (it continues the chain and its count) or "
            f"use thinning <= {max(1, self._transitions)}.")

  def _keep_sample(self):
    with self._strategy.scope():
      state = [np.array(s) for s in self.sampler.chain_state()]
    # Only finite samples are kept (the health check runs first; this is
    # the last guard, e.g. for a chain state derived from a NaN momentum).
    if all(np.all(np.isfinite(s)) for s in state):
      self._samples.append(state)
      self._sample_states.append(
          posterior_io.non_trainable_state(self.model))

  # --- divergence ----------------------------------------------------------

  def _check_health(self, batch, logs, full, values=None):
    """Returns True (and stops or raises) if the chain diverged: the loss
    in `logs`, and with `full` the weights and the sampler's state."""
    what = self._health.problem(self.model, self.sampler, self._strategy,
                                logs, full, values)
    if not what:
      return False
    self._diverge(batch, what)
    return True

  def _check_heating(self, logs):
    """Warns (once) when the epoch energies heat up without diverging."""
    message = self._heating.epoch_end(
        (logs or {}).get("energy"),
        self._sampling and self._sampled_from_epoch_begin,
        not self._sampling,
        sum(int(np.prod(v.shape)) for v in self.model.trainable_variables),
        self.num_examples, (logs or {}).get("accept_rate")
        if self._amagold else None)
    if message:
      warnings.warn(f"{type(self.sampler).__name__}: {message}"
                    + health_lib.step_size_advice(self.sampler),
                    health_lib.diagnostics.UnhealthyChainWarning,
                    stacklevel=2)

  def _check_heating_trend(self):
    """Warns (once) when the energy was still rising as sampling ended."""
    message = self._heating.fit_end(
        sum(int(np.prod(v.shape)) for v in self.model.trainable_variables),
        tested=self._amagold)
    if message:
      warnings.warn(f"{type(self.sampler).__name__}: {message}",
                    health_lib.diagnostics.UnhealthyChainWarning,
                    stacklevel=2)

  def _count_test(self, accepted, adapted):
    """Counts an M-H test (`adapted`: its step size was being tuned)."""
    self.num_tests += 1
    self.num_accepted += int(accepted)
    self._logs.count_test(accepted, adapted)

  def _check_mixing(self):
    """At the end of a fit: warns when the kept samples are one point, or
    else when the M-H test accepted few trajectories (the weaker case).
    Both warn with stacklevel 3, naming `on_train_end`, as the other
    checks' warnings name their callers."""
    if not self._check_samples_moved():
      self._check_acceptance()

  def _check_samples_moved(self):
    """Warns when every kept sample (two or more) is one point: an exact
    test that rejected every trajectory between them leaves a `Posterior`
    of one point, whose average is a point estimate. Returns whether it
    warned."""
    samples = list(self._samples)
    if len(samples) < 2 or any(
        not np.array_equal(a, b) for s in samples[1:]
        for a, b in zip(s, samples[0])):
      return False
    warnings.warn(
        f"{type(self.sampler).__name__}: all {len(samples)} kept samples "
        "are the same point: the chain did not move between them (its M-H "
        f"test accepted {self.num_accepted} of {self.num_tests} "
        "trajectories in this callback's fits), so `predict` and "
        "`posterior` average one point, not the posterior. The step size "
        "is probably too large for the trajectories to be accepted: lower "
        "it, or let the warm-up tune it (`warmup=`).",
        health_lib.diagnostics.UnhealthyChainWarning, stacklevel=3)
    return True

  def _check_acceptance(self):
    """Warns when the M-H test accepted under `LOW_ACCEPTANCE` of this
    fit's trajectories run at a frozen step size (after any warm-up): the
    chain is exact but barely moves, and `predict` averages a few points
    (see `LOW_ACCEPTANCE` and `MIN_TESTS_FOR_ACCEPTANCE`)."""
    tests, accepted = self._logs.fit_tests, self._logs.fit_accepted
    if (tests < MIN_TESTS_FOR_ACCEPTANCE or
        accepted / tests >= LOW_ACCEPTANCE):
      return
    samples = list(self._samples)
    # A rejected trajectory leaves the chain where it was and an accepted
    # one moves it to a new point, so the distinct kept samples are the
    # first and those that differ from the one before.
    distinct = min(len(samples), 1) + sum(
        any(not np.array_equal(a, b) for a, b in zip(s, before))
        for before, s in zip(samples, samples[1:]))
    adapted = self._logs.fit_adapted
    warnings.warn(
        f"{type(self.sampler).__name__}: the M-H test accepted {accepted} "
        f"of {tests} trajectories ({accepted / tests:.0%}) in this fit"
        + (f", after the {adapted} that tuned the step size" if adapted
           else "")
        + ": the chain is exact but barely moves, and its "
        f"{len(samples)} kept samples hold {distinct} distinct "
        f"point{'s' if distinct != 1 else ''}, which `predict` and "
        "`posterior` average. The step size is probably too large for the "
        f"trajectories (tuned ones accept 65-80%): {_smaller_step(self)}, "
        "or let the warm-up tune it to "
        f"{window_adaptation.WARMUP_ACCEPT_PROB:.0%} acceptance "
        "(`SamplingCallback(warmup=n)`; a longer n if one ran).",
        health_lib.diagnostics.UnhealthyChainWarning, stacklevel=3)

  def _check_rejected_data(self, epoch, logs):
    """AMAGOLD's test rejects a trajectory through a batch whose loss is
    not finite and the chain goes on, so non-finite data shows only as the
    epoch's loss: warns (once per callback) when the data is the cause."""
    loss = (logs or {}).get("loss")
    if (loss is None or math.isfinite(float(loss)) or
        self._warned_non_finite_data):
      return
    data = finite_data.non_finite_data(
        fit_arguments.of(self.model), (self.params or {}).get("steps"),
        self._energies.data)
    if not data:
      return
    self._warned_non_finite_data = True
    warnings.warn(
        f"{type(self.sampler).__name__}: the loss of epoch {epoch} is not "
        f"finite ({float(loss)}): the training data is not finite: {data}. "
        "The M-H test rejects every trajectory through such a batch, so the "
        "chain keeps running but never moves on those steps. Remove or "
        "impute those examples (e.g. np.isfinite) and fit again.",
        health_lib.diagnostics.UnhealthyChainWarning, stacklevel=2)

  def _diverge(self, batch, what):
    # Read only now that the chain has diverged: is the data the cause?
    data = finite_data.non_finite_data(
        fit_arguments.of(self.model), (self.params or {}).get("steps"),
        self._energies.data if self._amagold else None)
    self.divergence = health_lib.divergence_report(
        self.sampler, self._epoch, batch, len(self._samples), what, data)
    self.model.stop_training = True
    if self.on_divergence == "raise":
      self._leave_diverged_chain()
      raise health_lib.SamplerDivergenceError(self.divergence["message"])
    warnings.warn(self.divergence["message"], RuntimeWarning, stacklevel=2)

  def _leave_diverged_chain(self):
    if self._samples:
      with self._strategy.scope():
        for v, x in zip(self.model.trainable_variables, self._samples[-1]):
          v.assign(x)
    self._use_burnin_optimizer()


def _smaller_step(callback):
  """The step size to lower, in the units the sampler was built in."""
  # pylint: disable=protected-access
  built, sgd = getattr(callback._spec, "_sgd_arguments", None) or (None,
                                                                   None)
  with callback._strategy.scope():
    step = callback.sampler.log_diagnostics()["step_size"]
  if sgd is not None and "learning_rate" in sgd:
    return (f"a smaller learning_rate (you passed learning_rate="
            f"{sgd['learning_rate']!r} to {type(callback._spec).__name__}."
            f"{built}; the step size is now {step:.3g})")
  return f"a smaller step_size (now {step:.3g})"


def posterior_of(callback):
  """A `Posterior` of a callback's kept samples and running moments."""
  # pylint: disable=protected-access
  if callback.model is None:
    raise ValueError("the callback has not run yet.")
  count, mean, variance = 0, None, None
  if callback.sampler is not None:
    with callback.model.distribute_strategy.scope():
      count, mean, variance = callback.sampler.moments()
  metadata = dict(
      sampler=type(callback._spec).__name__, seed=int(callback._spec.seed),
      sampler_config=backup_lib.jsonable(callback._spec.get_config()),
      num_examples=callback.num_examples, thinning=callback.thinning,
      max_samples=callback.max_samples, burnin_epochs=callback.burnin_epochs,
      burnin_steps=callback.burnin_steps, num_tests=callback.num_tests,
      num_accepted=callback.num_accepted)
  probabilities_loss = probabilities_lib.probabilities_loss(
      callback._likelihood)
  if probabilities_loss:
    metadata["probabilities_loss"] = probabilities_loss
  return posterior_lib.Posterior.from_kept_samples(
      callback.model, callback._samples, callback._sample_states,
      callback._likelihood, count, mean, variance, metadata)
