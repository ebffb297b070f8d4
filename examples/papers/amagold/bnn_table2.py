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
the M-H energy too, which their code forgets); burn-in: 360 steps of SGD
with learning rate 0.1 and momentum 0.5 (PyTorch's momentum=1-0.5) in
batches of 500, shared by all chains: the authors' 3 epochs of 60,000
images are 360 steps, i.e. 22.5 epochs of our 8,000 (3 epochs of ours, 48
steps, leave the net so far from the posterior's bulk that AMAGOLD's
energy-accumulator noise rejects nearly every trajectory; `--burnin-steps
48` shows it); then the sampler in batches of N / 30 (their 2,000 of
60,000, so that the minibatch noise per step, which scales with N / n, is
the paper's); 20 samples kept, spread evenly over the sampling phase.

A third AMAGOLD row per (b, h) ("AMAGOLD, adapted") starts at the same
(h, b) and adapts the step size to 85% acceptance (Section 5.2) with
`tfp.mcmc.SimpleStepSizeAdaptation` over the first quarter of its
transitions, then keeps 20 samples from the rest. It runs the TFP kernel
path (`tfp_sgmcmc.AMAGOLD` on an `InMemoryTarget` holding the same data,
minibatches drawn with replacement): the table was measured before `fit`
gained step-size adaptation (`SamplingCallback(step_size_adaptation=...)`,
see docs/keras.md), and has not been re-run through it.

Data: only the 10,000 MNIST *test* images are on this project's machines:
split 8,000 train / 2,000 test by `numpy.random.default_rng(seed)`.

A diverged chain (the adapter's divergence stop, which warns and stops
`fit`, or raises with `on_divergence="raise"`; or non-finite loss, energy or
weights seen by this script's own check) is reported as "diverged (at epoch
k)" and kept out of the entropy figure, instead of crashing the script.

    python examples/papers/amagold/bnn_table2.py --sample-epochs 100
        # the docs/results table
    python examples/papers/amagold/bnn_table2.py --small
        # 784-100-10, 30 epochs
    python examples/papers/amagold/bnn_table2.py --no-adapt
        # only the 8 Keras chains

The data directory defaults to ../shared/data (or $TFP_SGMCMC_DATA).
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
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc  # noqa: E402
from tfp_sgmcmc import datasets  # noqa: E402
import tfp_sgmcmc.keras as sgk  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                    ".."))
DEFAULT_DATA = os.environ.get("TFP_SGMCMC_DATA",
                              os.path.join(REPO, "..", "shared", "data"))

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
WEIGHT_DECAY = 5e-4                     # the authors' prior precision
PRIOR_SCALE = 1. / math.sqrt(WEIGHT_DECAY)
# The authors' burn-in: 3 epochs of their 60,000 images in batches of 500,
# i.e. 360 SGD steps. Counted in steps, not epochs: 3 epochs of our 8,000
# images are only 48 steps, which leave the MLP at 8-9% test error with a
# per-example gradient variance (trace) of about 170, where the energy
# accumulator's minibatch noise makes AMAGOLD reject nearly everything (see
# docs/results.md). 360 steps are 22.5 epochs of our 8,000 images.
BURNIN = dict(steps=360, batch_size=500, learning_rate=0.1, momentum=0.5)
BATCHES_PER_EPOCH = 30                  # 60,000 / 2,000 in the paper
NUM_LEAPFROG_STEPS = 10
NUM_SAMPLES = 20
ADAPT_TARGET = 0.85                     # Section 5.2's target acceptance
ADAPT_FRACTION = 0.25                   # of the sampling transitions
ADAPT_RATE = 0.01                       # SimpleStepSizeAdaptation's default
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
SIZES = {"small": dict(hidden=(100,), sample_epochs=30, num_train=8000),
         "paper": dict(hidden=(500, 256), sample_epochs=100, num_train=8000)}


def load(data_dir, seed, num_train=8000):
  """MNIST split (standardised as the authors do) and the OOD images."""
  def standardise(x):
    return (x - MNIST_MEAN) / MNIST_STD

  def flat(images):
    return standardise(
        images.reshape(len(images), -1).astype(np.float32) / 255.)
  split = datasets.load_mnist_split(data_dir, seed, train=slice(num_train))
  (x_train, y_train), (x_test, y_test) = split["train"], split["test"]
  return dict(x_train=standardise(x_train), y_train=y_train,
              x_test=standardise(x_test), y_test=y_test,
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


def burn_in(data, hidden, seed, batch_size=BURNIN["batch_size"],
            steps=BURNIN["steps"]):
  """The authors' burn-in, SGD with momentum for `steps` steps (their 3
  epochs of 60,000 in batches of 500: 360), shared by every chain."""
  model = make_model(hidden, seed)
  compile_model(model, keras.optimizers.SGD(BURNIN["learning_rate"],
                                            momentum=BURNIN["momentum"]))
  model.fit(dataset(data["x_train"], data["y_train"], batch_size,
                    seed).repeat(),
            epochs=1, steps_per_epoch=steps, verbose=0)
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
    _score(row, probs, ood, data["y_test"])
  return row, ood


def mlp_logits(params, x):
  """The MLP of `make_model` as a function of its weights [W1, b1, ...]."""
  a = x
  for i in range(0, len(params) - 2, 2):
    a = tf.nn.relu(tf.matmul(a, params[i]) + params[i + 1])
  return tf.matmul(a, params[-2]) + params[-1]


def run_adaptive_amagold(b, h, data, init_weights, sample_epochs, seed,
                         batches_per_epoch=BATCHES_PER_EPOCH,
                         target_accept=ADAPT_TARGET,
                         adapt_fraction=ADAPT_FRACTION,
                         adaptation_rate=ADAPT_RATE):
  """Skew-reversible AMAGOLD started at (h, b), its step size adapted to
  `target_accept` by `tfp.mcmc.SimpleStepSizeAdaptation` over the first
  `adapt_fraction` of the transitions, then frozen; the 20 samples are
  spread over the rest. TFP kernel path (`tfp_sgmcmc.AMAGOLD` on an
  `InMemoryTarget`), the same (h, b) units as the Keras rows. Adapting eps
  keeps beta = b / eps fixed, so h = eps^2 and b = eps beta both scale."""
  x, y = data["x_train"], data["y_train"]
  n = len(x)

  def log_likelihood(params, batch):
    xb, yb = batch
    return -tf.nn.sparse_softmax_cross_entropy_with_logits(
        yb, mlp_logits(params, xb))

  def log_prior(params):
    return -0.5 * WEIGHT_DECAY * tf.add_n(
        [tf.reduce_sum(tf.square(w)) for w in params])

  target = tfp_sgmcmc.InMemoryTarget(
      log_likelihood, (x, y), batch_size=n // batches_per_epoch,
      log_prior_fn=log_prior, energy_chunk_size=2000)
  transitions = sample_epochs * batches_per_epoch // NUM_LEAPFROG_STEPS
  adapt = max(1, int(adapt_fraction * transitions))
  thinning = max(1, (transitions - adapt) // NUM_SAMPLES)
  kernel = tfp.mcmc.SimpleStepSizeAdaptation(
      tfp_sgmcmc.AMAGOLD.from_sgd_parameters(
          target, learning_rate=h / n, momentum_decay=b,
          num_leapfrog_steps=NUM_LEAPFROG_STEPS, resample_momentum=False),
      num_adaptation_steps=adapt, target_accept_prob=target_accept,
      adaptation_rate=adaptation_rate)

  # One compiled transition per call (T leapfrog steps and the exact
  # energy; the Python loop costs nothing beside them). An outer
  # tf.while_loop around it trips a Grappler bug (ALREADY_EXISTS on a
  # temporary variable of the nested loops) in TF 2.21.
  one_step = tf.function(
      lambda state, results, seed: kernel.one_step(state, results, seed),
      autograph=False)

  def run_steps(state, results, seed, num_steps):
    accepted = 0
    for step_seed in tfp.random.split_seed(seed, num_steps):
      state, results = one_step(state, results, step_seed)
      accepted += int(results.inner_results.is_accepted)
    return state, results, accepted

  start = time.perf_counter()
  state = [tf.constant(w) for w in init_weights]
  results = kernel.bootstrap_results(state)
  seed = tfp.random.sanitize_seed([seed, 2020])
  seed, step_seed = tfp.random.split_seed(seed)
  state, results, adapt_accepted = run_steps(state, results, step_seed,
                                             adapt)
  samples, accepted, tests = [], 0, 0
  for _ in range(NUM_SAMPLES):
    seed, step_seed = tfp.random.split_seed(seed)
    state, results, k = run_steps(state, results, step_seed, thinning)
    accepted += k
    tests += thinning
    samples.append([w.numpy() for w in state])
  step_size = float(results.new_step_size)
  eps0 = math.sqrt(h / n)
  row = dict(method="AMAGOLD, adapted", b=b, h=h, paper=None,
             diverged_at=None, message=None,
             seconds=time.perf_counter() - start, loss=[],
             acceptance=accepted / tests,
             adaptation_acceptance=adapt_accepted / adapt,
             adapted_h=h * (step_size / eps0) ** 2,
             adapted_b=b * step_size / eps0, target_accept=target_accept,
             adaptation_rate=adaptation_rate,
             adaptation_transitions=adapt, kept_samples=len(samples))

  def predict(xs):
    return np.mean([tf.nn.softmax(mlp_logits(w, xs)).numpy()
                    for w in samples], axis=0)
  row["last_sample_error"] = float(np.mean(
      mlp_logits(samples[-1], data["x_test"]).numpy().argmax(1)
      != data["y_test"]))
  probs, ood = predict(data["x_test"]), predict(data["x_ood"])
  if not (np.all(np.isfinite(probs)) and np.all(np.isfinite(ood))):
    row["diverged_at"] = sample_epochs
    return row, None
  _score(row, probs, ood, data["y_test"])
  return row, ood


def _score(row, probs, ood, labels):
  p = np.clip(probs, 1e-12, 1.)
  error = float(np.mean(p.argmax(1) != labels))
  row.update(error=error,
             error_se=math.sqrt(error * (1. - error) / len(labels)),
             nll=float(-np.mean(np.log(p[np.arange(len(labels)), labels]))),
             ood_entropy_median=float(np.median(entropy(ood))))


def run(data, size, seed, verbose=0, configs=None, progress=print,
        batches_per_epoch=BATCHES_PER_EPOCH, adapt=True,
        burnin_steps=BURNIN["steps"], methods=None, adapt_options=None):
  """Burn in once, then every (method, b, h) of `configs` (default: all 8,
  plus the 4 adapted AMAGOLD chains if `adapt`). Method "AMAGOLD, adapted"
  runs `run_adaptive_amagold`. Returns (rows, {label: OOD probabilities})."""
  hidden, sample_epochs = size["hidden"], size["sample_epochs"]
  start = time.perf_counter()
  init = burn_in(data, hidden, seed, steps=burnin_steps)
  model = make_model(hidden, seed)
  model.set_weights(init)
  logits = model.predict(data["x_test"], batch_size=1000, verbose=0)
  burnin_error = float(np.mean(logits.argmax(1) != data["y_test"]))
  progress(f"burn-in: {time.perf_counter() - start:.0f} s, test error of "
           f"the burnt-in weights {100 * burnin_error:.2f}%")
  if configs is None:
    methods = methods or (
        ("SGHMC", "AMAGOLD") + (("AMAGOLD, adapted",) if adapt else ()))
    configs = [(m, b, h) for m in methods for b in FRICTIONS
               for h in STEP_SIZES]
  rows, ood = [], {}
  for name, b, h in configs:
    if name == "AMAGOLD, adapted":
      row, probs = run_adaptive_amagold(b, h, data, init, sample_epochs,
                                        seed, batches_per_epoch,
                                        **(adapt_options or {}))
    else:
      row, probs = run_chain(name, b, h, data, init, hidden, sample_epochs,
                             seed, verbose, batches_per_epoch)
    row["burnin_error"] = burnin_error
    rows.append(row)
    if probs is not None:
      ood[f"{name}, b={b:g}, h={h:g}"] = probs
    acc = row.get("acceptance")
    progress(f"{name:16s} b={b:<6g} h={h:<6g} {cell(row):>28s}   "
             f"{'' if acc is None else f'acceptance {100 * acc:.1f}%  '}"
             f"{row['seconds']:.0f} s")
  return rows, ood


def cell(row):
  if row["diverged_at"] is not None:
    return f"diverged (at epoch {row['diverged_at']})"
  return f"{100 * row['error']:.2f} ± {100 * row['error_se']:.2f}%"


def table(rows, header):
  lines = [header, "",
           "| method | b | h | test error ± s.e. (ours) | paper | M-H "
           "acceptance | test NLL | OOD entropy, median | last sample's error "
           "| training loss, last epoch | seconds |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    acc = r.get("acceptance")
    if acc is not None and "adapted_h" in r:
      acc = (f"{100 * acc:.1f}% (target {100 * r['target_accept']:.0f}%; "
             f"{100 * r['adaptation_acceptance']:.1f}% while adapting; "
             f"adapted to h = {r['adapted_h']:.3g}, b = {r['adapted_b']:.3g})")
    elif acc is not None:
      acc = f"{100 * acc:.1f}%"
    nll = "" if r.get("nll") is None else f"{r['nll']:.3f}"
    ent = ("" if r.get("ood_entropy_median") is None
           else f"{r['ood_entropy_median']:.3f}")
    last = r.get("last_sample_error")
    loss = r.get("loss")
    lines.append(
        f"| {r['method']} | {r['b']:g} | {r['h']:g} | {cell(r)} | "
        f"{'' if r['paper'] is None else r['paper'] + '%'} | "
        f"{acc or ''} | {nll} | {ent} | "
        f"{'' if last is None else f'{100 * last:.2f}%'} | "
        f"{f'{loss[-1]:.3f}' if loss else ''} | {r['seconds']:.0f} |")
  return "\n".join(lines)


def figure(ood, rows, path):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(6, 4.2))
  styles = {"SGHMC": "--", "AMAGOLD": "-", "AMAGOLD, adapted": ":"}
  for label, probs in ood.items():
    h = np.sort(entropy(probs))
    ax.step(h, np.arange(1, len(h) + 1) / len(h), where="post", label=label,
            linestyle=styles[label.rsplit(", b=", 1)[0]])
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
  parser.add_argument("--small", action="store_true",
                      help="784-100-10 for 30 epochs instead of the paper's "
                      "784-500-256-10")
  parser.add_argument("--full", action="store_true",
                      help="the paper's 784-500-256-10 MLP (the default)")
  parser.add_argument("--sample-epochs", type=int, default=None)
  parser.add_argument("--burnin-steps", type=int, default=BURNIN["steps"],
                      help="SGD steps of burn-in (the authors' 360 = 3 "
                      "epochs of 60,000 in batches of 500; 48 is 3 epochs "
                      "of our 8,000)")
  parser.add_argument("--batches-per-epoch", type=int,
                      default=BATCHES_PER_EPOCH,
                      help="N / n of the sampling phase (the paper's 30); "
                      "larger means more minibatch noise per step")
  parser.add_argument("--no-adapt", action="store_true",
                      help="skip the AMAGOLD rows with step-size adaptation")
  parser.add_argument("--methods", default=None,
                      help="semicolon-separated subset of SGHMC, AMAGOLD, "
                      "'AMAGOLD, adapted' (default: all)")
  parser.add_argument("--adapt-target", type=float, default=ADAPT_TARGET)
  parser.add_argument("--adapt-fraction", type=float, default=ADAPT_FRACTION)
  parser.add_argument("--adapt-rate", type=float, default=ADAPT_RATE,
                      help="SimpleStepSizeAdaptation's adaptation_rate")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--verbose", type=int, default=0)
  args = parser.parse_args(argv)
  methods = None
  if args.methods:
    methods = tuple(m.strip() for m in args.methods.split(";"))
  size = dict(SIZES["small" if args.small and not args.full else "paper"])
  if args.sample_epochs:
    size["sample_epochs"] = args.sample_epochs
  os.makedirs(args.out, exist_ok=True)
  keras.utils.set_random_seed(args.seed)
  data = load(args.data_dir, args.seed, size["num_train"])
  start = time.perf_counter()
  rows, ood = run(data, size, args.seed, args.verbose,
                  batches_per_epoch=args.batches_per_epoch,
                  adapt=not args.no_adapt, burnin_steps=args.burnin_steps,
                  methods=methods,
                  adapt_options=dict(target_accept=args.adapt_target,
                                     adapt_fraction=args.adapt_fraction,
                                     adaptation_rate=args.adapt_rate))
  seconds = time.perf_counter() - start
  arch = "-".join(str(u) for u in (784,) + tuple(size["hidden"]) + (10,))
  n = len(data["x_train"])
  header = (
      f"MLP {arch}, {data['split']}; prior N(0, 1/{WEIGHT_DECAY:g}); burn-in "
      f"{args.burnin_steps} steps of SGD(lr {BURNIN['learning_rate']}, "
      f"momentum {BURNIN['momentum']}) in batches of "
      f"{BURNIN['batch_size']} ({args.burnin_steps * BURNIN['batch_size'] / n:g}"
      f" epochs); then {size['sample_epochs']} epochs of the sampler in "
      f"batches of {n // args.batches_per_epoch} (N/n = "
      f"{args.batches_per_epoch}), {NUM_SAMPLES} samples kept; "
      f"learning_rate = h/N, momentum_decay = b; AMAGOLD T = "
      f"{NUM_LEAPFROG_STEPS}, skew-reversible, exact M-H test; adapted "
      f"AMAGOLD: tfp.mcmc.SimpleStepSizeAdaptation to {args.adapt_target:g} "
      f"acceptance (adaptation_rate {args.adapt_rate:g}) over the first "
      f"{args.adapt_fraction:g} of its transitions, "
      f"samples from the rest; seed {args.seed}; {seconds / 60:.0f} minutes "
      "in all. Ours: error of the 20-sample average on the 2,000 test "
      "images, ± its binomial standard error (one chain per cell). Paper: "
      "784-500-256-10 on the 60,000 / 10,000 split, test error ± standard "
      "error.")
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
