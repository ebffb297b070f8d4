"""Whether `warm_up` knows when it has not arrived: the cold start that
docs/warmup.md once led with, over seeds.

Bayesian logistic regression, N = 200,000, d = 20, minibatches of 1,000
(benchmarks/one_call.py's data), 4 chains started at `tf.zeros`, `warm_up`
for 1,000 steps, AMAGOLD (0.01, T = 10, friction 0.5) and SGHMC (0.01,
friction 1; its warm-up runs the same test chain as that AMAGOLD, friction
C / 2 = 0.5, so its runs repeat AMAGOLD's numbers). The chains end tens of
Laplace sds from the mode; the check
(`tfp_sgmcmc.chains.arrival`) must flag every run. Per run: whether it
warned, the arrival record (distance in posterior sds, agreement, the
coordinates flagged) and the chains' true distance from the mode in
Laplace sds.

    python benchmarks/cold_start.py                    # 5 seeds, AMAGOLD
    python benchmarks/cold_start.py --seeds 0 1 --kernels amagold sghmc
"""

import argparse
import datetime
import json
import os
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from one_call import laplace, logistic_data, target_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = {
    "amagold": lambda t: sg.AMAGOLD(t, step_size=0.01, num_leapfrog_steps=10,
                                    friction=0.5),
    "sghmc": lambda t: sg.SGHMC(t, step_size=0.01, friction=1.),
}


def run(kernel_name, seed, num_examples=200_000, dim=20, batch_size=1000,
        num_steps=1000):
  x, y = logistic_data(num_examples, dim, seed=0)
  mode, sd = laplace(x, y)
  target = target_for(x, y, batch_size)
  start = time.perf_counter()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", sg.WarmupNotConvergedWarning)
    warm = sg.warm_up(KERNELS[kernel_name](target), tf.zeros([4, dim]),
                      num_steps=num_steps, seed=[seed, 7])
  warned = any(issubclass(w.category, sg.WarmupNotConvergedWarning)
               for w in caught)
  arrival = warm.report.arrival
  true_distance = np.abs(np.asarray(warm.state).mean(0) - mode) / sd
  return dict(
      kernel=kernel_name, seed=seed, warned=warned,
      arrived=bool(warm.report.arrived), distance=float(arrival.distance),
      agreement=float(arrival.agreement),
      coordinates_flagged=int(arrival.coordinates.size),
      true_max_distance_sd=float(true_distance.max()),
      step_size=float(warm.report.step_size),
      seconds=time.perf_counter() - start)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
  parser.add_argument("--kernels", nargs="*", default=["amagold"])
  parser.add_argument("--out", default=os.path.join(HERE, "results"))
  args = parser.parse_args()
  rows = []
  for kernel_name in args.kernels:
    for seed in args.seeds:
      row = run(kernel_name, seed)
      rows.append(row)
      print(f"{row['kernel']} seed {row['seed']}: "
            f"{'caught' if not row['arrived'] else 'MISSED'} (distance "
            f"{row['distance']:.0f} sds, agreement {row['agreement']:.0f}, "
            f"{row['coordinates_flagged']} of 20 coordinates; true distance "
            f"{row['true_max_distance_sd']:.0f} Laplace sds)", flush=True)
  caught = sum(not r["arrived"] for r in rows)
  print(f"caught {caught} of {len(rows)}")
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, "cold_start.json"), "w") as f:
    json.dump(dict(date=datetime.date.today().isoformat(), rows=rows,
                   caught=caught, runs=len(rows)), f, indent=1)


if __name__ == "__main__":
  main()
