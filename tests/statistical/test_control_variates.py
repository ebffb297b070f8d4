"""Control variates on Bayesian logistic regression (N = 2000): the gradient
variance far below plain minibatches, both unbiased, and SGLD with control
variates closer to a NUTS reference than plain SGLD.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, sample, variance_and_se


class Logistic:
  """Bayesian logistic regression, N = 2000, d = 3, prior N(0, 10^2)."""

  def __init__(self, n=2000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    self.x = rng.normal(size=(n, d)).astype(np.float32)
    w = np.array([1., -1., 0.5])
    p = 1. / (1. + np.exp(-self.x @ w))
    self.y = (rng.uniform(size=n) < p).astype(np.float32)
    self.n, self.d = n, d

  def log_likelihood(self, w, batch):
    x, y = batch
    logits = tf.einsum("nd,...d->...n", x, w)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits)

  @staticmethod
  def log_prior(w):
    return tf.reduce_sum(-0.5 * (w / 10.) ** 2, -1)

  def target(self, batch_size):
    return sg.InMemoryTarget(self.log_likelihood, (self.x, self.y),
                             batch_size, log_prior_fn=self.log_prior)


@pytest.fixture(scope="module")
def logistic():
  problem = Logistic()
  target = problem.target(batch_size=20)
  mode = sg.find_mode(target, tf.zeros([problem.d]), num_steps=3000,
                      learning_rate=0.05)
  # Reference posterior: full-batch NUTS, compiled (about 10 s).
  full = problem.target(batch_size=problem.n)
  nuts = tfp.mcmc.NoUTurnSampler(lambda w: -full.energy(w), step_size=0.05)
  nuts = tfp.mcmc.DualAveragingStepSizeAdaptation(nuts, 400)
  ref = sample(nuts, tf.tile(mode[None], [4, 1]), 2000, seed=[9, 9],
               num_burnin_steps=500)
  return problem, target, mode, np.asarray(ref)


def test_control_variate_gradient_variance_is_far_below_plain(logistic):
  problem, target, mode, ref = logistic
  cv = sg.ControlVariateTarget(target, mode)
  # At a typical posterior point (mode + 1 posterior sd).
  w = mode + tf.constant(ref.reshape(-1, problem.d).std(axis=0), tf.float32)
  seeds = tf.stack(tfp.random.split_seed([1, 2], n=2000))
  grads = {}
  for name, t in (("plain", target), ("cv", cv)):
    fn = tf.function(lambda s, t=t: tf.map_fn(
        lambda si: t.energy_and_gradient(w, si)[1], s,
        fn_output_signature=tf.float32), autograph=False)
    grads[name] = np.asarray(fn(seeds), np.float64)
  var_plain = grads["plain"].var(axis=0)
  var_cv = grads["cv"].var(axis=0)
  print("gradient variance plain", var_plain, "cv", var_cv)
  assert np.all(var_cv < 0.05 * var_plain)
  # Both are unbiased estimates of the same full gradient.
  with tf.GradientTape() as tape:
    tape.watch(w)
    energy = target.energy(w)
  exact = tape.gradient(energy, w).numpy()
  for g in grads.values():
    se = g.std(axis=0) / np.sqrt(len(g))
    assert np.all(np.abs(g.mean(axis=0) - exact) < NUM_SE * se)


def test_sgld_cv_is_closer_to_the_reference_than_plain_sgld(logistic):
  problem, target, mode, ref = logistic
  ref_sd = ref.reshape(-1, problem.d).std(axis=0)
  cv = sg.ControlVariateTarget(target, mode)
  init = tf.tile(mode[None], [8, 1])
  errors = {}
  for name, t in (("plain", target), ("cv", cv)):
    draws = np.asarray(sample(sg.SGLD(t, 5e-4), init, 10000, seed=[3, 4],
                              num_burnin_steps=500))
    var, var_se = variance_and_se(draws)
    sd = np.sqrt(var)
    errors[name] = (np.abs(sd / ref_sd - 1.), 0.5 * var_se / var)
    print(name, "sd", sd, "reference sd", ref_sd)
  (err_plain, se_plain), (err_cv, se_cv) = errors["plain"], errors["cv"]
  # The reference sd has its own MC error (ESS > 1000: about 2%).
  assert np.all(err_plain - err_cv > NUM_SE * np.hypot(se_plain, se_cv))
