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
import glob
import json
import math
import numbers
import os
import time
import warnings

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.keras import losses as losses_lib
from tfp_sgmcmc.keras import optimizers as optimizers_lib
from tfp_sgmcmc.keras import posterior as posterior_lib
from tfp_sgmcmc.keras import priors as priors_lib

__all__ = ["SamplingCallback", "SamplerDivergenceError"]

_BACKUP_FORMAT_VERSION = 1
_BACKUP_SUBDIR = "sampling_callback"


class SamplerDivergenceError(RuntimeError):
  """Raised by `SamplingCallback(on_divergence="raise")` when the chain's
  state or loss becomes non-finite (or exceeds `max_abs_weight`)."""


def _atomic_savez(path, arrays):
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "wb") as f:
    np.savez(f, **arrays)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def _check_count(name, value, minimum, allow_none=False):
  if value is None and allow_none:
    return
  if isinstance(value, bool) or not isinstance(value, (numbers.Integral,
                                                       np.integer)):
    raise TypeError(f"`{name}` must be an integer >= {minimum}; got "
                    f"{value!r}.")
  if value < minimum:
    raise ValueError(f"`{name}` must be >= {minimum}; got {value!r}.")


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
    _check_count("num_examples", num_examples, 1)
    self._log_prior = priors_lib.as_log_prior(prior)
    if burnin_epochs is not None and burnin_steps is not None:
      raise ValueError(f"give `burnin_epochs` ({burnin_epochs!r}) or "
                       f"`burnin_steps` ({burnin_steps!r}), not both.")
    _check_count("burnin_epochs", burnin_epochs, 0, allow_none=True)
    _check_count("burnin_steps", burnin_steps, 0, allow_none=True)
    _check_count("thinning", thinning, 1)
    _check_count("max_samples", max_samples, 1)
    _check_count("energy_batch_size", energy_batch_size, 1)
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
    self._energy_data = energy_data
    self._energy_batch_size = int(energy_batch_size)
    self._track_moments = bool(track_moments)
    self._samples = collections.deque(maxlen=self.max_samples)
    self._sampling = False
    self._epochs_seen = 0
    self._steps_seen = 0
    self._sampler_steps = 0
    self._transitions = 0
    self._burnin_optimizer = None
    self._likelihood = None
    self._energy_ready = False
    self._energy_checked = False
    self._minibatch_rng = None
    self._minibatch_iterator = None
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
    self._minibatches_drawn = 0
    self._health_function = None
    self._health_for = None
    self._health_entries = None
    # Set when `fit` starts (the model's strategy and steps per execution).
    self._strategy = None
    self._spe = 1
    self._log_prior_function = None
    # Where the current epoch and execution are.
    self._epoch = 0
    self._batch_begin = 0
    self._last_iterations = 0
    self._trajectory_steps = 0
    # The compiled energy functions (`_build_energy_functions`).
    self._batch_nll = None
    self._current_log_prior = None
    self._minibatch_function = None
    self._energy_arrays = None
    self._energy_dataset = None
    self._full_energy = None

  # --- checks ------------------------------------------------------------

  def _check_model(self, model):
    if keras.backend.backend() != "tensorflow":
      raise RuntimeError("tfp_sgmcmc.keras runs on the TensorFlow backend; "
                         f"Keras uses {keras.backend.backend()!r}.")
    if not isinstance(model, keras.Model):
      raise TypeError(f"the model must be a Keras 3 model; got "
                      f"{type(model).__module__}.{type(model).__name__} "
                      "(tf_keras models are not supported).")
    if not getattr(model, "compiled", False):
      raise ValueError("compile the model first: its optimizer serves for "
                       "burn-in and its loss defines the likelihood.")
    self._likelihood = losses_lib.resolve_likelihood(model.loss, model)
    config = getattr(getattr(model, "_compile_config", None), "config", {})
    weights = config.get("loss_weights") if isinstance(config, dict) else None
    if weights is not None:
      raise ValueError(f"`loss_weights={weights!r}` scales the "
                       "log-likelihood; compile without loss_weights.")
    for v in model.trainable_variables:
      if getattr(v, "regularizer", None) is not None:
        raise ValueError(
            f"variable {v.path!r} has a regularizer: it would be counted N "
            "times in the energy N * loss. Remove it and give the prior to "
            "SamplingCallback(prior=...) (GaussianPrior(scale) for L2).")
      if getattr(v, "constraint", None) is not None:
        raise ValueError(
            f"variable {v.path!r} has a constraint: the projection after "
            "each step changes the sampler's dynamics. Remove it.")
      if not tf.as_dtype(v.dtype).is_floating:
        raise TypeError(f"trainable variable {v.path!r} has dtype "
                        f"{v.dtype}; the samplers need floating weights.")
    for layer in model._flatten_layers():  # pylint: disable=protected-access
      if getattr(layer, "activity_regularizer", None) is not None:
        raise ValueError(
            f"layer {layer.name!r} has an activity_regularizer, an extra "
            "term in the loss outside the likelihood. Remove it.")
    if model.losses:
      raise ValueError(
          f"the model adds {len(model.losses)} loss term(s) of its own "
          "(add_loss or regularizers); they would be counted N times in "
          "the energy. Remove them and put prior terms in `prior`.")
    for v in model.trainable_variables:
      if tf.as_dtype(v.dtype) not in (tf.float32, tf.float64):
        policy = getattr(model, "dtype_policy", None)
        raise TypeError(
            f"trainable variable {v.path!r} has dtype {v.dtype} (policy "
            f"{getattr(policy, 'name', None)!r}): the samplers keep their "
            "state, noise and energy in the variables' dtype, which must be "
            "float32 or float64. Use 'mixed_float16' / 'mixed_bfloat16' "
            "(float32 variables, low-precision compute), not 'float16'.")
    if not model.trainable_variables:
      raise ValueError("the model has no trainable variables.")

  def _check_steps_per_execution(self, model):
    spe = model.steps_per_execution
    if isinstance(spe, bool) or not isinstance(spe, (int, np.integer)) or (
        spe < 1):
      raise ValueError(f"steps_per_execution={spe!r}: the sampling callback "
                       "needs a fixed integer >= 1.")
    if spe == 1:
      return
    problems = []
    if self.burnin_steps and self.burnin_steps % spe:
      problems.append(f"burnin_steps={self.burnin_steps}")
    if self._amagold:
      if self._spec.num_leapfrog_steps % spe:
        problems.append(
            f"num_leapfrog_steps={self._spec.num_leapfrog_steps} (the M-H "
            "test must run after exactly T steps)")
    elif self.thinning % spe:
      problems.append(f"thinning={self.thinning}")
    steps = (self.params or {}).get("steps")
    if steps is not None and steps % spe:
      problems.append(f"steps per epoch={steps} (the last execution of an "
                      "epoch would be partial)")
    if problems:
      raise ValueError(
          f"steps_per_execution={spe} runs {spe} train steps between "
          "callbacks, so the callback would skip the steps where it must "
          "act (swap the optimizer, keep a sample, run AMAGOLD's M-H test);"
          f" make these multiples of {spe}: {', '.join(problems)}.")

  # --- Keras hooks ---------------------------------------------------------

  def on_train_begin(self, logs=None):
    model = self.model
    self._check_model(model)
    self._check_steps_per_execution(model)
    if self.divergence is not None:
      raise SamplerDivergenceError(
          "this SamplingCallback's chain diverged in an earlier fit ("
          f"{self.divergence['message']}); start a new SamplingCallback.")
    self._strategy = model.distribute_strategy
    if self.sampler is None or model.optimizer is not self.sampler:
      self._burnin_optimizer = model.optimizer
    self._spe = int(model.steps_per_execution)
    with self._strategy.scope():
      self._log_prior_function = tf.function(
          lambda: self._log_prior(
              [v.value for v in model.trainable_variables]), autograph=False)
    if self._restore_backup():
      return
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

  def on_train_batch_begin(self, batch, logs=None):
    self._batch_begin = batch

  def on_train_batch_end(self, batch, logs=None):
    if self.divergence is not None:
      return
    steps = batch - self._batch_begin + 1
    self._steps_seen += steps
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
          self.sampler.set_energy(self._exact_energy())
      self.sampler.begin_sampling()

  def _keep_sample(self):
    with self._strategy.scope():
      state = [np.array(s) for s in self.sampler.chain_state()]
    # Only finite samples are kept (the health check runs first; this is
    # the last guard, e.g. for a chain state derived from a NaN momentum).
    if all(np.all(np.isfinite(s)) for s in state):
      self._samples.append(state)

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
        accepted, _ = sampler.metropolis_hastings(self._exact_energy())
      else:
        x, y = self._next_energy_batch()
        current, proposed = self._minibatch_energies(x, y)
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

  def _health_variables(self):
    """(name, variable, is_model_weight) for the model's trainable
    variables and the sampler's floating state."""
    out = [(v.path, v, True) for v in self.model.trainable_variables]
    for v in self.sampler.variables:
      if tf.as_dtype(v.dtype).is_floating:
        out.append((getattr(v, "path", v.name), v, False))
    return out

  def _check_health(self, batch, logs, full):
    """Returns True (and stops or raises) if the chain diverged: the loss
    in `logs`, and with `full` the weights and the sampler's state."""
    loss = None if logs is None else logs.get("loss")
    loss_ok = loss is None or math.isfinite(float(loss))
    if loss_ok and not full:
      return False
    if self._health_for is not self.sampler:
      entries = self._health_variables()
      self._health_entries = entries

      def health():
        finite = tf.stack([tf.reduce_all(tf.math.is_finite(v.value))
                           for _, v, _ in entries])
        biggest = tf.stack([tf.cast(tf.reduce_max(tf.abs(v.value)),
                                    tf.float64)
                            for _, v, weight in entries if weight])
        return finite, biggest
      with self._strategy.scope():
        self._health_function = tf.function(health, autograph=False)
      self._health_for = self.sampler
    with self._strategy.scope():
      finite, biggest = self._health_function()
    finite, biggest = finite.numpy(), biggest.numpy()
    problems = []
    if not loss_ok:
      problems.append(f"the loss (running mean over the epoch: "
                      f"{float(loss)})")
    bad = [(name, weight) for (name, _, weight), ok in
           zip(self._health_entries, finite) if not ok]
    weights = [n for n, weight in bad if weight]
    if weights:
      problems.append(f"the weights {_short_list(weights)}")
    kinds = {}
    for name, weight in bad:
      if not weight:
        short = name.rsplit("/", 1)[-1]
        kind = ("the momentum" if "momentum" in short else
                "the running moments" if "moment_" in short else
                "the thermostat" if "thermostat" in short else
                f"the sampler's {short!r}")
        kinds.setdefault(kind, None)
    problems.extend(kinds)
    largest = float(np.max(biggest))
    what = ""
    if problems:
      what = (", ".join(problems) + " became non-finite (largest "
              f"|theta| {largest:.3g})" if math.isfinite(largest) else
              ", ".join(problems) + " became non-finite")
    elif (self.max_abs_weight is not None and
          largest > self.max_abs_weight):
      what = (f"the weights grew to |theta| = {largest:.3g}, beyond "
              f"max_abs_weight={self.max_abs_weight:g}")
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

  def _backup_path(self, fit_epoch):
    return os.path.join(self.backup_dir, _BACKUP_SUBDIR,
                        f"epoch_{fit_epoch:06d}.npz")

  def _save_backup(self, fit_epoch):
    """Writes the callback's state after `fit_epoch` epochs of this `fit`
    (BackupAndRestore's `epoch`), then deletes all but the last two."""
    model = self.model
    arrays = {}
    with self._strategy.scope():
      for i, v in enumerate(model.trainable_variables +
                            model.non_trainable_variables):
        arrays[f"model_{i}"] = np.array(v.numpy())
      burnin = self._burnin_optimizer
      burnin_vars = burnin.variables if (burnin is not None and
                                         burnin.built) else []
      for i, v in enumerate(burnin_vars):
        arrays[f"burnin_optimizer_{i}"] = np.array(v.numpy())
      sampler_vars = self.sampler.variables if self._sampling else []
      for i, v in enumerate(sampler_vars):
        arrays[f"sampler_{i}"] = np.array(v.numpy())
    num_vars = len(model.trainable_variables)
    for j in range(num_vars):
      arrays[f"samples_{j}"] = (
          np.stack([s[j] for s in self._samples]) if self._samples else
          np.zeros((0,) + tuple(model.trainable_variables[j].shape),
                   np.dtype(model.trainable_variables[j].dtype)))
    header = dict(
        format_version=_BACKUP_FORMAT_VERSION, fit_epoch=int(fit_epoch),
        sampler=type(self._spec).__name__, seed=int(self._spec.seed),
        sampler_config=(_jsonable(self.sampler.get_config())
                        if self._sampling else None),
        sampling=self._sampling, epochs_seen=self._epochs_seen,
        steps_seen=self._steps_seen, sampler_steps=self._sampler_steps,
        transitions=self._transitions,
        trajectory_steps=self._trajectory_steps,
        mh_seconds=self.mh_seconds, num_tests=self.num_tests,
        num_accepted=self.num_accepted,
        minibatches_drawn=self._minibatches_drawn,
        minibatch_rng=(None if self._minibatch_rng is None else
                       self._minibatch_rng.bit_generator.state),
        num_model_variables=len(model.trainable_variables) +
        len(model.non_trainable_variables),
        num_burnin_optimizer_variables=len(burnin_vars),
        num_sampler_variables=len(sampler_vars),
        variable_paths=posterior_lib.variable_paths(model))
    arrays["header"] = np.array(json.dumps(header))
    directory = os.path.join(self.backup_dir, _BACKUP_SUBDIR)
    os.makedirs(directory, exist_ok=True)
    _atomic_savez(self._backup_path(fit_epoch), arrays)
    for old in sorted(glob.glob(os.path.join(directory, "epoch_*.npz")))[:-2]:
      os.remove(old)

  def _restore_backup(self):
    """Restores the state of the epoch BackupAndRestore resumes from;
    returns whether it did."""
    if self.backup_dir is None:
      return False
    directory = os.path.join(self.backup_dir, _BACKUP_SUBDIR)
    metadata_path = os.path.join(self.backup_dir, "training_metadata.json")
    if not os.path.exists(metadata_path):
      # BackupAndRestore has nothing to resume: a fresh fit. Stale files of
      # ours (a run killed before its first backup) are dropped.
      for old in glob.glob(os.path.join(directory, "epoch_*.npz")):
        os.remove(old)
      return False
    with open(metadata_path) as f:
      metadata = json.load(f)
    if metadata.get("batch", 0):
      raise ValueError(
          f"the backup in {self.backup_dir!r} was written in the middle of "
          f"an epoch (batch {metadata['batch']}), and Keras restarts that "
          "epoch from its first batch with the mid-epoch weights, which "
          "breaks the chain. Use BackupAndRestore(save_freq='epoch').")
    fit_epoch = int(metadata["epoch"])
    path = self._backup_path(fit_epoch)
    if not os.path.exists(path):
      found = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
      raise ValueError(
          f"BackupAndRestore resumes after epoch {fit_epoch}, but "
          f"SamplingCallback has no state for that epoch in {directory!r} "
          f"(found: {found}). "
          "Give SamplingCallback(backup_dir=...) the same directory as "
          "BackupAndRestore and list SamplingCallback first.")
    model = self.model
    with np.load(path, allow_pickle=False) as data:
      header = json.loads(str(data["header"]))
      arrays = {k: data[k] for k in data.files if k != "header"}
    if header.get("format_version") != _BACKUP_FORMAT_VERSION:
      raise ValueError(f"{path!r}: unknown format version "
                       f"{header.get('format_version')!r}.")
    if header["sampler"] != type(self._spec).__name__:
      raise ValueError(f"{path!r} holds a {header['sampler']} chain; this "
                       f"callback samples with {type(self._spec).__name__}.")
    # Matched by position and shape, as BackupAndRestore does (the paths
    # carry layer-name counters that differ between processes).
    model_vars = model.trainable_variables + model.non_trainable_variables
    saved_shapes = [tuple(arrays[f"model_{i}"].shape)
                    for i in range(header["num_model_variables"])]
    shapes = [tuple(v.shape) for v in model_vars]
    if saved_shapes != shapes:
      raise ValueError(f"{path!r} holds model variables of shapes "
                       f"{saved_shapes}; the model has {shapes}.")
    if header["sampling"]:
      saved = dict(header["sampler_config"])
      mine = _jsonable(self._spec.get_config())
      # The seed (drawn when None was given) and the name come from the
      # backup; everything else must be the same sampler.
      diffs = {k: (saved.get(k), mine.get(k)) for k in set(saved) | set(mine)
               if k not in ("seed", "name") and saved.get(k) != mine.get(k)}
      if diffs:
        raise ValueError(
            f"{path!r} was written by a sampler with other settings "
            f"(backup, this callback): {diffs}. Use a new backup_dir.")
    with self._strategy.scope():
      for i, v in enumerate(model_vars):
        v.assign(arrays[f"model_{i}"])
      burnin = self._burnin_optimizer
      count = header["num_burnin_optimizer_variables"]
      if burnin is not None and count:
        if not burnin.built:
          burnin.build(model.trainable_variables)
        if len(burnin.variables) != count:
          raise ValueError(
              f"{path!r} holds {count} variables of the burn-in optimizer; "
              f"the compiled optimizer has {len(burnin.variables)}.")
        for i, v in enumerate(burnin.variables):
          v.assign(arrays[f"burnin_optimizer_{i}"])
    self._samples.clear()
    num_samples = arrays["samples_0"].shape[0]
    for k in range(num_samples):
      self._samples.append([arrays[f"samples_{j}"][k]
                            for j in range(len(model.trainable_variables))])
    self._epochs_seen = header["epochs_seen"]
    self._steps_seen = header["steps_seen"]
    self._sampler_steps = header["sampler_steps"]
    self._transitions = header["transitions"]
    self._trajectory_steps = header["trajectory_steps"]
    self.mh_seconds = header["mh_seconds"]
    self.num_tests = header["num_tests"]
    self.num_accepted = header["num_accepted"]
    self._minibatches_drawn = header["minibatches_drawn"]
    self._minibatch_iterator = None
    self._minibatch_rng = None
    if header["minibatch_rng"] is not None:
      self._minibatch_rng = np.random.default_rng()
      self._minibatch_rng.bit_generator.state = header["minibatch_rng"]
    self._sampling = bool(header["sampling"])
    self._health_for = None
    if self._spec.seed != header["seed"]:
      # seed=None drew another seed in this process: the chain's is saved.
      config = dict(self._spec.get_config())
      config["seed"] = header["seed"]
      self._spec = type(self._spec).from_config(config)
    if not self._sampling:
      self.sampler = None
      self.model.optimizer = self._burnin_optimizer
      self.model.make_train_function(force=True)
      return True
    self.sampler = self._build_sampler(self._spec)
    with self._strategy.scope():
      variables = self.sampler.variables
      if len(variables) != header["num_sampler_variables"]:
        raise ValueError(
            f"{path!r} holds {header['num_sampler_variables']} sampler "
            f"variables; the sampler has {len(variables)}.")
      for i, v in enumerate(variables):
        v.assign(arrays[f"sampler_{i}"])
    self._install(begin=False)
    return True

  # --- energies ------------------------------------------------------------

  def _build_energy_functions(self):
    model, likelihood = self.model, self._likelihood
    n = float(self.num_examples)
    log_prior = self._log_prior

    def current_log_prior():
      return tf.cast(log_prior([v.value for v in model.trainable_variables]),
                     tf.float64)

    def batch_nll(x, y):
      return tf.cast(likelihood.batch_nll(y, model(x, training=False)),
                     tf.float64)
    self._batch_nll = tf.function(batch_nll, reduce_retracing=True,
                                  autograph=False)

    data = self._energy_data
    if isinstance(data, (tuple, list)):
      if len(data) != 2:
        raise ValueError("`energy_data` must be a pair (x, y); got "
                         f"{len(data)} items.")
      x, y = (tf.nest.map_structure(tf.convert_to_tensor, a) for a in data)
      size = int(tf.shape(y)[0])
      if size != self.num_examples and (
          self.sampler.acceptance_energy == "exact"):
        raise ValueError(
            f"`energy_data` holds {size} examples but num_examples="
            f"{self.num_examples}: the exact M-H test needs the whole "
            "training set (and N must be its size).")
      self._energy_arrays = (x, y)
      batch = self._energy_batch_size
      num_batches = -(-size // batch)

      def full_energy(x, y):
        # One compiled loop over the batches: a single call per M-H test.
        def body(i, total):
          xb = tf.nest.map_structure(lambda a: a[i * batch:(i + 1) * batch],
                                     x)
          return i + 1, total + batch_nll(xb, y[i * batch:(i + 1) * batch])
        _, total = tf.while_loop(lambda i, _: i < num_batches, body,
                                 (tf.constant(0), tf.constant(0., tf.float64)))
        return total - current_log_prior()
      self._full_energy = tf.function(
          lambda: full_energy(x, y), autograph=False)
    else:
      self._energy_arrays = None
      self._energy_dataset = data
      self._full_energy = None
    self._current_log_prior = tf.function(current_log_prior, autograph=False)

    def minibatch_energies(x, y, start):
      # U~ = N * mean NLL - log p at theta (the trajectory's start, with
      # the model's variables untouched) and at theta* (the variables), on
      # one minibatch.
      non_trainable = [v.value for v in model.non_trainable_variables]
      out, _ = model.stateless_call(start, non_trainable, x, training=False)
      size = tf.cast(tf.shape(out)[0], tf.float64)
      current = n / size * tf.cast(likelihood.batch_nll(y, out), tf.float64)
      proposed = n / size * batch_nll(x, y)
      current -= tf.cast(log_prior(start), tf.float64)
      return current, proposed - current_log_prior()
    self._minibatch_function = tf.function(
        minibatch_energies, reduce_retracing=True, autograph=False)
    self._energy_ready = True

  def _exact_energy(self):
    """U(theta) = sum over energy_data of -log p(y|x) - log p(theta), as a
    float64 tensor (no host round trip for in-memory data)."""
    if not self._energy_ready:
      self._build_energy_functions()
    if self._full_energy is not None:
      return self._full_energy()
    total, count = tf.constant(0., tf.float64), 0
    for batch in self._energy_dataset:
      if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError("`energy_data` must yield (x, y) batches.")
      total += self._batch_nll(batch[0], batch[1])
      if not self._energy_checked:
        count += int(tf.shape(batch[1])[0])
    if not self._energy_checked:
      if count != self.num_examples:
        raise ValueError(
            f"`energy_data` holds {count} examples but num_examples="
            f"{self.num_examples}: the exact M-H test needs the whole "
            "training set (and N must be its size).")
      self._energy_checked = True
    return total - self._current_log_prior()

  def _next_energy_batch(self):
    if not self._energy_ready:
      self._build_energy_functions()
    if self._energy_arrays is not None:
      if self._minibatch_rng is None:
        self._minibatch_rng = np.random.default_rng(self.sampler.seed)
      x, y = self._energy_arrays
      size = int(tf.shape(y)[0])
      idx = self._minibatch_rng.choice(
          size, size=min(self._energy_batch_size, size), replace=False)
      return tf.nest.map_structure(lambda a: tf.gather(a, idx), x), tf.gather(
          y, idx)
    if self._minibatch_iterator is None:
      # After a restore, skip the batches the run had already drawn.
      self._minibatch_iterator = iter(
          self._energy_dataset.repeat().skip(self._minibatches_drawn))
    batch = next(self._minibatch_iterator)
    self._minibatches_drawn += 1
    return batch[0], batch[1]

  def _minibatch_energies(self, x, y):
    start = [s.value for s in self.sampler.start_position]
    return self._minibatch_function(x, y, start)

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
        sampler_config=_jsonable(self._spec.get_config()),
        num_examples=self.num_examples, thinning=self.thinning,
        max_samples=self.max_samples, burnin_epochs=self.burnin_epochs,
        burnin_steps=self.burnin_steps, num_tests=self.num_tests,
        num_accepted=self.num_accepted)
    return posterior_lib.Posterior(
        samples, posterior_lib.variable_paths(self.model),
        predictive=predictive, mean=mean, variance=variance,
        num_transitions=int(count), metadata=metadata, model=self.model)

  def predict(self, x, batch_size=256):
    """The Bayesian model average over the kept samples (see
    `Posterior.predict`)."""
    return self.posterior.predict(x, batch_size=batch_size)

  def save(self, path):
    """Saves the kept samples and moments (`Posterior.load(path, model)`)."""
    return self.posterior.save(path)


def _short_list(names, limit=3):
  shown = ", ".join(repr(n) for n in names[:limit])
  more = len(names) - limit
  return shown + (f" and {more} more" if more > 0 else "")


def _jsonable(config):
  out = {}
  for key, value in config.items():
    if isinstance(value, (str, int, float, bool)) or value is None:
      out[key] = value
    else:
      out[key] = repr(value)
  return out
