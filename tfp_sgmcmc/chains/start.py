"""Where `tfp_sgmcmc.sample` starts and what it samples: the model as a
target, each chain's own minibatches, control variates where they pay, and
the chains' starting states.

* **Start.** A minibatch target with an exact energy (`sample` asks this
  of the target it is given, before any full batch): around the mode
  (Newton's method, `newton_mode`, up to `FULL_HESSIAN_MAX` coordinates;
  `find_mode`'s Adam beyond, or where Newton's method stops short), each
  chain at mode + s * z, z ~ N(0, I), s the Laplace sds
  (the inverse Hessian's diagonal where the state has at most
  `FULL_HESSIAN_MAX` coordinates, else a lower bound of 1 / sqrt of the
  Hessian's diagonal from Rademacher probes: `laplace_scale`). Elsewhere
  as Stan does: uniform(-2, 2) in the unconstrained space.
* **Full batch on a small data set.** An `InMemoryTarget` (or a
  `DatasetTarget` with a `full_dataset`, or a `ControlVariateTarget` on
  either) of at most `FULL_BATCH_MAX_EXAMPLES` examples is sampled with
  full-batch gradients (`with_full_batch`): there a full-data gradient
  costs about what a minibatch one does, while the minibatch noise, even
  through control variates, cuts the step size and the ESS several-fold.
* **Control variates** (`ControlVariateTarget` around the mode) when the
  kernel's seed draws the minibatch (not a `DatasetTarget`'s pipeline) and
  it covers at most 1 / `CONTROL_VARIATE_MIN_RATIO` of the data: the
  minibatch gradient's noise variance, in units of the posterior's
  curvature, grows as N / n, and around the mode control variates remove
  most of it for two minibatch gradients per step instead of one.
* **Independent chains.** An `InMemoryTarget` (or a `ControlVariateTarget`
  on one) whose chains share each step's minibatch is rebuilt with
  `with_independent_minibatches`; other targets are kept, and the report
  says so.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.chains import laplace
from tfp_sgmcmc.chains import rounding as rounding_lib
from tfp_sgmcmc.chains.laplace import (FULL_HESSIAN_MAX, laplace_covariance,
                                       laplace_scale, newton_mode)
from tfp_sgmcmc.chains.model_target import as_target
from tfp_sgmcmc.chains.uniform_start import uniform_states
from tfp_sgmcmc.targets.dataset import streamed_target
from tfp_sgmcmc.targets.in_memory import InMemoryTarget
from tfp_sgmcmc.targets.joint import JointDistributionTarget
from tfp_sgmcmc.targets.log_prob import LogProbFnTarget, is_full_batch
from tfp_sgmcmc.targets.wrappers import ControlVariateTarget, find_mode

__all__ = ["as_target", "independent", "use_control_variates", "full_batch",
           "laplace_scale", "newton_mode", "initial_states", "is_minibatch",
           "CONTROL_VARIATE_MIN_RATIO", "FULL_HESSIAN_MAX",
           "FULL_BATCH_MAX_EXAMPLES", "MINIBATCH_MIN_STEP_SIZE",
           "full_batch_for_noise", "check_one_chain", "check_repeated"]


CONTROL_VARIATE_MIN_RATIO = 10.
# The largest data set (N examples) that `sample` samples with full-batch
# gradients when the target has minibatches. Measured on a logistic
# regression (d = 25, minibatches of 64 through control variates, sample's
# defaults, 4 chains): the full batch's smallest ESS per draw was 6-8x the
# minibatches' (800 against 100-140 of 4,000 at N = 2,000, 5,000 and
# 20,000, with R-hat 1.02 against 1.09-1.11), while an AMAGOLD trajectory on
# the full data cost 2.5x one on the minibatches at N = 1,000, 4.5x at
# 5,000 and 9x at 20,000. ESS per unit time breaks even near N = 20,000;
# the threshold is half that, as a full-data gradient's cost grows with N
# faster for a model dearer per example than this one, where the fixed
# cost of a step weighs less.
FULL_BATCH_MAX_EXAMPLES = 10_000
# Beyond it, the minibatches are kept unless the warm-up on them tunes
# AMAGOLD's step size (in the units its mass whitens) below this: the
# exact test then sees the gradient noise, whose energy grows with the
# dimension, and the chain barely moves. Logistic regression, N = 200,000,
# minibatches of 1,000 with control variates (benchmarks/one_call.py):
# d = 20 tuned 0.21-0.70 and mixed (R-hat <= 1.01); d = 200 tuned 0.023
# (R-hat 11) and d = 300 0.014 (R-hat 10), where full-data gradients from
# the same start tuned 0.37 and mixed (d = 200: R-hat 1.008, smallest ESS
# 1,899 of 4,000).
MINIBATCH_MIN_STEP_SIZE = 0.1



def is_minibatch(target):
  """Whether `target`'s gradients come from minibatches."""
  base = (target.base_target if isinstance(target, ControlVariateTarget)
          else target)
  return not is_full_batch(base) and (isinstance(base, InMemoryTarget) or (
      not isinstance(base, LogProbFnTarget) and
      base.minibatches_from_seed is not None))


def _data_base(target):
  """The target under `target` (itself, or a `ControlVariateTarget`'s
  base) that can give full-batch gradients (`with_full_batch`: an
  `InMemoryTarget`, or a `DatasetTarget` with a `full_dataset`), or None."""
  base = (target.base_target if isinstance(target, ControlVariateTarget)
          else target)
  return base if hasattr(base, "with_full_batch") and (
      base.has_exact_energy) else None


def full_batch(target, choice):
  """(target, note): `target` with full-batch gradients where `choice` is
  True, or None and the data set has at most `FULL_BATCH_MAX_EXAMPLES`
  examples; `note` says what was done and why (None: `target` kept as it
  is, with nothing to say). A `ControlVariateTarget` is replaced by its
  base's full batch: with exact gradients there is no noise to remove."""
  if choice is not None and not isinstance(choice, (bool, np.bool_)):
    raise TypeError(f"`full_batch` must be None (the rule), True or False; "
                    f"got {choice!r}.")
  base = _data_base(target)
  if choice is False:
    return target, None
  if base is None:
    if choice:
      raise ValueError(
          f"`full_batch=True` needs an InMemoryTarget or a DatasetTarget "
          f"with a `full_dataset` (or a ControlVariateTarget on one); got a "
          f"{type(target).__name__}. Use full_batch=None or False.")
    return target, None
  if base.is_full_batch:
    return target, None
  n = base.num_examples
  if choice:
    return base.with_full_batch(), (
        f"full batch (full_batch=True; N = {n:,})")
  if n <= FULL_BATCH_MAX_EXAMPLES:
    return base.with_full_batch(), (
        f"full batch: N = {n:,} <= {FULL_BATCH_MAX_EXAMPLES:,}, where a "
        "full-data gradient costs about a minibatch's (full_batch=False "
        "keeps the minibatches)")
  return target, None


def full_batch_for_noise(target, choice, step_size, state):
  """(target, note) where the minibatch warm-up (`choice`: `sample`'s
  `full_batch`) tuned `step_size` below `MINIBATCH_MIN_STEP_SIZE`, else
  None: the full batch, or `target` kept where the energy at `state` is
  rough (`rounding`): full-data gradients share that exact test."""
  base = _data_base(target)
  if (choice is not None or base is None or base.is_full_batch or
      step_size >= MINIBATCH_MIN_STEP_SIZE):
    return None
  draws = tf.nest.map_structure(lambda p: np.asarray(p)[None], state)
  rough = rounding_lib.rough_energy(target, draws)
  if rough is not None:
    return target, (
        f"minibatches kept: the warm-up's step size was {step_size:.3g} < "
        f"{MINIBATCH_MIN_STEP_SIZE:g}, held down by float rounding, not "
        "(only) by the gradient noise: "
        f"{rounding_lib.rough_energy_phrase(rough, draws)}; full-data "
        "gradients are tested on the same energy and would not free it: "
        f"{rounding_lib.FLOAT64_FIX}")
  return base.with_full_batch(), (
      f"full batch: on minibatches the warm-up's step size was "
      f"{step_size:.3g} < {MINIBATCH_MIN_STEP_SIZE:g}, held down by the "
      f"gradient noise, so full-data gradients (N = {base.num_examples:,};"
      " full_batch=False keeps the minibatches)")


def independent(target, parameter_shapes):
  """(target, note): `target` with one minibatch per chain where it can be
  rebuilt so; `note` says what the chains share."""
  if isinstance(target, ControlVariateTarget):
    base, note = independent(target.base_target, parameter_shapes)
    if base is not target.base_target:
      return ControlVariateTarget(base, target.centre), note
    return target, note
  if isinstance(target, InMemoryTarget):
    if target.is_full_batch:
      return target, "full batch (no minibatch noise)"
    if target.independent_minibatches:
      return target, "independent minibatches"
    try:
      rebuilt = target.with_independent_minibatches(parameter_shapes)
    except ValueError as e:
      return target, f"SHARED minibatches: {e}"
    return rebuilt, "independent minibatches"
  if not is_minibatch(target):
    return target, "exact gradients (no minibatch noise)"
  return target, (
      f"SHARED minibatches: a {type(target).__name__} cannot give each chain "
      "its own, so R-hat and cross-chain ESS are optimistic")


def use_control_variates(target, control_variates):
  """Whether to sample on `ControlVariateTarget` around the mode: as asked,
  or (None) on minibatches that the kernel's seed draws (an
  `InMemoryTarget`, a `TFRecordTarget`), of at most 1 /
  `CONTROL_VARIATE_MIN_RATIO` of the data, from a target with an exact
  energy (for the mode). Not on a `DatasetTarget`'s pipeline, which
  chooses its own batches: AMAGOLD on them is not exact, so there `sample`
  moves to full-data gradients instead."""
  if control_variates is not None:
    return bool(control_variates)
  batch_size = getattr(target, "batch_size", None)
  if (isinstance(target, ControlVariateTarget) or batch_size is None or
      not target.has_exact_energy or not is_minibatch(target) or
      not target.minibatches_from_seed):
    return False
  return target.num_examples >= CONTROL_VARIATE_MIN_RATIO * batch_size


def _mode(target, start, num_mode_steps, learning_rate, seed, products,
          jit_compile):
  """(mode, Hessian there or None, how it was found, whether Newton's
  method converged there: None beyond `FULL_HESSIAN_MAX`). Up to
  `FULL_HESSIAN_MAX` coordinates Newton's method from `start`, whose
  Hessians the Laplace sds need anyway and which converges in a few steps
  where Adam takes thousands (docs/warmup.md). Where it does not converge
  (no step lowers the energy, or not within its steps), and beyond
  `FULL_HESSIAN_MAX`, `find_mode`'s Adam, then Newton's method from Adam's
  point up to `FULL_HESSIAN_MAX`."""
  dim = sum(int(np.prod(p.shape)) for p in tf.nest.flatten(start))
  small = dim <= FULL_HESSIAN_MAX
  # A Newton step costs a Hessian, about `dim` gradients for a compute-bound
  # model: at most about Adam's `num_mode_steps` gradients, but at least 10
  # steps (from zeros it took 6-7 on logistic regressions of 300-500 dims).
  max_steps = int(min(25, max(10, num_mode_steps // max(dim, 1))))
  if small:
    mode, hessian, steps, converged = newton_mode(
        target, start, max_steps=max_steps, products=products)
    if converged:
      return mode, hessian, f"Newton's method, {_steps(steps)}", True
    start = mode  # Lower than the start, where Newton's method stopped.
  mode = find_mode(target, start, num_steps=num_mode_steps,
                   learning_rate=learning_rate, seed=seed,
                   jit_compile=jit_compile)
  found = f"find_mode, {num_mode_steps} Adam steps"
  if not small:
    return mode, None, found, None
  mode, hessian, steps, converged = newton_mode(
      target, mode, max_steps=max_steps, products=products)
  return (mode, hessian, f"{found}, then Newton's method, {_steps(steps)}",
          converged)


def _steps(count):
  return f"{count} step{'' if count == 1 else 's'}"


def initial_states(target, template, num_chains, seed, num_mode_steps,
                   learning_rate, around_mode=None, jit_compile=False):
  """(states with a leading chain axis, mode or None, Laplace sd or None,
  how the start was chosen, Laplace covariance or None:
  `laplace_covariance`). `around_mode` None: around the mode for a
  minibatch target with an exact energy, else uniform. `jit_compile`:
  the mode's search compiled by XLA (`hessian_products`)."""
  mode_seed, scale_seed, draw_seed = tfp.random.split_seed(seed, 3)
  parts = tf.nest.flatten(template)
  if around_mode is None:
    around_mode = is_minibatch(target) and target.has_exact_energy
  no_mode = ""
  if around_mode:
    # One set of traced products serves every Newton step and the sds.
    products = laplace.hessian_products(target, template, jit_compile)
    mode, hessian, found, converged = _mode(
        target, template, num_mode_steps, learning_rate, mode_seed, products,
        jit_compile)
    if converged is False:
      # Still descending after Adam and Newton's method: the density may
      # grow without bound (a hierarchical scale going to 0 with its
      # effects), and chains started there never leave it.
      around_mode = False
      no_mode = (f"no mode ({found}, not converged: the density may grow "
                 "without bound, e.g. a hierarchical scale going to 0); ")
  if around_mode:
    scale = laplace_scale(target, mode, scale_seed, hessian=hessian,
                          products=products)
    seeds = tfp.random.split_seed(draw_seed, len(parts))
    states = [m[None] + s[None] * tf.random.stateless_normal(
        [num_chains] + m.shape.as_list(), sd, dtype=m.dtype)
              for m, s, sd in zip(tf.nest.flatten(mode),
                                  tf.nest.flatten(scale), seeds)]
    how = f"around the mode ({found}), dispersed by the Laplace sds"
    return (tf.nest.pack_sequence_as(template, states), mode, scale, how,
            laplace_covariance(hessian, template))
  states, redrawn = uniform_states(target, template, num_chains, draw_seed)
  again = (f"; {redrawn} of {num_chains} chains drawn again where the log "
           "density was not finite" if redrawn else "")
  return (states, None, None, f"{no_mode}uniform(-2, 2) in the "
          f"unconstrained space (as Stan{again})", None)


def check_one_chain(target, template):
  """A refusal where `initial_state` (the `template`) is not one chain's
  state of a target that says its shapes: e.g. a fit's `final_state`, whose
  chain axis the target's checks reported as an unexplained shape error;
  for a target that does not, where one chain's log density is not one
  value."""
  shapes = target.parameter_shapes
  if isinstance(target, JointDistributionTarget):
    return
  if shapes is None:
    _check_one_value_per_chain(target, template)
    return
  want = shapes if isinstance(shapes, list) else [shapes]
  got = [p.shape for p in tf.nest.flatten(template)]
  if len(got) == len(want) and all(
      g.is_compatible_with(w) for g, w in zip(got, want)):
    return
  chains = len(got) == len(want) and all(
      g[1:].is_compatible_with(w) and g[:1] == got[0][:1]
      for g, w in zip(got, want))
  listed = lambda ss: ([s.as_list() for s in ss] if isinstance(shapes, list)
                       else ss[0].as_list())
  raise ValueError(
      f"`initial_state` has shape {listed(got)} where the "
      f"{type(target).__name__}'s `parameter_shapes` are {listed(want)}:"
      " it is one chain's state, without a chain axis." + (
          f" This one leads with {got[0][0]} chains (as a fit's "
          "`final_state` does): to go on from a fit, run its tuned kernel, "
          "tfp.mcmc.sample_chain(n, fit.final_state, kernel=fit.kernel, "
          "seed=...); to start a new call there, give one chain's state "
          "(e.g. fit.final_state[0])." if chains else ""))


def _check_one_value_per_chain(target, template):
  """A refusal where a target that does not say its shapes gives one chain
  of `template`'s shape other than one log density: TFP's kernels read
  extra axes as chains (and a value for all chains as the chains' sum), so
  the run would go on with chains `sample` never made and fail, if at all,
  far from the cause. A pipeline's target is left alone: its evaluation
  would take a batch from the stream."""
  if streamed_target(target) is not None:
    return
  one_chain = tf.nest.map_structure(lambda p: p[tf.newaxis], template)
  value = target.minibatch_energy(one_chain, tf.zeros([2], tf.int32))
  if value.shape.rank is None or value.shape == [1]:
    return
  shapes = tf.nest.map_structure(lambda p: p.shape.as_list(), template)
  raise ValueError(
      f"The target's log density of one chain (a state of shape {shapes} "
      f"given with a chain axis of length 1) has shape "
      f"{value.shape.as_list()}; it must be one value per chain, summed "
      "over every axis of the state after the chain axes (e.g. "
      "tf.reduce_sum(..., axis=[-2, -1]) for a matrix), " + (
          "not over the chain axis too." if value.shape.rank == 0 else
          "or its other axes would be run as extra chains."))


def check_repeated(target):
  """A refusal of a `DatasetTarget` (under any wrappers) whose `dataset`
  ends: `sample` takes a batch per gradient for thousands of steps, and
  such a run stopped when the batches ran out, minutes in where the
  dataset is long."""
  target = streamed_target(target)
  if target is None:
    return
  batches = int(target.dataset.cardinality())
  if batches >= 0:
    raise ValueError(
        f"The {type(target).__name__}'s `dataset` ends after {batches:,} "
        "batches (it is not repeated), and `sample` takes one batch per "
        "gradient for thousands of steps, so the run would stop when the "
        "batches run out: repeat it (dataset.repeat()).")
