"""SGBD and the amortized Barker kernels refuse bad arguments early, naming
the argument and the value: step sizes, the noise EMA weight, the variant,
the increment distribution, the initial noise estimate, the target, the
number of steps per M-H test.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg


# N(MEAN, I) in 2-D with grad U~ = grad U + N(0, TAU^2 I): both coordinates
# are independent copies of the 1-D problem the quadrature solves. At
# sigma = 0.4, sigma tau = 1.2: Proposition 1's shrinkage factor is
# c = 1.702 / sqrt(1.702^2 + 1.2^2) ~ 0.82, a large effect, while
# tau |w| < 1.702 for nearly all w, where c-SGBD's correction is defined.
MEAN = np.array([1., -2.], np.float32)
TAU = 3.


def gaussian_energy(x):
  return 0.5 * tf.reduce_sum(tf.square(x - MEAN), -1)


def noisy_gaussian(tau=TAU):
  return sg.NoisyGradientTarget(gaussian_energy,
                                gradient_noise_variance=tau ** 2)


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
  with pytest.raises(ValueError, match=r"`num_steps` \(T\) must be >= 1; "
                     "got 0"):
    sg.AmortizedBarker(target, 0.1, num_steps=0)
  with pytest.raises(TypeError, match=r"`num_steps` \(T\).*got 2.5"):
    sg.AmortizedBarker(target, 0.1, num_steps=2.5)
