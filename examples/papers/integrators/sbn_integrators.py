"""Chen, Ding & Carin (2015), Sec. 5: a sigmoid belief network on MNIST, small.

The paper trains a one-layer sigmoid belief network (binary hidden layer h,
binary pixels v, p(v | h) = Bernoulli(sigmoid(W h + c)), p(h) =
Bernoulli(sigmoid(b))) on MNIST (60,000 images, minibatch 200, 5,000
iterations) with SGHMC-S (splitting), SGHMC-E (Euler) and SGLD, and reports
negative test log-likelihoods (AIS) of 103, 105 and 126 with 100 hidden
units, 98, 100 and 110 with 200.

Here, smaller: the 10,000 MNIST test images (the only MNIST file on these
machines) split 8,000 / 2,000 and binarised at 0.5, and 8 hidden units, so
that p(v) = sum over the 2^8 = 256 hidden states is computed exactly: the
log-likelihood is exact and differentiable (no Gibbs sampling of h, no
AIS). Prior N(0, 1) on W, b, c; minibatch 100; `--steps` iterations from
W ~ N(0, 0.01^2), c = logit of the pixel means, b = 0. SGHMC's step h on
a grid, friction D = 1 / sqrt(h) (the paper's middle choice,
{0.9, 1, 5} / sqrt(h)); SGLD on its own grid. Test NLL (nats per image) of
the Bayesian predictive, -mean log(mean_s p(v | theta_s)) over the kept
samples (the last half, thinned to 10).

    python examples/papers/integrators/sbn_integrators.py [--steps 2000] \
        [--out DIR]

Writes sbn.png (test NLL against step size), sbn.md and sbn.json into
--out (default out/sbn_integrators).
"""

import argparse
import dataclasses
import itertools
import json
import os
import time
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

warnings.filterwarnings("ignore", message=".*is not calibrated.*")

LABELS = {"splitting": "SGHMC-S", "euler": "SGHMC-E", "sgld": "SGLD"}
PAPER = {"splitting": 103, "euler": 105, "sgld": 126}
EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..",
                                        ".."))
SHARED_DATA = os.path.join(EXAMPLES, "..", "..", "shared", "data")


@dataclasses.dataclass
class Config:
  hidden: int = 8
  sghmc_steps: tuple = (0.003, 0.01, 0.02, 0.05, 0.1)
  sgld_steps: tuple = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3)
  num_steps: int = 2000
  kept: int = 10
  batch_size: int = 100
  num_train: int = 8000
  seed: int = 1


def load(num_train=8000, data_dir=SHARED_DATA):
  # The split of the SG-NUTS MNIST experiments (papers/sghmc/mnist_mlp.py):
  # the 2,000 test images follow the training images in the permutation.
  split = sg.datasets.load_mnist_split(
      data_dir, 0, train=slice(num_train),
      test=slice(num_train, num_train + 2000))
  (x, _), (xt, _) = split["train"], split["test"]
  return (x > 0.5).astype(np.float32), (xt > 0.5).astype(np.float32)


def hidden_states(k):
  return tf.constant(list(itertools.product([0., 1.], repeat=k)),
                     tf.float32)  # [2^k, k]


def split(state, k):
  w = tf.reshape(state[..., :784 * k], [-1, 784, k])
  c = state[..., 784 * k:784 * k + 784]
  b = state[..., 784 * k + 784:]
  return w, tf.reshape(c, [-1, 784]), tf.reshape(b, [-1, k])


def log_marginal(state, v, k):
  """log p(v) per image, exactly: [C, n]."""
  w, c, b = split(state, k)
  hs = hidden_states(k)                                     # [H, k]
  log_ph = tf.reduce_sum(hs[None] * tf.math.log_sigmoid(b)[:, None] +
                         (1. - hs[None]) * tf.math.log_sigmoid(-b)[:, None],
                         -1)                                 # [C, H]
  logits = tf.einsum("cvk,hk->chv", w, hs) + c[:, None]     # [C, H, 784]
  # log p(v | h) = sum_j v_j l_j - softplus(l_j)
  lin = tf.einsum("nv,chv->cnh", v, logits)
  norm = tf.reduce_sum(tf.math.softplus(logits), -1)        # [C, H]
  return tf.reduce_logsumexp(lin - norm[:, None] + log_ph[:, None], -1)


def dim(k):
  return 784 * k + 784 + k


def make_target(train, config):
  k = config.hidden
  return sg.InMemoryTarget(
      lambda s, v: log_marginal(s, v, k), train,
      batch_size=config.batch_size,
      log_prior_fn=lambda s: -0.5 * tf.reduce_sum(tf.square(s), -1))


def initial_state(train, config, chains):
  rng = np.random.default_rng(3)
  k = config.hidden
  mean = np.clip(train.mean(0), 0.01, 0.99)
  init = np.concatenate([rng.normal(0., 0.01, 784 * k),
                         np.log(mean / (1. - mean)), np.zeros(k)])
  return tf.constant(np.tile(init, (chains, 1)).astype(np.float32))


def run_sampler(method, train, test, config):
  steps = config.sgld_steps if method == "sgld" else config.sghmc_steps
  h = tf.constant(np.asarray(steps, np.float32)[:, None])
  target = make_target(train, config)
  if method == "sgld":
    kernel = sg.SGLD(target, step_size=h)
  else:
    kernel = sg.SGHMC(target, step_size=h, friction=1. / tf.sqrt(h),
                      integrator=method)
  thin = max(1, config.num_steps // (2 * config.kept))
  init = initial_state(train, config, len(steps))

  @tf.function(jit_compile=True, autograph=False)
  def run(seed):
    burn, seed = tfp.random.split_seed(seed)
    del burn
    return tfp.mcmc.sample_chain(
        config.kept, init, kernel=kernel,
        num_burnin_steps=config.num_steps - config.kept * thin,
        num_steps_between_results=thin - 1,
        trace_fn=lambda _, r: r.diverged, seed=seed)

  start = time.time()
  draws, diverged = run(tf.constant([config.seed, list(LABELS).index(method)]))
  seconds = time.time() - start
  ll = np.stack([log_marginal(d, tf.constant(test), config.hidden).numpy()
                 for d in np.asarray(draws)])              # [S, C, n]
  nll = -(tf.reduce_logsumexp(ll, 0).numpy() - np.log(len(ll))).mean(-1)
  div = np.asarray(diverged)[-1] | ~np.isfinite(nll)
  return dict(step_sizes=list(steps), nll=np.where(div, np.nan, nll),
              diverged=div, seconds=seconds)


def write_table(config, results):
  lines = ["| sampler | step size h | test NLL (nats / image) | exploded |",
           "|---|---|---|---|"]
  for m, r in results.items():
    for h, v, d in zip(r["step_sizes"], r["nll"], r["diverged"]):
      lines.append(f"| {LABELS[m]} | {h:g} | "
                   f"{'—' if not np.isfinite(v) else f'{v:.2f}'} | "
                   f"{'yes' if d else ''} |")
  lines += ["", f"| sampler | best NLL here ({config.hidden} hidden, exact) "
            "| the paper's (100 hidden, AIS) |", "|---|---|---|"]
  for m, r in results.items():
    best = np.nanmin(r["nll"]) if np.isfinite(r["nll"]).any() else np.nan
    lines.append(f"| {LABELS[m]} | {best:.2f} | {PAPER[m]} |")
  seconds = ", ".join(f"{LABELS[m]} {r['seconds']:.0f} s"
                      for m, r in results.items())
  lines += ["", f"{config.num_steps} iterations; sampling time {seconds}.",
            ""]
  return "\n".join(lines)


def write_figure(results, path):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6, 4))
  colors = {"splitting": "tab:blue", "euler": "tab:red", "sgld": "tab:green"}
  for m, r in results.items():
    ax.plot(r["step_sizes"], r["nll"], "o-", color=colors[m],
            label=LABELS[m] + (" (own h grid)" if m == "sgld" else ""))
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("step size h")
  ax.set_ylabel("test NLL (nats per image)")
  ax.set_title("SBN, 8 hidden units, binarised MNIST split (exact NLL)",
               fontsize=9)
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def run_experiment(config, methods=tuple(LABELS), log=print):
  train, test = load(config.num_train)
  results = {}
  for m in methods:
    results[m] = run_sampler(m, train, test, config)
    log(f"{LABELS[m]}: " + ", ".join(f"{v:.2f}" for v in results[m]["nll"])
        + f" ({results[m]['seconds']:.0f} s)")
  return results


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default=os.path.join("out", "sbn_integrators"))
  parser.add_argument("--steps", type=int, default=None)
  parser.add_argument("--seed", type=int, default=1)
  args = parser.parse_args(argv)
  config = Config(seed=args.seed)
  if args.steps:
    config = dataclasses.replace(config, num_steps=args.steps)
  results = run_experiment(config)
  os.makedirs(args.out, exist_ok=True)
  table = write_table(config, results)
  print(table)
  with open(os.path.join(args.out, "sbn.md"), "w") as f:
    f.write(table)
  write_figure(results, os.path.join(args.out, "sbn.png"))
  with open(os.path.join(args.out, "sbn.json"), "w") as f:
    json.dump(dict(config=dataclasses.asdict(config), results={
        m: {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v)
            for k, v in r.items()} for m, r in results.items()}), f,
              indent=1, default=float)


if __name__ == "__main__":
  main()
