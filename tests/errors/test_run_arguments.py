"""Long-run drivers (sample_moments, sample_chain_with_progress) refuse bad
step counts, burn-in, thinning, a target in place of a kernel and a
non-finite start in a compiled run; a single-step moment run is exact.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import runs
from support.bad_inputs import D, classify, clear, correct, noisy


def _kernel():
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(x ** 2, -1), gradient_noise_variance=1.)
  return sg.SGHMC(target, step_size=0.1, friction=1.)


def test_rejects_no_results():
  with pytest.raises(ValueError, match="num_results"):
    runs.sample_chain_with_progress(0, tf.zeros([3]), _kernel(), [1, 2])


def one_step_moments():
  m = sg.sample_moments(sg.SGLD(noisy(), 0.1), tf.ones([2, D]), 1,
                        seed=[1, 2])
  np.testing.assert_allclose(m.mean, m.final_state)
  np.testing.assert_array_equal(m.variance, np.zeros([2, D]))


def _own_seed_progress():
  """A StepSeeded kernel given its own seed draws what its inner kernel
  does with that seed."""
  inner = sg.SGLD(noisy(), 0.1)
  runs_ = [sg.sample_chain_with_progress(
      3, tf.zeros([2, D]), k, seed=[3, 4], progress=False,
      jit_compile=False, trace_fn=None).all_states
           for k in (sg.StepSeeded(inner, seed=[3, 4]), inner)]
  np.testing.assert_array_equal(runs_[0], runs_[1])


def _nan_moments():
  return sg.sample_moments(sg.SGLD(noisy(), 0.1),
                           tf.constant([[0., np.inf, 0.]]), 5, seed=[1, 2])


OUTCOMES = [
    clear("negative burn-in", lambda: sg.sample_moments(
        sg.SGLD(noisy(), 0.1), tf.zeros([D]), 5, seed=[1, 2],
        num_burnin_steps=-1), "num_burnin_steps", r"got -1"),
    clear("fractional number of steps", lambda: sg.sample_moments(
        sg.SGLD(noisy(), 0.1), tf.zeros([D]), 2.5, seed=[1, 2]),
          "num_steps", r"got 2.5"),
    clear("moments of a target instead of a kernel", lambda: sg.sample_moments(
        noisy(), tf.zeros([D]), 5, seed=[1, 2]), "kernel",
          r"NoisyGradientTarget"),
    clear("infinite initial state in a compiled moment run", _nan_moments,
          "current_state", r"non-finite"),
    clear("progress run without results", lambda:
          sg.sample_chain_with_progress(0, tf.zeros([D]), sg.SGLD(
              noisy(), 0.1), seed=[1, 2]), "num_results", r"got 0"),
    clear("negative thinning", lambda: sg.sample_chain_with_progress(
        5, tf.zeros([D]), sg.SGLD(noisy(), 0.1), seed=[1, 2],
        num_steps_between_results=-2), "num_steps_between_results",
          r"got -2"),
    # Its own seed picks the noise: every `seed` gave the same draws.
    clear("progress run of a StepSeeded kernel of another seed", lambda:
          sg.sample_chain_with_progress(
              2, tf.zeros([D]), sg.StepSeeded(sg.SGLD(noisy(), 0.1),
                                              seed=[3, 4]),
              seed=[1, 2], progress=False, jit_compile=False),
          "seed", r"\[3, 4\].*\[1, 2\].*inner_kernel"),
    correct("progress run of a StepSeeded kernel of its own seed",
            _own_seed_progress),
    correct("moments of a single step", one_step_moments),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"
