"""Langevin dynamics: SGLD (Welling & Teh 2011) and preconditioned SGLD
(Li et al. 2016), and the Gaussian move's proposal ratio (MALA's).

`sgld_update` and `psgld_update` are one whole step each (the noise drawn
inside from the step's seed), called by the `tfp.mcmc` kernels and the
Keras samplers alike; the other functions are their pieces.
"""

import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, broadcast_structure, sum_event

__all__ = ["langevin_step", "preconditioned_langevin_step",
           "rmsprop_preconditioner", "langevin_log_proposal_ratio",
           "sgld_update", "psgld_update", "check_psgld_parameters"]


def langevin_step(position, gradient, step_size, noise, temperature=1.):
  """SGLD (Welling & Teh 2011): one Euler-Maruyama step of Langevin dynamics.

      theta' = theta - h grad U~(theta) + sqrt(2 h T) xi,   xi ~ N(0, I).

  (Welling & Teh write the step as epsilon / 2 with noise N(0, epsilon); here
  h = epsilon / 2.)

  Args:
    position: theta, a structure of tensors.
    gradient: grad U~(theta), same structure.
    step_size: h, a scalar or a structure broadcastable against `position`.
    noise: standard-normal draws xi, same structure.
    temperature: T.

  Returns:
    theta', the same structure as `position`.

  ```python
  new = tfp_sgmcmc.dynamics.langevin_step(
      tf.zeros([2]), tf.ones([2]), step_size=0.1, noise=tf.zeros([2]))
  print(new.numpy())  # [-0.1 -0.1]: no noise, a gradient step
  ```
  """
  def step(theta, g, xi, h):
    h = as_dtype(h, theta.dtype)
    t = as_dtype(temperature, theta.dtype)
    return theta - h * g + tf.sqrt(2. * h * t) * xi
  return tf.nest.map_structure(step, position, gradient, noise,
                               broadcast_structure(step_size, position))


def rmsprop_preconditioner(second_moment, gradient, decay, num_examples,
                           regularizer):
  """pSGLD's diagonal preconditioner (Li et al. 2016).

      V' = alpha V + (1 - alpha) g_bar * g_bar,   g_bar = grad U~ / N
      G  = 1 / (lambda + sqrt(V'))

  Scaling the gradient by 1/N makes V independent of the data size, as in
  the paper.

  Args:
    second_moment: V, the running average of g_bar^2, a structure of tensors.
    gradient: grad U~, same structure.
    decay: alpha in [0, 1).
    num_examples: N, the data size.
    regularizer: lambda > 0.

  Returns:
    (V', G), each the same structure as `gradient`.

  ```python
  v, g = tfp_sgmcmc.dynamics.rmsprop_preconditioner(
      tf.zeros([2]), tf.fill([2], 10.), decay=0.9, num_examples=10,
      regularizer=1e-5)
  print(v.numpy(), g.numpy())  # V' = 0.1, G = 1 / sqrt(0.1)
  ```
  """
  def update(v, g):
    g_bar = g / tf.cast(num_examples, g.dtype)
    return as_dtype(decay, g.dtype) * v + (1. - as_dtype(decay, g.dtype)) * (
        g_bar * g_bar)
  new_v = tf.nest.map_structure(update, second_moment, gradient)
  precond = tf.nest.map_structure(
      lambda v: 1. / (as_dtype(regularizer, v.dtype) + tf.sqrt(v)), new_v)
  return new_v, precond


def preconditioned_langevin_step(position, gradient, preconditioner,
                                 step_size, noise, temperature=1.):
  """pSGLD without the Gamma term (Li et al. 2016, Algorithm 1):

      theta' = theta - h G grad U~(theta) + sqrt(2 h T G) xi.

  The Gamma(theta) correction (derivatives of G) is dropped, as in the
  paper's experiments (the term costs a second derivative); the bias is
  small only while the chain travels far within V's window of about
  1 / (1 - alpha) steps (`tfp_sgmcmc.PreconditionedSGLD` has the numbers).

  Args:
    position: theta, a structure of tensors.
    gradient: grad U~(theta), same structure.
    preconditioner: G (`rmsprop_preconditioner`), same structure.
    step_size: h, a scalar or a structure broadcastable against `position`.
    noise: standard-normal draws xi, same structure.
    temperature: T.

  Returns:
    theta', the same structure as `position`.

  ```python
  new = tfp_sgmcmc.dynamics.preconditioned_langevin_step(
      tf.zeros([2]), tf.ones([2]), preconditioner=tf.fill([2], 2.),
      step_size=0.1, noise=tf.zeros([2]))
  print(new.numpy())  # [-0.2 -0.2]
  ```
  """
  def step(theta, g, p, xi, h):
    h = as_dtype(h, theta.dtype)
    t = as_dtype(temperature, theta.dtype)
    return theta - h * p * g + tf.sqrt(2. * h * t * p) * xi
  return tf.nest.map_structure(step, position, gradient, preconditioner,
                               noise, broadcast_structure(step_size,
                                                          position))


def langevin_log_proposal_ratio(position, new_position, gradient,
                                new_gradient, step_size, temperature=1.,
                                batch_ndims=0):
  """log q(y -> x) - log q(x -> y) for one Langevin (`langevin_step`) move.

  The move x -> y is Gaussian, q(x -> y) = N(y; x - h grad U(x), 2 h T I),
  so

      log q(y -> x) / q(x -> y)
          = (|y - x + h grad U(x)|^2 - |x - y + h grad U(y)|^2) / (4 h T),

  summed over every coordinate of every part, one value per chain. With
  exact gradients this is MALA's correction (Roberts & Tweedie 1996):
  `tfp.mcmc.MetropolisHastings(SGLD(target_log_prob_fn=...))` is MALA.

  Args:
    position: x, a structure of tensors.
    new_position: y, same structure.
    gradient: grad U(x), same structure.
    new_gradient: grad U(y), same structure.
    step_size: h, a scalar or one per part (same structure).
    temperature: T.
    batch_ndims: number of leading chain axes of each part.

  Returns:
    The log ratio, a tensor of the chain batch shape.

  ```python
  x, y = tf.zeros([3, 2]), tf.ones([3, 2])  # 3 chains, U = |theta|^2 / 2
  ratio = tfp_sgmcmc.dynamics.langevin_log_proposal_ratio(
      x, y, gradient=x, new_gradient=y, step_size=0.1, batch_ndims=1)
  print(ratio.shape)  # (3,)
  ```
  """
  def term(x, y, g, g_new, h):
    h = as_dtype(h, x.dtype)
    t = as_dtype(temperature, x.dtype)
    forward = tf.square(y - x + h * g)
    reverse = tf.square(x - y + h * g_new)
    return sum_event((forward - reverse) / (4. * h * t), batch_ndims)
  terms = tf.nest.map_structure(term, position, new_position, gradient,
                                new_gradient,
                                broadcast_structure(step_size, position))
  return tf.add_n(tf.nest.flatten(terms))


def sgld_update(position, gradient, step_size, temperature, seed):
  """One SGLD transition given grad U~ at `position`: `langevin_step` with
  its noise drawn from the step's `seed` (the seed `one_step` receives), so
  every front end that supplies the gradient runs the kernel's chain.

      theta' = theta - h grad U~(theta) + sqrt(2 h T) xi,   xi ~ N(0, I).

  Args:
    position: theta, a structure of tensors.
    gradient: grad U~(theta), same structure.
    step_size: h, a scalar or a structure broadcastable against `position`.
    temperature: T.
    seed: the step's stateless seed, int32[2].

  Returns:
    theta', the same structure as `position`.

  ```python
  new = tfp_sgmcmc.dynamics.sgld_update(
      tf.zeros([2]), tf.ones([2]), step_size=0.1, temperature=1.,
      seed=[0, 1])
  print(new.shape)  # (2,)
  ```
  """
  _, noise_seed = random.derive_seeds(seed, 2)
  noise = random.standard_normal_like(position, noise_seed)
  return langevin_step(position, gradient, step_size, noise, temperature)


def psgld_update(position, second_moment, gradient, step_count, step_size,
                 temperature, decay, regularizer, num_examples, seed):
  """One pSGLD transition given grad U~ at `position`.

      V' = alpha V + (1 - alpha) g_bar * g_bar,   G = 1 / (lambda + sqrt(V'))
      theta' = theta - h G grad U~(theta) + sqrt(2 h T G) xi.

  The first step (`step_count` 0) has no history and starts the average at
  g_bar^2.

  Args:
    position: theta, a structure of tensors.
    second_moment: V, same structure.
    gradient: grad U~(theta), same structure.
    step_count: the number of steps taken before this one.
    step_size: h, a scalar or a structure broadcastable against `position`.
    temperature: T.
    decay: alpha in [0, 1).
    regularizer: lambda > 0.
    num_examples: N, the data size.
    seed: the step's stateless seed, int32[2], used as `one_step` uses it.

  Returns:
    (new position, new second moment V', preconditioner G).

  ```python
  theta, v, g = tfp_sgmcmc.dynamics.psgld_update(
      tf.zeros([2]), tf.zeros([2]), tf.ones([2]), step_count=0,
      step_size=1e-3, temperature=1., decay=0.99, regularizer=1e-5,
      num_examples=100, seed=[0, 1])
  print(theta.shape, v.numpy())  # (2,) [1e-4 1e-4]
  ```
  """
  _, noise_seed = random.derive_seeds(seed, 2)
  dtype = tf.nest.flatten(position)[0].dtype
  decay = tf.where(tf.equal(step_count, 0), tf.constant(0., dtype),
                   as_dtype(decay, dtype))
  second_moment, precond = rmsprop_preconditioner(
      second_moment, gradient, decay, num_examples, regularizer)
  noise = random.standard_normal_like(position, noise_seed)
  new_position = preconditioned_langevin_step(
      position, gradient, precond, step_size, noise, temperature)
  return new_position, second_moment, precond


def check_psgld_parameters(decay, regularizer):
  """Raises unless pSGLD's decay alpha is in [0, 1) and lambda > 0.

  Args:
    decay: alpha; checked when it is known statically.
    regularizer: lambda.

  Returns:
    None.

  Raises:
    ValueError: naming the argument and the value seen.

  ```python
  tfp_sgmcmc.dynamics.langevin.check_psgld_parameters(0.99, 1e-5)  # passes
  ```
  """
  d = arguments.static_value(decay)
  if d is not None and not 0. <= float(d) < 1.:
    raise ValueError(f"`decay` (alpha) must be in [0, 1); got {decay!r}.")
  arguments.check_positive("regularizer", regularizer)
