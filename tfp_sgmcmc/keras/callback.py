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
accumulation on the sampler, no mixed precision, and a `steps_per_execution`
that divides every step count at which the callback must act.
"""

import collections
import math
import numbers
import time

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.keras import losses as losses_lib
from tfp_sgmcmc.keras import optimizers as optimizers_lib
from tfp_sgmcmc.keras import posterior as posterior_lib
from tfp_sgmcmc.keras import priors as priors_lib

__all__ = ["SamplingCallback"]


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
  """

  def __init__(self, sampler, *, num_examples, prior, burnin_epochs=None,
               burnin_steps=None, thinning=1, max_samples=100,
               energy_data=None, energy_batch_size=1000, track_moments=True):
    super().__init__()
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
    policy = getattr(model, "dtype_policy", None)
    if policy is not None and policy.compute_dtype != policy.variable_dtype:
      raise ValueError(
          f"mixed precision ({policy.name!r}) is not supported by the "
          "samplers: their injected noise and energy differences need the "
          "variables' precision.")
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
    self._strategy = model.distribute_strategy
    if self.sampler is None or model.optimizer is not self.sampler:
      self._burnin_optimizer = model.optimizer
    self._spe = int(model.steps_per_execution)
    with self._strategy.scope():
      self._log_prior_function = tf.function(
          lambda: self._log_prior(
              [v.value for v in model.trainable_variables]), autograph=False)
    if self._sampling:
      self._install()
    elif (self.burnin_epochs is not None and
          self._epochs_seen >= self.burnin_epochs) or (
              self.burnin_steps is not None and
              self._steps_seen >= self.burnin_steps) or (
                  self.burnin_epochs is None and self.burnin_steps is None):
      self._start_sampling()

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch_tests = 0
    self._epoch_accepted = 0

  def on_train_batch_begin(self, batch, logs=None):
    self._batch_begin = batch

  def on_train_batch_end(self, batch, logs=None):
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
          self._metropolis_hastings()
      else:
        previous, self._transitions = self._transitions, self._sampler_steps
        if self._transitions // self.thinning > previous // self.thinning:
          self._keep_sample()
    self._add_logs(logs)

  def on_epoch_end(self, epoch, logs=None):
    self._add_logs(logs)  # The epoch that ran, before a swap.
    self._epochs_seen += 1
    if (not self._sampling and self.burnin_epochs is not None and
        self._epochs_seen >= self.burnin_epochs):
      self._start_sampling()

  def on_train_end(self, logs=None):
    if not self._sampling:
      return
    with self._strategy.scope():
      self.sampler.end_sampling()
    self.model.optimizer = self._burnin_optimizer
    self.model.make_train_function(force=True)

  # --- sampling ------------------------------------------------------------

  def _start_sampling(self):
    model = self.model
    strategy = model.distribute_strategy
    with strategy.scope():
      spec = self._spec
      # The TF optimizer binds the strategy current at its construction.
      built_for = getattr(spec, "_distribution_strategy", None)
      if spec.built or built_for is not strategy:
        spec = type(spec).from_config(spec.get_config())
      spec.configure(self.num_examples, self._log_prior,
                     track_moments=self._track_moments)
      spec.build(model.trainable_variables)
    self.sampler = spec
    optimizers_lib.check_sampler_options(self.sampler)
    self._sampling = True
    self._transitions = 0
    self._install()

  def _install(self):
    model = self.model
    model.optimizer = self.sampler
    model.make_train_function(force=True)
    self._trajectory_steps = 0
    self._last_iterations = self.sampler.step_count
    with self._strategy.scope():
      if self._amagold and not self.sampler.initialized:
        if self.sampler.acceptance_energy == "exact":
          self.sampler.set_energy(self._exact_energy())
      self.sampler.begin_sampling()

  def _keep_sample(self):
    with self._strategy.scope():
      state = self.sampler.chain_state()
      self._samples.append([np.array(s) for s in state])

  def _metropolis_hastings(self):
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
    if self._transitions % self.thinning == 0:
      self._keep_sample()

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
      self._minibatch_iterator = iter(self._energy_dataset.repeat())
    batch = next(self._minibatch_iterator)
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
        sampler=type(self._spec).__name__,
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


def _jsonable(config):
  out = {}
  for key, value in config.items():
    if isinstance(value, (str, int, float, bool)) or value is None:
      out[key] = value
    else:
      out[key] = repr(value)
  return out
