"""A Bayesian MLP on MNIST in Keras: SGD point estimate vs SGHMC vs AMAGOLD.

The BNN experiment of paper 003 (Chen et al., SGHMC: a one-hidden-layer MLP
with 100 units) and of paper 000 (Zhang et al., AMAGOLD, Section 6: samplers
started from SGD with momentum; entropy of the predictive distribution on an
out-of-distribution set), written as plain Keras code with
`tfp_sgmcmc.keras.SamplingCallback`.

Data. Only the 10,000 MNIST *test* images are on this project's machines, so
they are split with a fixed seed into 8,000 training and 2,000 test images
(`--tfds` uses the full 60,000 / 10,000 split through tensorflow-datasets
instead, when online). Out of distribution: the 900 Fashion-MNIST sprite
images (the paper's notMNIST is not available).

Model: 784-100-10, ReLU, logits; prior N(0, 0.3^2) on every weight and bias;
likelihood: softmax cross-entropy. Four fits, batch 100:

* SGD: SGD with momentum 0.9 (learning rate 0.05) for all epochs, the point
  estimate a Keras user gets from `fit` without the callback;
* SGD + L2 (MAP): the same with the L2 penalty of the prior, the mode of the
  posterior the samplers sample;
* SGHMC: the same SGD for `BURNIN_EPOCHS` as burn-in, then SGHMC in SGD
  units (`SGHMC.from_sgd_momentum`: eta = 0.05 / N, alpha = 0.1, and a
  gradient-noise estimate beta-hat = 0.05 that removes part of the injected
  noise, since the minibatch noise already supplies it);
* AMAGOLD: the same burn-in, then skew-reversible AMAGOLD in the units of
  Appendix F (`AMAGOLD.from_sgd_parameters`: h = 2e-4 / N, b = 1e-3,
  T = 10) with the exact M-H test over the whole training set every 10
  steps.

The samplers keep `--num-samples` samples spread over the last 70% of the
sampling phase. Burn-in: 10 epochs, not the paper's 3 (on 8,000 images, 3
epochs are 240 steps, and AMAGOLD at a step size that keeps its acceptance
near 60% does not travel from there within this example's budget).

Reported on the test part: error, negative log-likelihood, expected
calibration error (15 equal-width confidence bins), and the empirical CDF of
the predictive entropy on the out-of-distribution images (a curve further
right is less confident, which is right for images of clothes). Writes
`table.md`, `results.json`, `entropy_cdf.png` and the AMAGOLD samples
(`amagold_posterior.npz`) into `--out`.

    python examples/keras_bnn_mnist.py              # 100 epochs
    python examples/keras_bnn_mnist.py --full       # 300 epochs

`--experiment` runs the paper reproductions instead (or as well): `table2`
and `fig5` (one run: AMAGOLD paper Table 2 and Fig. 5,
`examples/papers/amagold/bnn_table2.py`, into `--out`/table2/),
`sghmc_paper` (paper 003's Fig. 5, test error against epochs,
`examples/papers/sghmc/mnist_sghmc_paper.py`, into `--out`/sghmc_paper/),
`all` (this comparison and both). The default, `bma`, is this script's own
comparison above.
"""

import argparse
import importlib.util
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
PAPERS = os.path.join(REPO, "examples", "papers")

BATCH = 100
BURNIN_EPOCHS = 10
SGD = dict(learning_rate=0.05, momentum=0.9)   # on the mean loss
PRIOR_SCALE = 0.3
# SGHMC, SGD units on grad U (eta = lambda / N for lambda on the mean loss).
SGHMC_LEARNING_RATE = 0.05
SGHMC_MOMENTUM_DECAY = 0.1
SGHMC_NOISE_ESTIMATE = 0.05
# AMAGOLD, Appendix F units on grad U.
AMAGOLD_LEARNING_RATE = 2e-4
AMAGOLD_MOMENTUM_DECAY = 1e-3
NUM_LEAPFROG_STEPS = 10
KEPT_FRACTION = 0.7
STEPS_PER_EXECUTION = 10
ECE_BINS = 15


def load(data_dir, use_tfds, seed):
  """Train, test and out-of-distribution arrays, and how they were made."""
  def flat(images):
    return (images.reshape(len(images), -1) / 255.).astype(np.float32)
  if use_tfds:
    xtr, ytr = datasets.load_mnist(data_dir, "train", download=True)
    xte, yte = datasets.load_mnist(data_dir, "test", download=True)
    split = "MNIST 60,000 train / 10,000 test (tensorflow-datasets)"
    xtr, xte = flat(xtr), flat(xte)
  else:
    parts = datasets.load_mnist_split(data_dir, seed)
    (xtr, ytr), (xte, yte) = parts["train"], parts["test"]
    split = ("the 10,000 MNIST test images split 8,000 train / 2,000 test "
             f"by numpy.random.default_rng({seed}).permutation")
  ood = datasets.load_fashion_mnist_sprite(data_dir)
  return dict(x_train=xtr, y_train=ytr.astype(np.int32),
              x_test=xte, y_test=yte.astype(np.int32), x_ood=flat(ood),
              split=split)


def make_model(seed, l2=None):
  """784-100-10; `l2` adds the prior's penalty 1 / (2 s^2 N) (MAP only)."""
  reg = keras.regularizers.L2(l2) if l2 else None
  init = keras.initializers.HeNormal
  return keras.Sequential([
      keras.Input((784,)),
      keras.layers.Dense(100, activation="relu", kernel_initializer=init(seed),
                         kernel_regularizer=reg, bias_regularizer=reg),
      keras.layers.Dense(10, kernel_initializer=init(seed + 1),
                         kernel_regularizer=reg, bias_regularizer=reg)])


def compile_sgd(model):
  model.compile(optimizer=keras.optimizers.SGD(**SGD),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True),
                steps_per_execution=STEPS_PER_EXECUTION)


def batches(data, seed):
  x, y = data["x_train"], data["y_train"]
  return (tf.data.Dataset.from_tensor_slices((x, y))
          .shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
          .batch(BATCH, drop_remainder=True))


def softmax(logits):
  z = np.exp(logits - logits.max(1, keepdims=True))
  return z / z.sum(1, keepdims=True)


def entropy(probs):
  return sgk.predictive_entropy(probs)


def metrics(probs, labels):
  """Test error, mean negative log-likelihood and expected calibration error
  (ECE_BINS equal-width bins of the top-class confidence), from
  `tfp_sgmcmc.keras.evaluation`."""
  return dict(error=1. - sgk.accuracy(probs, labels),
              nll=sgk.negative_log_likelihood(probs, labels),
              ece=sgk.expected_calibration_error(probs, labels, ECE_BINS))


def fit_point_estimates(data, epochs, seed):
  n = len(data["x_train"])
  out = {}
  for name, l2 in (("SGD", None),
                   ("SGD + L2 (MAP)", 1. / (2. * PRIOR_SCALE ** 2 * n))):
    start = time.perf_counter()
    model = make_model(seed, l2)
    compile_sgd(model)
    model.fit(batches(data, seed), epochs=epochs, verbose=0)
    out[name] = dict(
        test=softmax(model.predict(data["x_test"], verbose=0)),
        ood=softmax(model.predict(data["x_ood"], verbose=0)),
        seconds=time.perf_counter() - start, kept_samples=1)
  return out


def fit_samplers(data, epochs, num_samples, seed, out_dir, verbose):
  n = len(data["x_train"])
  steps = (epochs - BURNIN_EPOCHS) * (n // BATCH)
  # Spread `num_samples` over the last KEPT_FRACTION of the sampling steps;
  # `max_samples` keeps the most recent ones.
  thinning = max(STEPS_PER_EXECUTION, int(KEPT_FRACTION * steps / num_samples)
                 // STEPS_PER_EXECUTION * STEPS_PER_EXECUTION)
  samplers = {
      "SGHMC": (sgk.SGHMC.from_sgd_momentum(
          learning_rate=SGHMC_LEARNING_RATE / n,
          momentum_decay=SGHMC_MOMENTUM_DECAY,
          noise_estimate=SGHMC_NOISE_ESTIMATE, seed=seed),
                dict(thinning=thinning)),
      "AMAGOLD": (sgk.AMAGOLD.from_sgd_parameters(
          learning_rate=AMAGOLD_LEARNING_RATE / n,
          momentum_decay=AMAGOLD_MOMENTUM_DECAY,
          num_leapfrog_steps=NUM_LEAPFROG_STEPS, resample_momentum=False,
          seed=seed),
                  dict(thinning=max(1, thinning // NUM_LEAPFROG_STEPS),
                       energy_data=(data["x_train"], data["y_train"]),
                       energy_batch_size=2000)),
  }
  out = {}
  for name, (sampler, kwargs) in samplers.items():
    start = time.perf_counter()
    model = make_model(seed)
    compile_sgd(model)          # The compiled optimizer burns in.
    sampling = sgk.SamplingCallback(
        sampler, num_examples=n, prior=PRIOR_SCALE,
        burnin_epochs=BURNIN_EPOCHS, max_samples=num_samples, **kwargs)
    history = model.fit(batches(data, seed), epochs=epochs, verbose=verbose,
                        callbacks=[sampling])
    out[name] = dict(
        test=sampling.predict(data["x_test"], batch_size=1000),
        ood=sampling.predict(data["x_ood"], batch_size=1000),
        seconds=time.perf_counter() - start,
        kept_samples=sampling.posterior.num_samples,
        energy=float(history.history["energy"][-1]))
    if name == "AMAGOLD":
      out[name].update(acceptance=sampling.acceptance_rate,
                       mh_tests=sampling.num_tests,
                       mh_seconds=sampling.mh_seconds)
      sampling.save(os.path.join(out_dir, "amagold_posterior.npz"))
  return out


def table(rows, data, args):
  lines = [
      f"Bayesian MLP 784-100-10 on MNIST ({data['split']}); prior "
      f"N(0, {PRIOR_SCALE}^2); {args.epochs} epochs of batch {BATCH} "
      f"(samplers: {BURNIN_EPOCHS} of SGD burn-in); out of distribution: "
      f"{len(data['x_ood'])} Fashion-MNIST sprite images; seed {args.seed}.",
      "",
      "| method | test error | test NLL | ECE | OOD entropy, median | "
      "OOD entropy, mean | M-H acceptance | samples | seconds |",
      "|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    acc = r.get("acceptance")
    lines.append(
        f"| {r['method']} | {100 * r['error']:.2f}% | {r['nll']:.4f} | "
        f"{100 * r['ece']:.2f}% | {r['ood_entropy_median']:.3f} | "
        f"{r['ood_entropy_mean']:.3f} | "
        f"{'' if acc is None else f'{100 * acc:.1f}%'} | "
        f"{r['kept_samples']} | {r['seconds']:.0f} |")
  return "\n".join(lines)


def figure(fits, path):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(5.5, 4))
  for name, fit in fits.items():
    h = np.sort(entropy(fit["ood"]))
    ax.step(h, np.arange(1, len(h) + 1) / len(h), where="post", label=name)
  ax.set_xlabel("entropy of the predictive distribution (nats)")
  ax.set_ylabel("empirical CDF")
  ax.set_xlim(0., np.log(10.))
  ax.set_title("900 Fashion-MNIST images (out of distribution)")
  ax.legend(loc="lower right")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", default=DEFAULT_DATA,
                      help="directory holding mnist/ and "
                      "fashion-mnist-sprite/ (default ../shared/data)")
  parser.add_argument("--out", default=os.path.join("out", "keras_bnn"))
  parser.add_argument("--full", action="store_true", help="300 epochs")
  parser.add_argument("--epochs", type=int, default=None)
  parser.add_argument("--num-samples", type=int, default=50)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--tfds", action="store_true",
                      help="the full MNIST through tensorflow-datasets")
  parser.add_argument("--experiment", default="bma",
                      choices=("bma", "table2", "fig5", "sghmc_paper", "all"),
                      help="bma: this script's SGD / MAP / SGHMC / AMAGOLD "
                      "comparison; table2, fig5: AMAGOLD paper Table 2 and "
                      "Fig. 5 (one run); sghmc_paper: paper 003 Fig. 5; all")
  parser.add_argument("--verbose", type=int, default=0,
                      help="Keras verbosity of the samplers' fits (1 shows "
                      "energy, step size and acceptance in the progress "
                      "bar)")
  args = parser.parse_args(argv)
  if args.experiment != "bma":
    rows = run_reproductions(args)
    if args.experiment != "all":
      return rows
  if args.epochs is None:
    args.epochs = 300 if args.full else 100
  if args.epochs <= BURNIN_EPOCHS:
    parser.error(f"--epochs must exceed the {BURNIN_EPOCHS} burn-in epochs")
  os.makedirs(args.out, exist_ok=True)
  keras.utils.set_random_seed(args.seed)

  data = load(args.data_dir, args.tfds, args.seed)
  print(f"data: {data['split']}; out of distribution: "
        f"{len(data['x_ood'])} Fashion-MNIST sprite images")
  fits = fit_point_estimates(data, args.epochs, args.seed)
  fits.update(fit_samplers(data, args.epochs, args.num_samples, args.seed,
                           args.out, args.verbose))
  rows = []
  for name, fit in fits.items():
    h = entropy(fit["ood"])
    rows.append(dict(method=name, **metrics(fit["test"], data["y_test"]),
                     ood_entropy_median=float(np.median(h)),
                     ood_entropy_mean=float(np.mean(h)),
                     **{k: v for k, v in fit.items()
                        if k not in ("test", "ood")}))
  text = table(rows, data, args)
  figure(fits, os.path.join(args.out, "entropy_cdf.png"))
  with open(os.path.join(args.out, "table.md"), "w") as f:
    f.write(text + "\n")
  with open(os.path.join(args.out, "results.json"), "w") as f:
    json.dump(dict(rows=rows, epochs=args.epochs, seed=args.seed,
                   split=data["split"]), f, indent=1)
  print(text)
  sgd = rows[0]
  for r in rows[2:]:
    better = [k for k in ("nll", "ece") if r[k] < sgd[k]]
    if r["ood_entropy_median"] > sgd["ood_entropy_median"]:
      better.append("OOD entropy")
    print(f"{r['method']} vs the SGD point estimate: better on "
          f"{', '.join(better) or 'nothing'}")
  print(f"wrote {args.out}/table.md, results.json, entropy_cdf.png, "
        "amagold_posterior.npz")
  return rows


def paper_script(paper, name):
  """The module examples/papers/<paper>/<name>.py, loaded from its file: the
  paper folders are not packages, and these scripts import no sibling."""
  spec = importlib.util.spec_from_file_location(
      name, os.path.join(PAPERS, paper, name + ".py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def run_reproductions(args):
  """The paper reproductions of `--experiment`, each into a subdirectory."""
  bnn_table2 = paper_script("amagold", "bnn_table2")
  mnist_sghmc_paper = paper_script("sghmc", "mnist_sghmc_paper")
  out = {}
  if args.experiment in ("table2", "fig5", "all"):
    # The paper's MLP and 3 seeds with --full; otherwise the small MLP,
    # one seed.
    out["table2"] = bnn_table2.main(
        ["--data-dir", args.data_dir] +
        ([] if args.full else ["--small", "--seeds", str(args.seed)]) +
        ["--out", os.path.join(args.out, "table2")])
  if args.experiment in ("sghmc_paper", "all"):
    out["sghmc_paper"] = mnist_sghmc_paper.main(
        ["--data-dir", args.data_dir, "--seed", str(args.seed)] +
        (["--full"] if args.full else []) +
        ["--out", os.path.join(args.out, "sghmc_paper")])
  return out


if __name__ == "__main__":
  main()
