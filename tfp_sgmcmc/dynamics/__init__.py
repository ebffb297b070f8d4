"""Pure update rules of the SG-MCMC samplers, one place for each equation.

Every function here maps a structure of tensors (one tensor or a list, as
the chain state) to a new structure, given the stochastic gradient grad U~
already evaluated where the rule needs it. They know nothing of TFP kernel
results or Keras variables: the `tfp.mcmc` kernels and the Keras adapter
both call them, so the two front ends cannot disagree about the math. The
`*_update` functions are one whole step each (noise drawn inside from the
step's seed, as BlackJAX's diffusions do); the others are their pieces.

* `langevin`: SGLD, preconditioned SGLD, MALA's proposal ratio.
* `mass`: the mass matrix M as one object (`Mass`: `ScaledIdentity`,
  `DiagonalMass`, `DistributionMass`; `as_mass` of TFP's
  `momentum_distribution`), with drift, kinetic energy, `sample_momentum`
  and `velocity` = M^{-1} r.
* `hamiltonian`: SGHMC (Euler and splitting integrators).
* `thermostat`: SGNHT, the SG Nose-Hoover thermostat.
* `amagold`: AMAGOLD's stochastic leapfrog and energy accumulator.
* `barker`: SGBD's Barker moves and their proposal ratio.
* `nuts`: SG-NUTS's time-directed SGHMC step and U-turn criterion.
* `acceptance`: the amortized Metropolis-Hastings test.
* `stationary`: where SGHMC's and SGNHT's chains settle on a standard
  normal, and the largest step size that keeps them near it.

The random draws they use come from `tfp_sgmcmc.random` (re-exported here:
`standard_normal_like`, `uniform_like`, `uniform_indices`, `derive_seeds`,
`walk_seed`).

Notation (Chen et al. 2014; Chen, Ding, Carin 2015): position theta,
momentum r, mass matrix M (the identity unless a `momentum_distribution`
N(0, M) is given), step size h (epsilon), friction C (D in the
splitting paper), noise-model estimate B-hat, temperature T (T = 1 samples
the posterior; T < 1 a cold posterior proportional to exp(-U / T)).
"""

from tfp_sgmcmc.dynamics import acceptance
from tfp_sgmcmc.dynamics import amagold
from tfp_sgmcmc.dynamics import barker
from tfp_sgmcmc.dynamics import hamiltonian
from tfp_sgmcmc.dynamics import langevin
from tfp_sgmcmc.dynamics import mass
from tfp_sgmcmc.dynamics import nuts
from tfp_sgmcmc.dynamics import stationary
from tfp_sgmcmc.dynamics import thermostat
from tfp_sgmcmc.dynamics.acceptance import (metropolis_hastings_test,
                                            momentum_after_test)
from tfp_sgmcmc.dynamics.amagold import (amagold_momentum,
                                         energy_accumulator_increment,
                                         leapfrog_seeds, leapfrog_step,
                                         proposal_start)
from tfp_sgmcmc.dynamics.barker import (BARKER_INCREMENT_DISTRIBUTIONS,
                                        barker_increment_like,
                                        barker_log_proposal_ratio,
                                        barker_move, barker_probability,
                                        barker_update,
                                        corrected_barker_probability,
                                        extreme_barker_probability,
                                        gradient_noise_std_ema, sgbd_update)
from tfp_sgmcmc.dynamics.hamiltonian import (sghmc_euler_momentum,
                                             sghmc_splitting_momentum,
                                             sghmc_update)
from tfp_sgmcmc.dynamics.mass import (Mass, as_mass, drift, kinetic_energy,
                                      sample_momentum, velocity)
from tfp_sgmcmc.dynamics.thermostat import sgnht_step, sgnht_update
from tfp_sgmcmc.dynamics.langevin import (langevin_log_proposal_ratio,
                                          langevin_step,
                                          preconditioned_langevin_step,
                                          psgld_update,
                                          rmsprop_preconditioner, sgld_update)
from tfp_sgmcmc.random import (RNG_ALG, derive_seeds, standard_normal_like,
                               uniform_indices, uniform_like, walk_seed)

__all__ = [
    "derive_seeds",
    "walk_seed",
    "standard_normal_like",
    "langevin_step",
    "drift",
    "sghmc_euler_momentum",
    "sghmc_splitting_momentum",
    "amagold_momentum",
    "energy_accumulator_increment",
    "kinetic_energy",
    "sample_momentum",
    "velocity",
    "sgnht_step",
    "rmsprop_preconditioner",
    "preconditioned_langevin_step",
    "BARKER_INCREMENT_DISTRIBUTIONS",
    "barker_increment_like",
    "uniform_like",
    "barker_probability",
    "corrected_barker_probability",
    "extreme_barker_probability",
    "barker_move",
    "gradient_noise_std_ema",
    "barker_log_proposal_ratio",
    "langevin_log_proposal_ratio",
    "uniform_indices",
    "RNG_ALG",
    # One whole step each, and the M-H test.
    "sgld_update",
    "psgld_update",
    "sghmc_update",
    "sgnht_update",
    "proposal_start",
    "leapfrog_seeds",
    "leapfrog_step",
    "barker_update",
    "sgbd_update",
    "metropolis_hastings_test",
    "momentum_after_test",
    # Modules by family.
    "Mass", "as_mass",
    "langevin", "hamiltonian", "amagold", "barker", "nuts", "acceptance",
    "mass", "thermostat", "stationary",
]
