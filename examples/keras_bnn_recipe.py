"""Is the Bayesian model average on MNIST better than SGD in NLL, and when?

The question of `docs/keras_bnn.md`, "A default recipe": a 784-100-10 MLP on
the MNIST images of `../shared/data` (the 10,000-image test file, split by
`numpy.random.default_rng(0).permutation` into `--train` training images,
2,000 validation images and 2,000 test images), compared fairly:

* SGD (momentum 0.9, learning rate 0.05 on the mean loss, batch 100) scored
  at its best epoch, the one with the lowest *validation* NLL (early
  stopping on a held-out split), and reported on the test split;
* the recipe: the same SGD for `--burnin` epochs, then
  `SGHMC.from_sgd_momentum(learning_rate=lr / N, momentum_decay=0.1)` with a
  Gaussian prior of scale `--prior` and temperature `--temperature` for the
  remaining epochs, keeping `--per-epoch` samples per epoch from the first
  sampling epoch on; the running Bayesian model average (mean of the
  samples' softmax probabilities) is scored on the test split after every
  sampling epoch, so one run gives the NLL against the budget.

    nice -n 10 python examples/keras_bnn_recipe.py --epochs 40 --burnin 10 \
        --prior 0.3 --temperature 1 --out /tmp/recipe.json

Prints one line per configuration and writes the curves to `--out`.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfp_sgmcmc import datasets  # noqa: E402
import tfp_sgmcmc.keras as sgk  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data")
BATCH = 100


def load(data_dir, train):
  parts = datasets.load_mnist_split(data_dir, 0, train=slice(train),
                                    val=slice(6000, 8000))
  if train > 6000:
    raise ValueError("--train must be at most 6000 (val and test are the "
                     "last 4,000 images of the permutation).")
  return parts


def model_and_data(data, seed):
  model = keras.Sequential([
      keras.Input((784,)),
      keras.layers.Dense(100, activation="relu",
                         kernel_initializer=keras.initializers.HeNormal(seed)),
      keras.layers.Dense(10,
                         kernel_initializer=keras.initializers.HeNormal(
                             seed + 1))])
  model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True), steps_per_execution=10)
  x, y = data["train"]
  ds = (tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
        .batch(BATCH, drop_remainder=True))
  return model, ds


def probs(weights, x):
  w1, b1, w2, b2 = weights
  logits = np.maximum(x @ w1 + b1, 0.) @ w2 + b2
  z = np.exp(logits - logits.max(1, keepdims=True))
  return z / z.sum(1, keepdims=True)


def nll(p, y):
  return sgk.negative_log_likelihood(p, y)


def err(p, y):
  return 1. - sgk.accuracy(p, y)


class PerEpoch(keras.callbacks.Callback):
  """SGD's validation and test NLL after every epoch."""

  def __init__(self, data):
    super().__init__()
    self.data, self.rows, self.test_probs = data, [], []

  def on_epoch_end(self, epoch, logs=None):
    w = self.model.get_weights()
    row = {}
    for part in ("val", "test"):
      x, y = self.data[part]
      p = probs(w, x)
      row[part + "_nll"], row[part + "_err"] = nll(p, y), err(p, y)
    self.rows.append(row)
    self.test_probs.append(probs(w, self.data["test"][0]))


def run_sgd(data, epochs, seed):
  model, ds = model_and_data(data, seed)
  track = PerEpoch(data)
  start = time.perf_counter()
  model.fit(ds, epochs=epochs, verbose=0, callbacks=[track])
  best = int(np.argmin([r["val_nll"] for r in track.rows]))
  return dict(curve=track.rows, best_epoch=best + 1,
              best_val_nll=track.rows[best]["val_nll"],
              test_probs=track.test_probs[best],
              test_nll=track.rows[best]["test_nll"],
              test_err=track.rows[best]["test_err"],
              seconds=time.perf_counter() - start)


def run_recipe(data, epochs, burnin, prior, temperature, lr, per_epoch,
               seed):
  model, ds = model_and_data(data, seed)
  n = len(data["train"][0])
  steps = n // BATCH
  sampling = sgk.SamplingCallback(
      sgk.SGHMC.from_sgd_momentum(learning_rate=lr / n, momentum_decay=0.1,
                                  temperature=temperature, seed=seed),
      num_examples=n, prior=prior, burnin_epochs=burnin,
      thinning=max(1, steps // per_epoch), max_samples=100000)
  start = time.perf_counter()
  model.fit(ds, epochs=epochs, verbose=0, callbacks=[sampling])
  seconds = time.perf_counter() - start
  samples = sampling.samples
  curve, total = [], {"val": 0., "test": 0.}
  for k, s in enumerate(samples, 1):
    for part in total:
      total[part] = total[part] + probs(s, data[part][0])
    if k % per_epoch == 0:
      row = dict(epoch=burnin + k // per_epoch, samples=k)
      for part in total:
        p, y = total[part] / k, data[part][1]
        row[part + "_nll"], row[part + "_err"] = nll(p, y), err(p, y)
      curve.append(row)
  return dict(curve=curve, seconds=seconds, num_samples=len(samples),
              test_probs=total["test"] / len(samples))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data", default=DEFAULT_DATA)
  parser.add_argument("--train", type=int, default=6000)
  parser.add_argument("--epochs", type=int, default=40)
  parser.add_argument("--burnin", type=int, default=10)
  parser.add_argument("--prior", type=float, nargs="+", default=[0.3])
  parser.add_argument("--temperature", type=float, nargs="+", default=[1.])
  parser.add_argument("--lr", type=float, default=0.05)
  parser.add_argument("--per-epoch", type=int, default=2)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--skip-sgd", action="store_true")
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  keras.utils.set_random_seed(args.seed)
  data = load(args.data, args.train)
  results = dict(args=vars(args))
  if not args.skip_sgd:
    sgd = run_sgd(data, args.epochs, args.seed)
    sgd_probs = sgd.pop("test_probs")
    results["SGD"] = sgd
    print(f"SGD: best val epoch {sgd['best_epoch']} (val NLL "
          f"{sgd['best_val_nll']:.4f}): test NLL "
          f"{sgd['test_nll']:.4f} err {sgd['test_err']:.4f}; last epoch "
          f"test NLL {sgd['curve'][-1]['test_nll']:.4f} "
          f"({sgd['seconds']:.0f} s)", flush=True)
  for prior in args.prior:
    for t in args.temperature:
      r = run_recipe(data, args.epochs, args.burnin, prior, t, args.lr,
                     args.per_epoch, args.seed)
      name = f"SGHMC prior={prior} T={t} lr={args.lr} burnin={args.burnin}"
      bma_probs = r.pop("test_probs")
      results[name] = r
      if not args.skip_sgd:
        # Paired per-image difference of -log p(y): its mean and standard
        # error (the same 2,000 test images score both).
        y = data["test"][1]
        idx = np.arange(len(y))
        d = (-np.log(np.clip(bma_probs[idx, y], 1e-12, 1)) +
             np.log(np.clip(sgd_probs[idx, y], 1e-12, 1)))
        r["nll_minus_sgd"] = float(d.mean())
        r["nll_minus_sgd_se"] = float(d.std(ddof=1) / np.sqrt(len(d)))
      marks = "; ".join(f"ep{row['epoch']} {row['test_nll']:.4f}"
                        for row in r["curve"]
                        if (row["epoch"] - args.burnin) % 5 == 0)
      last = r["curve"][-1]
      print(f"{name}: test NLL {last['test_nll']:.4f} err "
            f"{last['test_err']:.4f} val NLL {last['val_nll']:.4f} "
            f"({r['num_samples']} samples, {r['seconds']:.0f} s) [{marks}]"
            + (f" BMA - SGD: {r['nll_minus_sgd']:+.4f} +- "
               f"{r['nll_minus_sgd_se']:.4f}" if "nll_minus_sgd" in r else ""),
            flush=True)
  if args.out:
    with open(args.out, "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
