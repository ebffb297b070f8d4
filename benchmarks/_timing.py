"""Helpers shared by keras_epoch.py, chains.py, data_scale.py and
accuracy_per_second.py (problems and the basic timers live in common.py).

* `kernel_loop` / `run_kernel_for`: a kernel's steps in one compiled
  `while_loop` whose length is a *tensor*, so one compilation serves every
  length (used to calibrate a length that takes a target wall time);
* `spread`: median, min and max of a list of timings or ratios;
* `PerChainLogistic`: the N = 1e5 logistic regression with one minibatch per
  chain (`InMemoryTarget(independent_minibatches=True)`; the default shares
  one minibatch across chains).
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def spread(values):
  values = [float(v) for v in values]
  return dict(median=statistics.median(values), min=min(values),
              max=max(values), n=len(values))


def fmt(s, scale=1., digits=2):
  """'median [min, max]' of a `spread` dict."""
  return (f"{s['median'] * scale:.{digits}f} "
          f"[{s['min'] * scale:.{digits}f}, {s['max'] * scale:.{digits}f}]")


def kernel_loop(kernel):
  """`run(state, seed, num_steps)`: num_steps of kernel.one_step in one
  compiled while_loop; num_steps is a tensor (one compilation)."""
  @tf.function(jit_compile=True, autograph=False)
  def run(state, seed, num_steps):
    results = kernel.bootstrap_results(state)
    def body(i, state, results, seed):
      seed, step_seed = tfp.random.split_seed(seed)
      state, results = kernel.one_step(state, results, seed=step_seed)
      return i + 1, state, results, seed
    _, state, _, _ = tf.while_loop(lambda i, *_: i < num_steps, body,
                                   (tf.constant(0), state, results, seed))
    return state
  return run


def timed(fn, *args):
  start = time.perf_counter()
  out = fn(*args)
  tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t,
                        out)
  return time.perf_counter() - start


def calibrate(fn, args, target_seconds, start_steps=10, max_steps=10**7):
  """Compiles fn(*args, num_steps) and returns a num_steps that takes about
  `target_seconds` (at least 1)."""
  steps = start_steps
  timed(fn, *args, tf.constant(steps))  # Compile.
  while True:
    t = timed(fn, *args, tf.constant(steps))
    if t > 0.2 * target_seconds or steps >= max_steps:
      break
    steps *= 4
  return int(max(1, min(max_steps, steps * target_seconds / max(t, 1e-6))))


def interleaved_per_step(fns, target_seconds, repeats):
  """fns: name -> (fn, args). Calibrates each to about target_seconds,
  then times them interleaved `repeats` times; returns name -> list of
  seconds per step (one per repeat) and name -> steps used."""
  steps = {name: calibrate(fn, args, target_seconds)
           for name, (fn, args) in fns.items()}
  out = {name: [] for name in fns}
  for _ in range(repeats):
    for name, (fn, args) in fns.items():
      out[name].append(timed(fn, *args, tf.constant(steps[name])) /
                       steps[name])
  return out, steps


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
  """The posterior mode of a `common.LogisticProblem` (float64 Newton)."""
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
