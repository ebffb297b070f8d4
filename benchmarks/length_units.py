"""Does the trajectory length `warm_up` tunes depend on the posterior's
units? One iid Gaussian in `--dim` coordinates at sd 1 and at sd 0.005
(full batch, AMAGOLD T = 10 from a step size of one sd, friction 0.1, 4
chains, `--steps` warm-up steps with its defaults: a dense mass and ChEES):
the mean T of each window and the frozen T and step size.

    python benchmarks/length_units.py [--dim 20] [--steps 500]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402


def run(scale, dim, steps):
  target = sg.LogProbFnTarget(
      lambda w: -0.5 * tf.reduce_sum(w ** 2, -1) / scale ** 2)
  kernel = sg.AMAGOLD(target, step_size=scale, num_leapfrog_steps=10,
                      friction=0.1)
  state = scale * tf.random.stateless_normal([4, dim], seed=[1, 2])
  return sg.warm_up(kernel, state, num_steps=steps, seed=[3, 4]).report


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--dim", type=int, default=20)
  parser.add_argument("--steps", type=int, default=500)
  args = parser.parse_args()
  for scale in (1., 0.005):
    report = run(scale, args.dim, args.steps)
    means = ", ".join(f"{w['kind']} {w['num_leapfrog_steps']:.2f}"
                      for w in report.windows)
    print(f"sd {scale:g}: mean T per window {means}; frozen T = "
          f"{report.num_leapfrog_steps}, step size {report.step_size:.3f}")


if __name__ == "__main__":
  main()
