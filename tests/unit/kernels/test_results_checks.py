"""`one_step` checks the results it is given from what is known when it is
traced, never from their values: a step costs the same energy evaluations
whether the results are the kernel's own or another kernel object's, for
AMAGOLD and for TFP's MetropolisHastings around full-batch SGLD.
`check_kernel_results` is the explicit value check, one energy evaluation.
"""

import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.bad_inputs import D, quadratic


def _energy_calls(make_kernel, own_results, n=4):
  """Calls of the user's energy over an eager run of n steps, started from
  the kernel's own results or from those of an identical kernel object."""
  calls = [0]

  def counted(x):
    calls[0] += 1
    return quadratic(x)
  kernel = make_kernel(counted)
  state = tf.ones([2, D])
  maker = kernel if own_results else make_kernel(counted)
  results = maker.bootstrap_results(state)
  calls[0] = 0
  for i in range(n):
    state, results = kernel.one_step(state, results, seed=[i, 5])
  return calls[0]


KERNELS = [
    lambda fn: sg.AMAGOLD(sg.NoisyGradientTarget(
        fn, gradient_noise_variance=1.), 0.1, 2, 0.5),
    lambda fn: __import__("tensorflow_probability").mcmc.MetropolisHastings(
        sg.SGLD(target_log_prob_fn=lambda x: -fn(x), step_size=0.1)),
]
IDS = ["AMAGOLD", "MH(full-batch SGLD)"]


@pytest.mark.parametrize("make_kernel", KERNELS, ids=IDS)
def test_one_step_does_not_check_values(make_kernel):
  # No hidden record of the results a kernel returned, and no value check
  # in one_step: results of another kernel object cost the same.
  assert _energy_calls(make_kernel, True) == _energy_calls(make_kernel,
                                                            False)


@pytest.mark.parametrize("make_kernel", KERNELS[:1], ids=IDS[:1])
def test_check_kernel_results_costs_one_energy(make_kernel):
  calls = [0]

  def counted(x):
    calls[0] += 1
    return quadratic(x)
  kernel = make_kernel(counted)
  state = tf.ones([2, D])
  results = kernel.bootstrap_results(state)
  calls[0] = 0
  sg.check_kernel_results(kernel, state, results)
  assert calls[0] == 1
