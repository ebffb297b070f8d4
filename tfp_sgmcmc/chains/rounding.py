"""How much float rounding there is in a target's exact energy near the
posterior: a cause that `sample`'s report names when a run went wrong.

An exact M-H test compares energies U(theta') - U(theta) of nearby points.
The energy is summed in float64 (`targets.energy.sum_of_examples`), but each
per-example log-likelihood is computed in the model's dtype: in float32,
terms that are large and cancel (a Poisson log-likelihood at counts in the
thousands: y log(rate) - rate, each about 1e5) are rounded by about 1e-3
each, and over N examples U is rough by about sqrt(N) 1e-3 nats from one
point to the next, where the posterior changes it by far less. The test
then cannot tell nearby points apart and the chains stick, a failure that
R-hat shows but does not explain.

`energy_rounding` measures it: U at k points along a line through the
draws' mean that reaches a tenth of a posterior sd each way (each of d
coordinates moved by up to 0.1 / sqrt(d) of its sd), where U is a parabola
to far better than float precision; the residuals' sd from the fitted
parabola is the rounding. The line is that short because a model of many
parameters is not a parabola over a longer one: moving each of a softmax
regression's 7,056 weights by a tenth of its sd left residuals of 80 nats,
the same in float64 (a float32 model would have been blamed on its dtype).
"""

import numpy as np
import tensorflow as tf

__all__ = ["energy_rounding", "rough_energy", "rough_energy_phrase",
           "rounding_problem", "ROUNDING_LIMIT", "FLOAT64_FIX"]

# Rounding (nats) beyond which the report names it. A float32 energy of
# 1e6 nats, summed in float64 and cast once, is rounded by its ulp, 0.06.
ROUNDING_LIMIT = 0.3


def energy_rounding(target, draws, num_points=17, span=0.1):
  """The sd, in nats, of `target.energy` about the parabola through it along
  the line mean + t sd, |t| <= `span` / sqrt(d), of `draws` (a state with
  leading draw and chain axes, d coordinates per chain; the line reaches
  `span` sds each way where they are uncorrelated): the float rounding of
  the exact energy there. One call of the energy, on the points as a batch
  of chains."""
  parts = [np.asarray(p) for p in tf.nest.flatten(draws)]
  dims = sum(int(np.prod(p.shape[2:])) for p in parts)
  grid = np.linspace(-span, span, num_points)
  t = grid / np.sqrt(max(dims, 1))
  points = [
      (p.mean((0, 1)) + t.reshape((-1,) + (1,) * (p.ndim - 2)) *
       p.std((0, 1))).astype(p.dtype) for p in parts]
  energy = np.asarray(target.energy(tf.nest.pack_sequence_as(
      draws, [tf.constant(p) for p in points])), np.float64)
  residual = energy - np.polyval(np.polyfit(grid, energy, 2), grid)
  return float(np.sqrt(np.sum(residual**2) / (num_points - 3)))


def rough_energy(target, draws, diverged=None):
  """The rounding (nats, `energy_rounding`) of `target`'s exact energy near
  `draws` where it exceeds `ROUNDING_LIMIT`, else None (also when the
  energy cannot be evaluated at the points, or every chain diverged): the
  one rule by which `sample` names a rough energy, in its problems and in
  the cause of a small minibatch step size
  (`chains.start.full_batch_for_noise`).

  `diverged`: per chain, True where the chain was flagged `diverged`. Such
  chains are left out: their draws are the last finite states of a blown-up
  chain, often 1e10 sds from the posterior, where any float energy is
  rough, so measured there the rounding would name float32 as the cause of
  what a too-large step size did."""
  if diverged is not None:
    keep = ~np.asarray(diverged, bool).reshape(-1)
    if not keep.any():
      return None
    draws = tf.nest.map_structure(lambda p: np.asarray(p)[:, keep], draws)
  try:
    rounding = energy_rounding(target, draws)
  except (ValueError, TypeError, tf.errors.OpError):
    return None  # A diagnostic of a run that went wrong never fails it.
  return rounding if rounding > ROUNDING_LIMIT else None


def rough_energy_phrase(rounding, draws):
  """What a `rough_energy` of `rounding` nats is, for a report."""
  dtype = tf.nest.flatten(draws)[0].dtype
  return (f"the exact energy is rough: rounded by {rounding:.2g} nats "
          f"between points within a tenth of a posterior sd ({dtype} "
          "per-example log-likelihoods), which the M-H test cannot tell "
          "apart")


# The fix of a rough energy.
FLOAT64_FIX = ("build the model in float64 (its data, parameters and "
               "constants)")


def rounding_problem(target, draws, diverged=None):
  """The report's problem when the exact energy near `draws` is rounded by
  more than `ROUNDING_LIMIT` nats (`rough_energy`), else None."""
  rounding = rough_energy(target, draws, diverged)
  if rounding is None:
    return None
  return f"{rough_energy_phrase(rounding, draws)}: {FLOAT64_FIX}"
