"""SG-NUTS: NUTS's doubling trajectory built from SGHMC steps."""

import collections

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import dynamics
from tfp_sgmcmc.kernels import _common

__all__ = ["SGNUTS", "SGNUTSResults"]

WEIGHTINGS = ("energy", "uniform")


class SGNUTSResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("SGNUTSResults", [
        "energy", "step_size", "tree_depth", "num_gradient_evaluations",
        "step_count", "diverged", "seed", "log_accept_ratio",
        "target_log_prob"])):
  """Results of one SG-NUTS iteration.

  Fields:
    energy: minibatch energy U~ of the previous state (the trajectory's
      starting point).
    step_size: eps used by this iteration.
    tree_depth: number of doublings made, per chain.
    num_gradient_evaluations: SGHMC steps taken (one minibatch gradient
      each), per chain: 2^tree_depth - 1 at most.
    step_count, diverged, seed: as for `SGHMCResults`.
    log_accept_ratio: log of NUTS's mean acceptance statistic (Hoffman &
      Gelman 2014, Sec. 3.2, as TFP's NUTS reports it): the average over
      the trajectory's points of min(1, exp(H0 - H_i)), H = U~ + |r|^2 / 2
      (divided by T), with U~ the minibatch energies the steps computed
      anyway. A noisy estimate (each H_i on its own batch, friction and
      injected noise change H too), but TFP's
      `DualAveragingStepSizeAdaptation` (or `SimpleStepSizeAdaptation`)
      tunes the step size on it as it does for NUTS: a larger eps gives
      larger energy errors and a smaller statistic.
    target_log_prob: as for `SGHMCResults`.
  """
  __slots__ = ()


def _dot_per_chain(a, b, batch_ndims):
  total = 0.
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    axes = list(range(batch_ndims, x.shape.rank))
    total = total + tf.reduce_sum(x * y, axis=axes)
  return total


def _no_u_turn(left, right, batch_ndims):
  """(theta+ - theta-) . r- >= 0 and (theta+ - theta-) . r+ >= 0."""
  (theta_l, r_l), (theta_r, r_r) = left, right
  span = tf.nest.map_structure(tf.subtract, theta_r, theta_l)
  return ((_dot_per_chain(span, r_l, batch_ndims) >= 0.) &
          (_dot_per_chain(span, r_r, batch_ndims) >= 0.))


class SGNUTS(_common.UncalibratedKernel):
  """SG-NUTS: the No-U-Turn Sampler's doubling built from SGHMC steps.

  The reproduction of Chen et al. (2014) in `papers/003`, Section 5. Each
  iteration draws r ~ N(0, T I) and grows a trajectory from (theta, r) by
  doubling, as NUTS (Hoffman & Gelman 2014) does: at depth j a random
  direction is chosen and 2^j SGHMC steps are taken from that end of the
  trajectory, each on a fresh minibatch,

      forward:   theta <- theta + eps r,
                 r <- r - eps grad U~(theta) - eps C r + N(0, 2 (C T - B) eps)
      backward:  the same step applied to (theta, -r), i.e.
                 theta <- theta - eps r,
                 r <- r + eps grad U~(theta) - eps C r + N(0, 2 (C T - B) eps),

  so friction and noise act in both directions (the paper's update). Growth
  stops when the new subtree's endpoints make a U-turn (the subtree is then
  discarded), when the whole trajectory makes one, i.e. when
  (theta+ - theta-) . r- < 0 or (theta+ - theta-) . r+ < 0, or at
  `max_tree_depth`. The sample is drawn from the trajectory by NUTS's
  progressive multinomial sampling: within a subtree with probability
  proportional to w = exp(-(U~(theta) + |r|^2 / 2) / T) (or uniformly, with
  `weighting="uniform"`), and the subtree's candidate replaces the current
  one with probability min(1, W_subtree / W_trajectory) (biased progressive
  sampling). U~ is the minibatch energy from the same evaluation as each
  step's gradient, so the weights cost nothing extra.

  What is and is not guaranteed:

  * NUTS is exact because its leapfrog steps are deterministic, volume
    preserving and reversible, and its selection satisfies detailed balance
    over the set of trees. SGHMC steps are none of these: friction and noise
    act in both time directions, so a backward step does not undo a forward
    one, and the weights use noisy minibatch energies. SG-NUTS therefore has
    no exactness guarantee and no detailed balance in the usual sense (the
    paper says as much); it is an approximate sampler like SGHMC, whose bias
    vanishes only as eps -> 0 with the friction matched to the noise.
  * The energy weights are the main source of bias: friction and injected
    noise make H = U~ + |r|^2/2 drift along a trajectory, and exp(-H)
    favours states whose H drifted down, shrinking the spread. The effect
    grows with the friction C, not with eps: on a unit Gaussian with
    grad U~ = grad U + N(0, 1) and eps = 0.1, the variance came out 0.97-0.98
    at C = 0.1 and about 0.80 at C = 0.5 (tests/test_sgnuts.py). Use a small
    friction (just above B-hat), or `weighting="uniform"`, which instead
    over-disperses (+10% at C = 0.1 on the 1-D version of that target).
  * What it does provide: trajectory lengths chosen per iteration by the
    U-turn criterion (longer where the posterior is wider), no need to set
    the number of steps, and the same O(eps) discretisation behaviour as
    its SGHMC steps (tested on Gaussian targets with noisy gradients).
  * Simplification against Hoffman & Gelman: the U-turn is checked on each
    new subtree's endpoints and on the whole trajectory, not on every
    internal sub-subtree, so a trajectory can occasionally be one doubling
    longer than exact NUTS's.

  #### Example

  ```python
  kernel = tfp_sgmcmc.SGNUTS(target, step_size=0.1, friction=1.,
                             max_tree_depth=6)
  samples, depth = tfp.mcmc.sample_chain(
      1000, tf.zeros([4, 2]), kernel=kernel,
      trace_fn=lambda _, r: r.tree_depth, seed=[0, 1])
  ```

  #### References

  [1] Hoffman, M. D. and Gelman, A. The No-U-Turn Sampler. JMLR 2014.
  [2] Chen, T., Fox, E. B. and Guestrin, C. Stochastic gradient Hamiltonian
      Monte Carlo. ICML 2014 (and the reproduction in papers/003, Sec. 5).
  """

  def __init__(self, target=None, step_size=None, friction=None,
               noise_estimate=0., max_tree_depth=6, weighting="energy",
               temperature=1., name=None, target_log_prob_fn=None):
    self._target, target, target_log_prob_fn = _common.resolve_target(
        target, target_log_prob_fn)
    _common.check_step_size(step_size)
    if friction is None:
      raise TypeError("`friction` (C) is required; got None.")
    _common.check_positive("friction", friction)
    _common.check_positive("noise_estimate", noise_estimate, allow_zero=True)
    _common.check_positive("temperature", temperature)
    if not isinstance(max_tree_depth, int) or not 1 <= max_tree_depth <= 12:
      raise ValueError("`max_tree_depth` must be an integer in [1, 12]; got "
                       f"{max_tree_depth!r}.")
    if weighting not in WEIGHTINGS:
      raise ValueError(f"`weighting` must be one of {WEIGHTINGS}; got "
                       f"{weighting!r}.")
    self._parameters = dict(
        target=target, step_size=step_size, friction=friction,
        noise_estimate=noise_estimate, max_tree_depth=max_tree_depth,
        weighting=weighting, temperature=temperature, name=name,
        target_log_prob_fn=target_log_prob_fn)

  target = _common.sampled_target_property()
  target_log_prob_fn = _common.parameter_property("target_log_prob_fn")
  step_size = _common.parameter_property("step_size")
  friction = _common.parameter_property("friction")
  noise_estimate = _common.parameter_property("noise_estimate")
  max_tree_depth = _common.parameter_property("max_tree_depth")
  weighting = _common.parameter_property("weighting")
  temperature = _common.parameter_property("temperature")
  name = _common.parameter_property("name")

  def _sghmc_step(self, theta, r, direction, eps, t, seed):
    """One SGHMC step forward (direction +1) or backward (-1) in time."""
    batch_seed, noise_seed = _common.split(seed, 2)
    expand = lambda d, x: tf.reshape(d, tf.concat(
        [tf.shape(d), tf.ones([x.shape.rank - d.shape.rank], tf.int32)], 0))
    signed = tf.nest.map_structure(lambda x: expand(direction, x) * x, r)
    theta = dynamics.drift(theta, signed, eps)
    energy, grad = self.target.energy_and_gradient(theta, batch_seed)
    noise = dynamics.standard_normal_like(signed, noise_seed)
    signed = dynamics.sghmc_euler_momentum(
        signed, grad, eps, self.friction, noise, self.noise_estimate, t)
    r = tf.nest.map_structure(lambda x: expand(direction, x) * x, signed)
    return theta, r, energy

  def _log_weight(self, energy, r, t, batch_ndims, weighting=None):
    if (weighting or self.weighting) == "uniform":
      log_w = tf.zeros_like(energy)
    else:
      kinetic = 0.5 * _dot_per_chain(r, r, batch_ndims)
      log_w = -(energy + kinetic) / t
    finite = _common.finite_per_chain(log_w, r)
    return tf.where(finite, log_w, tf.constant(-float("inf"), log_w.dtype))

  def one_step(self, current_state, previous_kernel_results, seed=None):
    current_state = _common.check_step(self, current_state,
                                       previous_kernel_results, SGNUTSResults)
    with tf.name_scope(self.name or "sgnuts_one_step"):
      prev = previous_kernel_results
      momentum_seed, energy_seed, loop_seed = _common.split(seed, 3)
      dtype = _common.state_dtype(current_state)
      eps = _common.step_size_at(self.step_size, prev.step_count,
                                 prev.step_size, dtype)
      t = _common.temperature_at(self.step_size, prev.step_count,
                                 self.temperature, dtype)
      batch_ndims = prev.energy.shape.rank
      r0 = tf.nest.map_structure(
          lambda z: tf.sqrt(tf.cast(self.temperature, dtype)) * z,
          dynamics.standard_normal_like(current_state, momentum_seed))
      energy0 = tf.cast(self.target.minibatch_energy(current_state,
                                                     energy_seed), dtype)
      log_w0 = self._log_weight(energy0, r0, t, batch_ndims)
      neg_h0 = self._log_weight(energy0, r0, t, batch_ndims, "energy")
      chain_shape = tf.shape(energy0)
      max_depth = self.max_tree_depth

      def where(mask, a, b):
        """Per chain, `a` where `mask`, else `b` (structures)."""
        return _common.keep_where_diverged(mask, a, b)

      def doubling(depth, left, right, candidate, log_w, done, num_grads,
                   tree_depth, accept_sum, seed):
        seed, dir_seed, step_seed, select_seed = _common.split(seed, 4)
        direction = tf.where(
            tf.random.stateless_uniform(chain_shape, dir_seed,
                                        alg=dynamics.RNG_ALG) < 0.5,
            tf.constant(-1., dtype), tf.constant(1., dtype))
        forward = direction > 0
        start = where(forward, right, left)
        num_steps = tf.bitwise.left_shift(1, depth)

        def step(i, end, first, sub_candidate, sub_log_w, sub_accept, seed):
          seed, s_step, s_pick = _common.split(seed, 3)
          theta, r, energy = self._sghmc_step(end[0], end[1], direction,
                                              eps, t, s_step)
          lw = self._log_weight(tf.cast(energy, dtype), r, t, batch_ndims)
          # NUTS's acceptance statistic min(1, exp(H0 - H_i)).
          neg_h = self._log_weight(tf.cast(energy, dtype), r, t, batch_ndims,
                                   "energy")
          sub_accept = sub_accept + tf.exp(tf.minimum(neg_h - neg_h0, 0.))
          new_sub_log_w = tf.experimental.numpy.logaddexp(sub_log_w, lw)
          u = tf.random.stateless_uniform(chain_shape, s_pick,
                                          dtype=dtype, alg=dynamics.RNG_ALG)
          take = tf.math.log(u) < lw - new_sub_log_w
          sub_candidate = where(take, theta, sub_candidate)
          first = where(tf.fill(chain_shape, tf.equal(i, 0)), (theta, r),
                        first)
          return (i + 1, (theta, r), first, sub_candidate, new_sub_log_w,
                  sub_accept, seed)

        init = (tf.constant(0), start, start, start[0],
                tf.fill(chain_shape, tf.constant(-float("inf"), dtype)),
                tf.zeros(chain_shape, dtype), step_seed)
        _, last, first, sub_candidate, sub_log_w, sub_accept, _ = (
            tf.while_loop(lambda i, *_: i < num_steps, step, init))

        sub_left = where(forward, first, last)
        sub_right = where(forward, last, first)
        sub_u_turn = ~_no_u_turn(sub_left, sub_right, batch_ndims)
        new_left = where(forward, left, last)
        new_right = where(forward, last, right)
        # Biased progressive sampling between the old trajectory and the
        # new subtree (Hoffman & Gelman 2014, Algorithm 3).
        u = tf.random.stateless_uniform(chain_shape, select_seed, dtype=dtype,
                                        alg=dynamics.RNG_ALG)
        take = (tf.math.log(u) < sub_log_w - log_w) & ~sub_u_turn
        active = ~done
        candidate = where(active & take, sub_candidate, candidate)
        log_w = tf.where(active & ~sub_u_turn,
                         tf.experimental.numpy.logaddexp(log_w, sub_log_w),
                         log_w)
        left = where(active & ~sub_u_turn, new_left, left)
        right = where(active & ~sub_u_turn, new_right, right)
        num_grads = num_grads + tf.where(active, num_steps, 0)
        accept_sum = accept_sum + tf.where(active, sub_accept,
                                           tf.zeros_like(sub_accept))
        tree_depth = tree_depth + tf.where(active, 1, 0)
        full_u_turn = ~_no_u_turn(left, right, batch_ndims)
        diverging = ~tf.math.is_finite(sub_log_w)
        done = done | sub_u_turn | full_u_turn | diverging
        return (depth + 1, left, right, candidate, log_w, done, num_grads,
                tree_depth, accept_sum, seed)

      start = (current_state, r0)
      init = (tf.constant(0), start, start, current_state, log_w0,
              tf.zeros(chain_shape, tf.bool),
              tf.zeros(chain_shape, tf.int32),
              tf.zeros(chain_shape, tf.int32), tf.zeros(chain_shape, dtype),
              loop_seed)
      (_, _, _, candidate, _, _, num_grads, tree_depth, accept_sum,
       _) = tf.while_loop(
          lambda depth, *rest: (depth < max_depth) & ~tf.reduce_all(rest[4]),
          doubling, init)

      finite = _common.finite_per_chain(energy0, candidate)
      diverged = tf.broadcast_to(prev.diverged, tf.shape(finite)) | ~finite
      next_state = _common.keep_where_diverged(diverged, current_state,
                                               candidate)
      mean_accept = accept_sum / tf.cast(tf.maximum(num_grads, 1), dtype)
      log_accept_ratio = tf.where(
          diverged, tf.constant(-float("inf"), dtype),
          tf.math.log(mean_accept))
      return next_state, SGNUTSResults(
          energy=energy0, step_size=eps, tree_depth=tree_depth,
          num_gradient_evaluations=num_grads,
          step_count=prev.step_count + 1, diverged=diverged,
          seed=tfp.random.sanitize_seed(seed),
          log_accept_ratio=log_accept_ratio,
          target_log_prob=_common.target_log_prob(self.target, next_state,
                                                  energy0))

  def bootstrap_results(self, init_state):
    with tf.name_scope((self.name or "sgnuts") + "_bootstrap_results"):
      _common.check_initial_state(init_state, self.target)
      dtype = _common.state_dtype(init_state)
      _common.refuse_minibatch_under_tfp_mh(self)
      energy = tf.cast(self.target.minibatch_energy(
          init_state, _common.BOOTSTRAP_SEED), dtype)
      zeros = tf.zeros(tf.shape(energy), tf.int32)
      return SGNUTSResults(
          energy=energy,
          step_size=_common.initial_step_size(self.step_size, dtype),
          tree_depth=zeros, num_gradient_evaluations=zeros,
          step_count=tf.constant(0, tf.int32),
          diverged=tf.zeros(tf.shape(energy), tf.bool),
          seed=tfp.random.sanitize_seed(_common.BOOTSTRAP_SEED),
          log_accept_ratio=tf.zeros_like(energy),
          target_log_prob=-energy)
