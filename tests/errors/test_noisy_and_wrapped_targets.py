"""NoisyGradientTarget's noise (negative, NaN, a string, both a variance and a
covariance, a covariance not positive definite or of the wrong size) and
the wrappers' arguments (TemperedTarget's temperature, ControlVariateTarget's
target and centre, including a non-finite centre from a diverged
`find_mode`) are refused early, named with the value received.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.bad_inputs import D, classify, clear, correct, data, location_ll
from support.bad_inputs import noisy, quadratic


CLEAR_MESSAGES = [
    ("negative gradient noise", lambda: sg.NoisyGradientTarget(
        quadratic, gradient_noise_variance=-1.), ValueError,
     r"`gradient_noise_variance` must be finite and >= 0; got -1.0"),
    ("both noise variance and covariance", lambda: sg.NoisyGradientTarget(
        quadratic, 1., np.eye(2)), ValueError, r"exactly one of"),
    ("covariance not positive definite", lambda: sg.NoisyGradientTarget(
        quadratic, gradient_noise_covariance=[[1., 2.], [2., 1.]]),
     ValueError, r"positive definite; got \[\[1.0, 2.0\], \[2.0, 1.0\]\]"),
    ("covariance of the wrong size for the state",
     lambda: sg.NoisyGradientTarget(
         quadratic, gradient_noise_covariance=np.eye(3)).energy_and_gradient(
             tf.zeros([2]), [0, 0]), ValueError,
     r"3x3 but the state has event size 2"),
    ("control variates around a NaN centre (a diverged find_mode)",
     lambda: sg.ControlVariateTarget(
         sg.InMemoryTarget(location_ll, data(), 2, parameter_shapes=[2]),
         tf.constant([np.nan, 0.])), ValueError,
     r"`centre`.*centre's part 0 is not finite.*find_mode"),
    ("control variates around a centre whose energy overflows",
     lambda: sg.ControlVariateTarget(
         sg.InMemoryTarget(location_ll, data(), 2, parameter_shapes=[2]),
         np.array([1e30, 0.], np.float32)), ValueError,
     r"`centre`.*U\(centre\) is not finite.*find_mode"),
    ("per-coordinate gradient noise of the wrong length",
     lambda: sg.SGLD(sg.NoisyGradientTarget(
         quadratic, gradient_noise_variance=[1., 1.]), 0.1).bootstrap_results(
             tf.zeros([4, 3])), ValueError,
     r"`gradient_noise_variance` has shape \[2\].*shape \[4, 3\]"),
    ("control variates around a centre of the wrong shape",
     lambda: sg.ControlVariateTarget(
         sg.InMemoryTarget(location_ll, data(), 2, parameter_shapes=[2]),
         tf.zeros([3])), ValueError, r"expected trailing shape \[2\]"),
]


@pytest.mark.parametrize("case,call,error,pattern", CLEAR_MESSAGES,
                         ids=[c[0] for c in CLEAR_MESSAGES])
def test_bad_input_fails_early_with_a_clear_message(case, call, error,
                                                    pattern):
  del case
  with pytest.raises(error, match=pattern):
    call()


def tempered_string_free():
  target = sg.TemperedTarget(noisy(), 2)
  np.testing.assert_allclose(target.energy(tf.ones([D])), 0.75)


OUTCOMES = [
    clear("noise variance as a string", lambda: sg.NoisyGradientTarget(
        quadratic, gradient_noise_variance="1"), "gradient_noise_variance",
          r"got '1'"),
    clear("NaN noise variance", lambda: sg.NoisyGradientTarget(
        quadratic, gradient_noise_variance=[1., np.nan]),
          "gradient_noise_variance", r"nan"),
    clear("tempering at a string temperature", lambda: sg.TemperedTarget(
        noisy(), "2"), "temperature", r"got '2'"),
    clear("tempering at zero temperature", lambda: sg.TemperedTarget(
        noisy(), 0.), "temperature", r"got 0.0"),
    clear("control variates around a target-less centre",
          lambda: sg.ControlVariateTarget(None, tf.zeros([D])), "target",
          r"NoneType"),
    correct("tempered energy at an integer temperature",
            tempered_string_free),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"
