"""Paper 003, Fig. 9: SG-NUTS learning curves on MNIST (small), beside SGHMC.

The reproduction (papers/003, Sec. 5) ran SG-NUTS on its MNIST BNN for 20
warm-up epochs and 50 sampled epochs and shows test-accuracy curves reaching
0.94 (MNIST) and 0.85 (Fashion-MNIST). Here, with `sgnuts_mnist.py`'s
protocol (the 8,000 / 2,000 split of the MNIST test file, MLP 784-100-10,
N(0, 1) prior, minibatch 100, so an epoch is 80 iterations; SGHMC with the
paper's eta = 2e-6, alpha = 0.01; SG-NUTS with the same step size and
friction, trajectories capped at 5 doublings), both samplers run
`--warmup` warm-up epochs and `--epochs` sampled epochs. After warm-up,
`--draws-per-epoch` draws per epoch enter the Bayesian average of the
softmax; the curve is the test accuracy of that running average after each
epoch (during warm-up: of the current weights). Fashion-MNIST is not run:
only 900 unlabelled Fashion-MNIST images are on these machines.

    python examples/papers/sghmc/sgnuts_curves.py [--warmup 2] [--epochs 8] \
        [--out DIR]

Default: 2 warm-up + 8 sampled epochs (the paper: 20 + 50; an SG-NUTS epoch
costs 31 times SGHMC's gradients here). Writes sgnuts_curves.png,
sgnuts_curves.md and sgnuts_curves.json into --out (default
out/sgnuts_curves).
"""

import argparse
import json
import os
import time

import numpy as np
import tensorflow as tf

import mnist_mlp as base

PAPER_FINAL = {"MNIST": 0.94, "Fashion-MNIST": 0.85}


def learning_curve(kernel, init, warmup, epochs, steps_per_epoch,
                   draws_per_epoch, test, seed):
  """Test accuracy after each epoch (warm-up: current weights; after: the
  running Bayesian average), gradients and seconds per epoch."""
  run = base.make_runner(kernel)
  x, y = test
  results = kernel.bootstrap_results(init)
  seed = tf.constant(seed, tf.int32)
  run(init, results, tf.constant(0), seed)   # compile outside the timing
  state, curve, grads, seconds = init, [], [], []
  prob_sum, count = 0., 0
  chunk = steps_per_epoch // draws_per_epoch
  for epoch in range(warmup + epochs):
    start, used = time.perf_counter(), 0
    epoch_probs = []
    for k in range(draws_per_epoch):
      state, results, g = run(state, results, tf.constant(chunk),
                              seed + 1000 * epoch + k)
      used += int(g)
      epoch_probs.append(tf.nn.softmax(base.mlp_logits(state, x)).numpy())
    seconds.append(time.perf_counter() - start)
    grads.append(used)
    if not all(np.all(np.isfinite(p.numpy())) for p in state):
      curve += [float("nan")] * (warmup + epochs - epoch)
      break
    if epoch < warmup:
      probs = epoch_probs[-1]
    else:
      prob_sum, count = prob_sum + np.sum(epoch_probs, 0), count + len(
          epoch_probs)
      probs = prob_sum / count
    curve.append(float(np.mean(np.argmax(probs, -1) == y)))
  return dict(accuracy=curve, gradients=grads, seconds=seconds)


def run_experiment(warmup=2, epochs=8, num_train=8000, hidden=100,
                   batch_size=100, max_tree_depth=5, draws_per_epoch=8,
                   seed=0, learning_rate=2e-6, data_dir=base.SHARED_DATA,
                   methods=("SGHMC", "SG-NUTS"), log=print):
  train, test = base.load_split(data_dir, num_train)
  target = base.make_target(train, batch_size)
  init = base.initial_state(hidden, seed)
  kernels = base.make_kernels(target, learning_rate, 0.01, max_tree_depth)
  steps_per_epoch = len(train[0]) // batch_size
  out = {}
  for name in methods:
    out[name] = learning_curve(kernels[name], init, warmup, epochs,
                               steps_per_epoch, draws_per_epoch, test,
                               [seed, 17])
    log(f"{name}: " + ", ".join(f"{a:.3f}" for a in out[name]["accuracy"])
        + f" ({sum(out[name]['seconds']):.0f} s)")
  return out


def write_table(result, warmup):
  names = list(result)
  lines = ["| epoch | " + " | ".join(names) + " |",
           "|---|" + "---|" * len(names)]
  n = len(result[names[0]]["accuracy"])
  for e in range(n):
    tag = f"{e + 1}" + (" (warm-up)" if e < warmup else "")
    lines.append(f"| {tag} | " + " | ".join(
        f"{result[m]['accuracy'][e]:.4f}" for m in names) + " |")
  lines.append("| gradients per epoch | " + " | ".join(
      f"{int(np.mean(result[m]['gradients']))}" for m in names) + " |")
  lines.append("| seconds per epoch (shared cores) | " + " | ".join(
      f"{np.mean(result[m]['seconds']):.1f}" for m in names) + " |")
  return "\n".join(lines) + "\n"


def write_figure(result, warmup, path):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6, 4))
  colors = {"SGHMC": "tab:blue", "SG-NUTS": "tab:red"}
  for name, r in result.items():
    epochs = np.arange(1, len(r["accuracy"]) + 1)
    ax.plot(epochs, r["accuracy"], "o-", ms=3, color=colors[name],
            label=name)
  ax.axvline(warmup + 0.5, color="grey", lw=0.8, ls=":")
  ax.axhline(PAPER_FINAL["MNIST"], color="k", lw=0.8, ls="--",
             label="paper's SG-NUTS after 20 + 50 epochs (60,000 images)")
  ax.set_xlabel("epoch (80 iterations)")
  ax.set_ylabel("test accuracy")
  ax.set_ylim(0.8, 1.)
  ax.legend(fontsize=7)
  ax.set_title("MNIST test-file split 8,000 / 2,000, MLP 784-100-10",
               fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default=os.path.join("out", "sgnuts_curves"))
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--epochs", type=int, default=8)
  parser.add_argument("--data-dir", default=base.SHARED_DATA)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  result = run_experiment(args.warmup, args.epochs, data_dir=args.data_dir,
                          seed=args.seed)
  os.makedirs(args.out, exist_ok=True)
  table = write_table(result, args.warmup)
  print(table)
  with open(os.path.join(args.out, "sgnuts_curves.md"), "w") as f:
    f.write(table)
  with open(os.path.join(args.out, "sgnuts_curves.json"), "w") as f:
    json.dump(dict(settings=vars(args), results=result), f, indent=1)
  write_figure(result, args.warmup, os.path.join(args.out,
                                                 "sgnuts_curves.png"))


if __name__ == "__main__":
  main()
