"""The IMQ kernel Stein discrepancy where it compiles or runs chains: the
pairwise sum against a plain NumPy double loop under XLA (in graph mode, and
the discrepancy's other known answers: tests/unit/chains/test_stein.py),
`step_size_by_ksd` choosing the step whose chains arrived without bias, and
`warm_up(criterion="ksd")` returning the chosen kernel and its chains."""

import pytest
import tensorflow as tf

import tfp_sgmcmc

from support import stein_reference


# In graph mode (jit=False): tests/unit/chains/test_stein.py.
@pytest.mark.parametrize("jit", [True])
def test_pairwise_sum_equals_a_numpy_double_loop(jit):
  stein_reference.assert_pairwise_sum_matches(jit)


def test_step_size_by_ksd_picks_the_step_that_arrived_without_bias():
  # SGLD (exact gradients; x' = x - h x + sqrt(2 h) z) on N(0, 1) from
  # x = 5: at h = 1e-4 the chain has moved about 0.1 towards the posterior
  # in 400 steps; at h = 1 its stationary variance is 1 / (1 - h / 2) = 2;
  # at h = 0.1 it has arrived and its variance is 1.05. KSD orders them as
  # their errors and chooses 0.1.
  def log_prob(w):
    return -0.5 * tf.reduce_sum(w ** 2, -1)
  target = tfp_sgmcmc.LogProbFnTarget(log_prob)
  choice = tfp_sgmcmc.chains.stein.step_size_by_ksd(
      tfp_sgmcmc.SGLD(target, step_size=1.), tf.fill([8, 1], 5.),
      step_sizes=[1e-4, 0.1, 1.], num_steps=400, seed=[1, 2],
      jit_compile=False)
  assert choice.step_size == 0.1, choice.ksd
  assert choice.ksd[1] < min(choice.ksd[0], choice.ksd[2])
  assert choice.kernel.step_size == 0.1
  assert choice.num_gradients == [400] * 3
  assert choice.scale.shape == (1,)   # the sds of the median run


def test_warm_up_by_ksd_returns_the_chosen_kernel_and_its_chains():
  def log_prob(w):
    return -0.5 * tf.reduce_sum(w ** 2, -1)
  target = tfp_sgmcmc.LogProbFnTarget(log_prob)
  warm = tfp_sgmcmc.warm_up(
      tfp_sgmcmc.SGLD(target, step_size=0.1), tf.fill([8, 1], 5.),
      num_steps=1200, seed=[1, 2], criterion="ksd",
      step_sizes=[1e-4, 0.1, 1.], jit_compile=False)
  assert warm.report.step_size == 0.1 == warm.kernel.step_size
  assert [w["step_size"] for w in warm.report.windows] == [1e-4, 0.1, 1.]
  assert warm.report.num_steps == 1200
  assert warm.state.shape == (8, 1)
  assert abs(float(tf.reduce_mean(warm.state))) < 1.5   # arrived from 5
  with pytest.raises(ValueError, match="`criterion` must be"):
    tfp_sgmcmc.warm_up(tfp_sgmcmc.SGLD(target, step_size=0.1),
                       tf.zeros([2, 1]), criterion="ess")
