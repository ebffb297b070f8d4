"""What a Keras sampler refuses: optimizer options that would bias the
chain, and a step size it cannot take."""

import math
import numbers

import keras

from tfp_sgmcmc import arguments

__all__ = ["BIASING_OPTIONS", "reject_options", "check_loss_scale",
           "check_sampler_options", "check_step_size"]


# Optimizer options that change the update away from the sampler's: they
# would bias the chain (or skip updates), so a sampler refuses them.
BIASING_OPTIONS = {
    "clipnorm": "clipping rescales grad U, so the chain no longer targets "
                "the posterior",
    "clipvalue": "clipping changes grad U, so the chain no longer targets "
                 "the posterior",
    "global_clipnorm": "clipping rescales grad U, so the chain no longer "
                       "targets the posterior",
    "weight_decay": "decoupled weight decay is an extra drift outside the "
                    "posterior; express it as a prior (prior=GaussianPrior("
                    "scale)) instead",
    "use_ema": "an exponential moving average of the weights is not a "
               "posterior sample (SamplingCallback keeps running moments)",
    "ema_momentum": "EMA is not supported on samplers",
    "ema_overwrite_frequency": "EMA is not supported on samplers",
    "gradient_accumulation_steps": "accumulation skips the sampler's update "
                                   "(and its noise) on all but one step in "
                                   "k",
    "loss_scale_factor": "a static loss scale must be a positive, finite "
                         "number",
    "learning_rate": "samplers take `step_size` (or the SGD units of "
                     "`from_sgd_momentum` / `from_sgd_parameters`)",
}
_DEFAULTS = {"use_ema": False, "ema_momentum": 0.99}


def reject_options(cls_name, kwargs):
  for key, value in kwargs.items():
    if key not in BIASING_OPTIONS:
      raise TypeError(f"{cls_name}() got an unexpected argument {key!r}.")
    if value is None or (key in _DEFAULTS and value == _DEFAULTS[key]):
      continue
    raise ValueError(f"`{key}={value!r}` is not allowed on the sampler "
                     f"{cls_name}: {BIASING_OPTIONS[key]}.")


def check_loss_scale(owner, value):
  if value is None:
    return None
  if (isinstance(value, bool) or not isinstance(value, numbers.Real) or
      not math.isfinite(value) or value <= 0):
    raise ValueError(f"`loss_scale_factor={value!r}` on the sampler {owner}: "
                     f"{BIASING_OPTIONS['loss_scale_factor']} (a dynamic "
                     "scale, keras.optimizers.LossScaleOptimizer, is not "
                     "supported).")
  return float(value)


def check_sampler_options(optimizer):
  """Raises if options that bias a sampler were set after construction."""
  for key in ("clipnorm", "clipvalue", "global_clipnorm", "weight_decay",
              "gradient_accumulation_steps"):
    value = getattr(optimizer, key, None)
    if value is not None:
      raise ValueError(f"`{key}={value!r}` is set on the sampler "
                       f"{type(optimizer).__name__}: {BIASING_OPTIONS[key]}.")
  check_loss_scale(type(optimizer).__name__,
                    getattr(optimizer, "loss_scale_factor", None))
  if getattr(optimizer, "use_ema", False):
    raise ValueError(f"`use_ema=True` is set on the sampler "
                     f"{type(optimizer).__name__}: "
                     f"{BIASING_OPTIONS['use_ema']}.")


def check_step_size(step_size, allow_schedule):
  if isinstance(step_size, keras.optimizers.schedules.LearningRateSchedule):
    if not allow_schedule:
      raise TypeError("`step_size` must be a constant number for this "
                      "sampler (its integrator keeps a half-drifted position "
                      "between steps); got a schedule.")
    return step_size
  arguments.check_number("step_size", step_size)
  return float(step_size)
