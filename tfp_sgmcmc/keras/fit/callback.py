"""`SamplingCallback`: burn-in with the compiled optimizer, then sample.

This module holds the phases (burn-in; the swap to the sampler, whose
train step is one step on grad U~ = N grad(mean loss) - grad log p(theta);
AMAGOLD's M-H test every T steps; the swap back at the end of `fit`, after
which another `fit` continues the chain). The other jobs live beside it:
`checks` (what is refused, before anything runs), `energies` (U and U~ for
the M-H test), `health` (divergence and heating), `outcome` (the kept
samples, the divergence hooks, the `Posterior`), `backup` and `keras_files`
(resume with `BackupAndRestore`), `logs` (epoch logs), `posterior` (the
kept samples' file and predictions), `phases` (the optimizer and train
function of each phase). docs/keras.md describes the whole.
"""

import collections
import os
import time

import keras

from tfp_sgmcmc.keras.fit import backup as backup_lib
from tfp_sgmcmc.keras.validation import model as checks_lib
from tfp_sgmcmc.keras.fit import energies as energies_lib
from tfp_sgmcmc.keras.fit import health as health_lib
from tfp_sgmcmc.keras.fit import log_values
from tfp_sgmcmc.keras.fit import logs as logs_lib
from tfp_sgmcmc.keras.fit import outcome as outcome_lib
from tfp_sgmcmc.keras.samplers import adaptation as adaptation_lib
from tfp_sgmcmc.keras.samplers import options as options_lib
from tfp_sgmcmc.keras.fit import phases as phases_lib
from tfp_sgmcmc.keras import priors as priors_lib
from tfp_sgmcmc.keras.validation import traps as traps_lib

__all__ = ["SamplingCallback", "SamplerDivergenceError"]

SamplerDivergenceError = health_lib.SamplerDivergenceError


class SamplingCallback(outcome_lib.ChainOutcome, keras.callbacks.Callback):
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
    burnin_epochs: how many epochs the compiled optimizer trains before
      the sampler takes over (give this or `burnin_steps`, not both;
      neither means sampling from the first step).
    burnin_steps: the same in train steps.
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
      that never stopped. These files are the source of truth: Keras'
      files are checked against a digest of the weights they hold and
      rewritten from them where a kill left them torn, missing or out of
      step. At the end of `fit` the last state is kept beside the
      directory (`<backup_dir>.sampling_callback.npz`), so that a kill
      while BackupAndRestore deletes `backup_dir`, or before `save`,
      cannot lose the run's samples: the same call in a new process hands
      them back. `save`, a new fit in the same process or its normal end
      deletes it (docs/keras.md, "The end of a fit"). None: no backup.
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
      logs report `step_size` and `accept_rate` (per epoch); the tests of
      the adaptation phase (`sampler.adapting`) are neither kept nor in
      the running moments.
    warmup: AMAGOLD only: n M-H tests (>= 20) of Stan's window adaptation,
      as `tfp_sgmcmc.warm_up`: the step size dual-averaged to 0.75
      acceptance, the diagonal mass (`sampler.inverse_mass`) estimated in
      `tfp_sgmcmc.warmup_windows(n)` (see `mass_estimate`); then both are
      frozen and the chain is exact. Not with `step_size_adaptation`.
    adapt_mass: with `warmup`: False tunes the step size alone (dual
      averaging over the n tests, the mass left as given). See
      docs/warmup.md.
    mass_estimate: with `warmup`, what M^{-1} is estimated from:
      "gradients" (the default with the exact test over (x, y) arrays: g_a
      g_b of two minibatch gradients at each draw, as `warm_up` takes them;
      `window_adaptation.gradient_variance`) or "draws" (the window's
      variance; the default otherwise).

  After `fit`, `posterior` holds the kept samples (a `Posterior`), and
  `predict(x)` (the Bayesian model average), `save(path)` and the
  posterior's scores use them.

  Raises:
    ValueError: arguments that cannot work together (a burn-in given twice,
      `energy_data` for a sampler without a test, a non-positive
      `thinning`, ...), named with the value received and the fix.

  #### Example

  A Bayesian MLP on stand-in data: two epochs of the compiled SGD, then
  SGHMC keeps a sample every 20 train steps:

  ```python
  rng = np.random.default_rng(0)
  x = rng.normal(size=(1000, 5)).astype("float32")
  y = np.argmax(x[:, :3], axis=1)                 # 3 classes
  model = keras.Sequential([keras.Input((5,)),
                            keras.layers.Dense(16, activation="relu"),
                            keras.layers.Dense(3)])
  model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
  sampling = sgk.SamplingCallback(
      sgk.SGHMC.from_sgd_momentum(learning_rate=0.05 / len(x),
                                  momentum_decay=0.1),
      num_examples=len(x), prior=1., burnin_epochs=2, thinning=20,
      max_samples=10)
  model.fit(x, y, batch_size=50, epochs=6, callbacks=[sampling], verbose=0)
  probs = sampling.predict(x[:10])                # [10, 3], rows sum to 1
  print(len(sampling.posterior.samples[0]), probs.shape)
  ```
  """

  def __init__(self, sampler, *, num_examples, prior, burnin_epochs=None,
               burnin_steps=None, thinning=1, max_samples=100,
               energy_data=None, energy_batch_size=1000, track_moments=True,
               backup_dir=None, on_divergence="stop", max_abs_weight=None,
               step_size_adaptation=None, warmup=None, adapt_mass=None,
               mass_estimate=None):
    super().__init__()
    step_size_adaptation = adaptation_lib.warmup_adaptation(  # Not a
        # sampler (a Keras optimizer): refused with its fix just below.
        warmup, step_size_adaptation,
        getattr(sampler, "has_acceptance_test", False), adapt_mass,
        mass_estimate, exact_gradients=(
            isinstance(energy_data, (tuple, list)) and
            getattr(sampler, "acceptance_energy", None) == "exact"))
    checks_lib.check_callback_arguments(
        sampler, num_examples, burnin_epochs, burnin_steps, thinning,
        max_samples, energy_data, energy_batch_size, on_divergence,
        max_abs_weight, step_size_adaptation)
    self._amagold = sampler.has_acceptance_test
    self._log_prior = priors_lib.as_log_prior(prior)
    self._spec = sampler
    self.sampler = None
    self.num_examples = int(num_examples)
    self.burnin_epochs = burnin_epochs
    self.burnin_steps = burnin_steps
    self.thinning = int(thinning)
    self.max_samples = int(max_samples)
    self._step_size_adaptation = step_size_adaptation
    self._logs = logs_lib.EpochLogs(sampler, num_examples, self._log_prior)
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
    self._phases = phases_lib.OptimizerPhases()
    self._likelihood = None
    self.mh_seconds = 0.
    self.num_tests = 0
    self.num_accepted = 0
    self.backup_dir = None if backup_dir is None else os.fspath(backup_dir)
    self.on_divergence = on_divergence
    self.max_abs_weight = (None if max_abs_weight is None
                           else float(max_abs_weight))
    self.divergence = None
    self._warned_non_finite_data = False  # AMAGOLD's warning, once.
    self._health = health_lib.HealthCheck(self.max_abs_weight)
    self._heating = health_lib.HeatingMonitor()
    self._sampled_from_epoch_begin = False
    self._traps = traps_lib.FitTraps()  # Misuses of fit (docs/keras.md).
    # Set when `fit` starts (the model's strategy and steps per execution).
    self._strategy = None
    self._spe = 1
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
    self._phases.begin_fit(model, self.sampler)
    self._spe = int(model.steps_per_execution)
    self._logs.begin_fit(model, self._strategy)
    if backup_lib.restore_backup(self):
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
    self._sampled_from_epoch_begin = self._sampling
    self._logs.start_epoch()
    self._traps.epoch_begin(self, epoch)

  def on_test_begin(self, logs=None):
    self._traps.test_begin(self)

  def on_train_batch_begin(self, batch, logs=None):
    self._batch_begin = batch

  def on_train_batch_end(self, batch, logs=None):
    self._train_batch_end(batch, logs)
    if logs is not None:  # Shown by the progress bar (after this callback).
      logs["kept_samples"] = log_values.Count(len(self._samples))

  def _train_batch_end(self, batch, logs):
    if self.divergence is not None:
      return
    steps = batch - self._batch_begin + 1
    self._steps_seen += steps
    self._heating.batch_end(batch + 1, (logs or {}).get("loss"))
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

  def add_epoch_logs(self, epoch, logs):
    """The values of the epoch that ran (before a swap), see `fit.logs`."""
    del epoch
    self._logs.add(logs, self._strategy, self.sampler if self._sampling
                   else None,
                   kept_samples=log_values.Count(len(self._samples)))
    averaged = log_values.adapted_step_size(self.sampler) if (
        self._sampling and logs is not None) else None
    if averaged is not None:
      logs["step_size"] = averaged  # What the adaptation will freeze at.

  def on_epoch_end(self, epoch, logs=None):
    if not self._logs.added:  # Once per epoch, for the callbacks after it.
      self.add_epoch_logs(epoch, logs)
    if logs is not None and "kept_samples" in logs:
      # Keras made it a plain float (`pythonify_logs`) before the callbacks;
      # the progress bar and History come after this one.
      logs["kept_samples"] = log_values.Count(logs["kept_samples"])
    if self.divergence is not None:
      return
    self._traps.epoch_end(self, epoch, logs)
    if self._sampling and not self._amagold and self._check_health(
        None, logs, full=True):
      return  # Nothing diverged is backed up.
    if self._sampling and self._amagold:
      self._check_rejected_data(epoch, logs)
    self._check_heating(logs)
    self._epochs_seen += 1
    if (not self._sampling and self.burnin_epochs is not None and
        self._epochs_seen >= self.burnin_epochs):
      self._start_sampling()
    if self.backup_dir is not None:
      backup_lib.save_backup(self, epoch + 1)

  def on_train_end(self, logs=None):
    self._traps.train_end(self)
    if self._sampling and self.divergence is None:
      self._check_heating_trend()
      self._check_mixing()
    if self.backup_dir is not None:
      # Before BackupAndRestore (listed after us) deletes backup_dir. A
      # chain stopped by a divergence keeps its last backup (before the
      # divergence), from which the same call diverges again the same way.
      backup_lib.keep_finished_state(self)
    if not self._sampling:
      return
    if self.divergence is not None:
      self._leave_diverged_chain()
      return
    with self._strategy.scope():
      self.sampler.end_sampling()
    self._use_burnin_optimizer()

  # --- sampling ------------------------------------------------------------

  def _build_sampler(self, spec):
    strategy = self.model.distribute_strategy
    with strategy.scope():
      # The TF optimizer binds the strategy current at its construction.
      built_for = getattr(spec, "_distribution_strategy", None)
      if spec.built or built_for is not strategy:
        spec = spec.rebuilt()
      spec.configure(self.num_examples, self._log_prior,
                     track_moments=self._track_moments,
                     step_size_adaptation=self._step_size_adaptation)
      spec.build(self.model.trainable_variables)
    options_lib.check_sampler_options(spec)
    self._phases.new_sampler()
    return spec

  def _start_sampling(self):
    self.sampler = self._build_sampler(self._spec)
    self._sampling = True
    self._transitions = 0
    self._install()

  def _use_burnin_optimizer(self):
    self._phases.use_burnin(self.model)

  @property
  def _burnin_optimizer(self):
    return self._phases.burnin_optimizer

  def _install(self, begin=True):
    self._phases.use_sampler(self.model, self.sampler)
    self._last_iterations = self.sampler.step_count
    if not begin:  # Restored mid-run: the state is already the running one.
      return
    self._trajectory_steps = 0
    with self._strategy.scope():
      if self._amagold and not self.sampler.initialized:
        self._energies.start(self.sampler, self.model, self._likelihood)
      self.sampler.begin_sampling()

  def _metropolis_hastings(self, batch=None):
    self._trajectory_steps = 0
    adapted = self.sampler.adapting  # Read before the test counts itself.
    start = time.perf_counter()
    with self._strategy.scope():
      accepted, health = self._energies.run_test(
          self.sampler, self.model, self._likelihood, self._health)
    self.mh_seconds += time.perf_counter() - start
    self._count_test(accepted, adapted)
    self._transitions += 1
    if self._check_health(batch, None, full=True, values=health):
      return
    if self._transitions % self.thinning == 0 and not adapted:
      self._keep_sample()

  # --- results -------------------------------------------------------------

  @staticmethod
  def _is_sampling_callback(obj):
    """Whether `obj` is a SamplingCallback (fit_checks asks the callback:
    it cannot import this module, which imports it)."""
    return isinstance(obj, SamplingCallback)

  def save(self, path):
    """Saves the kept samples and moments (`Posterior.load(path, model)`).

    With `backup_dir`, the finished fit's state kept beside it (see
    `backup_dir`) is deleted once the file is written."""
    path = self.posterior.save(path)
    backup_lib.forget_finished_state(self)
    return path
