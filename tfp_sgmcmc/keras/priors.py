"""Priors over a Keras model's trainable weights, log p(theta).

A prior here is a callable `log_prior(weights) -> scalar`, where `weights`
is the list of tensors in the order of `model.trainable_variables`. The
sampler differentiates it itself: grad U~ = N grad(mean NLL) - grad log p.
Do not also put the prior in the model (kernel_regularizer, add_loss): the
loss would then carry it N times over. `SamplingCallback` rejects models with
regularizers for that reason.
"""

import math
import numbers

import tensorflow as tf

__all__ = ["GaussianPrior", "FlatPrior", "as_log_prior"]


class GaussianPrior:
  """Independent zero-mean Gaussians on the trainable weights.

      log p(theta) = sum_j [-theta_j^2 / (2 s_j^2) - log(s_j sqrt(2 pi))].

  With `scale_by_fan_in=False` every weight has s_j = `scale`. With True, a
  weight of a variable of rank >= 2 (a Dense or convolution kernel, whose
  last axis indexes the output units) has s_j = scale / sqrt(fan_in), with
  fan_in the product of the other axes, and a bias (rank 1) or scalar has
  s_j = `bias_scale` (default `scale`): the He/LeCun-style prior, under which
  a unit's pre-activation has a variance that does not grow with its number
  of inputs.

  The MAP estimate under this prior is SGD on the mean loss plus the L2
  penalty sum_j theta_j^2 / (2 s_j^2 N) (`l2_coefficients`).

  Args:
    scale: s > 0.
    scale_by_fan_in: divide the scale of kernels by sqrt(fan_in).
    bias_scale: the scale of rank-0/1 variables when `scale_by_fan_in`.

  #### Example

  ```python
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(8),
                            keras.layers.Dense(1)])
  prior = sgk.GaussianPrior(1., scale_by_fan_in=True, bias_scale=10.)
  print(prior.scale_of((8, 1)), prior.scale_of((1,)))  # 1/sqrt(8), 10.0
  print(float(prior(model.trainable_variables)))       # log p(theta)
  print(prior.l2_coefficients([(2, 8)], num_examples=len(x)))  # the MAP's L2
  sampling = sgk.SamplingCallback(sgk.SGLD(step_size=1e-4), num_examples=len(x),
                                  prior=prior)
  ```
  """

  def __init__(self, scale, scale_by_fan_in=False, bias_scale=None):
    _check_scale("scale", scale)
    if bias_scale is not None:
      _check_scale("bias_scale", bias_scale)
    self.scale = float(scale)
    self.scale_by_fan_in = bool(scale_by_fan_in)
    self.bias_scale = None if bias_scale is None else float(bias_scale)

  def scale_of(self, shape):
    """The prior standard deviation of the weights of a variable of `shape`."""
    shape = tuple(int(d) for d in shape)
    if not self.scale_by_fan_in:
      return self.scale
    if len(shape) < 2:
      return self.scale if self.bias_scale is None else self.bias_scale
    return self.scale / math.sqrt(math.prod(shape[:-1]))

  def l2_coefficients(self, shapes, num_examples):
    """Per variable, the Keras L2 coefficient 1 / (2 s^2 N) of the MAP."""
    return [1. / (2. * self.scale_of(s) ** 2 * num_examples) for s in shapes]

  def __call__(self, weights):
    total = 0.
    for w in weights:
      w = tf.convert_to_tensor(w)
      s = tf.constant(self.scale_of(w.shape), w.dtype)
      size = tf.cast(tf.size(w), w.dtype)
      total += (-0.5 * tf.reduce_sum(tf.square(w / s))
                - size * (tf.math.log(s) + 0.5 * math.log(2. * math.pi)))
    return total

  def get_config(self):
    return {"class": "GaussianPrior", "scale": self.scale,
            "scale_by_fan_in": self.scale_by_fan_in,
            "bias_scale": self.bias_scale}

  def __repr__(self):
    extra = (f", scale_by_fan_in=True, bias_scale={self.bias_scale}"
             if self.scale_by_fan_in else "")
    return f"GaussianPrior(scale={self.scale}{extra})"


def _check_scale(name, scale):
  if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not (
      0. < float(scale) < math.inf):
    raise ValueError(f"`{name}` of GaussianPrior must be a number > 0; got "
                     f"{scale!r}.")


class FlatPrior:
  """The improper flat prior, log p(theta) = 0.

  The posterior is then the normalised likelihood, which must be integrable
  (true for a logistic regression on separable-free data, false for most
  neural networks, whose likelihood is flat along many directions).

  Args:
    weights: (of a call; the constructor takes none) the list of trainable
      weights, ignored: the value is 0.

  #### Example

  A logistic regression on data that are not separable:

  ```python
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  model.compile(optimizer="sgd",
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampling = sgk.SamplingCallback(sgk.SGLD(step_size=1e-4), num_examples=len(x),
                                  prior=sgk.FlatPrior())  # log p = 0
  model.fit(x, y, batch_size=32, epochs=1, callbacks=[sampling], verbose=0)
  ```
  """

  def __call__(self, weights):
    del weights
    return tf.constant(0.)

  def get_config(self):
    return {"class": "FlatPrior"}

  def __repr__(self):
    return "FlatPrior()"


def as_log_prior(prior):
  """`prior` as a callable on the list of trainable weights.

  Accepts a positive number (the scale of a `GaussianPrior`), a
  `GaussianPrior` or `FlatPrior`, or any callable `weights -> log p`.
  """
  if isinstance(prior, bool):
    raise TypeError(f"`prior` must be a number (a Gaussian prior scale), a "
                    f"GaussianPrior, a FlatPrior or a callable returning log "
                    f"p(weights); got {prior!r}.")
  if isinstance(prior, numbers.Real):
    return GaussianPrior(prior)
  if prior is None:
    raise ValueError(
        "`prior` is None. Pass a Gaussian prior scale (e.g. prior=1.), "
        "tfp_sgmcmc.keras.GaussianPrior(scale), a callable "
        "`weights -> log p(weights)`, or tfp_sgmcmc.keras.FlatPrior() for an "
        "(improper) flat prior.")
  if callable(prior):
    return prior
  raise TypeError(f"`prior` must be a number (a Gaussian prior scale), a "
                  f"GaussianPrior, a FlatPrior or a callable returning log "
                  f"p(weights); got {type(prior).__name__}.")
