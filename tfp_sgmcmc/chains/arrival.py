"""Whether a warm-up has arrived: a chain still on its way to the posterior,
told from the gradient of the energy where the chains stand.

At stationarity the score has mean zero, E_pi[grad U] = 0, for any density
(integration by parts), while a chain still approaching the posterior
stands on a slope: every chain sees a large gradient of the same sign. Two
numbers per coordinate i, from the gradients g_c of U at the C chains'
final states (exact where the target has an exact energy, else a mean of
minibatch gradients):

* **distance** = |(S mean_c g_c)_i| / sd_i, with S the warm-up's estimate
  of the posterior covariance (its dense mass, where it has one) and sd_i
  = sqrt(S_ii): one Newton step, in posterior sds; the distance of the
  chains' mean from where the gradient vanishes for a Gaussian of that
  covariance. At stationarity it is about N(0, 1 / C). With a variance
  only (a diagonal mass) S is diagonal and the distance |mean_c g_ci| *
  sd_i: at stationarity of order sqrt(VIF_i / C), with VIF_i the variance
  inflation of coordinate i (its marginal over its conditional variance),
  1 for independent coordinates and unbounded on a direction the
  likelihood does not identify (two coefficients that enter only as their
  sum: their marginal sds are the prior's, their conditional ones the
  sum's). There the distance is no distance, and the agreement decides.
* **agreement** = |mean_c g_ci| / (sd_c g_ci / sqrt(C)): Student's t of the
  chains' gradients; at stationarity t with C - 1 degrees of freedom (the
  chains are independent draws), far from it the chains agree on the slope.

A coordinate has not arrived when both exceed their thresholds (the distance
alone with one chain). `check_arrival` is pure (arrays in, verdict out);
`final_gradients` computes the gradients from a target.
"""

import collections
import functools
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["WarmupNotConvergedWarning", "Arrival", "check_arrival",
           "final_gradients", "check_warm_up", "warn_if_not_arrived",
           "MAX_DISTANCE", "MAX_AGREEMENT", "MAX_AGREEMENT_ALONE",
           "MAX_CHAIN_DISTANCE", "STRANDED_FALSE_ALARM",
           "STRANDED_MIN_RATIO", "MAX_ENERGY_GAP", "final_energies"]

# Thresholds. At stationarity the distance is about N(0, VIF / C) and the
# agreement a t with C - 1 degrees of freedom; a cold start on a large-N
# logistic regression gives distances above 100 and agreements above 100
# (docs/warmup.md, "When the warm-up has not arrived").
MAX_DISTANCE = 8.
MAX_AGREEMENT = 8.
# Without a variance estimate (a warm-up that adapts no mass) the agreement
# alone decides, at a threshold a t with 3 degrees of freedom exceeds with
# probability about 3e-6 (at 30, 3 alarms in 2,000 simulated 20-coordinate
# warm-ups at the posterior).
MAX_AGREEMENT_ALONE = 100.
# One chain stranded far from the others leaves the chains' mean gradient
# and its t statistic small (with one chain of four off, t is exactly 1).
# Each chain's own |g_ci| sd_i is about N(0, VIF_i) at the posterior, so
# beyond this a single chain is off unless a coordinate's variance
# inflation exceeds 4e6 (its marginal sd 2,000 times its conditional one).
MAX_CHAIN_DISTANCE = 1e4
# The same stranded chain, judged against the other chains instead: at the
# posterior a chain's gradient over the root mean square of the other C - 1
# chains' (per coordinate) is |t| with C - 1 degrees of freedom. Beyond the
# t quantile that C chains x D coordinates pass by chance with probability
# STRANDED_FALSE_ALARM (Bonferroni), and never below STRANDED_MIN_RATIO
# (gradients at a posterior that is not Gaussian have heavier tails), the
# chain is off. It catches a chain stranded at a scale MAX_CHAIN_DISTANCE
# cannot (a warm-up whose pooled variances the stranded chain inflated).
STRANDED_FALSE_ALARM = 1e-3
STRANDED_MIN_RATIO = 20.
# A stranded chain's gradient may be only ten times the others' (short of
# the ratio above), while its exact energy stands thousands of nats above
# theirs: a random-intercepts model of 201 coordinates, full batch from a
# uniform start, left a chain 14,000 nats above the others and rejecting
# every proposal. At the posterior the chains' energies are draws of U,
# which spreads over about sqrt(d / 2) nats (U - U_min is Gamma(d / 2, 1)
# for a Gaussian posterior); a chain whose energy exceeds the chains'
# median by more than MAX_ENERGY_GAP (sqrt(d / 2) + 1) nats is off.
MAX_ENERGY_GAP = 10.


class WarmupNotConvergedWarning(UserWarning):
  """The warm-up ended with its chains still on their way to the posterior:
  the step size and mass it tuned, and the draws that follow, are not the
  posterior's."""


class Arrival(collections.namedtuple(
    "Arrival", ["arrived", "distance", "agreement", "coordinates", "cause"])):
  """What `check_arrival` found.

  Attributes:
    arrived: False when some coordinate is far from the posterior.
    distance: the largest diagonal-Newton distance (posterior sds) over
      coordinates.
    agreement: the largest |t| of the chains' gradients (None for one
      chain).
    coordinates: flat indices of the coordinates that have not arrived.
    cause: a sentence for a user (empty when arrived).
  """
  __slots__ = ()


def check_arrival(gradients, variance, num_chains, max_distance=MAX_DISTANCE,
                  max_agreement=MAX_AGREEMENT, covariance=None,
                  energies=None):
  """Whether chains whose energy gradients are `gradients` have arrived.

  Args:
    gradients: per state part, grad U at each chain's final state, shape
      [chains..., *event] (numpy arrays or tensors; a list, or one array).
    variance: per state part, the estimated posterior variance of each
      coordinate, shape event (e.g. `WarmupReport.variance`), or None: then
      the chains' agreement alone decides, at `MAX_AGREEMENT_ALONE` (and
      one chain is taken to have arrived: nothing to compare).
    num_chains: C, the number of chains (the product of the chain axes).
    max_distance: posterior sds beyond which a coordinate is far.
    max_agreement: |t| beyond which the chains agree on the slope (ignored
      with one chain).
    covariance: the estimated posterior covariance [d, d] of a state of one
      vector of d coordinates (e.g. `WarmupReport.covariance`), or None:
      the distances are then Newton steps S g in the posterior's own
      scale, not diagonal ones, which a correlated or non-identified
      direction inflates (a chain at the posterior of two coefficients
      that only enter as their sum: 15 sds, against 0.4).
    energies: the exact energy U of each chain, shape [chains...]
      (`final_energies`), or None: a chain more than `MAX_ENERGY_GAP`
      (sqrt(d / 2) + 1) nats above the chains' median is stranded.

  Returns:
    An `Arrival`.

  #### Example

  ```python
  from tfp_sgmcmc.chains import arrival
  g = np.array([[50., 0.1], [52., -0.3], [49., 0.2], [51., 0.]])
  print(arrival.check_arrival([g], [np.ones(2)], 4).arrived)   # False
  ```
  """
  grads = [np.asarray(g, np.float64) for g in tf.nest.flatten(gradients)]
  if variance is None:
    max_distance = 0.
    max_agreement = max(max_agreement, MAX_AGREEMENT_ALONE)
    if int(num_chains) == 1:
      return Arrival(True, 0., None, np.zeros([0], int), "")
  else:
    variances = [np.asarray(v, np.float64)
                 for v in tf.nest.flatten(variance)]
    if len(grads) != len(variances):
      raise ValueError(f"`gradients` has {len(grads)} parts and `variance` "
                       f"{len(variances)}; give one variance per state "
                       "part.")
  num_chains = int(num_chains)
  flat_g = np.concatenate(
      [g.reshape(num_chains, -1) for g in grads], axis=1)
  # Without a variance every coordinate's sd is 1, taken per chain from
  # the flattened gradients: a part's event may have any rank.
  sd = np.ones(flat_g.shape[1]) if variance is None else np.sqrt(
      np.concatenate([np.broadcast_to(v, g.shape[g.ndim - v.ndim:])
                      .reshape(-1) for g, v in zip(grads, variances)]))
  mean = flat_g.mean(axis=0)
  # Each chain's Newton step S g, in posterior sds; with a covariance the
  # chains' agreement is that of their steps (their gradients' t, where S
  # is diagonal): on a direction the data do not identify, the gradient
  # is the identified direction's, whose spread hides the slope.
  steps, distance, compared = flat_g * sd, np.abs(mean) * sd, flat_g
  if covariance is not None and variance is not None:
    covariance = np.asarray(covariance, np.float64)
    if covariance.shape != (sd.size, sd.size):
      raise ValueError(f"`covariance` has shape {list(covariance.shape)} "
                       f"where the state has {sd.size} coordinates; give "
                       "one [d, d] covariance of a state of one vector.")
    sd = np.sqrt(np.diag(covariance))
    steps = compared = flat_g @ covariance / sd
    mean = steps.mean(axis=0)
    distance = np.abs(mean)
  far = distance > max_distance
  agreement = None
  if num_chains > 1:
    spread = compared.std(axis=0, ddof=1) / np.sqrt(num_chains)
    with np.errstate(divide="ignore", invalid="ignore"):
      t = np.where(spread > 0, np.abs(mean) / spread,
                   np.where(mean != 0, np.inf, 0.))
    agreement = float(np.max(t))
    far &= t > max_agreement
  # With a variance estimate, a chain stranded on its own (see
  # MAX_CHAIN_DISTANCE and STRANDED_MIN_RATIO).
  own = np.abs(steps) if max_distance > 0 else np.zeros_like(flat_g)
  stranded = own > MAX_CHAIN_DISTANCE
  if num_chains > 1 and max_distance > 0:
    stranded |= (own > max_distance) & (
        _ratio_to_others(compared) > _stranded_ratio(num_chains,
                                                     int(sd.size)))
  gap = 0.  # The largest gap of a chain flagged by its energy, else 0.
  if energies is not None and num_chains > 1:
    u = np.asarray(energies, np.float64).reshape(num_chains)
    above = u - np.median(u)
    high = above > MAX_ENERGY_GAP * (np.sqrt(sd.size / 2.) + 1.)
    stranded[high] |= own[high] >= own[high].max(axis=1, keepdims=True)
    gap = float(np.max(above[high])) if high.any() else 0.
  coordinates = np.flatnonzero(far if far.any() else stranded.any(axis=0))
  worst = float(np.max(distance)) if distance.size else 0.
  cause = ""
  if stranded.any() and not far.any():
    chains = np.flatnonzero(stranded.any(axis=1))
    worst = float(np.max(own))
    cause = (
        f"the chains have not arrived: chain{'s' * (chains.size > 1)} "
        f"{', '.join(str(c) for c in chains)} (of {num_chains}, in "
        f"{coordinates.size} of {distance.size} coordinates) ended where the "
        f"gradient of the energy is {worst:.3g} posterior sds from vanishing "
        "(at the posterior about 1), stranded away from the others, whose "
        "tuned step size does not move it" + (
            f" (its energy {gap:.3g} nats above the chains' median)"
            if gap else "") +
        ". The draws are not the "
        "posterior's. Fix: start the chains nearer the posterior (e.g. "
        "around the mode, tfp_sgmcmc.find_mode), or run more warm-up "
        "steps.")
  elif coordinates.size:
    cause = (
        f"the chains have not arrived: in {coordinates.size} of "
        f"{distance.size} coordinates the gradient of the energy where the "
        f"chains ended points the same way in every chain and is "
        f"{worst:.0f} posterior sds from vanishing (at the posterior about "
        f"1; over {max_distance:g} means still on the way). The tuned step "
        "size and mass are for the slope, not the posterior. Fix: start at "
        "the mode (tfp_sgmcmc.find_mode), use control variates "
        "(ControlVariateTarget around it), or run more warm-up steps; "
        "tfp_sgmcmc.sample does the first two where the density has a "
        "mode.")
  return Arrival(arrived=not coordinates.size, distance=worst,
                 agreement=agreement, coordinates=coordinates, cause=cause)


def _ratio_to_others(flat_g):
  """Each chain's |gradient| over the root mean square of the other
  chains' gradients, per coordinate ([chains, coordinates])."""
  squares = np.square(flat_g)
  others = (squares.sum(axis=0) - squares) / (flat_g.shape[0] - 1)
  with np.errstate(divide="ignore", invalid="ignore"):
    return np.where(others > 0, np.abs(flat_g) / np.sqrt(others),
                    np.where(flat_g != 0, np.inf, 0.))


@functools.lru_cache(maxsize=64)
def _stranded_ratio(num_chains, num_coordinates):
  """The ratio `_ratio_to_others` exceeds by chance at the posterior with
  probability STRANDED_FALSE_ALARM over every chain and coordinate (of a
  Gaussian), at least STRANDED_MIN_RATIO."""
  tail = STRANDED_FALSE_ALARM / (2. * num_chains * max(num_coordinates, 1))
  t = tfp.distributions.StudentT(np.float64(num_chains - 1), np.float64(0.),
                                 np.float64(1.))
  return max(STRANDED_MIN_RATIO, -float(t.quantile(tail)))


def final_gradients(target, state, seed, num_minibatches=16):
  """grad U at each chain of `state`: exact where `target` has an exact
  energy, else the mean of `num_minibatches` minibatch gradients.

  Args:
    target: a `tfp_sgmcmc` target.
    state: the chains' state (leading chain axes).
    seed: stateless seed (minibatch gradients only).
    num_minibatches: minibatch gradients averaged without an exact energy.

  Returns:
    grad U, in the structure of `state`, as numpy arrays.
  """
  parts = [tf.convert_to_tensor(p) for p in tf.nest.flatten(state)]
  packed = lambda ps: tf.nest.pack_sequence_as(state, ps)
  if target.has_exact_energy:
    with tf.GradientTape() as tape:
      tape.watch(parts)
      energy = target.energy(packed(parts))
    grads = tape.gradient(energy, parts,
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
  else:
    seeds = tf.random.experimental.stateless_split(
        tf.convert_to_tensor(seed, tf.int32), num_minibatches)
    total = [tf.zeros_like(p) for p in parts]
    for i in range(num_minibatches):
      _, g = target.energy_and_gradient(packed(parts), seeds[i])
      total = [a + b for a, b in zip(total, tf.nest.flatten(g))]
    grads = [a / num_minibatches for a in total]
  return packed([np.asarray(g) for g in grads])


def final_energies(target, state):
  """The exact energy U of each chain of `state` (numpy, shape [chains...])
  where `target` has an exact energy, else None (a minibatch estimate's
  noise would hide a chain's gap)."""
  if not target.has_exact_energy:
    return None
  return np.asarray(target.energy(tf.nest.map_structure(
      tf.convert_to_tensor, state)), np.float64)


def check_warm_up(kernel, state, variance, batch_ndims, seed,
                  covariance=None):
  """`check_arrival` at the end of `warm_up`: the gradients and energies at
  `state` from the kernel's target; None for a kernel without a
  `target`."""
  target = getattr(kernel, "target", None)
  if target is None:
    return None
  parts = tf.nest.flatten(state)
  num_chains = int(np.prod(parts[0].shape[:batch_ndims]))
  grads = final_gradients(target, state, seed)
  return check_arrival(grads, variance, num_chains, covariance=covariance,
                       energies=final_energies(target, state))


def warn_if_not_arrived(arrival, stacklevel=3):
  """Issues `WarmupNotConvergedWarning` with the cause and the fix when
  `arrival.arrived` is False."""
  if not arrival.arrived:
    warnings.warn(arrival.cause, WarmupNotConvergedWarning,
                  stacklevel=stacklevel)
