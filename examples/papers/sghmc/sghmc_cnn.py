"""Paper 003, Fig. 7b: SGHMC samples the weights of a Bayesian CNN, through Keras.

The reproduction's claim (Sec. 4.2, Fig. 7b): its SGHMC "can be used with
convolutional neural networks"; the caption describes the network, "2
convolutional layers, batch norm, max pooling and tanh activations followed by
two Bayesian linear layers with tanh activation", SGHMC eta = 1e-6, alpha =
0.01, 150 warm-up epochs. The text names neither the data set nor the layer
widths. Here: MNIST (the 10,000-image test file split 8,000 / 2,000 as in
`mnist_sghmc_paper.py`, whose eta scaling, N(0, 1) prior, batch 500 and
test-error curve this script reuses), and

    Conv2D(8, 5x5) - BatchNorm - MaxPool(2) - tanh -
    Conv2D(16, 5x5) - BatchNorm - MaxPool(2) - tanh -
    Dense(64, tanh) - Dense(10)

(small, to run on 2 CPU cores). The batch norms' moving statistics use
momentum 0.9, not Keras' default 0.99: with 16 minibatches per epoch the
default's statistics average over about 6 epochs of weights that the sampler
keeps moving, and the network scored with them is far off (`--bn-momentum
0.99`: SGHMC's averaged test error rose to 49% after 12 epochs while SGD
with momentum reached 3.7%). Every trainable weight, the batch norms'
scales and offsets included, is sampled by `SamplingCallback` with
`SGHMC.from_sgd_momentum(learning_rate=eta, momentum_decay=alpha)`; the batch
norms' moving statistics are updated by `fit` as usual and stored with each
sample. Beside it, SGD with momentum at the same eta and alpha (no injected
noise, the prior as an L2 penalty) from the same initialisation. After
`warmup` epochs the SGHMC curve is the test error of the running average of
the predictive probabilities over one sample per epoch.

    python examples/papers/sghmc/sghmc_cnn.py         # 12 epochs, 2 warm-up
    python examples/papers/sghmc/sghmc_cnn.py --epochs 30 --warmup 5

Writes `cnn_error_vs_epochs.png`, `sghmc_cnn.md` and `sghmc_cnn.json` into
`--out` (default out/sghmc_cnn/).
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import mnist_sghmc_paper as base  # noqa: E402  pylint: disable=wrong-import-position
import tfp_sgmcmc.keras as sgk  # noqa: E402  pylint: disable=wrong-import-position

# The caption of the reproduction's Fig. 7b.
ETA, ALPHA = 1e-6, 0.01
METHODS = ("SGHMC", "SGD with momentum")


def make_model(seed, l2=None, filters=(8, 16), hidden=64, bn_momentum=0.9):
  reg = keras.regularizers.L2(l2) if l2 else None
  init = lambda k: keras.initializers.GlorotNormal(seed + k)  # noqa: E731
  layers = [keras.Input((784,)), keras.layers.Reshape((28, 28, 1))]
  for k, f in enumerate(filters):
    layers += [
        keras.layers.Conv2D(f, 5, padding="same", kernel_initializer=init(k),
                            kernel_regularizer=reg, bias_regularizer=reg),
        keras.layers.BatchNormalization(momentum=bn_momentum,
                                        beta_regularizer=reg,
                                        gamma_regularizer=reg),
        keras.layers.MaxPooling2D(2), keras.layers.Activation("tanh")]
  layers += [
      keras.layers.Flatten(),
      keras.layers.Dense(hidden, activation="tanh", kernel_initializer=init(5),
                         kernel_regularizer=reg, bias_regularizer=reg),
      keras.layers.Dense(10, kernel_initializer=init(6),
                         kernel_regularizer=reg, bias_regularizer=reg)]
  return keras.Sequential(layers)


def run(data, epochs, warmup, seed, methods=METHODS, progress=print,
        batch=base.BATCH, **model_kwargs):
  """{method: list of test errors, one per epoch}, and seconds per method."""
  n = len(data["x_train"])
  eta = ETA * base.PAPER_N / n            # on grad U, our N
  train = (tf.data.Dataset.from_tensor_slices((data["x_train"],
                                               data["y_train"]))
           .shuffle(n, seed=seed, reshuffle_each_iteration=True)
           .batch(batch, drop_remainder=True))
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  curves, seconds = {}, {}
  for name in methods:
    keras.utils.set_random_seed(seed)
    sampler = name == "SGHMC"
    curve = base.TestErrorCurve(data["x_test"], data["y_test"], warmup,
                                sampler)
    callbacks = [curve]
    if sampler:
      model = make_model(seed, **model_kwargs)
      model.compile(optimizer=keras.optimizers.SGD(eta * n), loss=loss)
      callbacks.insert(0, sgk.SamplingCallback(
          sgk.SGHMC.from_sgd_momentum(learning_rate=eta, momentum_decay=ALPHA,
                                      seed=seed),
          num_examples=n, prior=base.PRIOR_SCALE, max_samples=1,
          thinning=max(1, n // batch)))
    else:
      model = make_model(seed, l2=1. / (2. * base.PRIOR_SCALE ** 2 * n),
                         **model_kwargs)
      model.compile(optimizer=keras.optimizers.SGD(eta * n,
                                                   momentum=1. - ALPHA),
                    loss=loss)
    start = time.perf_counter()
    model.fit(train, epochs=epochs, verbose=0, callbacks=callbacks)
    seconds[name] = time.perf_counter() - start
    curves[name] = curve.errors + [float("nan")] * (epochs - len(curve.errors))
    progress(f"{name:18s} test error after each epoch: "
             + " ".join(f"{100 * e:.2f}" for e in curves[name])
             + f" % ({seconds[name]:.0f} s)")
  return curves, seconds


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", default=base.DEFAULT_DATA)
  parser.add_argument("--out", default=os.path.join("out", "sghmc_cnn"))
  parser.add_argument("--epochs", type=int, default=12)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--bn-momentum", type=float, default=0.9)
  args = parser.parse_args(argv)
  os.makedirs(args.out, exist_ok=True)
  data = base.load(args.data_dir, args.seed)
  curves, seconds = run(data, args.epochs, args.warmup, args.seed,
                        bn_momentum=args.bn_momentum)
  n = len(data["x_train"])
  lines = [
      f"CNN (conv 8 - BN - pool - tanh - conv 16 - BN - pool - tanh - dense "
      f"64 tanh - 10) on {data['split']}; prior N(0, 1); batch {base.BATCH}; "
      f"batch-norm momentum {args.bn_momentum}; "
      f"{args.epochs} epochs, {args.warmup} warm-up; eta = {ETA:g} x "
      f"{base.PAPER_N}/{n}, alpha = {ALPHA}; seed {args.seed}.", "",
      "| method | test error after epoch 1 | last epoch | best | seconds |",
      "|---|---|---|---|---|"]
  for name, errors in curves.items():
    e = np.asarray(errors)
    lines.append(f"| {name} | {100 * e[0]:.2f}% | {100 * e[-1]:.2f}% | "
                 f"{100 * np.nanmin(e):.2f}% | {seconds[name]:.0f} |")
  text = "\n".join(lines)
  base.figure(curves, args.warmup,
              os.path.join(args.out, "cnn_error_vs_epochs.png"),
              "Bayesian CNN on MNIST, 8,000 train / 2,000 test (SGHMC: "
              "running Bayesian average)")
  with open(os.path.join(args.out, "sghmc_cnn.md"), "w") as f:
    f.write(text + "\n")
  with open(os.path.join(args.out, "sghmc_cnn.json"), "w") as f:
    json.dump(dict(curves=curves, seconds=seconds, epochs=args.epochs,
                   warmup=args.warmup, seed=args.seed, split=data["split"]),
              f, indent=1)
  print(text)
  print(f"wrote {args.out}/cnn_error_vs_epochs.png, sghmc_cnn.md, "
        "sghmc_cnn.json")
  return curves


if __name__ == "__main__":
  main()
