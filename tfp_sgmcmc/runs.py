"""Long runs: posterior moments in constant memory.

A million-step chain that keeps every draw needs memory proportional to its
length; `sample_moments` folds the draws into running moments instead
(Welford updates through `tfp.experimental.mcmc.VarianceReducer`), so its
memory does not depend on the number of steps. Everything runs as one
compiled loop.

    moments = tfp_sgmcmc.sample_moments(kernel, init, 1_000_000, seed=[0, 1])
    moments.mean, moments.variance, moments.final_kernel_results
"""

import collections

import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["sample_moments", "Moments"]

Moments = collections.namedtuple(
    "Moments", ["mean", "variance", "num_draws", "final_state",
                "final_kernel_results"])


def sample_moments(kernel, current_state, num_steps, seed,
                   num_burnin_steps=0, previous_kernel_results=None,
                   jit_compile=True):
  """Runs `num_steps` steps and returns per-chain running moments.

  Args:
    kernel: any `tfp.mcmc.TransitionKernel`.
    current_state: initial state (tensor or list, leading chain dims).
    num_steps: number of draws folded into the moments (after burn-in).
    seed: stateless int32[2] seed.
    num_burnin_steps: steps run first and not counted.
    previous_kernel_results: to continue a chain.
    jit_compile: compile the loop with XLA.

  Returns:
    `Moments(mean, variance, num_draws, final_state, final_kernel_results)`,
    mean and variance per chain and coordinate, in the state's structure.
  """
  reducer = tfp.experimental.mcmc.VarianceReducer()

  def run(state, seed):
    _, final_state, final_results, reducer_state = (
        tfp.experimental.mcmc.sample_fold(
            num_steps, state, previous_kernel_results=previous_kernel_results,
            kernel=kernel, reducer=reducer, num_burnin_steps=num_burnin_steps,
            seed=seed, return_final_reducer_states=True))
    # One RunningCovariance per state part (a list for list states).
    running = reducer_state.cov_state
    parts = running if isinstance(running, (list, tuple)) else [running]
    means = [r.mean for r in parts]
    mean = means if isinstance(running, (list, tuple)) else means[0]
    variance = reducer.finalize(reducer_state)
    return mean, variance, final_state, final_results

  fn = tf.function(run, jit_compile=jit_compile, autograph=False)
  mean, variance, final_state, final_results = fn(
      current_state, tfp.random.sanitize_seed(seed))
  return Moments(mean=mean, variance=variance, num_draws=num_steps,
                 final_state=final_state, final_kernel_results=final_results)

