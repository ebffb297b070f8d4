"""TFP's step-size adaptation kernels, driven from Keras AMAGOLD's M-H tests.

`tfp.mcmc.SimpleStepSizeAdaptation` and
`tfp.mcmc.DualAveragingStepSizeAdaptation` wrap an inner kernel: before each
inner step they set its `step_size` (found in its results), after it they
read its `log_accept_ratio` and, while `step < num_adaptation_steps`, move
the step size towards the target acceptance; then they freeze it. In `fit`,
one outer step of AMAGOLD (T train steps and one M-H test) happens in Keras;
`OuterStepProbe` stands for it as the inner kernel: its state is the log
acceptance ratio that the test just computed, and its `one_step` reports it
in its results. The adaptation kernel then runs unchanged, with TFP's own
code, and its results live in the sampler's variables (saved by backups).
`SamplingCallback(warmup=n)` is not a TFP kernel but the package's window
adaptation (`WarmupAdaptation`, run by `window_adaptation.WarmupWindows`).
"""

import collections

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

from tfp_sgmcmc import arguments
from tfp_sgmcmc.chains import warmup as warmup_lib
from tfp_sgmcmc.chains.window_adaptation import MASS_ESTIMATES
from tfp_sgmcmc.keras.samplers.window_adaptation import WARMUP_ACCEPT_PROB

__all__ = ["OuterStepProbe", "OuterStepResults", "build_adaptation",
           "warmup_adaptation", "WarmupAdaptation", "WARMUP_ACCEPT_PROB"]

class OuterStepResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("OuterStepResults",
                           ["log_accept_ratio", "step_size"])):
  """The fields TFP's adaptation kernels read and set."""
  __slots__ = ()


class OuterStepProbe(tfp.mcmc.TransitionKernel):
  """The inner kernel of an adaptation kernel driven by Keras M-H tests.

  Its state is the M-H log acceptance ratio of the outer step just made;
  `one_step` returns it as the state and in `log_accept_ratio`, with the
  step size the adaptation kernel set.
  """

  def __init__(self, step_size):
    self._parameters = dict(step_size=step_size)

  @property
  def parameters(self):
    return self._parameters

  @property
  def is_calibrated(self):
    return True

  def one_step(self, current_state, previous_kernel_results, seed=None):
    del seed
    return current_state, previous_kernel_results._replace(
        log_accept_ratio=current_state)

  def bootstrap_results(self, init_state):
    return OuterStepResults(
        log_accept_ratio=tf.zeros_like(init_state),
        step_size=tf.cast(self._parameters["step_size"], init_state.dtype))


def build_adaptation(make_adaptation, step_size, dtype):
  """`make_adaptation(OuterStepProbe(step_size))`, checked, and its
  bootstrap results."""
  kernel = make_adaptation(OuterStepProbe(step_size))
  if not isinstance(kernel, tfp.mcmc.TransitionKernel):
    raise TypeError(
        "`step_size_adaptation` must be a function of the inner kernel "
        "returning a TFP adaptation kernel, e.g. lambda inner: "
        "tfp.mcmc.SimpleStepSizeAdaptation(inner, num_adaptation_steps=500, "
        f"target_accept_prob=0.85); it returned {type(kernel).__name__}.")
  results = kernel.bootstrap_results(tf.zeros([], dtype))
  if not hasattr(results, "new_step_size"):
    raise TypeError(
        f"`step_size_adaptation` returned {type(kernel).__name__}, whose "
        "results have no `new_step_size`: use "
        "tfp.mcmc.SimpleStepSizeAdaptation or "
        "tfp.mcmc.DualAveragingStepSizeAdaptation.")
  return kernel, results


class WarmupAdaptation:
  """`SamplingCallback(warmup=n)`'s adaptation: the window adaptation of
  `tfp_sgmcmc.warm_up` (`window_adaptation.WarmupWindows`) over the first
  n M-H tests, dual averaging of the step size to `WARMUP_ACCEPT_PROB`
  and, with `adapt_mass`, Stan's windows (`tfp_sgmcmc.warmup_windows(n)`)
  in which AMAGOLD estimates its diagonal mass, the dual averaging
  restarting after the first window and after every new mass."""

  def __init__(self, num_steps, adapt_mass, mass_estimate="draws"):
    self.num_steps = num_steps
    self.adapt_mass = adapt_mass
    self.mass_estimate = mass_estimate
    self.windows = (warmup_lib.warmup_windows(num_steps) if adapt_mass
                    else None)


def warmup_adaptation(warmup, step_size_adaptation, has_acceptance_test,
                      adapt_mass=None, mass_estimate=None,
                      exact_gradients=False):
  """`SamplingCallback(warmup=n, adapt_mass=..., mass_estimate=...)` as the
  `step_size_adaptation` it stands for: a `WarmupAdaptation` over the first
  n M-H tests (mass windows unless `adapt_mass` is False), then frozen.
  `mass_estimate` None is "gradients" where they can be had (minibatches of
  the training arrays, `exact_gradients`: the exact test over arrays), else
  "draws": a warm-up of a few hundred tests cannot carry a network's
  weights across their posterior, so the draws' variance underestimates a
  wide weight's, where the gradients at the draws need no crossing."""
  if mass_estimate not in (None,) + MASS_ESTIMATES:
    raise ValueError(f"`mass_estimate` must be one of {MASS_ESTIMATES} or "
                     f"None; got {mass_estimate!r}.")
  if mass_estimate == "gradients" and not exact_gradients:
    raise ValueError(
        "`mass_estimate='gradients'` takes gradients of U at each draw on "
        "minibatches of `energy_data`, which needs the exact test "
        "(acceptance_energy='exact') over (x, y) arrays; give energy_data "
        "as arrays, or mass_estimate='draws'.")
  if mass_estimate is None:
    mass_estimate = "gradients" if exact_gradients else "draws"
  if adapt_mass is not None and not isinstance(adapt_mass, bool):
    raise TypeError(f"`adapt_mass` must be True, False or None; got "
                    f"{adapt_mass!r}.")
  if warmup is None:
    if adapt_mass:
      raise ValueError(
          "`adapt_mass=True` without `warmup`: the diagonal mass is "
          "estimated during the warm-up; give warmup=n (M-H tests), or a "
          "fixed mass with the sampler's inverse_mass=.")
    return step_size_adaptation
  arguments.check_integer("warmup", warmup,
                          hint=" (The number of M-H tests, or None.)")
  if step_size_adaptation is not None:
    raise ValueError("`warmup` and `step_size_adaptation` both set the step "
                     "size's adaptation; give one (warmup=n is dual "
                     "averaging over n tests).")
  if not has_acceptance_test:
    raise ValueError(
        f"`warmup={warmup}` tunes the step size to an acceptance rate of "
        "the M-H test, which only AMAGOLD runs in fit. For SGLD or SGHMC, "
        "warm up the kernel on a tfp_sgmcmc target with "
        "tfp_sgmcmc.warm_up(kernel, state) and give the Keras sampler "
        "its report.step_size.")
  adapt_mass = True if adapt_mass is None else adapt_mass
  if adapt_mass and warmup < 20:
    raise ValueError(
        f"`warmup={warmup}` with the mass adapted: Stan's windows (a fast, "
        "a slow and a final window) need warmup >= 20 M-H tests; give more "
        "tests, or adapt_mass=False for the step size alone.")
  return WarmupAdaptation(warmup, adapt_mass, mass_estimate)
