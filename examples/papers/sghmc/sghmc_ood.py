"""Paper 003, Fig. 6a: the SGHMC BNN's uncertainty on out-of-distribution images.

The reproduction (papers/003, Sec. 4) shows that its SGHMC-sampled MNIST BNN
is not over-confident on images unlike its training data (notMNIST). Here,
with `sgnuts_mnist.py`'s protocol (the 8,000 / 2,000 split of the MNIST test
file, MLP 784-100-10, N(0, 1) prior, minibatch 100, SGHMC with the paper's
eta = 2e-6, alpha = 0.01), the out-of-distribution set is the 900
Fashion-MNIST sprite images in ../shared/data (notMNIST is not on these
machines). The point-estimate baseline is the same kernel at temperature
1e-8, i.e. SGD with momentum (eta, alpha) without injected noise, started
from the same weights.

Reported: test accuracy on the 2,000 held-out MNIST images; mean predictive
entropy (nats; the maximum is log 10 = 2.30) on them and on the Fashion
images; the fraction of Fashion images classified with probability > 0.9;
for the Bayesian average over `draws_per_epoch` draws in each of the
`--epochs` sampled epochs after `--warmup` epochs, and for the point
estimate's final weights after the same number of epochs.

    python examples/papers/sghmc/sghmc_ood.py [--warmup 5] [--epochs 20] \
        [--out DIR]

Writes sghmc_ood.png (entropy histograms), sghmc_ood.md and sghmc_ood.json
into --out (default out/sghmc_ood).
"""

import argparse
import json
import os

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg

import mnist_mlp as base


def load_ood(data_dir=base.SHARED_DATA):
  x = np.asarray(sg.datasets.load_fashion_mnist_sprite(data_dir),
                 np.float32).reshape(-1, 784)
  return x / 255. if x.max() > 1. else x


def entropy(probs):
  return -np.sum(probs * np.log(np.maximum(probs, 1e-30)), -1)


def run(kernel, init, warmup, epochs, steps_per_epoch, draws_per_epoch,
        inputs, seed, average=True):
  """Predictive probabilities on each of `inputs` (a list of arrays): the
  average over draws after warm-up (or the final weights' if not
  `average`)."""
  runner = base.make_runner(kernel)
  results = kernel.bootstrap_results(init)
  seed = tf.constant(seed, tf.int32)
  state = init
  sums = [0. for _ in inputs]
  count = 0
  chunk = steps_per_epoch // draws_per_epoch
  for epoch in range(warmup + epochs):
    for k in range(draws_per_epoch):
      state, results, _ = runner(state, results, tf.constant(chunk),
                                 seed + 1000 * epoch + k)
      if average and epoch >= warmup:
        count += 1
        for i, x in enumerate(inputs):
          sums[i] = sums[i] + tf.nn.softmax(base.mlp_logits(state, x)).numpy()
  if average:
    return [s / count for s in sums]
  return [tf.nn.softmax(base.mlp_logits(state, x)).numpy() for x in inputs]


def run_experiment(warmup=5, epochs=20, num_train=8000, hidden=100,
                   batch_size=100, draws_per_epoch=8, seed=0,
                   learning_rate=2e-6, data_dir=base.SHARED_DATA):
  train, (x_test, y_test) = base.load_split(data_dir, num_train)
  x_ood = load_ood(data_dir)
  target = base.make_target(train, batch_size)
  init = base.initial_state(hidden, seed)
  steps_per_epoch = len(train[0]) // batch_size
  sghmc = sg.SGHMC.from_sgd_momentum(target, learning_rate=learning_rate,
                                     momentum_decay=0.01)
  sgd = sg.SGHMC.from_sgd_momentum(target, learning_rate=learning_rate,
                                   momentum_decay=0.01, temperature=1e-8)
  out = {}
  for name, kernel, average in (("SGHMC (Bayesian average)", sghmc, True),
                                ("SGD with momentum (point estimate)", sgd,
                                 False)):
    p_test, p_ood = run(kernel, init, warmup, epochs, steps_per_epoch,
                        draws_per_epoch, [x_test, x_ood], [seed, 5], average)
    out[name] = dict(
        accuracy=float(np.mean(p_test.argmax(-1) == y_test)),
        entropy_in=float(entropy(p_test).mean()),
        entropy_ood=float(entropy(p_ood).mean()),
        confident_ood=float(np.mean(p_ood.max(-1) > 0.9)),
        confident_in=float(np.mean(p_test.max(-1) > 0.9)),
        entropies_in=entropy(p_test).tolist(),
        entropies_ood=entropy(p_ood).tolist())
  return out


def write_table(result):
  lines = ["| model | MNIST test accuracy | mean entropy, MNIST | mean "
           "entropy, Fashion (OOD) | P(max prob > 0.9), MNIST | "
           "P(max prob > 0.9), Fashion |", "|---|---|---|---|---|---|"]
  for name, r in result.items():
    lines.append(f"| {name} | {r['accuracy']:.4f} | {r['entropy_in']:.3f} | "
                 f"{r['entropy_ood']:.3f} | {r['confident_in']:.3f} | "
                 f"{r['confident_ood']:.3f} |")
  return "\n".join(lines) + "\n"


def write_figure(result, path):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
  bins = np.linspace(0., np.log(10.), 31)
  for ax, (name, r) in zip(axes, result.items()):
    ax.hist(r["entropies_in"], bins, density=True, alpha=0.6,
            label="MNIST test (in distribution)")
    ax.hist(r["entropies_ood"], bins, density=True, alpha=0.6,
            label="Fashion-MNIST sprite (OOD)")
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("predictive entropy (nats)")
  axes[0].set_ylabel("density")
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default=os.path.join("out", "sghmc_ood"))
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--epochs", type=int, default=20)
  parser.add_argument("--data-dir", default=base.SHARED_DATA)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  result = run_experiment(args.warmup, args.epochs, data_dir=args.data_dir,
                          seed=args.seed)
  os.makedirs(args.out, exist_ok=True)
  table = write_table(result)
  print(table)
  with open(os.path.join(args.out, "sghmc_ood.md"), "w") as f:
    f.write(table)
  with open(os.path.join(args.out, "sghmc_ood.json"), "w") as f:
    json.dump(dict(settings=vars(args), results={
        k: {m: v for m, v in r.items() if not m.startswith("entropies")}
        for k, r in result.items()}), f, indent=1)
  write_figure(result, os.path.join(args.out, "sghmc_ood.png"))


if __name__ == "__main__":
  main()
