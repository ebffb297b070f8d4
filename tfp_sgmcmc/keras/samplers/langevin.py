"""SGLD and preconditioned SGLD as Keras samplers."""

from tfp_sgmcmc.keras.samplers import base
from tfp_sgmcmc import arguments
from tfp_sgmcmc.dynamics import langevin

__all__ = ["SGLD", "PreconditionedSGLD"]


class SGLD(base.SamplerOptimizer):
  """Stochastic gradient Langevin dynamics (Welling & Teh 2011) for Keras.

      theta' = theta - h grad U~(theta) + sqrt(2 h T) xi,   xi ~ N(0, I),

  each train step is `tfp_sgmcmc.dynamics.langevin.sgld_update`, the update of
  `tfp_sgmcmc.SGLD.one_step`, with the Keras gradient: grad U~ = N grad(batch
  mean of the loss) - grad log p(theta), so h is the kernel's step size, an
  SGD learning rate lambda on the mean loss being h = lambda / N. The step
  size may be a `keras.optimizers.schedules.LearningRateSchedule` (e.g. a
  polynomial decay h_l = a (b + l)^-gamma), evaluated at the step count.

  Args:
    step_size: h > 0, or a schedule.
    temperature, seed, name, **kwargs: see `SamplerOptimizer`.

  #### Example

  ```python
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd",
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampling = sgk.SamplingCallback(sgk.SGLD(step_size=1e-4, seed=1),
                                  num_examples=len(x), prior=1., thinning=8)
  model.fit(x, y, batch_size=32, epochs=2, callbacks=[sampling], verbose=0)
  print(sampling.posterior.samples[0].shape)  # (8, 2, 1): 64 steps / 8
  ```
  """

  _allows_schedule = True

  def __init__(self, step_size, temperature=1., seed=None, name=None,
               **kwargs):
    super().__init__(step_size, temperature=temperature, seed=seed,
                     name=name, **kwargs)

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    new = langevin.sgld_update(position, gradient, step_size,
                               self.temperature, seed)
    return new, new


class PreconditionedSGLD(base.SamplerOptimizer):
  """Preconditioned SGLD (Li et al. 2016) for Keras.

      V'     = alpha V + (1 - alpha) g_bar * g_bar,   g_bar = grad U~ / N
      G      = 1 / (lambda + sqrt(V'))
      theta' = theta - h G grad U~(theta) + sqrt(2 h T G) xi

  each train step is `tfp_sgmcmc.dynamics.langevin.psgld_update`, the update of
  `tfp_sgmcmc.PreconditionedSGLD.one_step` (the Gamma term is dropped, as
  in the kernel; the first step starts V at g_bar^2), with grad U~ = N
  grad(batch mean of the loss) - grad log p(theta), as in `SGLD`. The
  dropped term biases the chain when V follows the position (a small step,
  full batches): see the kernel's docstring for the measured sds and the
  decay to take.

  Args:
    step_size: h > 0, or a schedule.
    decay: alpha in [0, 1).
    regularizer: lambda > 0.
    temperature, seed, name, **kwargs: see `SamplerOptimizer`.

  #### Example

  One epoch of SGD burn-in, then one epoch of pSGLD:

  ```python
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd",
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampler = sgk.PreconditionedSGLD(step_size=1e-3, decay=0.99, seed=1)
  sampling = sgk.SamplingCallback(sampler, num_examples=len(x), prior=1.,
                                  burnin_epochs=1, thinning=8)
  model.fit(x, y, batch_size=32, epochs=2, callbacks=[sampling], verbose=0)
  print(sampling.posterior.num_samples)  # 4: 32 sampling steps / 8
  ```
  """

  _allows_schedule = True

  def __init__(self, step_size, decay=0.99, regularizer=1e-5, temperature=1.,
               seed=None, name=None, **kwargs):
    super().__init__(step_size, temperature=temperature, seed=seed,
                     name=name, **kwargs)
    arguments.check_number("decay", decay, allow_zero=True)
    arguments.check_number("regularizer", regularizer)
    langevin.check_psgld_parameters(decay, regularizer)
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
    new, second_moment, _ = langevin.psgld_update(
        position, [base.read(s) for s in slots], gradient, step, step_size,
        self.temperature, p["decay"], p["regularizer"], self._num_examples,
        seed)
    for s, v in zip(slots, second_moment):
      base.write(s, v)
    return new, new
