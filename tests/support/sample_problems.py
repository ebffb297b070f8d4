"""The small logistic regression that `tfp_sgmcmc.sample`'s tests call it
on, and the arguments that keep a call to seconds."""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd = tfp.distributions
# Small enough for seconds per call; graph mode (XLA is not the subject).
FAST = dict(num_results=60, num_chains=4, num_adaptation_steps=60,
            num_mode_steps=200, mode_learning_rate=0.05, progress=False,
            print_report=False, jit_compile=False)


def logistic(num_examples=2000, dim=3, batch_size=50):
  """(target, x, y): Bernoulli logistic regression, N(0, 1) prior."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(num_examples, dim)).astype(np.float32)
  w = np.float32([1., -1., 0.5])[:dim]
  y = (rng.uniform(size=num_examples) < 1 / (1 + np.exp(-x @ w))).astype(
      np.float32)

  def log_likelihood(w, batch):
    xb, yb = batch
    return tfd.Bernoulli(logits=tf.linalg.matvec(xb, w)).log_prob(yb)
  log_prior = lambda w: tf.reduce_sum(tfd.Normal(0., 1.).log_prob(w), -1)
  return sg.InMemoryTarget(log_likelihood, (x, y), batch_size=batch_size,
                           log_prior_fn=log_prior), x, y


def normal_model():
  """A JointDistribution of a normal's location and scale, and its data."""
  rng = np.random.default_rng(1)
  y = rng.normal(2., 0.5, size=200).astype(np.float32)
  model = tfd.JointDistributionNamed(dict(
      loc=tfd.Normal(0., 5.),
      scale=tfd.HalfNormal(2.),
      y=lambda loc, scale: tfd.Sample(tfd.Normal(loc, scale), 200)))
  return model, y


def random_intercepts(num_examples=2000, groups=50, batch_size=50):
  """(target, parameter shapes): y ~ Bernoulli(logit u[group]), u ~ N(0,
  tau^2), log tau ~ N(0, 1), the state [u, log tau]. Its density grows
  without bound as tau goes to 0 with u (a funnel's neck), and Newton's
  method from zeros heads there (40 examples a group); the posterior has
  tau near the intercepts' sd, 0.8."""
  rng = np.random.default_rng(2)
  group = rng.integers(0, groups, size=num_examples).astype(np.int32)
  logits = rng.normal(0., 0.8, size=groups)[group]
  y = (rng.uniform(size=num_examples) < 1 / (1 + np.exp(-logits))).astype(
      np.float32)

  def log_likelihood(state, batch):
    logits = tf.gather(state[0], batch[0], axis=-1)
    return tfd.Bernoulli(logits=logits).log_prob(batch[1])

  def log_prior(state):
    u, log_tau = state
    return (tf.reduce_sum(tfd.Normal(0., tf.exp(log_tau)[..., None]).log_prob(
        u), -1) + tfd.Normal(0., 1.).log_prob(log_tau))
  return sg.InMemoryTarget(log_likelihood, (group, y), batch_size=batch_size,
                           log_prior_fn=log_prior,
                           parameter_shapes=[[groups], []]), [[groups], []]


def poisson_near_mode(dtype, num_examples, intercept, shape, seed=0):
  """A Poisson regression on minibatches of 100 (counts near
  exp(intercept)) and states of `shape` (..., 4) around its mode, with
  the sd of the intercept's Fisher information, N exp(intercept)."""
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, 3)).astype(dtype)
  weights = np.array([0.3, -0.2, 0.1])
  y = rng.poisson(np.exp(intercept + x @ weights)).astype(dtype)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Poisson(log_rate=w[..., :1] + tf.einsum(
          "nd,...d->...n", b[0], w[..., 1:])).log_prob(b[1]),
      (x, y), batch_size=100, parameter_shapes=[4])
  sd = 1. / np.sqrt(num_examples * np.exp(intercept))
  states = np.r_[intercept, weights] + sd * rng.normal(size=shape)
  return target, tf.constant(states.astype(dtype))
