"""Eight schools, non-centred, as a minibatch target over the eight schools
(each school's likelihood is one example), with the Inference Gym's
reference posterior in the gym's (centred) parameters."""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd = tfp.distributions

EFFECTS = np.array([28, 8, -3, 7, -1, 1, 18, 12], np.float32)
STDDEVS = np.array([15, 10, 16, 11, 9, 11, 10, 18], np.float32)
DIM = 10  # avg_effect, log_stddev, z_1..z_8


def log_likelihood(state, batch):
  """log N(y_i; avg + exp(log_sd) z_i, s_i) for the batch's schools i."""
  school, y, s = batch
  z = tf.gather(state[..., 2:], tf.cast(school, tf.int32), axis=-1)
  effect = state[..., :1] + tf.exp(state[..., 1:2]) * z
  return tfd.Normal(effect, s).log_prob(y)


def log_prior(state):
  return (tfd.Normal(0., 10.).log_prob(state[..., 0])
          + tfd.Normal(5., 1.).log_prob(state[..., 1])
          + tf.reduce_sum(tfd.Normal(0., 1.).log_prob(state[..., 2:]), -1))


def target(batch_size=2):
  data = (np.arange(8, dtype=np.float32), EFFECTS, STDDEVS)
  return sg.InMemoryTarget(log_likelihood, data, batch_size=batch_size,
                           log_prior_fn=log_prior)


def to_gym(draws):
  """(avg_effect, log_stddev, school_effects) from non-centred draws."""
  draws = np.asarray(draws, np.float64)
  avg, log_sd, z = draws[..., :1], draws[..., 1:2], draws[..., 2:]
  return np.concatenate([avg, log_sd, avg + np.exp(log_sd) * z], -1)


def reference():
  """The gym's reference (mean, sd) of the 10 coordinates of `to_gym`."""
  from inference_gym.targets.ground_truth import eight_schools as truth  # pylint: disable=import-outside-toplevel
  mean = np.concatenate([np.ravel(truth.IDENTITY_AVG_EFFECT_MEAN),
                         np.ravel(truth.IDENTITY_LOG_STDDEV_MEAN),
                         np.ravel(truth.IDENTITY_SCHOOL_EFFECTS_MEAN)])
  sd = np.concatenate([
      np.ravel(truth.IDENTITY_AVG_EFFECT_STANDARD_DEVIATION),
      np.ravel(truth.IDENTITY_LOG_STDDEV_STANDARD_DEVIATION),
      np.ravel(truth.IDENTITY_SCHOOL_EFFECTS_STANDARD_DEVIATION)])
  return mean, sd
