"""JointDistributionTarget on named, sequential and coroutine TFP models: the
structure of the state, the exact energy as the pinned model's log density
in the unconstrained space, the likelihood alone scaled by N / n, SGLD
draws constrained back, a model pinned by the user as the same target as
`observed=`, and the gradient through the bijector at the initial state.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import sample
from tfp_sgmcmc.chains import sample as sample_lib


tfd, tfb = tfp.distributions, tfp.bijectors


def _logistic_data(n=300, d=3, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)).astype(np.float32)
  p = 1. / (1. + np.exp(-x @ np.linspace(1., -1., d)))
  return x, (rng.uniform(size=n) < p).astype(np.int32)


def _named_model(x):
  d = x.shape[-1]
  return tfd.JointDistributionNamed(dict(
      scale=tfd.HalfNormal(1.),
      w=lambda scale: tfd.Independent(
          tfd.Normal(tf.zeros(d), scale[..., None]), 1),
      y=lambda w: tfd.Independent(
          tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1)))


def _sequential_model(x):
  d = x.shape[-1]
  return tfd.JointDistributionSequential([
      tfd.HalfNormal(1.),
      lambda scale: tfd.Independent(
          tfd.Normal(tf.zeros(d), scale[..., None]), 1),
      lambda w: tfd.Independent(
          tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1)])


def _coroutine_model(x):
  d = x.shape[-1]

  @tfd.JointDistributionCoroutine
  def model():
    scale = yield tfd.JointDistributionCoroutine.Root(
        tfd.HalfNormal(1., name="scale"))
    w = yield tfd.Independent(tfd.Normal(tf.zeros(d), scale[..., None]), 1,
                              name="w")
    yield tfd.Independent(tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1,
                          name="y")
  return model


@pytest.mark.parametrize("model,structure", [
    (_named_model, dict), (_sequential_model, list),
    (_coroutine_model, tuple)])
def test_joint_distribution_target_energy_and_structure(model, structure):
  x, y = _logistic_data()
  name = "y" if model is not _sequential_model else (
      model(x)._flat_resolve_names()[-1])  # pylint: disable=protected-access
  target = sg.JointDistributionTarget(model, {name: y}, covariates=x,
                                      batch_size=30)
  init = target.initial_state(4, seed=[1, 2])
  assert isinstance(init, structure)
  # The exact energy is the pinned model's log density in the unconstrained
  # space (the default event-space bijector's log-det included).
  pinned = model(x).experimental_pin(**{name: y})
  bij = pinned.experimental_default_event_space_bijector()
  ranks = tf.nest.map_structure(lambda s: s.rank, pinned.event_shape)
  want = (pinned.unnormalized_log_prob(bij.forward(init)) +
          bij.forward_log_det_jacobian(init, event_ndims=ranks))
  np.testing.assert_allclose(-target.energy(init), want, rtol=1e-5)
  # Only the likelihood is scaled by N/n: the minibatch estimate averaged
  # over all batches of a partition equals the exact energy. (Batches of
  # 100, not the target's 30: each eager estimate rebuilds the model, and
  # N/n = 3 tells a scaled prior from an unscaled one as well as 10 does.)
  parts = np.split(np.arange(300), 3)
  estimates = [target._energy_from_batch(  # pylint: disable=protected-access
      init, target._gather(idx), 100) for idx in parts]  # pylint: disable=protected-access
  np.testing.assert_allclose(np.mean(estimates, 0), target.energy(init),
                             rtol=1e-4)
  draws = sample(sg.SGLD(target, 1e-3), init, 5, seed=[3, 4], jit=False)
  assert isinstance(draws, structure)
  constrained = target.constrain(draws)
  scale = (constrained["scale"] if structure is dict else constrained[0])
  assert np.all(np.asarray(scale) > 0.)


def _iid_model(n):
  # No covariates: a model instance whose observed node takes minibatches.
  return tfd.JointDistributionNamed(dict(
      mu=tfd.Normal(0., 1.), sigma=tfd.HalfNormal(1.),
      y=lambda mu, sigma: tfd.Sample(tfd.Normal(mu, sigma), n)))


def _pin(jd, name, data, how):
  if how == "experimental_pin":
    return jd.experimental_pin(**{name: data})
  return tfp.experimental.distributions.JointDistributionPinned(
      jd, **{name: data})


def _assert_same_target(by_pin, by_observed):
  assert by_pin.latent_names == by_observed.latent_names
  init = by_observed.initial_state(4, seed=[1, 2])
  for seed in ([5, 6], [7, 8]):
    e_pin, g_pin = by_pin.energy_and_gradient(init, seed)
    e_obs, g_obs = by_observed.energy_and_gradient(init, seed)
    np.testing.assert_array_equal(e_pin, e_obs)
    tf.nest.map_structure(np.testing.assert_array_equal, g_pin, g_obs)
  np.testing.assert_array_equal(by_pin.energy(init), by_observed.energy(init))
  draws = [sample(sg.SGHMC(t, 1e-3, friction=1.), init, 5, seed=[3, 4],
                  jit=False) for t in (by_pin, by_observed)]
  tf.nest.map_structure(np.testing.assert_array_equal, *draws)
  # The draws moved: the comparison is not between two starting states.
  assert np.std(tf.nest.flatten(draws[0])[-1]) > 0


# TFP's way of giving the data (a pinned model) and ours (observed=) are one
# posterior: the same energies, gradients and chain, bit for bit.
@pytest.mark.parametrize("model", [_named_model, _sequential_model,
                                   _coroutine_model])
def test_a_pinned_model_is_the_same_target_as_observed(model):
  x, y = _logistic_data()
  jd = model(x)
  name = jd._flat_resolve_names()[-1]  # pylint: disable=protected-access
  _assert_same_target(
      sg.JointDistributionTarget(_pin(jd, name, y, "experimental_pin")),
      sg.JointDistributionTarget(jd, {name: y}))


def test_a_pinned_model_on_minibatches_is_the_same_target_as_observed():
  y = np.random.default_rng(0).normal(1., 2., size=300).astype(np.float32)
  jd = _iid_model(300)
  _assert_same_target(
      sg.JointDistributionTarget(_pin(jd, "y", y, "JointDistributionPinned"),
                                 batch_size=30),
      sg.JointDistributionTarget(jd, {"y": y}, batch_size=30))


@pytest.mark.parametrize("model", [_named_model, _sequential_model])
def test_the_gradient_at_the_initial_state_goes_through_the_bijector(model):
  # initial_state comes from the bijector's inverse, whose cache would
  # hand `forward` the parameters unconnected to the state on the tape.
  x, y = _logistic_data()
  jd = model(x)
  name = jd._flat_resolve_names()[-1]  # pylint: disable=protected-access
  target = sg.JointDistributionTarget(jd, {name: y})
  init = target.initial_state(4, seed=[1, 2])
  _, grad = target.energy_and_gradient(init, [5, 6])
  # Central differences along the first part (the scale): float32 energies
  # of about 300 carry rounding of about 300 * 6e-8 / h = 2e-3 at h = 1e-2,
  # and the curvature term h^2 U''' / 6 is smaller still.
  h = 1e-2
  parts = tf.nest.flatten(init)
  def shifted(delta):
    return tf.nest.pack_sequence_as(init, [parts[0] + delta] + parts[1:])
  numeric = (target.energy(shifted(h)) - target.energy(shifted(-h))) / (2 * h)
  np.testing.assert_allclose(tf.nest.flatten(grad)[0], numeric, atol=1e-2)


@pytest.mark.parametrize("batch_size", [None, 50])
def test_a_model_with_one_scalar_latent_node_takes_chains(batch_size):
  # The mean of normal data as the only latent node: its state {"m": [4]}
  # has no parameter axis, which the chain-axis checks read as a single
  # chain of a [4] parameter (a full batch refused it with a contradiction;
  # `sample`'s control variates refused the dict). The target now declares
  # each node's unconstrained event shape.
  y = np.random.default_rng(0).normal(1., 1., 400).astype(np.float32)
  x = np.ones((400, 1), np.float32)
  target = sg.JointDistributionTarget(
      lambda x: tfd.JointDistributionNamed(dict(
          m=tfd.Normal(0., 10.),
          y=lambda m: tfd.Independent(tfd.Normal(
              m[..., None] * tf.ones_like(x[:, 0]), 1.), 1))),
      observed={"y": y}, covariates=x, batch_size=batch_size)
  state = {"m": tf.constant([0., 0.5, 1., 2.])}
  exact = (0.5 * np.sum((y[None] - state["m"].numpy()[:, None])**2, 1) +
           0.5 * (state["m"].numpy() / 10.)**2)
  energy = target.energy(state).numpy()
  np.testing.assert_allclose(energy - energy[0], exact - exact[0],
                             rtol=1e-5)
  kernel = sg.AMAGOLD(sg.ControlVariateTarget(target, {"m": tf.constant(
      float(y.mean()))}) if batch_size else target, 1e-3,
                      num_leapfrog_steps=3, friction=0.5)
  _, results = kernel.one_step(state, kernel.bootstrap_results(state),
                               seed=[1, 2])
  assert results.energy.shape == [4]
  assert sample_lib._shape_spec({"m": tf.zeros([])}) == [[]]  # pylint: disable=protected-access


def test_an_auto_batched_model_has_its_own_log_density():
  # JointDistributionCoroutineAutoBatched writes a vector node without
  # tfd.Independent: its log_prob has the vector in its batch shape, which
  # the model's own log_prob sums. The prior was summed node by node and
  # refused ("Incompatible shapes: [4,3] vs. [4]").
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 3)).astype(np.float32)
  y = (x @ [1., -1., .5] + rng.normal(size=200)).astype(np.float32)

  def model(x):
    @tfd.JointDistributionCoroutineAutoBatched
    def m():
      w = yield tfd.Normal(tf.zeros(3), 1., name="w")
      yield tfd.Normal(tf.linalg.matvec(x, w), 1., name="y")
    return m
  target = sg.JointDistributionTarget(model, observed={"y": y},
                                      covariates=x, batch_size=None)
  w = tf.constant(rng.normal(size=(4, 3)).astype(np.float32))
  state = target.initial_state(seed=[1, 2])
  state = type(state)(w=w) if hasattr(state, "_fields") else [w]
  expected = [-float(model(x).log_prob(w=w[i], y=y)) for i in range(4)]
  np.testing.assert_allclose(target.energy(state), expected, rtol=1e-5)


def test_a_sequential_model_observed_before_a_latent_starts_from_its_prior():
  # The model's draws hold every node: read by the latent names alone, a
  # list handed the observed node's draw to the latent after it (here an
  # [N] array of Normal draws unconstrained by HalfNormal's log: NaNs).
  y = np.linspace(-1., 2., 20).astype(np.float32)
  jd = tfd.JointDistributionSequential([
      tfd.Normal(0., 2.), lambda mu: tfd.Sample(tfd.Normal(mu, 1.), 20),
      tfd.HalfNormal(1.)])
  names = jd._flat_resolve_names()  # pylint: disable=protected-access
  target = sg.JointDistributionTarget(jd, {names[1]: y})
  init = target.initial_state(4, seed=[1, 2])
  assert [p.shape for p in init] == [[4], [4]]
  pinned = jd.experimental_pin(**{names[1]: y})
  bij = pinned.experimental_default_event_space_bijector()
  want = (pinned.unnormalized_log_prob(bij.forward(init)) +
          bij.forward_log_det_jacobian(init, event_ndims=[0, 0]))
  np.testing.assert_allclose(-target.energy(init), want, rtol=1e-5)


@pytest.mark.parametrize("model", [_named_model, _sequential_model,
                                   _coroutine_model])
def test_a_flat_state_is_the_same_posterior_as_the_nodes(model):
  # One vector per chain ([scale, w] unconstrained, in tf.nest.flatten
  # order): the same energy, gradient and parameters as the nodes' state.
  x, y = _logistic_data()
  name = "y" if model is not _sequential_model else (
      model(x)._flat_resolve_names()[-1])  # pylint: disable=protected-access
  nodes = sg.JointDistributionTarget(model, {name: y}, covariates=x,
                                     batch_size=30)
  flat = sg.JointDistributionTarget(model, {name: y}, covariates=x,
                                    batch_size=30, flat_state=True)
  assert flat.parameter_shapes == [4] and flat.flat_state
  init = nodes.initial_state(4, seed=[1, 2])
  vector = flat.initial_state(4, seed=[1, 2])
  assert vector.shape == (4, 4)
  np.testing.assert_array_equal(vector, tf.concat(
      [tf.reshape(p, [4, -1]) for p in tf.nest.flatten(init)], -1))
  tf.nest.map_structure(np.testing.assert_array_equal,
                        flat.structured(vector), init)
  np.testing.assert_allclose(flat.energy(vector), nodes.energy(init),
                             rtol=1e-6)
  e_flat, g_flat = flat.energy_and_gradient(vector, [5, 6])
  e_nodes, g_nodes = nodes.energy_and_gradient(init, [5, 6])
  np.testing.assert_allclose(e_flat, e_nodes, rtol=1e-6)
  np.testing.assert_allclose(g_flat, tf.concat(
      [tf.reshape(g, [4, -1]) for g in tf.nest.flatten(g_nodes)], -1),
                             rtol=1e-5, atol=1e-6)
  tf.nest.map_structure(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6),
      flat.constrain(vector), nodes.constrain(init))
  np.testing.assert_allclose(
      flat.unconstrain(nodes.constrain(init)), vector, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(flat.unconstrained_log_prob(vector),
                             -nodes.energy(init), rtol=1e-6)


def test_flat_state_must_be_a_bool():
  x, y = _logistic_data()
  with pytest.raises(TypeError, match="`flat_state` must be True or False; "
                     "got 'yes'"):
    sg.JointDistributionTarget(_named_model, {"y": y}, covariates=x,
                               flat_state="yes")
