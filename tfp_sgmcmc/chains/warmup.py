"""A warm-up in one call: the step size (and a diagonal mass matrix) of a
stochastic-gradient kernel tuned on an exact amortized M-H test, then frozen.

`warm_up(kernel, initial_state, num_steps, seed)` runs Stan's window
adaptation (Stan Reference Manual, "HMC algorithm parameters"; BlackJAX's
`window_adaptation`) on a chain that an amortized Metropolis-Hastings test
makes exact (Zhang, Cooper & De Sa 2020, eq. 6):

* AMAGOLD is tested by its own test;
* SGHMC and SGNHT by AMAGOLD's test around their dynamics,
  dr = -grad U~ dt - C r dt + N(0, 2 C dt), dtheta = M^-1 r dt, integrated
  with AMAGOLD's time-symmetric kick (friction beta = C / 2; SGNHT's C is
  its diffusion A, where its thermostat settles without gradient noise), the
  one integrator of these dynamics whose reverse path has a tractable
  density: their Euler step moves theta with the new momentum, so its
  momentum-flipped reverse move has no density;
* SGLD by `UncalibratedLangevinPath`: T of SGLD's own steps with their
  Gaussian path ratio (two minibatch gradients per step, warm-up only).

The step size follows dual averaging (Hoffman & Gelman 2014, Stan's
constants) to `target_accept_prob` of that test, restarted at each new mass
matrix; the diagonal mass matrix (Hamiltonian kernels that take a
`momentum_distribution`) is the inverse of the warm-up draws' variance in
expanding "slow" windows between a fast first and last window. Then both are
frozen: the returned kernel is a plain kernel with a fixed step size (and
mass), so AMAGOLD's sampling phase is exact. Each window is one compiled
loop (`jit_compile=True` by default; no Python per step).
"""

import collections
import time

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import random
from tfp_sgmcmc.dynamics.hamiltonian import diagonal_momentum_distribution
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.kernels.amagold import AMAGOLD, UncalibratedAMAGOLD
from tfp_sgmcmc.kernels.amortized_mh import AmortizedMetropolisHastings
from tfp_sgmcmc.kernels.langevin_path import UncalibratedLangevinPath
from tfp_sgmcmc.kernels.sghmc import SGHMC
from tfp_sgmcmc.kernels.sgld import SGLD
from tfp_sgmcmc.kernels.sgnht import SGNHT

__all__ = ["warm_up", "WarmupResult", "WarmupReport", "warmup_windows",
           "regularized_variance"]

# Dual averaging's constants (Hoffman & Gelman 2014, Stan's defaults).
_GAMMA, _T0, _KAPPA = 0.05, 10., 0.75


class WarmupReport(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("WarmupReport", [
        "step_size", "variance", "momentum_distribution", "windows",
        "acceptance", "num_steps", "num_gradients", "seconds"])):
  """What the warm-up tuned and how (`WarmupResult.report`).

  Attributes:
    step_size: the frozen step size (the dual-averaged value of the last
      window).
    variance: per state part, the estimated posterior variance of each
      coordinate (the inverse of the diagonal mass), or None where no mass
      matrix was adapted.
    momentum_distribution: the frozen momentum distribution (TFP's
      convention: p ~ N(0, M), log_prob = -K(p)), or None.
    windows: one dict per window: `kind` ("fast" or "slow"), `steps`,
      `step_size` at its end, `acceptance` (its mean acceptance
      probability), `seconds`.
    acceptance: mean acceptance probability of the test over the last
      window.
    num_steps: warm-up steps (tests) run.
    num_gradients: minibatch (or full-batch) gradient evaluations spent.
    seconds: wall time, compilation included.
  """
  __slots__ = ()


class WarmupResult(collections.namedtuple("WarmupResult",
                                          ["kernel", "state", "report"])):
  """What `warm_up` returns.

  Attributes:
    kernel: the tuned kernel (fixed step size, and mass where adapted).
    state: the chain's state at the end of the warm-up (start sampling
      there).
    report: a `WarmupReport`.
  """
  __slots__ = ()


def warmup_windows(num_steps, initial_buffer=75, final_buffer=50,
                   base_window=25):
  """Stan's windows: [(kind, steps)], a fast window, slow windows doubling
  from `base_window` (the last stretched to the end), a fast window.

  When `num_steps` is below initial_buffer + base_window + final_buffer the
  three are shrunk to 15% / 75% / 10% of it, as Stan does.

  Args:
    num_steps: the warm-up's length, an integer >= 20.
    initial_buffer: steps of the first fast window (step size only).
    final_buffer: steps of the last fast window (step size only, with the
      mass frozen).
    base_window: steps of the first slow window (step size and mass); each
      next slow window is twice as long, the last one stretched to end
      where the final buffer starts.

  Returns:
    A list of `(kind, steps)` pairs, `kind` "fast" or "slow", whose steps
    sum to `num_steps`; windows of 0 steps are left out.

  Raises:
    ValueError: `num_steps` < 20.

  #### Example

  ```python
  print(tfp_sgmcmc.warmup_windows(1000))
  # [('fast', 75), ('slow', 25), ('slow', 50), ('slow', 100),
  #  ('slow', 200), ('slow', 500), ('fast', 50)]
  assert sum(n for _, n in tfp_sgmcmc.warmup_windows(1000)) == 1000
  ```
  """
  if num_steps < 20:
    raise ValueError(f"`num_steps` of the warm-up must be >= 20 (a fast, a "
                     f"slow and a final window); got {num_steps}.")
  if initial_buffer + base_window + final_buffer > num_steps:
    initial_buffer = int(0.15 * num_steps)
    final_buffer = int(0.1 * num_steps)
    base_window = num_steps - initial_buffer - final_buffer
  windows = [("fast", initial_buffer)]
  end = num_steps - final_buffer
  start, size = initial_buffer, base_window
  while start < end:
    if start + size + 2 * size > end:
      size = end - start
    windows.append(("slow", size))
    start += size
    size *= 2
  windows.append(("fast", final_buffer))
  return [(k, n) for k, n in windows if n > 0]


def regularized_variance(variance, num_draws):
  """Stan's regularisation of a slow window's variance estimate, the M^{-1}
  that the next window uses: shrunk towards 1e-3 with weight 5 / (n + 5),

      M^{-1} = n / (n + 5) var + 1e-3 * 5 / (n + 5),

  which keeps M^{-1} positive when a coordinate barely moved in the window.

  Args:
    variance: per state part, the window draws' variance (a tensor or a
      list of tensors).
    num_draws: n, the draws the variance was estimated from (a number or a
      scalar tensor).

  Returns:
    M^{-1}, in the structure of `variance`.

  ```python
  print(tfp_sgmcmc.chains.warmup.regularized_variance([1.], 45.))  # [0.9001]
  ```
  """
  return tf.nest.map_structure(
      lambda v: (num_draws / (num_draws + 5.)) * v +
      1e-3 * (5. / (num_draws + 5.)), variance)


def _kind_of(kernel):
  for cls in (AMAGOLD, SGHMC, SGNHT, SGLD):
    if type(kernel) is cls:  # pylint: disable=unidiomatic-typecheck
      return cls.__name__
  raise TypeError(
      f"`kernel` is a {type(kernel).__name__}; warm_up tunes AMAGOLD, SGHMC, "
      "SGNHT and SGLD (built on a tfp_sgmcmc target, not wrapped). Pass the "
      "bare kernel; wrap the tuned kernel it returns afterwards.")


def _takes_mass(kernel):
  return ("momentum_distribution" in kernel.parameters and
          not kernel.parameters.get("noise_estimate"))


def _check_temperature(kernel, kind):
  temperature = kernel.parameters.get("temperature", 1.)
  if kind != "AMAGOLD" and float(temperature) != 1.:
    raise ValueError(
        f"{kind} has temperature={temperature!r}; warm_up tunes the step "
        "size of the posterior's chain (temperature 1). Warm up at "
        "temperature 1 and copy the tuned kernel with your temperature.")


def _test_kernel(kernel, kind, num_test_steps, momentum_distribution):
  """The exact chain whose acceptance tunes `kernel`'s step size."""
  mass = ({} if momentum_distribution is None else
          dict(momentum_distribution=momentum_distribution))
  if kind == "AMAGOLD":
    if mass:
      # The mass replaces sigma (momentum_std = 1 with a distribution).
      mass["momentum_std"] = 1.
    return kernel.copy(store_parameters_in_results=True, **mass)
  target = kernel.target
  if kind == "SGLD":
    proposal = UncalibratedLangevinPath(
        target, step_size=kernel.step_size, num_steps=num_test_steps,
        store_parameters_in_results=True)
  else:
    friction = (kernel.friction if kind == "SGHMC" else kernel.diffusion)
    proposal = UncalibratedAMAGOLD(
        target, step_size=kernel.step_size, num_leapfrog_steps=num_test_steps,
        friction=0.5 * float(friction),
        # The minibatch energy is a diagnostic the test does not read; a
        # full-batch target's comes with its gradient and is kept.
        compute_energy=interop.reports_exact_log_prob(target),
        store_parameters_in_results=True, **mass)
  return AmortizedMetropolisHastings(proposal, target=target)


def _set_step_size(results, step_size):
  inner = results.accepted_results
  return results._replace(accepted_results=inner._replace(
      step_size=tf.cast(step_size, inner.step_size.dtype)))


def _restart(log_step):
  """Dual averaging's state (log eps, log eps-bar, H-bar, t, mu) started at
  eps, with its search centred on mu = log(10 eps)."""
  zero = tf.zeros_like(log_step)
  return (log_step, log_step, zero, zero, log_step + np.log(10.))


def _momentum_distribution(state, batch_ndims, variance):
  return diagonal_momentum_distribution(tf.nest.flatten(state), batch_ndims,
                                        inverse_mass=variance)


def warm_up(kernel, initial_state, num_steps=1000, seed=None,
            target_accept_prob=0.75, num_test_steps=10, adapt_mass=None,
            initial_buffer=75, final_buffer=50, base_window=25,
            jit_compile=True):
  """Tunes `kernel`'s step size (and diagonal mass) and returns it frozen.

  #### Examples

  ```python
  kernel = tfp_sgmcmc.AMAGOLD(target, step_size=0.01, num_leapfrog_steps=10,
                              friction=0.5)
  warm = tfp_sgmcmc.warm_up(kernel, tf.zeros([4, d]), num_steps=200,
                            seed=[1, 2])
  samples = tf.function(lambda: tfp.mcmc.sample_chain(   # one XLA program
      500, warm.state, kernel=warm.kernel, trace_fn=None, seed=[3, 4]),
      jit_compile=True)()
  print(warm.report.step_size, warm.report.variance)   # what was tuned
  ```

  Args:
    kernel: an `AMAGOLD`, `SGHMC`, `SGNHT` or `SGLD` with a constant step
      size, the starting guess (dual averaging starts its search at 10x it).
    initial_state: the chains' starting state (leading chain axes).
    num_steps: warm-up steps (each one amortized test of a trajectory).
    seed: stateless seed.
    target_accept_prob: the test's acceptance to reach (0.75: Stan's 0.8
      less a margin for the gradient noise, which the test also sees).
    num_test_steps: T, gradient steps per test for SGHMC, SGNHT and SGLD
      (AMAGOLD uses its `num_leapfrog_steps`).
    adapt_mass: estimate a diagonal mass matrix (default: where the kernel
      takes a `momentum_distribution`).
    initial_buffer, final_buffer, base_window: Stan's window sizes.
    jit_compile: compile each window with XLA.

  Returns:
    `WarmupResult(kernel, state, report)`.
  """
  kind = _kind_of(kernel)
  _check_temperature(kernel, kind)
  if callable(kernel.step_size) and not tf.is_tensor(kernel.step_size):
    raise TypeError("`kernel.step_size` is a schedule; warm_up tunes one "
                    "constant step size. Build the kernel with a float.")
  if isinstance(kernel.step_size, (list, tuple)):
    raise TypeError("`kernel.step_size` is one per state part; warm_up tunes "
                    "one step size (the mass matrix scales the parts).")
  if not 0. < target_accept_prob < 1.:
    raise ValueError(f"`target_accept_prob` must be in (0, 1); got "
                     f"{target_accept_prob!r}.")
  if adapt_mass is None:
    adapt_mass = _takes_mass(kernel) and kind != "SGLD"
  elif adapt_mass and (kind == "SGLD" or not _takes_mass(kernel)):
    raise ValueError(
        f"`adapt_mass=True` but this {kind} takes no `momentum_distribution` "
        "(SGLD has no mass matrix; SGHMC takes one only with "
        "noise_estimate=0); use adapt_mass=False, or a Hamiltonian kernel "
        "(AMAGOLD, SGHMC, SGNHT).")
  windows = warmup_windows(num_steps, initial_buffer, final_buffer,
                           base_window)
  state = tf.nest.map_structure(tf.convert_to_tensor, initial_state)
  parts = tf.nest.flatten(state)
  dtype = parts[0].dtype
  seed = tfp.random.sanitize_seed(seed)
  probe = _test_kernel(kernel, kind, num_test_steps, None)
  batch_ndims = probe.bootstrap_results(state).log_accept_ratio.shape.rank
  event_shapes = [p.shape[batch_ndims:] for p in parts]
  variance = [tf.ones(s, dtype) for s in event_shapes]
  grads_per_step = (kernel.num_leapfrog_steps if kind == "AMAGOLD" else
                    2 * num_test_steps if kind == "SGLD" else num_test_steps)

  def run_window(state, seed, da, variance, num_window_steps):
    dist = (_momentum_distribution(state, batch_ndims, variance)
            if adapt_mass else None)
    test = _test_kernel(kernel, kind, num_test_steps, dist)
    results = test.bootstrap_results(state)
    axes = list(range(batch_ndims))
    shift = [tf.reduce_mean(p, axes) for p in tf.nest.flatten(state)]

    def body(i, state, results, seed, da, sums, accept_sum):
      log_eps, log_eps_bar, h_bar, t, mu = da
      seed, step_seed = random.split_seed(seed, 2)
      results = _set_step_size(results, tf.exp(log_eps))
      state, results = test.one_step(state, results, step_seed)
      ratio = results.log_accept_ratio
      accept = tf.reduce_mean(tf.where(
          tf.math.is_nan(ratio), tf.zeros_like(ratio),
          tf.exp(tf.minimum(ratio, 0.))))
      t = t + 1.
      eta = 1. / (t + _T0)
      h_bar = (1. - eta) * h_bar + eta * (target_accept_prob - accept)
      log_eps = mu - tf.sqrt(t) / _GAMMA * h_bar
      w = t ** -_KAPPA
      log_eps_bar = w * log_eps + (1. - w) * log_eps_bar
      centred = [p - s for p, s in zip(tf.nest.flatten(state), shift)]
      sums = ([a + tf.reduce_sum(c, axes) for a, c in zip(sums[0], centred)],
              [b + tf.reduce_sum(c * c, axes)
               for b, c in zip(sums[1], centred)])
      return (i + 1, state, results, seed, (log_eps, log_eps_bar, h_bar, t, mu),
              sums, accept_sum + accept)

    zeros = [tf.zeros_like(s) for s in shift]
    _, state, _, seed, da, sums, accept_sum = tf.while_loop(
        lambda i, *_: i < num_window_steps, body,
        (tf.constant(0), state, results, seed, da, (zeros, list(zeros)),
         tf.zeros([], dtype)))
    n = tf.cast(num_window_steps, dtype) * tf.cast(
        tf.reduce_prod(tf.shape(parts[0])[:batch_ndims]), dtype)
    window_variance = [s2 / n - tf.square(s1 / n)
                       for s1, s2 in zip(sums[0], sums[1])]
    return (state, seed, da, window_variance,
            accept_sum / tf.cast(num_window_steps, dtype))

  compiled = tf.function(run_window, jit_compile=jit_compile,
                         autograph=False)
  report_windows = []
  da = _restart(tf.math.log(tf.cast(kernel.step_size, dtype)))
  start = time.perf_counter()
  for kind_w, steps in windows:
    t0 = time.perf_counter()
    state, seed, da, window_variance, accept = compiled(
        state, seed, da, variance, tf.constant(steps))
    if kind_w == "slow" and adapt_mass:
      # Stan's regularisation: shrink towards 1e-3 with weight 5 / (n + 5).
      n = float(steps) * float(np.prod(parts[0].shape[:batch_ndims]))
      variance = regularized_variance(window_variance, n)
      # Dual averaging starts again from the step size reached so far
      # (Stan), its search centred there.
      da = _restart(da[1])
    elif not report_windows:
      # After the first window too, so that the user's guess, which
      # centres the first search, is forgotten.
      da = _restart(da[1])
    report_windows.append(dict(
        kind=kind_w, steps=steps, step_size=float(np.exp(da[1])),
        acceptance=float(accept), seconds=time.perf_counter() - t0))
  step_size = float(np.exp(da[1]))
  dist = (_momentum_distribution(state, batch_ndims, variance)
          if adapt_mass else None)
  mass = {} if dist is None else dict(momentum_distribution=dist)
  if mass and kind == "AMAGOLD":
    mass["momentum_std"] = 1.
  tuned = kernel.copy(step_size=step_size, **mass)
  report = WarmupReport(
      step_size=step_size,
      variance=[v.numpy() for v in variance] if adapt_mass else None,
      momentum_distribution=dist, windows=report_windows,
      acceptance=report_windows[-1]["acceptance"], num_steps=num_steps,
      num_gradients=num_steps * grads_per_step,
      seconds=time.perf_counter() - start)
  return WarmupResult(tuned, tf.nest.pack_sequence_as(
      initial_state, tf.nest.flatten(state)), report)
