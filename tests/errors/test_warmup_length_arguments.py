"""`warm_up(adapt_num_leapfrog_steps=...)`: each bad argument is refused
before anything runs, with the argument, the value seen and the fix."""

import pytest
import tensorflow as tf

import tfp_sgmcmc as sg


def _target():
  return sg.LogProbFnTarget(lambda x: -0.5 * tf.reduce_sum(x ** 2, -1))


def _amagold():
  return sg.AMAGOLD(_target(), step_size=0.1, num_leapfrog_steps=10,
                    friction=0.5)


def test_refuses_a_flag_that_is_not_a_bool():
  with pytest.raises(TypeError, match=r"`adapt_num_leapfrog_steps` must be "
                     r"True or False; got 'yes' of type str\. Pass True"):
    sg.warm_up(_amagold(), tf.zeros([4, 2]), num_steps=20,
               adapt_num_leapfrog_steps="yes")


@pytest.mark.parametrize("cap, error", [(0, ValueError), (-3, ValueError),
                                        (2.5, TypeError), (True, TypeError)])
def test_refuses_a_cap_that_is_not_a_positive_integer(cap, error):
  with pytest.raises(error, match=(
      rf"`max_num_leapfrog_steps` must be an integer >= 1; got "
      rf"{cap!r}\. .*Pass e\.g\. max_num_leapfrog_steps=256")):
    sg.warm_up(_amagold(), tf.zeros([4, 2]), num_steps=20,
               adapt_num_leapfrog_steps=True, max_num_leapfrog_steps=cap)


@pytest.mark.parametrize("kernel", [
    lambda: sg.SGHMC(_target(), step_size=0.1, friction=1.),
    lambda: sg.SGLD(_target(), step_size=0.1)])
def test_refuses_a_kernel_without_a_trajectory(kernel):
  kernel = kernel()
  with pytest.raises(ValueError, match=(
      rf"`adapt_num_leapfrog_steps=True` but this {type(kernel).__name__} "
      r"has no trajectory length.*use adapt_num_leapfrog_steps=False, or "
      r"AMAGOLD")):
    sg.warm_up(kernel, tf.zeros([4, 2]), num_steps=20,
               adapt_num_leapfrog_steps=True)


def test_refuses_the_ksd_criterion():
  with pytest.raises(ValueError, match=(
      r"`adapt_num_leapfrog_steps=True` with criterion='ksd'.*Use "
      r"criterion='acceptance'")):
    sg.warm_up(_amagold(), tf.zeros([4, 2]), num_steps=20,
               adapt_num_leapfrog_steps=True, criterion="ksd")


def test_refuses_one_chain():
  with pytest.raises(ValueError, match=(
      r"`adapt_num_leapfrog_steps=True` with 1 chain: ChEES needs at least "
      r"2 chains.*Run 2 or more chains, or use "
      r"adapt_num_leapfrog_steps=False")):
    sg.warm_up(_amagold(), tf.zeros([2]), num_steps=20,
               adapt_num_leapfrog_steps=True)
