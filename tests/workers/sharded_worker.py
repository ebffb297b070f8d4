"""Run by tests/processes/test_sharded_devices.py in a subprocess: the TFP
kernels on a `ShardedTarget` split across two logical CPU devices.

Logical devices must be configured before TensorFlow initialises its
devices, hence a fresh process. Prints one JSON line with, per minibatch
scheme and kernel, the largest difference between the sharded chain and the
single-device `InMemoryTarget` chain for the same seed, and the moments of an
exact AMAGOLD chain on the sharded target beside the analytic posterior.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * 2)

import numpy as np  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

# tests/, for the shared test machinery in tests/support.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from support import helpers  # noqa: E402
from support.linear_regression import LinearRegression  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

BATCH = 50
KERNELS = {
    "sgld": lambda t: sg.SGLD(t, step_size=1e-3),
    "sghmc": lambda t: sg.SGHMC(t, step_size=2e-3, friction=10.),
    "amagold": lambda t: sg.AMAGOLD(t, step_size=0.02, num_leapfrog_steps=5,
                                    friction=1.),
}


def sample(kernel, num_results, init, seed, trace_fn=None):
  run = tf.function(lambda s: tfp.mcmc.sample_chain(
      num_results, init, kernel=kernel, trace_fn=trace_fn, seed=s),
                    autograph=False)
  return tf.nest.map_structure(np.asarray, run(tf.constant(seed)))


def main():
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  problem = LinearRegression(num_examples=500, dim=2, seed=0)
  out = {"num_replicas": strategy.num_replicas_in_sync}
  init = tf.zeros([2, 2])
  for scheme in ("global", "per_shard"):
    sharded = sg.ShardedTarget(
        problem.log_likelihood, problem.data, BATCH, strategy=strategy,
        log_prior_fn=problem.log_prior, minibatch=scheme,
        energy_chunk_size=64)

    class SingleDevice(sg.InMemoryTarget):
      """The single-device target drawing the sharded target's batches."""

      def minibatch_indices(self, seed, state=None):
        return sharded.minibatch_indices(seed)  # pylint: disable=cell-var-from-loop

    single = (problem.in_memory_target(BATCH) if scheme == "global" else
              SingleDevice(problem.log_likelihood, problem.data, BATCH,
                           log_prior_fn=problem.log_prior))
    result = {"shard_devices": [
        tf.nest.flatten(v)[0].device
        for v in strategy.experimental_local_results(sharded._shards)]}  # pylint: disable=protected-access
    for name, make in KERNELS.items():
      a = sample(make(sharded), 100, init, [3, 4])
      b = sample(make(single), 100, init, [3, 4])
      result[name] = {"max_difference": float(np.max(np.abs(a - b))),
                      "moved": float(np.max(np.abs(b[-1] - b[0])))}
    out[scheme] = result

  # Exact AMAGOLD on the sharded target samples the analytic posterior.
  sharded = sg.ShardedTarget(problem.log_likelihood, problem.data, 200,
                             strategy=strategy,
                             log_prior_fn=problem.log_prior)
  kernel = sg.AMAGOLD(sharded, step_size=0.01, num_leapfrog_steps=8,
                      friction=1.)
  draws, accepted = sample(
      kernel, 1500, tf.constant(problem.posterior_mean, tf.float32)
      + tf.zeros([4, 2]), [7, 8], trace_fn=lambda _, r: r.is_accepted)
  mean, se = helpers.mean_and_se(draws)
  sq = (draws - problem.posterior_mean) ** 2
  var, var_se = helpers.mean_and_se(sq)
  out["moments"] = {
      "mean": mean.tolist(), "mean_se": se.tolist(),
      "true_mean": problem.posterior_mean.tolist(),
      "var": var.tolist(), "var_se": var_se.tolist(),
      "true_var": np.diag(problem.posterior_cov).tolist(),
      "acceptance": float(np.mean(accepted))}
  print(json.dumps(out))


if __name__ == "__main__":
  main()
