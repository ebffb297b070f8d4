"""A property-based test throws random constructor arguments and data shapes
at the library: every draw must give either a clear error (ValueError /
TypeError) naming one of the drawn arguments before sampling, or a finite
chain whose mean over 256 chains follows the update rule (SGLD, SGHMC)
within 5 standard errors.
"""

from hypothesis import HealthCheck, event, given, settings, strategies as st
import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.bad_inputs import location_ll, quadratic


FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0., -1., 1e-3, 0.1, 1., 1e6]))


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["sgld", "sghmc", "sgnht", "psgld", "amagold"]),
       step_size=FLOATS, friction=FLOATS, n=st.integers(0, 6),
       d=st.integers(1, 3), batch_size=st.integers(-1, 8))
def test_random_arguments_give_a_clear_error_or_a_finite_chain(
    kind, step_size, friction, n, d, batch_size):
  def build():
    x = np.ones((n, d), np.float32)
    target = sg.InMemoryTarget(location_ll, x, batch_size,
                               log_prior_fn=lambda w: -quadratic(w),
                               parameter_shapes=[d])
    if kind == "sgld":
      return sg.SGLD(target, step_size)
    if kind == "sghmc":
      return sg.SGHMC(target, step_size, friction)
    if kind == "sgnht":
      return sg.SGNHT(target, step_size, friction)
    if kind == "psgld":
      return sg.PreconditionedSGLD(target, step_size)
    return sg.AMAGOLD(target, step_size, 2, friction)
  try:
    kernel = build()
  except (ValueError, TypeError) as e:
    # The message names the argument that was wrong (one of those drawn
    # here), not just any name in backticks.
    names = ("`step_size`", "`friction`", "`batch_size`", "`data`",
             "`diffusion`", "`num_examples`")
    assert any(name in str(e) for name in names), (
        f"error does not name the argument: {e}")
    event("clear error before sampling")
    return
  event("chain ran")
  chains = 256
  state = tf.zeros([chains, d])
  results = kernel.bootstrap_results(state)
  for i in range(3):
    state, results = kernel.one_step(state, results, seed=[i, 1])
  # The state stays finite; if its energy has overflowed, the next step
  # (which evaluates it) flags the chain as diverged and keeps it there.
  assert np.all(np.isfinite(state))
  energy = kernel.target.energy(state)
  if not np.all(np.isfinite(energy)):
    next_state, results = kernel.one_step(state, results, seed=[9, 1])
    assert bool(np.all(sg.diagnostics.find_field(results, "diverged")))
    np.testing.assert_array_equal(next_state, state)
    return
  # The result is right, not just finite: every example is a row of ones,
  # so the minibatch gradient is exact, grad U = (n + 1) w - n, and the
  # chains' mean follows the deterministic recursion of the update rule
  # (SGLD: m' = m - h grad U(m); SGHMC, Euler: r' = (1 - hC) r - h grad U,
  # w' = w + h r', from r = 0 in mean). Chains are independent here (no
  # gradient noise, independent injected noise): 5 standard errors.
  h, c = float(step_size), float(friction)
  if kind in ("sgld", "sghmc") and h * (n + 1) < 1.:
    m, r = np.zeros(d), np.zeros(d)
    for _ in range(3):
      grad = (n + 1) * m - n
      if kind == "sgld":
        m = m - h * grad
      else:
        r = (1 - h * c) * r - h * grad
        m = m + h * r
    draws = np.asarray(state)
    se = draws.std(axis=0, ddof=1) / np.sqrt(chains)
    assert np.all(np.abs(draws.mean(axis=0) - m) <= 5 * se + 1e-6), (
        draws.mean(axis=0), m, se)
    event("mean checked against the update rule")
