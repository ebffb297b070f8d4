"""The target interface (`MinibatchTarget`) and the energy of targets built
from a per-example log-likelihood (`DataLikelihoodTarget`).

A target represents a posterior pi(theta) proportional to exp(-U(theta)) with

    U(theta) = -sum_{i=1}^N log p(x_i | theta) - log p(theta),

and gives kernels what stochastic-gradient MCMC needs: an unbiased minibatch
estimate U~ and its gradient on the minibatch a seed chooses, the exact U
where it can, and the variance of the minibatch gradient. The state is one
tensor or a structure of tensors whose leading axes are chains.
"""

import tensorflow as tf

from tfp_sgmcmc._structure import pack_like, state_dtype
from tfp_sgmcmc.targets import energy as energy_lib
from tfp_sgmcmc.targets.checks import (check_float_state,
                                       check_functions_callable,
                                       checked_log_likelihood,
                                       checked_log_prior,
                                       parse_parameter_shapes)

__all__ = ["TargetCapabilityError", "MinibatchTarget",
           "DataLikelihoodTarget", "check_target"]


class TargetCapabilityError(TypeError):
  """Raised when a kernel asks a target for something it cannot provide
  (e.g. the exact energy of a target without one, or the gradient noise of
  one without per-example gradients)."""


class MinibatchTarget:
  """Interface shared by all targets: what a kernel asks of the posterior.

  A target implements `minibatch_energy(state, seed)` (U~ on the minibatch
  that `seed` chooses) and, where it can, `energy(state)` (the exact U,
  `has_exact_energy`) and `gradient_noise_variance(state, seed)`. The
  gradient comes from `energy_and_gradient` (automatic differentiation of
  `minibatch_energy` unless a target overrides it); `check_state` and
  `check_functions` are the checks a kernel runs once, at bootstrap.

  Subclass it for a posterior the ready-made targets do not cover: override
  `minibatch_energy` (and `energy` where the exact U is available).

  Args:
    num_examples: N, the number of examples in the full data set (1 for a
      target without data).
    log_prior_fn: `log_prior_fn(state)`, the log prior per chain, or None
      (a flat prior); a subclass's energies add it where they need it.
    parameter_shapes: the per-chain shapes of the state's parts (one shape,
      e.g. `[3]`, or a list of shapes for a list state), checked against
      the state at bootstrap; None checks nothing.

  #### Example

  A unit Gaussian whose minibatch energy carries noise chosen by the seed,
  so its gradient is grad U + N(0, I):

  ```python
  class NoisyGaussian(tfp_sgmcmc.MinibatchTarget):

    def __init__(self):
      super().__init__(num_examples=1)

    def minibatch_energy(self, state, seed):
      noise = tf.random.stateless_normal(tf.shape(state), seed)
      return tf.reduce_sum(0.5 * state**2 + noise * state, -1)

    def energy(self, state):
      return tf.reduce_sum(0.5 * state**2, -1)

  kernel = tfp_sgmcmc.SGLD(NoisyGaussian(), step_size=0.01)
  samples = tf.function(lambda: tfp.mcmc.sample_chain(
      500, tf.zeros([8, 2]), kernel=kernel, num_burnin_steps=100,
      trace_fn=None, seed=[0, 1]), jit_compile=True)()
  print(tf.math.reduce_variance(samples, [0, 1]))   # about 1
  ```
  """

  def __init__(self, num_examples, log_prior_fn=None, parameter_shapes=None):
    self._num_examples = num_examples
    self._log_prior_fn = log_prior_fn
    self._parameter_shapes = parse_parameter_shapes(parameter_shapes)

  @property
  def parameter_shapes(self):
    """Declared per-chain shapes of the state parts (a list for list states,
    one shape for a single tensor), or None when not declared."""
    return self._parameter_shapes

  def check_state(self, state):
    """Raises a clear error if `state` does not fit the target."""
    check_float_state(state)
    shapes, parts = self._parameter_shapes, tf.nest.flatten(state)
    if shapes is None:
      return
    is_list = isinstance(shapes, list)
    # A dict (or namedtuple) state takes its shapes as a list in
    # `tf.nest.flatten` order (a dict's keys sorted), like a list state.
    if is_list != isinstance(state, (list, tuple, dict)) or (
        is_list and len(shapes) != len(parts)):
      want = (f"a list of {len(shapes)} tensors with trailing shapes "
              f"{[list(x) for x in shapes]}" if is_list else
              f"one tensor with trailing shape {list(shapes)}")
      got = tf.nest.map_structure(lambda t: tuple(t.shape), state)
      raise ValueError(f"`current_state` must be {want} (after any leading "
                       f"chain dimensions); got {got}.")
    for i, (part, shape) in enumerate(zip(parts, shapes if is_list else
                                          [shapes])):
      rank = part.shape.rank
      if rank is not None and (rank < len(shape) or not part.shape[
          rank - len(shape):].is_compatible_with(shape)):
        raise ValueError(f"`current_state` part {i} has shape "
                         f"{tuple(part.shape)}; expected trailing shape "
                         f"{list(shape)} (the target's parameter_shapes).")

  def check_functions(self, state):
    """Trace-time checks of the user's functions on `state` (called once by
    every kernel's `bootstrap_results`): shapes and dtypes of what they
    return. The default checks nothing beyond the energy's own checks."""
    del state

  @property
  def num_examples(self):
    """N, the number of examples in the full data set."""
    return self._num_examples

  @property
  def has_exact_energy(self):
    """Whether `energy(state)` computes the exact full-data U(theta)."""
    return True

  @property
  def minibatches_from_seed(self):
    """Whether the minibatch of `minibatch_energy(state, seed)` is a
    function of `seed` alone: the same seed gives the same batch, batches of
    independent seeds are i.i.d., and none depends on the state or on the
    batches drawn before. The amortized tests (exact AMAGOLD, the amortized
    Barker) are exact only on such batches (a trajectory's batches are then
    as likely in reverse order as forward)."""
    return True

  def non_finite_data(self):
    """A phrase naming the target's data that holds NaN or inf, or "".
    Asked after chains diverged (never per step), to tell data that is not
    finite from a step size that is too large. Targets whose data is
    checked when they are built (in memory) have none."""
    return ""

  def log_prior(self, state):
    if self._log_prior_fn is None:
      return tf.constant(0., dtype=tf.nest.flatten(state)[0].dtype)
    return self._log_prior_fn(state)

  def minibatch_energy(self, state, seed):
    """U~(theta) on the minibatch chosen by `seed` (no gradient)."""
    raise TargetCapabilityError(
        f"{type(self).__name__} does not provide minibatch energies.")

  def minibatch_energies(self, states, seed):
    """U~ of each state in the list `states`, all on the one minibatch that
    `seed` chooses (for the minibatch M-H test: a difference of energies on
    a shared batch). Seed-determined targets just reuse the seed."""
    return [self.minibatch_energy(state, seed) for state in states]

  def energy_and_gradient(self, state, seed):
    """Returns (U~(state), grad U~(state)) on a fresh minibatch."""
    check_float_state(state)
    return _with_gradient(lambda s: self.minibatch_energy(s, seed), state)

  def gradient(self, state, seed):
    """grad U~(state) on the minibatch chosen by `seed`, without the energy:
    what a kernel built with `compute_energy=False` evaluates. The same
    values as `energy_and_gradient(state, seed)[1]` (it is that, here);
    under `tf.function(jit_compile=True)` XLA then drops the work only the
    energy needs (e.g. the log1p of a logistic loss). A target with a
    cheaper gradient-only path overrides it."""
    return self.energy_and_gradient(state, seed)[1]

  def energy(self, state):
    """Exact full-data energy U(theta), per chain."""
    raise TargetCapabilityError(
        f"{type(self).__name__} has no exact full-data energy; pass a target "
        "that has one (has_exact_energy=True).")

  def exact_energy_and_gradient(self, state):
    """(U(state), grad U(state)), the exact energy and its gradient."""
    return _with_gradient(self.energy, state)

  def gradient_noise_variance(self, state, seed):
    """Per-coordinate variance of the minibatch gradient estimator.

    For a batch of n examples drawn with replacement, grad U~ = (N/n) sum_i g_i
    with g_i = -grad log p(x_i | theta), so Var[grad U~] = (N^2 / n) Var_i[g_i];
    Var_i is estimated by the sample variance of the per-example gradients of
    the minibatch chosen by `seed`. Returned in the structure of `state`.
    """
    raise TargetCapabilityError(
        f"{type(self).__name__} cannot estimate gradient noise "
        "(it has no per-example gradients).")


def _with_gradient(energy_fn, state):
  """(`energy_fn`(state), its gradient in the structure of `state`)."""
  parts = tf.nest.flatten(state)
  with tf.GradientTape() as tape:
    tape.watch(parts)
    energy = energy_fn(pack_like(state, parts))
  # Chains are independent, so the gradient of the summed energy is each
  # chain's own gradient.
  grads = tape.gradient(energy, parts,
                        unconnected_gradients=tf.UnconnectedGradients.ZERO)
  return energy, pack_like(state, grads)


class DataLikelihoodTarget(MinibatchTarget):
  """Shared code for targets defined by a per-example log-likelihood."""

  def __init__(self, log_likelihood_fn, num_examples, log_prior_fn,
               parameter_shapes=None):
    check_functions_callable(log_likelihood_fn, log_prior_fn)
    super().__init__(num_examples, log_prior_fn, parameter_shapes)
    self._log_likelihood_fn = log_likelihood_fn

  def _log_likelihood(self, state, batch, n):
    if n is None:  # Streamed batches: their static length, where known.
      n = tf.nest.flatten(batch)[0].shape[0]
    return checked_log_likelihood(self._log_likelihood_fn, state, batch, n,
                                  self.parameter_shapes)

  def _energy_from_total(self, state, total):
    """U = -`total` (the log-likelihood summed over all N examples, per
    chain, in float64: `energy.sum_of_examples`) - log p(theta), in the
    state's dtype."""
    return tf.cast(-total - tf.cast(checked_log_prior(
        self._log_prior_fn, state, total.shape, self.parameter_shapes),
                                    total.dtype), state_dtype(state))

  def _energy_from_batch(self, state, batch, n):
    ll = self._log_likelihood(state, batch, n)
    prior = checked_log_prior(self._log_prior_fn, state, ll.shape[:-1],
                              self.parameter_shapes)
    return energy_lib.minibatch_energy(-tf.reduce_mean(ll, axis=-1), prior,
                                       self.num_examples)

  def _noise_variance_from_batch(self, state, batch, n):
    parts = tf.nest.flatten(state)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      ll = self._log_likelihood(pack_like(state, parts), batch, n)
      # Sum over chains: chains are independent, so the Jacobian of the
      # per-example sums w.r.t. each part holds each chain's own gradients.
      batch_axes = list(range(len(ll.shape) - 1))
      ll_per_example = tf.reduce_sum(ll, axis=batch_axes)
    jac = tape.jacobian(ll_per_example, parts,
                        unconnected_gradients=tf.UnconnectedGradients.ZERO,
                        experimental_use_pfor=True)
    num = tf.cast(self.num_examples, parts[0].dtype)
    out = []
    for j in jac:
      n_float = tf.cast(tf.shape(j)[0], j.dtype)
      mean = tf.reduce_mean(j, axis=0)
      var = tf.reduce_sum(tf.square(j - mean), axis=0) / (n_float - 1.)
      out.append(num * num / n_float * var)
    return pack_like(state, out)


def check_target(target):
  if not isinstance(target, MinibatchTarget):
    hint = (" It is a callable: for a full-batch log density (as TFP's HMC "
            "takes) pass it as `target_log_prob_fn=`; for a minibatch "
            "log-likelihood wrap it in `tfp_sgmcmc.InMemoryTarget(fn, data, "
            "batch_size)`; for a JointDistribution use "
            "`tfp_sgmcmc.JointDistributionTarget`." if callable(target) else
            "")
    raise TypeError(
        "`target` must be a tfp_sgmcmc target (InMemoryTarget, "
        "DatasetTarget, NoisyGradientTarget, ...); got "
        f"{type(target).__name__}.{hint}")
