"""Accuracy per second on the N = 100,000 logistic regression.

Error of the posterior mean and standard deviations, against a long NUTS
reference, as a function of wall-clock time, for SGLD, SGHMC, AMAGOLD and
TFP's NUTS; and effective samples per second.

Problem: common.synthetic_logistic() (N = 100,000, d = 20, N(0, 1) prior,
minibatch 100 unless a method says otherwise). Every method runs 4 chains
batched in one kernel, all started at the posterior mode (Newton's method in
numpy, not counted), compiled with XLA in chunks of steps. The clock
(compile excluded) runs from the first step: each method's warm-up
(step-size adaptation, burn-in) runs to its end and is reported, then it
samples for `--budget` seconds. After every chunk past the warm-up the
pooled post-warm-up samples give

    mean error = max_i |mean_i - ref_mean_i| / ref_sd_i   (in posterior sds)
    sd error   = max_i |sd_i / ref_sd_i - 1|

and at the end ESS = sum over chains of `tfp.mcmc.effective_sample_size`,
minimum over the 20 coordinates; ESS/s divides it by the sampling time
after warm-up. `--clock cpu` measures this process's CPU time instead of
wall time (for a machine shared with other jobs; several `--only` runs in
parallel, then `--merge`).

Reference: TFP NUTS (dual-averaging step size, 4 chains, 500 adaptation
steps, 2,000 samples each), cached in
benchmarks/results/accuracy_reference.json (`--refresh-reference` redoes
it); checked against the Laplace approximation at the mode.

Methods (see `methods`): NUTS and HMC (L = 10) with dual averaging, and
NUTS at a fixed step size near the adapted one (NUTS inside TFP's
dual-averaging wrapper ran far slower per step here; docs/performance.md,
section 6); SGLD and SGHMC at a few step sizes (no M-H; per-chain
minibatches); AMAGOLD with the exact M-H test and dual averaging to a
target acceptance, on plain minibatches, with control variates around the
mode (`tfp_sgmcmc.ControlVariateTarget`), with larger minibatches, and with
the minibatch M-H test. Goal: AMAGOLD's sds within 10% of the reference and
ESS/s >= 5x NUTS's (the best NUTS run: with `--only "NAME [C chains]"`
each method can run with its own number of chains, e.g. NUTS with 4, 8 and
16 in the same run).

    python benchmarks/accuracy_per_second.py          # (+ the reference once)
    python benchmarks/accuracy_per_second.py --quick  # 3 methods

Writes benchmarks/results/accuracy_per_second.json and
docs/figures/performance/accuracy_per_second.png.
"""

import argparse
import json
import os
import time

import common  # noqa: E402
import harness  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

CHAINS = 4
FIGURES = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "docs", "figures", "performance")


def full_log_prob(problem):
  x, y = tf.constant(problem.x), tf.constant(problem.y)

  def log_prob(w):
    logits = tf.einsum("nd,...d->...n", x, w)
    return (-tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits), -1)
            - 0.5 * tf.reduce_sum(w ** 2, -1))
  return log_prob


def _accepted(results, state):
  """is_accepted of an (adapted) M-H kernel's results, else ones."""
  r = results
  while r is not None:
    if hasattr(r, "is_accepted"):
      return tf.cast(r.is_accepted, tf.float32)
    r = getattr(r, "inner_results", None)
  return tf.ones(tf.shape(state)[:1])


def split_chains(name):
  """'METHOD [16 chains]' -> ('METHOD', 16); a plain name -> (name, None)."""
  if name.endswith(" chains]") and " [" in name:
    base, count = name[:-len(" chains]")].rsplit(" [", 1)
    return base, int(count)
  return name, None


def _step_size(results):
  r = results
  while r is not None:
    for field in ("new_step_size", "step_size"):
      if hasattr(r, field):
        return tf.reduce_mean(tf.cast(getattr(r, field), tf.float32))
    r = getattr(r, "accepted_results", getattr(r, "inner_results", None))
  return tf.constant(np.nan, tf.float32)


def methods(problem, mode, quick, only=None):
  """name -> dict(kernel=..., warmup=steps, thin=, chunk=, grads=gradient
  evaluations per step (for reporting))."""
  log_prob = full_log_prob(problem)
  centre = tf.constant(mode, tf.float32)
  per_chain = common.PerChainLogistic(problem)
  da = tfp.mcmc.DualAveragingStepSizeAdaptation

  def cv(batch_size):
    return sg.ControlVariateTarget(problem.target(batch_size), centre)

  def amagold(target, eps, t=10, accept=0.65, warmup=500, mh="exact",
              friction=0., resample=True):
    return dict(kernel=da(sg.AMAGOLD(target, eps, num_leapfrog_steps=t,
                                     friction=friction,
                                     resample_momentum=resample,
                                     acceptance_energy=mh),
                          num_adaptation_steps=int(0.8 * warmup),
                          target_accept_prob=accept),
                warmup=warmup, thin=1, chunk=100, grads=t)

  out = {
      "NUTS (TFP)": dict(
          # Initial step sizes near the posterior scale (sds ~ 0.007):
          # from 1e-3 NUTS's first adaptation steps build 1,023-leapfrog
          # trees and its warm-up alone exceeds the budget.
          kernel=da(tfp.mcmc.NoUTurnSampler(log_prob, 5e-3),
                    num_adaptation_steps=240, target_accept_prob=0.8),
          warmup=300, thin=1, chunk=50, grads=None),
      # NUTS at the step size dual averaging settles on (~5e-3 for NUTS
      # and HMC here), without adaptation: the best case for NUTS.
      "NUTS (TFP), fixed step 5e-3": dict(
          kernel=tfp.mcmc.NoUTurnSampler(log_prob, 5e-3), warmup=0,
          thin=1, chunk=50, grads=None),
      "HMC L=10 (TFP)": dict(
          kernel=da(tfp.mcmc.HamiltonianMonteCarlo(log_prob, 5e-3, 10),
                    num_adaptation_steps=240, target_accept_prob=0.75),
          warmup=300, thin=1, chunk=50, grads=10),
      "SGLD h=1e-8": dict(kernel=sg.SGLD(per_chain, 1e-8), warmup=20_000,
                          thin=50, chunk=10_000, grads=1),
      "SGLD h=1e-7": dict(kernel=sg.SGLD(per_chain, 1e-7), warmup=10_000,
                          thin=50, chunk=10_000, grads=1),
      # SGHMC in SGD units: eta = h^2, alpha = h C; the gradient-noise
      # term B = h V / 2 (V ~ 2e7 per coordinate at b = 100) must stay
      # below C.
      "SGHMC h=3e-5 C=3e3": dict(
          kernel=sg.SGHMC(per_chain, 3e-5, 3e3), warmup=10_000, thin=50,
          chunk=10_000, grads=1),
      "SGHMC h=1e-4 C=1e3": dict(
          kernel=sg.SGHMC(per_chain, 1e-4, 1e3), warmup=10_000, thin=50,
          chunk=10_000, grads=1),
      "SGLD-CV h=1e-5": dict(kernel=sg.SGLD(cv(100), 1e-5), warmup=2000,
                             thin=10, chunk=2000, grads=1),
      "SGLD-CV h=3e-6": dict(kernel=sg.SGLD(cv(100), 3e-6), warmup=2000,
                             thin=10, chunk=2000, grads=1),
      "AMAGOLD T=10, b=100": amagold(per_chain, 1e-4),
      "AMAGOLD T=10, CV b=100": amagold(cv(100), 1e-3),
      "AMAGOLD T=10, CV b=1000": amagold(cv(1000), 1e-3),
      "AMAGOLD T=20, CV b=1000": amagold(cv(1000), 1e-3, t=20),
      "AMAGOLD T=10, CV b=1000, minibatch M-H": amagold(cv(1000), 1e-3,
                                                        mh="minibatch"),
      # Levers for AMAGOLD's ESS/s (not run by default; `--only NAME`): the
      # skew-reversible variant (momentum carried across tests, refreshed
      # only by the friction noise; beta = 10 keeps about 0.8 of it per
      # outer step at eps = 1e-3, beta = 30 about 0.55), the acceptance
      # target and T.
      "AMAGOLD T=10, CV b=1000, skew-reversible beta=10": amagold(
          cv(1000), 1e-3, friction=10., resample=False),
      "AMAGOLD T=10, CV b=1000, skew-reversible beta=30": amagold(
          cv(1000), 1e-3, friction=30., resample=False),
      "AMAGOLD T=10, CV b=1000, accept 0.8": amagold(cv(1000), 1e-3,
                                                    accept=0.8),
      "AMAGOLD T=5, CV b=1000": amagold(cv(1000), 1e-3, t=5),
      "AMAGOLD T=10, CV b=1000, accept 0.9": amagold(cv(1000), 1e-3,
                                                    accept=0.9),
      "AMAGOLD T=10, CV b=1000, accept 0.8, skew-reversible beta=10":
          amagold(cv(1000), 1e-3, accept=0.8, friction=10., resample=False),
      "AMAGOLD T=5, CV b=1000, accept 0.8": amagold(cv(1000), 1e-3, t=5,
                                                   accept=0.8),
      "AMAGOLD T=20, CV b=1000, accept 0.8": amagold(cv(1000), 1e-3, t=20,
                                                    accept=0.8),
      "AMAGOLD T=10, CV b=500, accept 0.8": amagold(cv(500), 1e-3,
                                                   accept=0.8),
      "AMAGOLD T=8, CV b=1000, accept 0.8": amagold(cv(1000), 1e-3, t=8,
                                                   accept=0.8),
      "AMAGOLD T=10, CV b=250, accept 0.8": amagold(cv(250), 1e-3,
                                                   accept=0.8),
      "AMAGOLD T=10, CV b=500, accept 0.8, skew-reversible beta=10":
          amagold(cv(500), 1e-3, accept=0.8, friction=10., resample=False),
  }
  # Tried, not run by default (`--only NAME ...` runs them).
  extra = ["SGLD h=1e-7", "SGHMC h=1e-4 C=1e3", "SGLD-CV h=1e-5",
           "AMAGOLD T=20, CV b=1000",
           "AMAGOLD T=10, CV b=1000, skew-reversible beta=10",
           "AMAGOLD T=10, CV b=1000, skew-reversible beta=30",
           "AMAGOLD T=10, CV b=1000, accept 0.8", "AMAGOLD T=5, CV b=1000",
           "AMAGOLD T=10, CV b=1000, accept 0.9",
           "AMAGOLD T=10, CV b=1000, accept 0.8, skew-reversible beta=10",
           "AMAGOLD T=5, CV b=1000, accept 0.8",
           "AMAGOLD T=20, CV b=1000, accept 0.8",
           "AMAGOLD T=10, CV b=500, accept 0.8",
           "AMAGOLD T=8, CV b=1000, accept 0.8",
           "AMAGOLD T=10, CV b=250, accept 0.8",
           "AMAGOLD T=10, CV b=500, accept 0.8, skew-reversible beta=10"]
  if quick:
    keep = ["NUTS (TFP), fixed step 5e-3", "SGLD-CV h=3e-6",
            "AMAGOLD T=10, CV b=1000"]
  elif only:
    keep = only
  else:
    keep = [k for k in out if k not in extra]
  # "NAME [C chains]" runs NAME with C chains instead of the default.
  specs = {}
  for k in keep:
    base, chains = split_chains(k)
    specs[k] = dict(out[base], chains=chains)
  return specs


def run_method(spec, init, seed, budget_seconds, ref, max_chunks=10**6,
               clock="wall"):
  """Runs one method in compiled chunks until `budget_seconds` on `clock`
  (compile excluded); returns the error curve and summaries. `init` is one
  chain's start, or the chains' ([chains, d]); a spec's `chains` (if set)
  tiles one chain's start that many times."""
  now = harness.CLOCKS[clock]
  init = np.asarray(init, np.float32)
  if init.ndim == 2 and spec.get("chains"):
    init = init[0]
  if init.ndim == 1:
    init = np.tile(init, (spec.get("chains") or CHAINS, 1))
  init = tf.constant(init)
  kernel, thin, chunk = spec["kernel"], spec["thin"], spec["chunk"]
  num_results = chunk // thin

  @tf.function(jit_compile=True, autograph=False)
  def run_chunk(state, results, seed):
    out = tfp.mcmc.sample_chain(
        num_results, state, previous_kernel_results=results, kernel=kernel,
        num_steps_between_results=thin - 1,
        trace_fn=lambda s, r: (_accepted(r, s), _step_size(r)),
        return_final_kernel_results=True, seed=seed)
    return out.all_states, out.trace, out.final_kernel_results

  bootstrap = tf.function(kernel.bootstrap_results, autograph=False)
  results = bootstrap(init)
  run_chunk(init, results, seed)  # Compile (output discarded).
  state = init
  ref_mean, ref_sd = np.asarray(ref["mean"]), np.asarray(ref["sd"])
  samples, accepts, curve = [], [], []
  elapsed, steps, warmup_time = 0., 0, None
  # The budget is for sampling after the warm-up; the warm-up always runs
  # to its end (its time is reported separately).
  while (elapsed - (warmup_time or 0.) < budget_seconds and
         len(curve) < max_chunks):
    seed, chunk_seed = tfp.random.split_seed(seed)
    start = now()
    draws, (acc, eps), results = run_chunk(state, results, chunk_seed)
    draws = draws.numpy()
    elapsed += now() - start
    state = tf.constant(draws[-1])
    steps += chunk
    if steps <= spec["warmup"]:
      warmup_time = elapsed
      continue
    samples.append(draws)
    accepts.append(acc.numpy())
    pooled = np.concatenate(samples).reshape(-1, draws.shape[-1])
    mean, sd = pooled.mean(0), pooled.std(0)
    curve.append(dict(
        seconds=elapsed, steps=steps,
        mean_error=float(np.max(np.abs(mean - ref_mean) / ref_sd)),
        sd_error=float(np.max(np.abs(sd / ref_sd - 1))),
        sd_ratio_median=float(np.median(sd / ref_sd))))
  warmup_time = warmup_time or 0.
  out = dict(steps=steps, seconds=elapsed, clock=clock,
             chains=int(init.shape[0]),
             warmup_steps=spec["warmup"],
             warmup_seconds=warmup_time, thin=thin,
             gradients_per_step=spec["grads"], curve=curve,
             final_step_size=float(eps.numpy()[-1]))
  if samples:
    all_samples = np.concatenate(samples)   # [S, chains, d]
    ess = tfp.mcmc.effective_sample_size(
        tf.constant(all_samples, tf.float64)).numpy().sum(0)  # Per coord.
    sampling = elapsed - warmup_time
    out.update(cross_chain_correlation(all_samples))
    out.update(
        ess_min=float(ess.min()), ess_per_second=float(ess.min() / sampling),
        ess_per_second_incl_warmup=float(ess.min() / elapsed),
        acceptance=float(np.mean(np.concatenate(accepts))),
        mean_error=curve[-1]["mean_error"], sd_error=curve[-1]["sd_error"],
        sd_ratio_median=curve[-1]["sd_ratio_median"],
        sd_ratio_min_max=[float(x) for x in np.percentile(
            all_samples.reshape(-1, all_samples.shape[-1]).std(0) /
            ref_sd, [0, 100])])
  return out


def cross_chain_correlation(samples):
  """Summing ESS over chains assumes independent chains; chains that share
  minibatches (the default of InMemoryTarget) share gradient noise. Returns
  the mean over coordinates and chain pairs of the correlation of two
  chains' draws at the same step, and its standard error under independence
  (about 1 / sqrt(steps x pairs x d), ignoring autocorrelation)."""
  s, c, d = samples.shape
  if c < 2 or s < 3:
    return {}
  z = (samples - samples.mean(0)) / (samples.std(0) + 1e-30)
  corr = np.einsum("sid,sjd->dij", z, z) / s        # [d, c, c]
  off = corr[:, ~np.eye(c, dtype=bool)]             # [d, c (c - 1)]
  return dict(cross_chain_correlation=float(off.mean()),
              cross_chain_correlation_se=float(
                  1 / np.sqrt(s * c * (c - 1) / 2 * d)))


def reference(problem, mode, cov, refresh=False, path=None,
              num_samples=2000, warmup=500):
  path = path or os.path.join(harness.RESULTS, "accuracy_reference.json")
  if os.path.exists(path) and not refresh:
    with open(path) as f:
      ref = json.load(f)
    if ref.get("problem") == problem.name:
      print(f"reference: cached {path}")
      return ref
  print(f"reference: NUTS, {CHAINS} chains, {warmup} adaptation + "
        f"{num_samples} samples each ...", flush=True)
  log_prob = full_log_prob(problem)
  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      tfp.mcmc.NoUTurnSampler(log_prob, 5e-3),
      num_adaptation_steps=int(0.8 * warmup), target_accept_prob=0.8)
  init = tf.constant(np.tile(mode, (CHAINS, 1)), tf.float32)
  start = time.perf_counter()

  @tf.function(jit_compile=True, autograph=False)
  def chain(seed):
    return tfp.mcmc.sample_chain(
        num_samples, init, kernel=kernel, num_burnin_steps=warmup,
        trace_fn=None, seed=seed)
  draws = chain(tf.constant([13, 14])).numpy()
  seconds = time.perf_counter() - start
  pooled = draws.reshape(-1, problem.d)
  ess = tfp.mcmc.effective_sample_size(
      tf.constant(draws, tf.float64)).numpy().sum(0)
  laplace_sd = np.sqrt(np.diag(cov))
  ref = dict(problem=problem.name, mean=pooled.mean(0).tolist(),
             sd=pooled.std(0).tolist(), ess_min=float(ess.min()),
             chains=CHAINS, samples_per_chain=num_samples, warmup=warmup,
             seconds=seconds, laplace_sd=laplace_sd.tolist(),
             mode=np.asarray(mode).tolist(),
             sd_over_laplace=[float(x) for x in np.percentile(
                 pooled.std(0) / laplace_sd, [0, 50, 100])])
  # Monte Carlo standard error of the reference's sds, relative: about
  # 1 / sqrt(2 ESS).
  ref["sd_relative_mcse"] = float(1 / np.sqrt(2 * ess.min()))
  harness.write_json(path, ref)
  return ref


def figure(results, path, clock="wall"):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  for name, r in results.items():
    c = r["curve"]
    if not c:
      continue
    t = [p["seconds"] for p in c]
    style = "-" if "AMAGOLD" in name else "--" if "TFP" in name else ":"
    axes[0].loglog(t, [max(p["mean_error"], 1e-3) for p in c], style,
                   label=name)
    axes[1].loglog(t, [max(p["sd_error"], 1e-3) for p in c], style)
  axes[0].set_ylabel("max |mean - ref| / ref sd")
  axes[1].set_ylabel("max |sd / ref sd - 1|")
  axes[1].axhline(0.1, color="k", lw=0.5)
  for ax in axes:
    ax.set_xlabel("CPU seconds of the process (compile excluded)"
                  if clock == "cpu" else
                  "wall-clock seconds (compile excluded)")
  axes[0].legend(fontsize=6)
  fig.suptitle("logistic regression N=1e5, d=20, 4 chains: error vs time")
  fig.tight_layout()
  os.makedirs(os.path.dirname(path), exist_ok=True)
  fig.savefig(path, dpi=100)
  plt.close(fig)


def report(results, clock):
  """Prints the table and the ratios to NUTS (adds them to `results`)."""
  unit = "CPU s" if clock == "cpu" else "s"
  print(f"\n{'method':40s} {'steps':>8s} {unit:>6s} {'accept':>6s} "
        f"{'mean err':>8s} {'sd err':>7s} {'sd ratio':>16s} {'ESS':>7s} "
        f"{'ESS/' + unit:>8s}")
  for name, r in results.items():
    if "ess_min" in r:
      print(f"{name:40s} {r['steps']:8d} {r['seconds']:6.1f} "
            f"{r['acceptance']:6.2f} {r['mean_error']:8.3f} "
            f"{r['sd_error']:7.3f} "
            f"{r['sd_ratio_min_max'][0]:7.3f}-{r['sd_ratio_min_max'][1]:.3f}"
            f" {r['ess_min']:7.0f} {r['ess_per_second']:8.1f}"
            + (f"  (cross-chain corr {r['cross_chain_correlation']:+.4f} "
               f"+- {r['cross_chain_correlation_se']:.4f})"
               if "cross_chain_correlation" in r else ""))
    else:
      print(f"{name:40s} {r['steps']:8d} {r['seconds']:6.1f} "
            "(budget spent in warm-up)")
  # The best NUTS run is the yardstick (conservative for the goal).
  nuts = max([r.get("ess_per_second", 0.) for k, r in results.items()
              if k.startswith("NUTS")] or [0.])
  if nuts:
    print("\nESS per second relative to the best NUTS run (goal for "
          "AMAGOLD >= 5, with sd error <= 0.10):")
    for name, r in results.items():
      if "ess_per_second" in r:
        r["ess_per_second_vs_nuts"] = r["ess_per_second"] / nuts
        print(f"  {name:40s} {r['ess_per_second_vs_nuts']:7.2f}   "
              f"sd error {r['sd_error']:.3f}")


def write(results, ref, budget, clock, quick, out, figure_path, name=None):
  harness.write_json(
      os.path.join(out or harness.RESULTS,
                   name or "accuracy_per_second.json"),
      dict(results=results, chains=CHAINS, budget_seconds=budget,
           clock=clock, quick=quick,
           reference={k: v for k, v in ref.items()
                      if k not in ("mean", "sd", "mode", "laplace_sd")}))
  if figure_path is not False:
    figure(results, figure_path or os.path.join(
        FIGURES, "accuracy_per_second.png"), clock)


def merge(paths, out=None, figure_path=None):
  """Combines the JSON of runs made with `--only` (e.g. one process per
  method) into one table, JSON and figure."""
  results, first = {}, None
  for path in paths:
    with open(path) as f:
      d = json.load(f)
    first = first or d
    results.update(d["results"])
  report(results, first["clock"])
  write(results, first["reference"], first["budget_seconds"],
        first["clock"], first["quick"], out, figure_path)
  return results


def main(quick=False, smoke=False, budget=None, only=None, out=None,
         figure_path=None, refresh_reference=False, n=100_000,
         clock="wall", json_name=None):
  budget = budget or (1.0 if smoke else 8. if quick else 20.)
  problem = common.synthetic_logistic(n=n)
  start = time.perf_counter()
  mode, cov = common.newton_mode(problem)
  print(f"{problem.name}: mode by Newton in "
        f"{time.perf_counter() - start:.1f} s", flush=True)
  if smoke:
    ref = dict(mean=mode.tolist(), sd=np.sqrt(np.diag(cov)).tolist())
    ref_info = "Laplace (smoke)"
  else:
    ref = reference(problem, mode, cov, refresh=refresh_reference)
    ref_info = (f"NUTS {ref['chains']}x{ref['samples_per_chain']}, "
                f"ESS {ref['ess_min']:.0f}, sd/Laplace "
                f"{ref['sd_over_laplace']}")
  print(f"reference: {ref_info}", flush=True)
  specs = methods(problem, mode, quick or smoke, only)
  if smoke:
    specs = {k: dict(v, warmup=0, chunk=v["chunk"] // 10 or 1,
                     thin=1) for k, v in specs.items()
             if k == "AMAGOLD T=10, CV b=1000"}
  init = np.asarray(mode, np.float32)
  results = {}
  for i, (name, spec) in enumerate(specs.items()):
    print(f"running {name} ...", flush=True)
    results[name] = run_method(spec, init, tf.constant([100 + i, 7]),
                               budget, ref, clock=clock)
  report(results, clock)
  if not smoke or out:
    write(results, ref, budget, clock, quick, out, figure_path, json_name)
  return results


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--budget", type=float, default=None,
                      help="seconds of sampling per method (default 20)")
  parser.add_argument("--clock", choices=sorted(harness.CLOCKS),
                      default="wall",
                      help="wall (default) or this process's CPU time "
                      "(on a machine shared with other jobs)")
  parser.add_argument("--only", nargs="*", default=None,
                      help="method names to run (see `methods`); "
                      "'NAME [C chains]' runs NAME with C chains "
                      f"(default {CHAINS})")
  parser.add_argument("--json-name", default=None,
                      help="file name of the JSON (for --only runs)")
  parser.add_argument("--merge", nargs="*", default=None,
                      help="combine the JSON files of --only runs")
  parser.add_argument("--refresh-reference", action="store_true")
  parser.add_argument("--out", default=None)
  parser.add_argument("--figure", default=None)
  a = parser.parse_args()
  if a.merge:
    merge(a.merge, a.out, a.figure)
  else:
    main(quick=a.quick, budget=a.budget, only=a.only, out=a.out,
         figure_path=(False if a.json_name else a.figure),
         refresh_reference=a.refresh_reference, clock=a.clock,
         json_name=a.json_name)
