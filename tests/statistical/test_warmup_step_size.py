"""`warm_up` tunes a step size that does not depend on the user's first
guess: from 100x too large and 100x too small it ends at the same value,
near the one the test reaches on this problem, with the test's acceptance
near its target (400 warm-up steps per start)."""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.keras_fits import logistic_setup


def _logistic_target():
  x, y, _ = logistic_setup()

  def log_likelihood(w, batch):
    xb, yb = batch
    logits = tf.einsum("nd,...d->...n", xb, w)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(yb, tf.shape(logits)), logits=logits)
  return sg.InMemoryTarget(log_likelihood, (x, y), batch_size=32,
                           log_prior_fn=lambda w: -0.5 * tf.reduce_sum(
                               w ** 2, -1))


# The step size each kernel's warm-up settles at on this problem (SGHMC
# with its diagonal mass, SGLD without any), about: the test starts 100x
# above and 100x below it.
TUNED = {"SGHMC": 0.042, "SGLD": 5.4e-5}


@pytest.mark.parametrize("name", ["SGHMC", "SGLD"])
def test_step_size_is_the_same_from_100x_too_large_or_too_small(name):
  """With the same seed, starting 100x too large or too small ends at the
  same step size within 5%. (Between seeds the tuned value spreads more,
  9% for SGLD, log-sd over 4 seeds: the shared seed isolates the effect of
  the start.)"""
  target = _logistic_target()
  make = {"SGHMC": lambda h: sg.SGHMC(target, step_size=h, friction=1.),
          "SGLD": lambda h: sg.SGLD(target, step_size=h)}[name]
  tuned = []
  for start in (100. * TUNED[name], TUNED[name] / 100.):
    # Graph mode: the tuning, not XLA, is the subject (and each start is a
    # new program, which XLA would compile at more cost than the run).
    # The diagonal mass that TUNED was measured with (the default would
    # pick a dense one for this 3-vector).
    warm = sg.warm_up(make(start), tf.zeros([4, 3]), num_steps=400,
                      seed=[0, 9], jit_compile=False, dense_mass=False)
    tuned.append(warm.report.step_size)
    assert warm.kernel.step_size == warm.report.step_size
    assert type(warm.kernel) is type(make(start))  # pylint: disable=unidiomatic-typecheck
    # The test's acceptance over the last window is near its target.
    assert abs(warm.report.acceptance - 0.75) < 0.1, warm.report
  assert abs(np.log(tuned[0] / tuned[1])) < 0.05, tuned
  # And the search really moved: it ends near the good guess.
  assert abs(np.log(tuned[0] / TUNED[name])) < np.log(1.5), tuned
