"""Refusals of JointDistribution models that a `JointDistributionTarget`
would get wrong without a word: tried once, when the target is built, at
a fixed unconstrained state (no random draw: the user's random streams are
untouched).

* `check_prior_free_of_data`: the target evaluates the latent nodes' prior
  on the model built for the first example alone (a pass over the data per
  prior would cost a full-data pass per minibatch step), so a latent node
  whose law depends on an observed node or the covariates (a node after the
  observed one, `z ~ Normal(mean(y), 1)`) got a wrong prior.
* `refuse_discrete_latents`: a latent node without a default event-space
  bijector (Bernoulli, Poisson, Categorical) cannot be moved by gradients.
* `refuse_batched_latents`: a latent node with a batch shape (a vector
  prior written `tfd.Normal(tf.zeros(d), 1.)`, without `tfd.Independent`)
  makes the model a batch of models (one log density per coordinate),
  which failed with advice about a `log_likelihood_fn` the user never
  wrote.
* `check_exchangeable`: minibatches draw examples at random and hand them
  over in draw order, so an example's log-likelihood must not depend on its
  place in the data (eight schools' per-school theta and sigma).
"""

import re

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import _structure

# pylint: disable=protected-access

__all__ = ["check_prior_free_of_data", "check_exchangeable",
           "refuse_discrete_latents", "refuse_batched_latents"]

_ERRORS = (ValueError, TypeError, IndexError, tf.errors.InvalidArgumentError)


def _probe_state(target):
  """One unconstrained state (no chain axis) whose coordinates differ, so
  that per-place latents differ from place to place."""
  probe = target._pinned_probe
  dtypes = target.bijector.inverse_dtype(probe.dtype)
  shapes = target.bijector.inverse_event_shape(probe.event_shape)
  parts = [tf.reshape(tf.sin(0.7 * tf.range(
      tf.TensorShape(s).num_elements(), dtype=d) + 1.3 * i), s)
           for i, (s, d) in enumerate(zip(tf.nest.flatten(shapes),
                                          tf.nest.flatten(dtypes)))]
  return target.flattened(tf.nest.pack_sequence_as(shapes, parts))


def _same(a, b):
  a, b = np.asarray(a), np.asarray(b)
  return a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-4,
                                            equal_nan=True)


def _shifted(x):
  """Other data of the same shape and dtype: x + 1, or not x."""
  return tf.logical_not(x) if x.dtype == tf.bool else x + 1


def _message(error):
  # TF's op prefix ({{function_node ...}}) says nothing to a user.
  return re.sub(r"\{\{.*?\}\}\s*", "", str(error))[:200]


def check_prior_free_of_data(target):
  """Refuses latent nodes whose prior changes with the data they are built
  on (the first example's, and the same shifted by one)."""
  if not tf.executing_eagerly():
    return  # Built in a graph: no values to compare.
  state = _probe_state(target)
  data = target._prior_data
  try:
    first = target._latent_log_probs(state, data)
    other = target._latent_log_probs(
        state, tf.nest.map_structure(_shifted, data))
  except _ERRORS:
    return  # Shifted data outside a node's support: nothing to compare.
  moved = [name for name in target.latent_names
           if not _same(first[name], other[name])]
  if moved:
    source = ("`observed` or `covariates`" if target._has_covariates else
              f"the observed nodes {target._observed_names}")
    values = lambda lp: [round(float(np.sum(lp[n])), 4) for n in moved]
    raise ValueError(
        f"the latent nodes {moved} have a prior that depends on {source} "
        f"(their log-density at one state was {values(first)} built on the "
        f"first example and {values(other)} on it plus one): a latent "
        "node's law may depend on other latent nodes only, as the target "
        "evaluates the prior once, not per example. Make it "
        "a function of the latent nodes (a quantity derived from the data "
        "can be computed from the draws afterwards, or passed in as a "
        "constant).")


def check_exchangeable(target, batch_size):
  """Refuses minibatches where an example's log-likelihood depends on its
  place among the N examples: tried on examples [0, 1] and [1, 0]. A
  minibatch's draws would be paired with per-place latents or constants;
  at batch_size = N the shapes agreed and the energy came out biased."""
  if target.num_examples < 2 or not tf.executing_eagerly():
    return  # One place only; or built in a graph, with no values to see.
  state = _probe_state(target)
  batch = lambda order: tf.nest.map_structure(
      lambda d: tf.gather(d, order), target.data)
  try:
    forward = target._log_likelihood_of(state, batch([0, 1]))
    backward = target._log_likelihood_of(state, batch([1, 0]))
    problem = None if _same(forward, tf.reverse(backward, [-1])) else (
        f"examples [0, 1] gave {np.asarray(forward).tolist()} but [1, 0] "
        f"gave {np.asarray(backward).tolist()}")
  except _ERRORS as e:
    problem = (f"a minibatch of 2 examples failed ({type(e).__name__}: "
               f"{_message(e)})")
  if problem is not None:
    raise ValueError(
        f"`batch_size` = {batch_size}: minibatches draw examples of "
        f"`observed` ({target._observed_names}) at random, so an example's "
        "log-likelihood must depend on its data (and covariates), not on "
        f"its place among the N = {target.num_examples}; here {problem}. "
        "Does the observed node take a latent or a constant with one entry "
        "per example (eight schools' theta or sigma)? Use batch_size=None "
        "(the full batch), or pass per-example constants as `covariates` "
        "to a model function.")


def refuse_discrete_latents(model, latent_names):
  """A refusal naming the latent nodes of `model` (a JointDistribution)
  that have no default event-space bijector: discrete ones, which a
  gradient-based sampler cannot move."""
  dists, _ = model.sample_distributions(seed=(0, 0))
  by_name = _structure.by_name(dists, model._flat_resolve_names())
  discrete = [f"{name} ({type(by_name[name]).__name__})"
              for name in latent_names
              if by_name[name].experimental_default_event_space_bijector()
              is None]
  if discrete:
    raise ValueError(
        f"the latent nodes {discrete} are discrete (no default event-space "
        "bijector): a gradient-based sampler moves continuous latents only. "
        "Sum them out of the model (e.g. a mixture as "
        "tfd.MixtureSameFamily), or observe them (`observed=`).")


def refuse_batched_latents(pinned, latent_names):
  """A refusal naming the latent nodes of `pinned` (the model pinned to its
  data) with a non-scalar batch shape, and the fix."""
  try:
    batch = pinned.batch_shape
  except _ERRORS:
    return  # Not static: the target's own shape checks see the state.
  if not tf.nest.is_nested(batch):
    return  # An auto-batched model: one batch shape, [] by construction.
  by_name = _structure.by_name(batch, latent_names)
  batched = {name: by_name[name].as_list() for name in latent_names
             if tf.TensorShape(by_name[name]).rank != 0}
  if batched:
    raise ValueError(
        f"the latent nodes {sorted(batched)} have batch shapes {batched}: "
        "the model is then a batch of models (one log density per "
        "coordinate), not one posterior. Give each latent node its "
        "coordinates as its event: tfd.Independent(dist, "
        "reinterpreted_batch_ndims=1) or tfd.Sample(dist, d) (e.g. w = "
        "tfd.Independent(tfd.Normal(tf.zeros(3), 1.), 1)), or use a "
        "JointDistribution*AutoBatched model.")
