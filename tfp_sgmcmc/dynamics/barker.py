"""Barker dynamics: the Barker proposal with a minibatch gradient (SGBD,
Mauri & Zanella 2024; Livingstone & Zanella 2022) and its proposal ratio.

Notation of the SGBD paper: g = log pi, so d_j g = -dU/dtheta_j; every
function here takes the energy gradient grad U~ (as the rest of
`dynamics`) and uses delta_j = -dU~/dtheta_j. sigma is the step size, w the
increment, p(delta, z) = 1 / (1 + exp(-z delta)) the Barker probability.

`barker_update` is one whole move (increment, direction and move, drawn
from its seeds); `sgbd_update` is SGBD's step from the step's seed, and
`barker_proposal_step` one step of the multi-step proposal that the
amortized Barker test corrects.
"""

import tensorflow as tf

from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, broadcast_structure, sum_event

__all__ = [
    "BARKER_INCREMENT_DISTRIBUTIONS",
    "SGBD_VARIANTS",
    "REVERSE_MINIBATCHES",
    "barker_increment_like",
    "barker_probability",
    "corrected_barker_probability",
    "extreme_barker_probability",
    "barker_move",
    "gradient_noise_std_ema",
    "barker_log_proposal_ratio",
    "barker_update",
    "sgbd_update",
    "barker_proposal_step",
    "check_increment_distribution",
    "check_variant",
]

SGBD_VARIANTS = ("vanilla", "corrected", "extreme")
REVERSE_MINIBATCHES = ("same", "independent")
BARKER_INCREMENT_DISTRIBUTIONS = ("bimodal", "gaussian")

# Phi(x) ~= sigmoid(1.702 x) (the probit-logistic matching constant behind
# Propositions 1 and 2 of Mauri & Zanella).
_PROBIT_LOGIT = 1.702


def barker_increment_like(structure, step_size, seed,
                          increment_distribution="bimodal"):
  """Increments w ~ mu_sigma, one per coordinate, from a stateless seed.

  * `"bimodal"` (Vogrinc, Livingstone & Zanella 2022; the SGBD paper's choice):
    mu_sigma = 0.5 N(-sigma, (0.1 sigma)^2) + 0.5 N(sigma, (0.1 sigma)^2),
    drawn as w = sigma s (1 + 0.1 xi), s = +-1 with probability 1/2,
    xi ~ N(0, 1).
  * `"gaussian"`: mu_sigma = N(0, sigma^2), w = sigma xi.

  `step_size` sigma is a scalar or a tensor broadcastable against each part
  (e.g. `[num_chains, 1]`, one sigma per chain). Because p(delta, -z) =
  1 - p(delta, z), the move b w has the same law whether the sign of w is
  drawn or not (Algorithm 2 of the SGBD paper draws w ~ N(sigma,
  (0.1 sigma)^2)); it is drawn here so that a zero gradient gives a
  symmetric move in every variant, the extreme one included.

  Args:
    structure: a structure of tensors shaped like the state.
    step_size: sigma, a scalar, a broadcastable tensor or one per part.
    seed: a stateless seed, int32[2].
    increment_distribution: "bimodal" or "gaussian".

  Returns:
    w, the same structure as `structure`.

  Raises:
    ValueError: an unknown `increment_distribution`.

  ```python
  w = tfp_sgmcmc.dynamics.barker_increment_like(tf.zeros([4, 2]), 0.5,
                                                [0, 1])
  print(w.shape)  # (4, 2), each +-0.5 (1 + 0.1 xi)
  ```
  """
  if increment_distribution not in BARKER_INCREMENT_DISTRIBUTIONS:
    raise ValueError(f"`increment_distribution` must be one of "
                     f"{BARKER_INCREMENT_DISTRIBUTIONS}; got "
                     f"{increment_distribution!r}.")
  normal_seed, sign_seed = random.derive_inner_seeds(seed, 2)
  xi = random.standard_normal_like(structure, normal_seed)
  sigma = broadcast_structure(step_size, xi)  # Also one sigma per part.
  if increment_distribution == "gaussian":
    return tf.nest.map_structure(lambda z, h: as_dtype(h, z.dtype) * z, xi,
                                 sigma)
  u = random.uniform_like(structure, sign_seed)

  def draw(z, v, h):
    sign = tf.where(v < 0.5, -tf.ones_like(v), tf.ones_like(v))
    return as_dtype(h, z.dtype) * sign * (1. + 0.1 * z)
  return tf.nest.map_structure(draw, xi, u, sigma)


def barker_probability(gradient, increment):
  """The Barker probability p(delta_j, w_j) = 1 / (1 + exp(-w_j delta_j)).

  With delta_j = -dU~/dtheta_j (`gradient` is grad U~): the probability of
  the move theta_j + w_j rather than theta_j - w_j (Livingstone & Zanella
  2022; v-SGBD when grad U~ is a minibatch estimate).

  Args:
    gradient: grad U~, a structure of tensors.
    increment: w, same structure.

  Returns:
    p, the same structure as `gradient`.

  ```python
  p = tfp_sgmcmc.dynamics.barker_probability(tf.constant([0., 1.]),
                                             tf.constant([1., 1.]))
  print(p.numpy())  # [0.5 0.269]: a move downhill in U is likelier
  ```
  """
  return tf.nest.map_structure(lambda g, w: tf.math.sigmoid(-w * g),
                               gradient, increment)


def corrected_barker_probability(gradient, increment, noise_std):
  """c-SGBD's corrected probability p~ (Mauri & Zanella, eq. (5)).

      p~(delta, z) = p(1.702 delta / sqrt(1.702^2 - tau^2 z^2), z)
                                          if |z| < 1.702 / tau,
                   = 1(delta z > 0)       otherwise,

  with delta = -dU~/dtheta_j and tau the standard deviation of the
  minibatch estimator delta (the N/n-scaled one). If delta ~ N(d, tau^2),
  E[p~(delta, z)] ~= p(d, z) (Proposition 2): the expected move probability
  is that of the exact gradient, undoing v-SGBD's shrinkage of the gradient
  by c = 1.702 / sqrt(1.702^2 + z^2 tau^2) (Proposition 1). With tau = 0 it
  is `barker_probability`.

  Args:
    gradient: grad U~, a structure of tensors.
    increment: w, same structure.
    noise_std: tau >= 0, same structure (or a scalar).

  Returns:
    p~, the same structure as `gradient`.

  ```python
  p = tfp_sgmcmc.dynamics.corrected_barker_probability(
      tf.constant([1., 1.]), tf.constant([1., 1.]),
      noise_std=tf.constant([0., 1.]))
  print(p.numpy())  # tau = 0 is `barker_probability`'s 0.269
  ```
  """
  def prob(g, w, tau):
    tau = as_dtype(tau, g.dtype)
    a = tf.constant(_PROBIT_LOGIT, g.dtype)
    tz2 = tf.square(tau * w)
    inside = tz2 < a * a
    # The safe denominator only matters where `inside` is False.
    scale = a * tf.math.rsqrt(tf.where(inside, a * a - tz2, tf.ones_like(tz2)))
    smooth = tf.math.sigmoid(-scale * w * g)
    hard = tf.cast(-w * g > 0., g.dtype)
    return tf.where(inside, smooth, hard)
  tau = broadcast_structure(noise_std, gradient)
  return tf.nest.map_structure(prob, gradient, increment, tau)


def extreme_barker_probability(gradient, increment):
  """e-SGBD's p-bar(delta, w) = 1(delta w > 0) (Mauri & Zanella).

  Always moves in the direction of the stochastic gradient: theta_j moves by
  |w_j| towards higher log density, as estimated on the minibatch. Among
  symmetric estimators of p it has the least bias when the gradient noise is
  large (the paper's Proposition 4); it is part sampler, part optimiser.

  Args:
    gradient: grad U~, a structure of tensors.
    increment: w, same structure.

  Returns:
    p-bar (0 or 1), the same structure as `gradient`.

  ```python
  p = tfp_sgmcmc.dynamics.extreme_barker_probability(
      tf.constant([1., -1.]), tf.constant([1., 1.]))
  print(p.numpy())  # [0. 1.]
  ```
  """
  return tf.nest.map_structure(lambda g, w: tf.cast(-w * g > 0., g.dtype),
                               gradient, increment)


def barker_move(position, increment, probability, uniform):
  """theta'_j = theta_j + b_j w_j, b_j = +1 if u_j < p_j else -1.

  Args:
    position: theta, a structure of tensors.
    increment: w, same structure.
    probability: p, p~ or p-bar, same structure.
    uniform: U(0, 1) draws u, same structure.

  Returns:
    theta', the same structure as `position`.

  ```python
  new = tfp_sgmcmc.dynamics.barker_move(
      tf.zeros([2]), tf.ones([2]), tf.constant([1., 0.]), tf.fill([2], 0.5))
  print(new.numpy())  # [ 1. -1.]
  ```
  """
  return tf.nest.map_structure(
      lambda x, w, p, u: x + tf.where(u < p, w, -w), position, increment,
      probability, uniform)


def gradient_noise_std_ema(noise_std, noise_variance, weight):
  """c-SGBD's online noise estimate (Mauri & Zanella, Algorithm 2).

      tau-hat_j <- (1 - beta) tau-hat_j + beta sqrt(V-hat_j),

  an exponential moving average, with weight beta in (0, 1) on the new
  value, of the per-coordinate standard deviation of the gradient
  estimator; V-hat_j is that estimator's variance estimated on the current
  minibatch (`target.gradient_noise_variance`).

  Args:
    noise_std: tau-hat, a structure of tensors.
    noise_variance: V-hat, same structure.
    weight: beta in (0, 1).

  Returns:
    The new tau-hat, the same structure as `noise_std`.

  ```python
  tau = tfp_sgmcmc.dynamics.gradient_noise_std_ema(
      tf.zeros([2]), tf.fill([2], 4.), weight=0.5)
  print(tau.numpy())  # [1. 1.]
  ```
  """
  def update(tau, v):
    beta = as_dtype(weight, tau.dtype)
    return (1. - beta) * tau + beta * tf.sqrt(tf.cast(v, tau.dtype))
  return tf.nest.map_structure(update, noise_std, noise_variance)


def barker_log_proposal_ratio(position, new_position, gradient, new_gradient,
                              batch_ndims=0):
  """log q(y -> x) - log q(x -> y) for one Barker move x -> y.

  The Barker proposal density is, per coordinate, with z = y_j - x_j and a
  symmetric mu_sigma,

      q(x -> y) = prod_j 2 mu_sigma(z) p(delta_j(x), z),
      p(delta, z) = 1 / (1 + exp(-z delta)),

  (z arises from (w, b) = (z, +1) or (-z, -1), each with density
  mu_sigma(z) p(delta, z) since p(delta, -z) = 1 - p(delta, z)). The
  mu_sigma terms cancel in the ratio, leaving

      log q(y -> x) / q(x -> y)
          = sum_j log p(delta_j(y), -z) - log p(delta_j(x), z)
          = sum_j log(1 + exp(-z delta_j(x))) - log(1 + exp(z delta_j(y)))
          = sum_j softplus(z dU/dtheta_j(x)) - softplus(-z dU/dtheta_j(y)),

  summed over every coordinate of every part, one value per chain.
  `gradient` is grad U at x and `new_gradient` at y; for a stochastic
  proposal both must be on the same minibatch (the one that made the move),
  which makes this the log of one factor of eq. (3) of Zhang et al. (2020).

  Args:
    position: x, a structure of tensors.
    new_position: y, same structure.
    gradient: grad U~(x), same structure.
    new_gradient: grad U~(y) on the same minibatch, same structure.
    batch_ndims: number of leading chain axes of each part.

  Returns:
    A tensor of shape `batch_shape` (the first `batch_ndims` axes).

  ```python
  x, y = tf.zeros([3, 2]), tf.ones([3, 2])  # 3 chains, U = |theta|^2 / 2
  ratio = tfp_sgmcmc.dynamics.barker_log_proposal_ratio(
      x, y, gradient=x, new_gradient=y, batch_ndims=1)
  print(ratio.shape)  # (3,)
  ```
  """
  terms = tf.nest.map_structure(
      lambda x, y, g, g_new: sum_event(
          tf.math.softplus((y - x) * g) - tf.math.softplus(-(y - x) * g_new),
          batch_ndims),
      position, new_position, gradient, new_gradient)
  return tf.add_n(tf.nest.flatten(terms))


def barker_update(position, gradient, step_size, increment_seed,
                  direction_seed, variant="vanilla",
                  increment_distribution="bimodal", noise_std=(),
                  noise_variance=None, noise_ema_weight=None):
  """One Barker move of every coordinate, given grad U~ at `position`.

      w ~ mu_sigma,   b_j = +1 with probability P(delta_j, w_j), else -1,
      theta'_j = theta_j + b_j w_j,

  with P the `variant`'s probability: `barker_probability` ("vanilla"),
  `extreme_barker_probability` ("extreme") or
  `corrected_barker_probability` ("corrected", with the noise estimate
  tau-hat first moved by `gradient_noise_std_ema` towards
  sqrt(`noise_variance`), the variance of the gradient estimator on the
  same minibatch).

  Args:
    position: theta, a structure of tensors.
    gradient: grad U~(theta), same structure.
    step_size: sigma, a scalar, a broadcastable tensor or one per part.
    increment_seed: the stateless seed of w, int32[2].
    direction_seed: the stateless seed of the directions b, int32[2].
    variant: "vanilla", "corrected" or "extreme".
    increment_distribution: "bimodal" or "gaussian".
    noise_std: tau-hat (the corrected variant only).
    noise_variance: V-hat on the same minibatch (corrected only).
    noise_ema_weight: beta of `gradient_noise_std_ema` (corrected only).

  Returns:
    (theta', tau-hat), tau-hat unchanged but for the corrected variant.

  ```python
  theta, _ = tfp_sgmcmc.dynamics.barker_update(
      tf.zeros([2]), tf.ones([2]), 0.5, increment_seed=[0, 1],
      direction_seed=[0, 2])
  print(theta.shape)  # (2,)
  ```
  """
  check_variant(variant)
  increment = barker_increment_like(position, step_size, increment_seed,
                                    increment_distribution)
  if variant == "vanilla":
    probability = barker_probability(gradient, increment)
  elif variant == "extreme":
    probability = extreme_barker_probability(gradient, increment)
  else:
    noise_std = gradient_noise_std_ema(noise_std, noise_variance,
                                       noise_ema_weight)
    probability = corrected_barker_probability(gradient, increment,
                                               noise_std)
  uniform = random.uniform_like(position, direction_seed)
  return barker_move(position, increment, probability, uniform), noise_std


def sgbd_update(position, gradient, step_size, seed, variant="vanilla",
                increment_distribution="bimodal", noise_std=(),
                noise_variance=None, noise_ema_weight=None):
  """One SGBD step given grad U~ at `position` (on the minibatch of the
  step's first derived seed): `barker_update` with the increment and the
  directions drawn from the step's `seed` as the kernel draws them.

      w ~ mu_sigma,   b_j = +1 with probability P(delta_j, w_j), else -1,
      theta'_j = theta_j + b_j w_j.

  Args:
    position: theta, a structure of tensors.
    gradient: grad U~(theta), same structure.
    step_size: sigma, a scalar, a broadcastable tensor or one per part.
    seed: the step's stateless seed, int32[2].
    variant: "vanilla", "corrected" or "extreme".
    increment_distribution: "bimodal" or "gaussian".
    noise_std: tau-hat (the corrected variant only).
    noise_variance: V-hat on the same minibatch (corrected only).
    noise_ema_weight: beta of `gradient_noise_std_ema` (corrected only).

  Returns:
    (theta', tau-hat), as `barker_update`.

  ```python
  theta, tau = tfp_sgmcmc.dynamics.sgbd_update(
      tf.zeros([2]), tf.ones([2]), 0.5, seed=[0, 1], variant="corrected",
      noise_std=tf.zeros([2]), noise_variance=tf.ones([2]),
      noise_ema_weight=0.1)
  print(theta.shape, tau.numpy())  # (2,) [0.1 0.1]
  ```
  """
  _, increment_seed, direction_seed = random.derive_seeds(seed, 3)
  return barker_update(position, gradient, step_size, increment_seed,
                       direction_seed, variant, increment_distribution,
                       noise_std, noise_variance, noise_ema_weight)


def barker_proposal_step(position, step_size, seed, energy_and_gradient,
                         increment_distribution="bimodal",
                         reverse_minibatch="same", batch_ndims=0):
  """Step t of the multi-step Barker proposal (v-SGBD), with its term of
  the proposal ratio.

      w ~ mu_sigma,  b_j = +1 w.p. p(-dU~_t/dtheta_j(x_t), w_j) else -1,
      x_{t+1} = x_t + b w,
      rho_t = log q_t(x_{t+1} -> x_t) - log q_t(x_t -> x_{t+1})
            (`barker_log_proposal_ratio`),

  where the reverse density uses grad U~ at x_{t+1} on the forward move's
  minibatch ("same") or an independent one ("independent").
  `energy_and_gradient(position, seed)` evaluates (U~, grad U~) on the
  minibatch of `seed`.

  Args:
    position: x_t, a structure of tensors.
    step_size: sigma.
    seed: the step's stateless seed, int32[2].
    energy_and_gradient: `(position, seed) -> (U~, grad U~)` on the
      minibatch of `seed`.
    increment_distribution: "bimodal" or "gaussian".
    reverse_minibatch: "same" or "independent".
    batch_ndims: number of leading chain axes of each part.

  Returns:
    (x_{t+1}, rho_t, U~_t(x_t), grad U~_t(x_t), grad U~(x_{t+1}),
    next seed): the seed is carried from step to step by a real split.

  ```python
  def energy_and_gradient(x, seed):
    return 0.5 * tf.reduce_sum(x**2, -1), x  # U = |x|^2 / 2, exact
  out = tfp_sgmcmc.dynamics.barker.barker_proposal_step(
      tf.zeros([3, 2]), 0.5, tf.constant([0, 1]), energy_and_gradient,
      batch_ndims=1)
  print(out[0].shape, out[1].shape)  # (3, 2) (3,)
  ```
  """
  (batch_seed, increment_seed, direction_seed, reverse_seed,
   next_seed) = random.split_seed(seed, 5)
  if reverse_minibatch == "same":
    reverse_seed = batch_seed
  energy, gradient = energy_and_gradient(position, batch_seed)
  new_position, _ = barker_update(
      position, gradient, step_size, increment_seed, direction_seed,
      increment_distribution=increment_distribution)
  _, new_gradient = energy_and_gradient(new_position, reverse_seed)
  rho = barker_log_proposal_ratio(position, new_position, gradient,
                                  new_gradient, batch_ndims)
  return new_position, rho, energy, gradient, new_gradient, next_seed


def check_increment_distribution(increment_distribution):
  """Raises a ValueError, naming the value seen and the choices, unless
  `increment_distribution` is "bimodal" or "gaussian".

  ```python
  tfp_sgmcmc.dynamics.barker.check_increment_distribution("bimodal")
  ```
  """
  _check_choice("increment_distribution", increment_distribution,
                BARKER_INCREMENT_DISTRIBUTIONS)


def check_variant(variant):
  """Raises a ValueError, naming the value seen and the choices, unless
  `variant` is "vanilla", "corrected" or "extreme" (any other name would
  fall through to the corrected variant's probability, another sampler).

  ```python
  tfp_sgmcmc.dynamics.barker.check_variant("extreme")
  ```
  """
  _check_choice("variant", variant, SGBD_VARIANTS)


def _check_choice(argument, value, choices):
  if not isinstance(value, str) or value not in choices:
    raise ValueError(f"`{argument}` must be one of {choices}; got "
                     f"{value!r}.")
