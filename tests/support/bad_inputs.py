"""Inputs and machinery shared by the bad-input catalogues of tests/errors/.

Two kinds of rows sit in those files, by subject:

* CLEAR_MESSAGES rows (case, call, exception, pattern): the call fails early
  with that exception, and the pattern checks that the message names the
  argument and the value received
  (`test_bad_input_fails_early_with_a_clear_message`).
* OUTCOMES rows (`Case`s made by `clear`, `correct` or `unclear`): each
  case declares the outcome it must have, and `classify` decides the outcome
  from what actually happens (`test_case_has_its_declared_outcome`):

  - "clear": a ValueError / TypeError / FileNotFoundError raised before any
    sampling, whose message names the argument in backticks (`arg`) and
    matches `pattern` (the value seen, what was expected or the fix).
  - "correct": the call is accepted by design, and its result is checked to
    be right (an exact comparison or a known value), not just finite.
  - "unclear": an error, but not one that names the cause (kept to at most 3).
  - "silent": a wrong answer or hang. None may remain.

  A case whose message stops naming the argument, or whose accepted result
  becomes wrong, changes class and fails. errors/test_catalogue_totals.py
  checks the counts over all the files.

The data (X, Y: 40 examples of a 3-parameter linear regression) and the
functions the rows call are here, once.
"""

import collections
import re

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg


def data(n=10, d=2):
  return np.zeros((n, d), np.float32)


def location_ll(w, b):
  return -0.5 * tf.reduce_sum((b - w[..., None, :]) ** 2, -1)


def bootstrap(kernel, state):
  return lambda: kernel.bootstrap_results(state)


D = 3
RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, D)).astype(np.float32)
Y = (X @ np.array([1., -1., .5], np.float32) +
     RNG.normal(size=40).astype(np.float32))


def ll(w, b):
  return -0.5 * (b[1] - tf.linalg.matvec(b[0], w)) ** 2


def prior(w):
  return -0.5 * tf.reduce_sum(w ** 2, -1)


def quadratic(x):
  return 0.5 * tf.reduce_sum(x ** 2, -1)


def noisy(**kw):
  return sg.NoisyGradientTarget(quadratic, gradient_noise_variance=1., **kw)


def mem(fn=ll, data=(X, Y), batch_size=8, **kw):
  return sg.InMemoryTarget(fn, data, batch_size, **kw)


def boot(kernel, state):
  return kernel.bootstrap_results(state)


def steps(kernel, state, n=2):
  results = kernel.bootstrap_results(state)
  for i in range(n):
    state, results = kernel.one_step(state, results, seed=[i, 3])
  return state, results


def batches(batch=8, repeat=True):
  ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(batch)
  return ds.repeat() if repeat else ds


def exact_energy(w):
  """U(w) of `mem(log_prior_fn=prior)` computed here in numpy."""
  r = Y - X @ w
  return 0.5 * np.sum(r ** 2) + 0.5 * np.sum(w ** 2)


Case = collections.namedtuple("Case", ["name", "call", "outcome", "arg",
                                       "pattern"])


def clear(name, call, arg, pattern=""):
  return Case(name, call, "clear", arg, pattern)


def correct(name, call):
  return Case(name, call, "correct", None, None)


def unclear(name, call):
  return Case(name, call, "unclear", None, None)


def classify(case, tmp_path):
  """The outcome that actually happens: clear / correct / unclear / silent,
  with a description."""
  call = case.call
  args = ((tmp_path,) if call.__code__.co_argcount == 1 and
          call.__code__.co_varnames[:1] == ("tmp_path",) else ())
  try:
    result = call(*args)
  except (ValueError, TypeError, FileNotFoundError) as e:
    message = str(e)
    named = (case.arg is not None and
             (not case.arg or f"`{case.arg}`" in message))
    if case.outcome == "clear" and named and re.search(
        case.pattern, message, re.S):
      return "clear", message
    return "unclear", f"{type(e).__name__}: {message}"
  except AssertionError as e:  # A "correct" case whose result is wrong.
    return "silent", f"wrong result: {e}"
  except Exception as e:  # pylint: disable=broad-except
    return "unclear", f"{type(e).__name__}: {e}"
  del result
  return ("correct", "") if case.outcome == "correct" else (
      "silent", "accepted without an error")
