"""The check of kernel results a kernel did not make (kernels/results_guard.py)
costs nothing on a kernel's own results: no extra energy evaluation per
step, for AMAGOLD and for TFP's MetropolisHastings around full-batch SGLD.
"""

import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.bad_inputs import D, quadratic


def _energy_calls(make_kernel, trust_all, monkeypatch, n=4):
  """Calls of the user's energy over an eager run of n steps."""
  from tfp_sgmcmc.kernels import results_guard  # pylint: disable=g-import-not-at-top
  if trust_all:  # As if no results were ever checked.
    monkeypatch.setattr(results_guard._ResultsGuard, "known",  # pylint: disable=protected-access
                        lambda self, values, parts: (True, None))
  calls = [0]

  def counted(x):
    calls[0] += 1
    return quadratic(x)
  kernel = make_kernel(counted)
  state = tf.ones([2, D])
  results = kernel.bootstrap_results(state)
  calls[0] = 0
  for i in range(n):
    state, results = kernel.one_step(state, results, seed=[i, 5])
  monkeypatch.undo()
  return calls[0]


@pytest.mark.parametrize("make_kernel", [
    lambda fn: sg.AMAGOLD(sg.NoisyGradientTarget(
        fn, gradient_noise_variance=1.), 0.1, 2, 0.5),
    lambda fn: __import__("tensorflow_probability").mcmc.MetropolisHastings(
        sg.SGLD(target_log_prob_fn=lambda x: -fn(x), step_size=0.1)),
], ids=["AMAGOLD", "MH(full-batch SGLD)"])
def test_own_results_are_not_checked_again(make_kernel, monkeypatch):
  # The check of cached values runs once per results a kernel did not make:
  # a kernel's own results (chosen per chain by MetropolisHastings too) cost
  # no extra energy evaluation per step.
  assert (_energy_calls(make_kernel, False, monkeypatch) ==
          _energy_calls(make_kernel, True, monkeypatch))
