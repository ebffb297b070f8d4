"""summarize reports a diverged chain, a healthy AMAGOLD run's acceptance and
step size, and an energy that grows while every value is still finite.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import sample


def test_summary_reports_divergence_acceptance_and_unbounded_energy():
  target = sg.NoisyGradientTarget(
      lambda x: tf.reduce_sum(0.25 * x ** 4, -1), gradient_noise_variance=0.)
  kernel = sg.SGHMC(target, step_size=0.2, friction=0.1)
  draws, trace = sample(kernel, tf.constant([[20.], [0.], [0.5], [-0.5]]),
                        300, seed=[1, 2], trace_fn=lambda _, r: r)
  with pytest.warns(sg.UnhealthyChainWarning, match="1 of 4 chains diverged"):
    health = sg.summarize(draws, trace, print_report=False)
  assert health.divergences[0] > 0 and not health.divergences[1:].any()

  # A healthy AMAGOLD run: no warning, acceptance and step size reported.
  gauss = sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x ** 2, -1),
                                 gradient_noise_variance=1.)
  kernel = sg.AMAGOLD(gauss, 0.3, num_leapfrog_steps=5, friction=0.5)
  draws, trace = sample(kernel, tf.zeros([4, 2]), 1000, seed=[3, 4],
                        trace_fn=lambda _, r: r)
  with warnings.catch_warnings():
    warnings.simplefilter("error", sg.UnhealthyChainWarning)
    health = sg.summarize(draws, trace, print_report=False)
  assert not health.problems
  assert np.all((health.acceptance_rate > 0.3) & (health.acceptance_rate < 1))
  assert np.allclose(health.step_size, 0.3)
  report = sg.diagnostics.format_report(health)
  assert "healthy" in report and "accept" in report

  # SGLD at h = 2.02 on U = x^2 / 2: theta' = (1 - h) theta + noise grows
  # by 2% a step, so the energy climbs for hundreds of steps before any
  # overflow. Flagged as growing energy while every value is still finite.
  draws, trace = sample(sg.SGLD(gauss, 2.02), tf.ones([2, 1]), 400,
                        seed=[5, 6], trace_fn=lambda _, r: r)
  assert np.all(np.isfinite(draws)) and not np.any(trace.diverged)
  with pytest.warns(sg.UnhealthyChainWarning, match="energy grows"):
    sg.summarize(draws, trace, print_report=False)
