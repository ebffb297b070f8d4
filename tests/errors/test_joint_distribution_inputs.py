"""JointDistributionTarget refuses ambiguous data: a pinned model with
`observed=` as well, a model function returning a pinned model, and neither
pins nor `observed`; each error names the fix."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd = tfp.distributions
Y = np.array([0.5, -0.2, 1.1], np.float32)


def model():
  return tfd.JointDistributionNamed(dict(
      mu=tfd.Normal(0., 1.),
      y=lambda mu: tfd.Normal(mu[..., None] * tf.ones(3), 1.)))


@pytest.mark.parametrize("observed,clash", [({"y": Y}, r"both pin \['y'\]"),
                                            ({"mu": Y[:1]}, r"nodes \['mu'\]"),
                                            ({}, r"nodes \[\]")])
def test_a_pinned_model_with_observed_is_refused(observed, clash):
  with pytest.raises(ValueError, match=r"already pinned \(nodes \['y'\]\)"
                     r"[^$]*" + clash + r"[^$]*Drop `observed=`"):
    sg.JointDistributionTarget(model().experimental_pin(y=Y),
                               observed=observed)


def test_a_model_function_returning_a_pinned_model_is_refused():
  with pytest.raises(TypeError, match="returned a pinned JointDistribution"
                     ".*observed=\\{name: data\\}"):
    sg.JointDistributionTarget(lambda x: model().experimental_pin(y=Y),
                               covariates=np.zeros([3, 1], np.float32),
                               observed={"y": Y})


def test_no_data_at_all_names_both_ways_to_give_it():
  with pytest.raises(TypeError, match=r"got None.*experimental_pin"):
    sg.JointDistributionTarget(model())


SIGMA8 = np.array([15., 10., 16., 11., 9., 11., 10., 18.], np.float32)
Y8 = np.array([28., 8., -3., 7., -1., 1., 18., 12.], np.float32)


def eight_schools():
  return tfd.JointDistributionNamed(dict(
      mu=tfd.Normal(0., 5.), tau=tfd.HalfNormal(5.),
      theta=lambda mu, tau: tfd.Independent(tfd.Normal(
          mu[..., None] * tf.ones(8), tau[..., None]), 1),
      y=lambda theta: tfd.Independent(tfd.Normal(theta, SIGMA8), 1)))


# A model whose observed node takes one latent (theta) and one constant
# (sigma) per example cannot be minibatched: a minibatch's draws would be
# paired with theta and sigma by place. At batch_size = N the shapes agree
# and the minibatch energy came out biased (66.5 for 63.8, 20 standard
# errors, at a prior draw); elsewhere a shape error blamed a
# `log_likelihood_fn` the user never wrote.
@pytest.mark.parametrize("batch_size", [8, 3])
def test_minibatches_of_a_model_with_per_example_latents_are_refused(
    batch_size):
  with pytest.raises(ValueError, match=(
      rf"`batch_size` = {batch_size}: .*\['y'\].*not on its place among "
      r"the N = 8.*batch_size=None")):
    sg.JointDistributionTarget(eight_schools(), observed={"y": Y8},
                               batch_size=batch_size)
  full = sg.JointDistributionTarget(eight_schools(), observed={"y": Y8})
  with pytest.raises(ValueError, match=r"`batch_size` = 8: "):
    full.with_batch_size(8)


@pytest.mark.parametrize("names", [("sigma", "y", "mu"), ("mu", "sigma", "y")])
def test_positional_parts_of_a_named_model_are_refused(names):
  # A dict state has two orders, its keys' (tf.nest.flatten) and the
  # model's (latent_names, list(state.values())): positional parts were
  # read in the keys' order, so [sigma, mu] listed as the model has them
  # were swapped without a word. TFP's pinned model refuses them too.
  y = np.linspace(-1., 3., 20).astype(np.float32)
  nodes = dict(sigma=tfd.HalfNormal(1.), mu=tfd.Normal(0., 2.),
               y=lambda mu, sigma: tfd.Sample(tfd.Normal(mu, sigma), 20))
  jd = tfd.JointDistributionNamed({n: nodes[n] for n in names})
  target = sg.JointDistributionTarget(jd, {"y": y})
  parts = [tf.constant([-0.5, 0.3]), tf.constant([1.5, -1.])]
  with pytest.raises(ValueError, match=r"got 2 positional parts for a "
                     r"JointDistributionNamed.*by name"):
    target.unconstrained_log_prob(*parts)
  # By name, it is the pinned model's density in the unconstrained space.
  pinned = jd.experimental_pin(y=y)
  state = dict(zip(target.latent_names, parts))
  bij = pinned.experimental_default_event_space_bijector()
  want = (pinned.unnormalized_log_prob(bij.forward(state)) +
          bij.forward_log_det_jacobian(state, event_ndims=dict(mu=0,
                                                               sigma=0)))
  np.testing.assert_allclose(target.unconstrained_log_prob(**state), want,
                             rtol=1e-5)


@pytest.mark.parametrize("kind", ["sequential", "named", "covariates"])
def test_a_latent_node_whose_prior_depends_on_the_data_is_refused(kind):
  # The prior is evaluated on the model built for the first example: a
  # latent z ~ Normal(mean(y), 1) after the observed y got mean(y[:1]), and
  # the energy was off by 4.7 at a prior draw, with no error.
  y = np.linspace(-1., 3., 20).astype(np.float32)
  z = lambda y: tfd.Normal(tf.reduce_mean(y, -1), 1.)
  covariates = None
  if kind == "sequential":
    jd = tfd.JointDistributionSequential([
        tfd.Normal(0., 2.), lambda mu: tfd.Sample(tfd.Normal(mu, 1.), 20), z])
    observed, moved = {"y": y}, "x"
  elif kind == "named":
    jd = tfd.JointDistributionNamed(dict(
        mu=tfd.Normal(0., 2.), y=lambda mu: tfd.Sample(tfd.Normal(mu, 1.), 20),
        z=z))
    observed, moved = {"y": y}, "z"
  else:   # A prior scaled by the covariates' values (as autoscaling does).
    covariates = np.linspace(1., 2., 20).astype(np.float32)[:, None]
    jd = lambda x: tfd.JointDistributionNamed(dict(
        w=tfd.Normal(0., 1. / tf.reduce_mean(x)),
        y=lambda w: tfd.Independent(tfd.Normal(w[..., None] * x[:, 0], 1.),
                                    1)))
    observed, moved = {"y": y}, "w"
  with pytest.raises(ValueError, match=(
      rf"latent nodes \['{moved}'\] have a prior that depends on .*"
      "a function of the latent nodes")):
    sg.JointDistributionTarget(jd, observed=observed, covariates=covariates)


@pytest.mark.parametrize("node", [
    tfd.Bernoulli(probs=0.3, dtype=tf.float32), tfd.Poisson(3.)])
def test_a_discrete_latent_node_is_refused_by_name(node):
  # TFP's joint bijector holds None for it: the error was an AttributeError
  # ("'NoneType' object has no attribute 'inverse_event_ndims'").
  jd = tfd.JointDistributionNamed(dict(
      mu=tfd.Normal(0., 1.), z=node,
      y=lambda mu, z: tfd.Sample(tfd.Normal(mu + z, 1.), 3)))
  with pytest.raises(ValueError, match=(
      rf"latent nodes \['z \({type(node).__name__}\)'\] are discrete.*"
      "Sum them out")):
    sg.JointDistributionTarget(jd, observed={"y": Y})


@pytest.mark.parametrize("kind", ["named", "sequential"])
def test_a_latent_node_with_a_batch_shape_is_refused_by_name(kind):
  # A vector prior without tfd.Independent: the error blamed a
  # `log_likelihood_fn` the user never wrote and advised `parameter_shapes`.
  x = np.ones((3, 2), np.float32)
  w = tfd.Normal(tf.zeros(2), 1.)
  y = lambda w: tfd.Independent(tfd.Normal(tf.linalg.matvec(x, w), 1.), 1)
  jd = (tfd.JointDistributionNamed(dict(w=w, y=y)) if kind == "named" else
        tfd.JointDistributionSequential([w, y]))
  name = jd._flat_resolve_names()  # pylint: disable=protected-access
  with pytest.raises(ValueError, match=(
      rf"latent nodes \['{name[0]}'\] have batch shapes .*\[2\].*"
      r"tfd.Independent")):
    sg.JointDistributionTarget(jd, observed={name[1]: Y})
