"""Chen, Ding & Carin (2015), Fig. 4 and the LDA perplexities, on a synthetic corpus.

The paper samples the topics of a latent Dirichlet allocation model (200 and
500 topics, vocabulary 7,702, 10M Wikipedia documents, minibatch 100, one
pass: L = 100,000 iterations) with SGLD, SGHMC with the Euler integrator
(SGHMC-E) and SGHMC with the symmetric splitting integrator (SGHMC-S), step
sizes h in {2, 5, 8, 20, 50, 80} x 1e-5 and friction D in {20, 40, 80}, and
reports the best test perplexities: 1168 (S), 1180 (E), 2496 (SGLD) at 200
topics; 1157, 1187, 2511 at 500. Its Fig. 4 shows SGHMC-E's perplexity
exploding at large step sizes where SGHMC-S's does not.

The Wikipedia corpus is not on these machines (no network), so this script
generates a corpus from an LDA model with known topics, smaller:

* K = 10 topics over V = 200 words, topics ~ Dirichlet(0.1), document
  proportions ~ Dirichlet(0.5), 50 words per document; 2,000 training
  documents, minibatch n = 20 documents (N/n = 100), 200 test documents
  (document completion: proportions fitted on half of each test document's
  words, perplexity measured on the other half).
* Model, differences from the paper: the topic-word matrix is sampled in a
  softmax parametrisation beta_k = softmax(phi_k) with phi_kw ~ N(0, 2^2)
  (the paper uses the expanded-natural parametrisation of Patterson & Teh);
  the document-topic proportions are not sampled but set, per minibatch
  document and per state, to their maximum-likelihood value given the
  topics (20 EM iterations; the gradient is the partial derivative at that
  value, which by the envelope theorem is the gradient of the profile
  likelihood), where the paper Gibbs-samples the topic assignments.

Each sampler runs L steps per chain from phi = 0 (plus a small random
perturbation that breaks the symmetry between topics), 3 chains per step
size, all chains of one sampler in one XLA program. SGHMC's step size h
is the paper's (theta += h p, p -= h grad U~ + ...); SGLD's is its own
(theta -= h grad U~ + N(0, 2h)), on a grid of its own as in the paper.
Perplexity: exp(-mean log p(w)) over the held-out words, p(w) the average
over the kept samples (the last half, thinned) of sum_k theta-hat_k
beta_kw; per-sample perplexities along the run give the Fig. 4 curves.

    python examples/papers/integrators/lda_integrators.py [--steps L] \
        [--friction D] [--out DIR]

Writes to --out (default ./out/lda_integrators): fig4_lda.png (test
perplexity against iterations per step size, Euler and splitting; final
perplexity against step size, all three samplers), lda.md and lda.json.
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

warnings.filterwarnings("ignore", message=".*is not calibrated.*")

PRIOR_SCALE = 2.
EM_ITERATIONS = 20
METHODS = ("splitting", "euler", "sgld")
LABELS = {"splitting": "SGHMC-S", "euler": "SGHMC-E", "sgld": "SGLD"}
COLORS = {"splitting": "tab:blue", "euler": "tab:red", "sgld": "tab:green"}
PAPER = {"splitting": 1168, "euler": 1180, "sgld": 2496}


@dataclasses.dataclass
class Config:
  sghmc_steps: tuple = (1e-3, 3e-3, 1e-2, 3e-2, 6e-2, 1e-1)
  sgld_steps: tuple = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3)
  friction: float = 20.
  num_steps: int = 3000
  reps: int = 3
  kept: int = 30
  seed: int = 1


@dataclasses.dataclass
class Corpus:
  train: np.ndarray       # [D, V] word counts, float32
  test_observed: np.ndarray
  test_heldout: np.ndarray
  topics: np.ndarray      # [K, V], the generating topics
  batch_size: int

  @property
  def num_topics(self):
    return self.topics.shape[0]

  @property
  def vocabulary(self):
    return self.topics.shape[1]


def make_corpus(seed=0, num_topics=10, vocabulary=200, num_train=2000,
                num_test=200, words=50, batch_size=20):
  rng = np.random.default_rng(seed)
  topics = rng.dirichlet(np.full(vocabulary, 0.1), num_topics)

  def documents(num):
    props = rng.dirichlet(np.full(num_topics, 0.5), num)
    z = np.array([rng.choice(num_topics, words, p=p) for p in props])
    w = np.array([[rng.choice(vocabulary, p=topics[k]) for k in row]
                  for row in z])
    return w

  def counts(w):
    out = np.zeros((len(w), vocabulary), np.float32)
    for i, row in enumerate(w):
      np.add.at(out[i], row, 1.)
    return out

  train = counts(documents(num_train))
  test = documents(num_test)
  half = words // 2
  return Corpus(train, counts(test[:, :half]), counts(test[:, half:]),
                topics, batch_size)


def topic_word(state, num_topics, vocabulary):
  """state [C, K V] -> log beta [C, K, V]."""
  phi = tf.reshape(state, [-1, num_topics, vocabulary])
  return tf.nn.log_softmax(phi, axis=-1)


def fit_proportions(beta, counts, iterations=EM_ITERATIONS):
  """Maximum-likelihood document proportions given topics (EM).

  beta [C, K, V], counts [n, V] -> theta [C, n, K]."""
  num_topics = tf.shape(beta)[1]
  theta = tf.ones(tf.concat([tf.shape(beta)[:1], tf.shape(counts)[:1],
                             [num_topics]], 0), beta.dtype)
  theta /= tf.cast(num_topics, beta.dtype)
  length = tf.reduce_sum(counts, -1)[None, :, None]

  def update(theta):
    p = tf.einsum("cnk,ckv->cnv", theta, beta)
    return theta * tf.einsum("cnv,ckv->cnk",
                             counts / tf.maximum(p, 1e-30), beta) / length

  # A loop, not unrolled: compiles faster under XLA (no gradient flows
  # through it: the proportions are held fixed in the gradient).
  return tf.while_loop(lambda i, _: i < iterations,
                       lambda i, t: (i + 1, update(t)),
                       (tf.constant(0), theta))[1]


def document_log_likelihood(state, counts, num_topics, vocabulary):
  """log p(w_d | theta-hat_d, beta) per document: [C, n]."""
  log_beta = topic_word(state, num_topics, vocabulary)
  beta = tf.exp(log_beta)
  theta = tf.stop_gradient(fit_proportions(tf.stop_gradient(beta), counts))
  p = tf.einsum("cnk,ckv->cnv", theta, beta)
  return tf.reduce_sum(counts * tf.math.log(tf.maximum(p, 1e-30)), -1)


def make_target(corpus):
  k, v = corpus.num_topics, corpus.vocabulary
  return sg.InMemoryTarget(
      lambda s, c: document_log_likelihood(s, c, k, v), corpus.train,
      batch_size=corpus.batch_size,
      log_prior_fn=lambda s: -0.5 * tf.reduce_sum(tf.square(s), -1) /
      PRIOR_SCALE ** 2)


def heldout_probabilities(corpus, draws):
  """draws [S, C, K V] -> p(w) of every held-out word occurrence, as
  (probabilities [S, C, test docs, V], counts [test docs, V])."""
  k, v = corpus.num_topics, corpus.vocabulary
  observed = tf.constant(corpus.test_observed)
  out = []
  for d in draws:
    beta = tf.exp(topic_word(tf.constant(d), k, v))
    theta = fit_proportions(beta, observed)
    out.append(tf.einsum("cnk,ckv->cnv", theta, beta).numpy())
  return np.stack(out), corpus.test_heldout


def perplexity(prob, counts):
  """prob [..., docs, V] -> perplexity [...] over the held-out counts."""
  with np.errstate(divide="ignore", invalid="ignore"):
    logp = np.where(counts > 0, np.log(np.maximum(prob, 1e-300)), 0.)
  return np.exp(-np.sum(counts * logp, (-2, -1)) / counts.sum())


def true_perplexity(corpus):
  beta = tf.constant(corpus.topics[None], tf.float32)
  theta = fit_proportions(beta, tf.constant(corpus.test_observed))
  p = tf.einsum("cnk,ckv->cnv", theta, beta).numpy()
  return float(perplexity(p, corpus.test_heldout)[0])


def make_kernel(method, target, steps, friction):
  h = tf.constant(np.asarray(steps, np.float32)[:, None])
  if method == "sgld":
    return sg.SGLD(target, step_size=h)
  return sg.SGHMC(target, step_size=h, friction=friction, integrator=method)


def run_sampler(corpus, method, config):
  """Per step size: the per-sample perplexity trace [kept], the MCMC
  perplexity of the second half, diverged; and the seconds taken."""
  steps = config.sgld_steps if method == "sgld" else config.sghmc_steps
  target = make_target(corpus)
  kernel = make_kernel(method, target, np.repeat(steps, config.reps),
                       config.friction)
  rng = np.random.default_rng(7)
  init = np.tile(rng.normal(0., 0.01, corpus.num_topics * corpus.vocabulary),
                 (len(steps) * config.reps, 1)).astype(np.float32)
  thin = max(1, config.num_steps // config.kept)

  @tf.function(jit_compile=True, autograph=False)
  def run(seed):
    return tfp.mcmc.sample_chain(
        config.num_steps // thin, tf.constant(init), kernel=kernel,
        num_steps_between_results=thin - 1,
        trace_fn=lambda _, r: r.diverged, seed=seed)

  start = time.time()
  draws, diverged = run(tf.constant([config.seed, METHODS.index(method)]))
  seconds = time.time() - start
  draws = np.asarray(draws)
  prob, counts = heldout_probabilities(corpus, draws)   # [S, C, docs, V]
  prob = np.where(np.isfinite(prob), prob, 0.)
  trace = perplexity(prob, counts)                       # [S, C]
  half = draws.shape[0] // 2
  mcmc = perplexity(prob[half:].mean(0), counts)         # [C]
  div = np.asarray(diverged)[-1] | ~np.isfinite(draws).all((0, 2))
  # Exploded: diverged, or a held-out word given probability 0 (infinite
  # perplexity: some topic weights under- or overflowed).
  div = div | ~np.isfinite(mcmc)
  mcmc = np.where(div, np.nan, mcmc)
  k = len(steps)
  mcmc = mcmc.reshape(k, config.reps)
  div = div.reshape(k, config.reps)
  trace = trace.T.reshape(k, config.reps, -1)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    mean = np.where(div.any(1), np.nan, np.nanmean(mcmc, 1))
  return dict(step_sizes=list(steps), trace=trace[:, 0], mcmc=mean,
              mcmc_chains=mcmc, exploded_chains=div.sum(1),
              diverged=div.any(1), seconds=seconds,
              iterations=(np.arange(draws.shape[0]) + 1) * thin)


def write_table(config, corpus, results, reference):
  lines = ["# LDA on a synthetic corpus: SGHMC-S vs SGHMC-E vs SGLD", "",
           f"K = {corpus.num_topics}, V = {corpus.vocabulary}, "
           f"{corpus.train.shape[0]} training documents of "
           f"{int(corpus.train.sum(1).mean())} words, minibatch "
           f"{corpus.batch_size}, {config.num_steps} iterations, friction "
           f"D = {config.friction}; perplexity of the generating topics "
           f"{reference:.1f}, of a uniform guess {corpus.vocabulary}.", "",
           f"| sampler | step size h | test perplexity (MCMC, last half; "
           f"mean of {config.reps} chains) | per chain | exploded chains |",
           "|---|---|---|---|---|"]
  for m, r in results.items():
    for h, p, c, d in zip(r["step_sizes"], r["mcmc"], r["mcmc_chains"],
                          r["exploded_chains"]):
      lines.append(f"| {LABELS[m]} | {h:g} | "
                   f"{'—' if not np.isfinite(p) else f'{p:.1f}'} | "
                   + ", ".join("—" if not np.isfinite(v) else f"{v:.1f}"
                               for v in c) + f" | {d or ''} |")
  lines += ["", "| sampler | best perplexity here | the paper's (200 topics)"
            " |", "|---|---|---|"]
  for m, r in results.items():
    best = np.nanmin(r["mcmc"]) if np.isfinite(r["mcmc"]).any() else np.nan
    lines.append(f"| {LABELS[m]} | {best:.1f} | {PAPER[m]} |")
  seconds = ", ".join(f"{LABELS[m]} {r['seconds']:.0f} s"
                      for m, r in results.items())
  lines += ["", f"Sampling time: {seconds}.", ""]
  return "\n".join(lines)


def write_figure(path, config, results, reference):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 3, figsize=(15, 4))
  for ax, m in zip(axes[:2], ("splitting", "euler")):  # first chain each
    r = results.get(m)
    if r is None:
      continue
    cmap = plt.get_cmap("viridis")
    for i, h in enumerate(r["step_sizes"]):
      ax.plot(r["iterations"], r["trace"][i], color=cmap(
          i / max(1, len(r["step_sizes"]) - 1)), label=f"h = {h:g}")
    ax.axhline(reference, color="k", lw=0.8, label="generating topics")
    ax.set_yscale("log")
    ax.set_ylim(reference * 0.9, 1000)
    ax.set_xlabel("iteration")
    ax.set_ylabel("test perplexity (per sample)")
    ax.set_title(LABELS[m])
    ax.legend(fontsize=7)
  ax = axes[2]
  for m, r in results.items():
    ax.plot(r["step_sizes"], r["mcmc"], "o-", color=COLORS[m],
            label=LABELS[m] + (" (own h grid)" if m == "sgld" else ""))
  ax.axhline(reference, color="k", lw=0.8)
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("step size h")
  ax.set_ylabel("test perplexity (MCMC estimate)")
  ax.set_title("final perplexity; missing: diverged")
  ax.legend(fontsize=7)
  fig.suptitle("Synthetic LDA (K = 10, V = 200, 2,000 documents, n = 20), "
               f"D = {config.friction}", fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def _jsonable(x):
  if isinstance(x, dict):
    return {k: _jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple, np.ndarray)):
    return [_jsonable(v) for v in (x.tolist() if isinstance(x, np.ndarray)
                                   else x)]
  if isinstance(x, (float, np.floating)):
    return None if not np.isfinite(x) else float(x)
  if isinstance(x, (np.bool_, np.integer)):
    return x.item()
  return x


def run_experiment(config, corpus=None, methods=METHODS, log=print):
  corpus = make_corpus() if corpus is None else corpus
  results = {}
  for m in methods:
    results[m] = run_sampler(corpus, m, config)
    log(f"{LABELS[m]}: {results[m]['seconds']:.0f} s, MCMC perplexity "
        + ", ".join(f"{p:.1f}" for p in results[m]["mcmc"]))
  return corpus, results


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", default=os.path.join("out", "lda_integrators"))
  parser.add_argument("--steps", type=int, default=None)
  parser.add_argument("--friction", type=float, default=None)
  parser.add_argument("--seed", type=int, default=1)
  args = parser.parse_args(argv)
  config = Config(seed=args.seed)
  if args.steps:
    config = dataclasses.replace(config, num_steps=args.steps)
  if args.friction:
    config = dataclasses.replace(config, friction=args.friction)
  os.makedirs(args.out, exist_ok=True)
  corpus, results = run_experiment(config)
  reference = true_perplexity(corpus)
  table = write_table(config, corpus, results, reference)
  print(table)
  with open(os.path.join(args.out, "lda.md"), "w") as f:
    f.write(table)
  write_figure(os.path.join(args.out, "fig4_lda.png"), config, results,
               reference)
  with open(os.path.join(args.out, "lda.json"), "w") as f:
    json.dump(_jsonable(dict(config=dataclasses.asdict(config),
                             reference=reference, results=results)), f,
              indent=1)


if __name__ == "__main__":
  main()
