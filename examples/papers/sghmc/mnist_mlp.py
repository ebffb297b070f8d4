"""The MNIST MLP protocol of the SG-NUTS and SGHMC experiments on TFP kernels.

Shared by sgnuts_mnist.py, sgnuts_curves.py, sghmc_ood.py and
sghmc_steps_per_sample.py (they run as scripts from this folder, which is
then on sys.path): the 10,000 MNIST test images split 8,000 / 2,000 by a
fixed permutation, an MLP 784-100-10 (ReLU) with a N(0, 1) prior on every
weight as an `InMemoryTarget`, its He-scaled initial weights, the SGHMC and
SG-NUTS kernels of `sgnuts_mnist.py`, and a compiled runner of kernel steps.
"""

import os

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..",
                                        ".."))
SHARED_DATA = os.path.join(EXAMPLES, "..", "..", "shared", "data")


def load_split(data_dir=SHARED_DATA, num_train=8000, num_test=2000):
  """MNIST test images split into train / test parts by a fixed permutation
  (the test part follows the training part in it)."""
  split = sg.datasets.load_mnist_split(
      data_dir, 0, train=slice(num_train),
      test=slice(num_train, num_train + num_test))
  return split["train"], split["test"]


def mlp_logits(params, x):
  w1, b1, w2, b2 = params
  return tf.nn.relu(x @ w1 + b1) @ w2 + b2


def make_target(train, batch_size):
  def log_likelihood(params, batch):
    xb, yb = batch
    return -tf.nn.sparse_softmax_cross_entropy_with_logits(
        yb, mlp_logits(params, xb))

  def log_prior(params):
    return sum(-0.5 * tf.reduce_sum(p ** 2) for p in params)

  return sg.InMemoryTarget(log_likelihood, train, batch_size,
                           log_prior_fn=log_prior)


def initial_state(hidden, seed=0):
  rng = np.random.default_rng(seed)
  return [tf.constant(rng.normal(size=(784, hidden)) * np.sqrt(2. / 784),
                      tf.float32),
          tf.zeros([hidden]),
          tf.constant(rng.normal(size=(hidden, 10)) * np.sqrt(2. / hidden),
                      tf.float32),
          tf.zeros([10])]


def make_kernels(target, learning_rate, momentum_decay, max_tree_depth):
  sghmc = sg.SGHMC.from_sgd_momentum(target, learning_rate=learning_rate,
                                     momentum_decay=momentum_decay)
  nuts = sg.SGNUTS(target, step_size=sghmc.step_size,
                   friction=sghmc.friction, max_tree_depth=max_tree_depth)
  return {"SGHMC": sghmc, "SG-NUTS": nuts}


_RUNNERS = {}


def make_runner(kernel):
  """A compiled run of `num_steps` (a tensor) kernel steps, one per kernel."""
  if id(kernel) in _RUNNERS:
    return _RUNNERS[id(kernel)][1]

  @tf.function(jit_compile=True, autograph=False)
  def run(state, results, num_steps, seed):
    def body(i, state, results, grads, seed):
      step_seed, seed = tfp.random.split_seed(seed, 2)
      state, results = kernel.one_step(state, results, seed=step_seed)
      used = getattr(results, "num_gradient_evaluations", None)
      used = tf.ones([], tf.int32) if used is None else tf.cast(
          tf.reduce_max(used), tf.int32)
      return i + 1, state, results, grads + used, seed
    _, state, results, grads, _ = tf.while_loop(
        lambda i, *_: i < num_steps, body,
        (tf.constant(0), state, results, tf.constant(0), seed))
    return state, results, grads
  _RUNNERS[id(kernel)] = (kernel, run)  # the kernel is kept alive with its id
  return run
