"""`chains.rounding`: the float rounding of an exact energy near the draws,
which `sample`'s report names when a run went wrong."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import rounding

from support.sample_problems import poisson_near_mode

tfd = tfp.distributions


def _poisson(dtype, num_examples, intercept):
  """A Poisson regression target and 50 draws of 4 chains around its
  mode."""
  return poisson_near_mode(dtype, num_examples, intercept, (50, 4, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_float32_likelihood_of_large_cancelling_terms_is_rough(dtype):
  # Counts near 1e5: y log(rate) - rate is about 1e6 per example, rounded
  # in float32 by about 0.03; over 2,000 examples U is rough by about
  # sqrt(2000) 0.03 = 1.5 nats, far above the limit. The same model in
  # float64 is smooth to 1e-6 nats.
  target, draws = _poisson(dtype, 2000, 11.5)
  measured = rounding.energy_rounding(target, draws)
  problem = rounding.rounding_problem(target, draws)
  if dtype == np.float32:
    assert 0.5 < measured < 5. and "float64" in problem
  else:
    assert measured < 1e-6 and problem is None


def test_a_float32_likelihood_of_small_terms_is_not_flagged():
  # Counts near 1 (log-likelihoods of order 1): no cancellation; the
  # float64 sum of 20,000 of them is cast once, and the parabola fits it.
  target, draws = _poisson(np.float32, 20_000, 0.)
  assert rounding.energy_rounding(target, draws) < 0.05
  assert rounding.rounding_problem(target, draws) is None


def test_a_smooth_energy_fits_its_parabola_whatever_its_curvature():
  # The measure is the departure from a parabola, not the energy's change:
  # a Gaussian posterior 1e4 sds from the draws' mean (an energy that
  # changes by thousands of nats along the line) has no rounding.
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Normal(w[..., :1], 1.).log_prob(b), np.zeros(100),
      batch_size=10, parameter_shapes=[1])
  draws = tf.constant(100. + np.random.default_rng(1).normal(
      size=(20, 4, 1)))
  assert rounding.energy_rounding(target, draws) < 1e-6


def test_a_smooth_energy_of_many_parameters_is_not_taken_for_rounding():
  # A float64 logistic regression of 1,000 coefficients, draws spread by
  # 0.3: moving every coordinate by a tenth of its sd at once is a line 3
  # whitened sds long, along which the energy is no parabola (1.0 nats off
  # it); the line reaches a tenth of a sd, and the energy is smooth there.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(2000, 1000))
  y = (rng.uniform(size=2000) < 0.5).astype(np.float64)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Bernoulli(logits=tf.einsum(
          "nd,...d->...n", b[0], w)).log_prob(b[1]),
      (x, y), full_batch=True, parameter_shapes=[1000])
  draws = tf.constant(0.3 * rng.normal(size=(20, 4, 1000)))
  assert rounding.energy_rounding(target, draws) < 1e-3
  assert rounding.rounding_problem(target, draws) is None


def test_an_energy_that_cannot_be_evaluated_gives_no_problem():
  # The measure runs after a run that went wrong; it must not fail the call.
  target, draws = _poisson(np.float32, 2000, 11.5)
  assert rounding.rounding_problem(target, [draws, draws]) is None


def _blown_up_chain():
  """A float32 Gaussian target (smooth near its posterior) and draws of
  four chains, the last of which blew up to about 1e6: the state a chain
  flagged `diverged` keeps, as `sample` saw it with SGNHT at the step size
  its warm-up tuned."""
  rng = np.random.default_rng(2)
  x = rng.normal(size=(1000, 2)).astype(np.float32)
  y = (x @ np.float32([1., -1.]) + rng.normal(size=1000)).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Normal(tf.linalg.matvec(b[0], w), 1.).log_prob(b[1]),
      (x, y), batch_size=100, parameter_shapes=[2])
  draws = np.float32([1., -1.]) + 0.03 * rng.normal(size=(50, 4, 2))
  draws[:, 3] = 1e6 * rng.normal(size=(50, 2))
  return target, tf.constant(draws.astype(np.float32))


def test_a_diverged_chain_is_not_taken_for_float_rounding():
  # Measured over every chain, the blown-up chain's 1e6-sized draws make
  # the float32 energy rough and the report would advise float64 for what
  # a too-large step size did; the chains that did not diverge are smooth.
  target, draws = _blown_up_chain()
  assert "float64" in rounding.rounding_problem(target, draws)
  flagged = np.array([False, False, False, True])
  assert rounding.rounding_problem(target, draws, diverged=flagged) is None


def test_when_every_chain_diverged_rounding_names_nothing():
  # The divergence is the cause the report gives; there are no posterior
  # draws left to measure the energy's rounding near.
  target, draws = _blown_up_chain()
  assert rounding.rounding_problem(
      target, draws, diverged=np.ones(4, bool)) is None
