"""SG-NUTS: NUTS's doubling trajectory built from SGHMC steps."""

import collections

import tensorflow as tf
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments
from tfp_sgmcmc import random
from tfp_sgmcmc._structure import as_dtype, choose
from tfp_sgmcmc.dynamics import hamiltonian
from tfp_sgmcmc.dynamics import nuts
from tfp_sgmcmc.kernels import base
from tfp_sgmcmc.kernels import interop

__all__ = ["SGNUTS", "SGNUTSResults"]

WEIGHTINGS = nuts.WEIGHTINGS


class SGNUTSResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("SGNUTSResults", [
        "energy", "step_size", "tree_depth", "num_gradient_evaluations",
        "step_count", "diverged", "seed", "log_accept_ratio",
        "target_log_prob"])):
  """Results of one SG-NUTS iteration.

  Attributes:
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


class SGNUTS(base.StochasticGradientKernel):
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
    at C = 0.1 and about 0.80 at C = 0.5
    (tests/statistical/test_sgnuts_moments.py). Use a small friction (just
    above B-hat), or `weighting="uniform"`, which instead over-disperses
    (+10% at C = 0.1 on the 1-D version of that target).
  * What it does provide: trajectory lengths chosen per iteration by the
    U-turn criterion (longer where the posterior is wider), no need to set
    the number of steps, and the same O(eps) discretisation behaviour as
    its SGHMC steps (tested on Gaussian targets with noisy gradients).
  * Simplification against Hoffman & Gelman: the U-turn is checked on each
    new subtree's endpoints and on the whole trajectory, not on every
    internal sub-subtree, so a trajectory can occasionally be one doubling
    longer than exact NUTS's.

  Args:
    target: a `tfp_sgmcmc` target giving minibatch energies and gradients;
      or None with `target_log_prob_fn`.
    step_size: eps > 0: a scalar, a list with one per state part, or a
      schedule `step_count -> eps`. In a `CyclicalSchedule`'s exploration
      phase the SGHMC steps inject no noise; the momentum r ~ N(0, T I)
      and the weights exp(-H / T) keep T.
    friction: C > 0 (required); keep it small, just above `noise_estimate`
      (see above).
    noise_estimate: B-hat >= 0, the estimated gradient-noise variance
      term; C T >= B-hat is required (the injected variance is
      2 (C T - B-hat) eps).
    max_tree_depth: the most doublings per iteration, an integer in
      [1, 12] (at most 2^max_tree_depth - 1 gradients).
    weighting: `"energy"` (weights exp(-H / T)) or `"uniform"` (every
      point of a subtree equally likely).
    temperature: T > 0; the chain samples exp(-U / T).
    name: name scope of the kernel's ops.
    target_log_prob_fn: a full-batch log density (TFP's convention), in
      place of `target`.
    store_parameters_in_results: True when a TFP adaptation kernel wraps
      this one (they set it): the step size is read from the results.

  Returns:
    A `tfp.mcmc.TransitionKernel` whose results are `SGNUTSResults`; each
    `one_step` is one trajectory (one iteration).

  Raises:
    TypeError: no `friction`.
    ValueError: a step size, friction, noise estimate, temperature, tree
      depth or weighting out of range, named with the value received.

  #### Example

  ```python
  kernel = tfp_sgmcmc.SGNUTS(target, step_size=0.01, friction=1.,
                             max_tree_depth=5)
  samples, depth = tfp.mcmc.sample_chain(
      10, tf.zeros([4, d]), kernel=kernel,
      trace_fn=lambda _, r: r.tree_depth, seed=[0, 1])
  print(depth[-1])   # doublings per chain in the last iteration
  ```

  #### References

  [1] Hoffman, M. D. and Gelman, A. The No-U-Turn Sampler. JMLR 2014.
  [2] Chen, T., Fox, E. B. and Guestrin, C. Stochastic gradient Hamiltonian
      Monte Carlo. ICML 2014 (and the reproduction in papers/003, Sec. 5).
  """

  _results_type = SGNUTSResults
  _scope = "sgnuts"

  def __init__(self, target=None, step_size=None, friction=None,
               noise_estimate=0., max_tree_depth=6, weighting="energy",
               temperature=1., name=None, target_log_prob_fn=None,
               store_parameters_in_results=False):
    self._target, target, target_log_prob_fn = interop.resolve_target(
        target, target_log_prob_fn, temperature, type(self).__name__)
    arguments.check_step_size(step_size)
    if friction is None:
      raise TypeError("`friction` (C) is required; got None.")
    arguments.check_positive("friction", friction)
    arguments.check_positive("noise_estimate", noise_estimate,
                             allow_zero=True)
    arguments.check_positive("temperature", temperature)
    # C T >= B-hat, as SGHMC's (the injected variance is 2 (C T - B-hat) h).
    hamiltonian.check_sghmc_parameters(friction, noise_estimate, "euler",
                                       None, temperature)
    arguments.check_integer("max_tree_depth", max_tree_depth, 1, 12)
    if weighting not in WEIGHTINGS:
      raise ValueError(f"`weighting` must be one of {WEIGHTINGS}; got "
                       f"{weighting!r}.")
    self._parameters = dict(
        target=target, step_size=step_size, friction=friction,
        noise_estimate=noise_estimate, max_tree_depth=max_tree_depth,
        weighting=weighting, temperature=temperature, name=name,
        target_log_prob_fn=target_log_prob_fn,
        store_parameters_in_results=store_parameters_in_results)

  friction = arguments.parameter_property("friction")
  noise_estimate = arguments.parameter_property("noise_estimate")
  max_tree_depth = arguments.parameter_property("max_tree_depth")
  weighting = arguments.parameter_property("weighting")
  temperature = arguments.parameter_property("temperature")

  def _sghmc_step(self, theta, r, direction, eps, t, seed):
    """One SGHMC step forward (direction +1) or backward (-1) in time."""
    return nuts.sghmc_time_step(theta, r, direction, eps, self.friction,
                                self.noise_estimate, t, seed,
                                self.target.energy_and_gradient)

  def _log_weight(self, energy, r, t, batch_ndims, weighting=None):
    return nuts.log_weight(energy, r, t, batch_ndims,
                           weighting or self.weighting)

  def _transition(self, current_state, prev, step):
    momentum_seed, energy_seed, loop_seed = random.split_seed(step.seed, 3)
    dtype = step.dtype
    eps = step.size
    # The injected noise's temperature (0 in a cyclical schedule's
    # exploration phase) and the sampled law's, exp(-H / T): the momentum
    # and the weights are the law's, else exploring would weigh every point
    # exp(-H / 0) and no point of a trajectory could be chosen.
    t = self._temperature_at(step)
    law_t = as_dtype(self.temperature, dtype)
    batch_ndims = prev.energy.shape.rank
    r0 = tf.nest.map_structure(
        lambda z: tf.sqrt(law_t) * z,
        random.standard_normal_like(current_state, momentum_seed))
    energy0 = tf.cast(self.target.minibatch_energy(current_state,
                                                   energy_seed), dtype)
    log_w0 = self._log_weight(energy0, r0, law_t, batch_ndims)
    neg_h0 = self._log_weight(energy0, r0, law_t, batch_ndims, "energy")
    chain_shape = tf.shape(energy0)
    max_depth = self.max_tree_depth
    where = choose  # Per chain, `a` where `mask`, else `b` (structures).

    def doubling(depth, left, right, candidate, log_w, done, num_grads,
                 tree_depth, accept_sum, seed):
      seed, dir_seed, step_seed, select_seed = random.split_seed(seed, 4)
      direction = tf.where(
          random.philox_uniform(chain_shape, dir_seed) < 0.5,
          tf.constant(-1., dtype), tf.constant(1., dtype))
      forward = direction > 0
      start = where(forward, right, left)
      num_steps = tf.bitwise.left_shift(1, depth)

      def step(i, end, first, sub_candidate, sub_log_w, sub_accept, seed):
        seed, s_step, s_pick = random.split_seed(seed, 3)
        theta, r, energy = self._sghmc_step(end[0], end[1], direction,
                                            eps, t, s_step)
        lw = self._log_weight(tf.cast(energy, dtype), r, law_t,
                              batch_ndims)
        # NUTS's acceptance statistic min(1, exp(H0 - H_i)).
        neg_h = self._log_weight(tf.cast(energy, dtype), r, law_t,
                                 batch_ndims, "energy")
        sub_accept = sub_accept + tf.exp(tf.minimum(neg_h - neg_h0, 0.))
        new_sub_log_w = tf.experimental.numpy.logaddexp(sub_log_w, lw)
        u = random.philox_uniform(chain_shape, s_pick, dtype)
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
      sub_u_turn = ~nuts.no_u_turn(sub_left, sub_right, batch_ndims)
      new_left = where(forward, left, last)
      new_right = where(forward, last, right)
      # Biased progressive sampling between the old trajectory and the
      # new subtree (Hoffman & Gelman 2014, Algorithm 3).
      u = random.philox_uniform(chain_shape, select_seed, dtype)
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
      full_u_turn = ~nuts.no_u_turn(left, right, batch_ndims)
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

    mean_accept = accept_sum / tf.cast(tf.maximum(num_grads, 1), dtype)
    valid = arguments.check_noise_within_friction(
        self.friction, self.noise_estimate, self.temperature, dtype)
    return base.Move(
        candidate, energy0,
        checked=[candidate] + ([] if valid is None else [valid]),
        fields=dict(
            tree_depth=tree_depth, num_gradient_evaluations=num_grads,
            log_accept_ratio=lambda diverged: tf.where(
                diverged, tf.constant(-float("inf"), dtype),
                tf.math.log(mean_accept))))

  def _initial_fields(self, init_state, energy):
    zeros = tf.zeros(tf.shape(energy), tf.int32)
    return dict(tree_depth=zeros, num_gradient_evaluations=zeros,
                log_accept_ratio=tf.zeros_like(energy))
