"""A reference posterior for `one_call.py`'s logistic regressions where the
Laplace mode is not the posterior mean.

The posterior mean differs from the mode by O(d / sqrt(N)) posterior sds
(the likelihood's skew summed over the d directions): at N = 200,000 about
0.03 sd for d = 20, but up to 0.7 sd for d = 200. This script draws from
the posterior with TFP's `HamiltonianMonteCarlo` (float64, full data, no
`tfp_sgmcmc` code) in coordinates whitened by the Laplace covariance,
w = mode + L z, where the posterior is nearly N(0, I): step size 0.3, 5
leapfrog steps, 4 chains. It saves the means, sds, their Monte Carlo
standard errors, ESS and R-hat to
`results/one_call_reference_d{dim}[_shared_factor].npz`, which
`one_call.py` then reads.

    python benchmarks/one_call_reference.py --dim 200
    python benchmarks/one_call_reference.py --dim 300 --shared-factor
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import one_call  # noqa: E402

tfd = tfp.distributions


def draw(dim, shared_factor, num_results, num_examples=200_000, seed=0):
  x, y = one_call.logistic_data(num_examples, dim, seed, shared_factor)
  mode, laplace_sd = one_call.laplace(x, y)
  x = x.astype(np.float64)
  p = 1 / (1 + np.exp(-x @ mode))
  hessian = (x * (p * (1 - p))[:, None]).T @ x + np.eye(dim)
  chol = np.linalg.cholesky(np.linalg.inv(hessian))
  x64, y64 = tf.constant(x), tf.constant(y.astype(np.float64))
  mode64, chol64 = tf.constant(mode), tf.constant(chol)

  def log_prob(z):
    w = mode64 + tf.linalg.matvec(chol64, z)
    return (tf.reduce_sum(tfd.Bernoulli(
        logits=tf.linalg.matvec(x64, w)).log_prob(y64), -1)
            - 0.5 * tf.reduce_sum(w**2, -1))
  kernel = tfp.mcmc.HamiltonianMonteCarlo(log_prob, step_size=0.3,
                                          num_leapfrog_steps=5)
  start = tf.constant(np.random.default_rng(seed + 1).normal(size=(4, dim)))
  run = tf.function(lambda: tfp.mcmc.sample_chain(
      num_results, start, kernel=kernel, num_burnin_steps=100,
      trace_fn=lambda _, r: r.is_accepted, seed=[seed + 7, 8]),
                    jit_compile=True)
  z, accepted = run()
  draws = mode + z.numpy() @ chol.T
  ess = tfp.mcmc.effective_sample_size(draws, cross_chain_dims=1).numpy()
  flat = draws.reshape(-1, dim)
  mean, sd = flat.mean(0), flat.std(0)
  return dict(mean=mean, sd=sd, mcse=sd / np.sqrt(ess), ess=ess,
              rhat=tfp.mcmc.potential_scale_reduction(draws).numpy(),
              mode=mode, laplace_sd=laplace_sd,
              acceptance=float(accepted.numpy().mean()))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dim", type=int, default=200)
  parser.add_argument("--shared-factor", action="store_true")
  parser.add_argument("--num-results", type=int, default=2000)
  args = parser.parse_args()
  start = time.perf_counter()
  ref = draw(args.dim, args.shared_factor, args.num_results)
  print(f"d = {args.dim}: {time.perf_counter() - start:.0f} s, acceptance "
        f"{ref['acceptance']:.2f}, smallest ESS {ref['ess'].min():.0f}, "
        f"largest R-hat {ref['rhat'].max():.4f}, largest |mean - mode| "
        f"{np.max(np.abs(ref['mean'] - ref['mode']) / ref['laplace_sd']):.3f}"
        f" Laplace sds, largest MCSE {np.max(ref['mcse'] / ref['sd']):.3f}"
        " sds")
  np.savez(one_call.reference_path(args.dim, args.shared_factor), **ref)


if __name__ == "__main__":
  main()
