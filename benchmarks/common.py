"""The benchmarks' problems and gradient floors: the Bayesian logistic
regressions (synthetic and Statlog Australian, also with one minibatch per
chain), the posterior mode, and the floor kernel and loop that a sampler
step is compared with. How they are timed is in harness.py.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

SHARED_DATA = os.path.abspath(os.path.join(
    os.path.dirname(__file__), "..", "..", "shared", "data"))


class LogisticProblem:
  """Bayesian logistic regression with a N(0, 1) prior (no intercept term
  beyond what the design matrix holds)."""

  def __init__(self, x, y, batch_size, name):
    self.x = np.asarray(x, np.float32)
    self.y = np.asarray(y, np.float32)
    self.n, self.d = self.x.shape
    self.batch_size = batch_size
    self.name = name

  @staticmethod
  def log_likelihood(w, batch):
    x, y = batch
    logits = tf.einsum("nd,...d->...n", x, w)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits)

  @staticmethod
  def log_prior(w):
    return -0.5 * tf.reduce_sum(w ** 2, -1)

  def target(self, batch_size=None):
    return sg.InMemoryTarget(self.log_likelihood, (self.x, self.y),
                             batch_size or self.batch_size,
                             log_prior_fn=self.log_prior)

  def init(self, chains=None):
    shape = [self.d] if chains is None else [chains, self.d]
    return tf.zeros(shape, tf.float32)


def synthetic_logistic(n=100_000, d=20, batch_size=100, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)).astype(np.float32)
  w = rng.normal(size=d) / np.sqrt(d)
  y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w))).astype(np.float32)
  return LogisticProblem(x, y, batch_size, f"logistic N={n} d={d}")


def australian(batch_size=32):
  path = os.path.join(SHARED_DATA, "statlog")
  raw = np.loadtxt(os.path.join(path, "australian.dat"))
  x = (raw[:, :-1] - raw[:, :-1].mean(0)) / raw[:, :-1].std(0)
  x = np.concatenate([x, np.ones((len(x), 1))], axis=1)  # d = 15
  return LogisticProblem(x, raw[:, -1], batch_size, "Statlog Australian")


class GradientOnly:
  """The floor: draw the minibatch and compute its gradient (and, with
  `energy` / `noise`, the per-chain energy / one standard normal per
  coordinate, one draw for all parts), nothing else; everything is fed back
  so XLA cannot drop it. The state may be a tensor with leading chain axes
  or a structure (the MLP's weights)."""

  def __init__(self, target, energy=False, noise=False):
    self.target = target
    self.energy = energy
    self.noise = noise

  def bootstrap_results(self, state):
    del state
    return ()

  def one_step(self, state, results, seed):
    energy, grad = self.target.energy_and_gradient(state, seed)
    new = tf.nest.map_structure(lambda s, g: s - 1e-12 * g, state, grad)
    if self.energy:
      def add_energy(s):
        trailing = tf.ones([s.shape.rank - energy.shape.rank], tf.int32)
        return s + 1e-30 * tf.reshape(
            energy, tf.concat([tf.shape(energy), trailing], 0))
      new = tf.nest.map_structure(add_energy, new)
    if self.noise:
      noise = sg.dynamics.standard_normal_like(
          state, sg.dynamics.derive_seeds(seed, 2)[1])
      new = tf.nest.map_structure(lambda s, z: s + 1e-9 * z, new, noise)
    return new, results


def bare_gradient_loop(target, num_steps):
  """The physical floor: draw the minibatch indices and compute the same
  minibatch gradient, num_steps times, in one compiled loop."""
  @tf.function(jit_compile=True, autograph=False)
  def run(state, seed):
    def body(i, state, seed):
      seed, step_seed = tfp.random.split_seed(seed)
      _, grad = target.energy_and_gradient(state, step_seed)
      # Feed the gradient back so XLA cannot drop the computation.
      state = tf.nest.map_structure(lambda s, g: s - 1e-12 * g, state, grad)
      return i + 1, state, seed
    _, state, _ = tf.while_loop(lambda i, *_: i < num_steps, body,
                                (tf.constant(0), state, seed))
    return state
  return run


def PerChainLogistic(problem, batch_size=None):  # pylint: disable=invalid-name
  """Logistic regression where each chain draws its own minibatch.

  `InMemoryTarget`'s default draws one set of n indices per step and every
  chain evaluates its gradient on it (common random numbers); with
  `independent_minibatches=True` the indices have shape [chains, n]: the
  gathered batch is [chains, n, d], chains times more memory traffic per
  step, and the chains' gradient noises are independent.
  """
  def log_likelihood(w, batch):
    x, y = batch
    if x.shape.rank == 3:  # Per-chain batches [C, n, d], w [C, d].
      logits = tf.linalg.matvec(x, w)
    else:                  # Energy chunks [n, d].
      logits = tf.einsum("nd,...d->...n", x, w)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits)
  return sg.InMemoryTarget(log_likelihood, (problem.x, problem.y),
                           batch_size or problem.batch_size,
                           log_prior_fn=problem.log_prior,
                           parameter_shapes=[problem.d],
                           independent_minibatches=True)


def newton_mode(problem, iters=25):
  """The posterior mode of a `LogisticProblem` (float64 Newton)."""
  x = problem.x.astype(np.float64)
  y = problem.y.astype(np.float64)
  w = np.zeros(problem.d)
  for _ in range(iters):
    p = 1 / (1 + np.exp(-x @ w))
    grad = x.T @ (y - p) - w
    hess = -(x.T * (p * (1 - p))) @ x - np.eye(problem.d)
    step = np.linalg.solve(hess, grad)
    w = w - step
    if np.max(np.abs(step)) < 1e-12:
      break
  p = 1 / (1 + np.exp(-x @ w))
  hess = (x.T * (p * (1 - p))) @ x + np.eye(problem.d)
  return w, np.linalg.inv(hess)
