"""`SamplingCallback`: burn-in with the compiled optimizer, then sample.

    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    sampling = tfp_sgmcmc.keras.SamplingCallback(
        tfp_sgmcmc.keras.SGHMC(step_size=1e-4, friction=100.),
        num_examples=len(x_train), prior=1., burnin_epochs=3,
        thinning=100, max_samples=50)
    model.fit(x_train, y_train, batch_size=100, epochs=20,
              callbacks=[sampling])
    probs = sampling.predict(x_test)        # Bayesian model average
    sampling.save("posterior.npz")          # Posterior.load(path, model)

What happens during `fit`:

* burn-in: the compiled optimizer trains for `burnin_epochs` epochs or
  `burnin_steps` steps;
* then the callback builds the sampler under the model's distribution
  strategy, installs it as `model.optimizer` and rebuilds the train function
  (replacing the optimizer alone does nothing to a traced train step). Each
  train step is now one sampler step on grad U~ = N grad(mean loss) -
  grad log p(theta);
* every `thinning` transitions (for AMAGOLD: M-H tests) the chain's position
  is kept, at most `max_samples` of them (the most recent); running means
  and variances of the position over every transition are kept by the
  sampler (`tfp.experimental.stats.RunningVariance`);
* AMAGOLD: every T steps the callback evaluates U(theta*) over
  `energy_data` in batches (or two minibatch estimates on one batch) and
  runs the M-H test; its cost is one full-data forward pass per T steps
  (`mh_seconds` reports the time spent);
* logs (progress bar, History): `energy` = N * loss - log p(theta) (the
  loss being Keras' running average over the epoch), `step_size`, and for
  AMAGOLD `accept_rate` (this epoch) and `exact_energy` (U at the chain's
  position); NaN during burn-in;
* at the end of `fit` the model's variables hold the chain's position and
  `model.optimizer` is the compiled optimizer again; another `fit` with the
  same callback continues the chain.

Checked before anything runs: a supported negative log-likelihood loss
(`tfp_sgmcmc.keras.losses`), N given, no regularizers or constraints (the
prior is given here, once), no clipping / weight decay / EMA / gradient
accumulation on the sampler, float32 or float64 variables (mixed precision
computes in float16 but keeps float32 variables, and the sampler's state,
noise and energies stay float32 / float64), and a `steps_per_execution`
that divides every step count at which the callback must act.

Reliability (docs/keras.md, docs/long_runs.md):

* `backup_dir`: with `keras.callbacks.BackupAndRestore(backup_dir)` after
  this callback, an interrupted `fit` restarted with the same call resumes
  the same chain bit-identically: the callback writes its own state (the
  model's variables, the sampler's variables, the burn-in optimizer's,
  its counters and the kept samples) next to the backup at every epoch end
  and restores it at the start of `fit`.
* Divergence: a non-finite loss or sampler state (or weights beyond
  `max_abs_weight`) stops sampling with a message naming the sampler, the
  epoch and step and what went non-finite; the finite samples kept so far
  stay (`on_divergence="stop"`, the default) or `SamplerDivergenceError` is
  raised (`on_divergence="raise"`).
"""

import collections
import math
import numbers
import os
import time
import warnings

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.keras import backup as backup_lib
from tfp_sgmcmc.keras import checks as checks_lib
from tfp_sgmcmc.keras import energies as energies_lib
from tfp_sgmcmc.keras import health as health_lib
from tfp_sgmcmc.keras import optimizers as optimizers_lib
from tfp_sgmcmc.keras import posterior as posterior_lib
from tfp_sgmcmc.keras import priors as priors_lib
from tfp_sgmcmc.keras import traps as traps_lib

__all__ = ["SamplingCallback", "SamplerDivergenceError"]



class SamplerDivergenceError(RuntimeError):
  """Raised by `SamplingCallback(on_divergence="raise")` when the chain's
  state or loss becomes non-finite (or exceeds `max_abs_weight`)."""




class SamplingCallback(keras.callbacks.Callback):
  """Runs an SG-MCMC sampler inside `model.fit`, after a burn-in.

  Args:
    sampler: a `tfp_sgmcmc.keras` sampler (`SGLD`, `SGHMC`, `SGNHT`,
      `PreconditionedSGLD`, `AMAGOLD`). When the model lives under a
      distribution strategy, a copy built under it runs (`self.sampler`).
    num_examples: N, the number of training examples (the loss is a mean
      over a batch; the energy needs the sum over the data).
    prior: log p(theta): a Gaussian prior scale, `GaussianPrior(scale)`,
      `FlatPrior()`, or a callable on the list of trainable weights. Do not
      also regularise the model.
    burnin_epochs, burnin_steps: how long the compiled optimizer trains
      before the sampler takes over (at most one; neither means sampling
      from the first step).
    thinning: keep one sample every `thinning` transitions (train steps; for
      AMAGOLD, M-H tests).
    max_samples: keep at most this many samples (the most recent), so that
      memory stays bounded.
    energy_data: AMAGOLD only: the training set for the M-H test's energy,
      as (x, y) arrays or a finite `tf.data.Dataset` of (x, y) batches. The
      exact test checks that it holds `num_examples` examples.
    energy_batch_size: batch size for `energy_data` arrays (the exact energy
      is evaluated in batches of this size; the minibatch test uses one).
    track_moments: keep running means and variances of the position.
    backup_dir: the `backup_dir` of a `keras.callbacks.BackupAndRestore`
      (save_freq="epoch") in the same `fit`, listed after this callback.
      At every epoch end the callback writes its state into
      `backup_dir/sampling_callback/` (the model's and the sampler's
      variables, the burn-in optimizer's, its counters, the kept samples);
      when `fit` starts and the backup exists, it restores the state of the
      epoch BackupAndRestore resumes from, so the resumed chain is the one
      that never stopped. None: no backup.
    on_divergence: "stop" (default): when the chain diverges, warn
      (`RuntimeWarning`) with the reason, keep the finite samples, set the
      model's weights to the last kept sample and set
      `model.stop_training = True`, so `fit` returns normally; "raise":
      the same, then raise `SamplerDivergenceError` out of `fit`.
    max_abs_weight: None, or a bound on |theta|: a weight beyond it counts
      as divergence (catches unbounded growth before it overflows).
    step_size_adaptation: AMAGOLD only: None, or a function of an inner
      kernel returning a TFP step-size adaptation kernel around it, e.g.
      `lambda inner: tfp.mcmc.SimpleStepSizeAdaptation(inner,
      num_adaptation_steps=200, target_accept_prob=0.85)` or
      `tfp.mcmc.DualAveragingStepSizeAdaptation(...)`. After each M-H test
      the adaptation kernel's `one_step` sees the test's log acceptance
      ratio and sets the step size eps of the next trajectory; after
      `num_adaptation_steps` tests eps is frozen (TFP's semantics). The
      logs report `step_size` and `accept_rate` (per epoch); discard the
      samples of the adaptation phase (e.g. adapt during an epoch whose
      samples you drop, or read `sampler.adapting`).
  """

  def __init__(self, sampler, *, num_examples, prior, burnin_epochs=None,
               burnin_steps=None, thinning=1, max_samples=100,
               energy_data=None, energy_batch_size=1000, track_moments=True,
               backup_dir=None, on_divergence="stop", max_abs_weight=None,
               step_size_adaptation=None):
    super().__init__()
    if isinstance(sampler, keras.optimizers.LossScaleOptimizer):
      raise TypeError(
          "do not wrap the sampler in keras.optimizers.LossScaleOptimizer: "
          "dynamic loss scaling skips the steps whose gradient overflows, a "
          "state-dependent skip that biases the chain. Pass the sampler "
          "itself; under mixed precision give it a static scale "
          "(e.g. SGHMC(..., loss_scale_factor=128.)) if small gradients "
          "underflow in float16.")
    if on_divergence not in ("stop", "raise"):
      raise ValueError("`on_divergence` must be 'stop' or 'raise'; got "
                       f"{on_divergence!r}.")
    if max_abs_weight is not None and (
        isinstance(max_abs_weight, bool) or
        not isinstance(max_abs_weight, numbers.Real) or
        not max_abs_weight > 0 or not math.isfinite(max_abs_weight)):
      raise ValueError("`max_abs_weight` must be None or a positive finite "
                       f"number; got {max_abs_weight!r}.")
    if not isinstance(sampler, optimizers_lib.SamplerOptimizer):
      raise TypeError(
          "`sampler` must be a tfp_sgmcmc.keras sampler (SGLD, SGHMC, SGNHT, "
          f"PreconditionedSGLD, AMAGOLD); got {type(sampler).__name__}. "
          "Keras optimizers do not sample: the compiled optimizer serves "
          "for burn-in.")
    if num_examples is None:
      raise ValueError(
          "`num_examples` (N, the training-set size) is required: the "
          "loss is a mean over a batch, and the posterior's energy is N "
          "times it.")
    checks_lib.check_count("num_examples", num_examples, 1)
    self._log_prior = priors_lib.as_log_prior(prior)
    if burnin_epochs is not None and burnin_steps is not None:
      raise ValueError(f"give `burnin_epochs` ({burnin_epochs!r}) or "
                       f"`burnin_steps` ({burnin_steps!r}), not both.")
    checks_lib.check_count("burnin_epochs", burnin_epochs, 0, allow_none=True)
    checks_lib.check_count("burnin_steps", burnin_steps, 0, allow_none=True)
    checks_lib.check_count("thinning", thinning, 1)
    checks_lib.check_count("max_samples", max_samples, 1)
    checks_lib.check_count("energy_batch_size", energy_batch_size, 1)
    optimizers_lib.check_sampler_options(sampler)
    self._amagold = isinstance(sampler, optimizers_lib.AMAGOLD)
    if self._amagold and energy_data is None:
      raise ValueError(
          "AMAGOLD needs `energy_data`, the training set as (x, y) arrays or "
          "a finite tf.data.Dataset of (x, y) batches, for its "
          "Metropolis-Hastings test.")
    if energy_data is not None and not isinstance(
        energy_data, (tuple, list, tf.data.Dataset)):
      raise TypeError("`energy_data` must be (x, y) arrays or a "
                      f"tf.data.Dataset; got {type(energy_data).__name__}.")
    self._spec = sampler
    self.sampler = None
    self.num_examples = int(num_examples)
    self.burnin_epochs = burnin_epochs
    self.burnin_steps = burnin_steps
    self.thinning = int(thinning)
    self.max_samples = int(max_samples)
    if step_size_adaptation is not None and not self._amagold:
      raise ValueError(
          "`step_size_adaptation` targets an acceptance rate, which only "
          f"AMAGOLD has (an M-H test); got the sampler "
          f"{type(sampler).__name__}.")
    if step_size_adaptation is not None and not callable(
        step_size_adaptation):
      raise TypeError(
          "`step_size_adaptation` must be a function of the inner kernel, "
          "e.g. lambda inner: tfp.mcmc.SimpleStepSizeAdaptation(inner, "
          "num_adaptation_steps=500, target_accept_prob=0.85); got "
          f"{step_size_adaptation!r}.")
    self._step_size_adaptation = step_size_adaptation
    self._energies = energies_lib.AcceptanceEnergies(
        energy_data, energy_batch_size, num_examples, self._log_prior)
    self._track_moments = bool(track_moments)
    self._samples = collections.deque(maxlen=self.max_samples)
    # The model's non-trainable variables at each kept sample (batch norm).
    self._sample_states = collections.deque(maxlen=self.max_samples)
    self._sampling = False
    self._epochs_seen = 0
    self._steps_seen = 0
    self._sampler_steps = 0
    self._transitions = 0
    self._burnin_optimizer = None
    self._likelihood = None
    self.mh_seconds = 0.
    self.num_tests = 0
    self.num_accepted = 0
    self._epoch_tests = 0
    self._epoch_accepted = 0
    self.backup_dir = None if backup_dir is None else os.fspath(backup_dir)
    self.on_divergence = on_divergence
    self.max_abs_weight = (None if max_abs_weight is None
                           else float(max_abs_weight))
    self.divergence = None
    self._health = health_lib.HealthCheck(self.max_abs_weight)
    self._traps = traps_lib.FitTraps()  # Misuses of fit (docs/keras.md).
    # Set when `fit` starts (the model's strategy and steps per execution).
    self._strategy = None
    self._spe = 1
    self._log_prior_function = None
    # Where the current epoch and execution are.
    self._epoch = 0
    self._batch_begin = 0
    self._last_iterations = 0
    self._trajectory_steps = 0

  # --- Keras hooks ---------------------------------------------------------

  def on_train_begin(self, logs=None):
    model = self.model
    self._likelihood = checks_lib.check_model(model)
    checks_lib.check_steps_per_execution(
        model, (self.params or {}).get("steps"), self.burnin_steps,
        self.thinning,
        self._spec.num_leapfrog_steps if self._amagold else None)
    if self.divergence is not None:
      raise SamplerDivergenceError(
          "this SamplingCallback's chain diverged in an earlier fit ("
          f"{self.divergence['message']}); start a new SamplingCallback.")
    self._traps.train_begin(self)
    self._strategy = model.distribute_strategy
    if self.sampler is None or model.optimizer is not self.sampler:
      self._burnin_optimizer = model.optimizer
    self._spe = int(model.steps_per_execution)
    if self._log_prior_function is None:
      with self._strategy.scope():
        self._log_prior_function = tf.function(
            lambda: self._log_prior(
                [v.value for v in model.trainable_variables]),
            autograph=False)
    if self._restore_backup():
      return
    self._traps.check_thinning(self)
    if self._sampling:
      self._install()
    elif (self.burnin_epochs is not None and
          self._epochs_seen >= self.burnin_epochs) or (
              self.burnin_steps is not None and
              self._steps_seen >= self.burnin_steps) or (
                  self.burnin_epochs is None and self.burnin_steps is None):
      self._start_sampling()

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch
    self._epoch_tests = 0
    self._epoch_accepted = 0
    self._traps.epoch_begin(self, epoch)

  def on_test_begin(self, logs=None):
    self._traps.test_begin(self)

  def on_train_batch_begin(self, batch, logs=None):
    self._batch_begin = batch

  def on_train_batch_end(self, batch, logs=None):
    if self.divergence is not None:
      return
    steps = batch - self._batch_begin + 1
    self._steps_seen += steps
    self._traps.batch_end(self)
    if not self._sampling:
      if (self.burnin_steps is not None and
          self._steps_seen >= self.burnin_steps):
        self._start_sampling()
    else:
      if self._spe == 1:
        steps = 1
      else:
        # The true count: the last execution of an epoch may be partial.
        iterations = self.sampler.step_count
        steps, self._last_iterations = (iterations - self._last_iterations,
                                        iterations)
      self._sampler_steps += steps
      if self._amagold:
        self._trajectory_steps += steps
        if self._trajectory_steps >= self.sampler.num_leapfrog_steps:
          self._metropolis_hastings(batch)
      else:
        # Each train step is a transition. The loss (already on the host)
        # is checked at every one, the whole state (one small compiled
        # reduction) before a sample is kept. AMAGOLD rejects a non-finite
        # trajectory in its M-H test, so its state is checked after the
        # test, not between leapfrog steps.
        previous, self._transitions = self._transitions, self._sampler_steps
        keep = self._transitions // self.thinning > previous // self.thinning
        if self._check_health(batch, logs, full=keep):
          return
        if keep:
          self._keep_sample()

  def on_epoch_end(self, epoch, logs=None):
    self._add_logs(logs)  # The epoch that ran, before a swap.
    if self.divergence is not None:
      return
    self._traps.epoch_end(self, epoch, logs)
    if self._sampling and not self._amagold and self._check_health(
        None, logs, full=True):
      return  # Nothing diverged is backed up.
    self._epochs_seen += 1
    if (not self._sampling and self.burnin_epochs is not None and
        self._epochs_seen >= self.burnin_epochs):
      self._start_sampling()
    if self.backup_dir is not None:
      self._save_backup(epoch + 1)

  def on_train_end(self, logs=None):
    self._traps.train_end(self)
    if not self._sampling:
      return
    if self.divergence is not None:
      self._leave_diverged_chain()
      return
    with self._strategy.scope():
      self.sampler.end_sampling()
    self.model.optimizer = self._burnin_optimizer
    self.model.make_train_function(force=True)

  # --- sampling ------------------------------------------------------------

  def _build_sampler(self, spec):
    strategy = self.model.distribute_strategy
    with strategy.scope():
      # The TF optimizer binds the strategy current at its construction.
      built_for = getattr(spec, "_distribution_strategy", None)
      if spec.built or built_for is not strategy:
        spec = type(spec).from_config(spec.get_config())
      spec.configure(self.num_examples, self._log_prior,
                     track_moments=self._track_moments,
                     step_size_adaptation=self._step_size_adaptation)
      spec.build(self.model.trainable_variables)
    optimizers_lib.check_sampler_options(spec)
    return spec

  def _start_sampling(self):
    self.sampler = self._build_sampler(self._spec)
    self._sampling = True
    self._transitions = 0
    self._install()

  def _install(self, begin=True):
    model = self.model
    model.optimizer = self.sampler
    model.make_train_function(force=True)
    self._last_iterations = self.sampler.step_count
    if not begin:  # Restored mid-run: the state is already the running one.
      return
    self._trajectory_steps = 0
    with self._strategy.scope():
      if self._amagold and not self.sampler.initialized:
        if self.sampler.acceptance_energy == "exact":
          self.sampler.set_energy(self._energies.exact(self.model,
                                                       self._likelihood))
      self.sampler.begin_sampling()

  def _keep_sample(self):
    with self._strategy.scope():
      state = [np.array(s) for s in self.sampler.chain_state()]
    # Only finite samples are kept (the health check runs first; this is
    # the last guard, e.g. for a chain state derived from a NaN momentum).
    if all(np.all(np.isfinite(s)) for s in state):
      self._samples.append(state)
      self._sample_states.append(
          posterior_lib.non_trainable_state(self.model))

  def _metropolis_hastings(self, batch=None):
    sampler = self.sampler
    t = sampler.leapfrog_step
    if t != sampler.num_leapfrog_steps:
      raise RuntimeError(
          f"AMAGOLD's M-H test is due after T={sampler.num_leapfrog_steps} "
          f"steps but {t} steps ran: steps_per_execution or a partial "
          "execution skipped the test.")
    self._trajectory_steps = 0
    start = time.perf_counter()
    with self._strategy.scope():
      if sampler.acceptance_energy == "exact":
        accepted, _ = sampler.metropolis_hastings(
            self._energies.exact(self.model, self._likelihood))
      else:
        current, proposed = self._energies.minibatch(
            self.model, self._likelihood,
            [s.value for s in sampler.start_position], sampler.seed)
        accepted, _ = sampler.metropolis_hastings(proposed, current)
      accepted = bool(accepted)
    self.mh_seconds += time.perf_counter() - start
    self.num_tests += 1
    self._epoch_tests += 1
    self.num_accepted += int(accepted)
    self._epoch_accepted += int(accepted)
    self._transitions += 1
    if self._check_health(batch, None, full=True):
      return
    if self._transitions % self.thinning == 0:
      self._keep_sample()

  # --- divergence ----------------------------------------------------------

  def _check_health(self, batch, logs, full):
    """Returns True (and stops or raises) if the chain diverged: the loss
    in `logs`, and with `full` the weights and the sampler's state."""
    what = self._health.problem(self.model, self.sampler, self._strategy,
                                logs, full)
    if not what:
      return False
    self._diverge(batch, what)
    return True

  def _diverge(self, batch, what):
    spec = self.sampler
    name = type(spec).__name__
    config = spec.get_config()
    hints = [f"a smaller step_size (now {config.get('step_size')!r})"]
    if "friction" in config:
      hints.append(f"a larger friction (now {config['friction']!r})")
    if "diffusion" in config:
      hints.append(f"a larger diffusion (now {config['diffusion']!r})")
    if config.get("loss_scale_factor") is not None:
      hints.append("a smaller loss_scale_factor (now "
                   f"{config['loss_scale_factor']!r}; the float16 loss may "
                   "overflow)")
    where = f"epoch {self._epoch}"
    if batch is not None:
      where += f", batch {batch}"
    kept = len(self._samples)
    message = (
        f"{name} diverged at {where} (sampler step {spec.step_count}): "
        f"{what}. Sampling stopped; the {kept} sample(s) kept before it are "
        "finite and stay in the callback (.samples, .posterior), and the "
        "model's weights are set to the last of them"
        f"{'' if kept else ' (none kept: the weights are left as they are)'}"
        f". Try {' or '.join(hints)}.")
    self.divergence = dict(sampler=name, epoch=self._epoch,
                           batch=batch, step=spec.step_count, what=what,
                           num_samples=kept, message=message)
    self.model.stop_training = True
    if self.on_divergence == "raise":
      self._leave_diverged_chain()
      raise SamplerDivergenceError(message)
    warnings.warn(message, RuntimeWarning, stacklevel=2)

  def _leave_diverged_chain(self):
    if self._samples:
      with self._strategy.scope():
        for v, x in zip(self.model.trainable_variables, self._samples[-1]):
          v.assign(x)
    self.model.optimizer = self._burnin_optimizer
    self.model.make_train_function(force=True)

  # --- backup and restore ----------------------------------------------------

  def _save_backup(self, fit_epoch):
    backup_lib.save_backup(self, fit_epoch)

  def _restore_backup(self):
    return backup_lib.restore_backup(self)

  # --- logs ----------------------------------------------------------------

  def _log_keys(self):
    keys = ["energy", "step_size"]
    if self._amagold:
      keys += ["accept_rate"]
      if self._spec.acceptance_energy == "exact":
        keys += ["exact_energy"]
    if isinstance(self._spec, optimizers_lib.SGNHT):
      keys += ["thermostat"]
    return keys

  def _add_logs(self, logs):
    if logs is None:
      return
    values = dict.fromkeys(self._log_keys(), math.nan)
    if "loss" in logs:
      with self._strategy.scope():
        values["energy"] = (self.num_examples * float(logs["loss"]) -
                            float(self._log_prior_function()))
    if self._sampling:
      with self._strategy.scope():
        values.update(self.sampler.log_diagnostics())
        if self._amagold:
          values["accept_rate"] = (
              self._epoch_accepted / self._epoch_tests if self._epoch_tests
              else math.nan)
          if "exact_energy" in values:
            values["exact_energy"] = self.sampler.energy
    logs.update(values)

  # --- results -------------------------------------------------------------

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
    if self.model is None:
      raise ValueError("the callback has not run yet.")
    variables = self.model.trainable_variables
    if self._samples:
      samples = [np.stack([s[j] for s in self._samples])
                 for j in range(len(variables))]
    else:
      samples = [np.zeros((0,) + tuple(v.shape), v.dtype) for v in variables]
    non_trainable = posterior_lib.stack_states(
        self._sample_states, len(self._samples),
        self.model.non_trainable_variables)
    count, mean, variance = 0, None, None
    if self.sampler is not None:
      with self.model.distribute_strategy.scope():
        count, mean, variance = self.sampler.moments()
    likelihood = self._likelihood
    predictive = "identity"
    if likelihood is not None:
      predictive = (likelihood.predictive_name
                    if likelihood.predictive_name != "custom"
                    else likelihood.predictive)
    metadata = dict(
        sampler=type(self._spec).__name__, seed=int(self._spec.seed),
        sampler_config=backup_lib.jsonable(self._spec.get_config()),
        num_examples=self.num_examples, thinning=self.thinning,
        max_samples=self.max_samples, burnin_epochs=self.burnin_epochs,
        burnin_steps=self.burnin_steps, num_tests=self.num_tests,
        num_accepted=self.num_accepted)
    metadata.update(posterior_lib.likelihood_metadata(likelihood))
    return posterior_lib.Posterior(
        samples, posterior_lib.variable_paths(self.model),
        predictive=predictive, mean=mean, variance=variance,
        num_transitions=int(count), metadata=metadata, model=self.model,
        non_trainable_samples=non_trainable,
        non_trainable_paths=posterior_lib.non_trainable_paths(self.model))

  def predict(self, x, batch_size=256):
    """The Bayesian model average over the kept samples (see
    `Posterior.predict`)."""
    predictions = self.posterior.predict(x, batch_size=batch_size)
    self._traps.check_predictions(self, predictions)
    return predictions

  def save(self, path):
    """Saves the kept samples and moments (`Posterior.load(path, model)`)."""
    return self.posterior.save(path)
