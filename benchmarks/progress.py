"""Cost of a progress bar on a compiled chain.

`tfp_sgmcmc.sample_chain_with_progress` runs `tfp.mcmc.sample_chain` as
`num_reports` compiled chunks with a tqdm bar (or printed lines) between
them, so there is no host round trip inside the compiled loop. This prints,
for SGLD on the N = 100,000 logistic regression and on Statlog Australian,
the time of

  * the helper with a progress bar (20 reports, tqdm writing to a discarded
    stream),
  * the helper with `progress=False` (one compiled run),
  * plain `tfp.mcmc.sample_chain` with the same kernel, compiled,

interleaved, compile time excluded, and the median ratios of the first to
the other two (wall clock and process CPU time). The helper's own per-step
cost is `StepSeeded`'s fold_in (it makes the draws independent of the
chunking); the progress bar's cost is the chunk boundaries.

    python benchmarks/progress.py [--repeats 7] [--out benchmarks/results]
"""

import argparse
import io
import os
import statistics

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import common  # noqa: E402
import harness  # noqa: E402
import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.chains import runs  # noqa: E402

NUM_REPORTS = 20


def bench(problem, num_results, step_size, repeats):
  kernel = sg.SGLD(problem.target(), step_size)
  init, seed = problem.init(), tf.constant([1, 2])
  sink = io.StringIO()

  def with_bar():
    # A tqdm bar as the examples show it, written to a discarded stream.
    import tqdm  # pylint: disable=g-import-not-at-top
    bar = tqdm.tqdm(total=num_results, file=sink, mininterval=0)
    out = runs.sample_chain_with_progress(
        num_results, init, kernel, seed, trace_fn=None,
        progress=lambda done, total: bar.update(done - bar.n),
        num_reports=NUM_REPORTS).all_states
    bar.close()
    return out

  def without_bar():
    return runs.sample_chain_with_progress(
        num_results, init, kernel, seed, trace_fn=None,
        progress=False).all_states

  @tf.function(jit_compile=True, autograph=False)
  def plain(state, seed):
    return tfp.mcmc.sample_chain(num_results, state, kernel=kernel,
                                 trace_fn=None, seed=seed)

  fns = {"progress bar": with_bar, "no bar": without_bar,
         "tfp sample_chain": lambda: plain(init, seed)}
  wall, cpu = harness.interleaved(fns, (), repeats, cpu=True)
  rows = []
  for base in ("no bar", "tfp sample_chain"):
    row = dict(problem=problem.name, steps=num_results,
               reports=NUM_REPORTS, baseline=base,
               bar_us_per_step=1e6 * statistics.median(wall["progress bar"])
               / num_results,
               baseline_us_per_step=1e6 * statistics.median(wall[base]) /
               num_results,
               ratio=harness.median_ratio(wall["progress bar"], wall[base]),
               ratio_range=harness.ratio_range(wall["progress bar"],
                                               wall[base]),
               cpu_ratio=harness.median_ratio(cpu["progress bar"], cpu[base]),
               cpu_ratio_range=harness.ratio_range(cpu["progress bar"],
                                                   cpu[base]))
    rows.append(row)
    print(f"{problem.name:30s} {base:18s} {row['bar_us_per_step']:8.2f} "
          f"{row['baseline_us_per_step']:8.2f} {row['ratio']:6.3f} "
          f"({row['ratio_range'][0]:.2f}-{row['ratio_range'][1]:.2f}) "
          f"{row['cpu_ratio']:6.3f} ({row['cpu_ratio_range'][0]:.2f}-"
          f"{row['cpu_ratio_range'][1]:.2f})", flush=True)
  return rows


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--out", default=os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "results"))
  args = parser.parse_args()
  print(f"{'problem':30s} {'baseline':18s} {'bar us':>8s} {'base us':>8s} "
        f"{'ratio':>6s} {'(spread)':>11s} {'cpu':>6s} {'(spread)':>11s}")
  rows = bench(common.synthetic_logistic(), 200_000, 1e-5, args.repeats)
  if os.path.isdir(common.SHARED_DATA):
    rows += bench(common.australian(), 500_000, 1e-3, args.repeats)
  harness.write_json(os.path.join(args.out, "progress.json"), {"rows": rows})


if __name__ == "__main__":
  main()
