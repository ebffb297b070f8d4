"""Targets built from TFP `JointDistribution` models, on minibatches.

A TFP user writes a model as a `tfd.JointDistribution*` whose observed
node(s) are pinned to data. `JointDistributionTarget` turns such a model into
a minibatch target:

* the observed nodes (given by `observed=`, or pinned by the user with
  `model.experimental_pin(y=...)` as for TFP's own samplers) are pinned to
  a minibatch of the data at each step (for
  a model that is a function of per-example covariates, the covariates of
  the same examples are passed to it);
* the likelihood, and only the likelihood, is scaled by N/n: the energy is
  U~(z) = -(N/n) sum_{i in batch} log p(y_i | theta) - log p(theta)
          - log|det J(z)|, theta = bijector.forward(z);
* the state is unconstrained: the model's default event-space bijector
  (`experimental_default_event_space_bijector`) maps it to the parameters'
  support, with its log-det in the energy, and `constrain` maps draws back;
* the state has the model's own structure (the unpinned nodes as a dict for
  `JointDistributionNamed`, a list for `JointDistributionSequential`, a
  namedtuple for `JointDistributionCoroutine`), or, with `flat_state=True`,
  is one vector per chain: the nodes' unconstrained coordinates in
  `tf.nest.flatten` order, so that a dense mass, which needs one vector,
  can couple coordinates of different nodes (`tfp_sgmcmc.sample` builds its
  JointDistribution targets so).
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import _structure
from tfp_sgmcmc.targets import joint_checks
from tfp_sgmcmc.targets.in_memory import InMemoryTarget

tfd = tfp.distributions
JointDistributionPinned = (
    tfp.experimental.distributions.JointDistributionPinned)

__all__ = ["JointDistributionTarget"]

# The seed of `sample_distributions` calls that draw nothing.
_NO_DRAW_SEED = (0, 0)


def _per_example(dist, value, example_rank):
  """log p(value_i) per example: the example axis taken out of the event.

  `value` has shape [n] + example_shape (rank 1 + example_rank); `dist`'s
  event has rank example_rank (examples already in its batch) or one more,
  under `tfd.Independent` or `tfd.Sample` (the usual TFP way of writing
  i.i.d. observations)."""
  event_rank = tensorshape_rank(dist.event_shape)
  if event_rank == example_rank + 1:
    if isinstance(dist, tfd.Independent):
      ndims = tf.get_static_value(dist.reinterpreted_batch_ndims)
      if ndims is None:
        raise ValueError("the observed node's tfd.Independent needs a static "
                         "`reinterpreted_batch_ndims`.")
      inner_ndims = int(ndims) - 1
      inner = dist.distribution
      dist = (tfd.Independent(inner, inner_ndims) if inner_ndims else inner)
    elif isinstance(dist, tfd.Sample) and tf.TensorShape(
        tf.get_static_value(dist.sample_shape)).rank == 1 and (
            tensorshape_rank(dist.distribution.event_shape) ==
            example_rank):
      # Sample(inner, n): evaluate each example against inner's batch,
      # [n] + batch, then put the examples last.
      inner = dist.distribution
      batch_rank = tensorshape_rank(inner.batch_shape)
      value = tf.cast(value, inner.dtype)
      value = tf.reshape(value, tf.concat(
          [tf.shape(value)[:1], tf.ones([batch_rank], tf.int32),
           tf.shape(value)[1:]], 0))
      lp = inner.log_prob(value)
      return tf.transpose(lp, list(range(1, batch_rank + 1)) + [0])
    else:
      raise ValueError(
          f"the observed node's distribution {type(dist).__name__} has "
          f"event shape {dist.event_shape}; one log-likelihood per example "
          "needs the example axis in its batch shape, or under "
          "tfd.Independent / tfd.Sample (e.g. tfd.Independent(tfd.Bernoulli("
          "logits=...), reinterpreted_batch_ndims=1)).")
  elif event_rank != example_rank:
    raise ValueError(
        f"the observed node's distribution has event shape "
        f"{dist.event_shape} but each example of its data has shape "
        f"{value.shape[1:]}: the event must be one example's shape, or the "
        "examples under tfd.Independent / tfd.Sample.")
  return dist.log_prob(tf.cast(value, dist.dtype))


def _pins_as_observed(model, observed):
  """(the unpinned model, observed) for a pinned `model` (its pins are the
  observed data); (model, observed) otherwise."""
  if not isinstance(model, JointDistributionPinned):
    return model, observed
  pins = dict(model.pins)
  if observed is not None:
    given = (f"nodes {sorted(observed)}" if isinstance(observed, dict) else
             f"a {type(observed).__name__}")
    clash = sorted(set(pins) & set(observed)) if isinstance(
        observed, dict) else []
    raise ValueError(
        f"`model` is already pinned (nodes {sorted(pins)}) and `observed` "
        f"was also given ({given}"
        + (f"; both pin {clash}" if clash else "") + "): the observed data "
        "must be given once. Drop `observed=`, or pass the unpinned model "
        "(`pinned_model.distribution`) with observed={name: data} for every "
        "observed node.")
  return model.distribution, pins


def _uncached(state):
  """`state` as new tensors. TFP's bijectors cache forward/inverse pairs by
  tensor: for a state made by `unconstrain` (e.g. `initial_state`), `forward`
  would return the cached parameters, which a gradient tape watching the
  state does not connect to it (a zero gradient through the bijector)."""
  return tf.nest.map_structure(tf.identity, state)


def tensorshape_rank(shape):
  rank = tf.TensorShape(shape).rank
  if rank is None:
    raise ValueError("the model's event shapes must have a static rank.")
  return rank


class JointDistributionTarget(InMemoryTarget):
  """A minibatch target from a `JointDistribution` with observed nodes.

  Args:
    model: a `tfd.JointDistribution*` (its observed nodes take all N
      examples: for full-batch use, e.g. eight schools), the same pinned to
      its data (`model.experimental_pin(y=y)` or
      `tfp.experimental.distributions.JointDistributionPinned(model, y=y)`:
      the pins are the observed data, and `observed` is not passed), or a
      callable `covariates -> JointDistribution` building the model for the
      covariates of a batch (its observed nodes then have the batch's n
      examples).
    observed: a dict `{node name: data}`, each with the examples on its
      leading axis (N of them); these nodes are pinned. None for a pinned
      `model`.
    covariates: the per-example inputs passed to `model` (a tensor or a
      nested structure, leading axis N), or None.
    batch_size: n, drawn with replacement from the kernel's seed; None (the
      default) for the full batch: every example once, in order, at every
      step (exact energies and gradients).
    energy_chunk_size: as for `InMemoryTarget`.
    flat_state: False (the default): the state in the structure of the
      model's unpinned nodes; True: one vector per chain, [chains..., d]
      (`structured(state)` splits it into the nodes).

  The state is unconstrained, in the structure of the model's unpinned
  nodes (or one vector, `flat_state`); `constrain(state)` gives the
  parameters, `initial_state(...)` a start drawn from the prior. Write the
  model to broadcast over leading chain dimensions of its latent values (as
  for batched chains with TFP's HMC): latent values have shape
  `chains + event_shape`.

  #### Example

  ```python
  def model(x):
    return tfd.JointDistributionNamed(dict(
        scale=tfd.HalfNormal(1.),
        w=lambda scale: tfd.Independent(
            tfd.Normal(tf.zeros(d), scale[..., None]), 1),
        y=lambda w: tfd.Independent(
            tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1)))
  target = tfp_sgmcmc.JointDistributionTarget(
      model, observed={"y": y}, covariates=x, batch_size=64)
  kernel = tfp_sgmcmc.AMAGOLD(target, step_size=0.01, num_leapfrog_steps=10,
                              friction=0.5)
  draws = tf.function(lambda: tfp.mcmc.sample_chain(   # one XLA program
      500, target.initial_state(4, seed=[0, 1]), kernel=kernel,
      trace_fn=None, seed=[1, 2]), jit_compile=True)()
  scale = target.constrain(draws)["scale"]
  ```

  A model without covariates may come pinned, as TFP's samplers take it:

  ```python
  model = tfd.JointDistributionNamed(dict(
      mu=tfd.Normal(0., 5.),
      y=lambda mu: tfd.Sample(tfd.Normal(mu, 1.), 8)))
  target = tfp_sgmcmc.JointDistributionTarget(
      model.experimental_pin(y=np.linspace(-1., 2., 8, dtype=np.float32)))
  ```
  """

  def __init__(self, model, observed=None, covariates=None, batch_size=None,
               energy_chunk_size=None, flat_state=False):
    model, observed = _pins_as_observed(model, observed)
    if isinstance(model, tfd.JointDistribution):
      if covariates is not None:
        raise ValueError(
            "`covariates` are passed to a model *function*; `model` is a "
            "JointDistribution instance. Pass `model=lambda x: ...`.")
      fixed = model
      model_fn = lambda _: fixed
    elif callable(model):
      model_fn = model
    else:
      raise TypeError("`model` must be a tfd.JointDistribution or a callable "
                      f"covariates -> JointDistribution; got {model!r}.")
    if not isinstance(observed, dict) or not observed:
      raise TypeError("`observed` must be a non-empty dict {node name: data "
                      f"with the examples on axis 0}}; got {observed!r}. "
                      "Pass observed={'y': y}, or a pinned model "
                      "(model.experimental_pin(y=y)) without `observed`.")
    observed = {k: tf.convert_to_tensor(v) for k, v in observed.items()}
    if covariates is not None:
      covariates = tf.nest.map_structure(tf.convert_to_tensor, covariates)
    first = lambda t: t[:1]
    probe = model_fn(None if covariates is None else
                     tf.nest.map_structure(first, covariates))
    if isinstance(probe, JointDistributionPinned):
      raise TypeError(
          "`model` returned a pinned JointDistribution; a model function is "
          "called for each minibatch's covariates, so its observed nodes "
          "must be pinned to the same minibatch: return the unpinned model "
          "and pass the data as observed={name: data}.")
    if not isinstance(probe, tfd.JointDistribution):
      raise TypeError(f"`model` returned {type(probe).__name__}; expected a "
                      "tfd.JointDistribution.")
    names = list(probe._flat_resolve_names())  # pylint: disable=protected-access
    unknown = sorted(set(observed) - set(names))
    if unknown:
      raise ValueError(f"`observed` names {unknown} are not nodes of the "
                       f"model (its nodes: {names}).")
    self._latent_names = [n for n in names if n not in observed]
    if not self._latent_names:
      raise ValueError("every node is observed: nothing to sample.")
    try:
      if isinstance(model, tfd.JointDistribution):
        pinned = model.experimental_pin(**observed)
      else:
        pinned = probe.experimental_pin(
            **{k: v[:1] for k, v in observed.items()})
      self._bijector = pinned.experimental_default_event_space_bijector()
      self._event_ranks = tf.nest.map_structure(tensorshape_rank,
                                                pinned.event_shape)
    except (ValueError, TypeError, IndexError,
            tf.errors.InvalidArgumentError) as e:
      # TFP reads the event shapes from the model's nodes called on one
      # draw of their parents: a node that indexes a parent's leading axis
      # (w[0]) fails here, deep in TensorFlow.
      raise ValueError(
          "`model`: reading the event shapes of its JointDistribution (its "
          "nodes called on one draw of their parents, one example of "
          f"`observed`) failed: {type(e).__name__}: {e}. Does a node's "
          "function index or reshape its parents' leading axes (e.g. w[0])? "
          "Each node must broadcast over the leading (sample and chain) "
          "axes of its parents (e.g. tf.linalg.matvec(x, w)).") from e
    except AttributeError as e:
      # TFP's joint bijector holds None for a node with no event-space
      # bijector (a discrete one) and fails on it with an AttributeError.
      joint_checks.refuse_discrete_latents(probe, self._latent_names)
      raise
    joint_checks.refuse_batched_latents(pinned, self._latent_names)
    self._model_fn = model_fn
    self._observed_names = list(observed)
    self._pinned_probe = pinned
    self._example_ranks = {k: v.shape.rank - 1 for k, v in observed.items()}
    self._has_covariates = covariates is not None
    data = ((covariates, observed) if covariates is not None else
            ((), observed))
    self._prior_data = tf.nest.map_structure(first, data)
    full = batch_size is None
    # Each node's unconstrained event shape, so that the checks know the
    # chain axes (a lone scalar node's state has no parameter axis).
    shapes = self._bijector.inverse_event_shape(pinned.event_shape)
    flat = [list(shape) for shape in tf.nest.flatten(shapes)]
    if not isinstance(flat_state, bool):
      raise TypeError(f"`flat_state` must be True or False; got "
                      f"{flat_state!r}.")
    self._node_shapes = (shapes, flat) if flat_state else None
    super().__init__(self._log_likelihood_of, data,
                     batch_size=None if full else batch_size,
                     log_prior_fn=self._log_prior_of,
                     energy_chunk_size=energy_chunk_size, full_batch=full,
                     parameter_shapes=(
                         [sum(int(np.prod(f)) for f in flat)] if flat_state
                         else flat if tf.nest.is_nested(shapes) else flat[0]))
    joint_checks.check_prior_free_of_data(self)
    if not full:
      joint_checks.check_exchangeable(self, batch_size)

  def with_batch_size(self, batch_size):
    variant = super().with_batch_size(batch_size)
    joint_checks.check_exchangeable(self, batch_size)
    return variant

  # --- the model's pieces -------------------------------------------------

  @property
  def bijector(self):
    """The model's default event-space bijector: unconstrained values in
    the nodes' structure -> parameters (a flat state: `structured` first,
    as `constrain` does)."""
    return self._bijector

  @property
  def latent_names(self):
    return list(self._latent_names)

  @property
  def flat_state(self):
    """Whether the state is one vector per chain (`flat_state=True`)."""
    return self._node_shapes is not None

  def structured(self, state):
    """An unconstrained state in the structure of the model's nodes: a flat
    state split along its last axis (in `tf.nest.flatten` order) and
    reshaped; a structured one as it is."""
    if self._node_shapes is None:
      return state
    structure, shapes = self._node_shapes
    batch = tf.shape(state)[:-1]
    parts = tf.split(state, [int(np.prod(s)) for s in shapes], axis=-1)
    return tf.nest.pack_sequence_as(structure, [
        tf.reshape(p, tf.concat([batch, s], 0)) for p, s in zip(
            parts, shapes)])

  def flattened(self, structured):
    """The target's state of an unconstrained state in the structure of the
    model's nodes: one vector per chain with `flat_state`, else as it is."""
    if self._node_shapes is None:
      return structured
    _, shapes = self._node_shapes
    parts = tf.nest.flatten(structured)
    batch = tf.shape(parts[0])[:parts[0].shape.rank - len(shapes[0])]
    return tf.concat([tf.reshape(p, tf.concat([batch, [-1]], 0))
                      for p in parts], -1)

  def constrain(self, state):
    """The parameters (in the model's structure) of unconstrained draws."""
    return self._bijector.forward(self.structured(state))

  def unconstrain(self, parameters):
    return self.flattened(self._bijector.inverse(parameters))

  def _latent_dict(self, parameters):
    if isinstance(parameters, dict):
      return dict(parameters)
    if hasattr(parameters, "_fields"):
      return dict(zip(parameters._fields, parameters))
    if isinstance(parameters, (list, tuple)):
      return dict(zip(self._latent_names, parameters))
    return {self._latent_names[0]: parameters}

  def _distributions(self, state, batch):
    covariates, observed = batch
    parameters = self.constrain(_uncached(state))
    jd = self._model_fn(covariates if self._has_covariates else None)
    values = self._latent_dict(parameters)
    values.update(observed)
    # Every node has a value, so nothing is drawn; a stateless seed keeps TFP
    # from making one with tf.random.uniform (which XLA warns ignores seeds).
    dists, _ = jd.sample_distributions(seed=_NO_DRAW_SEED, **values)
    names = list(jd._flat_resolve_names())  # pylint: disable=protected-access
    return parameters, values, _structure.by_name(dists, names)

  def _log_likelihood_of(self, state, batch):
    _, values, dists = self._distributions(state, batch)
    total = 0.
    for name in self._observed_names:
      total = total + _per_example(dists[name], values[name],
                                   self._example_ranks[name])
    return total

  def _latent_log_probs(self, state, data):
    """{latent node: its log-prior at `state`}, the model built on `data`
    ((covariates, observed), as batches hold them)."""
    _, values, dists = self._distributions(state, data)
    ranks = self._latent_dict(self._event_ranks)
    out = {}
    for name in self._latent_names:
      lp = dists[name].log_prob(values[name])
      # An auto-batched model's node keeps axes of its event in its batch
      # shape (the model's own log_prob sums them): summed here too.
      extra = ranks[name] - tensorshape_rank(dists[name].event_shape)
      out[name] = (tf.reduce_sum(lp, list(range(-extra, 0))) if extra
                   else lp)
    return out

  def _log_prior_of(self, state):
    log_probs = self._latent_log_probs(state, self._prior_data)
    total = 0.
    for name in self._latent_names:
      total = total + log_probs[name]
    log_det = self._bijector.forward_log_det_jacobian(
        _uncached(self.structured(state)), event_ndims=self._event_ranks)
    return total + log_det

  # --- conveniences ---------------------------------------------------------

  def unconstrained_log_prob(self, *parts, **named):
    """The exact full-data log density of the unconstrained state, TFP's
    `target_log_prob_fn` convention (one argument per part), e.g. for
    `tfp.mcmc.NoUTurnSampler` on the same model. A `JointDistributionNamed`
    takes its parts by name, as TFP's pinned model does."""
    structure = self._pinned_probe.event_shape
    if named:
      state = self.flattened(named)
    elif len(parts) == 1 and self.flat_state:
      state = parts[0]
    elif len(parts) == 1 and not tf.nest.is_nested(structure):
      state = parts[0]
    elif isinstance(structure, dict) and len(structure) > 1:
      # A dict has two orders, its keys' (as TFP flattens it) and the
      # model's (`latent_names`, its own iteration): parts listed in one and
      # read in the other were swapped without a word.
      raise ValueError(
          f"`unconstrained_log_prob` got {len(parts)} positional parts for "
          f"a JointDistributionNamed, whose latent nodes {self._latent_names}"
          " have no one order (TFP's pinned model refuses them too): pass "
          "them by name, e.g. `lambda *parts: target.unconstrained_log_prob("
          "**dict(zip(names, parts)))` with `names` the order of your "
          "state's parts.")
    else:
      state = self.flattened(tf.nest.pack_sequence_as(structure,
                                                      list(parts)))
    return -self.energy(state)

  def initial_state(self, num_chains=None, seed=None):
    """An unconstrained start per chain, drawn from the prior (the latent
    nodes sampled from the model, then `unconstrain`ed)."""
    seed = tfp.random.sanitize_seed(seed)
    shape = [] if num_chains is None else [int(num_chains)]
    covariates, observed = self._prior_data
    jd = self._model_fn(covariates if self._has_covariates else None)
    draws = jd.sample(shape, seed=seed)
    # The model's draws hold every node, observed ones too: by the model's
    # own names (the latent names alone would take a list's observed draw
    # for the latent after it).
    names = jd._flat_resolve_names()  # pylint: disable=protected-access
    draws = (self._latent_dict(draws) if isinstance(draws, dict) or hasattr(
        draws, "_fields") else dict(zip(names, tf.nest.flatten(draws))))
    pinned_structure = self._pinned_probe.event_shape
    latents = self._latent_dict(pinned_structure)
    for name in latents:
      latents[name] = draws[name]
    if isinstance(pinned_structure, dict):
      parameters = latents
    elif hasattr(pinned_structure, "_fields"):
      parameters = type(pinned_structure)(
          *[latents[n] for n in pinned_structure._fields])
    elif isinstance(pinned_structure, (list, tuple)):
      parameters = type(pinned_structure)(
          [latents[n] for n in self._latent_names])
    else:
      parameters = latents[self._latent_names[0]]
    del observed
    return self.unconstrain(parameters)

