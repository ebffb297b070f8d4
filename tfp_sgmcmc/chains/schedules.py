"""Step-size schedules and the step-size-weighted averages they call for.

A schedule is a callable `step_count -> step size` (`step_count` an int32
scalar tensor counting from 0). Kernels accept a schedule wherever they
accept a step size; the value used at each step is reported in the kernel
results' `step_size`, so it can be traced and used for weighted averages.
"""

import tensorflow as tf

import math

__all__ = ["PolynomialDecay", "CyclicalSchedule", "step_size_weighted_mean"]


def _number(owner, name, value):
  """A finite Python float from a number (not a string, bool or None)."""
  if isinstance(value, (str, bytes, bool)) or value is None:
    raise TypeError(f"{owner} `{name}` must be a number; got {value!r} of "
                    f"type {type(value).__name__}.")
  try:
    v = float(value)
  except (TypeError, ValueError):
    raise TypeError(f"{owner} `{name}` must be a number; got "
                    f"{value!r}.") from None
  if not math.isfinite(v):
    raise ValueError(f"{owner} `{name}` must be finite; got {value!r}.")
  return v


def _integer(owner, name, value):
  v = _number(owner, name, value)
  if v != int(v):
    raise TypeError(f"{owner} `{name}` must be an integer; got {value!r}.")
  return int(v)


class PolynomialDecay:
  """h_l = a (b + l)^(-gamma), the decreasing step size of SGLD.

  Welling & Teh (2011) require sum h_l = inf and sum h_l^2 < inf, i.e.
  0.5 < gamma <= 1; Chen, Ding & Carin (2015) show any 0 < gamma < 1 gives
  consistent step-size-weighted averages (Corollary 6), with optimal rates
  gamma = 1/3 (bias) and 1/5 (MSE) for a 2nd-order integrator.

  Args:
    a: scale, > 0.
    b: offset, >= 0 (with b = 0 the first step uses l = 1).
    gamma: decay exponent, in (0, 1].

  Returns:
    A schedule: `schedule(step_count, dtype=tf.float32)` returns h_l at
    l = `step_count` (l + 1 when b = 0). Pass it as a kernel's `step_size`.

  Raises:
    TypeError: an argument is not a number.
    ValueError: a, b or gamma outside its range.

  #### Example

  SGLD with a decreasing step size, and the step-size-weighted posterior
  mean it calls for:

  ```python
  schedule = tfp_sgmcmc.PolynomialDecay(a=4e-3, b=100., gamma=0.55)
  print(float(schedule(0)), float(schedule(900)))   # 3.2e-4, 9.0e-5
  kernel = tfp_sgmcmc.SGLD(target, step_size=schedule)
  samples, h = tf.function(lambda: tfp.mcmc.sample_chain(
      500, tf.zeros([4, d]), kernel=kernel, num_burnin_steps=100,
      trace_fn=lambda _, r: r.step_size, seed=[0, 1]), jit_compile=True)()
  print(tfp_sgmcmc.step_size_weighted_mean(samples, h))   # per chain
  ```
  """

  def __init__(self, a, b=0., gamma=0.55):
    for name, value, lower, strict in (("a", a, 0., True),
                                       ("b", b, 0., False),
                                       ("gamma", gamma, 0., True)):
      v = _number("PolynomialDecay", name, value)
      if not (v > lower if strict else v >= lower) or v != v:
        raise ValueError(f"PolynomialDecay `{name}` must be "
                         f"{'>' if strict else '>='} {lower}; got {value!r}.")
    if float(gamma) > 1.:
      raise ValueError(
          f"PolynomialDecay `gamma` must be in (0, 1]; got {gamma!r}: with "
          "gamma > 1 the step sizes sum to a finite total, so the chain "
          "stops moving (Welling & Teh need sum h_l = infinity; use e.g. "
          "gamma=0.55).")
    self.a, self.b, self.gamma = float(a), float(b), float(gamma)

  def __call__(self, step_count, dtype=tf.float32):
    l = tf.cast(step_count, dtype)
    if self.b == 0.:
      l = l + 1.  # h_0 would be infinite.
    return tf.constant(self.a, dtype) * tf.pow(
        tf.constant(self.b, dtype) + l, tf.constant(-self.gamma, dtype))

  def __repr__(self):
    return f"PolynomialDecay(a={self.a}, b={self.b}, gamma={self.gamma})"


class CyclicalSchedule:
  """The cyclical step size of cSG-MCMC (Zhang et al. 2020).

  With K = `num_steps` split into M = `num_cycles` cycles of length
  L = ceil(K / M),

      h_k = h_0 / 2 * (cos(pi * mod(k, L) / L) + 1),

  restarting at h_0 at each cycle. The first `exploration_fraction` of each
  cycle is the exploration phase: kernels given this schedule inject no noise
  there (they follow the stochastic gradient, an optimiser), and sample in the
  rest of the cycle. `is_sampling(k)` tells which draws to keep; averages
  over the sampling phases may be weighted by h_k
  (`step_size_weighted_mean`).

  Args:
    initial_step_size: h_0 > 0.
    num_steps: K, total number of steps the chain will take.
    num_cycles: M >= 1.
    exploration_fraction: beta in [0, 1), the fraction of each cycle without
      noise.

  Returns:
    A schedule: `schedule(k, dtype=tf.float32)` returns h_k;
    `schedule.is_sampling(k)` is True in the sampling phase, and
    `schedule.noise_scale(k)` (0 or 1) scales the injected noise's
    temperature. Pass it as a kernel's `step_size`.

  Raises:
    TypeError: an argument is not a number (or not an integer).
    ValueError: an argument outside its range, or more cycles than steps.

  #### Example

  Four cycles of 100 steps; keep the draws of the sampling phases (draw k
  of a chain without burn-in was made at step count k):

  ```python
  schedule = tfp_sgmcmc.CyclicalSchedule(4e-3, num_steps=400, num_cycles=4)
  kernel = tfp_sgmcmc.SGLD(target, step_size=schedule)
  samples = tf.function(lambda: tfp.mcmc.sample_chain(
      400, tf.zeros([d]), kernel=kernel, trace_fn=None, seed=[0, 1]),
      jit_compile=True)()
  kept = tf.boolean_mask(samples, schedule.is_sampling(tf.range(400)))
  print(kept.shape)   # (200, 2)
  ```
  """

  def __init__(self, initial_step_size, num_steps, num_cycles,
               exploration_fraction=0.5):
    _number("CyclicalSchedule", "initial_step_size", initial_step_size)
    _integer("CyclicalSchedule", "num_steps", num_steps)
    _integer("CyclicalSchedule", "num_cycles", num_cycles)
    _number("CyclicalSchedule", "exploration_fraction", exploration_fraction)
    if not float(initial_step_size) > 0:
      raise ValueError(f"CyclicalSchedule `initial_step_size` must be > 0; "
                       f"got {initial_step_size!r}.")
    if int(num_cycles) < 1 or int(num_steps) < int(num_cycles):
      raise ValueError(f"CyclicalSchedule needs 1 <= `num_cycles` <= "
                       f"`num_steps`; got num_cycles={num_cycles!r}, "
                       f"num_steps={num_steps!r}.")
    if not 0. <= float(exploration_fraction) < 1.:
      raise ValueError("CyclicalSchedule `exploration_fraction` must be in "
                       f"[0, 1); got {exploration_fraction!r}.")
    self.initial_step_size = float(initial_step_size)
    self.num_steps, self.num_cycles = int(num_steps), int(num_cycles)
    self.cycle_length = int(math.ceil(self.num_steps / self.num_cycles))
    self.exploration_fraction = float(exploration_fraction)

  def _phase(self, step_count, dtype):
    k = tf.math.floormod(tf.cast(step_count, tf.int32), self.cycle_length)
    return tf.cast(k, dtype) / tf.constant(self.cycle_length, dtype)

  def __call__(self, step_count, dtype=tf.float32):
    phase = self._phase(step_count, dtype)
    return tf.constant(self.initial_step_size / 2., dtype) * (
        tf.cos(tf.constant(math.pi, dtype) * phase) + 1.)

  def is_sampling(self, step_count):
    """True in the sampling phase of a cycle."""
    return self._phase(step_count, tf.float32) >= self.exploration_fraction

  def noise_scale(self, step_count, dtype=tf.float32):
    """Multiplies the temperature of the injected noise: 0 while exploring."""
    return tf.cast(self.is_sampling(step_count), dtype)

  def __repr__(self):
    return (f"CyclicalSchedule(initial_step_size={self.initial_step_size}, "
            f"num_steps={self.num_steps}, num_cycles={self.num_cycles}, "
            f"exploration_fraction={self.exploration_fraction})")


def step_size_weighted_mean(samples, step_sizes, axis=0):
  """sum_l h_l phi(theta_l) / sum_l h_l (Welling & Teh 2011; Chen et al. 2015).

  Args:
    samples: tensor of draws with the draw axis at `axis`, or a structure.
    step_sizes: the h_l of each draw (shape [num_draws]), e.g. traced from
      the kernel results' `step_size`.
    axis: the draw axis of `samples`.

  Returns:
    The weighted mean, in the structure of `samples`, with `axis` reduced.

  Raises:
    ValueError: `step_sizes` does not hold one value per draw.

  #### Example

  ```python
  samples = tf.constant([[0.], [1.], [2.]])   # 3 draws of one coordinate
  h = tf.constant([3., 2., 1.])
  print(tfp_sgmcmc.step_size_weighted_mean(samples, h))   # [0.6667]
  ```
  """
  def weighted(x):
    x = tf.convert_to_tensor(x)
    w = tf.cast(step_sizes, x.dtype)
    if (w.shape.rank is not None and x.shape.rank is not None and
        w.shape.num_elements() is not None and
        x.shape[axis] is not None and
        (w.shape.rank != 1 or w.shape[0] != x.shape[axis])):
      raise ValueError(
          f"`step_sizes` has shape {list(w.shape)} but `samples` has "
          f"{x.shape[axis]} draws along axis {axis}: pass one step size per "
          "draw (shape [num_draws]), traced from the same run.")
    shape = [1] * x.shape.rank
    shape[axis] = -1
    w = tf.reshape(w, shape)
    return tf.reduce_sum(w * x, axis=axis) / tf.reduce_sum(w)
  return tf.nest.map_structure(weighted, samples)
