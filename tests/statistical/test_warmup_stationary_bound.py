"""`warm_up` caps SGHMC's and SGNHT's step size where their own chains
settle off the posterior: on a standard normal in one and five dimensions
(exact gradients) the test alone accepted step sizes at which SGHMC's sd
was 1.33 (or its chain diverged) and SGNHT's thermostat ran away. The
frozen kernels' chains must hold (no divergence) with their sds within
the bound's 5% of 1, up to Monte Carlo error; and the real chains must
settle where `dynamics.stationary` says."""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, sample
from support.helpers import variance_and_se
from tfp_sgmcmc.dynamics import stationary


def standard_normal(x):
  return -0.5 * tf.reduce_sum(x ** 2, -1)


KERNELS = {
    "SGHMC": lambda: sg.SGHMC(target_log_prob_fn=standard_normal,
                              step_size=0.1, friction=1.),
    "SGNHT": lambda: sg.SGNHT(target_log_prob_fn=standard_normal,
                              step_size=0.1, diffusion=1.),
}
INTEGRATORS = {"SGHMC": ("euler", 1.), "SGNHT": ("thermostat", 1.)}


@pytest.mark.parametrize("dim", [1, 5])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_tuned_kernels_chain_holds_and_keeps_its_sd(name, dim):
  with sg.chains.quiet.expected_warnings_silenced():
    warm = sg.warm_up(KERNELS[name](), tf.zeros([16, dim]), num_steps=500,
                      seed=[1, 2], dense_mass=False)
  h = float(warm.kernel.step_size)
  # The cap is what this checks: the test alone went further.
  assert warm.report.windows[-1]["step_size"] > 1.5 * h
  assert "the test reached" in warm.report.choices
  assert h == warm.report.step_size
  draws, diverged = sample(warm.kernel, warm.state, 20000, seed=[5, 6],
                           trace_fn=lambda _, r: r.diverged)
  assert not np.asarray(diverged).any()
  var, se = variance_and_se(np.asarray(draws)[2000:], mean=0.)
  sd, sd_se = np.sqrt(var), se / (2. * np.sqrt(var))
  # The bound holds in the units of the mass; an estimated M^{-1} = m
  # (1 up to the warm-up's error) runs the posterior's unit curvature as
  # curvature m, at the step size h sqrt(m): allow for what that moves.
  integrator, c = INTEGRATORS[name]
  m = np.concatenate([np.ravel(v) for v in warm.report.variance])
  slack = max(abs(stationary.stationary_sd(integrator, h * np.sqrt(v), c)
                  - stationary.stationary_sd(integrator, h, c)) for v in m)
  assert np.all(abs(sd - 1.) < 0.05 + slack + NUM_SE * sd_se), (
      sd, sd_se, m)


@pytest.mark.parametrize("h", [0.2, 0.4])
def test_sgnhts_chain_settles_at_the_thermostats_fixed_point(h):
  # 50 dimensions, so that the thermostat barely moves from its fixed
  # point: the draws' variance is 1 - h xi / 2 there (0.89 and 0.69).
  kernel = sg.SGNHT(target_log_prob_fn=standard_normal, step_size=h,
                    diffusion=1.)
  draws = sample(kernel, tf.zeros([8, 50]), 20000, seed=[3, 4],
                 num_burnin_steps=2000)
  # |x|^2 / d per chain and draw: its mean is the variance.
  squares = np.mean(np.asarray(draws, np.float64) ** 2, -1)[..., None]
  (var,), (se,) = mean_and_se(squares)
  predicted = stationary.stationary_sd("thermostat", h, 1.) ** 2
  assert abs(var - predicted) < NUM_SE * se, (var, se, predicted)
  assert 1. - var > NUM_SE * se  # Not the posterior's 1.
