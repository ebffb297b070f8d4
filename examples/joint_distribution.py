"""TFP's modelling workflow with tfp_sgmcmc: JointDistribution models.

Two models written as a TFP user writes them, sampled by AMAGOLD through
`tfp_sgmcmc.JointDistributionTarget` (observed nodes pinned to data, the
model's default event-space bijector for constrained parameters, states in
the model's own structure) and compared with TFP's NUTS on the same model:

* eight schools (Rubin 1981; non-centred): full batch, 8 observations;
* hierarchical logistic regression on Statlog Australian (690 rows, 14
  standardised features + intercept) with a learned prior scale
  sigma ~ HalfNormal(1), w ~ N(0, sigma^2 I): minibatches of 32, N/n
  scaling of the likelihood only, AMAGOLD's exact amortized test.

For every parameter the table gives the posterior mean and sd from each
sampler and |difference| / combined Monte Carlo standard error (ESS-based);
the claim checked is that every such ratio is below 4.

    python examples/joint_distribution.py [--problem eight_schools|logistic]
        [--full] [--data-dir ../shared/data]
"""

import argparse
import os
import time

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc

tfd = tfp.distributions

DEFAULT_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "shared", "data")

# --- models ------------------------------------------------------------------

SCHOOL_EFFECTS = np.array([28., 8., -3., 7., -1., 1., 18., 12.], np.float32)
SCHOOL_SDS = np.array([15., 10., 16., 11., 9., 11., 10., 18.], np.float32)


def eight_schools_model():
  return tfd.JointDistributionNamed(dict(
      avg_effect=tfd.Normal(0., 10.),
      tau=tfd.HalfCauchy(0., 5.),
      std_effects=tfd.Independent(tfd.Normal(tf.zeros(8), 1.), 1),
      treatment_effects=lambda avg_effect, tau, std_effects: tfd.Independent(
          tfd.Normal(avg_effect[..., None] + tau[..., None] * std_effects,
                     SCHOOL_SDS), 1)))


def logistic_model(x):
  d = x.shape[-1]
  return tfd.JointDistributionNamed(dict(
      scale=tfd.HalfNormal(1.),
      w=lambda scale: tfd.Independent(
          tfd.Normal(tf.zeros(d), scale[..., None]), 1),
      b=tfd.Normal(0., 5.),
      y=lambda w, b: tfd.Independent(
          tfd.Bernoulli(logits=tf.linalg.matvec(x, w) + b[..., None]), 1)))


def load_australian(data_dir):
  x, y = tfp_sgmcmc.datasets.load_statlog_australian(data_dir)
  x = (x - x.mean(0)) / x.std(0)
  return x.astype(np.float32), y.astype(np.int32)


# --- samplers ------------------------------------------------------------------


def _summaries(draws):
  """{name: (mean, sd, se of the mean)} per scalar parameter, draws
  [n, chains, ...] in a dict."""
  out = {}
  for name, value in draws.items():
    value = np.asarray(value, np.float64)
    flat = value.reshape(value.shape[:2] + (-1,))
    ess = np.sum(np.asarray(tfp.mcmc.effective_sample_size(
        flat, filter_beyond_positive_pairs=True)), axis=0)
    mean = flat.mean((0, 1))
    sd = flat.std((0, 1))
    sq = (flat - mean) ** 2
    ess_sq = np.sum(np.asarray(tfp.mcmc.effective_sample_size(
        sq, filter_beyond_positive_pairs=True)), axis=0)
    # SE of the sd estimate from that of the variance: se(var) / (2 sd).
    sd_se = np.sqrt(sq.var((0, 1)) / ess_sq) / (2. * sd)
    for i in range(flat.shape[-1]):
      key = name if flat.shape[-1] == 1 else f"{name}[{i}]"
      out[key] = (mean[i], sd[i], np.sqrt(sd[i] ** 2 / ess[i]), sd_se[i])
  return out


def run_amagold(target, num_results, num_burnin, num_chains, seed,
                num_leapfrog_steps=10, step_size=0.05, friction=0.5):
  kernel = tfp.mcmc.SimpleStepSizeAdaptation(
      tfp_sgmcmc.AMAGOLD(target, step_size=step_size,
                         num_leapfrog_steps=num_leapfrog_steps,
                         friction=friction),
      num_adaptation_steps=int(0.8 * num_burnin), target_accept_prob=0.75)
  init = target.initial_state(num_chains, seed=[seed, 0])

  @tf.function(jit_compile=True, autograph=False)
  def chain(init):
    return tfp.mcmc.sample_chain(
        num_results, init, kernel=kernel, num_burnin_steps=num_burnin,
        trace_fn=lambda _, r: r.inner_results.is_accepted,
        seed=tf.constant([seed, 1]))
  start = time.time()
  draws, accepted = chain(init)
  seconds = time.time() - start
  return target.constrain(draws), float(np.mean(accepted)), seconds


def run_nuts(target, num_results, num_burnin, num_chains, seed):
  """TFP's NUTS on the same model's exact unconstrained log density."""
  init = target.initial_state(num_chains, seed=[seed, 2])
  names = sorted(init)

  def log_prob(*parts):
    return target.unconstrained_log_prob(**dict(zip(names, parts)))
  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      tfp.mcmc.NoUTurnSampler(log_prob, step_size=0.1),
      num_adaptation_steps=int(0.8 * num_burnin))

  @tf.function(jit_compile=True, autograph=False)
  def chain(init):
    return tfp.mcmc.sample_chain(
        num_results, init, kernel=kernel, num_burnin_steps=num_burnin,
        trace_fn=None, seed=tf.constant([seed, 3]))
  start = time.time()
  draws = chain([init[n] for n in names])
  seconds = time.time() - start
  return target.constrain(dict(zip(names, draws))), seconds


def compare(problem, sizes, seed=0, data_dir=DEFAULT_DATA_DIR):
  """AMAGOLD vs NUTS on one problem: rows (name, AMAGOLD mean, sd, NUTS
  mean, sd, |d mean| / se, |d sd| / se) and run facts."""
  if problem == "eight_schools":
    target = tfp_sgmcmc.JointDistributionTarget(
        eight_schools_model(), {"treatment_effects": SCHOOL_EFFECTS})
    amagold_kwargs = dict(step_size=0.1, friction=0.5)
  else:
    x, y = load_australian(data_dir)
    target = tfp_sgmcmc.JointDistributionTarget(
        logistic_model, {"y": y}, covariates=x, batch_size=32)
    amagold_kwargs = dict(step_size=0.02, friction=0.5)
  amagold, accept, amagold_s = run_amagold(
      target, sizes["amagold"], sizes["amagold_burnin"], sizes["chains"],
      seed, **amagold_kwargs)
  nuts, nuts_s = run_nuts(target, sizes["nuts"], sizes["nuts_burnin"],
                          sizes["chains"], seed + 100)
  a, n = _summaries(amagold), _summaries(nuts)
  rows = []
  for key in sorted(a):
    (am, asd, am_se, asd_se), (nm, nsd, nm_se, nsd_se) = a[key], n[key]
    rows.append((key, am, asd, nm, nsd,
                 abs(am - nm) / np.hypot(am_se, nm_se),
                 abs(asd - nsd) / np.hypot(asd_se, nsd_se)))
  facts = dict(accept=accept, amagold_seconds=amagold_s,
               nuts_seconds=nuts_s, num_examples=target.num_examples,
               batch_size=target.batch_size)
  return rows, facts


SIZES = {
    "quick": dict(amagold=1000, amagold_burnin=300, nuts=500, nuts_burnin=300,
                  chains=4),
    "full": dict(amagold=20000, amagold_burnin=2000, nuts=5000,
                 nuts_burnin=1000, chains=4),
}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--problem", default="both",
                      choices=["eight_schools", "logistic", "both"])
  parser.add_argument("--full", action="store_true")
  parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
  args = parser.parse_args()
  sizes = SIZES["full" if args.full else "quick"]
  problems = (["eight_schools", "logistic"] if args.problem == "both"
              else [args.problem])
  for problem in problems:
    rows, facts = compare(problem, sizes, data_dir=args.data_dir)
    print(f"\n{problem}: N = {facts['num_examples']}, batch "
          f"{facts['batch_size']}, AMAGOLD acceptance {facts['accept']:.2f}, "
          f"AMAGOLD {facts['amagold_seconds']:.0f} s, NUTS "
          f"{facts['nuts_seconds']:.0f} s (compile included)")
    print(f"{'parameter':<16}{'AMAGOLD mean':>13}{'sd':>8}{'NUTS mean':>11}"
          f"{'sd':>8}{'|dmean|/se':>11}{'|dsd|/se':>9}")
    for key, am, asd, nm, nsd, zm, zs in rows:
      print(f"{key:<16}{am:>13.3f}{asd:>8.3f}{nm:>11.3f}{nsd:>8.3f}"
            f"{zm:>11.2f}{zs:>9.2f}")
    worst = max(max(r[5], r[6]) for r in rows)
    print(f"largest |difference| / combined MC SE: {worst:.2f} "
          f"({'holds' if worst < 4 else 'does not hold'}: < 4)")


if __name__ == "__main__":
  main()
