"""The closed-form stationary sds of `dynamics.stationary` against an
independent solve of each chain's discrete Lyapunov equation, and the
step-size bound against them."""

import math

import numpy as np
import pytest
import scipy.linalg

from support.helpers import stationary_covariance
from tfp_sgmcmc.dynamics import stationary


@pytest.mark.parametrize("integrator", ["euler", "splitting"])
@pytest.mark.parametrize("h, c", [(0.1, 1.), (0.5, 1.), (0.9, 0.3),
                                  (1.2, 0.05), (0.3, 4.)])
def test_sghmc_sd_is_the_lyapunov_solution(integrator, h, c):
  want = math.sqrt(stationary_covariance(integrator, [[1.]], h, c)[0, 0])
  assert stationary.stationary_sd(integrator, h, c) == pytest.approx(
      want, rel=1e-9)


@pytest.mark.parametrize("h", [0.05, 0.5, 1.5])
def test_sgld_sd_is_the_lyapunov_solution(h):
  want = math.sqrt(stationary_covariance("sgld", [[1.]], h)[0, 0])
  assert stationary.stationary_sd("langevin", h, 0.) == pytest.approx(
      want, rel=1e-9)


def sgnht_moments_at(h, a, xi):
  """E[r^2] and Var x of SGNHT's chain with its thermostat held at xi on a
  standard normal: r' = (1 - h xi) r - h x + N(0, 2 A h), x' = x + h r'."""
  kick = np.array([[1. - h * xi, -h], [0., 1.]])
  drift = np.array([[1., 0.], [h, 1.]])
  noise = drift @ np.array([[1.], [0.]])
  cov = scipy.linalg.solve_discrete_lyapunov(drift @ kick,
                                             2. * a * h * noise @ noise.T)
  return cov[0, 0], cov[1, 1]


@pytest.mark.parametrize("h, a", [(0.05, 1.), (0.2, 1.), (0.4, 1.),
                                  (0.3, 0.5), (0.1, 3.)])
def test_sgnht_sd_is_at_the_friction_that_holds_the_kinetic_energy(h, a):
  # The thermostat settles where E[r^2] = 1: search that friction
  # independently (bisection on the Lyapunov solution, from A up), and
  # read the position's variance there.
  low, high = a, 2. / h
  for _ in range(80):
    middle = 0.5 * (low + high)
    kinetic, _ = sgnht_moments_at(h, a, middle)
    low, high = (middle, high) if kinetic > 1. else (low, middle)
  _, variance = sgnht_moments_at(h, a, low)
  assert stationary.stationary_sd("thermostat", h, a) == pytest.approx(
      math.sqrt(variance), rel=1e-6)


def test_the_thermostat_runs_away_where_no_friction_holds_the_energy():
  # 32 A h = (4 - h^2)^2 at h = 0.4503 for A = 1.
  assert math.isfinite(stationary.stationary_sd("thermostat", 0.45, 1.))
  assert stationary.stationary_sd("thermostat", 0.451, 1.) == math.inf
  assert stationary.stationary_sd("euler", 1.25, 1.) == math.inf


@pytest.mark.parametrize("integrator, c", [("euler", 1.), ("euler", 0.1),
                                           ("splitting", 1.),
                                           ("thermostat", 1.),
                                           ("thermostat", 2.),
                                           ("langevin", 0.)])
def test_the_bound_is_the_largest_step_within_the_tolerance(integrator, c):
  h = stationary.max_step_size(integrator, c, 0.05)
  assert abs(stationary.stationary_sd(integrator, h, c) - 1.) <= 0.05
  assert abs(stationary.stationary_sd(integrator, 1.001 * h, c) - 1.) > 0.05


def test_an_unknown_integrator_is_named():
  with pytest.raises(ValueError, match="'leapfrog'"):
    stationary.stationary_sd("leapfrog", 0.1, 1.)
