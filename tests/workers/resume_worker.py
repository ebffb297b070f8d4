"""Worker for tests/processes/test_resume_in_new_process.py: runs chains in
a fresh process.

    python resume_worker.py first DIR   # 3k-step reference and 2k checkpoint
    python resume_worker.py resume DIR  # load the checkpoint, k more steps
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

warnings.filterwarnings("ignore")
K = 50


def gaussian():
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2, -1), gradient_noise_variance=1.)


def data_target():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(100, 2)).astype(np.float32)
  y = (x @ [1., -1.] + rng.normal(size=100)).astype(np.float32)
  return sg.InMemoryTarget(
      lambda w, b: -0.5 * (b[1] - tf.einsum("nd,...d->...n", b[0], w)) ** 2,
      (x, y), batch_size=10,
      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1))


def kernels():
  g, d = gaussian(), data_target()
  return {
      "sgld_decay": sg.SGLD(d, sg.PolynomialDecay(0.01, 1., 0.55)),
      "sghmc_split": sg.SGHMC(g, 0.1, 1., integrator="splitting",
                              momentum_resampling_period=7),
      "sghmc_cyclical": sg.SGHMC(d, sg.CyclicalSchedule(0.01, 150, 3), 5.),
      "sghmc_fisher": sg.SGHMC(d, 0.005, 50., noise_estimate="empirical_fisher"),
      "sgnht": sg.SGNHT(g, 0.05),
      "psgld": sg.PreconditionedSGLD(d, 1e-3),
      "amagold_adapted": tfp.mcmc.DualAveragingStepSizeAdaptation(
          sg.AMAGOLD(d, 0.01, num_leapfrog_steps=5, friction=0.5,
                     resample_momentum=False), num_adaptation_steps=120),
      "sgnuts": sg.SGNUTS(g, 0.1, 0.1, max_tree_depth=4),
  }


def runner(kernel):
  """One XLA program per kernel for any number of steps up to 3k: the
  3k-step run, the 2k-step checkpoint and the resumed k steps are one
  compiled program (the step count is a tensor), compiled once per process.
  """
  @tf.function(jit_compile=True, autograph=False)
  def run(state, results, n):
    def body(i, state, results, draws):
      state, results = kernel.one_step(state, results)
      return i + 1, state, results, draws.write(i, state)
    draws = tf.TensorArray(state.dtype, size=3 * K, element_shape=state.shape)
    _, state, results, draws = tf.while_loop(
        lambda i, *_: i < n, body, (tf.constant(0), state, results, draws))
    return draws.stack(), results    # rows from n on are unwritten zeros

  def steps(state, results, n):
    draws, results = run(state, results, tf.constant(n))
    return draws[:n], results
  return steps


def main():
  mode, out = sys.argv[1], sys.argv[2]
  for name, inner in kernels().items():
    kernel = sg.StepSeeded(inner, seed=[3, 4])
    init = tf.zeros([2, 2])
    fresh = kernel.bootstrap_results(init)
    run = runner(kernel)
    if mode == "first":
      full, _ = run(init, fresh, 3 * K)
      np.save(os.path.join(out, f"{name}_full.npy"), full.numpy())
      first, results = run(init, fresh, 2 * K)
      sg.save_chain(os.path.join(out, f"{name}.npz"), first[-1], results,
                    kernel=kernel)
    else:
      state, results = sg.load_chain(os.path.join(out, f"{name}.npz"),
                                     fresh, init, kernel=kernel)
      rest, _ = run(state, results, K)
      np.save(os.path.join(out, f"{name}_resumed.npy"), rest.numpy())
  print("done", mode)


if __name__ == "__main__":
  main()
