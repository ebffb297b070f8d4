"""Per-chain minibatches (InMemoryTarget(independent_minibatches=True)) on the
linear regression of support/linear_regression.py: the target and the
functions the unit, statistical and bad-input tests of the option share.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg


BATCH = 50


def broadcasting_log_likelihood(w, batch):
  """Broadcasts over chain dimensions: w [..., d], xb [..., n, d]."""
  xb, yb = batch
  return tfp.distributions.Normal(tf.linalg.matvec(xb, w), 1.).log_prob(yb)


def log_prior(w):
  """N(0, I), problem.log_prior in any float dtype."""
  return -0.5 * tf.reduce_sum(w ** 2 + np.log(2 * np.pi), -1)


def make_target(problem, independent, batch_size=BATCH, dtype=np.float32,
                log_likelihood=broadcasting_log_likelihood):
  data = tuple(a.astype(dtype) for a in problem.data)
  return sg.InMemoryTarget(log_likelihood, data, batch_size,
                           log_prior_fn=log_prior,
                           parameter_shapes=[problem.dim],
                           independent_minibatches=independent)
