"""Paper 003, Fig. 8: SGHMC with m = 1, 3, 5 steps per sample (eps m fixed).

The reproduction (papers/003, Sec. 4.3) trains its MNIST BNN with SGHMC for
m = 1, 3 and 5 "steps iterated over before we take a sample", with eps m
fixed, and finds that a larger m reaches a low test error sooner (learning
curves after 100 warm-up epochs). The text does not say whether the m steps
share one minibatch. Here they do (as in an HMC trajectory on one
minibatch, the reading under which eps m fixed keeps the time simulated per
minibatch fixed): for each minibatch, m SGHMC steps of size h = h_1 / m with
the friction C fixed, i.e. in the SGD-with-momentum units eta = eta_1 / m^2
and alpha = alpha_1 / m, with eta_1 = 2e-6 and alpha_1 = 0.01 (the paper's
SGHMC setting), and fresh injected noise at every step. An epoch is 80
minibatches (so m x 80 gradients).

Protocol otherwise `sgnuts_mnist.py`'s: the 8,000 / 2,000 split of the
MNIST test file, MLP 784-100-10, N(0, 1) prior, minibatch 100. After
`--warmup` epochs, `--draws-per-epoch` draws per epoch enter the Bayesian
average; the curve is its test error after each epoch (during warm-up: the
current weights').

    python examples/papers/sghmc/sghmc_steps_per_sample.py [--warmup 2] \
        [--epochs 10]

Writes steps_per_sample.png, .md and .json into --out (default
out/sghmc_steps_per_sample).
"""

import argparse
import json
import os
import time

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg

import mnist_mlp as base


class HeldBatchTarget(sg.InMemoryTarget):
  """An `InMemoryTarget` whose minibatch is chosen by `batch_seed`, a
  variable the caller sets, not by the step's seed: consecutive steps
  share a minibatch until the caller changes it."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.batch_seed = tf.Variable([0, 0], dtype=tf.int32, trainable=False)

  def minibatch_indices(self, seed, state=None):
    del seed
    return super().minibatch_indices(tf.identity(self.batch_seed), state)


def make_target(train, batch_size):
  generic = base.make_target(train, batch_size)
  return HeldBatchTarget(generic._log_likelihood_fn, train, batch_size,  # pylint: disable=protected-access
                         log_prior_fn=generic._log_prior_fn)  # pylint: disable=protected-access


def learning_curve(m, train, test, warmup, epochs, hidden, batch_size,
                   draws_per_epoch, seed, eta=2e-6, alpha=0.01):
  target = make_target(train, batch_size)
  kernel = sg.SGHMC.from_sgd_momentum(target, learning_rate=eta / m ** 2,
                                      momentum_decay=alpha / m)
  run = base.make_runner(kernel)
  state = base.initial_state(hidden, seed)
  results = kernel.bootstrap_results(state)
  x, y = test
  batches = len(train[0]) // batch_size
  every = batches // draws_per_epoch
  rng = np.random.default_rng(seed + 100)
  errors, prob_sum, count = [], 0., 0
  start = time.perf_counter()
  for epoch in range(warmup + epochs):
    for b in range(batches):
      target.batch_seed.assign(rng.integers(0, 2 ** 31 - 1, 2,
                                            dtype=np.int32))
      state, results, _ = run(state, results, tf.constant(m),
                              tf.constant([seed, epoch * batches + b]))
      if epoch >= warmup and (b + 1) % every == 0:
        prob_sum = prob_sum + tf.nn.softmax(base.mlp_logits(state, x)).numpy()
        count += 1
    if epoch < warmup:
      probs = tf.nn.softmax(base.mlp_logits(state, x)).numpy()
    else:
      probs = prob_sum / count
    errors.append(float(np.mean(np.argmax(probs, -1) != y)))
  return dict(error=errors, seconds=time.perf_counter() - start,
              gradients_per_epoch=m * batches)


def run_experiment(ms=(1, 3, 5), warmup=2, epochs=10, num_train=8000,
                   hidden=100, batch_size=100, draws_per_epoch=8, seed=0,
                   data_dir=base.SHARED_DATA, log=print):
  train, test = base.load_split(data_dir, num_train)
  out = {}
  for m in ms:
    out[m] = learning_curve(m, train, test, warmup, epochs, hidden,
                            batch_size, draws_per_epoch, seed)
    log(f"m = {m}: " + ", ".join(f"{e:.4f}" for e in out[m]["error"]) +
        f" ({out[m]['seconds']:.0f} s)")
  return out


def write_table(result, warmup):
  ms = list(result)
  lines = ["| epoch | " + " | ".join(f"m = {m}" for m in ms) + " |",
           "|---|" + "---|" * len(ms)]
  for e in range(len(result[ms[0]]["error"])):
    tag = f"{e + 1}" + (" (warm-up)" if e < warmup else "")
    lines.append(f"| {tag} | " + " | ".join(
        f"{100 * result[m]['error'][e]:.2f}%" for m in ms) + " |")
  return "\n".join(lines) + "\n"


def write_figure(result, warmup, path):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6, 4))
  for m, r in result.items():
    ax.plot(np.arange(1, len(r["error"]) + 1), 100 * np.asarray(r["error"]),
            "o-", ms=3, label=f"m = {m}")
  ax.axvline(warmup + 0.5, color="grey", lw=0.8, ls=":")
  ax.set_xlabel("epoch (80 minibatches)")
  ax.set_ylabel("test error (%)")
  ax.set_title("SGHMC, m steps per minibatch with eps m fixed (MNIST split)",
               fontsize=9)
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default=os.path.join(
      "out", "sghmc_steps_per_sample"))
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--epochs", type=int, default=10)
  parser.add_argument("--data-dir", default=base.SHARED_DATA)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  result = run_experiment(warmup=args.warmup, epochs=args.epochs,
                          data_dir=args.data_dir, seed=args.seed)
  os.makedirs(args.out, exist_ok=True)
  table = write_table(result, args.warmup)
  print(table)
  with open(os.path.join(args.out, "steps_per_sample.md"), "w") as f:
    f.write(table)
  with open(os.path.join(args.out, "steps_per_sample.json"), "w") as f:
    json.dump(dict(settings=vars(args),
                   results={str(m): r for m, r in result.items()}), f,
              indent=1)
  write_figure(result, args.warmup, os.path.join(args.out,
                                                 "steps_per_sample.png"))


if __name__ == "__main__":
  main()
