"""Stan's window adaptation of the Keras AMAGOLD's step size and diagonal
mass, driven by its M-H tests (`SamplingCallback(warmup=n)`).

It is `tfp_sgmcmc.chains.window_adaptation`, the adaptation
`tfp_sgmcmc.warm_up` runs, with its state nest in optimizer variables (so a
backup taken inside a window resumes it): after each test `update` (dual
averaging of the step size towards 0.75 and the window's sums of the
chain's position), and at the end of each window of
`tfp_sgmcmc.warmup_windows(n)` `end_window` (after a slow window M^{-1}
becomes its regularised variance; after the first window and every new
mass the dual averaging restarts from its averaged step size) and
`begin_window`. After the n-th test the step size is the averaged one, and
both are frozen. With `adapt_mass=False` there is one window, the step
size's dual averaging alone.
"""

import tensorflow as tf

from tfp_sgmcmc.chains import window_adaptation as adaptation
from tfp_sgmcmc.keras.samplers import base

__all__ = ["WarmupWindows", "WARMUP_ACCEPT_PROB"]

# The warm-up's target acceptance of the M-H test (as `tfp_sgmcmc.warm_up`).
WARMUP_ACCEPT_PROB = 0.75


class WarmupWindows:
  """The window adaptation's state of one sampler and its update after
  each test.

  Args:
    sampler: the `SamplerOptimizer` whose variables hold the state.
    variables: its trainable variables (the chain's position).
    warmup: the `adaptation.WarmupAdaptation` (length, windows, mass).
    inverse_mass: the sampler's M^{-1} variables (None without a mass).
    step_size: the step size the search starts from.
  """

  def __init__(self, sampler, variables, warmup, inverse_mass, step_size):
    self._num_steps = warmup.num_steps
    self.num_adaptation_steps = warmup.num_steps  # As TFP's adaptations.
    windows = warmup.windows or [("fast", warmup.num_steps)]
    ends, end = [], 0
    for kind, steps in windows:
      end += steps
      ends.append((kind, end))
    self._ends = ends
    position = [base.read(v) for v in variables]
    adapt_mass = inverse_mass is not None and bool(warmup.windows)
    self._from_gradients = adapt_mass and warmup.mass_estimate == "gradients"
    initial = adaptation.init(
        position, step_size, batch_ndims=0,
        inverse_mass=([base.read(m) for m in inverse_mass]
                      if inverse_mass is not None else None),
        adapt_mass=adapt_mass)
    # Variables hold no None: no window is (), no mass variables [].
    initial = initial._replace(
        window=initial.window or (),
        inverse_mass=initial.inverse_mass if inverse_mass is not None else [])
    dtype = position[0].dtype
    dual_averaging = adaptation.DualAveragingState(*[
        sampler.add_variable((), dtype=dtype, name=f"warmup_{field}")
        for field in adaptation.DualAveragingState._fields])
    window = ()  # No mass adapted: no window sums.
    if adapt_mass:
      window = adaptation.WindowState(
          *[sampler.add_optimizer_variables(variables, f"warmup_window_{f}")
            for f in adaptation.WindowState._fields[:-1]],
          sampler.add_variable((), dtype=dtype, name="warmup_window_count"))
    self._variables = adaptation.WindowAdaptationState(
        dual_averaging, window,
        list(inverse_mass) if inverse_mass is not None else [])
    if self._from_gradients:  # The windows sum gradients, from zero.
      initial = initial._replace(window=self._begin(position))
    self._write(initial)

  def _begin(self, state):
    """A window begun at the chain's `state` (on zeros for gradients)."""
    return adaptation.begin_window(
        [tf.zeros_like(p) for p in state] if self._from_gradients else state,
        batch_ndims=0)

  def state(self):
    """The adaptation's state nest, read from the variables."""
    return tf.nest.map_structure(base.read, self._variables)

  def _write(self, state):
    tf.nest.map_structure(base.write, self._variables, state)

  def _flags(self, number):
    """(a slow window ends, a window before the last ends) at test
    `number`."""
    def any_of(flags):
      return tf.reduce_any(tf.stack(flags)) if flags else tf.constant(False)
    return (any_of([tf.equal(number, e) for kind, e in self._ends
                    if kind == "slow"]),
            any_of([tf.equal(number, e) for _, e in self._ends
                    if e < self._num_steps]))

  def after_test(self, number, state, log_accept_ratio, step_size,
                 gradient_fn=None, seed=None, momentum=()):
    """After test `number` (1-based) with the chain at `state`: the
    adaptation's update, and the step size of the next test written to the
    variable `step_size` (left as it is once the warm-up is over).

    Args:
      number: the tests made so far, this one included (int32 tensor).
      state: the chain's position after the test, one tensor per weight.
      log_accept_ratio: the test's log acceptance ratio.
      step_size: the sampler's step-size variable.
      gradient_fn: `gradient_fn(weights, seed)`, two independent unbiased
        estimates of grad U at a list of weights, for
        `mass_estimate="gradients"`: evaluated at `state` while adapting.
      seed: the test's step seed, from which `gradient_fn` draws.
      momentum: the momentum variables the next trajectory carries (one
        per weight), rescaled to a new mass: r sqrt(M_new / M_old) keeps
        r / sqrt(M) as it was, where an r drawn under the old mass would
        carry a kinetic energy of the new mass's scale into the next
        trajectory.
    """
    old = self.state()
    gradients = None
    if self._from_gradients:
      if gradient_fn is None:
        raise ValueError(
            "`mass_estimate='gradients'` needs two gradient estimates at "
            "each draw, which SamplingCallback's test over (x, y) "
            "energy_data gives; this test came without it (use "
            "mass_estimate='draws').")
      gradients = tf.cond(
          number <= self._num_steps,
          lambda: [[tf.cast(g, s.dtype) for g, s in zip(estimate, state)]
                   for estimate in gradient_fn(list(state), seed)],
          lambda: [[tf.zeros_like(s) for s in state]] * 2)
    new, _ = adaptation.update(old, state, log_accept_ratio,
                               WARMUP_ACCEPT_PROB, batch_ndims=0,
                               gradients=gradients)
    slow_end, window_end = self._flags(number)
    if new.window:
      variance = (adaptation.gradient_variance(new.window)
                  if self._from_gradients else
                  adaptation.window_variance(new.window))
      new = adaptation.end_window(new, variance, set_mass=slow_end,
                                  restart=window_end)
      new = new._replace(window=tf.nest.map_structure(
          lambda a, b: tf.where(window_end, a, b),
          self._begin(state), new.window))
    else:
      new = adaptation.end_window(new, None, set_mass=False,
                                  restart=window_end)
    adapting = number <= self._num_steps
    new = tf.nest.map_structure(lambda a, b: tf.where(adapting, a, b), new,
                                old)
    for r, before, after in zip(momentum, old.inverse_mass,
                                new.inverse_mass):
      base.write(r, base.read(r) * tf.cast(
          tf.sqrt(before / after), base.read(r).dtype))
    self._write(new)
    final_step, _ = adaptation.final(new)
    current = base.read(step_size)
    base.write(step_size, tf.where(
        number < self._num_steps,
        tf.cast(tf.exp(new.dual_averaging.log_step_size), current.dtype),
        tf.where(adapting, tf.cast(final_step, current.dtype), current)))
