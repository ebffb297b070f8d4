"""SGBD and the amortized Barker kernels refuse bad arguments early, naming
the argument and the value: step sizes, the noise EMA weight, the variant,
the increment distribution, the initial noise estimate, the target, the
number of steps per M-H test.
"""

import pytest

import tfp_sgmcmc as sg
from support.barker_gaussian import gaussian_energy, noisy_gaussian


@pytest.mark.parametrize("step_size", [0., -0.5, float("nan")])
def test_non_positive_step_size(step_size):
  with pytest.raises(ValueError, match=r"`step_size` must be > 0.*got"):
    sg.SGBD(noisy_gaussian(), step_size)
  with pytest.raises(ValueError, match=r"`step_size` must be > 0.*got"):
    sg.AmortizedBarker(noisy_gaussian(), step_size, num_steps=3)


@pytest.mark.parametrize("beta", [0., 1., -0.1, 1.5, float("nan")])
def test_noise_ema_weight_outside_the_open_unit_interval(beta):
  with pytest.raises(ValueError, match=r"`noise_ema_weight` \(beta\) must be "
                     r"a number in the open interval \(0, 1\); got"):
    sg.SGBD(noisy_gaussian(), 0.1, variant="corrected",
            noise_ema_weight=beta)


def test_other_bad_arguments():
  target = noisy_gaussian()
  with pytest.raises(ValueError, match="`variant` must be one of.*'fast'"):
    sg.SGBD(target, 0.1, variant="fast")
  with pytest.raises(ValueError, match="`increment_distribution` must be one "
                     "of.*'uniform'"):
    sg.SGBD(target, 0.1, increment_distribution="uniform")
  with pytest.raises(ValueError, match="`initial_noise_std` must be >= 0.*-1"):
    sg.SGBD(target, 0.1, variant="corrected", initial_noise_std=-1.)
  with pytest.raises(TypeError, match="`target` must be a tfp_sgmcmc target"):
    sg.SGBD(gaussian_energy, 0.1)
  with pytest.raises(ValueError, match=r"`num_steps` must be an integer >= 1;"
                     r" got 0\. It is T"):
    sg.AmortizedBarker(target, 0.1, num_steps=0)
  with pytest.raises(TypeError, match=r"`num_steps` must be an .*got 2.5"):
    sg.AmortizedBarker(target, 0.1, num_steps=2.5)
