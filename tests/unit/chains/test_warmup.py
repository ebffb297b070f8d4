"""`warm_up`: Stan's windows and the refusals that name their fix (that the
tuned step size does not depend on the user's first guess is a run of 400
warm-up steps per start: tests/statistical/test_warmup_step_size.py)."""

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


def test_windows_are_stans():
  assert sg.warmup_windows(1000) == [
      ("fast", 75), ("slow", 25), ("slow", 50), ("slow", 100),
      ("slow", 200), ("slow", 500), ("fast", 50)]
  for n in (20, 100, 149, 150, 151, 400, 777, 5000):
    windows = sg.warmup_windows(n)
    assert sum(k for _, k in windows) == n, (n, windows)
    assert windows[0][0] == windows[-1][0] == "fast"
    assert any(kind == "slow" for kind, _ in windows)


def test_refuses_what_it_cannot_tune():
  target = _logistic_target()
  with pytest.raises(TypeError, match="warm_up tunes AMAGOLD, SGHMC"):
    sg.warm_up(sg.SGBD(target, step_size=0.1), tf.zeros([3]))
  with pytest.raises(ValueError, match="SGLD has no mass matrix"):
    sg.warm_up(sg.SGLD(target, step_size=0.1), tf.zeros([3]),
               adapt_mass=True)
  with pytest.raises(TypeError, match="schedule"):
    sg.warm_up(sg.SGLD(target, step_size=sg.PolynomialDecay(0.1, 1., 0.5)),
               tf.zeros([3]))
  with pytest.raises(ValueError, match="temperature 1"):
    sg.warm_up(sg.SGLD(target, step_size=0.1, temperature=0.5),
               tf.zeros([3]))
  with pytest.raises(ValueError, match="target_accept_prob"):
    sg.warm_up(sg.SGLD(target, step_size=0.1), tf.zeros([3]),
               target_accept_prob=1.5)
