"""AMAGOLD paper, Table 2 and Fig. 5: SGHMC vs AMAGOLD on a Bayesian MLP.

Zhang, Cooper & De Sa (AISTATS 2020), Section 6.3: test error of SGHMC and
(skew-reversible) AMAGOLD on MNIST for the momentum decay b in {0.01, 5e-6}
and the step size h in {5e-4, 1e-3}; at b = 5e-6 SGHMC diverges (about 90%
error) while AMAGOLD keeps its usual error. Fig. 5: the empirical CDF of the
predictive entropy of the 8 models on an out-of-distribution set (notMNIST
in the paper; the 900 Fashion-MNIST sprite images here). Everything runs
through the Keras adapter, `tfp_sgmcmc.keras.SamplingCallback`.

Units. The paper's (b, h) are Appendix F's SGD units, with h a learning
rate on the *mean* loss: the authors' code uses lr = h / 60000 on grad U
(U = N * mean loss - log p(theta)) and alpha = b, i.e.

    v' = (1 - b) v - (h / N) grad U~ + N(0, 2 b h / N),   theta' = theta + v'

for SGHMC (their `train_sghmc.py`; no momentum resampling), and the same
kick inside AMAGOLD's stochastic leapfrog. Our arguments are applied to
grad U, so both samplers get learning_rate = h / N and momentum_decay = b:

    SGHMC.from_sgd_momentum(learning_rate=h / N, momentum_decay=b)
        (h_ours = sqrt(h / N), C = b / sqrt(h / N), B-hat = 0)
    AMAGOLD.from_sgd_parameters(learning_rate=h / N, momentum_decay=b,
                                num_leapfrog_steps=10,
                                resample_momentum=False)
        (eps = sqrt(h / N), beta = b / sqrt(h / N), sigma = 1)

with N our training-set size. Set-up as in the authors' code: inputs
standardised by MNIST's mean 0.1307 and standard deviation 0.3081; prior
N(0, 1 / 5e-4) (their weight decay 5e-4 on grad U; we include the prior in
the M-H energy too, which their code forgets); burn-in: 3 epochs of SGD with
learning rate 0.1 and momentum 0.5 (PyTorch's momentum=1-0.5) in batches
of 500, shared by all 8 chains; then the sampler in batches of
N / 30 (their 2,000 of 60,000, so that the minibatch noise per step,
which scales with N / n, is the paper's); 20 samples kept, spread evenly
over the sampling phase.

Data: only the 10,000 MNIST *test* images are on this project's machines:
split 8,000 train / 2,000 test by `numpy.random.default_rng(seed)`.

A diverged chain (the adapter's divergence stop, which warns and stops
`fit`, or raises with `on_divergence="raise"`; or non-finite loss, energy or
weights seen by this script's own check) is reported as "diverged (at epoch
k)" and kept out of the entropy figure, instead of crashing the script.

    python examples/bnn_table2.py                  # 784-100-10, 30 epochs, ~3 min
    python examples/bnn_table2.py --sample-epochs 200   # docs/results table
    python examples/bnn_table2.py --full           # 784-500-256-10 (not run here)

Writes `table2.md`, `table2.json` and `fig5_entropy_cdf.png` into `--out`
(default out/bnn_table2/).
"""

import argparse
import json
import math
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

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
WEIGHT_DECAY = 5e-4                     # the authors' prior precision
PRIOR_SCALE = 1. / math.sqrt(WEIGHT_DECAY)
BURNIN = dict(epochs=3, batch_size=500, learning_rate=0.1, momentum=0.5)
BATCHES_PER_EPOCH = 30                  # 60,000 / 2,000 in the paper
NUM_LEAPFROG_STEPS = 10
NUM_SAMPLES = 20
FRICTIONS = (0.01, 5e-6)                # b
STEP_SIZES = (5e-4, 1e-3)               # h, on the mean loss
PAPER = {("SGHMC", 0.01, 5e-4): "3.69 ± 0.03",
         ("SGHMC", 0.01, 1e-3): "3.77 ± 0.17",
         ("SGHMC", 5e-6, 5e-4): "89.95 ± 0.29",
         ("SGHMC", 5e-6, 1e-3): "89.70 ± 0.91",
         ("AMAGOLD", 0.01, 5e-4): "3.63 ± 0.04",
         ("AMAGOLD", 0.01, 1e-3): "3.65 ± 0.08",
         ("AMAGOLD", 5e-6, 5e-4): "3.65 ± 0.10",
         ("AMAGOLD", 5e-6, 1e-3): "3.63 ± 0.10"}
SIZES = {"ci": dict(hidden=(100,), sample_epochs=30, num_train=8000),
         "full": dict(hidden=(500, 256), sample_epochs=150, num_train=8000)}


def load(data_dir, seed, num_train=8000):
  """MNIST split (standardised as the authors do) and the OOD images."""
  def flat(images):
    x = images.reshape(len(images), -1).astype(np.float32) / 255.
    return (x - MNIST_MEAN) / MNIST_STD
  images, labels = datasets.load_mnist(data_dir, "test")
  order = np.random.default_rng(seed).permutation(len(images))
  train, test = order[:num_train], order[8000:]
  return dict(x_train=flat(images[train]),
              y_train=labels[train].astype(np.int32),
              x_test=flat(images[test]), y_test=labels[test].astype(np.int32),
              x_ood=flat(datasets.load_fashion_mnist_sprite(data_dir)),
              split=f"{num_train} of the 10,000 MNIST test images for "
              "training, 2,000 for testing, by numpy.random.default_rng("
              f"{seed}).permutation")


def make_model(hidden, seed):
  layers = [keras.Input((784,))]
  for i, units in enumerate(hidden):
    layers.append(keras.layers.Dense(
        units, activation="relu",
        kernel_initializer=keras.initializers.HeNormal(seed + i)))
  layers.append(keras.layers.Dense(
      10, kernel_initializer=keras.initializers.HeNormal(seed + 99)))
  return keras.Sequential(layers)


def compile_model(model, optimizer):
  model.compile(optimizer=optimizer,
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))


def dataset(x, y, batch_size, seed):
  return (tf.data.Dataset.from_tensor_slices((x, y))
          .shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
          .batch(batch_size, drop_remainder=True))


class DivergenceMonitor(keras.callbacks.Callback):
  """Stops `fit` at the first epoch whose loss, energy or weights are not
  finite, and records that epoch (1-based, counting sampling epochs)."""

  def __init__(self):
    super().__init__()
    self.diverged_at = None
    self.epoch = 0
    self.losses = []

  def on_epoch_begin(self, epoch, logs=None):
    self.epoch = epoch + 1

  def on_epoch_end(self, epoch, logs=None):
    logs = logs or {}
    self.losses.append(float(logs.get("loss", float("nan"))))
    bad = any(k in logs and not np.isfinite(logs[k])
              for k in ("loss", "energy"))
    bad = bad or not all(np.all(np.isfinite(w))
                         for w in self.model.get_weights())
    if bad and self.diverged_at is None:
      self.diverged_at = epoch + 1
      self.model.stop_training = True


def burn_in(data, hidden, seed, batch_size=BURNIN["batch_size"]):
  """The authors' 3 epochs of SGD with momentum, shared by every chain."""
  model = make_model(hidden, seed)
  compile_model(model, keras.optimizers.SGD(BURNIN["learning_rate"],
                                            momentum=BURNIN["momentum"]))
  model.fit(dataset(data["x_train"], data["y_train"], batch_size, seed),
            epochs=BURNIN["epochs"], verbose=0)
  return model.get_weights()


def softmax(logits):
  z = np.exp(logits - logits.max(1, keepdims=True))
  return z / z.sum(1, keepdims=True)


def entropy(probs):
  p = np.clip(probs, 1e-12, 1.)
  return -np.sum(p * np.log(p), axis=1)


def make_sampler(name, b, h, n, seed):
  if name == "SGHMC":
    return sgk.SGHMC.from_sgd_momentum(learning_rate=h / n,
                                       momentum_decay=b, seed=seed)
  return sgk.AMAGOLD.from_sgd_parameters(
      learning_rate=h / n, momentum_decay=b,
      num_leapfrog_steps=NUM_LEAPFROG_STEPS, resample_momentum=False,
      seed=seed)


def run_chain(name, b, h, data, init_weights, hidden, sample_epochs, seed,
              verbose=0, batches_per_epoch=BATCHES_PER_EPOCH, callbacks=()):
  """One sampler from the burnt-in weights; a dict of results (`loss`: the
  training loss Keras reports for each epoch)."""
  n = len(data["x_train"])
  batch = n // batches_per_epoch
  steps = sample_epochs * batches_per_epoch
  transitions = steps // NUM_LEAPFROG_STEPS if name == "AMAGOLD" else steps
  thinning = max(1, transitions // NUM_SAMPLES)
  model = make_model(hidden, seed)
  model.set_weights(init_weights)
  compile_model(model, keras.optimizers.SGD(BURNIN["learning_rate"]))
  kwargs = {}
  if name == "AMAGOLD":
    kwargs = dict(energy_data=(data["x_train"], data["y_train"]),
                  energy_batch_size=2000)
  sampling = sgk.SamplingCallback(
      make_sampler(name, b, h, n, seed), num_examples=n, prior=PRIOR_SCALE,
      thinning=thinning, max_samples=NUM_SAMPLES, **kwargs)
  monitor = DivergenceMonitor()
  start = time.perf_counter()
  row = dict(method=name, b=b, h=h, paper=PAPER.get((name, b, h)),
             diverged_at=None, message=None)
  history = keras.callbacks.History()
  try:
    model.fit(dataset(data["x_train"], data["y_train"], batch, seed),
              epochs=sample_epochs, verbose=verbose,
              callbacks=[sampling, monitor, history] + list(callbacks))
  except Exception as e:  # pylint: disable=broad-except
    # The adapter's divergence stop (or a numerical failure inside fit).
    row["message"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    row["diverged_at"] = monitor.diverged_at or max(1, monitor.epoch)
  row["seconds"] = time.perf_counter() - start
  # The adapter's divergence stop (`SamplingCallback.divergence`, set when
  # the chain went non-finite; it warns and stops `fit`), where it exists.
  stop = getattr(sampling, "divergence", None)
  if stop is not None and row["diverged_at"] is None:
    row["diverged_at"] = int(stop.get("epoch", sample_epochs - 1)) + 1
    row["message"] = str(stop.get("message", ""))[:300]
  row["loss"] = [float(v) for v in history.history.get("loss", [])]
  if not row["loss"] and monitor.losses:
    row["loss"] = monitor.losses
  if monitor.diverged_at is not None and row["diverged_at"] is None:
    row["diverged_at"] = monitor.diverged_at
  row["kept_samples"] = (0 if row["diverged_at"] is not None
                         else sampling.posterior.num_samples)
  if name == "AMAGOLD" and row["diverged_at"] is None:
    row["acceptance"] = sampling.acceptance_rate
  # The chain's position at the end (the model's weights after `fit`): the
  # paper's 20 samples may all come from the end of a long run, where a
  # heating chain is worst, while our average spans the whole run.
  logits = model.predict(data["x_test"], batch_size=1000, verbose=0)
  row["last_sample_error"] = (
      float(np.mean(logits.argmax(1) != data["y_test"]))
      if np.all(np.isfinite(logits)) else None)
  probs = ood = None
  if row["diverged_at"] is None and row["kept_samples"]:
    probs = sampling.predict(data["x_test"], batch_size=1000)
    ood = sampling.predict(data["x_ood"], batch_size=1000)
    if not (np.all(np.isfinite(probs)) and np.all(np.isfinite(ood))):
      row["diverged_at"] = sample_epochs
      probs = ood = None
  if probs is not None:
    p = np.clip(probs, 1e-12, 1.)
    labels = data["y_test"]
    row.update(error=float(np.mean(p.argmax(1) != labels)),
               nll=float(-np.mean(np.log(p[np.arange(len(labels)),
                                           labels]))),
               ood_entropy_median=float(np.median(entropy(ood))))
  return row, ood


def run(data, size, seed, verbose=0, configs=None, progress=print,
        batches_per_epoch=BATCHES_PER_EPOCH):
  """Burn in once, then every (method, b, h) of `configs` (default: all 8).
  Returns (rows, {label: OOD probabilities})."""
  hidden, sample_epochs = size["hidden"], size["sample_epochs"]
  start = time.perf_counter()
  init = burn_in(data, hidden, seed)
  model = make_model(hidden, seed)
  model.set_weights(init)
  logits = model.predict(data["x_test"], batch_size=1000, verbose=0)
  burnin_error = float(np.mean(logits.argmax(1) != data["y_test"]))
  progress(f"burn-in: {time.perf_counter() - start:.0f} s, test error of "
           f"the burnt-in weights {100 * burnin_error:.2f}%")
  if configs is None:
    configs = [(m, b, h) for m in ("SGHMC", "AMAGOLD") for b in FRICTIONS
               for h in STEP_SIZES]
  rows, ood = [], {}
  for name, b, h in configs:
    row, probs = run_chain(name, b, h, data, init, hidden, sample_epochs,
                           seed, verbose, batches_per_epoch)
    row["burnin_error"] = burnin_error
    rows.append(row)
    if probs is not None:
      ood[f"{name}, b={b:g}, h={h:g}"] = probs
    progress(f"{name:8s} b={b:<6g} h={h:<6g} {cell(row):>28s}   "
             f"{row['seconds']:.0f} s")
  return rows, ood


def cell(row):
  if row["diverged_at"] is not None:
    return f"diverged (at epoch {row['diverged_at']})"
  return f"{100 * row['error']:.2f}%"


def table(rows, header):
  lines = [header, "",
           "| method | b | h | test error (ours) | test NLL | OOD entropy, "
           "median | M-H acceptance | last sample's error | training loss, "
           "last epoch | paper | seconds |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    acc = r.get("acceptance")
    nll = "" if r.get("nll") is None else f"{r['nll']:.3f}"
    ent = ("" if r.get("ood_entropy_median") is None
           else f"{r['ood_entropy_median']:.3f}")
    last = r.get("last_sample_error")
    loss = r.get("loss") or [float("nan")]
    lines.append(
        f"| {r['method']} | {r['b']:g} | {r['h']:g} | {cell(r)} | {nll} | "
        f"{ent} | {'' if acc is None else f'{100 * acc:.1f}%'} | "
        f"{'' if last is None else f'{100 * last:.2f}%'} | {loss[-1]:.3f} | "
        f"{r['paper']}% | {r['seconds']:.0f} |")
  return "\n".join(lines)


def figure(ood, rows, path):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(6, 4.2))
  styles = {"SGHMC": "--", "AMAGOLD": "-"}
  for label, probs in ood.items():
    h = np.sort(entropy(probs))
    ax.step(h, np.arange(1, len(h) + 1) / len(h), where="post", label=label,
            linestyle=styles[label.split(",")[0]])
  for r in rows:
    if r["diverged_at"] is not None:
      ax.plot([], [], " ", label=f"{r['method']}, b={r['b']:g}, "
              f"h={r['h']:g}: diverged")
  ax.set_xlabel("entropy of the predictive distribution (nats)")
  ax.set_ylabel("empirical CDF")
  ax.set_xlim(0., math.log(10.))
  ax.set_title("Fashion-MNIST sprite images (out of distribution)")
  ax.legend(loc="lower right", fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--out", default=os.path.join("out", "bnn_table2"))
  parser.add_argument("--full", action="store_true",
                      help="the paper's 784-500-256-10 MLP")
  parser.add_argument("--sample-epochs", type=int, default=None)
  parser.add_argument("--batches-per-epoch", type=int,
                      default=BATCHES_PER_EPOCH,
                      help="N / n of the sampling phase (the paper's 30); "
                      "larger means more minibatch noise per step")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--verbose", type=int, default=0)
  args = parser.parse_args(argv)
  size = dict(SIZES["full" if args.full else "ci"])
  if args.sample_epochs:
    size["sample_epochs"] = args.sample_epochs
  os.makedirs(args.out, exist_ok=True)
  keras.utils.set_random_seed(args.seed)
  data = load(args.data_dir, args.seed, size["num_train"])
  rows, ood = run(data, size, args.seed, args.verbose,
                  batches_per_epoch=args.batches_per_epoch)
  arch = "-".join(str(u) for u in (784,) + tuple(size["hidden"]) + (10,))
  header = (
      f"MLP {arch}, {data['split']}; prior N(0, 1/{WEIGHT_DECAY:g}); burn-in "
      f"{BURNIN['epochs']} epochs of SGD(lr {BURNIN['learning_rate']}, "
      f"momentum {BURNIN['momentum']}), batch {BURNIN['batch_size']}; then "
      f"{size['sample_epochs']} epochs of the sampler in batches of "
      f"{len(data['x_train']) // args.batches_per_epoch}, {NUM_SAMPLES} "
      "samples "
      f"kept; learning_rate = h/N, momentum_decay = b; AMAGOLD T = "
      f"{NUM_LEAPFROG_STEPS}, skew-reversible, exact M-H test; seed "
      f"{args.seed}. Paper: 784-500-256-10 on the 60,000 / 10,000 split, "
      "test error ± standard error.")
  text = table(rows, header)
  if rows and "burnin_error" in rows[0]:
    text += (f"\n\nThe burnt-in weights (every chain's start): test error "
             f"{100 * rows[0]['burnin_error']:.2f}%.")
  figure(ood, rows, os.path.join(args.out, "fig5_entropy_cdf.png"))
  with open(os.path.join(args.out, "table2.md"), "w") as f:
    f.write(text + "\n")
  with open(os.path.join(args.out, "table2.json"), "w") as f:
    json.dump(dict(rows=rows, size=size, seed=args.seed,
                   batches_per_epoch=args.batches_per_epoch,
                   split=data["split"]), f, indent=1)
  print(text)
  print(f"wrote {args.out}/table2.md, table2.json, fig5_entropy_cdf.png")
  return rows


if __name__ == "__main__":
  main()
