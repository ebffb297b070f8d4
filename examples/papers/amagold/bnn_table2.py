"""AMAGOLD paper, Table 2 and Fig. 5: SGHMC vs AMAGOLD on a Bayesian MLP.

Zhang, Cooper & De Sa (AISTATS 2020), Section 6.3: test error of SGHMC and
(skew-reversible) AMAGOLD on MNIST for the momentum decay b in {0.01, 5e-6}
and the step size h in {5e-4, 1e-3}; at b = 5e-6 SGHMC diverges (about 90%
error) while AMAGOLD keeps its usual error. Fig. 5: the empirical CDF of the
predictive entropy on an out-of-distribution set (notMNIST in the paper; the
900 Fashion-MNIST sprite images here).

Rows, each run for every seed (3 by default) from that seed's burn-in:

* SGHMC and AMAGOLD at the four (b, h), through the Keras adapter
  (`tfp_sgmcmc.keras.SamplingCallback` in `model.fit`), the identity mass;
* "AMAGOLD, warm_up(300)": `tfp_sgmcmc.warm_up` (dual-averaged step size to
  0.75 acceptance and a diagonal mass matrix from the warm-up draws, Stan's
  windows) started at the paper's (b, h) = (5e-6, 1e-3), then the frozen,
  exact kernel for the sampling epochs (TFP kernel path on an
  `InMemoryTarget` holding the same data; minibatches with replacement);
* "AMAGOLD, fit(warmup=300, gradients)": the same start in `fit` with
  `SamplingCallback(warmup=300)` (the step size and the diagonal mass, by
  the same windows and rules; the mass from the gradients at the draws,
  `fit`'s default here, or with `--mass-estimate draws` from the draws'
  variance), then its sampling epochs; with
  `--methods "AMAGOLD, fit(warmup, adapt_mass=False)"`, the step size only;
* the warm-up alone started 100x too small and 100x too large in eps, to
  show where it ends.

Every row reports the test error of the 20-sample average (the paper's
measure, samples spread over the run) and of its last 10 samples, the test
NLL, and for AMAGOLD the M-H acceptance, the mean squared jump per test
(||theta_k - theta_(k-1)||^2, 0 for a rejection) and the distance of the
last sample from the burn-in point.

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

with N our training-set size. A warm-up tunes eps with beta fixed, so h =
eps^2 N and b = eps beta both move; the tables give the tuned (h, b).

Set-up as in the authors' code: inputs standardised by MNIST's mean 0.1307
and standard deviation 0.3081; prior N(0, 1 / 5e-4) (their weight decay
5e-4 on grad U; we include the prior in the M-H energy too, which their
code forgets); burn-in: 360 steps of SGD with learning rate 0.1 and
momentum 0.5 in batches of 500 (the authors' 3 epochs of 60,000 images),
22.5 epochs of our 8,000; then the samplers in batches of N / 30 (their
2,000 of 60,000, so that the minibatch noise per step, which scales with
N / n, is the paper's); 20 samples kept, spread evenly over the sampling
phase.

Data: only the 10,000 MNIST *test* images are on this project's machines:
split 8,000 train / 2,000 test by `numpy.random.default_rng(0)` for every
seed.

A diverged chain (the adapter's divergence stop, or non-finite loss, energy
or weights seen by this script's own check) is reported as "diverged (at
epoch k)" and kept out of the entropy figure, instead of crashing the
script.

    python examples/papers/amagold/bnn_table2.py
        # the docs table: 150 sampling epochs, seeds 0, 1, 2
    python examples/papers/amagold/bnn_table2.py --small --seeds 0
        # 784-100-10, 30 epochs, one seed
    python examples/papers/amagold/bnn_table2.py --methods "AMAGOLD, warm_up" \
        --no-starts --temperature 0.1
        # the warmed-up chain on the tempered posterior p(theta | D)^(1/T)
    python examples/papers/amagold/bnn_table2.py --sgd-path 90,180,360,720
        # the burn-in's SGD run for those step counts: where the burn-in
        # point sits on SGD's own path (test NLL and error)

The data directory defaults to ../shared/data (or $TFP_SGMCMC_DATA).
Writes `table2.md`, `table2.json` and `fig5_entropy_cdf.png` (seed 0's
chains) into `--out` (default out/bnn_table2/).
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
FRICTIONS = (0.01, 5e-6)                # b
STEP_SIZES = (5e-4, 1e-3)               # h, on the mean loss
# The warmed-up rows start from the paper's cell where SGHMC fails, and
# spend WARMUP_TESTS M-H tests (100 of our epochs) before sampling.
WARMUP_CELL = (5e-6, 1e-3)
WARMUP_TESTS = 300
START_FACTORS = (0.01, 100.)            # the warm-up from eps x these
METHODS = ("SGHMC", "AMAGOLD", "AMAGOLD, warm_up", "AMAGOLD, fit(warmup)")
# Also accepted by --methods: the Keras warm-up of the step size alone.
STEP_SIZE_ONLY = "AMAGOLD, fit(warmup, adapt_mass=False)"
PAPER = {("SGHMC", 0.01, 5e-4): "3.69 ± 0.03",
         ("SGHMC", 0.01, 1e-3): "3.77 ± 0.17",
         ("SGHMC", 5e-6, 5e-4): "89.95 ± 0.29",
         ("SGHMC", 5e-6, 1e-3): "89.70 ± 0.91",
         ("AMAGOLD", 0.01, 5e-4): "3.63 ± 0.04",
         ("AMAGOLD", 0.01, 1e-3): "3.65 ± 0.08",
         ("AMAGOLD", 5e-6, 5e-4): "3.65 ± 0.10",
         ("AMAGOLD", 5e-6, 1e-3): "3.63 ± 0.10"}
SIZES = {"small": dict(hidden=(100,), sample_epochs=30, num_train=8000),
         "paper": dict(hidden=(500, 256), sample_epochs=150, num_train=8000)}


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
  finite, and records that epoch (1-based, counting sampling epochs).

  With `sampling` (AMAGOLD's callback) it checks the chain's state instead:
  at an epoch's end the model's weights, the loss and the energy are those
  of the trajectory in flight, which the M-H test rejects if it overflowed
  (the adapter checks AMAGOLD's state after each test for the same
  reason)."""

  def __init__(self, sampling=None):
    super().__init__()
    self.sampling = sampling
    self.diverged_at = None
    self.epoch = 0
    self.losses = []

  def on_epoch_begin(self, epoch, logs=None):
    self.epoch = epoch + 1

  def on_epoch_end(self, epoch, logs=None):
    logs = logs or {}
    self.losses.append(float(logs.get("loss", float("nan"))))
    if self.sampling is not None:
      bad = not all(np.all(np.isfinite(np.asarray(w)))
                    for w in self.sampling.sampler.chain_state())
    else:
      bad = any(k in logs and not np.isfinite(logs[k])
                for k in ("loss", "energy")) or not all(
                    np.all(np.isfinite(w)) for w in self.model.get_weights())
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


def flat_weights(weights):
  return np.concatenate([np.ravel(np.asarray(w, np.float64))
                         for w in weights])


class JumpTracker(keras.callbacks.Callback):
  """Squared jumps of the chain per M-H test (AMAGOLD in `fit`): after
  each test, ||theta_k - theta_{k-1}||^2 of the accepted positions (0 for
  a rejection); listed after the `SamplingCallback`."""

  def __init__(self, sampling, start):
    super().__init__()
    self.sampling = sampling
    self.previous = flat_weights(start)
    self.jumps = []

  def on_train_batch_end(self, batch, logs=None):
    if self.sampling.num_tests > len(self.jumps):
      now = flat_weights(self.sampling.sampler.chain_state())
      self.jumps.append(float(np.sum(np.square(now - self.previous))))
      self.previous = now


def run_chain(name, b, h, data, init_weights, hidden, sample_epochs, seed,
              verbose=0, batches_per_epoch=BATCHES_PER_EPOCH, callbacks=(),
              warmup=None, adapt_mass=True, mass_estimate=None):
  """One sampler from the burnt-in weights through `SamplingCallback` in
  `fit`; a dict of results (`loss`: the training loss Keras reports per
  epoch). With `warmup=n` (AMAGOLD), `SamplingCallback(warmup=n,
  adapt_mass=adapt_mass)` tunes the step size (and the diagonal mass) over
  n extra tests before the `sample_epochs`."""
  n = len(data["x_train"])
  batch = n // batches_per_epoch
  warmup_epochs = (0 if not warmup else
                   math.ceil(warmup * NUM_LEAPFROG_STEPS / batches_per_epoch))
  steps = sample_epochs * batches_per_epoch
  transitions = steps // NUM_LEAPFROG_STEPS if name == "AMAGOLD" else steps
  thinning = max(1, transitions // NUM_SAMPLES)
  model = make_model(hidden, seed)
  model.set_weights(init_weights)
  compile_model(model, keras.optimizers.SGD(BURNIN["learning_rate"]))
  kwargs = {}
  if name == "AMAGOLD":
    kwargs = dict(energy_data=(data["x_train"], data["y_train"]),
                  energy_batch_size=2000, warmup=warmup)
    if warmup:
      kwargs["adapt_mass"] = adapt_mass
      if mass_estimate is not None:
        kwargs["mass_estimate"] = mass_estimate
  sampling = sgk.SamplingCallback(
      make_sampler(name, b, h, n, seed), num_examples=n, prior=PRIOR_SCALE,
      thinning=thinning, max_samples=NUM_SAMPLES, **kwargs)
  monitor = DivergenceMonitor(sampling if name == "AMAGOLD" else None)
  extra = [JumpTracker(sampling, init_weights)] if name == "AMAGOLD" else []
  start = time.perf_counter()
  method = name if not warmup else (
      f"{name}, fit(warmup={warmup}"
      f"{'' if adapt_mass else ', adapt_mass=False'}"
      # The estimate the mass came from: `fit`'s default with the arrays
      # here is the gradients'.
      f"{', ' + (mass_estimate or 'gradients') if adapt_mass else ''})")
  row = dict(method=method, b=b, h=h, paper=PAPER.get((name, b, h)),
             diverged_at=None, message=None, seed=seed,
             warmup_tests=warmup or 0)
  history = keras.callbacks.History()
  try:
    model.fit(dataset(data["x_train"], data["y_train"], batch, seed),
              epochs=sample_epochs + warmup_epochs, verbose=verbose,
              callbacks=[sampling, monitor, history] + extra + list(callbacks))
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
  # The adapter's heating statistic of the epoch energies (flagged above
  # tfp_sgmcmc.diagnostics.HEATING_THRESHOLD).
  row["heating"] = sampling.heating
  if name == "AMAGOLD" and row["diverged_at"] is None:
    jumps = extra[0].jumps[warmup or 0:]
    accepted = [j > 0. for j in jumps]
    row["acceptance"] = float(np.mean(accepted)) if jumps else math.nan
    row["mean_squared_jump"] = float(np.mean(jumps)) if jumps else math.nan
    if warmup:
      row["step_size"] = sampling.sampler.log_diagnostics()["step_size"]
      row["tuned_h"] = row["step_size"] ** 2 * n
      row["tuned_b"] = b * row["step_size"] / math.sqrt(h / n)
      mass = sampling.sampler.inverse_mass
      if adapt_mass:
        row["inverse_mass_median"] = float(np.median(flat_weights(
            [np.broadcast_to(m, np.shape(w))
             for m, w in zip(mass, init_weights)])))
  # The chain's position at the end (the model's weights after `fit`): the
  # paper's 20 samples may all come from the end of a long run, where a
  # heating chain is worst, while our average spans the whole run.
  end = (sampling.sampler.chain_state() if name == "AMAGOLD"
         else model.get_weights())
  row["distance"] = float(np.sqrt(np.sum(np.square(
      flat_weights(end) - flat_weights(init_weights)))))
  logits = model.predict(data["x_test"], batch_size=1000, verbose=0)
  row["last_sample_error"] = (
      float(np.mean(logits.argmax(1) != data["y_test"]))
      if np.all(np.isfinite(logits)) else None)
  ood = None
  if row["diverged_at"] is None and row["kept_samples"]:
    probs = sampling.posterior.predict_samples(data["x_test"],
                                               batch_size=1000)
    ood = sampling.posterior.predict_samples(data["x_ood"], batch_size=1000)
    if np.all(np.isfinite(probs)) and np.all(np.isfinite(ood)):
      _score(row, probs, ood, data["y_test"])
      ood = ood.mean(0)
    else:
      row["diverged_at"] = sample_epochs
      ood = None
  return row, ood


def mlp_logits(params, x):
  """The MLP of `make_model` as a function of its weights [W1, b1, ...]."""
  a = x
  for i in range(0, len(params) - 2, 2):
    a = tf.nn.relu(tf.matmul(a, params[i]) + params[i + 1])
  return tf.matmul(a, params[-2]) + params[-1]


def amagold_kernel(data, b, h, batches_per_epoch=BATCHES_PER_EPOCH,
                   temperature=1.):
  """`tfp_sgmcmc.AMAGOLD` on an `InMemoryTarget` holding the training set,
  the same model, prior, (h, b) units and minibatch size as the Keras rows
  (minibatches drawn with replacement). With `temperature` T != 1 the
  target is the tempered posterior p(theta | D)^(1/T) (likelihood and
  prior both scaled by 1/T, as Wenzel et al. 2020 temper it)."""
  x, y = data["x_train"], data["y_train"]
  n = len(x)
  inverse_t = 1. / temperature

  def log_likelihood(params, batch):
    xb, yb = batch
    return -inverse_t * tf.nn.sparse_softmax_cross_entropy_with_logits(
        yb, mlp_logits(params, xb))

  def log_prior(params):
    return -0.5 * inverse_t * WEIGHT_DECAY * tf.add_n(
        [tf.reduce_sum(tf.square(w)) for w in params])

  target = tfp_sgmcmc.InMemoryTarget(
      log_likelihood, (x, y), batch_size=n // batches_per_epoch,
      log_prior_fn=log_prior, energy_chunk_size=2000)
  return tfp_sgmcmc.AMAGOLD.from_sgd_parameters(
      target, learning_rate=h / n, momentum_decay=b,
      num_leapfrog_steps=NUM_LEAPFROG_STEPS, resample_momentum=False)


def warm_up(data, b, h, init_weights, seed, warmup_tests,
            batches_per_epoch=BATCHES_PER_EPOCH, target_accept_prob=0.75,
            mass_estimate=None, temperature=1.):
  """`tfp_sgmcmc.warm_up` (dual-averaged step size and a diagonal mass
  matrix, Stan's windows) of the AMAGOLD started at (h, b)."""
  kernel = amagold_kernel(data, b, h, batches_per_epoch, temperature)
  state = [tf.constant(w) for w in init_weights]
  return tfp_sgmcmc.warm_up(kernel, state, num_steps=warmup_tests,
                            seed=tfp.random.sanitize_seed([seed, 29]),
                            target_accept_prob=target_accept_prob,
                            **({} if mass_estimate is None else
                               dict(mass_estimate=mass_estimate)))


def sample_warmed_up(warm, num_tests, seed):
  """`NUM_SAMPLES` samples of the warmed-up (frozen, exact) AMAGOLD over
  `num_tests` M-H tests: (samples, acceptance, mean squared jump)."""
  kernel = warm.kernel
  thinning = max(1, num_tests // NUM_SAMPLES)

  @tf.function(jit_compile=True, autograph=False)
  def block(state, results, seed):
    # `thinning` tests in one XLA program, counting accepts and jumps.
    def body(i, state, results, seed, accepted, jump):
      seed, step_seed = tfp.random.split_seed(seed)
      new_state, results = kernel.one_step(state, results, step_seed)
      jump += tf.add_n([tf.reduce_sum(tf.square(a - c))
                        for a, c in zip(new_state, state)])
      accepted += tf.cast(results.is_accepted, tf.float32)
      return i + 1, new_state, results, seed, accepted, jump
    _, state, results, seed, accepted, jump = tf.while_loop(
        lambda i, *_: i < thinning, body,
        (tf.constant(0), state, results, seed, tf.constant(0.),
         tf.constant(0.)))
    return state, results, seed, accepted, jump

  state = list(warm.state)
  results = kernel.bootstrap_results(state)
  seed = tfp.random.sanitize_seed([seed, 2020])
  samples, accepted, jumps = [], 0., 0.
  for _ in range(NUM_SAMPLES):
    state, results, seed, a, j = block(state, results, seed)
    accepted += float(a)
    jumps += float(j)
    samples.append([w.numpy() for w in state])
  tests = thinning * NUM_SAMPLES
  return samples, accepted / tests, jumps / tests


def run_warmed_up(b, h, data, init_weights, sample_epochs, seed,
                  warmup_tests=WARMUP_TESTS,
                  batches_per_epoch=BATCHES_PER_EPOCH,
                  target_accept_prob=0.75, mass_estimate=None,
                  temperature=1.):
  """AMAGOLD warmed up by `tfp_sgmcmc.warm_up` from (h, b) (the TFP kernel
  path: Keras `fit` tunes the step size only), then sampled with the step
  size and mass frozen (exact) for `sample_epochs`."""
  n = len(data["x_train"])
  start = time.perf_counter()
  warm = warm_up(data, b, h, init_weights, seed, warmup_tests,
                 batches_per_epoch, target_accept_prob, mass_estimate,
                 temperature)
  num_tests = sample_epochs * batches_per_epoch // NUM_LEAPFROG_STEPS
  samples, acceptance, jump = sample_warmed_up(warm, num_tests, seed)
  variance = flat_weights(warm.report.variance)
  # At another target acceptance the label says so: the identity mass's
  # jump is compared at its own acceptance.
  label = ("" if target_accept_prob == 0.75 else
           f", target_accept_prob={target_accept_prob:g}")
  label += "" if mass_estimate is None else f", {mass_estimate}"
  label += "" if temperature == 1. else f", T={temperature:g}"
  row = dict(method=f"AMAGOLD, warm_up({warmup_tests}{label})", b=b, h=h,
             paper=None, diverged_at=None, message=None, seed=seed,
             seconds=time.perf_counter() - start, loss=[],
             warmup_tests=warmup_tests, acceptance=acceptance,
             mean_squared_jump=jump, kept_samples=len(samples),
             step_size=warm.report.step_size,
             warmup_acceptance=warm.report.acceptance,
             inverse_mass_median=float(np.median(variance)),
             warmup_seconds=warm.report.seconds,
             inverse_mass_range=[float(np.percentile(variance, 5)),
                                 float(np.percentile(variance, 95))])
  eps0 = math.sqrt(h / n)
  row["tuned_h"] = warm.report.step_size ** 2 * n
  row["tuned_b"] = b * warm.report.step_size / eps0
  row["distance"] = float(np.sqrt(np.sum(np.square(
      flat_weights(samples[-1]) - flat_weights(init_weights)))))

  def predict(xs):
    return np.stack([tf.nn.softmax(mlp_logits(w, xs)).numpy()
                     for w in samples])
  row["last_sample_error"] = float(np.mean(
      mlp_logits(samples[-1], data["x_test"]).numpy().argmax(1)
      != data["y_test"]))
  probs, ood = predict(data["x_test"]), predict(data["x_ood"])
  if not (np.all(np.isfinite(probs)) and np.all(np.isfinite(ood))):
    row["diverged_at"] = sample_epochs
    return row, None
  _score(row, probs, ood, data["y_test"])
  row["_variance"] = variance           # not saved: compared with starts
  return row, ood.mean(0)


def warm_up_starts(b, h, data, init_weights, seed, factors=START_FACTORS,
                   warmup_tests=WARMUP_TESTS):
  """The warm-up alone from step sizes `factors` x the paper's (eps = sqrt(h
  / N); friction beta = b / eps kept): where each one ends."""
  rows = []
  for factor in factors:
    start = time.perf_counter()
    warm = warm_up(data, b * factor, h * factor ** 2, init_weights, seed,
                   warmup_tests)
    variance = flat_weights(warm.report.variance)
    rows.append(dict(factor=factor, seed=seed,
                     step_size=warm.report.step_size,
                     acceptance=warm.report.acceptance,
                     windows=warm.report.windows, variance=variance,
                     seconds=time.perf_counter() - start))
  return rows


def _score(row, probs, ood, labels):
  """Scores of the sample average (probs: [samples, examples, classes]),
  over all samples (as the paper) and over the last half."""
  def scores(p):
    p = np.clip(p.mean(0), 1e-12, 1.)
    error = float(np.mean(p.argmax(1) != labels))
    nll = float(-np.mean(np.log(p[np.arange(len(labels)), labels])))
    return error, nll
  error, nll = scores(probs)
  half_error, half_nll = scores(probs[len(probs) // 2:])
  p = np.clip(probs.mean(0), 1e-12, 1.)
  row["_log_p"] = np.log(p[np.arange(len(labels)), labels])  # not saved
  row.update(error=error,
             error_se=math.sqrt(error * (1. - error) / len(labels)),
             nll=nll, error_last_half=half_error, nll_last_half=half_nll,
             ood_entropy_median=float(np.median(entropy(ood.mean(0)))))


def burn_in_point(data, hidden, seed, burnin_steps=BURNIN["steps"]):
  """The shared burn-in and its test error and NLL."""
  init = burn_in(data, hidden, seed, steps=burnin_steps)
  model = make_model(hidden, seed)
  model.set_weights(init)
  p = softmax(model.predict(data["x_test"], batch_size=1000, verbose=0))
  labels = data["y_test"]
  log_p = np.log(np.clip(p[np.arange(len(labels)), labels], 1e-12, 1.))
  return init, dict(error=float(np.mean(p.argmax(1) != labels)),
                    nll=float(-np.mean(log_p)), _log_p=log_p)


def sgd_path(data, hidden, seed, steps_list):
  """Where the burn-in point sits on SGD's own path: the burn-in's SGD (same
  seed, data order and optimizer) run for each number of steps in
  `steps_list`, with the training and test error and NLL of its weights."""
  rows = []
  for steps in steps_list:
    keras.utils.set_random_seed(seed)
    model = make_model(hidden, seed)
    model.set_weights(burn_in(data, hidden, seed, steps=steps))
    row = dict(seed=seed, steps=steps)
    for split in ("train", "test"):
      labels = data[f"y_{split}"]
      p = softmax(model.predict(data[f"x_{split}"], batch_size=1000,
                                verbose=0))
      row[f"{split}_error"] = float(np.mean(p.argmax(1) != labels))
      row[f"{split}_nll"] = float(-np.mean(np.log(np.clip(
          p[np.arange(len(labels)), labels], 1e-12, 1.))))
    rows.append(row)
  return rows


def run(data, size, seed, verbose=0, configs=None, progress=print,
        batches_per_epoch=BATCHES_PER_EPOCH, burnin_steps=BURNIN["steps"],
        methods=None, warmup_tests=WARMUP_TESTS, target_accept_prob=0.75,
        mass_estimate=None, temperature=1.):
  """Burn in once, then every (method, b, h) of `configs` (default: SGHMC
  and AMAGOLD at all four (b, h), and the two warmed-up AMAGOLDs from the
  paper's (b, h) = WARMUP_CELL). Returns (rows, {label: OOD probabilities},
  burn-in scores)."""
  hidden, sample_epochs = size["hidden"], size["sample_epochs"]
  start = time.perf_counter()
  init, burnin = burn_in_point(data, hidden, seed, burnin_steps)
  progress(f"seed {seed}: burn-in {time.perf_counter() - start:.0f} s, test "
           f"error of the burnt-in weights {100 * burnin['error']:.2f}%, NLL "
           f"{burnin['nll']:.3f}")
  if configs is None:
    methods = methods or METHODS
    configs = [(m, b, h) for m in methods if m in ("SGHMC", "AMAGOLD")
               for b in FRICTIONS for h in STEP_SIZES]
    configs += [(m,) + WARMUP_CELL for m in methods
                if m not in ("SGHMC", "AMAGOLD")]
  rows, ood = [], {}
  for name, b, h in configs:
    if name == "AMAGOLD, warm_up":
      row, probs = run_warmed_up(b, h, data, init, sample_epochs, seed,
                                 warmup_tests, batches_per_epoch,
                                 target_accept_prob, mass_estimate,
                                 temperature)
    elif name in ("AMAGOLD, fit(warmup)", STEP_SIZE_ONLY):
      row, probs = run_chain("AMAGOLD", b, h, data, init, hidden,
                             sample_epochs, seed, verbose, batches_per_epoch,
                             warmup=warmup_tests,
                             adapt_mass=name != STEP_SIZE_ONLY,
                             mass_estimate=mass_estimate)
    else:
      row, probs = run_chain(name, b, h, data, init, hidden, sample_epochs,
                             seed, verbose, batches_per_epoch)
    row["burnin_error"], row["burnin_nll"] = burnin["error"], burnin["nll"]
    if "_log_p" in row:
      # Paired over the test images: the chain's NLL minus the burn-in's.
      gap = burnin["_log_p"] - row.pop("_log_p")
      row["nll_minus_burnin"] = float(gap.mean())
      row["nll_minus_burnin_se"] = float(gap.std(ddof=1) / math.sqrt(
          len(gap)))
    rows.append(row)
    if probs is not None:
      ood[f"{row['method']}, b={b:g}, h={h:g}"] = probs
    acc = row.get("acceptance")
    progress(f"  {row['method']:26s} b={b:<6g} h={h:<6g} {cell(row):>24s}  "
             f"{'' if acc is None else f'acceptance {100 * acc:.1f}%  '}"
             f"{row['seconds']:.0f} s")
  return rows, ood, burnin


def cell(row):
  if row["diverged_at"] is not None:
    return f"diverged (at epoch {row['diverged_at']})"
  return f"{100 * row['error']:.2f} ± {100 * row['error_se']:.2f}%"


def table(rows, header):
  """One line per chain (seed)."""
  lines = [header, "",
           "| method | b | h | seed | test error ± s.e. | last half | "
           "test NLL (last half) | NLL minus burn-in's ± paired s.e. | "
           "M-H acceptance | mean squared jump per "
           "test | distance from burn-in | tuned h, b | last sample's error "
           "| training loss, last epoch | OOD entropy, median | seconds |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    def fmt(key, f="{:.3f}", scale=1.):
      v = r.get(key)
      return "" if v is None or (isinstance(v, float) and math.isnan(v)) \
          else f.format(scale * v)
    loss = r.get("loss")
    tuned = ("" if "tuned_h" not in r else
             f"{r['tuned_h']:.3g}, {r['tuned_b']:.3g}")
    lines.append(
        f"| {r['method']} | {r['b']:g} | {r['h']:g} | {r.get('seed', '')} | "
        f"{cell(r)} | {fmt('error_last_half', '{:.2f}%', 100)} | "
        f"{fmt('nll')} ({fmt('nll_last_half')}) | "
        f"{fmt('nll_minus_burnin', '{:+.4f}')}"
        f"{fmt('nll_minus_burnin_se', ' ± {:.4f}')} | "
        f"{fmt('acceptance', '{:.1f}%', 100)} | "
        f"{fmt('mean_squared_jump', '{:.3g}')} | {fmt('distance', '{:.3g}')} "
        f"| {tuned} | {fmt('last_sample_error', '{:.2f}%', 100)} | "
        f"{f'{loss[-1]:.3g}' if loss else ''} | "
        f"{fmt('ood_entropy_median')} | {r['seconds']:.0f} |")
  return "\n".join(lines)


def summary(rows, burnins):
  """Per cell, mean ± standard error over the seeds (the paper's form) of
  the scores, and the per-seed values of what can grow without bound (the
  distance, the training loss) or jump (the last sample's error)."""
  cells = {}
  for r in rows:
    cells.setdefault((r["method"], r["b"], r["h"]), []).append(r)
  lines = ["| method | b | h | test error, 20 samples | test error, last "
           "half | test NLL | M-H acceptance | mean squared jump per test | "
           "OOD entropy, median (nats) | per seed: last sample's error | "
           "per seed: distance from burn-in | per seed: training loss, last "
           "epoch | paper |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

  def stat(rs, key, scale=1., f="{:.2f}", unit=""):
    v = np.array([r[key] for r in rs if r.get(key) is not None], float)
    if not len(v) or np.all(np.isnan(v)):
      return ""
    if len(v) == 1:
      return f.format(scale * v[0]) + unit
    se = v.std(ddof=1) / math.sqrt(len(v))
    return f"{f.format(scale * v.mean())} ± {f.format(scale * se)}{unit}"

  def each(rs, key, scale=1., f="{:.3g}"):
    out = []
    for r in rs:
      v = r.get(key)
      if isinstance(v, list):
        v = v[-1] if v else None
      out.append("–" if v is None else f.format(scale * v))
    return " / ".join(out) if any(o != "–" for o in out) else ""
  for (method, b, h), rs in cells.items():
    ok = [r for r in rs if r["diverged_at"] is None]
    note = ("" if len(ok) == len(rs) else
            f" ({len(rs) - len(ok)} of {len(rs)} diverged, at epochs "
            f"{', '.join(str(r['diverged_at']) for r in rs if r not in ok)})")
    paper = PAPER.get((method, b, h))
    lines.append(
        f"| {method} | {b:g} | {h:g} | {stat(ok, 'error', 100, unit='%')}"
        f"{note} | {stat(ok, 'error_last_half', 100, unit='%')} | "
        f"{stat(ok, 'nll', f='{:.3f}')} | "
        f"{stat(ok, 'acceptance', 100, '{:.1f}', '%')} | "
        f"{stat(ok, 'mean_squared_jump', f='{:.3g}')} | "
        f"{stat(ok, 'ood_entropy_median', f='{:.3f}')} | "
        f"{each(rs, 'last_sample_error', 100, '{:.1f}%')} | "
        f"{each(rs, 'distance')} | {each(rs, 'loss')} | "
        f"{'' if paper is None else paper + '%'} |")
  lines.append(
      f"| burn-in point (every chain's start) | | | "
      f"{stat(burnins, 'error', 100, unit='%')} | | "
      f"{stat(burnins, 'nll', f='{:.3f}')} | | | | | 0 | | |")
  return "\n".join(lines)


def render(paths, out):
  """Merges the rows of runs' table2.json files (e.g. one method rerun
  alone) into `out`/table2.md: the per-cell summary and every chain."""
  rows, burnins = [], None
  for path in paths:
    with open(path) as f:
      run_ = json.load(f)
    rows += run_["rows"]
    burnins = burnins or run_["burn_in"]
  text = summary(rows, burnins) + "\n\n" + table(rows, "Every chain:")
  with open(os.path.join(out, "table2.md"), "w") as f:
    f.write(text + "\n")
  return text


def figure(ood, rows, path):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(6.4, 4.6))
  for label, probs in ood.items():
    h = np.sort(entropy(probs))
    style = ("--" if label.startswith("SGHMC") else
             "-" if label.startswith("AMAGOLD, b") else ":")
    ax.step(h, np.arange(1, len(h) + 1) / len(h), where="post", label=label,
            linestyle=style)
  for r in rows:
    if r["diverged_at"] is not None:
      ax.plot([], [], " ", label=f"{r['method']}, b={r['b']:g}, "
              f"h={r['h']:g}: diverged")
  ax.set_xlabel("entropy of the predictive distribution (nats)")
  ax.set_ylabel("empirical CDF")
  ax.set_xlim(0., math.log(10.))
  ax.set_title("Fashion-MNIST sprite images (out of distribution)")
  ax.legend(loc="lower right", fontsize=6)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def starts_table(starts):
  lines = ["| seed | start (x the paper's eps) | frozen step size eps | "
           "h = eps^2 N | acceptance, last window | inverse mass, median "
           "| median abs log ratio of inverse mass to the 1x start's | "
           "seconds |", "|---|---|---|---|---|---|---|---|"]
  for s in starts:
    ref = [t for t in starts if t["seed"] == s["seed"] and t["factor"] == 1.]
    ratio = ("" if not ref else "{:.3f}".format(float(np.median(np.abs(
        np.log(s["variance"] / ref[0]["variance"]))))))
    lines.append(f"| {s['seed']} | {s['factor']:g} | {s['step_size']:.4g} | "
                 f"{s['h']:.3g} | {100 * s['acceptance']:.1f}% | "
                 f"{np.median(s['variance']):.3g} | {ratio} | "
                 f"{s['seconds']:.0f} |")
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--out", default=os.path.join("out", "bnn_table2"))
  parser.add_argument("--small", action="store_true",
                      help="784-100-10 for 30 epochs instead of the paper's "
                      "784-500-256-10")
  parser.add_argument("--sample-epochs", type=int, default=None)
  parser.add_argument("--seeds", default="0,1,2",
                      help="comma-separated run seeds (burn-in, minibatch "
                      "order, sampler noise); the data split is seed 0's")
  parser.add_argument("--burnin-steps", type=int, default=BURNIN["steps"],
                      help="SGD steps of burn-in (the authors' 360 = 3 "
                      "epochs of 60,000 in batches of 500)")
  parser.add_argument("--batches-per-epoch", type=int,
                      default=BATCHES_PER_EPOCH,
                      help="N / n of the sampling phase (the paper's 30)")
  parser.add_argument("--warmup-tests", type=int, default=WARMUP_TESTS)
  parser.add_argument("--target-accept-prob", type=float, default=0.75,
                      help="the acceptance `warm_up` tunes to (e.g. the "
                      "identity mass's, to compare jumps at one acceptance)")
  parser.add_argument("--mass-estimate", default=None,
                      choices=("draws", "gradients"),
                      help="what the warm-ups' diagonal M^-1 is estimated "
                      "from (default: each warm-up's own default)")
  parser.add_argument("--temperature", type=float, default=1.,
                      help="warm_up rows only: sample the tempered "
                      "posterior p(theta | D)^(1/T) (T < 1: a cold "
                      "posterior)")
  parser.add_argument("--methods", default=None,
                      help="semicolon-separated subset of " +
                      "; ".join(METHODS) + " (default: all)")
  parser.add_argument("--no-starts", action="store_true",
                      help="skip the warm-ups from 100x too small and too "
                      "large a step size")
  parser.add_argument("--render", nargs="+", default=None, metavar="JSON",
                      help="run nothing: merge these table2.json files "
                      "into --out/table2.md")
  parser.add_argument("--sgd-path", default=None, metavar="STEPS",
                      help="run nothing else: comma-separated SGD step "
                      "counts; writes sgd_path.json with the burn-in's "
                      "SGD run that long, per seed (train and test error "
                      "and NLL)")
  parser.add_argument("--verbose", type=int, default=0)
  args = parser.parse_args(argv)
  if args.render:
    os.makedirs(args.out, exist_ok=True)
    print(render(args.render, args.out))
    return None
  methods = (tuple(m.strip() for m in args.methods.split(";"))
             if args.methods else METHODS)
  if args.temperature != 1. and set(methods) != {"AMAGOLD, warm_up"}:
    parser.error("--temperature tempers the warm_up rows only: pass "
                 "--methods 'AMAGOLD, warm_up' with it")
  size = dict(SIZES["small" if args.small else "paper"])
  if args.sample_epochs:
    size["sample_epochs"] = args.sample_epochs
  seeds = [int(s) for s in args.seeds.split(",")]
  os.makedirs(args.out, exist_ok=True)
  data = load(args.data_dir, 0, size["num_train"])
  if args.sgd_path:
    path = [r for seed in seeds for r in sgd_path(
        data, size["hidden"], seed, [int(k) for k in
                                     args.sgd_path.split(",")])]
    for r in path:
      print(f"seed {r['seed']}, {r['steps']} SGD steps: train error "
            f"{100 * r['train_error']:.2f}%, NLL {r['train_nll']:.4f}; test "
            f"error {100 * r['test_error']:.2f}%, NLL {r['test_nll']:.4f}")
    with open(os.path.join(args.out, "sgd_path.json"), "w") as f:
      json.dump(dict(rows=path, split=data["split"]), f, indent=1)
    return path
  start = time.perf_counter()
  rows, burnins, starts, ood_first = [], [], [], None
  n = len(data["x_train"])
  for seed in seeds:
    keras.utils.set_random_seed(seed)
    seed_rows, ood, burnin = run(
        data, size, seed, args.verbose,
        batches_per_epoch=args.batches_per_epoch,
        burnin_steps=args.burnin_steps, methods=methods,
        warmup_tests=args.warmup_tests,
        target_accept_prob=args.target_accept_prob,
        mass_estimate=args.mass_estimate, temperature=args.temperature)
    rows += seed_rows
    burnins.append({k: v for k, v in burnin.items() if k != "_log_p"})
    ood_first = ood if ood_first is None else ood_first
    for r in seed_rows:
      if "_variance" in r:
        starts.append(dict(factor=1., seed=seed, step_size=r["step_size"],
                           acceptance=r["warmup_acceptance"],
                           variance=r.pop("_variance"),
                           h=r["step_size"] ** 2 * n,
                           seconds=r["warmup_seconds"]))
    if not args.no_starts and "AMAGOLD, warm_up" in methods:
      init = burn_in(data, size["hidden"], seed, steps=args.burnin_steps)
      for s in warm_up_starts(*WARMUP_CELL, data, init, seed,
                              warmup_tests=args.warmup_tests):
        s["h"] = s["step_size"] ** 2 * n
        starts.append(s)
        print(f"  warm_up from {s['factor']:g}x: step size "
              f"{s['step_size']:.4g}, acceptance "
              f"{100 * s['acceptance']:.1f}%, {s['seconds']:.0f} s")
    with open(os.path.join(args.out, "table2.json"), "w") as f:
      json.dump(dict(rows=[{k: v for k, v in r.items() if k != "_variance"}
                           for r in rows], burn_in=burnins, size=size, seeds=seeds,
                     batches_per_epoch=args.batches_per_epoch,
                     warmup_tests=args.warmup_tests, split=data["split"],
                     starts=[{k: v for k, v in s.items() if k != "variance"}
                             | dict(inverse_mass_median=float(
                                 np.median(s["variance"])))
                             for s in starts]), f, indent=1)
  seconds = time.perf_counter() - start
  arch = "-".join(str(u) for u in (784,) + tuple(size["hidden"]) + (10,))
  header = (
      f"MLP {arch}, {data['split']}; prior N(0, 1/{WEIGHT_DECAY:g}); burn-in "
      f"{args.burnin_steps} steps of SGD(lr {BURNIN['learning_rate']}, "
      f"momentum {BURNIN['momentum']}) in batches of "
      f"{BURNIN['batch_size']}; then {size['sample_epochs']} epochs of the "
      f"sampler in batches of {n // args.batches_per_epoch} (N/n = "
      f"{args.batches_per_epoch}), {NUM_SAMPLES} samples kept; "
      f"learning_rate = h/N, momentum_decay = b; AMAGOLD T = "
      f"{NUM_LEAPFROG_STEPS}, skew-reversible, exact M-H test; warmed-up "
      f"rows: {args.warmup_tests} extra warm-up tests before the sampling "
      f"epochs; seeds {args.seeds}; {seconds / 60:.0f} minutes in all.")
  text = (header + "\n\n" + summary(rows, burnins) + "\n\n" +
          table(rows, "Every chain:"))
  if starts:
    text += ("\n\nThe warm-up alone, started 100x too small and 100x too "
             "large (in eps):\n\n" + starts_table(starts))
  figure(ood_first or {}, [r for r in rows if r["seed"] == seeds[0]],
         os.path.join(args.out, "fig5_entropy_cdf.png"))
  with open(os.path.join(args.out, "table2.md"), "w") as f:
    f.write(text + "\n")
  print(text)
  print(f"wrote {args.out}/table2.md, table2.json, fig5_entropy_cdf.png")
  return rows


if __name__ == "__main__":
  main()
