"""SGNHT's thermostat holds the temperature under unknown gradient noise
(where SGHMC with a guessed friction runs hot) and settles higher for more
noise; at temperature T the kinetic energy per dimension is T.
"""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, sample


def isotropic_gaussian(noise, precision=1.):
  precision = np.asarray(precision, np.float32)
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(precision * x ** 2, -1),
      gradient_noise_variance=noise)


def test_sgnht_holds_the_temperature_under_unknown_gradient_noise():
  # The thermostat update xi' = xi + h (r'^T r' / d - 1) has zero mean
  # increment in stationarity, so the kinetic energy per dimension averages
  # exactly 1 in the discrete chain, whatever the noise. SGHMC with friction
  # set without knowing the noise (B = h V / 2 = 0.625 against C = 1) runs
  # hot.
  target = isotropic_gaussian(25.)
  kinetic = {}
  for name, kernel in (("sgnht", sg.SGNHT(target, 0.05, diffusion=1.)),
                       ("sghmc", sg.SGHMC(target, 0.05, friction=1.))):
    _, momentum = sample(kernel, tf.zeros([4, 10]), 20000, seed=[1, 2],
                         num_burnin_steps=2000,
                         trace_fn=lambda _, r: r.momentum)
    per_dim = np.mean(np.asarray(momentum) ** 2, axis=-1, keepdims=True)
    kinetic[name] = mean_and_se(per_dim)
  (ke, se), (ke_sghmc, se_sghmc) = kinetic["sgnht"], kinetic["sghmc"]
  assert abs(ke[0] - 1.) < NUM_SE * se[0]
  assert ke_sghmc[0] - 1. > NUM_SE * se_sghmc[0]


def test_sgnht_thermostat_tracks_the_noise_and_temperature():
  # More gradient noise needs more friction: the thermostat settles higher.
  def mean_thermostat(noise, temperature=1.):
    kernel = sg.SGNHT(isotropic_gaussian(noise), 0.05, diffusion=1.,
                      temperature=temperature)
    _, (xi, r) = sample(kernel, tf.zeros([4, 10]), 5000, seed=[3, 4],
                        num_burnin_steps=2000,
                        trace_fn=lambda _, r: (r.thermostat, r.momentum))
    return mean_and_se(np.asarray(xi)[..., None]), np.mean(
        np.asarray(r) ** 2)
  (low, low_se), _ = mean_thermostat(1.)
  (high, high_se), _ = mean_thermostat(100.)
  assert high[0] - low[0] > NUM_SE * np.hypot(low_se[0], high_se[0])
  _, cold_kinetic = mean_thermostat(1., temperature=0.25)
  assert abs(cold_kinetic - 0.25) < 0.05  # Mean of 200k squares; sd 0.01.
