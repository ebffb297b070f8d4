"""A positive parameter with a known posterior, for the tests that sample it
through a bijector or refuse its minibatch target: a Normal variance under
an InverseGamma prior."""

import numpy as np
import scipy.special
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd = tfp.distributions


def variance_problem(num_examples=10_000, batch_size=1000, scale=1.5):
  """y_i ~ N(0, v) with v ~ InverseGamma(a, b): v | y ~ InvGamma(a + N/2,
  b + sum y^2 / 2), so log v has mean log(b') - digamma(a') and variance
  trigamma(a'). Returns (the minibatch target, that mean, that variance)."""
  rng = np.random.default_rng(3)
  y = rng.normal(0., scale, size=num_examples).astype(np.float32)
  a, b = 2., 2.
  target = sg.InMemoryTarget(
      lambda v, yb: tfd.Normal(0., tf.sqrt(v)).log_prob(yb[..., 0]),
      y[:, None], batch_size=batch_size,
      log_prior_fn=lambda v: tfd.InverseGamma(a, b).log_prob(v[..., 0]))
  a_post, b_post = a + num_examples / 2, b + np.sum(y.astype(np.float64)**2) / 2
  log_mean = np.log(b_post) - scipy.special.digamma(a_post)
  log_var = scipy.special.polygamma(1, a_post)
  return target, log_mean, log_var
