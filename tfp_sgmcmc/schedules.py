"""Step-size schedules and the step-size-weighted averages they call for.

A schedule is a callable `step_count -> step size` (`step_count` an int32
scalar tensor counting from 0). Kernels accept a schedule wherever they
accept a step size; the value used at each step is reported in the kernel
results' `step_size`, so it can be traced and used for weighted averages.
"""

import tensorflow as tf

__all__ = ["PolynomialDecay", "step_size_weighted_mean"]


class PolynomialDecay:
  """h_l = a (b + l)^(-gamma), the decreasing step size of SGLD.

  Welling & Teh (2011) require sum h_l = inf and sum h_l^2 < inf, i.e.
  0.5 < gamma <= 1; Chen, Ding & Carin (2015) show any 0 < gamma < 1 gives
  consistent step-size-weighted averages (Corollary 6), with optimal rates
  gamma = 1/3 (bias) and 1/5 (MSE) for a 2nd-order integrator.

  Args:
    a: scale, > 0.
    b: offset, >= 0 (with b = 0 the first step uses l = 1).
    gamma: decay exponent, > 0.
  """

  def __init__(self, a, b=0., gamma=0.55):
    for name, value, lower, strict in (("a", a, 0., True),
                                       ("b", b, 0., False),
                                       ("gamma", gamma, 0., True)):
      v = float(value)
      if not (v > lower if strict else v >= lower) or v != v:
        raise ValueError(f"PolynomialDecay `{name}` must be "
                         f"{'>' if strict else '>='} {lower}; got {value!r}.")
    self.a, self.b, self.gamma = float(a), float(b), float(gamma)

  def __call__(self, step_count, dtype=tf.float32):
    l = tf.cast(step_count, dtype)
    if self.b == 0.:
      l = l + 1.  # h_0 would be infinite.
    return tf.constant(self.a, dtype) * tf.pow(
        tf.constant(self.b, dtype) + l, tf.constant(-self.gamma, dtype))

  def __repr__(self):
    return f"PolynomialDecay(a={self.a}, b={self.b}, gamma={self.gamma})"


def step_size_weighted_mean(samples, step_sizes, axis=0):
  """sum_l h_l phi(theta_l) / sum_l h_l (Welling & Teh 2011; Chen et al. 2015).

  Args:
    samples: tensor of draws with the draw axis at `axis`, or a structure.
    step_sizes: the h_l of each draw (shape [num_draws]), e.g. traced from
      the kernel results' `step_size`.
    axis: the draw axis of `samples`.
  """
  def weighted(x):
    x = tf.convert_to_tensor(x)
    w = tf.cast(step_sizes, x.dtype)
    shape = [1] * x.shape.rank
    shape[axis] = -1
    w = tf.reshape(w, shape)
    return tf.reduce_sum(w * x, axis=axis) / tf.reduce_sum(w)
  return tf.nest.map_structure(weighted, samples)
