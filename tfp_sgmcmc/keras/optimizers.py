"""SG-MCMC samplers as Keras 3 optimizers: the update rules of the kernels.

Each class here is a `keras.optimizers.Optimizer` whose update is one step of
a stochastic-gradient sampler, computed by the per-gradient step function of
the `tfp.mcmc` kernel of the same name (`kernels.sgld.sgld_update`,
`kernels.sghmc.sghmc_update`, `kernels.amagold.leapfrog_step`, ...), the
code its `one_step` runs. A Keras train step gives the
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

Noise: each step draws its noise as the kernel's `one_step` does from its
seed, with the counter-based stateless seed `step_seed(step)` = (seed, step
count) (for AMAGOLD, one per outer step, split along the trajectory as the
kernel splits it). Unlike an integer seed it differs from step to step; unlike a
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
from tfp_sgmcmc.keras import adaptation as adaptation_lib
from tfp_sgmcmc.kernels import _common
from tfp_sgmcmc.kernels import amagold as amagold_lib
from tfp_sgmcmc.kernels import amortized_mh
from tfp_sgmcmc.kernels import psgld as psgld_lib
from tfp_sgmcmc.kernels import sghmc as sghmc_lib
from tfp_sgmcmc.kernels import sgld as sgld_lib
from tfp_sgmcmc.kernels import sgnht as sgnht_lib

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
_STEP, _BEGIN = 11, 13


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


def _check_step_size(step_size, allow_schedule):
  if isinstance(step_size, keras.optimizers.schedules.LearningRateSchedule):
    if not allow_schedule:
      raise TypeError("`step_size` must be a constant number for this "
                      "sampler (its integrator keeps a half-drifted position "
                      "between steps); got a schedule.")
    return step_size
  _common.check_number("step_size", step_size)
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
    _common.check_number("temperature", temperature)
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
    if step_size_adaptation is not None and not isinstance(self, AMAGOLD):
      raise ValueError(
          "`step_size_adaptation` targets an acceptance rate, which only "
          f"AMAGOLD has (an M-H test); got the sampler "
          f"{type(self).__name__}.")
    self._num_examples = int(num_examples)
    self._log_prior_fn = log_prior_fn
    self._track_moments = bool(track_moments)
    self._step_size_adaptation = step_size_adaptation

  @property
  def parameters(self):
    return dict(self._parameters)

  step_size = _common.parameter_property("step_size")
  temperature = _common.parameter_property("temperature")
  seed = _common.parameter_property("seed")

  @property
  def num_examples(self):
    return self._num_examples

  def step_seed(self, step):
    """The stateless seed of sampler step `step` (a transition; for AMAGOLD
    an outer step, one M-H test): the seed the kernel's `one_step` would
    receive to make the same transition."""
    return _seed(self.seed, _STEP, step)

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
    seed = self.step_seed(step)
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

  each train step is `tfp_sgmcmc.kernels.sgld.sgld_update`, the update of
  `tfp_sgmcmc.SGLD.one_step`, with the Keras gradient. The step size may be
  a `keras.optimizers.schedules.LearningRateSchedule` (e.g. a polynomial
  decay h_l = a (b + l)^-gamma), evaluated at the sampler's step count.

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
    new = sgld_lib.sgld_update(position, gradient, step_size,
                               self.temperature, seed)
    return new, new


class PreconditionedSGLD(SamplerOptimizer):
  """Preconditioned SGLD (Li et al. 2016) for Keras.

      V'     = alpha V + (1 - alpha) g_bar * g_bar,   g_bar = grad U~ / N
      G      = 1 / (lambda + sqrt(V'))
      theta' = theta - h G grad U~(theta) + sqrt(2 h T G) xi

  each train step is `tfp_sgmcmc.kernels.psgld.psgld_update`, the update of
  `tfp_sgmcmc.PreconditionedSGLD.one_step` (the Gamma term is dropped, as
  in the kernel; the first step starts V at g_bar^2).

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
    _common.check_number("decay", decay, allow_zero=True)
    if not 0. <= float(decay) < 1.:
      raise ValueError(f"`decay` (alpha) must be in [0, 1); got {decay!r}.")
    _common.check_number("regularizer", regularizer)
    self._parameters.update(dict(decay=float(decay),
                            regularizer=float(regularizer)))
    self._second_moment = None  # Created by `build`.

  def _build_state(self, variables):
    self._second_moment = self.add_optimizer_variables(variables,
                                                       "second_moment")

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    slots = self._slots(self._second_moment, variables)
    p = self._parameters
    new, second_moment, _ = psgld_lib.psgld_update(
        position, [_read(s) for s in slots], gradient, step, step_size,
        self.temperature, p["decay"], p["regularizer"], self._num_examples,
        seed)
    for s, v in zip(slots, second_moment):
      _write(s, v)
    return new, new


class SGHMC(SamplerOptimizer):
  """Stochastic gradient HMC (Chen, Fox & Guestrin 2014) for Keras.

  Each train step is the update of `tfp_sgmcmc.SGHMC.one_step`
  (`tfp_sgmcmc.kernels.sghmc.sghmc_update`) with the Keras gradient:

  * `"euler"`: r' = r - h grad U~(theta) - h C r + N(0, 2 (C T - B-hat) h),
    theta' = theta + h r';
  * `"splitting"` (ABOBA, Chen, Ding & Carin 2015): theta1 = theta + r h/2,
    r' = B-O-B(r, grad U~(theta1)), theta' = theta1 + r' h/2. The gradient
    is taken at theta1, so between train steps the model's variables hold
    the next step's theta1 (`kernels.sghmc.gradient_position`);
    `chain_state()` and the kept samples are theta', and `SamplingCallback`
    removes the half drift at the end of `fit`.

  The momentum refresh (`kernels.sghmc.refresh_momentum`: N(0, T I) at
  step 0 and, with `momentum_resampling_period=m`, every m steps) is the
  kernel's, drawn from the same step seed one step ahead, so that the
  splitting integrator's half drift can precede the gradient.

  `SGHMC.from_sgd_momentum(learning_rate=eta, momentum_decay=alpha)` takes
  the SGD-with-momentum units of the kernel's classmethod
  (`kernels.sghmc.sgd_momentum_to_sghmc`: eta = h^2, alpha = h C), applied
  to grad U (eta = lambda / N for an SGD learning rate lambda on the mean
  loss).

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
    _common.check_number("friction", friction)
    if isinstance(noise_estimate, str):
      raise ValueError(
          f"`noise_estimate={noise_estimate!r}` is not available in Keras: "
          "it needs per-example gradients. Pass a number B-hat >= 0.")
    _common.check_number("noise_estimate", noise_estimate, allow_zero=True)
    if noise_estimate > friction * temperature:
      raise ValueError(
          f"`friction` C = {friction!r} must be >= `noise_estimate` B-hat = "
          f"{noise_estimate!r} (times the temperature): the injected noise "
          "has variance 2 (C T - B-hat) h.")
    if integrator not in sghmc_lib.INTEGRATORS:
      raise ValueError(f"`integrator` must be one of "
                       f"{sghmc_lib.INTEGRATORS}; got {integrator!r}.")
    if momentum_resampling_period is not None and (
        isinstance(momentum_resampling_period, bool) or
        not isinstance(momentum_resampling_period, (int, np.integer)) or
        momentum_resampling_period < 1):
      raise ValueError("`momentum_resampling_period` must be None or an "
                       f"integer >= 1; got {momentum_resampling_period!r}.")
    self._parameters.update(dict(
        friction=float(friction), noise_estimate=float(noise_estimate),
        integrator=integrator,
        momentum_resampling_period=(
            None if momentum_resampling_period is None
            else int(momentum_resampling_period))))

  @classmethod
  def from_sgd_momentum(cls, learning_rate, momentum_decay,
                        noise_estimate=0., **kwargs):
    """SGHMC from SGD-with-momentum units (Chen et al. 2014, Section 3.3),
    as `tfp_sgmcmc.SGHMC.from_sgd_momentum`."""
    for name, value in (("learning_rate", learning_rate),
                        ("momentum_decay", momentum_decay),
                        ("noise_estimate", noise_estimate)):
      _common.check_number(name, value, allow_zero=True)
    h, friction, b_hat = sghmc_lib.sgd_momentum_to_sghmc(
        learning_rate, momentum_decay, noise_estimate)
    return cls(step_size=h, friction=friction, noise_estimate=b_hat,
               **kwargs)

  integrator = _common.parameter_property("integrator")

  def _refresh(self, momentum, step):
    """The kernel's momentum at the start of step `step`."""
    return sghmc_lib.refresh_momentum(
        momentum, step, self._parameters["momentum_resampling_period"],
        self.temperature, self.step_seed(step))

  def _initialize(self, variables):
    slots = self._slots(self._momentum, variables)
    r = self._refresh([_read(s) for s in slots], 0)
    for slot, value in zip(slots, r):
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

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    # The momentum slot holds step `step`'s refreshed momentum and the
    # variables its gradient position (theta, or theta1 for splitting).
    p = self._parameters
    slots = self._slots(self._momentum, variables)
    state, new_momentum = sghmc_lib.sghmc_update(
        position, [_read(s) for s in slots], gradient, step_size,
        p["friction"], p["noise_estimate"], self.temperature,
        self.integrator, seed)
    if p["momentum_resampling_period"] is None:
      # `refresh_momentum` draws at step 0 only: nothing to do after it.
      next_momentum = new_momentum
    else:
      next_momentum = self._refresh(new_momentum, step + 1)
    new_values = sghmc_lib.gradient_position(state, next_momentum, step_size,
                                             self.integrator)
    for s, r in zip(slots, next_momentum):
      _write(s, r)
    return new_values, state


class SGNHT(SamplerOptimizer):
  """Stochastic gradient Nose-Hoover thermostat (Ding et al. 2014) for Keras.

      r'      = r - h xi r - h grad U~(theta) + sqrt(2 A h T) z
      theta'  = theta + h r'
      xi'     = xi + h (r'^T r' / d - T)

  each train step is `tfp_sgmcmc.kernels.sgnht.sgnht_update`, the update of
  `tfp_sgmcmc.SGNHT.one_step`, over all trainable variables at once (d
  counts every weight of the model). The momentum is drawn from N(0, T I)
  at the first step; the thermostat xi starts at A.

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
    _common.check_number("diffusion", diffusion, allow_zero=True)
    self._parameters.update(dict(diffusion=float(diffusion)))
    self._thermostat = None  # Created by `build`.

  def _build_state(self, variables):
    self._thermostat = self.add_variable(
        (), dtype=variables[0].dtype, name="thermostat",
        initializer=keras.initializers.Constant(
            self._parameters["diffusion"]))

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    slots = self._slots(self._momentum, variables)
    new, new_momentum, thermostat = sgnht_lib.sgnht_update(
        position, [_read(s) for s in slots], _read(self._thermostat),
        gradient, step, step_size, self._parameters["diffusion"],
        self.temperature, self.temperature, seed)
    for s, r in zip(slots, new_momentum):
      _write(s, r)
    _write(self._thermostat, thermostat)
    return new, new

  def log_diagnostics(self):
    logs = super().log_diagnostics()
    logs["thermostat"] = float(_read(self._thermostat))
    return logs


class AMAGOLD(SamplerOptimizer):
  """AMAGOLD (Zhang, Cooper & De Sa 2020) for Keras: one stochastic
  leapfrog step per train step, and the amortized Metropolis-Hastings test
  every T steps.

  The steps are those of `tfp_sgmcmc.AMAGOLD.one_step`, one gradient at a
  time, with the seeds derived as the kernel derives them from the outer
  step's seed:

      start     `kernels.amagold.proposal_start`: r (redrawn if
                `resample_momentum`), theta_0 = theta + 1/2 eps sigma^-2 r
      step t    `kernels.amagold.leapfrog_step`: the momentum kick, the
                energy accumulator rho, the drift (a half drift at t = T-1)
      test      `kernels.amortized_mh.metropolis_hastings_test` on
                U(theta) - U(theta*) + rho, then
                `kernels.amortized_mh.momentum_after_test` (r* if accepted,
                else the previous momentum negated)

  `SamplingCallback` computes U(theta*) (exactly, over the data set it was
  given, in batches; or on one minibatch for both states,
  `acceptance_energy="minibatch"`) and calls `metropolis_hastings`. With
  `resample_momentum=True` (reversible AMAGOLD) each trajectory starts from
  a fresh N(0, sigma^2 I) momentum; with False (skew-reversible, the
  authors' BNN setting) the momentum is carried.

  The train steps run compiled (any `steps_per_execution` dividing T), and
  every T steps the callback runs one full-data energy evaluation plus one
  small compiled function. The chain's position between tests
  (`chain_state()`, the kept samples) is the last accepted theta.

  `AMAGOLD.from_sgd_parameters(learning_rate=h, momentum_decay=b,
  num_leapfrog_steps=T)` takes Appendix F's SGD units, as the kernel's
  classmethod (`kernels.amagold.sgd_parameters_to_amagold`), h applied to
  grad U (the authors' BNN: h = 5e-4 / N, b = 5e-6, T = 10).

  Args:
    step_size: eps > 0 (constant; `SamplingCallback(step_size_adaptation=
      ...)` adapts it).
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
    _common.check_number("friction", friction, allow_zero=True)
    _common.check_number("momentum_std", momentum_std)
    amagold_lib.check_parameters(num_leapfrog_steps, friction, momentum_std,
                                 resample_momentum)
    if acceptance_energy not in amortized_mh.ACCEPTANCE_ENERGIES:
      raise ValueError(f"`acceptance_energy` must be one of "
                       f"{amortized_mh.ACCEPTANCE_ENERGIES}; got "
                       f"{acceptance_energy!r}.")
    self._parameters.pop("temperature")
    self._parameters.update(dict(
        num_leapfrog_steps=int(num_leapfrog_steps), friction=float(friction),
        momentum_std=float(momentum_std),
        resample_momentum=resample_momentum,
        acceptance_energy=acceptance_energy))
    self._mh_function = None
    self._adaptation = None
    self._adaptation_results = None
    self._adaptation_structure = None
    # The chain's state, Keras variables created by `build`.
    self._start_position = None
    self._start_momentum = None
    self._rho = None
    self._leapfrog_step = None
    self._loop_seed = None
    self._energy = None
    self._num_tests = None
    self._num_accepted = None

  @classmethod
  def from_sgd_parameters(cls, learning_rate, momentum_decay,
                          num_leapfrog_steps, **kwargs):
    """AMAGOLD in the SGD units of Appendix F (h, b), as
    `tfp_sgmcmc.AMAGOLD.from_sgd_parameters`: eps = sqrt(h),
    beta = b / sqrt(h), sigma = 1."""
    _common.check_number("learning_rate", learning_rate)
    _common.check_number("momentum_decay", momentum_decay, allow_zero=True)
    eps, friction, sigma = amagold_lib.sgd_parameters_to_amagold(
        learning_rate, momentum_decay, kwargs)
    return cls(step_size=eps, num_leapfrog_steps=num_leapfrog_steps,
               friction=friction, momentum_std=sigma, **kwargs)

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
    self._loop_seed = self.add_variable((2,), dtype="int32",
                                        name="loop_seed")
    self._energy = self.add_variable((), dtype="float64", name="energy")
    self._num_tests = self.add_variable((), dtype="int32", name="num_tests")
    self._num_accepted = self.add_variable((), dtype="int32",
                                           name="num_accepted")
    if self._step_size_adaptation is not None:
      self._adaptation, results = adaptation_lib.build_adaptation(
          self._step_size_adaptation, self._parameters["step_size"],
          variables[0].dtype)
      self._adaptation_results = []
      for i, value in enumerate(tf.nest.flatten(results)):
        value = tf.convert_to_tensor(value)
        variable = self.add_variable(tuple(value.shape), dtype=value.dtype,
                                     name=f"step_size_adaptation_{i}")
        variable.assign(value)
        self._adaptation_results.append(variable)
      self._adaptation_structure = results

  def _current_step_size(self):
    return tf.cast(_read(self._learning_rate), tf.float64)

  def _initialize(self, variables):
    # The carried momentum the first trajectory starts from (used by the
    # skew-reversible variant).
    sigma = self._parameters["momentum_std"]
    r = dynamics.standard_normal_like([_read(v) for v in variables],
                                      _seed(self.seed, _BEGIN, 0))
    for v, start, r0, z in zip(
        variables, self._slots(self._start_position, variables),
        self._slots(self._start_momentum, variables), r):
      _write(start, _read(v))
      _write(r0, sigma * z)

  def _start_trajectory(self, variables):
    """`proposal_start` from the last accepted theta and carried momentum,
    with the seed of the next outer step."""
    p = self._parameters
    start = [_read(s) for s in self._slots(self._start_position, variables)]
    carried = [_read(s) for s in self._slots(self._start_momentum, variables)]
    proposal_seed, _, _ = amortized_mh.test_seeds(
        self.step_seed(_read(self._num_tests)))
    eps = tf.cast(_read(self._learning_rate), start[0].dtype)
    momentum, position, loop_seed = amagold_lib.proposal_start(
        start, carried, eps, p["momentum_std"], p["resample_momentum"],
        proposal_seed)
    for v, x in zip(variables, position):
      _write(v, x)
    for slot, r in zip(self._slots(self._momentum, variables), momentum):
      _write(slot, r)
    _write(self._loop_seed, loop_seed)
    _write(self._rho, 0.)
    _write(self._leapfrog_step, 0)

  def set_energy(self, energy):
    """Caches U(theta) of the chain's current position (exact test)."""
    _write(self._energy, energy)

  @property
  def energy(self):
    """U of the chain's position (exact test), or the last minibatch
    estimate (minibatch test)."""
    return float(_read(self._energy))

  def _begin(self, variables):
    self._start_trajectory(variables)

  def _end(self, variables):
    # Back to the last accepted position; a partial trajectory is dropped
    # (a decision that depends only on the step count, so the chain stays
    # exact) and the next `fit` restarts it with the same seed.
    for v, s in zip(variables, self._slots(self._start_position, variables)):
      _write(v, _read(s))
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
    next_seed, _, noise_seed = amagold_lib.leapfrog_seeds(
        _read(self._loop_seed))
    t = _read(self._leapfrog_step)
    new, new_momentum, rho = amagold_lib.leapfrog_step(
        t, position, [_read(s) for s in slots], _read(self._rho), gradient,
        step_size, p["friction"], p["momentum_std"], p["num_leapfrog_steps"],
        noise_seed)
    for s, r in zip(slots, new_momentum):
      _write(s, r)
    _write(self._rho, rho)
    _write(self._loop_seed, next_seed)
    _write(self._leapfrog_step, t + 1)
    return new, None

  def metropolis_hastings(self, proposed_energy, current_energy=None):
    """The amortized M-H test at the end of a trajectory (eq. (6)).

    log a = U(theta) - U(theta*) + rho. Accept: theta <- theta* (the model's
    variables), r <- r*. Reject: theta is kept and the momentum negated.
    Then the running moments are updated and the next trajectory starts.

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
    variables = self._trainable_variables
    dtype = _read(variables[0]).dtype
    count = _read(self._num_tests)
    _, _, accept_seed = amortized_mh.test_seeds(self.step_seed(count))
    # The energies are summed in float64; their difference (of order one)
    # enters the test in the chain's dtype, as in the kernel.
    accepted, log_accept_ratio = amortized_mh.metropolis_hastings_test(
        tf.cast(current_energy - proposed_energy, dtype), tf.zeros([], dtype),
        tf.cast(_read(self._rho), dtype), accept_seed)
    proposed = [_read(v) for v in variables]
    start = [_read(s) for s in self._start_position]
    position = amortized_mh.choose(accepted, proposed, start)
    carried = amortized_mh.momentum_after_test(
        accepted, [_read(r) for r in self._momentum],
        [_read(r0) for r0 in self._start_momentum])
    for s, x in zip(self._start_position, position):
      _write(s, x)
    for r0, x in zip(self._start_momentum, carried):
      _write(r0, x)
    _write(self._energy,
           tf.where(accepted, proposed_energy, current_energy))
    _write(self._num_tests, count + 1)
    _write(self._num_accepted,
           _read(self._num_accepted) + tf.cast(accepted, tf.int32))
    self._update_moments(variables, position)
    if self._adaptation is not None:
      self._adapt(log_accept_ratio)
    self._start_trajectory(variables)
    return accepted, log_accept_ratio

  def _adapt(self, log_accept_ratio):
    """One step of the TFP adaptation kernel on this test's log ratio;
    the next trajectory runs with its `new_step_size`."""
    results = tf.nest.pack_sequence_as(
        self._adaptation_structure,
        [_read(v) for v in self._adaptation_results])
    _, results = self._adaptation.one_step(log_accept_ratio, results)
    for v, x in zip(self._adaptation_results, tf.nest.flatten(results)):
      _write(v, x)
    _write(self._learning_rate, results.new_step_size)

  @property
  def adapting(self):
    """Whether the step size is still being adapted (False without an
    adaptation, and after its `num_adaptation_steps` tests)."""
    if self._adaptation is None:
      return False
    return int(_read(self._num_tests)) < int(
        self._adaptation.num_adaptation_steps)

  @property
  def acceptance_rate(self):
    """Accepted / tested trajectories since sampling began."""
    tests = int(_read(self._num_tests))
    return float(_read(self._num_accepted)) / tests if tests else math.nan
