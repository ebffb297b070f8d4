"""JointDistributionTarget on named, sequential and coroutine TFP models: the
structure of the state, the exact energy as the pinned model's log density
in the unconstrained space, the likelihood alone scaled by N / n, and SGLD
draws constrained back.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import sample


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
  # over all batches of a partition equals the exact energy.
  parts = np.split(np.arange(300), 10)
  estimates = [target._energy_from_batch(  # pylint: disable=protected-access
      init, target._gather(idx), 30) for idx in parts]  # pylint: disable=protected-access
  np.testing.assert_allclose(np.mean(estimates, 0), target.energy(init),
                             rtol=1e-4)
  draws = sample(sg.SGLD(target, 1e-3), init, 5, seed=[3, 4], jit=False)
  assert isinstance(draws, structure)
  constrained = target.constrain(draws)
  scale = (constrained["scale"] if structure is dict else constrained[0])
  assert np.all(np.asarray(scale) > 0.)
