"""summarize refuses a single draw, a trace of another run and a reference
energy that does not fit the chains; find_mode refuses zero steps, a
non-finite start and a full-batch search on a target without an exact
energy, says when its search diverges (a NaN centre for control variates),
and finds the mode of a quadratic.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.bad_inputs import D, batches, classify, clear, correct, ll, noisy
from support.bad_inputs import steps


def find_mode_of_quadratic():
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x - 2.) ** 2, -1),
      gradient_noise_variance=0.)
  mode = sg.find_mode(target, tf.zeros([D]), num_steps=400,
                      learning_rate=0.05)
  np.testing.assert_allclose(mode, 2. * np.ones(D), atol=1e-2)


def _diverging_mode_search():
  # U = -x up to x = 2 and NaN (with a NaN gradient) beyond: Adam climbs
  # by about the learning rate a step and meets the NaN long before 200
  # steps.
  target = sg.NoisyGradientTarget(
      lambda x: tf.reduce_sum(-x + tf.where(x < 2., 0., np.nan) * x, -1),
      gradient_noise_variance=0.)
  return sg.find_mode(target, tf.zeros([D]), num_steps=200,
                      learning_rate=0.1)


OUTCOMES = [
    clear("mode search that diverges", _diverging_mode_search,
          "learning_rate", r"find_mode diverged.*0.1.*smaller"),
    clear("summary with a reference energy per chain of the wrong length",
          lambda: sg.summarize(tf.zeros([40, 2, D]), print_report=False,
                               reference_energy=[1., 2., 3.]),
          "reference_energy", r"\[3\].*2 chains"),
    clear("summary of a single draw", lambda: sg.summarize(
        tf.zeros([1, 2, D]), print_report=False), "samples", r"\[1, 2, 3\]"),
    clear("summary with the trace of another run", lambda: sg.summarize(
        tf.zeros([10, 2, D]), steps(sg.SGLD(noisy(), 0.1), tf.zeros([2, D]))[
            1]._replace(diverged=tf.zeros([4, 2], tf.bool)),
        print_report=False), "trace", r"\[4, 2\].*10 draws"),
    clear("mode search with zero steps", lambda: sg.find_mode(
        noisy(), tf.zeros([D]), num_steps=0), "num_steps", r"got 0"),
    clear("mode search from a NaN start", lambda: sg.find_mode(
        noisy(), tf.constant([np.nan, 0., 0.])), "current_state",
          r"non-finite"),
    clear("full-batch mode search without an exact energy",
          lambda: sg.find_mode(sg.DatasetTarget(ll, batches(), 40),
                               tf.zeros([D]), full_batch=True),
          "full_batch", r"DatasetTarget"),
    correct("mode of a shifted quadratic", find_mode_of_quadratic),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"
