"""`warm_up` caps SGHMC's, SGNHT's and SGLD's step size where their own
chains settle off the posterior: on a standard normal in one and five
dimensions (exact gradients) the test alone accepted step sizes at which
SGHMC's sd was 1.33 (or its chain diverged), SGNHT's thermostat ran away
and SGLD's sd was 1.50. The frozen kernels' chains must hold (no
divergence) with their sds within the bound's 5% of the posterior's, up
to Monte Carlo error and the warm-up's error in the posterior's scale; and
SGNHT's real chain must settle where `dynamics.stationary` says."""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, sample
from support.helpers import variance_and_se
from tfp_sgmcmc.dynamics import stationary


def standard_normal(x):
  return -0.5 * tf.reduce_sum(x ** 2, -1)


def normal(sd):
  return lambda x: -0.5 * tf.reduce_sum((x / sd) ** 2, -1)


KERNELS = {
    "SGHMC": lambda f: sg.SGHMC(target_log_prob_fn=f, step_size=0.1,
                                friction=1.),
    "SGNHT": lambda f: sg.SGNHT(target_log_prob_fn=f, step_size=0.1,
                                diffusion=1.),
    "SGLD": lambda f: sg.SGLD(target_log_prob_fn=f, step_size=0.01),
}
INTEGRATORS = {"SGHMC": "euler", "SGNHT": "thermostat", "SGLD": "langevin"}


@pytest.mark.parametrize("name, dim, sd, adapt_mass", [
    ("SGHMC", 1, 1., True), ("SGHMC", 5, 1., True),
    ("SGNHT", 1, 1., True), ("SGNHT", 5, 1., True),
    # Without a mass the bound is read in the draws' units: the Hamiltonian
    # step scales with the sd, the Langevin step with the variance.
    ("SGHMC", 1, 3., False), ("SGLD", 1, 0.1, False),
    ("SGLD", 5, 1., False)])
def test_the_tuned_kernels_chain_holds_and_keeps_its_sd(name, dim, sd,
                                                        adapt_mass):
  with sg.chains.quiet.expected_warnings_silenced():
    warm = sg.warm_up(KERNELS[name](normal(sd)), tf.zeros([16, dim]),
                      num_steps=500, seed=[1, 2], adapt_mass=adapt_mass,
                      **(dict(dense_mass=False) if adapt_mass else {}))
  h = float(warm.kernel.step_size)
  # The cap is what this checks: the test alone went further.
  assert warm.report.windows[-1]["step_size"] > 1.5 * h
  assert "the test reached" in warm.report.choices
  assert h == warm.report.step_size
  draws, diverged = sample(warm.kernel, warm.state, 20000, seed=[5, 6],
                           trace_fn=lambda _, r: r.diverged)
  assert not np.asarray(diverged).any()
  var, se = variance_and_se(np.asarray(draws)[2000:] / sd, mean=0.)
  ratio, ratio_se = np.sqrt(var), se / (2. * np.sqrt(var))
  # The bound holds for the posterior's scale as the warm-up estimated it
  # (the M^{-1} m, or the draws' sd). In units where the posterior's sd is
  # 1 the chain runs at h / s (Langevin: h / s^2) with friction C s, s the
  # posterior's sd in the units the step is in: 1 / sqrt(m) with a mass,
  # `sd` without. Allow for what a 25% error in the variance moves.
  power = 2 if name == "SGLD" else 1

  def sd_at(s):
    return stationary.stationary_sd(INTEGRATORS[name], h / s ** power,
                                    0. if name == "SGLD" else s)
  errors = np.array([1., 0.8, 1.25])
  if adapt_mass:
    m = np.concatenate([np.ravel(v) for v in warm.report.variance])
    scales, reference = 1. / np.sqrt(np.concatenate([m, errors])), 1.
  else:
    scales, reference = sd * np.sqrt(errors), sd
  slack = max(abs(sd_at(s) - sd_at(reference)) for s in scales)
  assert np.all(abs(ratio - 1.) < 0.05 + slack + NUM_SE * ratio_se), (
      ratio, ratio_se, h, slack)


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
