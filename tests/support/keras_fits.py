"""Keras `fit` runs that the tests in tests/keras/ share.

* The Bayesian linear regression of support/linear_regression.py written for
  Keras: Dense(1, no bias) with the Gaussian log-likelihood and the N(0,
  prior_scale^2) prior, started at the posterior mean, fed minibatches of
  BATCH examples drawn with replacement (as InMemoryTarget draws them):
  `batch_indices`, `batches`, `iid_batches`, `regression_model`, `fit` (on
  given indices), `fit_regression` (on fresh i.i.d. batches, 10 epochs) and
  `kept_draws`. The `problem` fixture is tests/keras/conftest.py's.
* `regression_fit`: a small fit on keras_resume_worker's regression data
  (Dense(1) with bias, batches of 3), returning what the divergence and
  mixed-precision tests look at.
* `logistic_setup`: a 3-feature logistic regression and its model maker.
"""

import keras
import numpy as np
import tensorflow as tf

import tfp_sgmcmc.keras as sgk
from workers import keras_resume_worker as worker

BATCH = 50


def regression_model(init):
  """Dense(1, no bias) on len(init) features, its kernel set to `init`."""
  return keras.Sequential([
      keras.Input((len(init),)),
      keras.layers.Dense(1, use_bias=False,
                         kernel_initializer=keras.initializers.Constant(
                             np.reshape(init, (-1, 1))))])


def batch_indices(problem, num_batches, seed, batch_size=BATCH):
  """[num_batches, batch_size] example indices drawn with replacement."""
  return np.random.default_rng(seed).integers(
      0, problem.num_examples, size=(num_batches, batch_size)).astype(np.int32)


def batches(problem, indices):
  """The minibatches (x, y) of `indices`, one per row, as a Dataset."""
  x, y = problem.data
  return tf.data.Dataset.from_tensor_slices(indices).map(
      lambda i: (tf.gather(x, i), tf.gather(y, i)))


def iid_batches(problem, num_batches, seed, batch_size=BATCH):
  """Minibatches drawn with replacement, independently at every step."""
  return batches(problem, batch_indices(problem, num_batches, seed,
                                        batch_size))


def compiled_regression_model(problem, steps_per_execution, jit_compile):
  model = regression_model(problem.posterior_mean)
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(problem.noise_scale),
                steps_per_execution=steps_per_execution,
                jit_compile=jit_compile)
  return model


def fit(problem, sampler, indices, steps_per_execution=1, thinning=1,
        epochs=1, jit_compile=False, after=(), **kwargs):
  """One fit on the batches of `indices`; returns the SamplingCallback."""
  model = compiled_regression_model(problem, steps_per_execution,
                                    jit_compile)
  callback = sgk.SamplingCallback(
      sampler, num_examples=problem.num_examples, prior=problem.prior_scale,
      thinning=thinning, max_samples=10 ** 6, **kwargs)
  model.fit(batches(problem, indices), epochs=epochs,
            steps_per_epoch=len(indices) // epochs, shuffle=False, verbose=0,
            callbacks=[callback, *after])
  return callback


def fit_regression(problem, sampler, num_steps, steps_per_execution=1,
                   jit_compile=False, thinning=None, seed=0, **kwargs):
  """A fit of `num_steps` i.i.d. batches in 10 epochs, keeping a sample every
  `thinning` steps (default: every execution); returns (model, callback)."""
  model = compiled_regression_model(problem, steps_per_execution,
                                    jit_compile)
  callback = sgk.SamplingCallback(
      sampler, num_examples=problem.num_examples, prior=problem.prior_scale,
      thinning=thinning or steps_per_execution, max_samples=10 ** 6,
      **kwargs)
  epochs = 10
  model.fit(iid_batches(problem, num_steps, seed), epochs=epochs,
            steps_per_epoch=num_steps // epochs, shuffle=False, verbose=0,
            callbacks=[callback])
  return model, callback


def kept_draws(callback):
  """The kept samples as [num_samples, 1 chain, dim] float64."""
  return callback.posterior.samples[0][:, None, :, 0].astype(np.float64)


def regression_fit(sampler, epochs=3, steps=20, **kwargs):
  """keras_resume_worker's regression, Dense(1) from seed 1, SGD(1e-2),
  batches of 3; returns (model, callback, history, optimizer)."""
  x, y = worker.data()
  keras.utils.set_random_seed(1)
  model = keras.Sequential([keras.Input((worker.DIM,)), keras.layers.Dense(1)])
  sgd = keras.optimizers.SGD(1e-2)
  model.compile(optimizer=sgd, loss=sgk.GaussianNegativeLogLikelihood(1.))
  sampling = sgk.SamplingCallback(sampler, num_examples=worker.NUM_EXAMPLES,
                                  prior=1., max_samples=1000, **kwargs)
  data = tf.data.Dataset.from_tensor_slices((x, y)).batch(3).repeat()
  history = model.fit(data, epochs=epochs, steps_per_epoch=steps, verbose=0,
                      shuffle=False, callbacks=[sampling])
  return model, sampling, history, sgd


def logistic_setup(seed=0, n=200):
  """(x, y, make): n examples of a 3-feature logistic regression and a maker
  of its model, Dense(1) from zeros, giving logits."""
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, 3)).astype(np.float32)
  y = (rng.uniform(size=n) < 1. / (1. + np.exp(-(x @ [2., -1., .5])))
       ).astype(np.float32)

  def make():
    return keras.Sequential([
        keras.Input((3,)),
        keras.layers.Dense(1, kernel_initializer="zeros")])
  return x, y, make
