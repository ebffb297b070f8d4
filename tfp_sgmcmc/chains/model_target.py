"""The model `tfp_sgmcmc.sample` is given, as a target: a `tfp_sgmcmc`
target as it is, a JointDistribution (with its data arguments) as a
`JointDistributionTarget`, a log density as a `LogProbFnTarget`."""

import tensorflow_probability as tfp

from tfp_sgmcmc.targets.base import MinibatchTarget
from tfp_sgmcmc.targets.joint import JointDistributionTarget
from tfp_sgmcmc.targets.log_prob import LogProbFnTarget

__all__ = ["as_target"]

tfd = tfp.distributions


def as_target(model, target_log_prob_fn, observed, covariates, batch_size):
  """The model as a `tfp_sgmcmc` target. The JointDistribution's data
  arguments are refused with any other model, where they would be ignored
  (a `batch_size` beside an `InMemoryTarget` left its own batch size in
  force, silently)."""
  if target_log_prob_fn is not None:
    if model is not None:
      raise ValueError("give the model once: `target` or "
                       "`target_log_prob_fn`, not both.")
    _refuse_data_arguments("`target_log_prob_fn`", observed, covariates,
                           batch_size)
    return LogProbFnTarget(target_log_prob_fn)
  if isinstance(model, MinibatchTarget):
    if observed is not None or covariates is not None:
      raise ValueError("`observed` and `covariates` go with a "
                       "JointDistribution; `target` is already a "
                       f"{type(model).__name__}.")
    _refuse_data_arguments(f"`target` ({type(model).__name__})", None,
                           None, batch_size)
    return model
  if isinstance(model, tfd.JointDistribution) or (
      callable(model) and observed is not None):
    # One vector per chain, so that the warm-up's dense mass (and the
    # start's Laplace covariance) can couple the coordinates of different
    # nodes: a hierarchical scale and the weights it governs.
    return JointDistributionTarget(model, observed=observed,
                                   covariates=covariates,
                                   batch_size=batch_size, flat_state=True)
  raise TypeError(
      "`target` must be a tfp_sgmcmc target (e.g. InMemoryTarget), a "
      "tfd.JointDistribution (with `observed`, or pinned), or a model "
      "function with `observed`; for a log density pass "
      f"`target_log_prob_fn=`. Got {model!r:.100}.")


def _refuse_data_arguments(given, observed, covariates, batch_size):
  """A refusal of the JointDistribution's data arguments beside `given`,
  which has its data (and minibatch size) or none."""
  named = [f"`{name}` = {value!r:.60}" for name, value in (
      ("observed", observed), ("covariates", covariates),
      ("batch_size", batch_size)) if value is not None]
  if named:
    raise ValueError(
        f"{', '.join(named)}: these go with a JointDistribution model, and "
        f"{given} would ignore them (a target holds its own data and "
        "minibatch size: InMemoryTarget(..., batch_size=n), a "
        "DatasetTarget's dataset.batch(n), TFRecordTarget's "
        "records_per_batch); leave them None.")
