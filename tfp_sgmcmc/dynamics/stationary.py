"""Where a biased integrator's chain settles on a standard normal, and the
largest step size that keeps it near the posterior.

On U(x) = |x|^2 / 2 with exact gradients (a posterior that is a standard
normal in the units of its mass matrix, as after `warm_up`'s mass), each
coordinate of SGHMC's and SGNHT's chains is a linear Gaussian recursion
whose stationary law is known in closed form (the 2 x 2 discrete Lyapunov
equation of (x, r)):

    SGHMC, Euler, friction C:     Var x = 2 (2 - h C) / (4 - 2 h C - h^2)
    SGHMC, splitting (ABOBA):     Var x = y / sinh(y),  y = C h / 2
    SGNHT, diffusion A:           Var x = 1 - h xi / 2,
    SGLD:                         Var x = 1 / (1 - h / 2),

the last at the thermostat's fixed point, the friction at which the
kinetic energy per dimension E[r^2] = 4 A / (xi (4 - 2 h xi - h^2)) is 1:

    xi = ((4 - h^2) - sqrt((4 - h^2)^2 - 32 A h)) / (4 h).

Where 32 A h > (4 - h^2)^2 no friction holds E[r^2] at 1: the thermostat
runs away and the chain diverges (at h > 0.45 for A = 1). The Euler chain
diverges where h^2 + 2 h C >= 4, the splitting chain and SGLD's where
h >= 2. (SGLD's step, x' = x - h grad U + sqrt(2 h) z, scales with the
posterior's variance; the Hamiltonian steps scale with its sd.)

These are the stationary errors that an acceptance rate does not see: the
amortized test that tunes these kernels runs AMAGOLD's time-symmetric
integrator of their dynamics, not their own step (SGLD's runs its own
steps, M-H corrected), and its acceptance bounds a trajectory's error
summed over the coordinates, so in a few dimensions it accepts step sizes
at which their own chains settle far from the posterior (or diverge).
`max_step_size` is the bound `warm_up` adds.
"""

import math

__all__ = ["INTEGRATORS", "stationary_sd", "max_step_size"]

INTEGRATORS = ("euler", "splitting", "thermostat", "langevin")

# Beyond h = 2 every integrator here is unstable on a unit curvature.
_LARGEST = 2.


def stationary_sd(integrator, step_size, friction):
  """The stationary sd of each coordinate of the chain on a standard normal
  (exact gradients), or inf where the chain diverges.

  Args:
    integrator: "euler" or "splitting" (SGHMC), "thermostat" (SGNHT) or
      "langevin" (SGLD).
    step_size: h > 0.
    friction: C (SGHMC) or the diffusion A (SGNHT), >= 0; unused by
      "langevin".

  Returns:
    A float.

  ```python
  tfp_sgmcmc.dynamics.stationary.stationary_sd("euler", 0.5, 1.)  # 1.044
  ```
  """
  h, c = float(step_size), float(friction)
  if integrator == "euler":
    denominator = 4. - 2. * h * c - h * h
    return (math.sqrt(2. * (2. - h * c) / denominator)
            if denominator > 0. and h * c < 2. else math.inf)
  if integrator == "splitting":
    y = 0.5 * c * h
    return (math.inf if h >= _LARGEST else
            math.sqrt(y / math.sinh(y)) if y > 0. else 1.)
  if integrator == "thermostat":
    disc = (4. - h * h) ** 2 - 32. * c * h
    if disc < 0.:
      return math.inf
    xi = ((4. - h * h) - math.sqrt(disc)) / (4. * h)
    return math.sqrt(max(1. - 0.5 * h * xi, 0.))
  if integrator == "langevin":
    return 1. / math.sqrt(1. - 0.5 * h) if h < _LARGEST else math.inf
  raise ValueError(f"`integrator` must be one of {INTEGRATORS}; got "
                   f"{integrator!r}.")


def max_step_size(integrator, friction, tolerance):
  """The largest h whose stationary sd on a standard normal is within
  `tolerance` of 1 (relative): each error grows with h, so the step sizes
  that keep it are (0, h]; found by bisection.

  ```python
  tfp_sgmcmc.dynamics.stationary.max_step_size("euler", 1., 0.05)  # 0.524
  ```
  """
  def within(h):
    return abs(stationary_sd(integrator, h, friction) - 1.) <= tolerance
  low, high = 0., _LARGEST
  if within(high):
    return high
  for _ in range(60):
    middle = 0.5 * (low + high)
    low, high = (middle, high) if within(middle) else (low, middle)
  return low
