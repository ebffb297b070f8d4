"""`SamplerOptimizer`: the base of the Keras samplers (grad U from the Keras
gradient, the whole-state update, running moments, the sampling phase).
See `tfp_sgmcmc.keras.optimizers` for the samplers."""

import random as python_random

import keras
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc.targets import energy as energy_lib
from tfp_sgmcmc.keras.samplers import options as options_lib

__all__ = ["SamplerOptimizer", "read", "write", "seed_for"]

# Salts of the counter-based seeds: one independent stream per purpose.
STEP, BEGIN = 11, 13


def read(variable):
  """The value of a Keras or tf variable (the local replica's copy inside a
  distributed update)."""
  if isinstance(variable, keras.Variable):
    variable = variable.value
  return tf.convert_to_tensor(variable)


def write(variable, value):
  if isinstance(variable, keras.Variable):
    variable = variable.value
  variable.assign(tf.cast(value, variable.dtype))


def seed_for(base, salt, counter):
  """A stateless seed for (base seed, purpose, counter)."""
  seed = tf.constant([base, salt], tf.int32)
  return random.fold_in(seed, tf.cast(counter, tf.int32), alg=random.RNG_ALG)


def built_from_sgd_units(sampler, constructor, **arguments):
  """Records what the user passed to `constructor` (`from_sgd_momentum`,
  `from_sgd_parameters`), for messages in their units. Not in the config:
  a sampler rebuilt from it was built from `step_size`."""
  sampler._sgd_arguments = (constructor, {  # pylint: disable=protected-access
      name: float(value) for name, value in arguments.items()})
  return sampler


class SamplerOptimizer(keras.optimizers.Optimizer):
  """Base class: grad U from the Keras gradient, then a `dynamics` update.

  Subclasses implement `_transition(variables, position, gradient, step,
  step_size, seed) -> (new_variable_values, chain_state)` (lists over the
  trainable variables; `gradient` is grad U~ = N grad(batch mean of the
  loss) - grad log p(theta), `seed` the step's stateless seed), where
  `chain_state` is the position of the chain after the step (the sample),
  which can differ from what the model's variables hold between steps (a
  splitting integrator keeps them half a drift ahead). They may override
  `_begin` / `_end`, run by `SamplingCallback` before and after the
  sampling phase of each `fit`.

  Args:
    step_size: the sampler's step size h (epsilon), as in the kernel of the
      same name. Kept in the optimizer's `learning_rate` variable.
    temperature: T, 1 for the posterior.
    seed: an integer; None draws one, as Keras draws a missing seed (so
      `keras.utils.set_random_seed` fixes it). Two samplers with the same
      seed and the same data give the same chain.
    name: the optimizer's name.
    loss_scale_factor: None, or a static loss scale for mixed precision
      (the loss is multiplied by it before the float16 backward pass and the
      float32 gradients divided by it before the update; a power of two is
      exact). Dynamic scaling (`LossScaleOptimizer`) is not supported.
    **kwargs: `loss_scale_factor` only; Keras' other optimizer options
      (clipping, weight decay, EMA, ...) are refused.

  #### Example

  SGLD at T = 1 written as a subclass:

  ```python
  class NoisyGD(sgk.SamplerOptimizer):
    def _transition(self, variables, position, gradient, step, step_size,
                    seed):
      seeds = tfp.random.split_seed(seed, len(position))
      new = [p - step_size * g + tf.sqrt(2. * step_size) *
             tf.random.stateless_normal(tf.shape(p), s, dtype=p.dtype)
             for p, g, s in zip(position, gradient, seeds)]
      return new, new  # the variables' new values, the chain's state

  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd",
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampling = sgk.SamplingCallback(NoisyGD(step_size=1e-4, seed=1),
                                  num_examples=len(x), prior=1.)
  model.fit(x, y, batch_size=32, epochs=1, callbacks=[sampling], verbose=0)
  ```
  """

  _uses_momentum = False
  _allows_schedule = False
  # Whether the sampler runs an M-H test (an acceptance rate to adapt to).
  has_acceptance_test = False

  def __init__(self, step_size, temperature=1., seed=None, name=None,
               **kwargs):
    loss_scale_factor = options_lib.check_loss_scale(
        type(self).__name__, kwargs.pop("loss_scale_factor", None))
    options_lib.reject_options(type(self).__name__, kwargs)
    step_size = options_lib.check_step_size(step_size, self._allows_schedule)
    arguments.check_number("temperature", temperature)
    if seed is None:
      # Drawn as Keras' own SeedGenerator draws a missing seed, from
      # Python's generator, which keras.utils.set_random_seed seeds.
      seed = python_random.randint(1, int(1e9))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
      raise TypeError(f"`seed` must be an integer or None; got {seed!r}.")
    # A static loss scale (mixed precision): Keras multiplies the loss by it
    # before the float16 backward pass and divides the float32 gradients by
    # it before `_distributed_tf_update_step`, so the sampler sees grad U
    # unscaled. Dynamic scaling (LossScaleOptimizer) would skip the steps
    # whose gradient overflows, a state-dependent skip that biases a chain.
    super().__init__(learning_rate=step_size, name=name,
                     loss_scale_factor=loss_scale_factor)
    self._parameters = dict(step_size=step_size,
                            temperature=float(temperature),
                            seed=int(seed) % (2 ** 31 - 1), name=self.name)
    if loss_scale_factor is not None:
      self._parameters["loss_scale_factor"] = loss_scale_factor
    self._num_examples = None
    self._log_prior_fn = None
    self._track_moments = True
    self._step_size_adaptation = None
    # The chain's state, Keras variables created by `build`.
    self._initialized = None
    self._moment_count = None
    self._momentum = None
    self._moment_mean = None
    self._moment_ssr = None

  # --- configuration by SamplingCallback --------------------------------

  def configure(self, num_examples, log_prior_fn, track_moments=True,
                step_size_adaptation=None):
    """Sets N and log p(theta) (and, for AMAGOLD, the step-size
    adaptation); done by `SamplingCallback` before `build`."""
    if self.built:
      raise RuntimeError("configure() must come before build().")
    self._num_examples = int(num_examples)
    self._log_prior_fn = log_prior_fn
    self._track_moments = bool(track_moments)
    self._step_size_adaptation = step_size_adaptation

  @property
  def parameters(self):
    return dict(self._parameters)

  step_size = arguments.parameter_property("step_size")
  temperature = arguments.parameter_property("temperature")
  seed = arguments.parameter_property("seed")

  @property
  def num_examples(self):
    return self._num_examples

  def step_seed(self, step):
    """The stateless seed of sampler step `step` (a transition; for AMAGOLD
    an outer step, one M-H test): the seed the kernel's `one_step` would
    receive to make the same transition."""
    return seed_for(self.seed, STEP, step)

  def get_config(self):
    config = dict(self._parameters)
    if isinstance(config["step_size"],
                  keras.optimizers.schedules.LearningRateSchedule):
      config["step_size"] = keras.optimizers.schedules.serialize(
          config["step_size"])
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    if isinstance(config.get("step_size"), dict):
      config["step_size"] = keras.optimizers.schedules.deserialize(
          config["step_size"], custom_objects=custom_objects)
    return cls(**config)

  def rebuilt(self):
    """A new, unbuilt sampler of the same settings (`from_config`), which
    keeps the SGD units it was built from, so that its messages name them."""
    new = type(self).from_config(self.get_config())
    units = getattr(self, "_sgd_arguments", None)
    if units is not None:
      new._sgd_arguments = units  # pylint: disable=protected-access
    return new

  # --- state -------------------------------------------------------------

  def build(self, variables):
    if self.built:
      return
    if self._num_examples is None or self._log_prior_fn is None:
      raise RuntimeError(
          f"{type(self).__name__} has no `num_examples` or prior: use it "
          "through tfp_sgmcmc.keras.SamplingCallback, which sets them.")
    super().build(variables)
    if self._uses_momentum:
      self._momentum = self.add_optimizer_variables(variables, "momentum")
    self._initialized = self.add_variable((), dtype="int32",
                                          name="initialized")
    self._moment_count = self.add_variable((), dtype="float64",
                                           name="moment_count")
    if self._track_moments:
      self._moment_mean = self.add_optimizer_variables(variables,
                                                       "moment_mean")
      self._moment_ssr = self.add_optimizer_variables(
          variables, "moment_sum_squared_residuals")
    self._build_state(variables)

  def _build_state(self, variables):
    del variables

  def _slots(self, slots, variables):
    """The slot of each variable, in the order of `variables`."""
    return [slots[self._get_variable_index(v)] for v in variables]

  # --- the update ----------------------------------------------------------

  def update_step(self, gradient, variable, learning_rate):
    raise NotImplementedError(
        "samplers update all variables together (a step needs the whole "
        "state, e.g. for a thermostat or an energy accumulator); they run "
        "on the TensorFlow backend through `_distributed_tf_update_step`.")

  def _distributed_tf_update_step(self, distribution, grads_and_vars,
                                  learning_rate):
    # Called by the TF optimizer in cross-replica context with all-reduced
    # gradients. One `extended.update` runs the whole-state step once per
    # replica, on that replica's copies of the variables.
    grads = [g for g, _ in grads_and_vars]
    variables = [v for _, v in grads_and_vars]
    if len(variables) != len(self._trainable_variables):
      missing = sorted(
          set(v.path for v in self._trainable_variables) -
          set(getattr(v, "path", getattr(v, "name", "")) for v in variables))
      raise ValueError(
          f"{type(self).__name__}: every trainable variable needs a gradient "
          f"(the posterior is over all of them); none for {missing}. Freeze "
          "unused variables (layer.trainable = False) before compiling.")

    def update(_, grads, learning_rate):
      self._update(variables, grads, learning_rate)
    distribution.extended.update(variables[0], update,
                                 args=(grads, learning_rate), group=False)

  def _update(self, variables, grads, learning_rate):
    position = [read(v) for v in variables]
    dtype = position[0].dtype
    with tf.GradientTape(watch_accessed_variables=False) as tape:
      tape.watch(position)
      log_prior = tf.cast(self._log_prior_fn(position), dtype)
    prior_grads = tape.gradient(
        log_prior, position,
        unconnected_gradients=tf.UnconnectedGradients.ZERO)
    gradient = energy_lib.minibatch_energy_gradient(
        [tf.cast(tf.convert_to_tensor(g), dtype) for g in grads],
        prior_grads, self._num_examples)
    # On a pipeline of unknown length Keras ends each epoch with a call
    # whose get_next fails; TF orders the ops of each variable, not all
    # ops, so the writes that do not read the data (counters, seeds, a
    # momentum refresh) still ran in it. They all wait for the gradient.
    with tf.control_dependencies(gradient):
      step = tf.cast(read(self._iterations), tf.int32)
      seed = self.step_seed(step)
      new_values, chain_state = self._transition(
          variables, position, gradient, step,
          tf.cast(learning_rate, dtype), seed)
      for v, x in zip(variables, new_values):
        write(v, x)
      if chain_state is not None:
        self._update_moments(variables, chain_state)

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    raise NotImplementedError

  # --- running moments -----------------------------------------------------

  def _update_moments(self, variables, chain_state, keep=True):
    # The update of tfp.experimental.stats.RunningVariance (Welford's, in
    # the form of its `update`): n' = n + 1, delta = x - mean,
    # mean' = mean + delta / n', ssr' = ssr + n / n' * delta^2. Written out
    # because `RunningVariance.update` goes through an einsum, several times
    # slower per step on CPU than these elementwise updates. A state not
    # kept (`keep` a False tensor: a test of AMAGOLD's warm-up, once per
    # test, not per step) leaves them as they were.
    count = read(self._moment_count)
    if self._track_moments:
      for mean_v, ssr_v, x in zip(
          self._slots(self._moment_mean, variables),
          self._slots(self._moment_ssr, variables), chain_state):
        n = tf.cast(count, x.dtype)
        mean, ssr = read(mean_v), read(ssr_v)
        delta = x - mean
        new = mean + delta / (n + 1.), ssr + n / (n + 1.) * tf.square(delta)
        if keep is not True:
          new = [tf.where(keep, a, b) for a, b in zip(new, (mean, ssr))]
        write(mean_v, new[0])
        write(ssr_v, new[1])
    write(self._moment_count,
          count + (1. if keep is True else tf.cast(keep, count.dtype)))

  def running_variance(self):
    """The running moments as `tfp.experimental.stats.RunningVariance`
    objects, one per trainable variable (None if not tracked): over every
    transition since sampling began, not only the kept samples."""
    if not self._track_moments:
      return None
    count = read(self._moment_count)
    return [tfp.experimental.stats.RunningVariance(
        num_samples=tf.cast(count, m.dtype), mean=read(m),
        sum_squared_residuals=read(s), event_ndims=0)
            for m, s in zip(self._moment_mean, self._moment_ssr)]

  def moments(self):
    """(number of transitions, means, variances) of the chain's position,
    over every transition since sampling began (AMAGOLD: since its
    adaptation ended; not only the kept ones); lists of arrays in the order
    of the model's trainable variables, None without a transition."""
    count = float(read(self._moment_count))
    running = self.running_variance()
    if running is None or not count:  # Not tracked, or nothing since warm-up.
      return count, None, None
    return (count, [r.mean.numpy() for r in running],
            [r.variance().numpy() for r in running])

  # --- the sampling phase, driven by SamplingCallback ---------------------

  def begin_sampling(self):
    """Initialises the state at the first call, then prepares the variables
    for the next train step (e.g. a splitting integrator's half drift)."""
    variables = self._trainable_variables
    if not int(read(self._initialized)):
      self._initialize(variables)
      write(self._initialized, 1)
    self._begin(variables)

  def end_sampling(self):
    """Leaves the chain's position in the model's variables."""
    self._end(self._trainable_variables)

  def _initialize(self, variables):
    del variables

  def _begin(self, variables):
    del variables

  def _end(self, variables):
    del variables

  @property
  def momentum(self):
    """The momentum r, one tensor per trainable variable."""
    if not self._uses_momentum:
      raise AttributeError(f"{type(self).__name__} has no momentum.")
    return [read(m) for m in self._momentum]

  @property
  def initialized(self):
    """Whether the sampler's state (momentum, ...) has been drawn."""
    return bool(int(read(self._initialized)))

  @property
  def step_count(self):
    """Sampler steps (train steps) taken so far."""
    return int(read(self._iterations))

  def chain_state(self):
    """The chain's current position, one tensor per trainable variable."""
    return [read(v) for v in self._trainable_variables]

  def log_keys(self):
    """The keys of `log_diagnostics`, known before the sampler is built
    (the logs hold them as NaN during burn-in)."""
    return ["step_size"]

  def log_diagnostics(self):
    """Values for the Keras logs (besides the energy)."""
    return {"step_size": float(read(self._learning_rate))
            if isinstance(self._learning_rate, keras.Variable)
            else float(self._get_current_learning_rate())}
