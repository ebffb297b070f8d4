"""A diagonal mass matrix for the Keras AMAGOLD: the `inverse_mass`
argument's checks, and the momentum distribution the dynamics take.

M^{-1} lives in optimizer variables, one per trainable weight and shaped
like it (so backups carry it, and the warm-up can replace it); each step
hands `dynamics.amagold` the `dynamics.mass.DiagonalMass` of their values
(the `ScaledIdentity` sigma^2 I without them), the same object the
kernels' diagonal `momentum_distribution` becomes.
"""

import numbers

import numpy as np

from tfp_sgmcmc.dynamics import mass as mass_lib
from tfp_sgmcmc.dynamics.mass import diagonal_momentum_distribution
from tfp_sgmcmc.keras.samplers import base

__all__ = ["DiagonalMass", "check_inverse_mass", "check_inverse_mass_shapes",
           "initial_inverse_mass", "momentum_distribution"]

_FIX = ("Pass M^{-1} as one positive number, or a list with one positive "
        "array per trainable weight shaped like it (model.trainable_weights "
        "order), e.g. tfp_sgmcmc.warm_up(...).report.variance.")


def check_inverse_mass(inverse_mass, momentum_std):
  """The constructor's checks: None, a positive finite number, or a list of
  positive finite arrays; not with a momentum_std other than 1.

  Returns:
    None, a float, or a list of float64 numpy arrays.
  """
  if inverse_mass is None:
    return None
  if float(momentum_std) != 1.:
    raise ValueError(
        f"`inverse_mass` with `momentum_std`={momentum_std!r}: both set the "
        "mass matrix (sigma^2 I, or diag(1 / inverse_mass)). Leave "
        "momentum_std at 1 and divide inverse_mass by sigma^2.")
  if isinstance(inverse_mass, bool):
    raise TypeError(f"`inverse_mass` must be M^{{-1}}; got {inverse_mass!r}. "
                    + _FIX)
  if isinstance(inverse_mass, (numbers.Real, np.floating, np.integer)):
    values, number = [np.asarray(inverse_mass, np.float64)], True
  elif isinstance(inverse_mass, (list, tuple)):
    try:
      values = [np.asarray(v, np.float64) for v in inverse_mass]
    except (TypeError, ValueError) as e:
      raise TypeError(f"`inverse_mass` holds a value that is not numeric "
                      f"({e}). " + _FIX) from None
    number = False
  else:
    raise TypeError(f"`inverse_mass` must be a number or a list of arrays; "
                    f"got a {type(inverse_mass).__name__}. " + _FIX)
  for i, v in enumerate(values):
    bad = ~(np.isfinite(v) & (v > 0.))
    if np.any(bad):
      where = "" if number else f"[{i}]"
      raise ValueError(
          f"`inverse_mass`{where} must be positive and finite everywhere "
          f"(M^{{-1}}, a variance); got {float(v[bad].ravel()[0])!r} at "
          f"{int(np.sum(bad))} of its {v.size} entries. " + _FIX)
  return float(values[0]) if number else values


def check_inverse_mass_shapes(inverse_mass, variables):
  """At build: one array per trainable weight, shaped like it."""
  if not isinstance(inverse_mass, list):
    return
  shapes = [tuple(v.shape) for v in variables]
  seen = [tuple(np.shape(m)) for m in inverse_mass]
  if len(seen) != len(shapes) or any(
      m not in ((), s) for m, s in zip(seen, shapes)):
    raise ValueError(
        f"`inverse_mass` has {len(seen)} arrays of shapes {seen}, but the "
        f"model has {len(shapes)} trainable weights of shapes {shapes}: give "
        "one array per weight, shaped like it (or a number for the whole "
        "weight). " + _FIX)


def initial_inverse_mass(inverse_mass, momentum_std, variables):
  """M^{-1} per weight, shaped like it: the given values, or sigma^-2 (the
  sampler's sigma^2 I) where none were given."""
  if inverse_mass is None:
    inverse_mass = 1. / float(momentum_std) ** 2
  if not isinstance(inverse_mass, list):
    inverse_mass = [inverse_mass] * len(variables)
  return [np.broadcast_to(np.asarray(m, np.float64), tuple(v.shape))
          for m, v in zip(inverse_mass, variables)]


def momentum_distribution(inverse_mass, position):
  """N(0, M) for one chain (no chain axes) of weights `position`, with
  M^{-1} = `inverse_mass` (tensors shaped like the weights)."""
  return diagonal_momentum_distribution(position, batch_ndims=0,
                                        inverse_mass=list(inverse_mass))


class DiagonalMass:
  """The mass matrix of a Keras Hamiltonian sampler (mixed into one with a
  `momentum_std` and an `inverse_mass` parameter, whose `__init__` sets
  `_inverse_mass` to None): sigma^2 I, or diag(1 / M^{-1}) from variables
  made by `_build_mass`."""

  def _build_mass(self, variables, adapted):
    """M^{-1} variables, when `inverse_mass` is given or `adapted` (the
    warm-up estimates it, starting from the given mass or sigma^2 I)."""
    given = self._parameters["inverse_mass"]
    if given is None and not adapted:
      return
    check_inverse_mass_shapes(given, variables)
    self._inverse_mass = self.add_optimizer_variables(variables,
                                                      "inverse_mass")
    for m, value in zip(self._inverse_mass, initial_inverse_mass(
        given, self._parameters["momentum_std"], variables)):
      base.write(m, value)

  def _mass(self):
    """The `dynamics.mass.Mass` in use: diag(1 / M^{-1}) from the
    variables, or sigma^2 I (the dynamics' own path, whose random stream
    and arithmetic the sampler had before it took a mass)."""
    if self._inverse_mass is None:
      return mass_lib.ScaledIdentity(self._parameters["momentum_std"])
    return mass_lib.DiagonalMass([base.read(m) for m in self._inverse_mass])

  def _draw_momentum(self, position, seed):
    """r ~ N(0, M) shaped like `position`."""
    return self._mass().sample(position, seed)

  @property
  def inverse_mass(self):
    """M^{-1}, one numpy array per trainable weight (model.trainable_weights
    order; the warm-up's estimate once it has run, sigma^-2 everywhere for
    sigma^2 I); before the sampler is built, the `inverse_mass` given."""
    if not self.built:
      return self._parameters["inverse_mass"]
    if self._inverse_mass is None:
      sigma = self._parameters["momentum_std"]
      return [np.full(tuple(v.shape), sigma ** -2)
              for v in self._trainable_variables]
    return [base.read(m).numpy() for m in self._inverse_mass]
