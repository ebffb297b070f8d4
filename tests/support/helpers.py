"""Shared test machinery: running chains, Monte Carlo error, exact predictions.

Tolerances in the statistical tests come from two sources only:

* Monte Carlo error: the standard error of a chain average is
  sqrt(var / ESS), with the effective sample size estimated by
  `tfp.mcmc.effective_sample_size` on the very quantity averaged (theta for
  means, (theta - mean)^2 for variances), summed over chains. Chains that
  share minibatches (InMemoryTarget's default, DatasetTarget) are
  correlated, and then the sum overstates the information: the standard
  error is also computed from the chain-averaged series (whose mean is the
  same grand mean, and whose own ESS sees the cross-chain correlation), and
  the larger of the two is used.
* The integrator's known bias: on a Gaussian target every kernel here is a
  linear Gaussian recursion x' = A x + w, w ~ N(0, Q) in (theta, r), so its
  stationary covariance solves the discrete Lyapunov equation
  S = A S A^T + Q exactly (`stationary_covariance`). Tests compare the chain
  with that prediction within Monte Carlo error, and the prediction with the
  truth to state the bias.
"""

import importlib.util
import os

import numpy as np
import scipy.linalg
import tensorflow as tf
import tensorflow_probability as tfp

NUM_SE = 4.  # Two-sided 4-sigma: a false alarm about once in 16,000 checks.
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def load_example(name):
  """The module examples/<name>.py, e.g. name "papers/amagold/double_well"
  (examples/ is not a package). Its folder goes on sys.path, as when the
  script runs, so that it imports its sibling modules."""
  import sys  # pylint: disable=import-outside-toplevel
  path = os.path.join(EXAMPLES, *name.split("/")) + ".py"
  folder = os.path.dirname(os.path.abspath(path))
  if folder not in sys.path:
    sys.path.insert(0, folder)
  spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3],
                                                path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def sample(kernel, init, num_results, seed, jit=True, trace_fn=None,
           num_burnin_steps=0, previous_kernel_results=None):
  """`tfp.mcmc.sample_chain`, compiled with XLA unless `jit=False`."""
  def run(seed):
    return tfp.mcmc.sample_chain(
        num_results, init, kernel=kernel, trace_fn=trace_fn,
        num_burnin_steps=num_burnin_steps, seed=seed,
        previous_kernel_results=previous_kernel_results)
  fn = tf.function(run, jit_compile=jit, autograph=False)
  return fn(tf.constant(seed, tf.int32))


def ess(draws):
  """Total ESS over chains of draws with shape [n, chains, ...]."""
  e = tfp.mcmc.effective_sample_size(tf.convert_to_tensor(draws),
                                     filter_beyond_positive_pairs=True)
  return np.sum(np.asarray(e), axis=0)


def mean_and_se(draws):
  """Mean over draws and chains, and its Monte Carlo standard error.

  The error allows for chains correlated through shared minibatches: it is
  the larger of the independent-chains error and the error of the mean of
  the chain-averaged series.
  """
  draws = np.asarray(draws, np.float64)
  flat = draws.reshape((-1,) + draws.shape[2:])
  mean = flat.mean(axis=0)
  var = flat.var(axis=0)
  se_independent = np.sqrt(var / ess(draws))
  if draws.ndim < 2 or draws.shape[1] < 2:
    return mean, se_independent
  averaged = draws.mean(axis=1, keepdims=True)
  se_averaged = np.sqrt(averaged.var(axis=0)[0] / ess(averaged))
  return mean, np.maximum(se_independent, se_averaged)


def variance_and_se(draws, mean=None):
  """Variance over draws and chains, and its Monte Carlo standard error."""
  draws = np.asarray(draws, np.float64)
  if mean is None:
    mean = draws.reshape((-1,) + draws.shape[2:]).mean(axis=0)
  sq = (draws - mean) ** 2
  return mean_and_se(sq)


def stationary_covariance(scheme, precision, step_size, friction=0.,
                          gradient_noise=None, noise_estimate=0.,
                          temperature=1., inverse_mass=None):
  """Exact stationary covariance of theta for a kernel on a Gaussian target.

  The target is N(mu, precision^-1); the stochastic gradient is
  precision (theta - mu) + N(0, gradient_noise). `scheme` is "sgld",
  "euler" (SGHMC Euler form) or "splitting" (ABOBA); SGHMC's mass matrix M
  is the inverse of `inverse_mass` (d x d; default I): drifts by
  h M^{-1} r, injected noise N(0, 2 (C T - B-hat) h M). Returns the d x d
  covariance of theta in the chain's stationary distribution.
  """
  p = np.atleast_2d(np.asarray(precision, np.float64))
  d = p.shape[0]
  h, c, t = float(step_size), float(friction), float(temperature)
  v = (np.zeros((d, d)) if gradient_noise is None
       else np.atleast_2d(np.asarray(gradient_noise, np.float64)))
  if v.shape == (1, 1) and d > 1:
    v = v[0, 0] * np.eye(d)
  eye, zero = np.eye(d), np.zeros((d, d))
  if scheme == "sgld":
    a = eye - h * p
    q = h * h * v + 2 * h * t * eye
    return scipy.linalg.solve_discrete_lyapunov(a, q)
  b_hat = float(noise_estimate)
  m_inv = eye if inverse_mass is None else np.atleast_2d(
      np.asarray(inverse_mass, np.float64))
  q_r = h * h * v + max(2 * (c * t - b_hat) * h, 0.) * np.linalg.inv(m_inv)
  if scheme == "euler":
    # r' = (1 - hC) r - h P theta + w ;  theta' = theta + h M^-1 r'.
    momentum = np.block([[eye, zero], [-h * p, (1 - h * c) * eye]])
    position = np.block([[eye, h * m_inv], [zero, eye]])
    a = position @ momentum
    g = position @ np.block([[zero], [eye]])
  elif scheme == "splitting":
    half_drift = np.block([[eye, 0.5 * h * m_inv], [zero, eye]])
    decay = np.block([[eye, zero], [zero, np.exp(-0.5 * c * h) * eye]])
    kick = np.block([[eye, zero], [-h * p, eye]])
    after_kick = half_drift @ decay
    a = after_kick @ kick @ decay @ half_drift
    g = after_kick @ np.block([[zero], [eye]])
  else:
    raise ValueError(scheme)
  q = g @ q_r @ g.T
  s = scipy.linalg.solve_discrete_lyapunov(a, q)
  return s[:d, :d]


def assert_seeded_chains(kernel, initial_state, num_results, seeds,
                         trace_fn=None, chains_differ=True):
  """One compiled chain at seeds (s, s, t): the same chain (and trace) for
  the same seed, another for another seed, and, where `chains_differ`,
  batched chains that differ from each other (independent draws)."""
  @tf.function(jit_compile=True, autograph=False)
  def run(seed):
    return tfp.mcmc.sample_chain(num_results, initial_state, kernel=kernel,
                                 trace_fn=trace_fn, seed=seed)
  a, b, c = [run(tf.constant(s)) for s in seeds]
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_array_equal(x, y)
  first = lambda run: np.asarray(tf.nest.flatten(run)[0])
  assert not np.allclose(first(a), first(c))
  if chains_differ:
    assert not np.allclose(first(a)[:, 0], first(a)[:, 1])


def assert_diverged_chain_frozen(kernel, initial_state, num_steps=200):
  """Chain 0 diverges and chain 1 must not: once flagged, chain 0 stays
  flagged and stays at its last finite state. Returns that state."""
  draws, diverged = sample(kernel, initial_state, num_steps, seed=[1, 2],
                           trace_fn=lambda _, r: r.diverged)
  draws, diverged = np.asarray(draws), np.asarray(diverged)
  assert diverged[-1, 0] and not diverged[:, 1].any()
  assert np.all(np.isfinite(draws))
  first = np.argmax(diverged[:, 0])
  assert diverged[first:, 0].all()
  assert np.all(draws[first:, 0] == draws[first, 0])
  return draws[first, 0]
