"""Bayesian linear regression with its analytic posterior, for tests.

y_i = x_i^T w + e_i, e_i ~ N(0, s^2), prior w ~ N(0, tau^2 I):
posterior precision P = X^T X / s^2 + I / tau^2, mean P^-1 X^T y / s^2.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, variance_and_se


class LinearRegression:

  def __init__(self, num_examples=500, dim=2, noise_scale=1.,
               prior_scale=1., seed=0):
    rng = np.random.default_rng(seed)
    self.num_examples, self.dim = num_examples, dim
    self.noise_scale, self.prior_scale = noise_scale, prior_scale
    x = rng.normal(size=(num_examples, dim)).astype(np.float32)
    w_true = rng.normal(size=dim)
    y = (x @ w_true + noise_scale * rng.normal(size=num_examples)).astype(
        np.float32)
    self.data = (x, y)
    x64 = x.astype(np.float64)
    self.precision = x64.T @ x64 / noise_scale ** 2 + np.eye(dim) / (
        prior_scale ** 2)
    self.posterior_cov = np.linalg.inv(self.precision)
    self.posterior_mean = self.posterior_cov @ (x64.T @ y) / noise_scale ** 2

  def log_likelihood(self, w, batch):
    xb, yb = batch
    pred = tf.einsum("nd,...d->...n", xb, w)
    return tfp.distributions.Normal(pred, self.noise_scale).log_prob(yb)

  def log_prior(self, w):
    return tf.reduce_sum(
        tfp.distributions.Normal(0., self.prior_scale).log_prob(w), -1)

  def in_memory_target(self, batch_size, **kwargs):
    return sg.InMemoryTarget(self.log_likelihood, self.data, batch_size,
                             log_prior_fn=self.log_prior, **kwargs)

  # numpy references
  def per_example_log_likelihood(self, w):
    x, y = (a.astype(np.float64) for a in self.data)
    r = y - x @ w
    s = self.noise_scale
    return -0.5 * (r / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)

  def log_prior_np(self, w):
    t = self.prior_scale
    return np.sum(-0.5 * (w / t) ** 2 - np.log(t) - 0.5 * np.log(2 * np.pi))

  def energy(self, w):
    w = np.asarray(w, np.float64)
    return -self.per_example_log_likelihood(w).sum() - self.log_prior_np(w)

  def per_example_gradients(self, w):
    """g_i = -grad log p(y_i | x_i, w), shape [N, d]."""
    x, y = (a.astype(np.float64) for a in self.data)
    return x * ((x @ w - y) / self.noise_scale ** 2)[:, None]

  def gradient(self, w):
    w = np.asarray(w, np.float64)
    return self.per_example_gradients(w).sum(0) + w / self.prior_scale ** 2

  def minibatch_gradient_covariance(self, batch_size, w=None,
                                    with_replacement=True):
    """Cov of (N/n) sum_batch g_i at w (default: the posterior mean)."""
    w = self.posterior_mean if w is None else w
    g = self.per_example_gradients(w)
    n, big_n = batch_size, self.num_examples
    cov = big_n ** 2 / n * np.cov(g.T, bias=True)
    if not with_replacement:
      cov *= (big_n - n) / (big_n - 1)
    return cov


def check_moments(problem, draws, predicted_cov):
  draws = np.asarray(draws)
  mean, mean_se = mean_and_se(draws)
  assert np.all(np.abs(mean - problem.posterior_mean) < NUM_SE * mean_se)
  var, var_se = variance_and_se(draws, mean=problem.posterior_mean)
  assert np.all(np.abs(var - np.diag(predicted_cov)) < NUM_SE * var_se)
  return var, var_se


def write_shards(directory, record_size=4):
  """A 600-example `LinearRegression` written to 3 TFRecord shards in
  three chunks of 200, round-robin, in the data's order: (problem,
  layout)."""
  problem = LinearRegression(num_examples=600, dim=2, seed=3)
  x, y = problem.data
  chunks = [(x[i:i + 200], y[i:i + 200]) for i in range(0, 600, 200)]
  layout = sg.write_tfrecord_shards(iter(chunks), directory, num_shards=3,
                                    record_size=record_size)
  return problem, layout
