"""Cost of DatasetTarget's exhaustion check per minibatch draw.

A `DatasetTarget` draws one batch per gradient evaluation from a tf.data
iterator. Formerly every draw went through
`get_next_as_optional()` plus an in-graph `Assert(has_value)` (the clear
"dataset is exhausted" error); now only a dataset that can run out (finite
or unknown cardinality) takes that path, and a repeated one (infinite
cardinality) uses a plain `get_next()`.

This times both draws side by side in one process: SGLD on a repeated
dataset of the linear-regression problem (N = `--n`, batch `--batch`, d =
`--d`), `--steps` steps in one `tf.function` (not XLA: a tf.data iterator
cannot be compiled), the two arms interleaved `--repeats` times after one
warm-up run each. Prints per-step medians with [min, max] and the median of
per-pair ratios (checked / plain), in wall-clock time and in process CPU
time (all threads, tf.data's included; the steadier one on a shared
machine).

    python benchmarks/dataset_draw.py [--repeats 31] [--steps 2000]
    python benchmarks/dataset_draw.py --draw-only   # the draws alone
"""

import argparse
import json

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import harness  # noqa: E402
import tfp_sgmcmc as sg  # noqa: E402


class CheckedDraws(sg.DatasetTarget):
  """Every draw through the optional and the assertion (the old path)."""

  @property
  def _checks_exhaustion(self):
    return True


class PlainDraws(sg.DatasetTarget):
  """Every draw a plain get_next() (what a repeated dataset uses now)."""

  @property
  def _checks_exhaustion(self):
    return False


def make_run(target_cls, x, y, batch, steps, draw_only=False):
  ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(
      4096, seed=1).batch(batch, drop_remainder=True).repeat()

  def ll(w, b):
    return -0.5 * (b[1] - tf.linalg.matvec(b[0], w)) ** 2

  target = target_cls(ll, ds, x.shape[0],
                      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w**2, -1))
  kernel = sg.SGLD(target, 1e-5)

  if draw_only:
    @tf.function(autograph=False)
    def draws(state):
      def body(i, acc):
        batch, _ = target._next_batch()  # pylint: disable=protected-access
        return i + 1, acc + tf.reduce_sum(batch[1])
      _, acc = tf.while_loop(lambda i, *_: i < steps, body,
                             (tf.constant(0), tf.constant(0.)))
      return acc + tf.reduce_sum(state)
    return draws

  @tf.function(autograph=False)
  def run(state):
    results = kernel.bootstrap_results(state)

    def body(i, state, results):
      state, results = kernel.one_step(
          state, results, seed=tf.stack([i, 7]))
      return i + 1, state, results
    _, state, _ = tf.while_loop(lambda i, *_: i < steps, body,
                                (tf.constant(0), state, results))
    return state
  return run


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--repeats", type=int, default=9)
  parser.add_argument("--steps", type=int, default=2000)
  parser.add_argument("--n", type=int, default=10000)
  parser.add_argument("--d", type=int, default=10)
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--draw-only", action="store_true",
                      help="time the draws alone (no SGLD step)")
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  rng = np.random.default_rng(0)
  x = rng.normal(size=(args.n, args.d)).astype(np.float32)
  y = (x @ rng.normal(size=args.d) + rng.normal(size=args.n)).astype(
      np.float32)
  arms = {"checked": make_run(CheckedDraws, x, y, args.batch, args.steps,
                              args.draw_only),
          "plain": make_run(PlainDraws, x, y, args.batch, args.steps,
                            args.draw_only)}
  state = tf.zeros([args.d])
  for run in arms.values():
    run(state).numpy()  # Trace and warm up.
  wall = {name: [] for name in arms}
  cpu = {name: [] for name in arms}
  for r in range(args.repeats):
    order = list(arms) if r % 2 == 0 else list(arms)[::-1]
    for name in order:
      w, c = harness.timed_both(arms[name], state)
      wall[name].append(w / args.steps)
      cpu[name].append(c / args.steps)
  report = {"config": vars(args)}
  for clock, times in (("wall", wall), ("cpu", cpu)):
    ratios = [a / b for a, b in zip(times["checked"], times["plain"])]
    report[clock] = {name: harness.spread(t) for name, t in times.items()}
    report[clock]["ratio_checked_over_plain"] = harness.spread(ratios)
    for name in arms:
      print(f"{clock:4s} {name:8s} us/step: "
            f"{harness.fmt(report[clock][name], 1e6)}")
    print(f"{clock:4s} ratio checked/plain (per pair): "
          f"{harness.fmt(report[clock]['ratio_checked_over_plain'], 1., 3)}")
  if args.out:
    with open(args.out, "w") as f:
      json.dump(report, f, indent=1)


if __name__ == "__main__":
  main()
