"""Step-size schedules (PolynomialDecay, CyclicalSchedule) and the
step-size-weighted mean refuse bad numbers and shapes, naming the argument
and the value.
"""

import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.bad_inputs import classify, clear


CLEAR_MESSAGES = [
    ("cyclical schedule with more cycles than steps",
     lambda: sg.CyclicalSchedule(0.1, num_steps=3, num_cycles=5), ValueError,
     r"`num_cycles` <= `num_steps`; got num_cycles=5, num_steps=3"),
    ("cyclical exploration fraction of one", lambda: sg.CyclicalSchedule(
        0.1, 10, 2, exploration_fraction=1.), ValueError,
     r"`exploration_fraction` must be in \[0, 1\); got 1.0"),
    ("polynomial decay with negative offset", lambda: sg.PolynomialDecay(
        0.1, b=-1.), ValueError, r"PolynomialDecay `b` must be >= 0.*-1.0"),
    # TFP's adaptation sets the step size through the results; a schedule
    # silently replaced each value it set (the run followed the schedule).
    ("schedule under TFP's step-size adaptation", lambda: tfp.mcmc.sample_chain(
        3, tf.zeros([2, 1]), kernel=tfp.mcmc.SimpleStepSizeAdaptation(
            sg.AMAGOLD(_full_batch(), sg.PolynomialDecay(0.5, 10., 0.55),
                       num_leapfrog_steps=2, friction=0.5), 2),
        seed=[1, 2], trace_fn=None), ValueError,
     r"`step_size` of UncalibratedAMAGOLD is a schedule \(PolynomialDecay\)"
     r".*store_parameters_in_results=True.*Adapt a constant step size"),
]


def _full_batch():
  x = tf.linspace(-1., 1., 8)[:, None]
  return sg.InMemoryTarget(lambda w, b: -0.5 * (b[0][..., 0] - w)**2, (x,),
                           batch_size=8, full_batch=True)


@pytest.mark.parametrize("case,call,error,pattern", CLEAR_MESSAGES,
                         ids=[c[0] for c in CLEAR_MESSAGES])
def test_bad_input_fails_early_with_a_clear_message(case, call, error,
                                                    pattern):
  del case
  with pytest.raises(error, match=pattern):
    call()


OUTCOMES = [
    clear("polynomial decay scale as a string", lambda: sg.PolynomialDecay(
        "0.1"), "a", r"'0.1'"),
    clear("cyclical schedule over 10.5 steps", lambda: sg.CyclicalSchedule(
        0.1, 10.5, 2), "num_steps", r"10.5"),
    clear("cyclical schedule with negative step", lambda: sg.CyclicalSchedule(
        -0.1, 10, 2), "initial_step_size", r"-0.1"),
    clear("weighted mean with one step size too few",
          lambda: sg.step_size_weighted_mean(tf.zeros([10, 2]),
                                             tf.ones([9])), "step_sizes",
          r"\[9\].*10 draws"),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"
