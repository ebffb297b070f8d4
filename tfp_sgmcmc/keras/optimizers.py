"""SG-MCMC samplers as Keras 3 optimizers: the update rules of the kernels.

Each class here is a `keras.optimizers.Optimizer` whose update is one step of
a stochastic-gradient sampler, computed by the same `tfp_sgmcmc.dynamics`
functions that the `tfp.mcmc` kernels call. A Keras train step gives the
gradient of the mean loss; the sampler turns it into the gradient of the
minibatch energy

    grad U~(theta) = N grad(mean NLL over the batch) - grad log p(theta)

with N (`num_examples`) and the prior set by `SamplingCallback`, which also
swaps the sampler in after burn-in, keeps samples and runs AMAGOLD's
Metropolis-Hastings test. Use the samplers through that callback.

Units: the arguments are those of the kernels of the same names
(`tfp_sgmcmc.SGHMC`, `tfp_sgmcmc.AMAGOLD`, ...), applied to grad U. The
`from_sgd_momentum` / `from_sgd_parameters` constructors take the same SGD
units as the kernels' classmethods: a learning rate eta applied to grad U.
An SGD learning rate lambda on the *mean* loss, as Keras users know it,
corresponds to eta = lambda / N.

Noise: each step draws its noise from a counter-based stateless seed, (seed,
step count). Unlike an integer seed it differs from step to step; unlike a
`keras.random.SeedGenerator`, it needs no state write inside the
cross-replica update, so under `tf.distribute.MirroredStrategy` every
replica draws the same noise from the same all-reduced gradient and the
replicas' weights stay identical. It compiles under XLA (`jit_compile=True`).

State: the momentum (and the other per-sampler state) are optimizer
variables, created under the model's distribution strategy; the running
moments of the chain's position (`tfp.experimental.stats.RunningVariance`,
updated every transition, in the train step) are too.
"""

import math
import numbers

import keras
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import dynamics
from tfp_sgmcmc.kernels import _common

__all__ = ["SamplerOptimizer", "SGLD", "SGHMC", "SGNHT", "PreconditionedSGLD",
           "AMAGOLD", "check_sampler_options"]

# Optimizer options that change the update away from the sampler's: they
# would bias the chain (or skip updates), so a sampler refuses them.
_BIASING_OPTIONS = {
    "clipnorm": "clipping rescales grad U, so the chain no longer targets "
                "the posterior",
    "clipvalue": "clipping changes grad U, so the chain no longer targets "
                 "the posterior",
    "global_clipnorm": "clipping rescales grad U, so the chain no longer "
                       "targets the posterior",
    "weight_decay": "decoupled weight decay is an extra drift outside the "
                    "posterior; express it as a prior (prior=GaussianPrior("
                    "scale)) instead",
    "use_ema": "an exponential moving average of the weights is not a "
               "posterior sample (SamplingCallback keeps running moments)",
    "ema_momentum": "EMA is not supported on samplers",
    "ema_overwrite_frequency": "EMA is not supported on samplers",
    "gradient_accumulation_steps": "accumulation skips the sampler's update "
                                   "(and its noise) on all but one step in "
                                   "k",
    "loss_scale_factor": "a static loss scale must be a positive, finite "
                         "number",
    "learning_rate": "samplers take `step_size` (or the SGD units of "
                     "`from_sgd_momentum` / `from_sgd_parameters`)",
}
_DEFAULTS = {"use_ema": False, "ema_momentum": 0.99}

# Salts of the counter-based seeds: one independent stream per purpose.
_STEP, _BEGIN, _RESAMPLE, _ACCEPT = 11, 13, 17, 19


def _reject_options(cls_name, kwargs):
  for key, value in kwargs.items():
    if key not in _BIASING_OPTIONS:
      raise TypeError(f"{cls_name}() got an unexpected argument {key!r}.")
    if value is None or (key in _DEFAULTS and value == _DEFAULTS[key]):
      continue
    raise ValueError(f"`{key}={value!r}` is not allowed on the sampler "
                     f"{cls_name}: {_BIASING_OPTIONS[key]}.")


def _check_loss_scale(owner, value):
  if value is None:
    return None
  if (isinstance(value, bool) or not isinstance(value, numbers.Real) or
      not math.isfinite(value) or value <= 0):
    raise ValueError(f"`loss_scale_factor={value!r}` on the sampler {owner}: "
                     f"{_BIASING_OPTIONS['loss_scale_factor']} (a dynamic "
                     "scale, keras.optimizers.LossScaleOptimizer, is not "
                     "supported).")
  return float(value)


def check_sampler_options(optimizer):
  """Raises if options that bias a sampler were set after construction."""
  for key in ("clipnorm", "clipvalue", "global_clipnorm", "weight_decay",
              "gradient_accumulation_steps"):
    value = getattr(optimizer, key, None)
    if value is not None:
      raise ValueError(f"`{key}={value!r}` is set on the sampler "
                       f"{type(optimizer).__name__}: {_BIASING_OPTIONS[key]}.")
  _check_loss_scale(type(optimizer).__name__,
                    getattr(optimizer, "loss_scale_factor", None))
  if getattr(optimizer, "use_ema", False):
    raise ValueError(f"`use_ema=True` is set on the sampler "
                     f"{type(optimizer).__name__}: "
                     f"{_BIASING_OPTIONS['use_ema']}.")


def _check_positive(name, value, allow_zero=False):
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise TypeError(f"`{name}` must be a number; got {value!r}.")
  ok = value >= 0 if allow_zero else value > 0
  if not ok or not math.isfinite(value):
    raise ValueError(f"`{name}` must be {'>= 0' if allow_zero else '> 0'} "
                     f"and finite; got {value!r}.")


def _check_step_size(step_size, allow_schedule):
  if isinstance(step_size, keras.optimizers.schedules.LearningRateSchedule):
    if not allow_schedule:
      raise TypeError("`step_size` must be a constant number for this "
                      "sampler (its integrator keeps a half-drifted position "
                      "between steps); got a schedule.")
    return step_size
  _check_positive("step_size", step_size)
  return float(step_size)


def _read(variable):
  """The value of a Keras or tf variable (the local replica's copy inside a
  distributed update)."""
  if isinstance(variable, keras.Variable):
    variable = variable.value
  return tf.convert_to_tensor(variable)


def _write(variable, value):
  if isinstance(variable, keras.Variable):
    variable = variable.value
  variable.assign(tf.cast(value, variable.dtype))


def _seed(base, salt, counter):
  """A stateless seed for (base seed, purpose, counter)."""
  seed = tf.constant([base, salt], tf.int32)
  return tf.random.experimental.stateless_fold_in(
      seed, tf.cast(counter, tf.int32), alg=dynamics.RNG_ALG)


class SamplerOptimizer(keras.optimizers.Optimizer):
  """Base class: grad U from the Keras gradient, then a `dynamics` update.

  Subclasses implement `_transition(position, gradient, step, step_size,
  seed) -> (new_variable_values, chain_state)`, where `chain_state` is the
  position of the chain after the step (the sample), which can differ from
  what the model's variables hold between steps (a splitting integrator
  keeps them half a drift ahead). They may override `_begin` / `_end`, run
  by `SamplingCallback` before and after the sampling phase of each `fit`.

  Args:
    step_size: the sampler's step size h (epsilon), as in the kernel of the
      same name. Kept in the optimizer's `learning_rate` variable.
    temperature: T, 1 for the posterior.
    seed: an integer; None draws one. Two samplers with the same seed and the
      same data give the same chain.
    name: the optimizer's name.
    loss_scale_factor: None, or a static loss scale for mixed precision
      (the loss is multiplied by it before the float16 backward pass and the
      float32 gradients divided by it before the update; a power of two is
      exact). Dynamic scaling (`LossScaleOptimizer`) is not supported.
  """

  _uses_momentum = False
  _allows_schedule = False

  def __init__(self, step_size, temperature=1., seed=None, name=None,
               **kwargs):
    loss_scale_factor = _check_loss_scale(
        type(self).__name__, kwargs.pop("loss_scale_factor", None))
    _reject_options(type(self).__name__, kwargs)
    step_size = _check_step_size(step_size, self._allows_schedule)
    _check_positive("temperature", temperature)
    if seed is None:
      seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
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

  # --- configuration by SamplingCallback --------------------------------

  def configure(self, num_examples, log_prior_fn, track_moments=True):
    """Sets N and log p(theta); done by `SamplingCallback` before `build`."""
    if self.built:
      raise RuntimeError("configure() must come before build().")
    self._num_examples = int(num_examples)
    self._log_prior_fn = log_prior_fn
    self._track_moments = bool(track_moments)

  @property
  def parameters(self):
    return dict(self._parameters)

  step_size = _common.parameter_property("step_size")
  temperature = _common.parameter_property("temperature")
  seed = _common.parameter_property("seed")

  @property
  def num_examples(self):
    return self._num_examples

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

  def _draw_momentum(self, like, seed, scale):
    return [scale * z for z in dynamics.standard_normal_like(like, seed)]

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
    position = [_read(v) for v in variables]
    dtype = position[0].dtype
    with tf.GradientTape(watch_accessed_variables=False) as tape:
      tape.watch(position)
      log_prior = tf.cast(self._log_prior_fn(position), dtype)
    prior_grads = tape.gradient(
        log_prior, position,
        unconnected_gradients=tf.UnconnectedGradients.ZERO)
    n = tf.constant(self._num_examples, dtype)
    gradient = [n * tf.cast(tf.convert_to_tensor(g), dtype) - pg
                for g, pg in zip(grads, prior_grads)]
    step = tf.cast(_read(self._iterations), tf.int32)
    seed = _seed(self.seed, _STEP, step)
    new_values, chain_state = self._transition(
        variables, position, gradient, step, tf.cast(learning_rate, dtype),
        seed)
    for v, x in zip(variables, new_values):
      _write(v, x)
    if chain_state is not None:
      self._update_moments(variables, chain_state)

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    raise NotImplementedError

  # --- running moments -----------------------------------------------------

  def _update_moments(self, variables, chain_state):
    # The update of tfp.experimental.stats.RunningVariance (Welford's, in
    # the form of its `update`): n' = n + 1, delta = x - mean,
    # mean' = mean + delta / n', ssr' = ssr + n / n' * delta^2. Written out
    # because `RunningVariance.update` goes through an einsum that costs ten
    # times more per step on CPU (3.8 ms against 0.37 ms for 78,400 weights).
    count = _read(self._moment_count)
    if self._track_moments:
      for mean_v, ssr_v, x in zip(
          self._slots(self._moment_mean, variables),
          self._slots(self._moment_ssr, variables), chain_state):
        n = tf.cast(count, x.dtype)
        mean = _read(mean_v)
        delta = x - mean
        _write(mean_v, mean + delta / (n + 1.))
        _write(ssr_v, _read(ssr_v) + n / (n + 1.) * tf.square(delta))
    _write(self._moment_count, count + 1.)

  def running_variance(self):
    """The running moments as `tfp.experimental.stats.RunningVariance`
    objects, one per trainable variable (None if not tracked): over every
    transition since sampling began, not only the kept samples."""
    if not self._track_moments:
      return None
    count = _read(self._moment_count)
    return [tfp.experimental.stats.RunningVariance(
        num_samples=tf.cast(count, m.dtype), mean=_read(m),
        sum_squared_residuals=_read(s), event_ndims=0)
            for m, s in zip(self._moment_mean, self._moment_ssr)]

  def moments(self):
    """(number of transitions, means, variances) of the chain's position,
    over every transition since sampling began (not only the kept ones);
    lists of arrays in the order of the model's trainable variables."""
    count = float(_read(self._moment_count))
    running = self.running_variance()
    if running is None:
      return count, None, None
    return (count, [r.mean.numpy() for r in running],
            [r.variance().numpy() for r in running])

  # --- the sampling phase, driven by SamplingCallback ---------------------

  def begin_sampling(self):
    """Initialises the state at the first call, then prepares the variables
    for the next train step (e.g. a splitting integrator's half drift)."""
    variables = self._trainable_variables
    if not int(_read(self._initialized)):
      self._initialize(variables)
      _write(self._initialized, 1)
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
    return [_read(m) for m in self._momentum]

  @property
  def initialized(self):
    """Whether the sampler's state (momentum, ...) has been drawn."""
    return bool(int(_read(self._initialized)))

  @property
  def step_count(self):
    """Sampler steps (train steps) taken so far."""
    return int(_read(self._iterations))

  def chain_state(self):
    """The chain's current position, one tensor per trainable variable."""
    return [_read(v) for v in self._trainable_variables]

  def log_diagnostics(self):
    """Values for the Keras logs (besides the energy)."""
    return {"step_size": float(_read(self._learning_rate))
            if isinstance(self._learning_rate, keras.Variable)
            else float(self._get_current_learning_rate())}


class SGLD(SamplerOptimizer):
  """Stochastic gradient Langevin dynamics (Welling & Teh 2011) for Keras.

      theta' = theta - h grad U~(theta) + sqrt(2 h T) xi,   xi ~ N(0, I),

  `dynamics.langevin_step`, as `tfp_sgmcmc.SGLD`. The step size may be a
  `keras.optimizers.schedules.LearningRateSchedule` (e.g. a polynomial decay
  h_l = a (b + l)^-gamma), evaluated at the sampler's step count.

  Args:
    step_size: h > 0, or a schedule.
    temperature, seed, name: see `SamplerOptimizer`.
  """

  _allows_schedule = True

  def __init__(self, step_size, temperature=1., seed=None, name=None,
               **kwargs):
    super().__init__(step_size, temperature=temperature, seed=seed,
                     name=name, **kwargs)

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    noise = dynamics.standard_normal_like(position, seed)
    new = dynamics.langevin_step(position, gradient, step_size, noise,
                                 self.temperature)
    return new, new


class PreconditionedSGLD(SamplerOptimizer):
  """Preconditioned SGLD (Li et al. 2016) for Keras.

  The update of `tfp_sgmcmc.PreconditionedSGLD`:

      V'     = alpha V + (1 - alpha) g_bar * g_bar,   g_bar = grad U~ / N
      G      = 1 / (lambda + sqrt(V'))
      theta' = theta - h G grad U~(theta) + sqrt(2 h T G) xi

  (`dynamics.rmsprop_preconditioner`, `dynamics.preconditioned_langevin_step`;
  the Gamma term is dropped, as in the kernel.) The first step starts V at
  g_bar^2.

  Args:
    step_size: h > 0, or a schedule.
    decay: alpha in [0, 1).
    regularizer: lambda > 0.
    temperature, seed, name: see `SamplerOptimizer`.
  """

  _allows_schedule = True

  def __init__(self, step_size, decay=0.99, regularizer=1e-5, temperature=1.,
               seed=None, name=None, **kwargs):
    super().__init__(step_size, temperature=temperature, seed=seed,
                     name=name, **kwargs)
    if not 0. <= float(decay) < 1.:
      raise ValueError(f"`decay` (alpha) must be in [0, 1); got {decay!r}.")
    _check_positive("regularizer", regularizer)
    self._parameters.update(dict(decay=float(decay),
                            regularizer=float(regularizer)))

  def _build_state(self, variables):
    self._second_moment = self.add_optimizer_variables(variables,
                                                       "second_moment")

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    slots = self._slots(self._second_moment, variables)
    dtype = position[0].dtype
    decay = tf.where(tf.equal(step, 0), tf.constant(0., dtype),
                     tf.constant(self._parameters["decay"], dtype))
    second_moment, precond = dynamics.rmsprop_preconditioner(
        [_read(s) for s in slots], gradient, decay, self._num_examples,
        self._parameters["regularizer"])
    for s, v in zip(slots, second_moment):
      _write(s, v)
    noise = dynamics.standard_normal_like(position, seed)
    new = dynamics.preconditioned_langevin_step(
        position, gradient, precond, step_size, noise, self.temperature)
    return new, new


class SGHMC(SamplerOptimizer):
  """Stochastic gradient HMC (Chen, Fox & Guestrin 2014) for Keras.

  The update of `tfp_sgmcmc.SGHMC`, one gradient per train step:

  * `"euler"`: r' = r - h grad U~(theta) - h C r + N(0, 2 (C T - B-hat) h),
    theta' = theta + h r' (`dynamics.sghmc_euler_momentum`, `drift`);
  * `"splitting"` (ABOBA, Chen, Ding & Carin 2015): theta1 = theta + r h/2,
    r' = `dynamics.sghmc_splitting_momentum`(r, grad U~(theta1)),
    theta' = theta1 + r' h/2. The gradient must be taken at theta1, so
    between train steps the model's variables hold theta' + r' h/2 (the
    next step's theta1); `chain_state()` and the kept samples are theta',
    and `SamplingCallback` removes the half drift at the end of `fit`.

  The momentum is drawn from N(0, T I) when sampling starts and, with
  `momentum_resampling_period=m`, again every m steps.

  `SGHMC.from_sgd_momentum(learning_rate=eta, momentum_decay=alpha)` takes
  the SGD-with-momentum units of the kernel's classmethod: eta = h^2,
  alpha = h C, applied to grad U (eta = lambda / N for an SGD learning rate
  lambda on the mean loss).

  Args:
    step_size: h > 0.
    friction: C > 0.
    noise_estimate: B-hat, 0 <= B-hat <= C T (a number; the empirical-Fisher
      estimate of the kernel needs per-example gradients, which a Keras train
      step does not give).
    integrator: "euler" or "splitting".
    momentum_resampling_period: None or an integer m >= 1.
    temperature, seed, name: see `SamplerOptimizer`.
  """

  _uses_momentum = True

  def __init__(self, step_size, friction, noise_estimate=0.,
               integrator="euler", momentum_resampling_period=None,
               temperature=1., seed=None, name=None, **kwargs):
    super().__init__(step_size, temperature=temperature, seed=seed,
                     name=name, **kwargs)
    _check_positive("friction", friction)
    if isinstance(noise_estimate, str):
      raise ValueError(
          f"`noise_estimate={noise_estimate!r}` is not available in Keras: "
          "it needs per-example gradients. Pass a number B-hat >= 0.")
    _check_positive("noise_estimate", noise_estimate, allow_zero=True)
    if noise_estimate > friction * temperature:
      raise ValueError(
          f"`friction` C = {friction!r} must be >= `noise_estimate` B-hat = "
          f"{noise_estimate!r} (times the temperature): the injected noise "
          "has variance 2 (C T - B-hat) h.")
    if integrator not in ("euler", "splitting"):
      raise ValueError(f"`integrator` must be 'euler' or 'splitting'; got "
                       f"{integrator!r}.")
    if momentum_resampling_period is not None and (
        isinstance(momentum_resampling_period, bool) or
        not isinstance(momentum_resampling_period, (int, np.integer)) or
        momentum_resampling_period < 1):
      raise ValueError("`momentum_resampling_period` must be None or an "
                       f"integer >= 1; got {momentum_resampling_period!r}.")
    self._parameters.update(dict(
        friction=float(friction), noise_estimate=float(noise_estimate),
        integrator=integrator,
        momentum_resampling_period=momentum_resampling_period))

  @classmethod
  def from_sgd_momentum(cls, learning_rate, momentum_decay,
                        noise_estimate=0., **kwargs):
    """SGHMC from SGD-with-momentum units (Chen et al. 2014, Section 3.3).

        v' = v - eta grad U~ - alpha v + N(0, 2 (alpha - beta-hat) eta),
        theta' = theta + v'

    is the Euler form with h = sqrt(eta), C = alpha / sqrt(eta), B-hat =
    beta-hat / sqrt(eta), as `tfp_sgmcmc.SGHMC.from_sgd_momentum`.
    """
    _check_positive("learning_rate", learning_rate)
    _check_positive("momentum_decay", momentum_decay)
    _check_positive("noise_estimate", noise_estimate, allow_zero=True)
    h = math.sqrt(float(learning_rate))
    return cls(step_size=h, friction=float(momentum_decay) / h,
               noise_estimate=float(noise_estimate) / h, **kwargs)

  integrator = _common.parameter_property("integrator")

  def _momentum_draw(self, like, seed):
    return self._draw_momentum(like, seed, math.sqrt(self.temperature))

  def _initialize(self, variables):
    r = self._momentum_draw([_read(v) for v in variables],
                            _seed(self.seed, _BEGIN, 0))
    for slot, value in zip(self._slots(self._momentum, variables), r):
      _write(slot, value)

  def _half_drift(self, variables, sign):
    if self.integrator != "splitting":
      return
    h = float(self.step_size)
    r = [_read(s) for s in self._slots(self._momentum, variables)]
    new = dynamics.drift([_read(v) for v in variables], r, sign * 0.5 * h)
    for v, x in zip(variables, new):
      _write(v, x)

  def _begin(self, variables):
    self._half_drift(variables, 1.)

  def _end(self, variables):
    self._half_drift(variables, -1.)

  def chain_state(self):
    position = [_read(v) for v in self._trainable_variables]
    if self.integrator != "splitting":
      return position
    r = [_read(s) for s in self._momentum]
    return dynamics.drift(position, r, -0.5 * float(self.step_size))

  def _maybe_resample(self, momentum, step):
    """A fresh momentum where `step` is a positive multiple of the period
    (step 0's momentum is drawn when sampling begins)."""
    period = self._parameters["momentum_resampling_period"]
    if period is None:
      return momentum
    return tf.cond(
        tf.equal(step % period, 0) & (step > 0),
        lambda: self._momentum_draw(momentum,
                                    _seed(self.seed, _RESAMPLE, step)),
        lambda: momentum)

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    p = self._parameters
    slots = self._slots(self._momentum, variables)
    momentum = [_read(s) for s in slots]
    noise = dynamics.standard_normal_like(momentum, seed)
    if self.integrator == "euler":
      momentum = self._maybe_resample(momentum, step)
      new_momentum = dynamics.sghmc_euler_momentum(
          momentum, gradient, step_size, p["friction"], noise,
          p["noise_estimate"], self.temperature)
      state = dynamics.drift(position, new_momentum, step_size)
      new_values, next_momentum = state, new_momentum
    else:
      # `position` is theta1 = theta + r h/2 (drifted by the previous step).
      new_momentum = dynamics.sghmc_splitting_momentum(
          momentum, gradient, step_size, p["friction"], noise,
          p["noise_estimate"], self.temperature)
      state = dynamics.drift(position, new_momentum, 0.5 * step_size)
      next_momentum = self._maybe_resample(new_momentum, step + 1)
      new_values = dynamics.drift(state, next_momentum, 0.5 * step_size)
    for s, r in zip(slots, next_momentum):
      _write(s, r)
    return new_values, state


class SGNHT(SamplerOptimizer):
  """Stochastic gradient Nose-Hoover thermostat (Ding et al. 2014) for Keras.

      r'      = r - h xi r - h grad U~(theta) + sqrt(2 A h T) z
      theta'  = theta + h r'
      xi'     = xi + h (r'^T r' / d - T)

  `dynamics.sgnht_step` over all trainable variables at once (d counts every
  weight of the model), as `tfp_sgmcmc.SGNHT`. The momentum is drawn from
  N(0, T I) when sampling starts; the thermostat xi starts at A.

  Args:
    step_size: h > 0.
    diffusion: A >= 0.
    temperature, seed, name: see `SamplerOptimizer`.
  """

  _uses_momentum = True

  def __init__(self, step_size, diffusion=1., temperature=1., seed=None,
               name=None, **kwargs):
    super().__init__(step_size, temperature=temperature, seed=seed,
                     name=name, **kwargs)
    _check_positive("diffusion", diffusion, allow_zero=True)
    self._parameters.update(dict(diffusion=float(diffusion)))

  def _build_state(self, variables):
    self._thermostat = self.add_variable(
        (), dtype=variables[0].dtype, name="thermostat",
        initializer=keras.initializers.Constant(
            self._parameters["diffusion"]))

  def _initialize(self, variables):
    r = self._draw_momentum([_read(v) for v in variables],
                            _seed(self.seed, _BEGIN, 0),
                            math.sqrt(self.temperature))
    for slot, value in zip(self._slots(self._momentum, variables), r):
      _write(slot, value)

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    slots = self._slots(self._momentum, variables)
    momentum = [_read(s) for s in slots]
    noise = dynamics.standard_normal_like(momentum, seed)
    new, new_momentum, thermostat = dynamics.sgnht_step(
        position, momentum, _read(self._thermostat), gradient, step_size,
        noise, self._parameters["diffusion"], self.temperature)
    for s, r in zip(slots, new_momentum):
      _write(s, r)
    _write(self._thermostat, thermostat)
    return new, new

  def log_diagnostics(self):
    logs = super().log_diagnostics()
    logs["thermostat"] = float(_read(self._thermostat))
    return logs


class AMAGOLD(SamplerOptimizer):
  """AMAGOLD (Zhang, Cooper & De Sa 2020) for Keras: stochastic leapfrog
  train steps, and an amortized Metropolis-Hastings test every T steps.

  Each outer step of `tfp_sgmcmc.AMAGOLD`, from (theta, r), with step size
  eps, friction beta and momentum standard deviation sigma, is T train steps:

      theta_0  = theta + 1/2 eps sigma^-2 r      (before the first step)
      step t:  r'  = `dynamics.amagold_momentum`(r, grad U~(theta_t))
               rho += `dynamics.energy_accumulator_increment`(grad, r, r')
               theta_{t+1} = theta_t + eps sigma^-2 r'  (half of it at t = T-1)

  then `SamplingCallback` computes U(theta*) (exactly, over the data set it
  was given, in batches; or on one minibatch for both states,
  `acceptance_energy="minibatch"`) and calls `metropolis_hastings`, which
  accepts with probability min(1, exp(U(theta) - U(theta*) + rho)). On
  rejection theta and the momentum the trajectory started from, negated,
  are restored. With `resample_momentum=True` (reversible AMAGOLD) the
  momentum is then drawn afresh from N(0, sigma^2 I); with False
  (skew-reversible, the authors' BNN setting) it is carried. The next
  trajectory's half drift follows, so the gradient of the next train step is
  taken at theta_0.

  The test is host-side: the train steps run compiled (any
  `steps_per_execution` dividing T), and every T steps the callback runs one
  full-data energy evaluation plus one small compiled function. The chain's
  position between tests (`chain_state()`, the kept samples) is the last
  accepted theta.

  `AMAGOLD.from_sgd_parameters(learning_rate=h, momentum_decay=b,
  num_leapfrog_steps=T)` takes Appendix F's SGD units, as the kernel's
  classmethod: eps = sqrt(h), beta = b / sqrt(h), sigma = 1, h applied to
  grad U (the authors' BNN: h = 5e-4 / N, b = 5e-6, T = 10).

  Args:
    step_size: eps > 0 (constant).
    num_leapfrog_steps: T >= 1, train steps per M-H test.
    friction: beta >= 0.
    momentum_std: sigma > 0.
    resample_momentum: True (reversible) or False (skew-reversible).
    acceptance_energy: "exact" (full-data U, exact chain) or "minibatch"
      (Section 5.2, approximate).
    seed, name: see `SamplerOptimizer`. The temperature is 1.
  """

  _uses_momentum = True

  def __init__(self, step_size, num_leapfrog_steps, friction,
               momentum_std=1., resample_momentum=True,
               acceptance_energy="exact", seed=None, name=None, **kwargs):
    if "temperature" in kwargs:
      raise TypeError("AMAGOLD samples the posterior (temperature 1); it "
                      "takes no `temperature`.")
    super().__init__(step_size, temperature=1., seed=seed, name=name,
                     **kwargs)
    if (isinstance(num_leapfrog_steps, bool) or
        not isinstance(num_leapfrog_steps, (int, np.integer)) or
        num_leapfrog_steps < 1):
      raise ValueError(f"`num_leapfrog_steps` (T) must be an integer >= 1; "
                       f"got {num_leapfrog_steps!r}.")
    _check_positive("friction", friction, allow_zero=True)
    _check_positive("momentum_std", momentum_std)
    if not isinstance(resample_momentum, bool):
      raise TypeError("`resample_momentum` must be True (reversible) or "
                      f"False (skew-reversible); got {resample_momentum!r}.")
    if acceptance_energy not in ("exact", "minibatch"):
      raise ValueError("`acceptance_energy` must be 'exact' or 'minibatch'; "
                       f"got {acceptance_energy!r}.")
    self._parameters.pop("temperature")
    self._parameters.update(dict(
        num_leapfrog_steps=int(num_leapfrog_steps), friction=float(friction),
        momentum_std=float(momentum_std),
        resample_momentum=resample_momentum,
        acceptance_energy=acceptance_energy))
    self._mh_function = None

  @classmethod
  def from_sgd_parameters(cls, learning_rate, momentum_decay,
                          num_leapfrog_steps, **kwargs):
    """AMAGOLD in the SGD units of Appendix F (h, b), as
    `tfp_sgmcmc.AMAGOLD.from_sgd_parameters`: eps = sqrt(h),
    beta = b / sqrt(h), sigma = 1."""
    _check_positive("learning_rate", learning_rate)
    _check_positive("momentum_decay", momentum_decay, allow_zero=True)
    for key in ("momentum_std", "step_size", "friction"):
      if key in kwargs:
        raise TypeError("`from_sgd_parameters` sets `step_size`, `friction` "
                        "and `momentum_std`; do not pass them too.")
    eps = math.sqrt(float(learning_rate))
    return cls(step_size=eps, num_leapfrog_steps=num_leapfrog_steps,
               friction=float(momentum_decay) / eps, momentum_std=1.,
               **kwargs)

  def get_config(self):
    return dict(self._parameters)

  @property
  def temperature(self):
    return 1.

  num_leapfrog_steps = _common.parameter_property("num_leapfrog_steps")
  acceptance_energy = _common.parameter_property("acceptance_energy")
  resample_momentum = _common.parameter_property("resample_momentum")

  def _build_state(self, variables):
    self._start_position = self.add_optimizer_variables(variables,
                                                        "start_position")
    self._start_momentum = self.add_optimizer_variables(variables,
                                                        "start_momentum")
    # The energy and the accumulator in float64: U grows with N, and the
    # test needs differences of order 1.
    self._rho = self.add_variable((), dtype="float64",
                                  name="energy_accumulator")
    self._leapfrog_step = self.add_variable((), dtype="int32",
                                            name="leapfrog_step")
    self._energy = self.add_variable((), dtype="float64", name="energy")
    self._num_tests = self.add_variable((), dtype="int32", name="num_tests")
    self._num_accepted = self.add_variable((), dtype="int32",
                                           name="num_accepted")

  def _drift_scale(self):
    p = self._parameters
    return p["step_size"] / p["momentum_std"] ** 2

  def _initialize(self, variables):
    r = self._draw_momentum([_read(v) for v in variables],
                            _seed(self.seed, _BEGIN, 0),
                            self._parameters["momentum_std"])
    for v, start, slot, r0, value in zip(
        variables, self._slots(self._start_position, variables),
        self._slots(self._momentum, variables),
        self._slots(self._start_momentum, variables), r):
      _write(start, _read(v))
      _write(slot, value)
      _write(r0, value)

  def set_energy(self, energy):
    """Caches U(theta) of the chain's current position (exact test)."""
    _write(self._energy, energy)

  @property
  def energy(self):
    """U of the chain's position (exact test), or the last minibatch
    estimate (minibatch test)."""
    return float(_read(self._energy))

  def _begin(self, variables):
    # theta_0 = theta + 1/2 eps sigma^-2 r: the first gradient's position.
    start = [_read(s) for s in self._slots(self._start_position, variables)]
    r = [_read(s) for s in self._slots(self._start_momentum, variables)]
    for v, x in zip(variables, dynamics.drift(start, r,
                                              0.5 * self._drift_scale())):
      _write(v, x)
    for slot, value in zip(self._slots(self._momentum, variables), r):
      _write(slot, value)
    _write(self._rho, 0.)
    _write(self._leapfrog_step, 0)

  def _end(self, variables):
    # Back to the last accepted position; a partial trajectory is dropped
    # (a decision that depends only on the step count, so the chain stays
    # exact) and the next one restarts from the same (theta, r).
    for v, s in zip(variables, self._slots(self._start_position, variables)):
      _write(v, _read(s))
    for slot, r0 in zip(self._slots(self._momentum, variables),
                        self._slots(self._start_momentum, variables)):
      _write(slot, _read(r0))
    _write(self._rho, 0.)
    _write(self._leapfrog_step, 0)

  def chain_state(self):
    return [_read(s) for s in self._start_position]

  @property
  def leapfrog_step(self):
    """Train steps taken in the current trajectory (T when a test is due)."""
    return int(_read(self._leapfrog_step))

  @property
  def start_position(self):
    """theta, the position the current trajectory started from."""
    return list(self._start_position)

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    p = self._parameters
    slots = self._slots(self._momentum, variables)
    momentum = [_read(s) for s in slots]
    noise = dynamics.standard_normal_like(momentum, seed)
    new_momentum = dynamics.amagold_momentum(
        momentum, gradient, step_size, p["friction"], noise,
        p["momentum_std"])
    rho = _read(self._rho) + tf.cast(dynamics.energy_accumulator_increment(
        gradient, momentum, new_momentum, step_size, p["momentum_std"]),
                                     tf.float64)
    t = _read(self._leapfrog_step)
    scale = step_size / p["momentum_std"] ** 2
    # Full position steps between the kicks, a half step after the last.
    scale = tf.where(t < p["num_leapfrog_steps"] - 1, scale, 0.5 * scale)
    new = dynamics.drift(position, new_momentum, scale)
    for s, r in zip(slots, new_momentum):
      _write(s, r)
    _write(self._rho, rho)
    _write(self._leapfrog_step, t + 1)
    return new, None

  def metropolis_hastings(self, proposed_energy, current_energy=None):
    """The amortized M-H test at the end of a trajectory (eq. (6)).

    log a = U(theta) - U(theta*) + rho. Accept: theta <- theta* (the model's
    variables), r <- r*. Reject: theta and -r0 are restored. Then the
    momentum is resampled (reversible variant), the running moments are
    updated, and the next trajectory's half drift is applied.

    Args:
      proposed_energy: U(theta*) (exact, or a minibatch estimate).
      current_energy: for the minibatch test, U~(theta) on the same
        minibatch; None uses the cached exact U(theta).

    Returns:
      (is_accepted, log_accept_ratio) as tensors.
    """
    if self._mh_function is None:
      self._mh_function = tf.function(self._metropolis_hastings,
                                      autograph=False)
    proposed = tf.cast(proposed_energy, tf.float64)
    current = (tf.cast(current_energy, tf.float64)
               if current_energy is not None else _read(self._energy))
    return self._mh_function(proposed, current)

  def _metropolis_hastings(self, proposed_energy, current_energy):
    p = self._parameters
    variables = self._trainable_variables
    dtype = proposed_energy.dtype
    count = _read(self._num_tests)
    log_accept_ratio = current_energy - proposed_energy + _read(self._rho)
    log_accept_ratio = tf.where(tf.math.is_finite(log_accept_ratio),
                                log_accept_ratio,
                                tf.constant(-np.inf, dtype))
    uniform = tf.random.stateless_uniform(
        [], seed=_seed(self.seed, _ACCEPT, count), dtype=dtype,
        alg=dynamics.RNG_ALG)
    accepted = tf.math.log(uniform) < log_accept_ratio

    proposed = [_read(v) for v in variables]
    start = [_read(s) for s in self._start_position]
    position = [tf.where(accepted, a, b) for a, b in zip(proposed, start)]
    momentum = [tf.where(accepted, _read(r), -_read(r0))
                for r, r0 in zip(self._momentum, self._start_momentum)]
    if p["resample_momentum"]:
      momentum = self._draw_momentum(
          momentum, _seed(self.seed, _RESAMPLE, count), p["momentum_std"])
    for s, x in zip(self._start_position, position):
      _write(s, x)
    for r, r0, x in zip(self._momentum, self._start_momentum, momentum):
      _write(r, x)
      _write(r0, x)
    _write(self._energy,
           tf.where(accepted, proposed_energy, current_energy))
    _write(self._rho, 0.)
    _write(self._leapfrog_step, 0)
    _write(self._num_tests, count + 1)
    _write(self._num_accepted,
           _read(self._num_accepted) + tf.cast(accepted, tf.int32))
    self._update_moments(variables, position)
    for v, x in zip(variables, dynamics.drift(position, momentum,
                                              0.5 * self._drift_scale())):
      _write(v, x)
    return accepted, log_accept_ratio

  @property
  def acceptance_rate(self):
    """Accepted / tested trajectories since sampling began."""
    tests = int(_read(self._num_tests))
    return float(_read(self._num_accepted)) / tests if tests else math.nan
