"""AMAGOLD with the minibatch M-H test against its own floor, at 1 to 256
batched chains.

AMAGOLD's outer step is T leapfrog steps (one gradient and one draw each)
and an M-H test that needs two minibatch energies, U~(theta) and
U~(theta*), on a batch of its own. Its floor is therefore the gradient +
noise floor of `chains.py` plus two energies every T gradients; this script
times that floor ("gradient + noise + 2 energies / T") beside AMAGOLD at
T = 10 and T = 100 (where the test is amortised away), SGHMC and the
gradient + noise floor, all without the per-step reported energy
(`compute_energy=False`), on chains.py's logistic regression (N = 1e5,
d = 20, shared minibatch of 100). One thread, process CPU time per
gradient, interleaved repeats; ratios are taken within a repeat and
reported as median [min, max].

    python benchmarks/amagold_floor.py            # 1, 8, 64, 256 chains
    python benchmarks/amagold_floor.py --chains 8 256
"""

import argparse

import chains  # noqa: E402
import common  # noqa: E402
import harness  # noqa: E402

import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import dynamics  # noqa: E402


class TestFloor:
  """T gradient + noise steps, then two energies on a batch of their own:
  what AMAGOLD's outer step must compute, and nothing else."""

  def __init__(self, target, num_steps):
    self.target = target
    self.num_steps = num_steps
    self.step = common.GradientOnly(target, noise=True)

  def bootstrap_results(self, state):
    del state
    return ()

  def one_step(self, state, results, seed):
    loop_seed, energy_seed = dynamics.derive_seeds(seed, 2)

    def body(t, state):  # A loop, as AMAGOLD's leapfrog steps run.
      step_seed = dynamics.derive_seeds(loop_seed + t, 1)[0]
      return t + 1, self.step.one_step(state, (), step_seed)[0]
    _, state = tf.while_loop(lambda t, _: t < self.num_steps, body,
                             (tf.constant(0), state))
    current, proposed = self.target.minibatch_energies(
        [state, state + 1e-6], energy_seed)
    return state + 1e-30 * (current - proposed)[..., None], results


def configurations(target):
  """name -> (kernel, gradients per kernel step)."""
  out = {"gradient + noise (floor)": (common.GradientOnly(target, noise=True),
                                      1)}
  for t in (10, 100):
    out[f"gradient + noise + 2 energies / {t}"] = (TestFloor(target, t), t)
    out[f"AMAGOLD T={t} minibatch M-H"] = (sg.AMAGOLD(
        target, 1e-5, num_leapfrog_steps=t, friction=50.,
        acceptance_energy="minibatch", compute_energy=False), t)
  out["SGHMC"] = (sg.SGHMC(target, 1e-5, 100., compute_energy=False), 1)
  return out


def main(chain_counts=(1, 8, 64, 256), repeats=3):
  problem = common.synthetic_logistic()
  print("logistic N=100000 d=20, minibatch 100, one thread, CPU time per "
        f"gradient; {repeats} interleaved repeats; all without the per-step "
        "reported energy")
  for c in chain_counts:
    target = problem.target()
    state = problem.init(c)
    configs = configurations(target)
    times = {name: [] for name in configs}
    loops = {}
    for name, (kernel, g) in configs.items():
      steps = max(4, int(20000 // (g * c)))  # About 20,000 chain-gradients.
      loops[name] = (harness.kernel_loop(kernel, steps), steps, g)
      _ = harness.cpu_timed(loops[name][0], state, tf.constant([1, 2]))
    for _ in range(repeats):
      for name, (loop, steps, g) in loops.items():
        t = harness.cpu_timed(loop, state, tf.constant([1, 2]))
        times[name].append(t / (steps * g))
    floor = times["gradient + noise (floor)"]
    print(f"\n{c} chains (gradient + noise floor "
          f"{1e6 * min(floor):.1f} us per gradient)")
    for name, ts in times.items():
      r = harness.ratios(ts, floor)
      print(f"  {name:40s} / gradient + noise floor  {r['median']:.2f} "
            f"[{r['min']:.2f}, {r['max']:.2f}]")
    for t in (10, 100):
      r = harness.ratios(times[f"AMAGOLD T={t} minibatch M-H"],
                         times[f"gradient + noise + 2 energies / {t}"])
      print(f"  AMAGOLD T={t} / its floor (gradient + noise + 2 energies / "
            f"{t}): {r['median']:.2f} [{r['min']:.2f}, {r['max']:.2f}]")


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--chains", type=int, nargs="+", default=[1, 8, 64, 256])
  parser.add_argument("--repeats", type=int, default=3)
  a = parser.parse_args()
  chains.set_threads(1)
  main(tuple(a.chains), a.repeats)
