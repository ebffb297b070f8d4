"""Golden regression outputs of tfp_sgmcmc: bit-exact states and traces.

Usage: PYTHONPATH=/path/to/checkout \
    python benchmarks/golden_streams.py OUT.npz [--only SUBSTR[,SUBSTR]]

Every entry runs with fixed stateless seeds; an entry that raises is recorded
as KEY:error (its exception text), so the comparison sees it too. Compare two
files with benchmarks/golden_compare.py (a refactor that must change no
random stream: run this before and after, then compare).
"""

import os
import sys
import time
import traceback
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd = tfp.distributions
tfb = tfp.bijectors
warnings.simplefilter("ignore")

OUT = {}
TIMES = {}
ONLY = None
NUM_STEPS = 20
NUM_CHAINS = 4
SEED = tf.constant([1, 2], tf.int32)


def seed(a, b):
  return tf.constant([a, b], tf.int32)


# --------------------------------------------------------------------------
# Recording helpers.

def _walk(prefix, x, out):
  """Flattens namedtuples / lists / dicts of tensors to {path: tensor},
  keeping numeric and bool tensors, skipping everything else (objects,
  distributions, None)."""
  if x is None:
    return
  if isinstance(x, tuple) and hasattr(x, "_fields"):
    for f in x._fields:
      _walk(f"{prefix}.{f}" if prefix else f, getattr(x, f), out)
  elif isinstance(x, dict):
    for k in sorted(x, key=str):
      _walk(f"{prefix}.{k}" if prefix else str(k), x[k], out)
  elif isinstance(x, (list, tuple)):
    for i, v in enumerate(x):
      _walk(f"{prefix}[{i}]", v, out)
  elif isinstance(x, (tf.Tensor, tf.Variable, np.ndarray, np.generic,
                      float, int, bool)):
    dtype = tf.as_dtype(x.dtype) if hasattr(x, "dtype") else None
    if dtype is None or dtype.is_floating or dtype.is_integer or dtype.is_bool:
      out[prefix or "value"] = x


def flat(x, prefix=""):
  out = {}
  _walk(prefix, x, out)
  return out


def to_numpy(v):
  if isinstance(v, (tf.Tensor, tf.Variable)):
    return v.numpy()
  return np.asarray(v)


def record(key, fn):
  """Runs fn() -> {name: array-like or nested}; stores key/name."""
  if ONLY and not any(o in key for o in ONLY):
    return
  t0 = time.perf_counter()
  try:
    result = fn()
    items = flat(result)
    if not items:
      raise RuntimeError("entry produced no arrays")
    for name, v in items.items():
      OUT[f"{key}/{name}"] = to_numpy(v)
    status = f"{len(items)} arrays"
  except Exception as e:  # pylint: disable=broad-except
    text = f"{type(e).__name__}: {e}"
    OUT[f"{key}:error"] = np.array(text[:2000])
    status = "ERROR " + text.splitlines()[0][:200] if text else "ERROR"
    if os.environ.get("GOLDEN_TRACEBACK"):
      traceback.print_exc()
  TIMES[key] = time.perf_counter() - t0
  print(f"[{TIMES[key]:6.2f}s] {key}: {status}", flush=True)


def _trace_fn(_, results):
  return flat(results)


def run_chain(kernel, init, mode, seed_=SEED, num_steps=NUM_STEPS,
              num_burnin_steps=0):
  """sample_chain states and all numeric/bool trace fields, plus the final
  kernel results. mode: "eager", "graph" (tf.function) or "xla"."""
  def go():
    r = tfp.mcmc.sample_chain(
        num_steps, init, kernel=kernel, trace_fn=_trace_fn,
        num_burnin_steps=num_burnin_steps, seed=seed_,
        return_final_kernel_results=True)
    return r.all_states, r.trace, flat(r.final_kernel_results)

  if mode == "eager":
    states, trace, final = go()
  elif mode == "graph":
    states, trace, final = tf.function(go, autograph=False)()
  elif mode == "xla":
    states, trace, final = tf.function(go, autograph=False,
                                       jit_compile=True)()
  else:
    raise ValueError(mode)
  return {"states": states, "trace": trace, "final": final}


# --------------------------------------------------------------------------
# Data and targets.

RNG = np.random.default_rng(0)
N, D = 256, 3
X = RNG.normal(size=(N, D)).astype(np.float32)
W_TRUE = np.float32([1., -1., .5])
Y = (RNG.uniform(size=N) < 1 / (1 + np.exp(-X @ W_TRUE))).astype(np.float32)
Y_REG = (X @ W_TRUE + RNG.normal(size=N)).astype(np.float32)
INIT = tf.constant(RNG.normal(size=(NUM_CHAINS, D)).astype(np.float32) * 0.1)


def logistic_ll(w, batch):
  return tfd.Bernoulli(logits=tf.linalg.matvec(batch[0], w)).log_prob(
      batch[1])


def gaussian_ll(w, batch):
  return tfd.Normal(tf.linalg.matvec(batch[0], w), 1.).log_prob(batch[1])


def log_prior(w):
  return tf.reduce_sum(tfd.Normal(0., 1.).log_prob(w), -1)


def logistic_target(**kw):
  kw.setdefault("batch_size", 32)
  return sg.InMemoryTarget(logistic_ll, data=(X, Y), log_prior_fn=log_prior,
                           parameter_shapes=[D], **kw)


def regression_target(**kw):
  kw.setdefault("batch_size", 32)
  return sg.InMemoryTarget(gaussian_ll, data=(X, Y_REG),
                           log_prior_fn=log_prior, parameter_shapes=[D], **kw)


_PREC = np.float32([[1.5, 0.4, 0.], [0.4, 2., 0.3], [0., 0.3, 3.]])
_MU = np.float32([0.5, -0.5, 0.])


def gaussian_log_prob(w):
  # A full-batch log density (TFP convention): a correlated 3-d Gaussian.
  z = w - _MU
  return -0.5 * tf.reduce_sum(z * tf.linalg.matvec(_PREC, z), -1)


# --------------------------------------------------------------------------
# Kernels (built fresh per call: targets hold no state except DatasetTarget).

def kernel_factories(tgt):
  """name -> () -> kernel on target `tgt` (a function returning a target)."""
  return {
      "SGLD": lambda: sg.SGLD(tgt(), step_size=1e-3),
      "SGLD_temp2": lambda: sg.SGLD(tgt(), step_size=1e-3, temperature=2.),
      "PreconditionedSGLD": lambda: sg.PreconditionedSGLD(
          tgt(), step_size=1e-3),
      "SGHMC_euler": lambda: sg.SGHMC(tgt(), step_size=0.01, friction=1.),
      "SGHMC_splitting": lambda: sg.SGHMC(
          tgt(), step_size=0.01, friction=2., noise_estimate=0.5,
          integrator="splitting", momentum_resampling_period=5),
      "NaiveSGHMC": lambda: sg.NaiveSGHMC(tgt(), step_size=0.005,
                                          momentum_resampling_period=5),
      "SGNHT": lambda: sg.SGNHT(tgt(), step_size=0.01, diffusion=1.),
      "SGNUTS": lambda: sg.SGNUTS(tgt(), step_size=0.02, friction=1.,
                                  max_tree_depth=3),
      "SGBD_vanilla": lambda: sg.SGBD(tgt(), step_size=0.05),
      "SGBD_corrected": lambda: sg.SGBD(tgt(), step_size=0.05,
                                        variant="corrected"),
      "SGBD_extreme": lambda: sg.SGBD(tgt(), step_size=0.05,
                                      variant="extreme"),
      "UncalibratedBarker": lambda: sg.UncalibratedBarker(
          tgt(), step_size=0.05, num_steps=3),
      "AmortizedBarker": lambda: sg.AmortizedBarker(
          tgt(), step_size=0.05, num_steps=3),
      "UncalibratedAMAGOLD": lambda: sg.UncalibratedAMAGOLD(
          tgt(), step_size=0.05, num_leapfrog_steps=3, friction=0.5),
      "AMAGOLD": lambda: sg.AMAGOLD(tgt(), step_size=0.05,
                                    num_leapfrog_steps=3, friction=0.5),
      "AMAGOLD_skew": lambda: sg.AMAGOLD(
          tgt(), step_size=0.05, num_leapfrog_steps=3, friction=0.5,
          resample_momentum=False),
      "AmortizedMH_Barker": lambda: sg.AmortizedMetropolisHastings(
          sg.UncalibratedBarker(tgt(), step_size=0.05, num_steps=3)),
      "AmortizedMH_AMAGOLD": lambda: sg.AmortizedMetropolisHastings(
          sg.UncalibratedAMAGOLD(tgt(), step_size=0.05,
                                 num_leapfrog_steps=3, friction=0.5)),
  }


# Kernels run eagerly too (the cheap ones; SGNUTS's tree is slow eagerly).
EAGER = {"SGLD", "PreconditionedSGLD", "SGHMC_euler", "SGHMC_splitting",
         "NaiveSGHMC", "SGNHT", "SGBD_vanilla", "AmortizedBarker", "AMAGOLD",
         "AmortizedMH_Barker"}


def main(path):
  t_all = time.perf_counter()

  # ---- Random engine (sanity of the seed scheme).
  record("random/derive_seeds", lambda: sg.random.derive_seeds(SEED, 3))
  record("random/derive_inner_seeds",
         lambda: sg.random.derive_inner_seeds(SEED, 3))
  record("random/split_seed", lambda: sg.random.split_seed(SEED, 3))
  record("random/walk_seed", lambda: sg.random.walk_seed(SEED))
  record("random/fold_in", lambda: sg.random.fold_in(SEED, 7))
  record("random/uniform_indices",
         lambda: sg.random.uniform_indices(SEED, [4, 8], 100))
  record("random/philox_indices",
         lambda: sg.random.philox_indices(SEED, [4, 8], 100))
  record("random/philox_uniform", lambda: sg.random.philox_uniform([5], SEED))
  record("random/philox_normal", lambda: sg.random.philox_normal([5], SEED))
  record("random/standard_normal_like", lambda: sg.random.standard_normal_like(
      [tf.zeros([4, 3]), tf.zeros([2], tf.float64)], SEED))
  record("random/uniform_like", lambda: sg.random.uniform_like(
      [tf.zeros([4, 3]), tf.zeros([2], tf.float64)], SEED))

  # ---- Targets: minibatch energies and gradients.
  def target_eval(t, state=INIT):
    e, g = t.energy_and_gradient(state, SEED)
    out = {"energy_mb": e, "grad_mb": g}
    if t.has_exact_energy:
      out["energy_exact"] = t.energy(state)
    return out

  record("target/InMemory_minibatch", lambda: target_eval(logistic_target()))
  record("target/InMemory_indep", lambda: target_eval(
      logistic_target(independent_minibatches=True)))
  record("target/InMemory_full_batch", lambda: target_eval(
      logistic_target(batch_size=None, full_batch=True)))
  record("target/InMemory_noise_var", lambda: logistic_target(
      ).gradient_noise_variance(INIT, SEED))

  # ---- Every kernel on the minibatch logistic regression, XLA and eager.
  mb = logistic_target
  for name, make in kernel_factories(mb).items():
    record(f"kernel/{name}/inmemory_mb/xla",
           lambda make=make: run_chain(make(), INIT, "xla"))
    if name in EAGER:
      record(f"kernel/{name}/inmemory_mb/eager",
             lambda make=make: run_chain(make(), INIT, "eager"))

  # ---- Kernels on other targets (XLA unless the target cannot compile).
  full = lambda: logistic_target(batch_size=None, full_batch=True)
  indep = lambda: logistic_target(independent_minibatches=True)
  for name in ["SGLD", "SGHMC_euler", "AMAGOLD", "AmortizedBarker", "SGNHT",
               "SGNUTS", "SGBD_vanilla"]:
    record(f"kernel/{name}/inmemory_full/xla",
           lambda name=name: run_chain(kernel_factories(full)[name](), INIT,
                                       "xla"))
  for name in ["SGLD", "SGHMC_euler", "AMAGOLD", "PreconditionedSGLD"]:
    record(f"kernel/{name}/inmemory_indep/xla",
           lambda name=name: run_chain(kernel_factories(indep)[name](), INIT,
                                       "xla"))
  record("kernel/SGLD/inmemory_indep/eager",
         lambda: run_chain(kernel_factories(indep)["SGLD"](), INIT, "eager"))

  # Regression target, float64 data.
  def reg64():
    return sg.InMemoryTarget(
        gaussian_ll, data=(X.astype(np.float64), Y_REG.astype(np.float64)),
        log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w**2, -1),
        parameter_shapes=[D], batch_size=32)
  for name in ["SGLD", "AMAGOLD"]:
    record(f"kernel/{name}/inmemory_f64/xla",
           lambda name=name: run_chain(kernel_factories(reg64)[name](),
                                       tf.cast(INIT, tf.float64), "xla"))

  # Tuple state (list of parts), per-part step size.
  def two_part_target():
    def ll(params, batch):
      w, b = params
      return tfd.Normal(tf.linalg.matvec(batch[0], w) + b[..., :1],
                        1.).log_prob(batch[1])
    def lp(params):
      w, b = params
      return (tf.reduce_sum(tfd.Normal(0., 1.).log_prob(w), -1) +
              tf.reduce_sum(tfd.Normal(0., 1.).log_prob(b), -1))
    return sg.InMemoryTarget(ll, data=(X, Y_REG), log_prior_fn=lp,
                             parameter_shapes=[[D], [1]], batch_size=32)
  init2 = [INIT, tf.zeros([NUM_CHAINS, 1])]
  record("kernel/SGHMC/two_parts/xla", lambda: run_chain(
      sg.SGHMC(two_part_target(), step_size=[0.01, 0.02], friction=1.),
      init2, "xla"))
  record("kernel/AMAGOLD/two_parts/xla", lambda: run_chain(
      sg.AMAGOLD(two_part_target(), step_size=[0.03, 0.05],
                 num_leapfrog_steps=3, friction=0.5), init2, "xla"))

  # DatasetTarget: tf.data minibatches (graph, no XLA), deterministic order.
  def dataset_target():
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).shuffle(
        N, seed=3, reshuffle_each_iteration=True).repeat().batch(32)
    full_ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(64)
    return sg.DatasetTarget(logistic_ll, ds, num_examples=N,
                            log_prior_fn=log_prior, full_dataset=full_ds,
                            parameter_shapes=[D])
  for name in ["SGLD", "SGHMC_euler", "AMAGOLD"]:
    record(f"kernel/{name}/dataset/eager", lambda name=name: run_chain(
        kernel_factories(dataset_target)[name](), INIT, "eager"))
    record(f"kernel/{name}/dataset/graph", lambda name=name: run_chain(
        kernel_factories(dataset_target)[name](), INIT, "graph"))

  # ControlVariateTarget around a mode from find_mode.
  def mode():
    return sg.find_mode(logistic_target(), tf.zeros([D]), num_steps=200,
                        learning_rate=0.05)
  record("target/find_mode", mode)
  def cv_target():
    return sg.ControlVariateTarget(logistic_target(), mode())
  record("target/ControlVariate", lambda: target_eval(cv_target()))
  for name in ["SGLD", "SGHMC_euler", "AMAGOLD"]:
    record(f"kernel/{name}/control_variate/xla", lambda name=name: run_chain(
        kernel_factories(cv_target)[name](), INIT, "xla"))

  # TemperedTarget.
  tempered = lambda: sg.TemperedTarget(logistic_target(), 0.5)
  record("target/Tempered", lambda: target_eval(tempered()))
  for name in ["SGLD", "AMAGOLD"]:
    record(f"kernel/{name}/tempered/xla", lambda name=name: run_chain(
        kernel_factories(tempered)[name](), INIT, "xla"))
  record("kernel/AMAGOLD_temp2/inmemory_mb/xla", lambda: run_chain(
      sg.AMAGOLD(logistic_target(), step_size=0.05, num_leapfrog_steps=3,
                 friction=0.5, temperature=2.), INIT, "xla"))

  # NoisyGradientTarget (synthetic).
  def noisy():
    return sg.NoisyGradientTarget(
        lambda x: tf.reduce_sum(0.5 * x**2 + 0.1 * x**4, -1),
        gradient_noise_variance=1., parameter_shapes=[2])
  init_n = tf.constant(RNG.normal(size=(NUM_CHAINS, 2)).astype(np.float32))
  record("target/NoisyGradient", lambda: target_eval(noisy(), init_n))
  for name in ["SGHMC_euler", "AMAGOLD", "SGLD"]:
    record(f"kernel/{name}/noisy_gradient/xla", lambda name=name: run_chain(
        kernel_factories(noisy)[name](), init_n, "xla"))

  # LogProbFnTarget / target_log_prob_fn= (full batch, TFP convention).
  record("kernel/SGLD/log_prob_fn/xla", lambda: run_chain(
      sg.SGLD(target_log_prob_fn=gaussian_log_prob, step_size=0.1), INIT,
      "xla"))
  record("kernel/AMAGOLD/log_prob_fn/xla", lambda: run_chain(
      sg.AMAGOLD(target_log_prob_fn=gaussian_log_prob, step_size=0.2,
                 num_leapfrog_steps=4, friction=0.5), INIT, "xla"))
  record("kernel/SGHMC/LogProbFnTarget/xla", lambda: run_chain(
      sg.SGHMC(sg.LogProbFnTarget(gaussian_log_prob),
               step_size=0.05, friction=1.), INIT, "xla"))

  # JointDistributionTarget (logistic regression with a learned scale).
  def jd_model(x):
    return tfd.JointDistributionNamed(dict(
        scale=tfd.HalfNormal(1.),
        w=lambda scale: tfd.Independent(
            tfd.Normal(tf.zeros(D), scale[..., None]), 1),
        y=lambda w: tfd.Independent(
            tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1)))
  def jd_target():
    return sg.JointDistributionTarget(jd_model, observed={"y": Y.astype(
        np.int32)}, covariates=X, batch_size=32)
  def jd_run(kernel_name, mode_):
    t = jd_target()
    init = t.initial_state(NUM_CHAINS, seed=seed(0, 1))
    k = {"AMAGOLD": lambda: sg.AMAGOLD(t, step_size=0.05,
                                       num_leapfrog_steps=3, friction=0.5),
         "SGLD": lambda: sg.SGLD(t, step_size=1e-3)}[kernel_name]()
    r = run_chain(k, init, mode_)
    r["init"] = init
    r["constrained_states"] = t.constrain(r["states"])
    return r
  record("kernel/AMAGOLD/joint/xla", lambda: jd_run("AMAGOLD", "xla"))
  record("kernel/SGLD/joint/xla", lambda: jd_run("SGLD", "xla"))
  record("kernel/AMAGOLD/joint/eager", lambda: jd_run("AMAGOLD", "eager"))

  # TFRecordTarget.
  def tfrecord_target():
    import tempfile
    d = tempfile.mkdtemp(prefix="golden_tfr_")
    sg.write_tfrecord_shards((X, Y), d, num_shards=2, shuffle_seed=0)
    return sg.TFRecordTarget(logistic_ll, d, records_per_batch=32,
                             log_prior_fn=log_prior, parameter_shapes=[D])
  record("kernel/SGLD/tfrecord/graph", lambda: run_chain(
      sg.SGLD(tfrecord_target(), step_size=1e-3), INIT, "graph",
      num_steps=10))

  # ShardedTarget on the default strategy.
  def sharded():
    return sg.ShardedTarget(logistic_ll, (X, Y), batch_size=32,
                            log_prior_fn=log_prior, parameter_shapes=[D])
  record("kernel/SGLD/sharded/graph", lambda: run_chain(
      sg.SGLD(sharded(), step_size=1e-3), INIT, "graph"))

  # ---- TFP wrappers around our kernels.
  def amagold_mb():
    return sg.AMAGOLD(logistic_target(), step_size=0.05,
                      num_leapfrog_steps=3, friction=0.5)
  record("tfp/SimpleStepSizeAdaptation_AMAGOLD/xla", lambda: run_chain(
      tfp.mcmc.SimpleStepSizeAdaptation(amagold_mb(),
                                        num_adaptation_steps=15),
      INIT, "xla"))
  record("tfp/DualAveraging_AMAGOLD/xla", lambda: run_chain(
      tfp.mcmc.DualAveragingStepSizeAdaptation(amagold_mb(),
                                               num_adaptation_steps=15),
      INIT, "xla"))
  record("tfp/DualAveraging_AMAGOLD/eager", lambda: run_chain(
      tfp.mcmc.DualAveragingStepSizeAdaptation(amagold_mb(),
                                               num_adaptation_steps=15),
      INIT, "eager"))
  record("tfp/DualAveraging_SGNUTS/xla", lambda: run_chain(
      tfp.mcmc.DualAveragingStepSizeAdaptation(
          sg.SGNUTS(logistic_target(), step_size=0.02, friction=1.,
                    max_tree_depth=3), num_adaptation_steps=15),
      INIT, "xla"))
  record("tfp/DualAveraging_AmortizedBarker/xla", lambda: run_chain(
      tfp.mcmc.DualAveragingStepSizeAdaptation(
          sg.AmortizedBarker(logistic_target(), step_size=0.05, num_steps=3),
          num_adaptation_steps=15), INIT, "xla"))
  record("tfp/MH_SGLD_logprobfn_MALA/xla", lambda: run_chain(
      tfp.mcmc.MetropolisHastings(
          sg.SGLD(target_log_prob_fn=gaussian_log_prob, step_size=0.5)),
      INIT, "xla"))
  record("tfp/MH_SGLD_full_batch/xla", lambda: run_chain(
      tfp.mcmc.MetropolisHastings(sg.SGLD(full(), step_size=0.01)),
      INIT, "xla"))
  record("tfp/MH_SGLD_full_batch/eager", lambda: run_chain(
      tfp.mcmc.MetropolisHastings(sg.SGLD(full(), step_size=0.01)),
      INIT, "eager"))
  record("tfp/MH_UncalibratedAMAGOLD_logprobfn/xla", lambda: run_chain(
      tfp.mcmc.MetropolisHastings(sg.UncalibratedAMAGOLD(
          target_log_prob_fn=gaussian_log_prob, step_size=0.2,
          num_leapfrog_steps=3, friction=0.5)), INIT, "xla"))
  record("tfp/Transformed_Exp_AMAGOLD/xla", lambda: run_chain(
      tfp.mcmc.TransformedTransitionKernel(
          sg.AMAGOLD(target_log_prob_fn=lambda v: tf.reduce_sum(
              tfd.Gamma(4., 1.).log_prob(v), -1), step_size=0.1,
                     num_leapfrog_steps=3, friction=0.5),
          bijector=tfb.Exp()), tf.ones([NUM_CHAINS, 1]), "xla"))
  record("tfp/ReplicaExchange_SGLD/xla", lambda: run_chain(
      tfp.mcmc.ReplicaExchangeMC(
          target_log_prob_fn=gaussian_log_prob,
          inverse_temperatures=[1., 0.5],
          make_kernel_fn=lambda fn: tfp.mcmc.MetropolisHastings(
              sg.SGLD(target_log_prob_fn=fn, step_size=0.3))),
      INIT, "xla"))

  # StepSeeded (chains/checkpointing).
  record("chains/StepSeeded_AMAGOLD/xla", lambda: run_chain(
      sg.StepSeeded(amagold_mb(), seed(5, 6)), INIT, "xla"))
  record("chains/StepSeeded_SGHMC/eager", lambda: run_chain(
      sg.StepSeeded(sg.SGHMC(logistic_target(), step_size=0.01, friction=1.),
                    seed(5, 6)), INIT, "eager"))
  # with_step_size
  def with_step_size():
    k = sg.AMAGOLD(logistic_target(), step_size=0.05, num_leapfrog_steps=3,
                   friction=0.5)
    r = sg.with_step_size(k.bootstrap_results(INIT), 0.02)
    k2 = k.copy(step_size=0.02)
    state, r2 = k2.one_step(INIT, r, seed=seed(9, 9))
    return {"results_in": r, "state": state, "results_out": r2}
  record("kernel/with_step_size_AMAGOLD/eager", with_step_size)
  # Schedules.
  record("chains/PolynomialDecay_SGLD/xla", lambda: run_chain(
      sg.SGLD(logistic_target(), step_size=sg.PolynomialDecay(
          1e-3, 10., 0.55)), INIT, "xla"))
  record("chains/CyclicalSchedule_SGHMC/xla", lambda: run_chain(
      sg.SGHMC(logistic_target(), step_size=sg.CyclicalSchedule(
          0.01, num_steps=NUM_STEPS, num_cycles=2), friction=1.),
      INIT, "xla"))
  # sample_moments (constant-memory long run).
  def moments():
    m = sg.sample_moments(sg.SGHMC(
        logistic_target(), step_size=0.01, friction=1.), INIT, 30,
                          seed=seed(7, 8))
    return m
  record("chains/sample_moments", moments)

  # ---- warm_up and sample.
  def warm(kernel, **kw):
    w = sg.warm_up(kernel, INIT, seed=seed(3, 4), **kw)
    rep = w.report
    out = {"state": w.state, "step_size": rep.step_size,
           "variance": getattr(rep, "variance", None),
           "acceptance": getattr(rep, "acceptance", None)}
    out["windows"] = [
        # Wall-clock fields (`seconds`) are not reproducible: left out.
        {k: v for k, v in win.items()
         if not isinstance(v, str) and k != "seconds"}
        for win in (getattr(rep, "windows", None) or [])]
    draws = tf.function(lambda: tfp.mcmc.sample_chain(
        10, w.state, kernel=w.kernel, trace_fn=None, seed=seed(5, 6)),
        jit_compile=True)()
    out["draws_after"] = draws
    return out
  record("warm_up/AMAGOLD_mb", lambda: warm(amagold_mb(), num_steps=150))
  record("warm_up/AMAGOLD_full", lambda: warm(
      sg.AMAGOLD(full(), step_size=0.05, num_leapfrog_steps=3,
                 friction=0.5), num_steps=150))
  record("warm_up/SGHMC_mb", lambda: warm(
      sg.SGHMC(logistic_target(), step_size=0.01, friction=1.),
      num_steps=150, num_test_steps=5))
  record("warm_up/SGLD_mb", lambda: warm(
      sg.SGLD(logistic_target(), step_size=1e-3), num_steps=100,
      num_test_steps=5, adapt_mass=False))

  def run_sample(**kw):
    fit = sg.sample(seed=seed(0, 1), progress=False, print_report=False,
                    **kw)
    out = {"draws": fit.draws, "final_state": fit.final_state,
           "states": fit.states, "trace": flat(fit.trace),
           "final_kernel_results": flat(fit.final_kernel_results)}
    out["step_size"] = tf.nest.flatten(
        getattr(fit.report.warmup, "step_size", None) if
        getattr(fit.report, "warmup", None) is not None else [])
    return out
  record("sample/logistic_amagold_fullbatch", lambda: run_sample(
      target=logistic_target(), num_results=40, num_adaptation_steps=150))
  record("sample/logistic_minibatch_cv", lambda: run_sample(
      target=logistic_target(), num_results=40, num_adaptation_steps=150,
      full_batch=False))
  record("sample/logistic_sghmc", lambda: run_sample(
      target=logistic_target(), num_results=40, num_adaptation_steps=100,
      kernel="sghmc"))
  record("sample/log_prob_fn", lambda: run_sample(
      target_log_prob_fn=gaussian_log_prob, parameter_shapes=[D],
      num_results=40, num_adaptation_steps=100))

  # ---- Keras adapter.
  run_keras()

  print(f"total {time.perf_counter() - t_all:.1f}s")
  return path


def run_keras():
  import keras
  import tfp_sgmcmc.keras as sgk

  rng = np.random.default_rng(1)
  xk = rng.normal(size=(256, 5)).astype("float32")
  yk = np.argmax(xk[:, :3] + 0.5 * rng.normal(size=(256, 3)), axis=1)
  yr = (xk @ rng.normal(size=5) + 0.3 * rng.normal(size=256)).astype(
      "float32")

  def model_fn(out, jit):
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((5,)),
                          keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(out)])
    m.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
              loss=(keras.losses.SparseCategoricalCrossentropy(
                  from_logits=True) if out == 3 else
                    sgk.GaussianNegativeLogLikelihood(scale=0.3)),
              jit_compile=jit)
    return m

  def fit(sampler_fn, out=3, jit=False, epochs=2, **cb_kw):
    keras.utils.set_random_seed(0)
    tf.random.set_seed(0)
    model = model_fn(out, jit)
    cb = sgk.SamplingCallback(sampler_fn(), num_examples=len(xk), prior=1.,
                              **cb_kw)
    y = yk if out == 3 else yr
    hist = model.fit(xk, y, batch_size=32, epochs=epochs, callbacks=[cb],
                     verbose=0, shuffle=False)
    result = {"weights": [np.asarray(w) for w in model.get_weights()],
              "history": {k: np.asarray(v) for k, v in hist.history.items()}}
    post = getattr(cb, "posterior", None)
    if post is not None:
      result["samples"] = post.samples
      if post.mean is not None:
        result["mean"] = post.mean
      if post.variance is not None:
        result["variance"] = post.variance
      if post.num_samples:
        result["predict"] = cb.predict(xk[:16])
    return result

  record("keras/SGLD", lambda: fit(lambda: sgk.SGLD(1e-4, seed=1),
                                   burnin_steps=4, thinning=2,
                                   max_samples=5))
  record("keras/SGHMC_from_sgd_momentum", lambda: fit(
      lambda: sgk.SGHMC.from_sgd_momentum(learning_rate=0.01 / len(xk),
                                          momentum_decay=0.1, seed=2),
      burnin_steps=4, thinning=2, max_samples=5))
  record("keras/SGHMC_splitting_xla", lambda: fit(
      lambda: sgk.SGHMC(1e-3, friction=10., integrator="splitting", seed=3),
      jit=True, burnin_steps=4, thinning=2, max_samples=5))
  record("keras/SGNHT", lambda: fit(lambda: sgk.SGNHT(1e-3, seed=4),
                                    burnin_steps=4, thinning=2,
                                    max_samples=5))
  record("keras/PreconditionedSGLD", lambda: fit(
      lambda: sgk.PreconditionedSGLD(1e-4, seed=5), burnin_steps=4,
      thinning=2, max_samples=5))
  record("keras/AMAGOLD", lambda: fit(
      lambda: sgk.AMAGOLD(step_size=0.01, num_leapfrog_steps=4, friction=1.,
                          seed=6),
      burnin_steps=4, energy_data=(xk, yk), thinning=1, max_samples=5))
  record("keras/AMAGOLD_regression_warmup", lambda: fit(
      lambda: sgk.AMAGOLD(step_size=0.01, num_leapfrog_steps=4, friction=1.,
                          seed=7),
      out=1, epochs=6, burnin_steps=4, energy_data=(xk, yr), warmup=8,
      adapt_mass=False,
      thinning=1, max_samples=5))


if __name__ == "__main__":
  args = sys.argv[1:]
  if "--only" in args:
    i = args.index("--only")
    ONLY = args[i + 1].split(",")
    del args[i:i + 2]
  if len(args) != 1:
    sys.exit("usage: golden_streams.py OUT.npz [--only SUBSTR[,SUBSTR]]")
  t0 = time.perf_counter()
  main(args[0])
  np.savez(args[0], **OUT)
  n_err = sum(k.endswith(":error") for k in OUT)
  print(f"{len(OUT)} keys ({n_err} errors) written to {args[0]} in "
        f"{time.perf_counter() - t0:.1f}s")
