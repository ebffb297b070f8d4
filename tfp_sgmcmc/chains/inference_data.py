"""Draws and sampler statistics as an ArviZ `InferenceData`.

`to_inference_data(draws, results)` hands a run of `tfp.mcmc.sample_chain`
to ArviZ (`az.summary`, `az.plot_trace`, `az.rhat`, `az.ess`, rank plots):

* the `posterior` group holds one variable per part of the state, named by
  its dict key or namedtuple field (a `JointDistributionNamed` or
  `JointDistributionCoroutine` state), by `var_names` (e.g. a
  `JointDistributionTarget`, whose `latent_names` name a
  `JointDistributionSequential`'s list), or `x` / `x_0, x_1, ...`;
* TFP's layout, [draws, chains, ...], becomes ArviZ's, [chain, draw, ...];
* the `sample_stats` group takes the fields that the kernels' results (or a
  trace of them, `trace_fn=lambda _, r: r`) have, found as TFP finds fields,
  by walking `inner_results` and `accepted_results` (so through TFP's
  step-size adaptation and `TransformedTransitionKernel` too), under
  ArviZ's names:

  | ArviZ            | from the results                                    |
  |------------------|-----------------------------------------------------|
  | `diverging`      | `diverged` (or TFP NUTS's `has_divergence`), or a   |
  |                  | non-finite `log_accept_ratio` (a rejected divergent |
  |                  | transition)                                         |
  | `acceptance_rate`| min(1, exp(`log_accept_ratio`)), the outermost test |
  | `step_size`      | the innermost `step_size` (the one each step used)  |
  | `lp`             | the outermost `target_log_prob`                     |
  | `tree_depth`     | `tree_depth` (SG-NUTS)                              |
  | `n_steps`        | `num_gradient_evaluations` (SG-NUTS) or TFP NUTS's  |
  |                  | `leapfrogs_taken`                                   |

  `lp` is what the kernel reports as `target_log_prob`: the exact log
  density for an exact AMAGOLD test or a full-batch target, otherwise the
  minibatch estimate -U~. ArviZ's `energy` is a Hamiltonian (for the
  energy plot and BFMI); no kernel here reports one (the results' `energy`
  is the potential U or U~), so none is given rather than a quantity that
  would make `az.bfmi` meaningless.

With `kernel=`, the `InferenceData`'s `attrs` record how the chains drew
their minibatches, `attrs["minibatches"]`: "shared by all chains" (every
chain evaluated its gradient on the same minibatch at each step: the chains
are not independent, and R-hat and cross-chain ESS are optimistic), or
"independent per chain" (`InMemoryTarget(independent_minibatches=True)`;
`tfp_sgmcmc.sample` builds its chains so by default), or "full batch"
(exact gradients). See `tfp_sgmcmc.diagnostics.minibatch_sharing`.

ArviZ is an optional dependency: `pip install -e ".[arviz]"`.
"""

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import arguments
from tfp_sgmcmc.chains import diagnostics

__all__ = ["to_inference_data", "sample_stats_from_results"]

# The results' fields that name a nested kernel's results (TFP's
# `unnest` walks the same two).
_NESTED = ("inner_results", "accepted_results")


def _import_arviz():
  try:
    import arviz  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
        "to_inference_data needs ArviZ, an optional dependency of "
        "tfp_sgmcmc: install it with pip install -e \".[arviz]\" from a "
        "checkout (or pip install arviz).") from e
  return arviz


def _levels(results):
  """The results and the results nested in them, outermost first."""
  levels = []
  while results is not None:
    levels.append(results)
    nested = None
    for name in _NESTED:
      nested = getattr(results, name, None)
      if nested is not None:
        break
    results = nested
  return levels


def _find(levels, field, innermost=False):
  for level in (reversed(levels) if innermost else levels):
    value = getattr(level, field, None)
    if value is not None and not isinstance(value, (list, tuple)):
      return value
  return None


def sample_stats_from_results(results):
  """{ArviZ name: array in TFP's layout} of the fields `results` have.

  Args:
    results: kernel results traced by `tfp.mcmc.sample_chain` (e.g.
      `trace_fn=lambda _, r: r`), of any kernel of this package, TFP's, or
      TFP's wrappers around them.

  Returns:
    A dict with the names of the module's table that the results have:
    `diverging`, `acceptance_rate`, `step_size`, `lp`, `tree_depth`,
    `n_steps`. A step size given per state part (a list) is left out.
  """
  levels = _levels(results)
  stats = {}
  diverged = _find(levels, "diverged")
  if diverged is None:
    diverged = _find(levels, "has_divergence")
  if diverged is not None:
    stats["diverging"] = np.asarray(diverged, bool)
  log_accept_ratio = _find(levels, "log_accept_ratio")
  if log_accept_ratio is not None:
    log_accept_ratio = np.asarray(log_accept_ratio, np.float64)
    stats["acceptance_rate"] = np.exp(np.minimum(log_accept_ratio, 0.))
    stats["diverging"] = stats.get("diverging", False) | (
        diagnostics.divergent_transitions(log_accept_ratio))
  for name, field, innermost in (("step_size", "step_size", True),
                                 ("lp", "target_log_prob", False),
                                 ("tree_depth", "tree_depth", True),
                                 ("n_steps", "num_gradient_evaluations",
                                  True),
                                 ("n_steps", "leapfrogs_taken", True)):
    value = _find(levels, field, innermost)
    if value is not None and name not in stats:
      stats[name] = np.asarray(value)
  return stats


def _leaves(samples, var_names):
  """[(name, array)] of the state's parts."""
  if var_names is not None and not isinstance(var_names, (list, tuple)):
    names = getattr(var_names, "latent_names", None)
    if names is None and hasattr(var_names, "_flat_resolve_names"):
      names = var_names._flat_resolve_names()  # pylint: disable=protected-access
    if names is None:
      raise TypeError(
          "`var_names` must be a list of names, one per part of the state, "
          "or a JointDistributionTarget / tfd.JointDistribution whose node "
          f"names name them; got {type(var_names).__name__}.")
    var_names = list(names)
  parts = tf.nest.flatten(samples)
  if var_names is not None:
    if len(var_names) != len(parts) or not all(
        isinstance(n, str) for n in var_names):
      raise ValueError(
          f"`var_names` = {list(var_names)!r} must be {len(parts)} strings, "
          f"one per part of the state (which has {len(parts)}).")
    names = list(var_names)
    keys = ([str(k) for k in sorted(samples)]
            if isinstance(samples, dict) else None)
    if keys is not None and names != keys:
      # A dict's keys name its parts, which flatten in key order; a
      # JointDistribution's node order is another.
      if sorted(names) != keys:
        raise ValueError(
            f"`var_names` = {names!r} are not the keys of `samples`, a "
            f"dict whose keys {keys!r} name its parts: pass var_names=None "
            "(the keys name them) or the same names.")
      names = keys
  elif isinstance(samples, dict):
    names = [str(k) for k in sorted(samples)] if len(samples) == len(
        parts) else None
  elif hasattr(samples, "_fields") and len(samples._fields) == len(parts):
    names = list(samples._fields)
  elif len(parts) == 1 and not tf.nest.is_nested(samples):
    names = ["x"]
  else:
    names = None
  if names is None:
    # Nested deeper, or a list: each part named by its place.
    names = _paths(samples) if tf.nest.is_nested(samples) else ["x"]
  if len(set(names)) != len(names):
    raise ValueError(f"the state's parts have repeated names {names}: pass "
                     "`var_names`, one distinct name per part.")
  return list(zip(names, [np.asarray(p) for p in parts]))


def _paths(structure, prefix="x"):
  if isinstance(structure, dict):
    keys = sorted(structure)
    items = [(str(k), structure[k]) for k in keys]
  elif hasattr(structure, "_fields"):
    items = list(zip(structure._fields, structure))
  elif isinstance(structure, (list, tuple)):
    items = [(str(i), v) for i, v in enumerate(structure)]
  else:
    return [prefix]
  names = []
  for key, value in items:
    names.extend(_paths(value, f"{prefix}_{key}"))
  return names


def _check_chain_axis(chain_axis):
  if chain_axis is None:
    return None
  return arguments.check_integer(
      "chain_axis", chain_axis, hint=" It is the axis of the chains in TFP's "
      "layout [draws, chains, ...] (default 1), or None for a single chain.")


def _to_arviz_layout(name, array, chain_axis, what):
  """[draws, ..., chains at chain_axis, ...] -> [chain, draw, ...]."""
  if chain_axis is None:
    if array.ndim < 1:
      raise ValueError(f"{what} `{name}` is a scalar; it needs a leading "
                       "axis of draws.")
    return array[None]
  if array.ndim <= chain_axis:
    raise ValueError(
        f"{what} `{name}` has shape {list(array.shape)}, with no chain axis "
        f"{chain_axis} (TFP's layout is [draws, chains, ...]): pass "
        "chain_axis=None for a single chain without a chain axis, or the "
        "axis that holds the chains.")
  return np.moveaxis(array, chain_axis, 0)


def _stat_layout(name, array, num_draws, num_chains, chain_axis):
  """A statistic in ArviZ's layout [chain, draw, ...]: one value per draw
  is broadcast to every chain, trailing axes of size 1 (a per-chain step
  size of shape [chains, 1]) are dropped."""
  if array.ndim == 0 or array.shape[0] != num_draws:
    raise ValueError(
        f"`results` field for `{name}` has shape {list(array.shape)}, not "
        f"{num_draws} draws first: pass the trace of the same run as the "
        "draws (sample_chain(..., trace_fn=lambda _, r: r)).")
  while array.ndim > 1 + (chain_axis is not None) and array.shape[-1] == 1:
    array = array[..., 0]
  if chain_axis is None:
    return array[None]
  if array.ndim == 1:
    return np.broadcast_to(array[None], (num_chains, num_draws))
  return np.moveaxis(array, chain_axis, 0)


def to_inference_data(samples, results=None, *, chain_axis=1,
                      var_names=None, dims=None, coords=None, kernel=None):
  """An ArviZ `InferenceData` of draws (and sampler statistics).

  Args:
    samples: the draws of `tfp.mcmc.sample_chain` (tensors or arrays), a
      single tensor or a structure (dict, list, tuple, namedtuple), each
      part [draws, chains, ...] (TFP's layout). One chain axis: chains
      batched as [2, 3] would be 2 chains and a parameter axis of 3, so
      reshape each part (and `results`) to [draws, 6, ...] first.
    results: None, the traced kernel results of the same run (e.g.
      `trace_fn=lambda _, r: r`), from which `sample_stats` is read (see
      the module docstring), or a dict {ArviZ name: array in TFP's layout}
      taken as it is.
    chain_axis: the axis of the chains in `samples` (1 in TFP's layout), or
      None for a single chain with no chain axis ([draws, ...]). Traced
      kernel `results` whose per-chain flags (`diverged`, `is_accepted`)
      hold one value per draw say that the run is such a chain: then
      None.
    var_names: names of the state's parts, in `tf.nest.flatten` order (a
      dict's keys sorted), or a `JointDistributionTarget` (its
      `latent_names`) or `tfd.JointDistribution`; by default dict keys,
      namedtuple fields, or `x` / `x_0, x_1, ...`.
    dims: {variable: [dimension names]} for the axes after chain and draw,
      as ArviZ takes them.
    coords: {dimension name: values}.
    kernel: None, or the kernel that made the run (a kernel of this package
      or TFP's wrappers around one): its target tells whether the chains
      shared their minibatches, recorded in the `attrs` of the
      `InferenceData` and of its `posterior` as `minibatches` ("shared by
      all chains", "independent per chain" or "full batch"; left out when
      the target does not tell).

  Returns:
    `arviz.InferenceData` (with ArviZ 1, its `DataTree`) with a `posterior`
    group ([chain, draw, ...] per variable) and, with `results`, a
    `sample_stats` group.

  #### Example

  ```python
  import arviz as az
  draws, trace = tf.function(lambda: tfp.mcmc.sample_chain(
      500, tf.zeros([4, d]), kernel=tfp_sgmcmc.SGHMC(target, 1e-3, friction=1.),
      trace_fn=lambda _, r: r, seed=[0, 1]), jit_compile=True)()
  idata = tfp_sgmcmc.to_inference_data(draws, trace)  # 4 chains x 500 draws
  print(az.summary(idata))   # mean, sd, HDI, ESS, R-hat per parameter
  ```
  """
  az = _import_arviz()
  chain_axis = _check_chain_axis(chain_axis)
  if (chain_axis is not None and hasattr(results, "_fields") and
      np.ndim(diagnostics.per_chain_field(results)) == 1):
    # The kernel's per-chain flags hold one value per draw: one chain
    # without a chain axis, as `summarize` reads it. A vector state's
    # coordinates are not chains.
    chain_axis = None
  posterior = {}
  shape = None
  for name, array in _leaves(samples, var_names):
    array = _to_arviz_layout(name, array, chain_axis, "`samples` part")
    if shape is None:
      shape = array.shape[:2]
    elif array.shape[:2] != shape:
      raise ValueError(
          f"`samples` part `{name}` has {array.shape[1]} draws x "
          f"{array.shape[0]} chains, other parts {shape[1]} x {shape[0]}: "
          "the parts must come from one run.")
    posterior[name] = array
  num_chains, num_draws = shape
  stats = None
  if results is not None:
    if isinstance(results, dict):
      raw = dict(results)
    elif hasattr(results, "_fields"):
      raw = sample_stats_from_results(results)
      if not raw:
        raise ValueError(
            f"`results` ({type(results).__name__}) have none of the fields "
            "read into sample_stats (diverged, log_accept_ratio, step_size, "
            "target_log_prob, tree_depth, num_gradient_evaluations, also in "
            "inner_results / accepted_results): pass results=None, or a "
            "dict {ArviZ name: array}.")
    else:
      raise TypeError(
          "`results` must be the traced kernel results of the run "
          "(sample_chain(..., trace_fn=lambda _, r: r)) or a dict {ArviZ "
          f"name: array}}; got a {type(results).__name__}. A trace_fn that "
          "returns a few fields can return them as such a dict, e.g. "
          "lambda _, r: {'acceptance_rate': tf.exp(tf.minimum("
          "r.log_accept_ratio, 0.))}.")
    stats = {name: _stat_layout(name, np.asarray(value), num_draws,
                                num_chains, chain_axis)
             for name, value in raw.items()}
    for name, value in stats.items():
      if value.shape[:2] != shape:
        raise ValueError(
            f"`results` give `{name}` for {value.shape[0]} chains, the draws "
            f"have {num_chains}: pass the trace of the same run.")
  sharing = diagnostics.minibatch_sharing(kernel)
  if int(az.__version__.split(".")[0]) >= 1:
    # ArviZ 1 takes {group: {variable: array}} and returns a DataTree.
    groups = {"posterior": posterior}
    if stats:
      groups["sample_stats"] = stats
    idata = az.from_dict(groups, dims=dims, coords=coords)
  else:
    idata = az.from_dict(posterior=posterior, sample_stats=stats or None,
                         dims=dims, coords=coords)
  if sharing is not None:
    # On the whole and on the posterior group: ArviZ writes each group's
    # attrs to netCDF, and the posterior is where R-hat is computed.
    idata.attrs["minibatches"] = sharing
    idata.posterior.attrs["minibatches"] = sharing
  return idata
