"""AMAGOLD with acceptance-targeted step-size adaptation inside Keras `fit`.

The MNIST MLP of examples/keras_bnn_mnist.py (784-100-10 ReLU, prior
N(0, 0.3^2), 8,000 training images of the available MNIST file, batch 100):
SGD with momentum burns in for `--burnin-epochs`, then skew-reversible
AMAGOLD (Appendix F units, b = 1e-3, T = 10, the exact M-H test over the
training set) runs with `tfp.mcmc.DualAveragingStepSizeAdaptation` around
it for `--adapt-epochs` epochs of tests (TFP's semantics: adapt for
`num_adaptation_steps` tests, then freeze), and `--sample-epochs` more with
the step size frozen. For each target acceptance it prints the adapted
step size and the acceptance over the frozen epochs, and writes them to
`--out`/adaptation.json.

    python examples/keras_amagold_adaptation.py           # two targets
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import keras_bnn_mnist as bnn  # noqa: E402
import tfp_sgmcmc.keras as sgk  # noqa: E402


class EpochLogs(keras.callbacks.Callback):

  def __init__(self):
    super().__init__()
    self.logs = []

  def on_epoch_end(self, epoch, logs=None):
    self.logs.append(dict(logs))


def run(data, target, args):
  n = len(data["x_train"])
  tests_per_epoch = n // bnn.BATCH // bnn.NUM_LEAPFROG_STEPS
  sampler = sgk.AMAGOLD.from_sgd_parameters(
      learning_rate=args.learning_rate / n, momentum_decay=1e-3,
      num_leapfrog_steps=bnn.NUM_LEAPFROG_STEPS, resample_momentum=False,
      seed=args.seed)
  model = bnn.make_model(args.seed)
  bnn.compile_sgd(model)
  sampling = sgk.SamplingCallback(
      sampler, num_examples=n, prior=bnn.PRIOR_SCALE,
      burnin_epochs=args.burnin_epochs, max_samples=1,
      thinning=tests_per_epoch,
      energy_data=(data["x_train"], data["y_train"]), energy_batch_size=2000,
      step_size_adaptation=lambda inner: (
          tfp.mcmc.DualAveragingStepSizeAdaptation(
              inner, num_adaptation_steps=args.adapt_epochs * tests_per_epoch,
              target_accept_prob=target)))
  log = EpochLogs()
  epochs = args.burnin_epochs + args.adapt_epochs + args.sample_epochs
  start = time.perf_counter()
  model.fit(bnn.batches(data, args.seed), epochs=epochs, verbose=0,
            callbacks=[sampling, log])
  frozen = log.logs[args.burnin_epochs + args.adapt_epochs:]
  rates = [e["accept_rate"] for e in frozen]
  tests = len(rates) * tests_per_epoch
  rate = float(np.mean(rates))
  return dict(target=target, initial_step_size=float(sampler.step_size),
              adapted_step_size=float(frozen[-1]["step_size"]),
              acceptance_after_adaptation=rate, tests_after_adaptation=tests,
              binomial_se=float(np.sqrt(rate * (1 - rate) / tests)),
              acceptance_per_epoch=rates,
              step_size_per_epoch=[e["step_size"] for e in log.logs
                                   if "step_size" in e],
              seconds=time.perf_counter() - start)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", default=bnn.DEFAULT_DATA)
  parser.add_argument("--out", default="runs/keras_amagold_adaptation")
  parser.add_argument("--targets", type=float, nargs="+",
                      default=[0.65, 0.85])
  parser.add_argument("--burnin-epochs", type=int, default=10)
  parser.add_argument("--adapt-epochs", type=int, default=30)
  parser.add_argument("--sample-epochs", type=int, default=40)
  parser.add_argument("--learning-rate", type=float, default=2e-4,
                      help="initial h, times 1/N (Appendix F units)")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  data = bnn.load(args.data_dir, False, args.seed)
  results = [run(data, t, args) for t in args.targets]
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, "adaptation.json"), "w") as f:
    json.dump(dict(split=data["split"], args=vars(args), results=results),
              f, indent=1)
  for r in results:
    print(f"target {r['target']:.2f}: adapted step size "
          f"{r['adapted_step_size']:.3g} (from {r['initial_step_size']:.3g}),"
          f" acceptance after adaptation {r['acceptance_after_adaptation']:.3f}"
          f" +- {r['binomial_se']:.3f} over {r['tests_after_adaptation']} "
          f"tests, {r['seconds']:.0f} s")
  return results


if __name__ == "__main__":
  main()
