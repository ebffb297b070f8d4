"""AMAGOLD as a Keras sampler: one stochastic-leapfrog step per train step,
the amortized M-H test every T steps (run by `SamplingCallback`)."""

import math

import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc.dynamics import acceptance
from tfp_sgmcmc.dynamics import amagold as amagold_lib
from tfp_sgmcmc.keras.samplers import adaptation as adaptation_lib
from tfp_sgmcmc.keras.samplers import base
from tfp_sgmcmc.keras.samplers import mass as mass_lib
from tfp_sgmcmc.keras.samplers import window_adaptation as window_lib

__all__ = ["AMAGOLD"]


class AMAGOLD(mass_lib.DiagonalMass, base.SamplerOptimizer):
  """AMAGOLD (Zhang, Cooper & De Sa 2020) for Keras: one stochastic
  leapfrog step per train step, and the amortized Metropolis-Hastings test
  every T steps.

  The steps are those of `tfp_sgmcmc.AMAGOLD.one_step`, one gradient at a
  time (grad U~ = N grad(batch mean of the loss) - grad log p(theta)), with
  the seeds derived as the kernel derives them from the outer step's seed:

      start     `dynamics.amagold.proposal_start`: r (redrawn if
                `resample_momentum`), theta_0 = theta + 1/2 eps sigma^-2 r
      step t    `dynamics.amagold.leapfrog_step`: the momentum kick, the
                energy accumulator rho, the drift (a half drift at t = T-1)
      test      `dynamics.acceptance.metropolis_hastings_test` on
                U(theta) - U(theta*) + rho, then
                `dynamics.acceptance.momentum_after_test` (r* if accepted,
                else the previous momentum negated)

  The test accepts with probability min(1, exp(U(theta) - U(theta*) + rho));
  in Appendix F's units (v = eps sigma^-2 r, b = eps beta, h = eps^2
  sigma^-2) each train step is

      v' = ((1 - b) v - h grad U~ + 2 sqrt(b h) xi) / (1 + b),
      theta' = theta + v',   rho += 1/2 grad U~^T (v + v').

  `SamplingCallback` computes U(theta*) (exactly, over the data set it was
  given, in batches; or on one minibatch for both states,
  `acceptance_energy="minibatch"`) and calls `metropolis_hastings`. With
  `resample_momentum=True` (reversible AMAGOLD) each trajectory starts from
  a fresh N(0, M) momentum; with False (skew-reversible, the authors' BNN
  setting) the momentum is carried. M is sigma^2 I, or diag(1 /
  `inverse_mass`) with M^{-1} for every sigma^-2 above (the kernel's chain
  with its `diagonal_momentum_distribution`), exact for any fixed M.

  The train steps run compiled (any `steps_per_execution` dividing T), and
  every T steps the callback runs one full-data energy evaluation plus one
  small compiled function. The chain's position between tests
  (`chain_state()`, the kept samples) is the last accepted theta.

  `AMAGOLD.from_sgd_parameters(learning_rate=h, momentum_decay=b,
  num_leapfrog_steps=T)` takes Appendix F's SGD units, as the kernel's
  classmethod (`dynamics.amagold.sgd_parameters_to_amagold`), h applied to
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
    inverse_mass: None (M = sigma^2 I), or M^{-1} > 0: a number, or one
      array per trainable weight shaped like it, e.g. the posterior
      variances (`tfp_sgmcmc.warm_up(...).report.variance`); with
      momentum_std 1. Read it back (or the warm-up's) as `inverse_mass`.
    seed, name, **kwargs: see `SamplerOptimizer`. The temperature is 1.

  #### Example

  The callback needs the training set for the test's energy U; `warmup`
  tunes eps and M over the first 20 tests (use hundreds), then freezes them:

  ```python
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd",
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampler = sgk.AMAGOLD(step_size=1e-3, num_leapfrog_steps=4, friction=1.)
  sampling = sgk.SamplingCallback(sampler, num_examples=len(x), prior=1.,
                                  energy_data=(x, y), warmup=20)
  history = model.fit(x, y, batch_size=32, epochs=3, callbacks=[sampling],
                      verbose=0)
  print(history.history["accept_rate"])  # per epoch, of its 8 M-H tests
  print(history.history["step_size"], sampling.sampler.inverse_mass)
  ```
  """

  _uses_momentum = True
  has_acceptance_test = True

  def __init__(self, step_size, num_leapfrog_steps, friction,
               momentum_std=1., resample_momentum=True,
               acceptance_energy="exact", inverse_mass=None, seed=None,
               name=None, **kwargs):
    if "temperature" in kwargs:
      raise TypeError("AMAGOLD samples the posterior (temperature 1); it "
                      "takes no `temperature`.")
    super().__init__(step_size, temperature=1., seed=seed, name=name,
                     **kwargs)
    arguments.check_number("friction", friction, allow_zero=True)
    arguments.check_number("momentum_std", momentum_std)
    amagold_lib.check_amagold_parameters(num_leapfrog_steps, friction,
                                         momentum_std, resample_momentum)
    acceptance.check_acceptance_energy(acceptance_energy)
    inverse_mass = mass_lib.check_inverse_mass(inverse_mass, momentum_std)
    self._parameters.pop("temperature")
    self._parameters.update(dict(
        num_leapfrog_steps=int(num_leapfrog_steps), friction=float(friction),
        momentum_std=float(momentum_std),
        resample_momentum=resample_momentum,
        acceptance_energy=acceptance_energy, inverse_mass=inverse_mass))
    self._mh_function = None
    self._inverse_mass = None  # M^{-1} variables, when M is not sigma^2 I.
    self._warmup = None  # `SamplingCallback(warmup=n)`'s adaptation.
    self._adaptation = self._adaptation_results = None
    self._adaptation_structure = None
    # The chain's state, Keras variables created by `build`.
    self._start_position = self._start_momentum = self._rho = None
    self._leapfrog_step = self._loop_seed = self._energy = None
    self._num_tests = self._num_accepted = None

  @classmethod
  def from_sgd_parameters(cls, learning_rate, momentum_decay,
                          num_leapfrog_steps, **kwargs):
    """AMAGOLD in the SGD units of Appendix F (h, b), as
    `tfp_sgmcmc.AMAGOLD.from_sgd_parameters`: eps = sqrt(h),
    beta = b / sqrt(h), sigma = 1."""
    eps, friction, sigma = amagold_lib.sgd_parameters_to_amagold(
        learning_rate, momentum_decay, kwargs)
    return base.built_from_sgd_units(
        cls(step_size=eps, num_leapfrog_steps=num_leapfrog_steps,
            friction=friction, momentum_std=sigma, **kwargs),
        "from_sgd_parameters", learning_rate=learning_rate,
        momentum_decay=momentum_decay)

  def get_config(self):
    return dict(self._parameters)

  @property
  def temperature(self):
    return 1.

  num_leapfrog_steps = arguments.parameter_property("num_leapfrog_steps")
  acceptance_energy = arguments.parameter_property("acceptance_energy")
  resample_momentum = arguments.parameter_property("resample_momentum")

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
    adaptation = self._step_size_adaptation
    warmup = isinstance(adaptation, adaptation_lib.WarmupAdaptation)
    self._build_mass(variables, adapted=warmup and bool(adaptation.windows))
    if warmup:
      self._warmup = window_lib.WarmupWindows(
          self, variables, adaptation, self._inverse_mass,
          self._parameters["step_size"])
    elif adaptation is not None:
      self._adaptation, results = adaptation_lib.build_adaptation(
          adaptation, self._parameters["step_size"], variables[0].dtype)
      self._adaptation_results = []
      for i, value in enumerate(tf.nest.flatten(results)):
        value = tf.convert_to_tensor(value)
        variable = self.add_variable(tuple(value.shape), dtype=value.dtype,
                                     name=f"step_size_adaptation_{i}")
        variable.assign(value)
        self._adaptation_results.append(variable)
      self._adaptation_structure = results

  def _current_step_size(self):
    return tf.cast(base.read(self._learning_rate), tf.float64)

  def _initialize(self, variables):
    # The carried momentum the first trajectory starts from (used by the
    # skew-reversible variant).
    r = self._draw_momentum([base.read(v) for v in variables],
                            base.seed_for(self.seed, base.BEGIN, 0))
    for v, start, r0, x in zip(
        variables, self._slots(self._start_position, variables),
        self._slots(self._start_momentum, variables), r):
      base.write(start, base.read(v))
      base.write(r0, x)

  def _start_trajectory(self, variables):
    """`proposal_start` from the last accepted theta and carried momentum,
    with the seed of the next outer step."""
    p = self._parameters
    start = [base.read(s) for s in self._slots(self._start_position, variables)]
    carried = [base.read(s)
               for s in self._slots(self._start_momentum, variables)]
    proposal_seed, _, _ = self.outer_step_seeds()
    eps = tf.cast(base.read(self._learning_rate), start[0].dtype)
    momentum, position, loop_seed = amagold_lib.proposal_start(
        start, carried, eps, p["momentum_std"], p["resample_momentum"],
        proposal_seed, momentum_distribution=self._mass())
    for v, x in zip(variables, position):
      base.write(v, x)
    for slot, r in zip(self._slots(self._momentum, variables), momentum):
      base.write(slot, r)
    base.write(self._loop_seed, loop_seed)
    base.write(self._rho, 0.)
    base.write(self._leapfrog_step, 0)

  def outer_step_seeds(self):
    """(proposal, energy, accept) seeds of the current outer step (the
    trajectory under way, ended by test number `num_tests`): the split of
    its step seed that the kernel's `one_step` makes."""
    return acceptance.test_seeds(self.step_seed(base.read(self._num_tests)))

  def set_energy(self, energy):
    """Caches U(theta) of the chain's current position (exact test)."""
    base.write(self._energy, energy)

  @property
  def energy(self):
    """U of the chain's position (exact test), or the last minibatch
    estimate (minibatch test)."""
    return float(base.read(self._energy))

  def _begin(self, variables):
    self._start_trajectory(variables)

  def _end(self, variables):
    # Back to the last accepted position; a partial trajectory is dropped
    # (a decision that depends only on the step count, so the chain stays
    # exact) and the next `fit` restarts it with the same seed.
    for v, s in zip(variables, self._slots(self._start_position, variables)):
      base.write(v, base.read(s))
    base.write(self._rho, 0.)
    base.write(self._leapfrog_step, 0)

  def chain_state(self):
    return [base.read(s) for s in self._start_position]

  @property
  def leapfrog_step(self):
    """Train steps taken in the current trajectory (T when a test is due)."""
    return int(base.read(self._leapfrog_step))

  @property
  def start_position(self):
    """theta, the position the current trajectory started from."""
    return list(self._start_position)

  def _transition(self, variables, position, gradient, step, step_size,
                  seed):
    p = self._parameters
    slots = self._slots(self._momentum, variables)
    next_seed, _, noise_seed = amagold_lib.leapfrog_seeds(
        base.read(self._loop_seed))
    t = base.read(self._leapfrog_step)
    new, new_momentum, rho = amagold_lib.leapfrog_step(
        t, position, [base.read(s) for s in slots], base.read(self._rho),
        gradient, step_size, p["friction"], p["momentum_std"],
        p["num_leapfrog_steps"], noise_seed,
        momentum_distribution=self._mass())
    for s, r in zip(slots, new_momentum):
      base.write(s, r)
    base.write(self._rho, rho)
    base.write(self._loop_seed, next_seed)
    base.write(self._leapfrog_step, t + 1)
    return new, None

  def log_keys(self):
    keys = super().log_keys() + ["accept_rate"]
    if self.acceptance_energy == "exact":
      keys.append("exact_energy")
    return keys

  def log_diagnostics(self):
    """The step size and, for the exact test, U at the chain's position;
    the callback adds this epoch's `accept_rate`."""
    logs = super().log_diagnostics()
    if self.acceptance_energy == "exact":
      logs["exact_energy"] = self.energy
    return logs

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
    self.check_test_due()
    if self._mh_function is None:
      self._mh_function = tf.function(self._metropolis_hastings,
                                      autograph=False)
    proposed = tf.cast(proposed_energy, tf.float64)
    current = (tf.cast(current_energy, tf.float64)
               if current_energy is not None else base.read(self._energy))
    return self._mh_function(proposed, current)

  def check_test_due(self):
    """Raises unless the trajectory has run its T steps."""
    if self.leapfrog_step != self.num_leapfrog_steps:
      raise RuntimeError(
          f"AMAGOLD's M-H test is due after T={self.num_leapfrog_steps} "
          f"steps but {self.leapfrog_step} steps ran: steps_per_execution "
          "or a partial execution skipped the test.")

  def test_function(self, energy_fn, after_fn, jit_compile=False,
                    gradient_fn=None):
    """`metropolis_hastings` and what goes with it as one compiled call.

    Returns a `tf.function` f(*args) -> (is_accepted, after_fn()):
    `energy_fn(*args)` gives (U(theta*), U~(theta) or None for the cached
    exact U(theta)) at the current state, the test runs on them, then
    `after_fn()` (e.g. a health check) sees the state after the test. Call
    `check_test_due()` first. `gradient_fn(weights, seed)` (two estimates
    of grad U) serves the warm-up's `mass_estimate="gradients"`."""
    def run(*args):
      proposed, current = energy_fn(*args)
      proposed = tf.cast(proposed, tf.float64)
      current = (base.read(self._energy) if current is None
                 else tf.cast(current, tf.float64))
      accepted, _ = self._metropolis_hastings(proposed, current, gradient_fn)
      return accepted, after_fn()
    return tf.function(run, autograph=False, jit_compile=jit_compile,
                       reduce_retracing=True)

  def _metropolis_hastings(self, proposed_energy, current_energy, grad_fn):
    variables = self._trainable_variables
    dtype = base.read(variables[0]).dtype
    count = base.read(self._num_tests)
    _, _, accept_seed = self.outer_step_seeds()
    # The energies are summed in float64; their difference (of order one)
    # enters the test in the chain's dtype, as in the kernel.
    accepted, log_accept_ratio = acceptance.metropolis_hastings_test(
        current_energy, proposed_energy,
        tf.cast(base.read(self._rho), dtype), accept_seed, dtype=dtype)
    outcome = acceptance.after_test(
        accepted,
        [base.read(s) for s in self._start_position],
        [base.read(v) for v in variables],
        current_energy, proposed_energy,
        [base.read(r0) for r0 in self._start_momentum],
        [base.read(r) for r in self._momentum])
    for s, x in zip(self._start_position, outcome.state):
      base.write(s, x)
    for r0, x in zip(self._start_momentum, outcome.momentum):
      base.write(r0, x)
    base.write(self._energy, outcome.energy)
    base.write(self._num_tests, count + 1)
    base.write(self._num_accepted,
           base.read(self._num_accepted) + tf.cast(accepted, tf.int32))
    self._update_moments(variables, outcome.state, self._adapted(count))
    if self._warmup is not None:
      self._warmup.after_test(count + 1, outcome.state, log_accept_ratio,
                              self._learning_rate, grad_fn,
                              self.step_seed(count), self._start_momentum)
    elif self._adaptation is not None:
      self._adapt(log_accept_ratio)
    self._start_trajectory(variables)
    return accepted, log_accept_ratio

  def _adapt(self, log_accept_ratio):
    """One step of the TFP adaptation kernel on this test's log ratio; the
    next trajectory runs with its `new_step_size`."""
    results = tf.nest.pack_sequence_as(
        self._adaptation_structure,
        [base.read(v) for v in self._adaptation_results])
    # A trajectory that overflowed (a NaN or -inf ratio) counts as
    # acceptance 0, as in `tfp_sgmcmc.warm_up`, with a finite ratio kept in
    # the results so that the health check does not see a divergence.
    log_accept_ratio = tf.where(
        tf.math.is_nan(log_accept_ratio) | (log_accept_ratio < 0.) &
        tf.math.is_inf(log_accept_ratio),
        log_accept_ratio.dtype.min, log_accept_ratio)
    _, results = self._adaptation.one_step(log_accept_ratio, results)
    for v, x in zip(self._adaptation_results, tf.nest.flatten(results)):
      base.write(v, x)
    base.write(self._learning_rate, results.new_step_size)

  @property
  def adapting(self):
    """Whether an adaptation (warm-up) has tests left to run."""
    return not self._adapted(int(base.read(self._num_tests)))

  def _adapted(self, tests):
    """Whether `tests` M-H tests leave no adaptation (warm-up) to run:
    the later tests' states are samples, kept and in the moments."""
    adaptation = self._warmup or self._adaptation
    return adaptation is None or tests >= adaptation.num_adaptation_steps

  @property
  def acceptance_rate(self):
    """Accepted / tested trajectories since sampling began."""
    tests = int(base.read(self._num_tests))
    return float(base.read(self._num_accepted)) / tests if tests else math.nan
