"""`tfp_sgmcmc.sample`: from a model to a posterior, in one call.

Built from the package's public parts, in the order docs/warmup.md gives
for a large data set: the model as a target with one minibatch per chain
(or its full batch, on a small data set); `find_mode` and a start around
it (chains/start.py); control variates around the mode where they pay;
`warm_up` (step size, mass and, on exact gradients, trajectory length:
the warm-up picks them), checked for arrival (chains/arrival.py) and
extended once if it has not arrived; `sample_chain_with_progress` under
XLA; `summarize` and `to_inference_data`; one report.
"""

import collections
import inspect
import time
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import arguments
from tfp_sgmcmc.chains import arrival as arrival_lib
from tfp_sgmcmc.chains import rounding
from tfp_sgmcmc.chains import runs
from tfp_sgmcmc.chains import start as start_lib
from tfp_sgmcmc.chains import stein
from tfp_sgmcmc.chains import warmup_picks as picks
from tfp_sgmcmc.chains.sample_report import SampleReport, SampleResult
from tfp_sgmcmc.chains.diagnostics import (UnhealthyChainWarning,
                                           find_field, summarize)
from tfp_sgmcmc.chains.inference_data import to_inference_data
from tfp_sgmcmc.chains.warmup import warm_up
from tfp_sgmcmc.chains.window_adaptation import MIN_WARMUP_STEPS
from tfp_sgmcmc.chains.sample_kernels import (
    AMAGOLD_EXACT_GRADIENT_FRICTION, KERNELS, LAPLACE_CHOICE, approximate,
    built_quietly, kernel_and_mass, warn_if_not_exact, with_mass)
from tfp_sgmcmc.kernels import AMAGOLD
from tfp_sgmcmc.targets import dataset as dataset_lib
from tfp_sgmcmc.targets.in_memory import InMemoryTarget
from tfp_sgmcmc.targets.joint import JointDistributionTarget
from tfp_sgmcmc.targets.wrappers import ControlVariateTarget

__all__ = ["sample", "SampleResult", "SampleReport", "KERNELS"]

# The traced fields: what `summarize` and `to_inference_data` read.
_TRACED = ("diverged", "log_accept_ratio", "is_accepted", "step_size",
           "target_log_prob", "energy")
# The report's fields that are `summarize`'s.
_FROM_HEALTH = ("divergences", "heating", "max_rhat", "min_ess",
                "max_rank_rhat", "min_bulk_ess", "min_tail_ess")
_CALIBRATION = r"supplied `TransitionKernel` is not calibrated"
# A dense mass matrix where the state is one vector of at most
# DENSE_MASS_MAX coordinates per chain and the warm-up has at least
# DENSE_MIN_STEPS steps: warm_up's own pick (`chains.warmup_picks`, where
# the measurements are), which `sample` leaves to it.
DENSE_MASS_MAX = picks.DENSE_MASS_MAX
DENSE_MIN_STEPS = picks.DENSE_MIN_STEPS


def _trace_fn(kernel, state):
  """A trace of the results' tensor fields that diagnostics read (never a
  distribution, which a trace cannot stack)."""
  results = kernel.bootstrap_results(state)
  names = [n for n in _TRACED if tf.is_tensor(find_field(results, n))]
  trace_type = collections.namedtuple("SampleTrace", names)

  def trace_fn(_, r):
    return trace_type(*[find_field(r, n) for n in names])
  return trace_fn


def _step_size_guess(scale):
  """The warm-up's first step size: the median Laplace sd, or 0.01 without
  one (a uniform start)."""
  return 0.01 if scale is None else float(np.median(np.concatenate(
      [np.ravel(s) for s in tf.nest.flatten(scale)])))


def _check_counts(*counts):
  """The counts, refused by their own names before the start and the
  warm-up (minutes at large N), not where a later stage reads them."""
  names = ("num_results", "num_chains", "num_adaptation_steps",
           "num_burnin_steps", "num_mode_steps")
  for name, value, least in zip(names, counts, (1, 1, MIN_WARMUP_STEPS, 0, 0)):
    arguments.check_integer(name, value, least)


def _template(target, initial_state, parameter_shapes, seed):
  """One chain's state (no chain axis), to search from and to shape by: a
  numpy float part keeps its dtype, a number or list is float32."""
  if initial_state is not None:
    state = tf.nest.map_structure(lambda p: p if tf.is_tensor(p) else (
        tf.constant(p) if np.dtype(getattr(p, "dtype", "i1")).kind == "f"
        else tf.convert_to_tensor(p, tf.float32)), initial_state)
    if isinstance(target, JointDistributionTarget) and (
        tf.nest.is_nested(state) or state.shape.rank != 1):
      state = target.flattened(state)  # The nodes' structure, flattened.
    return state
  if isinstance(target, JointDistributionTarget):
    return tf.nest.map_structure(tf.zeros_like,
                                 target.initial_state(seed=seed))
  shapes = (parameter_shapes if parameter_shapes is not None else
            target.parameter_shapes)
  if shapes is None:
    raise ValueError(
        f"`parameter_shapes` is required: the {type(target).__name__} does "
        "not say the shape of one chain's state; pass "
        "parameter_shapes=[d] (or a list of shapes for a list state) or "
        "initial_state= (one chain's state).")
  dtype = _data_dtype(target)
  if isinstance(shapes, list) and shapes and isinstance(
      shapes[0], (list, tuple, tf.TensorShape)):
    return [tf.zeros(s, dtype) for s in shapes]
  return tf.zeros(shapes, dtype)


def _data_dtype(target):
  """The dtype of a state made from shapes: float64 where the target's data
  (in memory or streamed, under any wrappers) hold float64 and no float32
  parts, a model built in float64, whose functions a float32 state fails
  (and which the report's rounding advice asks for); else float32."""
  while getattr(target, "base_target", None) is not None:
    target = target.base_target
  if isinstance(target, InMemoryTarget):
    leaves = tf.nest.flatten(target.data)
  elif isinstance(target, dataset_lib.DatasetTarget):
    leaves = tf.nest.flatten(target.dataset.element_spec)
  else:
    return tf.float32
  floats = {tf.as_dtype(leaf.dtype) for leaf in leaves} & {tf.float32,
                                                             tf.float64}
  return tf.float64 if floats == {tf.float64} else tf.float32


def _dense_applies(kernel, states, dense_mass, num_adaptation_steps):
  """Whether `sample` warms up a dense mass (`warmup_picks.pick_mass`, the
  warm-up's own rule, for a state with one chain axis); a refusal where
  `dense_mass=True` cannot be had."""
  pick = picks.pick_mass(kernel, tf.nest.flatten(states), 1,
                         num_adaptation_steps, dense_mass)
  if pick.refusal:
    raise ValueError(f"`dense_mass=True` but {pick.refusal}; use "
                     "dense_mass=None (dense where it applies) or False.")
  return pick.choice == "dense"


def _warm(kernel, state, num_steps, seed, mode_scale, jit_compile,
          dense_mass, fixed_mass=False, progress=False,
          target_accept_prob=0.75):
  """warm_up, with its arrival checked (and the warm-up run once more from
  where it ended when it has not arrived). The warm-up picks the mass (with
  `dense_mass` None; none where `fixed_mass`, the kernel's own) and the
  trajectory length."""
  extended = False
  seeds = tfp.random.split_seed(seed, 4)
  for attempt in range(2):
    with built_quietly():  # The warm-up's copies of the kernel.
      warnings.simplefilter("ignore", arrival_lib.WarmupNotConvergedWarning)
      warm = warm_up(kernel, state, num_steps=num_steps,
                     seed=seeds[2 * attempt], jit_compile=jit_compile,
                     dense_mass=dense_mass, progress=progress,
                     adapt_mass=False if fixed_mass else None,
                     target_accept_prob=target_accept_prob)
    if fixed_mass:  # Not the user's adapt_mass=False: say whose mass.
      warm = warm._replace(report=warm.report._replace(
          choices=LAPLACE_CHOICE + warm.report.choices.partition(";")[2]))
    variance = warm.report.variance
    if variance is None:
      variance = (tf.nest.map_structure(tf.square, mode_scale)
                  if mode_scale is not None else
                  [np.var(np.asarray(p), axis=0)
                   for p in tf.nest.flatten(warm.state)])
    arrived = arrival_lib.check_warm_up(
        kernel, warm.state, variance, 1, seeds[2 * attempt + 1],
        covariance=warm.report.covariance)
    if arrived.arrived or attempt:
      return warm, arrived, extended
    kernel, state, extended = warm.kernel, warm.state, True
  return warm, arrived, extended


@runs.explain_xla_errors
def sample(target=None, num_results=1000, num_chains=4, kernel=None,
           seed=None, num_adaptation_steps=1000, num_burnin_steps=0, *,
           target_log_prob_fn=None, observed=None, covariates=None,
           batch_size=None, parameter_shapes=None, initial_state=None,
           control_variates=None, full_batch=None, independent_chains=True,
           dense_mass=None, num_mode_steps=2000, mode_learning_rate=1e-2,
           progress=True, jit_compile=None, print_report=True, ksd=False,
           target_accept_prob=0.75):
  """Draws from a posterior in one call: start, warm-up, sampling, checks.

  Like PyMC's `pm.sample` or NumPyro's `MCMC.run`, with TFP's vocabulary.
  In order: the model becomes a target whose chains draw their own
  minibatches, or, for an `InMemoryTarget` or a `DatasetTarget` with a
  `full_dataset` (or a `ControlVariateTarget` on one) of at most
  `FULL_BATCH_MAX_EXAMPLES` (10,000) examples, a full-batch target (the
  target's `with_full_batch()`): there a full-data gradient costs
  about what a minibatch one does, while the minibatch noise cuts the step
  size about tenfold, so minibatches pay only at large N (docs/warmup.md
  gives the measurements); a minibatch target with an exact energy starts
  around its mode, also where its full batch is sampled (Newton's method
  where the state has at most
  `chains.start.FULL_HESSIAN_MAX` coordinates, else `find_mode`'s Adam;
  dispersed by the Laplace sds; uniform, as below, where Newton's method
  finds none, as a hierarchical scale heads to 0) and, when the minibatch
  is at most a tenth of the data and drawn by the kernel's seed (in memory
  or from TFRecord files; not a `DatasetTarget`'s pipeline, on which
  AMAGOLD is not exact), is sampled through control variates around the mode
  (`ControlVariateTarget`); other targets start uniform(-2, 2) in the
  unconstrained space, as Stan. `warm_up` tunes the step size and mass
  (dense for a vector of at most `DENSE_MASS_MAX` coordinates; beyond, the
  Laplace covariance from the start's Newton Hessian, fixed, where there
  is one: the windows hold too few draws for a dense estimate; else
  diagonal) and, on exact (full-batch) gradients with a mass that is not
  diagonal, AMAGOLD's trajectory length (ChEES); where on minibatches it
  tunes AMAGOLD's step size below `chains.start.MINIBATCH_MIN_STEP_SIZE`
  (the gradient noise, which grows with the dimension, holds it down) and
  the target has a full batch, the warm-up runs again on full-batch
  gradients from where it ended (with `full_batch=None`), unless the
  exact energy there is rough (`chains.rounding`: full-data gradients
  share its test; the report's `minibatches` line names it); a warm-up that
  has not arrived at the posterior (`tfp_sgmcmc.chains.arrival`) is run
  once more, from where it ended, and from a uniform start also once more
  from around the mode, then reported with a `WarmupNotConvergedWarning`.
  The chains run under XLA (a `DatasetTarget`'s without) with a progress
  bar; one report is printed (`print_report`), and an
  `UnhealthyChainWarning` names any problem (and, on a target with an
  exact energy, a float rounding of it that the M-H test cannot resolve:
  `chains.rounding`).

  Args:
    target: a `tfp_sgmcmc` target, or a `tfd.JointDistribution` (with
      `observed`, or pinned), or a model function `covariates ->
      JointDistribution` with `observed` and `covariates`.
    num_results: draws kept per chain.
    num_chains: independent chains.
    kernel: "amagold" (default: exact, the draws' law is the posterior
      whatever the minibatch; 10 leapfrog steps, tuned by the warm-up on
      exact gradients, friction 0.5 on raw
      minibatch gradients, `AMAGOLD_EXACT_GRADIENT_FRICTION` on control
      variates or exact gradients), "sghmc", "sgnht", "sgld", or a kernel
      instance, whose step size and other arguments are starting guesses.
    seed: a stateless `int32[2]` seed (the same draws at every call); an
      int or None is TFP's stateful seed (an int repeats a run, not a call).
    num_adaptation_steps: warm-up steps (`warm_up`'s `num_steps`).
    target_accept_prob: the acceptance the warm-up tunes the step size to
      (`warm_up`'s); higher (e.g. 0.95) gives a smaller step size, the fix
      for divergent transitions in a curved region (Stan's `adapt_delta`).
    num_burnin_steps: steps run after the warm-up and not kept.
    target_log_prob_fn: instead of `target`, TFP's log density (full
      batch); needs `parameter_shapes` or `initial_state`.
    observed, covariates, batch_size: a JointDistribution's data, as
      `JointDistributionTarget` takes them (batch_size None: full batch).
    parameter_shapes: one chain's state shape, where the target does not
      say it.
    initial_state: one chain's state to start the mode search from (no
      chain axis); default zeros, float64 where the target's data are
      float64 (every float part), else float32.
    control_variates: None (the rule above), True or False.
    full_batch: None (the rule above: full-batch gradients for an
      `InMemoryTarget` or `DatasetTarget` (with a `full_dataset`) of at
      most `FULL_BATCH_MAX_EXAMPLES` examples, or a `ControlVariateTarget`
      on one; with `control_variates=True`, minibatches), True (full
      batch; an error for a target without `with_full_batch`) or False
      (keep the target's minibatches). The
      report's `minibatches` line says what was done and why.
    independent_chains: give each chain its own minibatches (True), or
      keep the target's sharing (False).
    dense_mass: None (the default): `warm_up`'s dense mass matrix where
      the state is one vector of at most `DENSE_MASS_MAX` coordinates, the
      kernel takes a mass and `num_adaptation_steps` >= `DENSE_MIN_STEPS`;
      a longer vector started by Newton's method keeps the Laplace
      covariance as its mass (the report's "dense Laplace"); else the
      diagonal one (`warm_up`'s own pick); True (dense; an error
      where the kernel or the state cannot take it) or False (diagonal).
    num_mode_steps, mode_learning_rate: `find_mode`'s Adam, run where
      Newton's method from the start does not converge (an energy that
      is not log-concave there) or the state has more than
      `chains.start.FULL_HESSIAN_MAX` coordinates.
    progress: as `sample_chain_with_progress` takes it, for the sampling
      and for each warm-up (`warm_up`'s: a report after each window).
    jit_compile: compile with XLA (the start's mode search too). None (the
      default): with XLA, except on a `DatasetTarget` (or `TFRecordTarget`),
      whose tf.data iterators XLA cannot compile (the report's `minibatches`
      line says so). Without XLA, TensorFlow's graph optimiser may change
      an exact energy's gradient in its last bits from call to call at
      large sizes (200,000 x 200 here), and one seed's draws then differ.
    print_report: print the report.
    ksd: also measure the draws' kernel Stein discrepancy (`tfp_sgmcmc.ksd`,
      chains pooled, at most 1,000 draws, the target's exact score, in the
      draws' sds: `scale="diagonal"`): how far
      a biased kernel's draws are from the posterior, which R-hat and ESS
      do not tell. It costs about one full-data gradient per draw measured;
      at large N, `tfp_sgmcmc.ksd(result.states, result.target,
      pool_chains=True, score_examples=N // 100, scale="diagonal")` costs
      a few percent.

  Returns:
    A `SampleResult(draws, inference_data, kernel, final_state,
    final_kernel_results, states, trace, target, report)`.

  #### Example

  ```python
  fit = tfp_sgmcmc.sample(target, num_results=500, parameter_shapes=[d],
                          seed=[0, 1])
  print(fit.report)                          # warm-up, R-hat, ESS, ...
  print(tf.reduce_mean(fit.draws, [0, 1]))   # posterior means
  ```
  """
  _check_counts(num_results, num_chains, num_adaptation_steps,
                num_burnin_steps, num_mode_steps)
  t_start = time.perf_counter()
  seed = tfp.random.sanitize_seed(seed)
  start_seed, warm_seed, run_seed = tfp.random.split_seed(seed, 3)
  model_target = start_lib.as_target(target, target_log_prob_fn, observed,
                                     covariates, batch_size)
  template = _template(model_target, initial_state, parameter_shapes,
                       start_seed)
  start_lib.check_one_chain(model_target, template)
  start_lib.check_repeated(model_target)
  if control_variates and full_batch is None:
    full_batch = False   # Control variates need the minibatches.
  # The start as for the target given: around the mode of a minibatch
  # target also where its full batch is sampled (from uniform(-2, 2) the
  # chains of logistic regressions of 50 to 200 coordinates on 2,000 to
  # 5,000 examples did not meet, R-hat up to 45).
  around_mode = start_lib.is_minibatch(model_target) and (
      model_target.has_exact_energy) or None
  model_target, batch_note = start_lib.full_batch(model_target, full_batch)
  minibatches = "shared minibatches (independent_chains=False)"
  sampled = model_target
  if independent_chains:
    sampled, minibatches = start_lib.independent(
        model_target, _shape_spec(template))
  if batch_note is not None:
    minibatches = batch_note
  streamed = dataset_lib.reads_pipelines(sampled)
  if jit_compile and streamed:
    raise ValueError(
        f"`jit_compile=True` with a {type(model_target).__name__}: XLA "
        "cannot compile its tf.data iterators. Leave jit_compile=None (the "
        "default), which samples it without XLA.")
  xla_note = ("; without XLA (a tf.data pipeline runs on the host)"
              if jit_compile is None and streamed else "")
  jit_compile = not streamed if jit_compile is None else jit_compile
  states, mode, scale, how, covariance = start_lib.initial_states(
      sampled, template, num_chains, start_seed, num_mode_steps,
      mode_learning_rate, around_mode, jit_compile=jit_compile)
  t_mode = time.perf_counter()
  # Control variates are centred on the mode: none was found, none used.
  use_cv = start_lib.use_control_variates(sampled, control_variates) and (
      mode is not None or bool(control_variates))
  if use_cv:
    if mode is None:
      raise ValueError("`control_variates=True` needs a minibatch target "
                       "with an exact energy (to find the mode).")
    sampled = ControlVariateTarget(sampled, mode)
  step_size = _step_size_guess(scale)
  noisy = start_lib.is_minibatch(sampled) and not isinstance(
      sampled, ControlVariateTarget)
  choice, (kernel, laplace) = kernel, kernel_and_mass(
      kernel, sampled, step_size, noisy, states, covariance, dense_mass,
      num_adaptation_steps)
  _dense_applies(kernel, states, dense_mass, num_adaptation_steps)  # Refusal.

  def warm_from(kernel, states):  # With the scale and mass of the moment.
    return _warm(kernel, states, num_adaptation_steps, warm_seed, scale,
                 jit_compile, dense_mass, laplace is not None, progress,
                 target_accept_prob)

  warm, arrived, extended = warm_from(kernel, states)
  if not arrived.arrived and mode is None and sampled.has_exact_energy and (
      not start_lib.is_minibatch(sampled)):
    # A uniform start can strand a chain (e.g. at a tiny noise scale, where
    # the step size tuned for the others does not move it): once more, from
    # around the mode, as a minibatch target starts (where there is one).
    retry = start_lib.initial_states(
        sampled, template, num_chains, start_seed, num_mode_steps,
        mode_learning_rate, around_mode=True, jit_compile=jit_compile)
    if retry[1] is not None:
      states, mode, scale, again, covariance = retry
      how = f"{how}, which did not arrive; then {again}"
      kernel, laplace = kernel_and_mass(
          choice, sampled, _step_size_guess(scale), noisy, states,
          covariance, dense_mass, num_adaptation_steps)
      warm, arrived, extended = warm_from(kernel, states)
      extended = True
  whole = (start_lib.full_batch_for_noise(
      sampled, full_batch, float(warm.report.step_size), warm.state)
           if isinstance(warm.kernel, AMAGOLD) else None)
  if whole is not None and whole[0] is sampled:
    minibatches = f"{minibatches}; {whole[1]}"  # Kept: the note says why.
  elif whole is not None:
    # Exact gradients from where the minibatch warm-up ended.
    (sampled, minibatches), use_cv = whole, False
    kernel = with_mass(choice, sampled, warm.report.step_size, False,
                        laplace)
    warm, arrived, again = warm_from(kernel, warm.state)
    extended = extended or again
  t_warm = time.perf_counter()
  if not arrived.arrived:
    warnings.warn(arrived.cause, arrival_lib.WarmupNotConvergedWarning,
                  stacklevel=3)
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=_CALIBRATION)
    run = runs.sample_chain_with_progress(
        num_results, warm.state, warm.kernel, seed=run_seed,
        num_burnin_steps=num_burnin_steps,
        trace_fn=_trace_fn(warm.kernel, warm.state), progress=progress,
        jit_compile=jit_compile)
  t_run = time.perf_counter()
  trace = tf.nest.map_structure(np.asarray, run.trace)
  states_np = tf.nest.map_structure(np.asarray, run.all_states)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    health = summarize(states_np, trace, print_report=False, warn=False)
  draws, var_names, kept = states_np, None, states_np
  if isinstance(model_target, JointDistributionTarget):
    draws, kept = (tf.nest.map_structure(np.asarray, f(run.all_states)) for
                   f in (model_target.constrain, model_target.structured))
    var_names = model_target
  acceptance = health.acceptance_rate
  if acceptance is None and hasattr(trace, "log_accept_ratio"):
    ratio = np.asarray(trace.log_accept_ratio, np.float64)
    acceptance = np.exp(np.minimum(ratio, 0.)).reshape(num_results, -1).mean(0)
  discrepancy, t_ksd = None, time.perf_counter()
  if ksd:
    # In the draws' sds: the unit kernel sees a narrow posterior only
    # through the mean of its score, and one KSD of exact draws varied 7x.
    discrepancy = float(stein.kernel_stein_discrepancy(
        run.all_states, sampled, pool_chains=True, jit_compile=jit_compile,
        seed=run_seed, scale="diagonal"))
  t_ksd = time.perf_counter() - t_ksd
  problems = list(health.problems)
  if problems and model_target.has_exact_energy:
    # A rough energy explains stuck chains, and needs another fix.
    problems += filter(None, [rounding.rounding_problem(
        model_target, states_np, diverged=health.divergences > 0)])
  if problems and laplace is None and warm.report.mass == "diagonal":
    problems += filter(None, [picks.vector_state_hint(
        warm.kernel, tf.nest.flatten(states), 1, num_adaptation_steps,
        dense_mass, fix=_JD_FIX if isinstance(
            model_target, JointDistributionTarget) else None)])
  unhealthy = list(problems)
  if not arrived.arrived:
    problems.insert(0, "warm-up did not arrive")
  report = SampleReport(
      kernel=type(warm.kernel).__name__, start=how,
      control_variates=use_cv, minibatches=minibatches + xla_note,
      warmup=warm.report, arrived=arrived.arrived, arrival=arrived,
      extended=extended, acceptance=acceptance,
      problems=problems, **{k: getattr(health, k) for k in _FROM_HEALTH},
      seconds=dict(mode=t_mode - t_start, warmup=t_warm - t_mode,
                   sampling=t_run - t_warm,
                   **({"ksd": t_ksd} if ksd else {}),
                   total=time.perf_counter() - t_start),
      ksd=discrepancy, approximate=approximate(warm.kernel, ksd),
      mass="dense Laplace" if laplace is not None else (
          warm.report.mass or "none"))
  idata = _inference_data(draws, trace, var_names, warm.kernel)
  if print_report:
    print(report)
  # Once, of the chains run; stacklevel 3 names the user's call, past
  # explain_xla_errors' wrapper.
  warn_if_not_exact(warm.kernel, stacklevel=3)
  if unhealthy:
    warnings.warn("unhealthy run: " + "; ".join(unhealthy),
                  UnhealthyChainWarning, stacklevel=3)
  final_state = tf.nest.map_structure(lambda s: s[-1], run.all_states)
  return SampleResult(
      draws=draws, inference_data=idata, kernel=warm.kernel,
      final_state=final_state, final_kernel_results=run.final_kernel_results,
      states=kept, trace=trace, target=sampled, report=report)


_JD_FIX = ("JointDistributionTarget(..., flat_state=True), as `sample` "
           "builds it from a JointDistribution")


def _shape_spec(template):
  """`parameter_shapes` of one chain's state."""
  shapes = [p.shape.as_list() for p in tf.nest.flatten(template)]
  if tf.nest.is_nested(template):
    return shapes
  return shapes[0]


def _inference_data(draws, trace, var_names, kernel):
  try:
    kwargs = {}
    if "kernel" in inspect.signature(to_inference_data).parameters:
      kwargs["kernel"] = kernel
    if var_names is not None:
      kwargs["var_names"] = var_names
    return to_inference_data(draws, trace, **kwargs)
  except ImportError:
    return None
