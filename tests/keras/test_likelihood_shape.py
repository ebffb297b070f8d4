"""The Keras likelihood has one value per example, for every kind of model.

The energy is N x (Keras' mean of the loss values) - log prior, the
posterior's only when the mean runs over examples. At the start of `fit`
the callback evaluates the loss unreduced on a first batch (the first
examples of arrays, a batch synthesized from a dataset's element_spec) and
refuses anything but one value per example, naming the shapes and the fix
(tfp_sgmcmc/keras/validation/first_batch.py); `NegativeLogLikelihood(fn,
event_ndims=k)` declares that one example spans k trailing axes of fn's
values (time steps, output units), and the Gaussian likelihood sums
everything one example outputs. Each refusal happens before any step.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc.keras as sgk
from support.helpers import NUM_SE, mean_and_se, stationary_covariance
from support.helpers import variance_and_se

N, T = 40, 3


def data(y_shape, seed=0, labels=None):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(N, 3)).astype(np.float32)
  if labels is not None:
    return x, rng.integers(0, labels, size=(N,) + y_shape).astype(np.int32)
  return x, rng.normal(size=(N,) + y_shape).astype(np.float32)


def sequential(*layers):
  return keras.Sequential([keras.Input((3,)), *layers])


def functional(*layers):
  inputs = keras.Input((3,))
  outputs = inputs
  for layer in layers:
    outputs = layer(outputs)
  return keras.Model(inputs, outputs)


class Subclassed(keras.Model):
  """A subclassed model: no `outputs` to read before it is called."""

  def __init__(self, units, squeeze=False):
    super().__init__()
    self.dense = keras.layers.Dense(units)
    self.squeeze = squeeze

  def call(self, x):
    out = self.dense(x)
    return tf.squeeze(out, -1) if self.squeeze else out


def built(model):
  model(np.zeros((1, 3), np.float32))
  return model


def run(model, loss, x, y, callbacks=(), **fit_kwargs):
  model.compile(optimizer="sgd", loss=loss)
  callback = sgk.SamplingCallback(sgk.SGLD(step_size=1e-5, seed=1),
                                  num_examples=N, prior=1.)
  fit_kwargs.setdefault("batch_size", 10)
  model.fit(x, y, epochs=1, verbose=0, shuffle=False,
            callbacks=[callback, *callbacks], **fit_kwargs)
  return callback


def squared(y, p):
  return 0.5 * tf.square(y - p)


def sequence_model(units=1):
  # [n, 3] -> [n, T, units]
  return sequential(keras.layers.RepeatVector(T), keras.layers.Dense(units))


CASES = {
    # fn gives one value per output unit: Keras' mean divides by k.
    "fn_per_unit": (lambda: sequential(keras.layers.Dense(2)),
                    lambda: sgk.NegativeLogLikelihood(squared), (2,), None,
                    r"values of shape \(4, 2\) on a batch of 4 examples.*"
                    r"NegativeLogLikelihood\(fn, event_ndims=1\)"),
    # A sequence model with a per-step fn: divided by T.
    "fn_per_step": (lambda: sequence_model(),
                    lambda: sgk.NegativeLogLikelihood(squared), (T, 1), None,
                    r"values of shape \(4, 3, 1\).*event_ndims=2"),
    # y (n, 1) against an output (n,) in a user's fn: broadcast to (n, n).
    "fn_broadcast": (lambda: built(Subclassed(1, squeeze=True)),
                     lambda: sgk.NegativeLogLikelihood(squared), (1,), None,
                     r"values of shape \(4, 4\).*y_true \(4, 1\), model "
                     r"output \(4,\).*broadcast against each other"),
    # The Gaussian refuses targets that do not pair with the outputs.
    "gaussian_mismatch": (lambda: sequential(keras.layers.Dense(3)),
                          lambda: sgk.GaussianNegativeLogLikelihood(1.),
                          (), None, r"y_true has shape \(4,\) and the "
                          r"model's output \(4, 3\).*broadcast"),
    # Binary cross-entropy on 3 units: refused for every model type.
    "bce_units_subclassed": (
        lambda: built(Subclassed(3)),
        lambda: keras.losses.BinaryCrossentropy(from_logits=True), (3,), 2,
        r"binary cross-entropy on outputs of shape \(4, 3\).*divides the "
        r"log-likelihood by 3"),
    "bce_units_sequence": (
        lambda: sequence_model(3),
        lambda: keras.losses.BinaryCrossentropy(from_logits=True), (T, 3), 2,
        r"binary cross-entropy on (3 output units|outputs of shape "
        r"\(4, 3, 3\)).*divides the log-likelihood by 3"),
    # Two outputs, one loss: Keras adds the losses of both.
    "two_outputs": (lambda: two_heads(),
                    lambda: sgk.GaussianNegativeLogLikelihood(1.), (1,), None,
                    r"has 2 outputs \(shapes \[\(4, 1\), \(4, 1\)\].*one loss"),
    "two_outputs_subclassed": (
        lambda: built(TwoOutputs()),
        lambda: sgk.GaussianNegativeLogLikelihood(1.), (1,), None,
        r"has 2 outputs .*one loss"),
    # Siblings: Keras' own cross-entropies per time step.
    "sparse_ce_sequence": (
        lambda: sequence_model(5),
        lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        (T,), 5, r"values of shape \(4, 3\).*sparse_categorical_crossentropy "
        r"gives one per position.*event_ndims=1"),
    "categorical_ce_sequence": (
        lambda: functional(keras.layers.RepeatVector(T),
                           keras.layers.Dense(2, activation="softmax")),
        lambda: keras.losses.CategoricalCrossentropy(), (T, 2), 2,
        r"values of shape \(4, 3\).*categorical_crossentropy"),
    # A fn that already averaged over the batch.
    "fn_batch_mean": (lambda: sequential(keras.layers.Dense(1)),
                      lambda: sgk.NegativeLogLikelihood(
                          lambda y, p: tf.reduce_mean(squared(y, p))),
                      (1,), None, r"values of shape \(\) on a batch of 4.*"
                      r"reduced over the batch axis"),
}


def two_heads():
  inputs = keras.Input((3,))
  return keras.Model(inputs, [keras.layers.Dense(1)(inputs),
                              keras.layers.Dense(1)(inputs)])


class TwoOutputs(keras.Model):

  def __init__(self):
    super().__init__()
    self.a, self.b = keras.layers.Dense(1), keras.layers.Dense(1)

  def call(self, x):
    return [self.a(x), self.b(x)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_loss_without_one_value_per_example_is_refused_at_fit_start(case):
  make_model, make_loss, y_shape, labels, message = CASES[case]
  model = make_model()
  x, y = data(y_shape, labels=labels)
  if labels == 2:
    y = (y > 0).astype(np.float32)
    if case == "categorical_ce_sequence":
      y = keras.utils.to_categorical(np.argmax(
          np.random.default_rng(1).normal(size=(N, T, 2)), -1), 2)
  if case.startswith("two_outputs"):
    y = [y, y]
  with pytest.raises(ValueError, match=message):
    run(model, make_loss(), x, y)
  assert model.optimizer.iterations.numpy() == 0  # Before any step.


def test_a_tf_data_pipeline_is_checked_from_its_element_spec():
  # The pipeline is not iterated (that would advance its reshuffling): the
  # batch is synthesized from its element_spec, also for dict inputs.
  x, y = data((2,))
  inputs = keras.Input((3,), name="features")
  model = keras.Model({"features": inputs}, keras.layers.Dense(2)(inputs))
  pipeline = tf.data.Dataset.from_tensor_slices(
      ({"features": x}, y)).shuffle(N).batch(10)
  with pytest.raises(ValueError, match=r"values of shape \(4, 2\) on a "
                     r"batch of 4 examples.*event_ndims=1"):
    run(model, sgk.NegativeLogLikelihood(squared), pipeline, None,
        batch_size=None)


def test_declared_per_example_sums_and_aligned_shapes_are_accepted():
  # The fixes the refusals name, and the shapes Keras' own losses align.
  x, y = data((2,))
  run(sequential(keras.layers.Dense(2)),
      sgk.NegativeLogLikelihood(squared, event_ndims=1), x, y)
  # One unit, labels (n, 1): fn's values (n, 1) are one per example (they
  # were refused, with "each example has 1 terms" and event_ndims=1).
  x, y = data((1,))
  run(sequential(keras.layers.Dense(1)), sgk.NegativeLogLikelihood(squared),
      x, y)
  x, labels = data((T,), labels=5)
  callback = run(sequence_model(5), sgk.NegativeLogLikelihood(
      lambda y, p: keras.losses.sparse_categorical_crossentropy(
          y, p, from_logits=True), event_ndims=1, predictive="softmax"),
                 x, labels)
  assert callback.predict(x[:2]).shape == (2, T, 5)
  # The Gaussian sums over everything one example outputs.
  x, y = data((T, 1))
  run(sequence_model(), sgk.GaussianNegativeLogLikelihood(1.), x, y)
  # y (n, 1) against an output (n,), and (n,) against (n, 1): paired.
  x, y = data((1,))
  run(built(Subclassed(1, squeeze=True)),
      sgk.GaussianNegativeLogLikelihood(1.), x, y)
  run(sequential(keras.layers.Dense(1)),
      sgk.GaussianNegativeLogLikelihood(1.), x, y[:, 0])
  # Sparse labels with a trailing axis of 1.
  x, labels = data((1,), labels=3)
  run(functional(keras.layers.Dense(3)),
      keras.losses.SparseCategoricalCrossentropy(from_logits=True), x, labels)


def test_the_gaussian_likelihood_pairs_targets_and_sums_per_example():
  rng = np.random.default_rng(2)
  nll = sgk.GaussianNegativeLogLikelihood(0.5)
  pred = rng.normal(size=(4, T, 1)).astype(np.float32)
  y = rng.normal(size=(4, T)).astype(np.float32)
  expected = np.sum(0.5 * ((y - pred[..., 0]) / 0.5) ** 2 + np.log(0.5) +
                    0.5 * np.log(2 * np.pi), axis=1)
  np.testing.assert_allclose(nll.call(y, pred), expected, rtol=1e-5)
  flat = rng.normal(size=(4,)).astype(np.float32)
  np.testing.assert_allclose(nll.call(flat[:, None] + 1., flat),
                             nll.call(flat + 1., flat), rtol=1e-6)
  assert nll.call(flat[:, None] + 1., flat).shape == (4,)
  with pytest.raises(ValueError, match="event_ndims.*-1"):
    sgk.NegativeLogLikelihood(squared, event_ndims=-1)


def test_other_sibling_setups_are_refused():
  # A Keras loss without the mean over the batch.
  x, y = data((1,))
  with pytest.raises(ValueError, match="reduction='none'"):
    run(sequential(keras.layers.Dense(1)), keras.losses.BinaryCrossentropy(
        from_logits=True, reduction="none"), x, (y > 0).astype(np.float32))
  # Per-example weights: another posterior.
  with pytest.raises(ValueError, match="`sample_weight` was passed"):
    run(sequential(keras.layers.Dense(1)),
        sgk.GaussianNegativeLogLikelihood(1.), x, y,
        sample_weight=np.ones(N, np.float32))


def test_a_declared_per_example_sum_gives_the_posterior_sd():
  # Linear regression observed at T time steps: y_it = x_i . w + e_it,
  # e ~ N(0, 1), w ~ N(0, I). The posterior precision is T X^T X + I; a
  # likelihood averaged over the steps instead of summed would sample
  # X^T X + I, a variance about T = 3 times as large. Full-batch SGLD (no
  # minibatch noise): its stationary covariance solves the Lyapunov
  # equation of the discretised chain exactly (support/helpers.py).
  rng = np.random.default_rng(3)
  x = rng.normal(size=(N, 2)).astype(np.float32)
  w = np.array([0.7, -0.4])
  y = (x @ w)[:, None, None] + rng.normal(size=(N, T, 1))
  y = y.astype(np.float32)
  x64, y64 = x.astype(np.float64), y.astype(np.float64)
  precision = T * x64.T @ x64 + np.eye(2)
  mean = np.linalg.solve(precision, x64.T @ y64[:, :, 0].sum(axis=1))
  h = 0.5 / np.max(np.linalg.eigvalsh(precision))
  predicted = stationary_covariance("sgld", precision, h)
  model = keras.Sequential([
      keras.Input((2,)),
      keras.layers.Dense(1, use_bias=False, kernel_initializer=(
          keras.initializers.Constant(mean[:, None]))),
      keras.layers.RepeatVector(T)])
  model.compile(optimizer="sgd", steps_per_execution=20, jit_compile=True,
                loss=sgk.NegativeLogLikelihood(
                    lambda y, p: 0.5 * tf.square(y - p), event_ndims=2))
  callback = sgk.SamplingCallback(
      sgk.SGLD(step_size=h, seed=4), num_examples=N, prior=1.,
      thinning=20, max_samples=10 ** 6)
  full_batch = tf.data.Dataset.from_tensors((x, y)).repeat()
  model.fit(full_batch, epochs=2, steps_per_epoch=3000, verbose=0,
            shuffle=False,
            callbacks=[callback])
  draws = callback.posterior.samples[0][:, None, :, 0].astype(np.float64)
  m, m_se = mean_and_se(draws)
  assert np.all(np.abs(m - mean) < NUM_SE * m_se)
  var, var_se = variance_and_se(draws, mean=mean)
  assert np.all(np.abs(var - np.diag(predicted)) < NUM_SE * var_se), (
      var, np.diag(predicted), var_se)
