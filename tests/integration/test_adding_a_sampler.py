"""The steps of docs/architecture.md's "Adding a sampler", followed for a
toy sampler outside the package: a dynamics function, a thin kernel, and
the warm-up protocol, after which `tfp_sgmcmc.warm_up` tunes it with
nothing in `chains/` changed."""

import collections
import inspect

import numpy as np
import tensorflow as tf
from tensorflow_probability.python.mcmc.internal import util as mcmc_util

import tfp_sgmcmc as sg
from tfp_sgmcmc import dynamics
from tfp_sgmcmc import random
from tfp_sgmcmc.chains import warmup as warmup_module
from tfp_sgmcmc.kernels import base
from tfp_sgmcmc.kernels import interop
from tfp_sgmcmc.kernels import tuning


# Step 1: the update, a pure function of a structure of tensors.
def toy_update(position, momentum, gradient, step_size, friction, seed,
               momentum_distribution=None):
  """Underdamped Langevin with an exact friction flow:

      r' = e^{-C h} r - h grad U~(theta) + sqrt(1 - e^{-2 C h}) z,
      theta' = theta + h M^{-1} r',          z ~ N(0, M).
  """
  mass = dynamics.as_mass(momentum_distribution)
  _, noise_seed = random.derive_seeds(seed, 2)
  noise = mass.sample(momentum, noise_seed)
  decay = tf.exp(-friction * step_size)
  new_momentum = tf.nest.map_structure(
      lambda r, g, z: decay * r - step_size * g +
      tf.sqrt(1. - decay * decay) * z, momentum, gradient, noise)
  return mass.drift(position, new_momentum, step_size), new_momentum


# Step 2: a thin kernel.
class ToyResults(
    mcmc_util.PrettyNamedTupleMixin,
    collections.namedtuple("ToyResults", [
        "momentum", "energy", "step_size", "step_count", "diverged", "seed",
        "target_log_prob"])):
  __slots__ = ()


class ToyKernel(base.StochasticGradientKernel):
  _results_type = ToyResults
  _scope = "toy"

  def __init__(self, target=None, step_size=None, friction=1., name=None,
               target_log_prob_fn=None, store_parameters_in_results=False,
               momentum_distribution=None):
    self._target, target, target_log_prob_fn = interop.resolve_target(
        target, target_log_prob_fn)
    self._parameters = dict(
        target=target, step_size=step_size, friction=friction, name=name,
        target_log_prob_fn=target_log_prob_fn,
        store_parameters_in_results=store_parameters_in_results,
        momentum_distribution=momentum_distribution)

  @property
  def friction(self):
    return self._parameters["friction"]

  @property
  def momentum_distribution(self):
    return self._parameters["momentum_distribution"]

  @property
  def temperature(self):
    return 1.

  def _transition(self, state, prev, step):
    batch_seed, _ = random.derive_seeds(step.seed, 2)
    energy, grad = base.minibatch_energy_and_gradient(
        self.target, state, batch_seed, self.compute_energy)
    new_state, new_momentum = toy_update(
        state, prev.momentum, grad, step.size, self.friction, step.seed,
        self.momentum_distribution)
    return base.Move(new_state, energy, checked=[new_state, new_momentum],
                     kept=dict(momentum=new_momentum))

  def _initial_fields(self, init_state, energy):
    return dict(momentum=tf.nest.map_structure(tf.zeros_like, init_state))

  # Step 4: the warm-up protocol (tfp_sgmcmc.kernels.tuning).
  _warmup_takes_mass = True

  def _warmup_test_kernel(self, num_test_steps, momentum_distribution):
    return tuning.friction_test_kernel(self, self.friction, num_test_steps,
                                       momentum_distribution)


SCALES = np.array([0.1, 1.], np.float32)


def _target():
  scales = tf.constant(SCALES)
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x / scales) ** 2, -1),
      gradient_noise_variance=0.)


def test_the_toy_kernel_samples():
  kernel = ToyKernel(_target(), step_size=0.05)
  state = tf.zeros([4, 2])
  results = kernel.bootstrap_results(state)
  for i in range(3):
    state, results = kernel.one_step(state, results, seed=[0, i])
  assert state.shape == (4, 2) and not np.any(results.diverged)


def test_warm_up_tunes_a_new_sampler_through_its_protocol():
  # Started 30x too small: the warm-up finds the step size, and the mass
  # it adapts tells the narrow coordinate from the wide one.
  # Graph mode: the protocol is the subject, not XLA (which compiles at
  # more cost than the run).
  warm = sg.warm_up(ToyKernel(_target(), step_size=0.003), tf.zeros([4, 2]),
                    num_steps=300, seed=[1, 2], num_test_steps=5,
                    jit_compile=False)
  assert type(warm.kernel) is ToyKernel  # pylint: disable=unidiomatic-typecheck
  assert warm.kernel.step_size == warm.report.step_size
  assert warm.report.step_size > 10 * 0.003, warm.report
  assert abs(warm.report.acceptance - 0.75) < 0.15, warm.report
  variance = warm.report.variance[0]
  assert variance[1] > 10. * variance[0], variance
  assert warm.kernel.momentum_distribution is (
      warm.report.momentum_distribution)
  assert warm.report.num_gradients == 300 * 5


def test_chains_imports_no_kernel_class():
  source = inspect.getsource(warmup_module)
  imports = [line for line in source.splitlines()
             if line.startswith(("import ", "from "))]
  assert imports and not [i for i in imports if "kernels" in i], imports
  assert "isinstance(kernel," not in source
  assert "type(kernel) is" not in source
