"""Paper 003, Fig. 5 (Chen, Fox & Guestrin 2014, Fig. 4): MNIST BNN test error
against epochs for SGD, SGD with momentum, SGLD and SGHMC, through Keras.

The reproduction's settings (its Section 4.2 and the caption of Fig. 5): an
MLP 784-100-10 with ReLU, a N(0, 1) prior on every weight and bias (for the
optimizers the equivalent L2 penalty, its lambda = 1), batches of 500, noise
model beta-hat = 0, no momentum resampling, and

    SGHMC         eta = 2e-6, alpha = 0.01
    SGLD          eta = 4e-5
    SGD           eta = 1e-5
    SGD+momentum  eta = 1e-6, alpha = 0.01

with eta applied to grad U = -N grad(mean log-likelihood) - grad log p on
N = 60,000 images; 800 epochs, the first 50 of them warm-up, after which the
samplers' predictions are averaged over every sample collected so far (the
Bayesian model average) and the optimizers are scored with their current
weights.

Mapping to our Keras optimizers. Only 8,000 training images are on this
project's machines (the MNIST test file split 8,000 / 2,000), so eta is
rescaled to keep the learning rate on the *mean* loss, lambda = 60,000 eta,
which sets the step's size and stability: eta_ours = 60,000 eta / N.

* SGD: `keras.optimizers.SGD(learning_rate=N eta_ours)` with the prior as
  `L2(1 / (2 N))` on every weight and bias (U / N = mean NLL + |theta|^2 /
  (2 N));
* SGD with momentum: the same with `momentum=1 - alpha` (Keras'
  v' = m v - lambda grad, theta' = theta + v', which is the SGD-with-momentum
  form v' = (1 - alpha) v - eta grad U);
* SGHMC: `SGHMC.from_sgd_momentum(learning_rate=eta_ours,
  momentum_decay=alpha)` (beta-hat = 0): v' = (1 - alpha) v - eta grad U~ +
  N(0, 2 alpha eta);
* SGLD: `SGLD(step_size=eta_ours)`: theta' = theta - eta grad U~ +
  N(0, 2 eta), the SGHMC form with alpha = 1 (if the reproduction's eta were
  Welling & Teh's epsilon, theta' = theta - epsilon/2 grad U~ + N(0,
  epsilon), our step would be eta / 2; the text does not say).

The samplers start at step 1 from the same random initialisation as the
optimizers (`SamplingCallback` without burn-in); after `warmup` epochs one
sample per epoch enters the running average of the predictive
probabilities.

    python examples/papers/sghmc/mnist_sghmc_paper.py  # 30 epochs, 2 warm-up
    python examples/papers/sghmc/mnist_sghmc_paper.py --epochs 300 \
        --warmup 19                                   # docs
    python examples/papers/sghmc/mnist_sghmc_paper.py --full  # 800, 50 warm-up

Writes `error_vs_epochs.png`, `sghmc_paper.md` and `sghmc_paper.json` into
`--out` (default out/mnist_sghmc_paper/).
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

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                    ".."))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data")

PAPER_N = 60000
BATCH = 500
PRIOR_SCALE = 1.
HIDDEN = 100
# The reproduction's eta (on grad U, N = 60,000) and alpha.
SETTINGS = {"SGD": dict(eta=1e-5),
            "SGD with momentum": dict(eta=1e-6, alpha=0.01),
            "SGLD": dict(eta=4e-5),
            "SGHMC": dict(eta=2e-6, alpha=0.01)}
SIZES = {"ci": dict(epochs=30, warmup=2), "full": dict(epochs=800,
                                                        warmup=50)}


def load(data_dir, seed):
  split = datasets.load_mnist_split(data_dir, seed)
  (x_train, y_train), (x_test, y_test) = split["train"], split["test"]
  return dict(x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
              split="the 10,000 MNIST test images split 8,000 train / 2,000 "
              f"test by numpy.random.default_rng({seed}).permutation")


def make_model(seed, l2=None, hidden=HIDDEN):
  reg = keras.regularizers.L2(l2) if l2 else None
  return keras.Sequential([
      keras.Input((784,)),
      keras.layers.Dense(hidden, activation="relu",
                         kernel_initializer=keras.initializers.HeNormal(seed),
                         kernel_regularizer=reg, bias_regularizer=reg),
      keras.layers.Dense(10,
                         kernel_initializer=keras.initializers.HeNormal(
                             seed + 1),
                         kernel_regularizer=reg, bias_regularizer=reg)])


class TestErrorCurve(keras.callbacks.Callback):
  """Test error after every epoch: of the current weights (`average=False`)
  or of the running average of the predictive probabilities over one sample
  per epoch after `warmup` epochs (`average=True`; during warm-up, the
  current weights)."""

  def __init__(self, x, y, warmup, average):
    super().__init__()
    self.x, self.y, self.warmup, self.average = x, y, warmup, average
    self.errors, self.sum, self.count = [], 0., 0

  def on_epoch_end(self, epoch, logs=None):
    logits = self.model.predict(self.x, batch_size=2000, verbose=0)
    z = np.exp(logits - logits.max(1, keepdims=True))
    probs = z / z.sum(1, keepdims=True)
    if self.average and epoch + 1 > self.warmup:
      self.sum, self.count = self.sum + probs, self.count + 1
      probs = self.sum / self.count
    error = float(np.mean(probs.argmax(1) != self.y))
    if not np.all(np.isfinite(probs)):
      error = float("nan")
      self.model.stop_training = True
    self.errors.append(error)


def run(data, epochs, warmup, seed, methods=None, progress=print,
        hidden=HIDDEN):
  """{method: list of test errors, one per epoch}, and seconds per method."""
  n = len(data["x_train"])
  scale = PAPER_N / n
  curves, seconds = {}, {}
  train = (tf.data.Dataset.from_tensor_slices((data["x_train"],
                                               data["y_train"]))
           .shuffle(n, seed=seed, reshuffle_each_iteration=True)
           .batch(BATCH, drop_remainder=True))
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  for name in methods or SETTINGS:
    s = SETTINGS[name]
    eta = s["eta"] * scale                  # on grad U, our N
    keras.utils.set_random_seed(seed)
    sampler = name in ("SGLD", "SGHMC")
    curve = TestErrorCurve(data["x_test"], data["y_test"], warmup, sampler)
    callbacks = [curve]
    if sampler:
      model = make_model(seed, hidden=hidden)
      model.compile(optimizer=keras.optimizers.SGD(eta * n), loss=loss)
      spec = (sgk.SGLD(step_size=eta, seed=seed) if name == "SGLD" else
              sgk.SGHMC.from_sgd_momentum(learning_rate=eta,
                                          momentum_decay=s["alpha"],
                                          seed=seed))
      callbacks.insert(0, sgk.SamplingCallback(
          spec, num_examples=n, prior=PRIOR_SCALE, max_samples=1,
          thinning=n // BATCH))
    else:
      model = make_model(seed, l2=1. / (2. * PRIOR_SCALE ** 2 * n),
                         hidden=hidden)
      model.compile(optimizer=keras.optimizers.SGD(
          eta * n, momentum=1. - s.get("alpha", 1.)), loss=loss)
    start = time.perf_counter()
    model.fit(train, epochs=epochs, verbose=0, callbacks=callbacks)
    seconds[name] = time.perf_counter() - start
    errors = curve.errors + [float("nan")] * (epochs - len(curve.errors))
    curves[name] = errors
    progress(f"{name:18s} final test error {100 * errors[-1]:.2f}%  "
             f"({seconds[name]:.0f} s)")
  return curves, seconds


def figure(curves, warmup, path, title):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(6, 4.2))
  for name, errors in curves.items():
    ax.plot(np.arange(1, len(errors) + 1), 100 * np.asarray(errors),
            label=name)
  ax.axvline(warmup, color="grey", lw=0.8, ls=":")
  ax.set_xlabel("epoch")
  ax.set_ylabel("test error (%)")
  ax.set_ylim(0., 20.)
  ax.set_title(title, fontsize=9)
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--out", default=os.path.join("out",
                                                    "mnist_sghmc_paper"))
  parser.add_argument("--full", action="store_true",
                      help="800 epochs, 50 warm-up")
  parser.add_argument("--epochs", type=int, default=None)
  parser.add_argument("--warmup", type=int, default=None)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  size = SIZES["full" if args.full else "ci"]
  epochs = args.epochs or size["epochs"]
  warmup = args.warmup if args.warmup is not None else size["warmup"]
  os.makedirs(args.out, exist_ok=True)
  data = load(args.data_dir, args.seed)
  curves, seconds = run(data, epochs, warmup, args.seed)
  n = len(data["x_train"])
  lines = [
      f"MLP 784-{HIDDEN}-10 on {data['split']}; prior N(0, 1); batch "
      f"{BATCH}; {epochs} epochs, {warmup} warm-up; eta scaled by "
      f"{PAPER_N}/{n}; seed {args.seed}.", "",
      "| method | eta (paper, N = 60,000) | eta (ours, on grad U) | alpha | "
      "test error, last epoch | best | seconds |", "|---|---|---|---|---|---|---|"]
  for name, errors in curves.items():
    s = SETTINGS[name]
    e = np.asarray(errors)
    lines.append(
        f"| {name} | {s['eta']:g} | {s['eta'] * PAPER_N / n:.3g} | "
        f"{s.get('alpha', '')} | {100 * e[-1]:.2f}% | "
        f"{100 * np.nanmin(e):.2f}% | {seconds[name]:.0f} |")
  text = "\n".join(lines)
  figure(curves, warmup, os.path.join(args.out, "error_vs_epochs.png"),
         f"MNIST 784-{HIDDEN}-10, 8,000 train / 2,000 test (samplers: "
         "running Bayesian average)")
  with open(os.path.join(args.out, "sghmc_paper.md"), "w") as f:
    f.write(text + "\n")
  with open(os.path.join(args.out, "sghmc_paper.json"), "w") as f:
    json.dump(dict(curves=curves, seconds=seconds, epochs=epochs,
                   warmup=warmup, seed=args.seed, split=data["split"]), f,
              indent=1)
  print(text)
  print(f"wrote {args.out}/error_vs_epochs.png, sghmc_paper.md, "
        "sghmc_paper.json")
  return curves


if __name__ == "__main__":
  main()
