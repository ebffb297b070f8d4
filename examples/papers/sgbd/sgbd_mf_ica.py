"""SGBD paper, Figures 3 and 4: matrix factorisation and ICA, on synthetic data.

Mauri & Zanella compare SGLD with v-, c- and e-SGBD over a range of step
sizes on

* Fig. 3: Bayesian matrix factorisation (Salakhutdinov & Mnih 2008) of the
  MovieLens ratings (N = 80,000 ratings, d = 54,080, minibatch n = 800):
  rMSE on held-out ratings of each sample (3a) and of the MCMC estimate, the
  average prediction over the samples (3b);
* Fig. 4: independent component analysis (Amari et al. 1995) of MEG data
  (N = 14,184, d = 100 = a 10 x 10 unmixing matrix, n = 100): held-out
  log-likelihood of each sample (4a) and of the MCMC estimate, the log of
  the predictive density averaged over the samples (4b);

and find SGBD's results more robust to the step size than SGLD's. Neither
MovieLens nor the MEG recordings are on these machines (no network), so this
script builds data sets of the same kind with known truth, smaller:

* MF: 150 users x 100 items, rank 4 (U, V rows ~ N(0, 0.7^2 I), global mean
  3), ratings R_ij = U_i . V_j + 3 + N(0, 0.5^2); the items' and users'
  numbers of ratings follow a power law (Zipf-like, as in MovieLens), so
  the posterior scales of the factor rows differ by about an order of
  magnitude. N = 8,000 training ratings (2,000 held out), n = 80 (the
  paper's N/n = 100), d = 1,000. Model: the likelihood precision (4) and
  the N(0, 1) priors on U and V are fixed (BPMF's Gaussian-Wishart
  hyperpriors are left out: a simplification).
* ICA: 10 sources with the logistic density 1 / (4 cosh^2(s/2)), mixed by
  A = Q diag(scales) with Q a random rotation and the scales log-uniform on
  [0.2, 5] (heterogeneous, as real MEG channels); the model is Amari et
  al.'s, log p(x | W) = log|det W| + sum_j log p_s((W x)_j), prior
  W_ij ~ N(0, 5^2), d = 100 as the paper's. N = 5,000 training points
  (1,000 held out), n = 50 (the paper's N/n is 142).

All samplers start from the same point (MF: random factors N(0, 0.3^2); ICA: W =
I / 3), run `steps` steps per chain with the step-size scale s (SGBD sigma
= s, SGLD h = s^2/2, as `sgbd_logistic.py`), `reps` chains per s, all in one
XLA program; the second half is kept (thinned to 100 draws per chain).
c-SGBD's online noise estimate uses the closed-form per-example gradients
(the same quantity as the library's generic estimate, checked in the test).
The summary per sampler is its robust range: the longest run of step sizes
(in decades of s) where the MCMC estimate is within a tolerance of the best
over all samplers and step sizes (MF: rMSE within 5% of the best; ICA: mean
held-out log-likelihood within 0.1 nats per point of the best).

    python examples/papers/sgbd/sgbd_mf_ica.py [--parts mf,ica] [--steps N] \
        [--out DIR]

Default: 9 step sizes s = 10^-4.5 ... 10^-0.5 by half decades, 2 chains
per step size, 20,000 steps (MF) and 4,000 steps (ICA) per chain.

Writes to --out (default ./out/sgbd_mf_ica): fig3_mf.png, fig4_ica.png,
sgbd_mf_ica.md (tables) and sgbd_mf_ica.json.
"""

import argparse
import dataclasses
import json
import os
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

import sgbd_logistic as base  # noqa: E402  pylint: disable=wrong-import-position

warnings.filterwarnings("ignore", message=".*is not calibrated.*")

DEFAULT_STEPS = {"mf": 20_000, "ica": 4000}
METHODS = ("sgld", "vanilla", "corrected", "extreme")
LABELS = base.METHOD_LABELS
COLORS = base.METHOD_COLORS
STYLES = {"sgld": ":", "vanilla": ":", "corrected": "--", "extreme": "-."}


@dataclasses.dataclass
class Config:
  log10_scales: tuple = tuple(np.arange(-4.5, -0.49, 0.5))
  reps: int = 2
  num_steps: int = 4000   # per part: DEFAULT_STEPS unless --steps
  kept: int = 100
  methods: tuple = METHODS
  seed: int = 1

  @property
  def scales(self):
    return 10. ** np.asarray(self.log10_scales)


# ---------------------------------------------------------------- the models
@dataclasses.dataclass
class MFProblem:
  train: tuple   # (user, item, rating), int32, int32, float32
  test: tuple
  num_users: int
  num_items: int
  rank: int
  truth: np.ndarray  # the generating parameter vector
  batch_size: int
  mean: float = 3.
  precision: float = 4.
  prior_precision: float = 1.

  @property
  def dim(self):
    return (self.num_users + self.num_items) * self.rank

  def split(self, state):
    """state [C, d] -> U [C, users, k], V [C, items, k]."""
    k = self.rank
    u = tf.reshape(state[..., :self.num_users * k], [-1, self.num_users, k])
    v = tf.reshape(state[..., self.num_users * k:], [-1, self.num_items, k])
    return u, v

  def predict(self, state, data):
    user, item = data[0], data[1]
    u, v = self.split(state)
    return tf.reduce_sum(tf.gather(u, user, axis=1) *
                         tf.gather(v, item, axis=1), -1) + self.mean


def make_mf_problem(seed=0, num_users=150, num_items=100, rank=4,
                    num_train=8000, num_test=2000, batch_size=80):
  rng = np.random.default_rng(seed)
  u = rng.normal(0., 0.7, (num_users, rank))
  v = rng.normal(0., 0.7, (num_items, rank))
  # Zipf-like popularity: the most active user / item rates about 30x
  # more than the least active.
  pu = 1. / np.arange(1, num_users + 1) ** 0.8
  pv = 1. / np.arange(1, num_items + 1) ** 0.8
  pairs = set()
  total = num_train + num_test
  while len(pairs) < total:
    a = rng.choice(num_users, 4 * total, p=pu / pu.sum())
    b = rng.choice(num_items, 4 * total, p=pv / pv.sum())
    for pair in zip(a.tolist(), b.tolist()):
      pairs.add(pair)
      if len(pairs) == total:
        break
  pairs = np.array(sorted(pairs))
  rng.shuffle(pairs)
  user, item = pairs[:, 0].astype(np.int32), pairs[:, 1].astype(np.int32)
  rating = (np.sum(u[user] * v[item], -1) + 3. +
            rng.normal(0., 0.5, total)).astype(np.float32)
  tr, te = slice(0, num_train), slice(num_train, total)
  return MFProblem((user[tr], item[tr], rating[tr]),
                   (user[te], item[te], rating[te]), num_users, num_items,
                   rank, np.concatenate([u.ravel(), v.ravel()]),
                   batch_size)


class MFTarget(sg.InMemoryTarget):
  """Gaussian matrix factorisation; c-SGBD's noise estimate in closed form:
  the per-example gradient of rating m is tau e_m V_{item m} on U_{user m},
  tau e_m U_{user m} on V_{item m} and zero elsewhere."""

  def __init__(self, problem):
    self.problem = problem
    p = problem
    super().__init__(
        lambda s, b: -0.5 * p.precision * tf.square(b[2] - p.predict(s, b)),
        p.train, batch_size=p.batch_size,
        log_prior_fn=lambda s: -0.5 * p.prior_precision * tf.reduce_sum(
            tf.square(s), -1))

  def _noise_variance_from_batch(self, state, batch, n):
    p = self.problem
    user, item, rating = batch
    u, v = p.split(state)
    uu, vv = tf.gather(u, user, axis=1), tf.gather(v, item, axis=1)
    e = p.precision * (rating - tf.reduce_sum(uu * vv, -1) - p.mean)
    gu = tf.transpose(e[..., None] * vv, [1, 0, 2])  # [n, C, k]
    gv = tf.transpose(e[..., None] * uu, [1, 0, 2])

    def moments(g, index, size):
      s1 = tf.math.unsorted_segment_sum(g, index, size)
      s2 = tf.math.unsorted_segment_sum(g * g, index, size)
      return tf.transpose(s1, [1, 0, 2]), tf.transpose(s2, [1, 0, 2])

    s1u, s2u = moments(gu, user, p.num_users)
    s1v, s2v = moments(gv, item, p.num_items)
    num = tf.cast(tf.shape(e)[-1], state.dtype)
    s1 = tf.concat([tf.reshape(s1u, [tf.shape(state)[0], -1]),
                    tf.reshape(s1v, [tf.shape(state)[0], -1])], -1)
    s2 = tf.concat([tf.reshape(s2u, [tf.shape(state)[0], -1]),
                    tf.reshape(s2v, [tf.shape(state)[0], -1])], -1)
    var = (s2 - s1 * s1 / num) / (num - 1.)
    big_n = tf.cast(self.num_examples, state.dtype)
    return tf.reshape(big_n * big_n / num * var, tf.shape(state))


def mf_metrics(problem, draws):
  """draws [S, C, d] -> (sample rMSE [C], MCMC rMSE [C]) on the test set."""
  rating = problem.test[2]
  preds = np.stack([problem.predict(tf.constant(d), problem.test).numpy()
                    for d in draws])                       # [S, C, m]
  with np.errstate(invalid="ignore", over="ignore"):
    per_sample = np.sqrt(np.mean((preds - rating) ** 2, -1)).mean(0)
    mcmc = np.sqrt(np.mean((preds.mean(0) - rating) ** 2, -1))
  return per_sample, mcmc


@dataclasses.dataclass
class ICAProblem:
  train: np.ndarray  # [N, D] float32
  test: np.ndarray
  truth: np.ndarray  # W = A^-1, [D, D]
  batch_size: int
  prior_scale: float = 5.

  @property
  def size(self):
    return self.train.shape[1]

  @property
  def dim(self):
    return self.size ** 2


def log_source(y):
  """log of the logistic density 1 / (4 cosh^2(y / 2)), stably."""
  a = tf.abs(y)
  return -a - 2. * tf.math.softplus(-a)


def ica_log_likelihood(state, x, size):
  """log p(x_i | W) per example: [C, n]."""
  w = tf.reshape(state, [-1, size, size])
  # log|det W| from the QR factors (slogdet has no XLA kernel, LU no
  # gradient).
  _, r = tf.linalg.qr(w)
  logdet = tf.reduce_sum(tf.math.log(tf.abs(tf.linalg.diag_part(r))), -1)
  y = tf.einsum("cij,nj->cni", w, x)
  return logdet[:, None] + tf.reduce_sum(log_source(y), -1)


def make_ica_problem(seed=0, size=10, num_train=5000, num_test=1000,
                     batch_size=50):
  rng = np.random.default_rng(seed)
  q, _ = np.linalg.qr(rng.normal(size=(size, size)))
  scales = np.exp(rng.uniform(np.log(0.2), np.log(5.), size))
  a = q * scales
  s = rng.logistic(size=(num_train + num_test, size))
  x = (s @ a.T).astype(np.float32)
  return ICAProblem(x[:num_train], x[num_train:], np.linalg.inv(a),
                    batch_size)


class ICATarget(sg.InMemoryTarget):
  """Amari et al.'s ICA likelihood; the per-example gradient is
  W^-T + phi(W x) x^T with phi = -tanh(./2), so only the second term
  varies over examples (c-SGBD's noise estimate in closed form)."""

  def __init__(self, problem):
    self.problem = problem
    p = problem
    super().__init__(
        lambda s, x: ica_log_likelihood(s, x, p.size), p.train,
        batch_size=p.batch_size,
        log_prior_fn=lambda s: -0.5 * tf.reduce_sum(tf.square(s), -1) /
        p.prior_scale ** 2)

  def _noise_variance_from_batch(self, state, batch, n):
    size = self.problem.size
    w = tf.reshape(state, [-1, size, size])
    y = tf.einsum("cij,nj->cni", w, batch)
    g = -tf.tanh(0.5 * y)[..., :, None] * batch[None, :, None, :]
    num = tf.cast(tf.shape(g)[1], state.dtype)
    var = tf.math.reduce_variance(g, axis=1) * num / (num - 1.)
    big_n = tf.cast(self.num_examples, state.dtype)
    return tf.reshape(big_n * big_n / num * var, tf.shape(state))


def ica_metrics(problem, draws):
  """draws [S, C, d] -> (mean per-sample held-out log-lik [C], MCMC
  log-lik [C]: mean over test points of log (1/S sum_s p(x | W_s)))."""
  x = tf.constant(problem.test)
  ll = np.stack([ica_log_likelihood(tf.constant(d), x, problem.size).numpy()
                 for d in draws])                          # [S, C, m]
  ll = np.where(np.isfinite(ll), ll, -np.inf)
  with np.errstate(invalid="ignore", over="ignore"):
    per_sample = ll.mean(-1).mean(0)
    mcmc = (tf.reduce_logsumexp(ll, 0).numpy() - np.log(len(draws))).mean(-1)
  return per_sample, mcmc


def ica_truth_log_likelihood(problem):
  return float(ica_log_likelihood(
      tf.constant(problem.truth.reshape(1, -1), tf.float32),
      tf.constant(problem.test), problem.size).numpy().mean())


# ---------------------------------------------------------------- the sweep
def initial_state(part, problem, num_chains):
  if part == "mf":
    rng = np.random.default_rng(123)
    init = rng.normal(0., 0.3, problem.dim).astype(np.float32)
  else:
    init = (np.eye(problem.size) / 3.).ravel().astype(np.float32)
  return tf.constant(np.tile(init, (num_chains, 1)))


def run_sweep(part, problem, target, method, config):
  """Draws [kept, chains, d] (second half, thinned), diverged [chains],
  seconds. Chains are ordered step size major, `reps` per step size."""
  chain_scales = np.repeat(config.scales, config.reps).astype(np.float32)
  kernel = base.make_kernel(method, target, chain_scales)
  init = initial_state(part, problem, len(chain_scales))
  half = config.num_steps // 2
  thin = max(1, half // config.kept)
  seed = tf.constant([config.seed, METHODS.index(method)])

  @tf.function(jit_compile=True, autograph=False)
  def run(seed):
    burn_seed, seed = tfp.random.split_seed(seed)
    return tfp.mcmc.sample_chain(
        half // thin, init, kernel=kernel, num_burnin_steps=half,
        num_steps_between_results=thin - 1,
        trace_fn=lambda _, r: r.diverged, seed=seed)

  start = time.time()
  draws, diverged = run(seed)
  return np.asarray(draws), np.asarray(diverged)[-1], time.time() - start


def robust_range(values, log10_scales, ok):
  run = base.longest_run(ok, log10_scales)
  return None if run is None else [float(v) for v in run]


def run_part(part, config, problem=None, log=print):
  """Returns a dict: per method, per step size metrics and robust range."""
  if problem is None:
    problem = make_mf_problem() if part == "mf" else make_ica_problem()
  target = MFTarget(problem) if part == "mf" else ICATarget(problem)
  metrics = mf_metrics if part == "mf" else ica_metrics
  out = {"methods": {}}
  for method in config.methods:
    draws, diverged, seconds = run_sweep(part, problem, target, method,
                                         config)
    per_sample, mcmc = metrics(problem, draws)
    k = len(config.scales)
    per_sample = per_sample.reshape(k, config.reps)
    mcmc = mcmc.reshape(k, config.reps)
    diverged = diverged.reshape(k, config.reps).any(1)
    bad = diverged | ~np.isfinite(mcmc).all(1)
    out["methods"][method] = dict(
        per_sample=np.where(bad[:, None], np.nan, per_sample).mean(1),
        mcmc=np.where(bad[:, None], np.nan, mcmc).mean(1),
        diverged=diverged, seconds=seconds)
    log(f"{part} {LABELS[method]:7s} {seconds:5.0f} s")
  allm = np.stack([m["mcmc"] for m in out["methods"].values()])
  if part == "mf":
    best = np.nanmin(allm)
    tol = 1.05 * best
    ok = {k: np.nan_to_num(m["mcmc"], nan=np.inf) <= tol
          for k, m in out["methods"].items()}
    out["reference"] = float(np.sqrt(np.mean(
        (problem.predict(tf.constant(problem.truth[None], tf.float32),
                         problem.test).numpy() - problem.test[2]) ** 2)))
  else:
    best = np.nanmax(allm)
    tol = best - 0.1
    ok = {k: np.nan_to_num(m["mcmc"], nan=-np.inf) >= tol
          for k, m in out["methods"].items()}
    out["reference"] = ica_truth_log_likelihood(problem)
  out["best"], out["tolerance"] = float(best), float(tol)
  for k, m in out["methods"].items():
    m["within"] = ok[k]
    m["robust_range"] = robust_range(m["mcmc"], config.log10_scales, ok[k])
  return out


# ---------------------------------------------------------------- reporting
def _range_text(run):
  return ("none" if run is None else
          f"1e{run[0]:+.1f} to 1e{run[1]:+.1f} ({run[2]:.1f} decades)")


def write_table(part, config, result):
  steps = (f"{config.reps} chains x {config.num_steps} steps per step size "
           "and sampler, second half kept.")
  name = "rMSE" if part == "mf" else "held-out log-lik per point"
  ref = ("rMSE of the generating parameters" if part == "mf" else
         "log-lik of the generating W")
  labels = [LABELS[m] for m in result["methods"]]
  lines = [f"## {'Fig. 3, matrix factorisation' if part == 'mf' else 'Fig. 4, ICA'}",
           "", steps, "", f"{ref}: {result['reference']:.4f}; best MCMC {name}: "
           f"{result['best']:.4f}; tolerance {result['tolerance']:.4f}.", "",
           "| sampler | robust range of s (MCMC estimate within tolerance) |",
           "|---|---|"]
  for m, r in result["methods"].items():
    lines.append(f"| {LABELS[m]} | {_range_text(r['robust_range'])} |")
  for key, title in (("per_sample", f"per-sample {name} (a)"),
                     ("mcmc", f"MCMC-estimate {name} (b)")):
    lines += ["", f"{title}; div. = a chain diverged", "",
              "| s | " + " | ".join(labels) + " |",
              "|---|" + "---|" * len(labels)]
    for i, v in enumerate(config.log10_scales):
      lines.append(f"| 1e{v:+.1f} | " + " | ".join(
          ("div." if r["diverged"][i] else f"{r[key][i]:.4g}")
          for r in result["methods"].values()) + " |")
  seconds = ", ".join(f"{LABELS[m]} {r['seconds']:.0f} s"
                      for m, r in result["methods"].items())
  lines += ["", f"Sampling time: {seconds}.", ""]
  return "\n".join(lines)


def write_figure(path, part, config, result):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  for ax, key, title in zip(axes, ("per_sample", "mcmc"),
                            ("(a) samples", "(b) MCMC estimate")):
    for m, r in result["methods"].items():
      ax.plot(config.scales, r[key], STYLES[m], color=COLORS[m],
              marker="o", ms=3, label=LABELS[m])
    ax.axhline(result["reference"], color="k", lw=0.8,
               label="generating parameters")
    ax.set_xscale("log")
    ax.set_xlabel("s (SGBD sigma = s, SGLD h = s^2/2)")
    ax.set_title(title)
    if part == "mf":
      ax.set_ylabel("test rMSE")
      ax.set_ylim(result["reference"] * 0.95, result["reference"] * 2.5)
    else:
      ax.set_ylabel("held-out log-likelihood per point")
      ax.set_ylim(result["reference"] - 10., result["reference"] + 1.)
  axes[0].legend(fontsize=7)
  fig.suptitle("Synthetic " + ("matrix factorisation (N = 8,000, d = 1,000, "
                               "n = 80)" if part == "mf" else
                               "ICA (N = 5,000, d = 100, n = 50)") +
               "; missing points: diverged", fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def _jsonable(x):
  if isinstance(x, dict):
    return {k: _jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_jsonable(v) for v in x]
  if isinstance(x, np.ndarray):
    return [_jsonable(v) for v in x.tolist()]
  if isinstance(x, (float, np.floating)):
    return None if not np.isfinite(x) else float(x)
  if isinstance(x, np.bool_):
    return bool(x)
  return x


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", default=os.path.join("out", "sgbd_mf_ica"))
  parser.add_argument("--parts", default="mf,ica")
  parser.add_argument("--steps", type=int, default=None)
  parser.add_argument("--reps", type=int, default=None)
  parser.add_argument("--seed", type=int, default=1)
  args = parser.parse_args(argv)
  config = Config(seed=args.seed)
  if args.reps:
    config = dataclasses.replace(config, reps=args.reps)
  os.makedirs(args.out, exist_ok=True)
  tables, results = [], {}
  for part in args.parts.split(","):
    config = dataclasses.replace(
        config, num_steps=args.steps or DEFAULT_STEPS[part])
    result = run_part(part, config)
    results[part] = result
    tables.append(write_table(part, config, result))
    write_figure(os.path.join(
        args.out, "fig3_mf.png" if part == "mf" else "fig4_ica.png"), part,
                 config, result)
    print(tables[-1])
  header = ("# SGLD vs v-, c-, e-SGBD on synthetic MF and ICA\n\n"
            f"Seed {config.seed}.\n\n")
  with open(os.path.join(args.out, "sgbd_mf_ica.md"), "w") as f:
    f.write(header + "\n".join(tables))
  with open(os.path.join(args.out, "sgbd_mf_ica.json"), "w") as f:
    json.dump(_jsonable(dict(log10_scales=list(config.log10_scales),
                             reps=config.reps, parts=results)), f, indent=1)


if __name__ == "__main__":
  main()
