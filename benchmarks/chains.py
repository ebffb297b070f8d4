"""Chains: time per step of C independent chains batched in one kernel,
relative to one chain and relative to the kernel's own gradient floor.

Goals: sampler / gradient floor <= 1.15 at every chain count for
SGLD, SGHMC and AMAGOLD (minibatch M-H) with shared minibatches; 64 shared-
batch chains <= 4x one chain; the per-chain-minibatch floor within 2x of the
shared one at 64 chains.

Problem: the Bayesian logistic regression of common.py (N = 100,000,
d = 20, minibatch 100). The state is [C, 20]; one compiled `while_loop`
runs the kernel; times per step (per gradient evaluation for AMAGOLD) are
measured for C = 1, 8, 64, 256. Every kernel and floor at every chain count
of one batching mode is timed in one interleaved sweep, each calibrated to
about the same wall time, over several repeats; every ratio is taken within
one repeat (sampler / floor at the same C, t(C) / t(1) for the same kernel)
and reported as median [min, max] over repeats. Times are wall clock and,
TensorFlow is limited to one thread (intra- and inter-op; `--threads 0` for
its default) when run as a script, also process CPU time (the steadier of the two on a shared
machine); the tables print CPU time.

Two ways the chains get their minibatches:

* shared: `tfp_sgmcmc.InMemoryTarget` as it is. It draws ONE set of n
  indices per step and every chain evaluates its gradient on that batch
  (common random numbers; the chains' injected noise is independent). The
  gradient is then one [n, d] x [d, C] matrix product.
* per-chain: `InMemoryTarget(..., independent_minibatches=True)`
  (`common.PerChainLogistic`), which draws [C, n] indices in one draw, so
  each chain sees its own minibatch (C times the gathered data per step).

Floors (what any sampler of this kind must do per step):

* gradient only (floor): draw the minibatch and compute its gradient.
* gradient + energy: also the per-chain minibatch energy U~, which every
  kernel reports (`energy`, `target_log_prob`) and its divergence flag reads.
* gradient + energy + noise: also d x C standard normals (SGLD's minimum
  when the step reports its energy).
* gradient + noise (floor): the gradient and the d x C normals, no energy:
  the floor of SGLD / SGHMC built with `compute_energy=False` (rows "SGLD
  (no energy)", "SGHMC (no energy)"), which skip the per-chain minibatch
  energy their update does not use. "AMAGOLD ... (no energy)" skips the
  last leapfrog step's diagnostic energy; its minibatch M-H test still
  computes its two energies, so it is compared with the energy floor.
* gradient + noise + momentum (floor): also a momentum carried from step
  to step and updated as Euler SGHMC's (one more state of d x C floats read
  and written each step): the floor of "SGHMC (no energy)".
* ... + divergence check (floor): also the per-chain check SGHMC keeps
  (theta' finite, else the chain keeps theta and r: one reduction and two
  selects, with the library's own functions).
* noise only: the d x C standard normals alone.
* per-chain, indices + gather: draw [C, n] indices and gather the rows.
* per-chain, gather (fixed random indices): the gather alone, from random
  indices drawn once outside the loop (the memory floor).

Floor proofs (`floors.py`, timed in the shared sweep when 64 chains are
measured, printed after the tables and written under "floors"): the
normals against NumPy's C generators, the gather of 6,400 random rows
against C's `np.take`, and the 64-chain gradient's own arithmetic.

    python benchmarks/chains.py            # 1, 8, 64, 256 chains
    python benchmarks/chains.py --quick    # 1 and 64 chains
    python benchmarks/chains.py --profile SGLD,shared,64 [--profile-dir D]
        # optimized HLO of that configuration's compiled loop, a listing of
        # its while body (what one step computes) and a TF profiler trace
"""

import argparse
import os
import re

import common  # noqa: E402
import floors  # noqa: E402
import harness  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import dynamics  # noqa: E402
from tfp_sgmcmc import _structure  # noqa: E402

T = 10


def set_threads(threads):
  """`threads` intra-op and inter-op threads (0: TensorFlow's default).
  With one, every configuration runs on one core and process CPU time
  counts only work (a thread pool's idle threads spin, which a loaded
  machine turns into CPU time). Must run before TensorFlow executes
  anything; a no-op afterwards."""
  if not threads:
    return False
  try:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    return True
  except RuntimeError:
    return False


GOAL_OVER_FLOOR = 1.15
GOAL_64_OVER_1 = 4.
GOAL_PER_CHAIN_FLOOR = 2.


GradientOnly = common.GradientOnly  # The floor kernel, shared with overhead.py.

# JSON field of each shared-batch row -> the floor it is taken over.
SHARED_FLOORS = {
    "over_energy_noise_floor": "gradient + energy + noise",
    "over_noise_floor": "gradient + noise (floor)",
    "over_momentum_floor": "gradient + noise + momentum (floor)",
    "over_momentum_check_floor": "... + divergence check (floor)",
}


class MomentumFloor:
  """The gradient + noise floor with a momentum carried from step to step,
  as SGHMC must: r' = (1 - hC) r - h grad + s z, theta' = theta + h r'
  (constants of the logistic runs below), and nothing else: SGHMC's own
  floor, without its divergence check, step count and results."""

  def __init__(self, target, h=1e-5, friction=100., check=False):
    self.target = target
    self.h = h
    self.friction = friction
    self.check = check

  def bootstrap_results(self, state):
    if self.check:
      return tf.zeros_like(state), tf.zeros(tf.shape(state)[:-1], tf.bool)
    return tf.zeros_like(state)

  def one_step(self, state, results, seed):
    momentum, diverged = results if self.check else (results, None)
    grad = self.target.gradient(state, seed)
    z = dynamics.standard_normal_like(state, dynamics.derive_seeds(seed, 2)[1])
    new_momentum = ((1. - self.h * self.friction) * momentum - self.h * grad
                    + np.sqrt(2. * self.friction * self.h) * z)
    new_state = state + self.h * new_momentum
    if not self.check:
      return new_state, new_momentum
    # The per-chain divergence check SGHMC keeps (the library's own
    # functions): theta' finite, else the chain keeps theta and r.
    diverged = diverged | ~_structure.finite_per_chain(None, [new_state],
                                                    chains=diverged)
    return (_structure.choose(diverged, state, new_state),
            (_structure.choose(diverged, momentum, new_momentum),
             diverged))


class NoiseOnly:
  """d x C standard normals per step (the injected noise), nothing else."""

  def bootstrap_results(self, state):
    del state
    return ()

  def one_step(self, state, results, seed):
    return state + 1e-9 * dynamics.standard_normal_like(state, seed), results


class GatherOnly:
  """Per-chain minibatches without arithmetic: draw the [C, n] indices
  (`fixed=False`) or cycle through 16 sets drawn once outside the loop
  (`fixed=True`: the gather alone), and gather the rows."""

  def __init__(self, target, fixed=False):
    self.target = target
    self.fixed = fixed

  def bootstrap_results(self, state):
    if not self.fixed:
      return ()
    return tf.stack([self.target.minibatch_indices([i, 7], state)
                     for i in range(16)]), tf.constant(0)

  def one_step(self, state, results, seed):
    if self.fixed:
      table, i = results
      indices = tf.gather(table, i % 16)
      results = (table, i + 1)
    else:
      indices = self.target.minibatch_indices(seed, state)
    x, y = tf.nest.map_structure(lambda d: tf.gather(d, indices),
                                 self.target.data)
    touch = tf.reduce_sum(x, -2) + tf.reduce_sum(y, -1)[..., None]
    return state + 1e-30 * touch, results


def kernels(target, batching, quick=False, smoke=False):
  """name -> (kernel, gradients per step, is a floor)."""
  out = {"gradient only (floor)": (GradientOnly(target), 1, True)}
  if smoke:
    out["SGLD"] = (sg.SGLD(target, 1e-5), 1, False)
    return out
  if batching == "shared":
    out["gradient + energy"] = (GradientOnly(target, energy=True), 1, True)
    out["gradient + energy + noise"] = (
        GradientOnly(target, energy=True, noise=True), 1, True)
    out["noise only"] = (NoiseOnly(), 1, True)
    out["gradient + noise (floor)"] = (GradientOnly(target, noise=True), 1,
                                       True)
    out["gradient + noise + momentum (floor)"] = (MomentumFloor(target), 1,
                                                  True)
    out["... + divergence check (floor)"] = (
        MomentumFloor(target, check=True), 1, True)
  else:
    out["indices + gather"] = (GatherOnly(target), 1, True)
    out["gather (fixed random indices)"] = (GatherOnly(target, fixed=True),
                                            1, True)
  out["SGLD"] = (sg.SGLD(target, 1e-5), 1, False)
  if batching == "shared":
    out["SGLD (no energy)"] = (sg.SGLD(target, 1e-5, compute_energy=False),
                               1, False)
    out["SGHMC"] = (sg.SGHMC(target, 1e-5, 100.), 1, False)
    out["SGHMC (no energy)"] = (sg.SGHMC(target, 1e-5, 100.,
                                         compute_energy=False), 1, False)
    out["AMAGOLD T=10 minibatch M-H"] = (sg.AMAGOLD(
        target, 1e-5, num_leapfrog_steps=T, friction=50.,
        acceptance_energy="minibatch"), T, False)
    out["AMAGOLD T=10 minibatch M-H (no energy)"] = (sg.AMAGOLD(
        target, 1e-5, num_leapfrog_steps=T, friction=50.,
        acceptance_energy="minibatch", compute_energy=False), T, False)
    if not quick:
      out["AMAGOLD T=10 exact M-H"] = (sg.AMAGOLD(
          target, 1e-5, num_leapfrog_steps=T, friction=50.), T, False)
  return out


def profile(problem, spec, out_dir, steps=2000):
  """Writes the optimized HLO of one configuration's compiled loop, a
  listing of its while body, and a TF profiler trace of `steps` steps."""
  name, batching, chains = spec.split(",")
  chains = int(chains)
  target = (problem.target() if batching == "shared" else
            common.PerChainLogistic(problem))
  table = kernels(target, batching)
  matches = [k for k in table if k.lower().startswith(name.lower())]
  if not matches:
    raise ValueError(f"--profile: no kernel named {name!r} for "
                     f"{batching!r}; choose from {list(table)}")
  kernel = table[matches[0]][0]
  loop = harness.kernel_loop(kernel)
  args = (tf.zeros([chains, problem.d]), tf.constant([1, 2]))
  os.makedirs(out_dir, exist_ok=True)
  stem = os.path.join(out_dir, re.sub(r"\W+", "_", f"{matches[0]}_{batching}"
                                      f"_{chains}"))
  hlo = loop.experimental_get_compiler_ir(*args, tf.constant(steps))(
      stage="optimized_hlo")
  with open(stem + ".hlo.txt", "w") as f:
    f.write(hlo)
  body = while_body_listing(hlo)
  with open(stem + ".body.txt", "w") as f:
    f.write(body)
  loop(*args, tf.constant(10)).numpy()  # Compile outside the trace.
  logdir = stem + "_trace"
  tf.profiler.experimental.start(logdir)
  loop(*args, tf.constant(steps)).numpy()
  tf.profiler.experimental.stop()
  print(f"{matches[0]} ({batching}, {chains} chains): while body of the "
        f"compiled loop (optimized HLO, one line per top-level "
        f"instruction):\n{body}\nwrote {stem}.hlo.txt, {stem}.body.txt and "
        f"the profiler trace {logdir} (TensorBoard's profile plugin)")


def while_body_listing(hlo):
  """The top-level instructions of the largest while body in an optimized
  HLO module: shape, opcode, name (fusions say what they fuse)."""
  blocks = re.split(r"\n(?=\S)", hlo)
  bodies = [b for b in blocks if re.match(r"%\S*body", b)]
  if not bodies:
    return "(no while body found)"
  body = max(bodies, key=len)
  lines = []
  for line in body.split("\n")[1:]:
    m = re.match(r"\s*(?:ROOT )?%(\S+) = (\S+) ([a-z-]+)\(", line)
    if not m or m.group(3) in ("get-tuple-element", "constant", "parameter",
                               "tuple", "bitcast"):
      continue
    lines.append(f"  {m.group(2):28s} {m.group(3):12s} {m.group(1)}")
  return "\n".join(lines)


def main(quick=False, smoke=False, repeats=None, chains=None,
         target_seconds=None, out=None, n=100_000):
  repeats = repeats or (1 if smoke else 3 if quick else 5)
  chains = chains or ([1, 4] if smoke else [1, 64] if quick
                      else [1, 8, 64, 256])
  target_seconds = target_seconds or (0.02 if smoke else 0.1)
  problem = common.synthetic_logistic(n=n)
  targets = {"shared": problem.target(),
             "per-chain": common.PerChainLogistic(problem)}
  if smoke:  # The library's shared batches are exercised by the others.
    del targets["shared"]
  seed = tf.constant([1, 2])
  rows = []
  print(f"{problem.name}, minibatch {problem.batch_size}; {repeats} "
        f"interleaved repeats; time per gradient evaluation (CPU time); "
        f"x = ratio to 1 chain, median [min, max]", flush=True)
  cpu_all = {}
  floor_cpu = {}
  with_floors = not smoke and 64 in chains and 1 in chains
  for batching, target in targets.items():
    table = kernels(target, batching, quick, smoke)
    fns = {}
    for name, (kernel, _, _) in table.items():
      loop = harness.kernel_loop(kernel)
      for c in chains:
        fns[(name, c)] = (loop, (tf.zeros([c, problem.d]), seed))
    if batching == "shared" and with_floors:
      for name, (fn, args, _) in floors.all_fns(problem).items():
        fns[(name, "proof")] = (fn, args)
    wall, cpu, steps = harness.interleaved_per_step_cpu(fns, target_seconds,
                                                         repeats)
    if batching == "shared" and with_floors:
      floor_cpu = {k[0]: cpu.pop(k) for k in list(cpu) if k[1] == "proof"}
    cpu_all[batching] = cpu
    print(f"\n{batching} minibatches\n{'kernel':32s} " +
          " ".join(f"{f'{c} chains':>24s}" for c in chains))
    for name, (_, grads, is_floor) in table.items():
      cells = []
      for c in chains:
        key, one = (name, c), (name, chains[0])
        us = [1e6 * t / grads for t in cpu[key]]
        floor = cpu[("gradient only (floor)", c)]
        row = dict(
            kernel=name, batches=batching, chains=c, floor=is_floor,
            us_per_gradient=harness.spread(us),
            wall_us_per_gradient=harness.spread(
                [1e6 * t / grads for t in wall[key]]),
            ratio_to_one_chain=harness.ratios(cpu[key], cpu[one]),
            wall_ratio_to_one_chain=harness.ratios(wall[key], wall[one]),
            over_gradient_floor=harness.ratios(
                [t / grads for t in cpu[key]], floor),
            wall_over_gradient_floor=harness.ratios(
                [t / grads for t in wall[key]],
                wall[("gradient only (floor)", c)]),
            us_per_chain_gradient=float(np.median(us)) / c,
            steps_timed=steps[key])
        if batching == "shared" and not smoke:
          for field, floor_name in SHARED_FLOORS.items():
            row[field] = harness.ratios([t / grads for t in cpu[key]],
                                        cpu[(floor_name, c)])
        rows.append(row)
        cells.append(f"{row['us_per_gradient']['median']:8.1f}us "
                     f"x{harness.fmt(row['ratio_to_one_chain'], digits=1)}")
      print(f"{name:32s} " + " ".join(f"{c:>24s}" for c in cells),
            flush=True)
  by = {(r["kernel"], r["batches"], r["chains"]): r for r in rows}
  if not smoke:
    print("\nsampler / gradient floor at the same chain count (goal <= "
          f"{GOAL_OVER_FLOOR}), shared minibatches, median (min-max over "
          "repeats); [ / gradient + energy + noise floor; for the (no "
          "energy) rows / gradient + noise floor, for SGHMC (no energy) / "
          "gradient + noise + momentum floor, / that + divergence check]")
    for name, (_, _, is_floor) in kernels(targets["shared"], "shared",
                                          quick).items():
      if name == "gradient only (floor)":
        continue
      cells = []
      for c in chains:
        r = by[(name, "shared", c)]
        o = r["over_gradient_floor"]
        cell = f"{o['median']:4.2f} ({o['min']:4.2f}-{o['max']:4.2f})"
        if not is_floor:
          # AMAGOLD's minibatch test still computes its two energies.
          no_energy = ("no energy" in name and
                       not name.startswith("AMAGOLD"))
          other = ("over_noise_floor" if no_energy
                   else "over_energy_noise_floor")
          if name == "SGHMC (no energy)":
            cell += (f" [{r['over_momentum_floor']['median']:4.2f}, "
                     f"{r['over_momentum_check_floor']['median']:4.2f}]")
          else:
            cell += f" [{r[other]['median']:4.2f}]"
        cells.append(cell)
      print(f"  {name:36s} " + " ".join(f"{c:>30s}" for c in cells))
    if 64 in chains:
      print(f"\n64 chains / 1 chain (goal <= {GOAL_64_OVER_1:g}), shared:")
      for name in kernels(targets["shared"], "shared", quick):
        r = by[(name, "shared", 64)]
        print(f"  {name:32s} {harness.fmt(r['ratio_to_one_chain'])}")
      pc = cpu_all["per-chain"][("gradient only (floor)", 64)]
      sh = cpu_all["shared"][("gradient only (floor)", 64)]
      print(f"\nper-chain / shared gradient floor at 64 chains (goal <= "
            f"{GOAL_PER_CHAIN_FLOOR:g}): {harness.fmt(harness.ratios(pc, sh))}")
      for name in ("indices + gather", "gather (fixed random indices)"):
        g = cpu_all["per-chain"][(name, 64)]
        print(f"  {name} alone / shared gradient floor: "
              f"{harness.fmt(harness.ratios(g, sh))}")
  proofs = {}
  if floor_cpu:
    shared = cpu_all["shared"]
    proofs = floors.report(floor_cpu, {
        c: shared[("gradient only (floor)", c)] for c in (1, 64)})
  if not smoke or out:
    harness.write_json(os.path.join(out or harness.RESULTS, "chains.json"),
                       dict(rows=rows, problem=problem.name,
                            batch_size=problem.batch_size, repeats=repeats,
                            target_seconds=target_seconds, quick=quick,
                            floors=proofs,
                            timing="process CPU time (wall in wall_*)",
                            goals=dict(over_gradient_floor=GOAL_OVER_FLOOR,
                                       chains64_over_1=GOAL_64_OVER_1,
                                       per_chain_floor_over_shared=(
                                           GOAL_PER_CHAIN_FLOOR))))
  return rows


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true",
                      help="1 and 64 chains, 3 repeats, no exact-M-H AMAGOLD")
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument("--out", default=None,
                      help="JSON directory (default benchmarks/results)")
  parser.add_argument("--profile", default=None, metavar="KERNEL,BATCHES,C",
                      help="instead of the table, profile one configuration,"
                      " e.g. SGLD,shared,64 or 'gradient only,per-chain,64'")
  parser.add_argument("--profile-dir", default=os.path.join(
      harness.RESULTS, "profile"))
  parser.add_argument("--threads", type=int, default=1,
                      help="TensorFlow intra/inter-op threads (default 1: "
                      "one core per run; 0: TensorFlow's default)")
  a = parser.parse_args()
  set_threads(a.threads)
  if a.profile:
    profile(common.synthetic_logistic(), a.profile, a.profile_dir)
  else:
    main(quick=a.quick, repeats=a.repeats, out=a.out)
