"""SGHMC and SGNHT as Keras samplers: samplers with a momentum."""

import keras

from tfp_sgmcmc import arguments
from tfp_sgmcmc.keras.samplers import base
from tfp_sgmcmc.dynamics import hamiltonian

__all__ = ["SGHMC", "SGNHT"]


class SGHMC(base.SamplerOptimizer):
  """Stochastic gradient HMC (Chen, Fox & Guestrin 2014) for Keras.

  Each train step is the update of `tfp_sgmcmc.SGHMC.one_step`
  (`tfp_sgmcmc.dynamics.hamiltonian.sghmc_update`) with the Keras gradient,
  grad U~ = N grad(batch mean of the loss) - grad log p(theta):

  * `"euler"`: r' = r - h grad U~(theta) - h C r + N(0, 2 (C T - B-hat) h),
    theta' = theta + h r';
  * `"splitting"` (ABOBA, Chen, Ding & Carin 2015): theta1 = theta + r h/2,
    r' = B-O-B(r, grad U~(theta1)), theta' = theta1 + r' h/2. The gradient
    is taken at theta1, so between train steps the model's variables hold
    the next step's theta1 (`dynamics.hamiltonian.gradient_position`);
    `chain_state()` and the kept samples are theta', and `SamplingCallback`
    removes the half drift at the end of `fit`.

  The momentum refresh (N(0, T I) at step 0 and, with
  `momentum_resampling_period=m`, every m steps) is the kernel's: the
  Euler update folds it into its noise (`dynamics.hamiltonian.sghmc_update`), and
  the splitting integrator draws it (`dynamics.hamiltonian.refresh_momentum`) from
  the same step seed one step ahead, so that its half drift can precede the
  gradient.

  `SGHMC.from_sgd_momentum(learning_rate=eta, momentum_decay=alpha)` takes
  the SGD-with-momentum units of the kernel's classmethod
  (`dynamics.hamiltonian.sgd_momentum_to_sghmc`: eta = h^2, alpha = h C), applied
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
    temperature, seed, name, **kwargs: see `SamplerOptimizer`.

  #### Example

  ```python
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd",
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampler = sgk.SGHMC(step_size=1e-2, friction=10., integrator="splitting",
                      seed=1)
  sampling = sgk.SamplingCallback(sampler, num_examples=len(x), prior=1.,
                                  thinning=8)
  model.fit(x, y, batch_size=32, epochs=2, callbacks=[sampling], verbose=0)
  print(sampling.posterior.num_samples)  # 8: 64 train steps / 8
  ```
  """

  _uses_momentum = True

  def __init__(self, step_size, friction, noise_estimate=0.,
               integrator="euler", momentum_resampling_period=None,
               temperature=1., seed=None, name=None, **kwargs):
    super().__init__(step_size, temperature=temperature, seed=seed,
                     name=name, **kwargs)
    arguments.check_number("friction", friction)
    if isinstance(noise_estimate, str):
      raise ValueError(
          f"`noise_estimate={noise_estimate!r}` is not available in Keras: "
          "it needs per-example gradients. Pass a number B-hat >= 0.")
    arguments.check_number("noise_estimate", noise_estimate, allow_zero=True)
    hamiltonian.check_sghmc_parameters(friction, noise_estimate, integrator,
                               momentum_resampling_period, temperature)
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
    h, friction, b_hat = hamiltonian.sgd_momentum_to_sghmc(
        learning_rate, momentum_decay, noise_estimate)
    return base.built_from_sgd_units(
        cls(step_size=h, friction=friction, noise_estimate=b_hat, **kwargs),
        "from_sgd_momentum", learning_rate=learning_rate,
        momentum_decay=momentum_decay)

  integrator = arguments.parameter_property("integrator")

  def _refresh(self, momentum, step):
    """The kernel's momentum at the start of step `step`."""
    return hamiltonian.refresh_momentum(
        momentum, step, self._parameters["momentum_resampling_period"],
        self.temperature, self.step_seed(step))

  def _initialize(self, variables):
    if self.integrator != "splitting":
      return  # Euler folds step 0's fresh momentum into its noise.
    slots = self._slots(self._momentum, variables)
    r = self._refresh([base.read(s) for s in slots], 0)
    for slot, value in zip(slots, r):
      base.write(slot, value)

  def _half_drift(self, variables, sign):
    if self.integrator != "splitting":
      return
    h = float(self.step_size)
    r = [base.read(s) for s in self._slots(self._momentum, variables)]
    new = hamiltonian.drift([base.read(v) for v in variables], r, sign * 0.5 * h)
    for v, x in zip(variables, new):
      base.write(v, x)

  def _begin(self, variables):
    self._half_drift(variables, 1.)

  def _end(self, variables):
    self._half_drift(variables, -1.)

  def chain_state(self):
    position = [base.read(v) for v in self._trainable_variables]
    if self.integrator != "splitting":
      return position
    r = [base.read(s) for s in self._momentum]
    return hamiltonian.drift(position, r, -0.5 * float(self.step_size))

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    # The momentum slot holds step `step`'s refreshed momentum and the
    # variables its gradient position (theta, or theta1 for splitting).
    p = self._parameters
    slots = self._slots(self._momentum, variables)
    period = p["momentum_resampling_period"]
    state, new_momentum = hamiltonian.sghmc_update(
        position, [base.read(s) for s in slots], gradient, step_size,
        p["friction"], p["noise_estimate"], self.temperature,
        self.integrator, seed,
        refresh=hamiltonian.is_refresh_step(step, period),
        refresh_temperature=self.temperature)
    if self.integrator == "euler" or period is None:
      # Euler folds each fresh momentum into its step's noise; splitting
      # draws at step 0 only (`_initialize`) without a period.
      next_momentum = new_momentum
    else:
      next_momentum = self._refresh(new_momentum, step + 1)
    new_values = hamiltonian.gradient_position(state, next_momentum, step_size,
                                             self.integrator)
    for s, r in zip(slots, next_momentum):
      base.write(s, r)
    return new_values, state


class SGNHT(base.SamplerOptimizer):
  """Stochastic gradient Nose-Hoover thermostat (Ding et al. 2014) for Keras.

      r'      = r - h xi r - h grad U~(theta) + sqrt(2 A h T) z
      theta'  = theta + h r'
      xi'     = xi + h (r'^T r' / d - T)

  each train step is `tfp_sgmcmc.dynamics.hamiltonian.sgnht_update`, the update of
  `tfp_sgmcmc.SGNHT.one_step`, over all trainable variables at once (d
  counts every weight of the model), with grad U~ = N grad(batch mean of
  the loss) - grad log p(theta). The momentum is drawn from N(0, T I) at
  the first step (folded into that step's noise, as in the kernel); the
  thermostat xi starts at A and is logged as `thermostat`.

  Args:
    step_size: h > 0.
    diffusion: A >= 0.
    temperature, seed, name, **kwargs: see `SamplerOptimizer`.

  #### Example

  ```python
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd",
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampling = sgk.SamplingCallback(sgk.SGNHT(step_size=1e-2, seed=1),
                                  num_examples=len(x), prior=1., thinning=8)
  history = model.fit(x, y, batch_size=32, epochs=2, callbacks=[sampling],
                      verbose=0)
  print(history.history["thermostat"])  # xi at each epoch's end
  ```
  """

  _uses_momentum = True

  def __init__(self, step_size, diffusion=1., temperature=1., seed=None,
               name=None, **kwargs):
    super().__init__(step_size, temperature=temperature, seed=seed,
                     name=name, **kwargs)
    arguments.check_number("diffusion", diffusion, allow_zero=True)
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
    new, new_momentum, thermostat = hamiltonian.sgnht_update(
        position, [base.read(s) for s in slots], base.read(self._thermostat),
        gradient, step, step_size, self._parameters["diffusion"],
        self.temperature, self.temperature, seed)
    for s, r in zip(slots, new_momentum):
      base.write(s, r)
    base.write(self._thermostat, thermostat)
    return new, new

  def log_keys(self):
    return super().log_keys() + ["thermostat"]

  def log_diagnostics(self):
    logs = super().log_diagnostics()
    logs["thermostat"] = float(base.read(self._thermostat))
    return logs
