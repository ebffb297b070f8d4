"""Chains: time per step of C independent chains batched in one kernel,
relative to one chain (goal: 64 chains <= 4x one chain).

Problem: the Bayesian logistic regression of common.py (N = 100,000,
d = 20, minibatch 100). The state is [C, 20]; one compiled `while_loop`
runs the kernel; times per step (per gradient evaluation for AMAGOLD) are
measured for C = 1, 8, 64, 256 interleaved, each calibrated to about the
same wall time, over several repeats; ratio = t(C) / t(1) per repeat,
median [min, max] over repeats.

Two ways the chains get their minibatches:

* shared: `tfp_sgmcmc.InMemoryTarget` as it is. It draws ONE set of n
  indices per step and every chain evaluates its gradient on that batch
  (common random numbers; the chains' injected noise is independent). The
  gradient is then one [n, d] x [d, C] matrix product.
* per-chain: `InMemoryTarget(..., independent_minibatches=True)`
  (`_timing.PerChainLogistic`), which draws [C, n] indices, so each chain
  sees its own minibatch (independent gradient noise, C times the gathered
  data per step).

Kernels: SGLD (h = 1e-5), SGHMC Euler (h = 1e-5, C = 100), AMAGOLD T = 10
with the exact M-H test (one full-data energy of all C chains per 10
gradients) and with the minibatch M-H test.

    python benchmarks/chains.py            # ~3 minutes on 2 cores
    python benchmarks/chains.py --quick    # < 1 minute
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing  # noqa: E402
import common  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

T = 10


class GradientOnly:
  """The floor: draw the minibatch and compute its gradient, nothing else
  (the gradient is fed back so XLA cannot drop it). Shows how much of the
  growth with chains is the likelihood arithmetic itself."""

  def __init__(self, target):
    self.target = target

  def bootstrap_results(self, state):
    del state
    return ()

  def one_step(self, state, results, seed):
    _, grad = self.target.energy_and_gradient(state, seed)
    return state - 1e-12 * grad, results


def kernels(target, quick):
  out = {
      "gradient only (floor)": (GradientOnly(target), 1),
      "SGLD": (sg.SGLD(target, 1e-5), 1),
      "SGHMC": (sg.SGHMC(target, 1e-5, 100.), 1),
      "AMAGOLD T=10 exact M-H": (sg.AMAGOLD(
          target, 1e-5, num_leapfrog_steps=T, friction=50.), T),
  }
  if not quick:
    out["AMAGOLD T=10 minibatch M-H"] = (sg.AMAGOLD(
        target, 1e-5, num_leapfrog_steps=T, friction=50.,
        acceptance_energy="minibatch"), T)
  return out


def main(quick=False, smoke=False, repeats=None, chains=None,
         target_seconds=None, out=None, n=100_000):
  repeats = repeats or (1 if smoke else 3 if quick else 5)
  chains = chains or ([1, 4] if smoke else [1, 8, 64] if quick
                      else [1, 8, 64, 256])
  target_seconds = target_seconds or (0.02 if smoke else 0.1 if quick
                                      else 0.3)
  problem = common.synthetic_logistic(n=n)
  targets = {"shared": problem.target(),
             "per-chain": _timing.PerChainLogistic(problem)}
  if smoke:  # The library's shared batches are exercised by the others.
    del targets["shared"]
  seed = tf.constant([1, 2])
  rows = []
  print(f"{problem.name}, minibatch {problem.batch_size}; {repeats} "
        f"interleaved repeats; time per gradient evaluation; "
        f"ratio to 1 chain median [min, max]", flush=True)
  header = (f"{'kernel':28s} {'batches':10s} " +
            " ".join(f"{f'{c} chains':>22s}" for c in chains))
  print(header)
  for batching, target in targets.items():
    for name, (kernel, grads_per_step) in kernels(target, quick or smoke
                                                  ).items():
      if smoke and name != "SGLD":
        continue
      loop = _timing.kernel_loop(kernel)
      fns = {c: (loop, (tf.zeros([c, problem.d]), seed)) for c in chains}
      per_step, steps = _timing.interleaved_per_step(fns, target_seconds,
                                                     repeats)
      cells = []
      for c in chains:
        ratios = [a / b for a, b in zip(per_step[c], per_step[chains[0]])]
        us = [1e6 * t / grads_per_step for t in per_step[c]]
        row = dict(kernel=name, batches=batching, chains=c,
                   us_per_gradient=_timing.spread(us),
                   ratio_to_one_chain=_timing.spread(ratios),
                   # Least disturbed by other processes on a shared machine.
                   ratio_of_minima=min(per_step[c]) / min(
                       per_step[chains[0]]),
                   us_per_chain_gradient=float(np.median(us)) / c,
                   steps_timed=steps[c])
        rows.append(row)
        cells.append(f"{row['us_per_gradient']['median']:8.1f}us "
                     f"x{_timing.fmt(row['ratio_to_one_chain'], digits=1)}")
      print(f"{name:28s} {batching:10s} " +
            " ".join(f"{c:>22s}" for c in cells), flush=True)
  summary = {}
  for r in rows:
    if r["chains"] == 64:
      summary[f"{r['kernel']} ({r['batches']})"] = (
          r["ratio_to_one_chain"]["median"], r["ratio_of_minima"])
  if summary:
    print("\n64 chains / 1 chain (goal <= 4), median ratio / ratio of "
          "minima:\n" + "\n".join(f"  {k:42s} {a:5.2f} / {b:5.2f}"
                                  for k, (a, b) in summary.items()))
  if not smoke or out:
    common.write_json(os.path.join(out or _timing.RESULTS, "chains.json"),
                      dict(rows=rows, problem=problem.name,
                           batch_size=problem.batch_size, repeats=repeats,
                           target_seconds=target_seconds, quick=quick,
                           goal="64 chains <= 4x one chain"))
  return rows


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument("--out", default=None,
                      help="JSON directory (default benchmarks/results)")
  a = parser.parse_args()
  main(quick=a.quick, repeats=a.repeats, out=a.out)
