"""What `SamplingCallback` refuses: models, losses and execution settings
under which a chain would be wrong, with errors naming the fix."""

import math
import numbers
import warnings

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc.keras.samplers import adaptation as adaptation_lib
from tfp_sgmcmc.keras.samplers import base
from tfp_sgmcmc.keras import losses as losses_lib
from tfp_sgmcmc.keras.samplers import options as options_lib

__all__ = ["check_callback_arguments", "check_count", "check_model",
           "check_steps_per_execution", "check_batch_positions",
           "repeated_order"]

def check_count(name, value, minimum, allow_none=False):
  if not (value is None and allow_none):
    arguments.check_integer(name, value, minimum)


def check_model(model):
  """Raises if `model` cannot be sampled; returns its likelihood."""
  if keras.backend.backend() != "tensorflow":
    raise RuntimeError("tfp_sgmcmc.keras runs on the TensorFlow backend; "
                       f"Keras uses {keras.backend.backend()!r}.")
  if not isinstance(model, keras.Model):
    raise TypeError(f"the model must be a Keras 3 model; got "
                    f"{type(model).__module__}.{type(model).__name__} "
                    "(tf_keras models are not supported).")
  if not getattr(model, "compiled", False):
    raise ValueError("compile the model first: its optimizer serves for "
                     "burn-in and its loss defines the likelihood.")
  likelihood = losses_lib.resolve_likelihood(model.loss, model)
  config = getattr(getattr(model, "_compile_config", None), "config", {})
  weights = config.get("loss_weights") if isinstance(config, dict) else None
  if weights is not None:
    raise ValueError(f"`loss_weights={weights!r}` scales the "
                     "log-likelihood; compile without loss_weights.")
  for v in model.trainable_variables:
    if getattr(v, "regularizer", None) is not None:
      raise ValueError(
          f"variable {v.path!r} has a regularizer: it would be counted N "
          "times in the energy N * loss. Remove it and give the prior to "
          "SamplingCallback(prior=...) (GaussianPrior(scale) for L2).")
    if getattr(v, "constraint", None) is not None:
      raise ValueError(
          f"variable {v.path!r} has a constraint: the projection after "
          "each step changes the sampler's dynamics. Remove it.")
    if not tf.as_dtype(v.dtype).is_floating:
      raise TypeError(f"trainable variable {v.path!r} has dtype "
                      f"{v.dtype}; the samplers need floating weights.")
  for layer in model._flatten_layers():  # pylint: disable=protected-access
    if getattr(layer, "activity_regularizer", None) is not None:
      raise ValueError(
          f"layer {layer.name!r} has an activity_regularizer, an extra "
          "term in the loss outside the likelihood. Remove it.")
  if model.losses:
    raise ValueError(
        f"the model adds {len(model.losses)} loss term(s) of its own "
        "(add_loss or regularizers); they would be counted N times in "
        "the energy. Remove them and put prior terms in `prior`.")
  for v in model.trainable_variables:
    if tf.as_dtype(v.dtype) not in (tf.float32, tf.float64):
      policy = getattr(model, "dtype_policy", None)
      raise TypeError(
          f"trainable variable {v.path!r} has dtype {v.dtype} (policy "
          f"{getattr(policy, 'name', None)!r}): the samplers keep their "
          "state, noise and energy in the variables' dtype, which must be "
          "float32 or float64. Use 'mixed_float16' / 'mixed_bfloat16' "
          "(float32 variables, low-precision compute), not 'float16'.")
  if not model.trainable_variables:
    if not model.variables or not model.built:
      raise ValueError(
          f"the model {model.name!r} has no variables yet: a subclassed "
          "model creates them on its first call, which `fit` makes only "
          "after the callbacks start, too late for the sampler. Build it "
          "before `fit`, e.g. `model(x[:1])` on a batch of inputs or "
          "`model.build(input_shape)`.")
    raise ValueError(f"the model {model.name!r} has no trainable "
                     "variables: nothing to sample.")
  return likelihood

def repeated_order(arguments, arrays):
  """Why `fit` gives the batches in the same order every epoch, or None
  (not arrays, or reshuffled): `shuffle` off, or TensorFlow's global seed
  set (`keras.utils.set_random_seed` sets it), which seeds each epoch's
  permutation alike."""
  if not arrays:
    return None  # A pipeline's order is its own: not known here.
  if arguments.get("shuffle") is not True:
    return f"shuffle={arguments.get('shuffle')!r}"
  if tf.compat.v1.get_seed(None)[0] is not None:
    return ("shuffle=True after keras.utils.set_random_seed (or "
            "tf.random.set_seed), which gives every epoch the same "
            "permutation")
  return None


def check_batch_positions(steps, thinning, steps_per_execution, order):
  """Warns when the batch order repeats every epoch (`order` says why) and
  the kept samples, one every `thinning` train steps, fall on fewer than
  4 of the `steps` positions in it (fewer than every reachable one, for
  short epochs or several steps per execution): the chain's state depends
  on its position in the order, and samples kept at one position are
  biased by it. (AMAGOLD's kept samples are its tested states, exact where
  its energy is, whatever the batches.)"""
  if not steps:
    return
  enough = min(steps // steps_per_execution, 4)
  def positions(t):
    return steps // math.gcd(steps, t)
  if positions(thinning) >= enough:
    return
  better = next(t for t in range(thinning, thinning + steps + 1)
                if t % steps_per_execution == 0 and positions(t) >= enough)
  warnings.warn(
      f"every kept sample comes at one of {positions(thinning)} "
      f"position(s) in the epoch's {steps} steps (thinning={thinning}), "
      f"and the batch order repeats every epoch ({order}): the chain's "
      "state depends on its position in that order, so those samples are "
      f"biased by it. Use thinning={better}, or reshuffle each epoch "
      "(shuffle=True without a global seed, or a tf.data pipeline with "
      ".shuffle(n, seed=s, reshuffle_each_iteration=True)); the running "
      "moments (posterior.mean, .variance) cover every step either way.",
      UserWarning, stacklevel=5)


def check_steps_per_execution(model, steps, burnin_steps, thinning,
                              num_leapfrog_steps=None):
  """Raises if `steps_per_execution` would skip the steps where the
  callback acts (AMAGOLD: `num_leapfrog_steps` T, else `thinning`)."""
  spe = model.steps_per_execution
  if isinstance(spe, bool) or not isinstance(spe, (int, np.integer)) or (
      spe < 1):
    raise ValueError(f"steps_per_execution={spe!r}: the sampling callback "
                     "needs a fixed integer >= 1.")
  if spe == 1:
    return
  problems = []
  if burnin_steps and burnin_steps % spe:
    problems.append(f"burnin_steps={burnin_steps}")
  if num_leapfrog_steps is not None:
    if num_leapfrog_steps % spe:
      problems.append(
          f"num_leapfrog_steps={num_leapfrog_steps} (the M-H "
          "test must run after exactly T steps)")
  elif thinning % spe:
    problems.append(f"thinning={thinning}")
  if steps is not None and steps % spe:
    problems.append(f"steps per epoch={steps} (the last execution of an "
                    "epoch would be partial)")
  if steps is None and num_leapfrog_steps is not None:
    # A partial last execution would cut a trajectory short of its test.
    problems.append(
        "the steps per epoch, which Keras does not know here (a pipeline "
        "of unknown length, e.g. after .filter(), or a generator): pass "
        "fit a steps_per_epoch that is a multiple of it, or compile with "
        "steps_per_execution=1")
  if problems:
    raise ValueError(
        f"steps_per_execution={spe} runs {spe} train steps between "
        "callbacks, so the callback would skip the steps where it must "
        "act (swap the optimizer, keep a sample, run AMAGOLD's M-H test);"
        f" make these multiples of {spe}: {', '.join(problems)}.")


def check_callback_arguments(sampler, num_examples, burnin_epochs,
                             burnin_steps, thinning, max_samples, energy_data,
                             energy_batch_size, on_divergence, max_abs_weight,
                             step_size_adaptation):
  """The checks of `SamplingCallback`'s arguments, before anything runs."""
  if isinstance(sampler, keras.optimizers.LossScaleOptimizer):
    raise TypeError(
        "do not wrap the sampler in keras.optimizers.LossScaleOptimizer: "
        "dynamic loss scaling skips the steps whose gradient overflows, a "
        "state-dependent skip that biases the chain. Pass the sampler "
        "itself; under mixed precision give it a static scale "
        "(e.g. SGHMC(..., loss_scale_factor=128.)) if small gradients "
        "underflow in float16.")
  if on_divergence not in ("stop", "raise"):
    raise ValueError("`on_divergence` must be 'stop' or 'raise'; got "
                     f"{on_divergence!r}.")
  if max_abs_weight is not None and (
      isinstance(max_abs_weight, bool) or
      not isinstance(max_abs_weight, numbers.Real) or
      not max_abs_weight > 0 or not math.isfinite(max_abs_weight)):
    raise ValueError("`max_abs_weight` must be None or a positive finite "
                     f"number; got {max_abs_weight!r}.")
  if not isinstance(sampler, base.SamplerOptimizer):
    raise TypeError(
        "`sampler` must be a tfp_sgmcmc.keras sampler (SGLD, SGHMC, SGNHT, "
        f"PreconditionedSGLD, AMAGOLD); got {type(sampler).__name__}. "
        "Keras optimizers do not sample: the compiled optimizer serves "
        "for burn-in.")
  if num_examples is None:
    raise ValueError(
        "`num_examples` (N, the training-set size) is required: the "
        "loss is a mean over a batch, and the posterior's energy is N "
        "times it.")
  check_count("num_examples", num_examples, 1)
  if burnin_epochs is not None and burnin_steps is not None:
    raise ValueError(f"give `burnin_epochs` ({burnin_epochs!r}) or "
                     f"`burnin_steps` ({burnin_steps!r}), not both.")
  check_count("burnin_epochs", burnin_epochs, 0, allow_none=True)
  check_count("burnin_steps", burnin_steps, 0, allow_none=True)
  check_count("thinning", thinning, 1)
  check_count("max_samples", max_samples, 1)
  check_count("energy_batch_size", energy_batch_size, 1)
  options_lib.check_sampler_options(sampler)
  amagold = sampler.has_acceptance_test
  if amagold and energy_data is None:
    raise ValueError(
        "AMAGOLD needs `energy_data`, the training set as (x, y) arrays or "
        "a finite tf.data.Dataset of (x, y) batches, for its "
        "Metropolis-Hastings test.")
  if energy_data is not None and not isinstance(
      energy_data, (tuple, list, tf.data.Dataset)):
    raise TypeError("`energy_data` must be (x, y) arrays or a "
                    f"tf.data.Dataset; got {type(energy_data).__name__}.")
  if (amagold and isinstance(energy_data, tf.data.Dataset) and
      sampler.acceptance_energy == "exact" and
      int(energy_data.cardinality()) == tf.data.INFINITE_CARDINALITY):
    raise ValueError(
        "`energy_data` is an infinite tf.data.Dataset (e.g. made with "
        ".repeat()): AMAGOLD's exact M-H test sums the energy over one "
        "pass of it, which would never end. Give the training set once: "
        "the dataset without .repeat() (batched), or (x, y) arrays.")
  if step_size_adaptation is not None and not amagold:
    raise ValueError(
        "`step_size_adaptation` targets an acceptance rate, which only "
        f"AMAGOLD has (an M-H test); got the sampler "
        f"{type(sampler).__name__}.")
  # `warmup=n` arrives as the package's own window adaptation.
  if step_size_adaptation is not None and not callable(
      step_size_adaptation) and not isinstance(
          step_size_adaptation, adaptation_lib.WarmupAdaptation):
    raise TypeError(
        "`step_size_adaptation` must be a function of the inner kernel, "
        "e.g. lambda inner: tfp.mcmc.SimpleStepSizeAdaptation(inner, "
        "num_adaptation_steps=500, target_accept_prob=0.85); got "
        f"{step_size_adaptation!r}.")
