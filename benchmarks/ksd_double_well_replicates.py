"""On the double well, is KSD's ranking failure only the noise of one run?

`ksd_step_sizes.py` ranks step sizes by the error of one run each; on the
quickstart's double well that error is mostly Monte Carlo error of the
mode weights. Here each step size of the same grid (h_w x (0.1, 0.3, 1, 3,
10), h_w from one `warm_up`) runs `--replicates` times from the warm-up's
state with independent seeds, so a step's error is its expected error at
this run length (the RMS of its replicates' errors, the error of
`ksd_step_sizes.true_errors`), which no longer moves by chance. KSD is
measured on each replicate (`scale="diagonal"`, thinned to `--max-draws`)
with the IMQ length scale c = 1, 2 and 4 (in the draws' sds: a c near the
distance between the modes, about 2.6 sds, lets the kernel see both). Per
kernel and c: Spearman's correlation of the mean KSD with the expected
error, each replicate's KSD with the expected error, and the expected
error of each replicate's KSD-chosen step over the best.

    python benchmarks/ksd_double_well_replicates.py [--seed 1]   # 3-5 min
"""

import argparse
import datetime
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import scipy.stats  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import ksd_step_sizes  # noqa: E402
import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.chains import stein  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LENGTH_SCALES = (1., 2., 4.)


def replicated_grid(problem, kernel_name, num_steps, num_chains, max_draws,
                    replicates, seed):
  target = problem.target
  kernel = (sg.SGLD(target, step_size=1e-3) if kernel_name == "SGLD" else
            sg.SGHMC(target, step_size=0.01, friction=1.))
  warm_seed, run_seed, ksd_seed = tfp.random.split_seed(seed, 3)
  warm = sg.warm_up(kernel, tf.zeros([num_chains, 1]), num_steps=500,
                    seed=warm_seed, adapt_mass=False)
  h_w = warm.report.step_size
  half = num_steps // 2

  @tf.function(jit_compile=True, autograph=False)
  def run(h, s):
    return tfp.mcmc.sample_chain(num_steps - half, warm.state,
                                 kernel=warm.kernel.copy(step_size=h),
                                 num_burnin_steps=half, trace_fn=None,
                                 seed=s)
  grid = ksd_step_sizes.GRID
  errors = np.zeros([replicates, len(grid)])
  ksds = np.zeros([len(LENGTH_SCALES), replicates, len(grid)])
  for r, s in enumerate(tfp.random.split_seed(run_seed, replicates)):
    runs = [run(tf.constant(h_w * f, tf.float32), s).numpy() for f in grid]
    errors[r] = [ksd_step_sizes.true_errors(problem, d)[0] for d in runs]
    scale = stein.common_scale(runs, "diagonal")
    for i, c in enumerate(LENGTH_SCALES):
      ksds[i, r] = [float(sg.ksd(d, target, pool_chains=True,
                                 max_draws=max_draws, seed=ksd_seed,
                                 scale=scale, c=c)) for d in runs]
  # A run that blew up: both measures at their worst (a NaN has no rank).
  errors[~np.isfinite(errors)] = np.inf
  ksds[~np.isfinite(ksds)] = np.inf
  expected = np.sqrt(np.mean(errors ** 2, 0))
  spearman = lambda a, b: float(scipy.stats.spearmanr(a, b).correlation)
  by_c = {}
  for i, c in enumerate(LENGTH_SCALES):
    k = ksds[i]
    by_c[str(c)] = dict(
        mean_ksd=np.mean(k, 0).tolist(),
        spearman_of_mean=spearman(np.mean(k, 0), expected),
        spearman_per_replicate=[spearman(k[r], expected)
                                for r in range(replicates)],
        chosen_over_best=[float(expected[np.argmin(k[r])] / expected.min())
                          for r in range(replicates)])
  return dict(model=problem.name, kernel=kernel_name, warmup_step_size=h_w,
              grid=list(grid), expected_error=expected.tolist(),
              errors=errors.tolist(), by_length_scale=by_c)


def main(num_steps=16000, num_chains=16, max_draws=2000, replicates=10,
         seed=0, out=os.path.join(HERE, "results"),
         kernels=("SGLD", "SGHMC")):
  problem = ksd_step_sizes.double_well_problem()
  name = "ksd_double_well_replicates" + (f"_seed{seed}" if seed else "")
  seed, results = tfp.random.sanitize_seed(seed), []
  for kernel_name in kernels:
    seed, run_seed = tfp.random.split_seed(seed)
    result = replicated_grid(problem, kernel_name, num_steps, num_chains,
                             max_draws, replicates, run_seed)
    results.append(result)
    print(f"{kernel_name}: h_w {result['warmup_step_size']:.4g}, expected "
          "error " + " ".join(f"{e:.3g}" for e in result["expected_error"]),
          flush=True)
    for c, v in result["by_length_scale"].items():
      print(f"  c = {c}: mean KSD "
            + " ".join(f"{x:.3g}" for x in v["mean_ksd"])
            + f"; Spearman of the mean {v['spearman_of_mean']:+.2f}; per "
            "replicate " + " ".join(f"{x:+.1f}" for x in
                                    v["spearman_per_replicate"])
            + "; chosen/best " + " ".join(f"{x:.2f}" for x in
                                           v["chosen_over_best"]),
            flush=True)
  if out:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".json"), "w") as f:
      json.dump(dict(date=str(datetime.date.today()), num_steps=num_steps,
                     num_chains=num_chains, max_draws=max_draws,
                     replicates=replicates, results=results), f, indent=1)
  return results


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=16000)
  parser.add_argument("--chains", type=int, default=16)
  parser.add_argument("--max-draws", type=int, default=2000)
  parser.add_argument("--replicates", type=int, default=10)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  main(args.steps, args.chains, args.max_draws, args.replicates, args.seed)
