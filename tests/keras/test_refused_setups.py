"""SamplingCallback and the Keras samplers refuse what would bias a sampler or
skip its steps, naming the argument and the fix: losses that are not a mean
negative log-likelihood, a missing or bad number of examples or prior,
optimizer options that bias the update (set at construction or after),
steps_per_execution that would skip the callback, models that count the
prior twice (regularizers, constraints), an uncompiled model, AMAGOLD
without the whole training set for its test.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc.keras as sgk
from support.keras_fits import logistic_setup


def tiny_fit(loss=None, sampler=None, model=None, steps_per_execution=1,
             steps=8, **kwargs):
  x, y, make = logistic_setup(n=40)
  model = model or make()
  model.compile(optimizer="sgd", steps_per_execution=steps_per_execution,
                loss=loss or keras.losses.BinaryCrossentropy(
                    from_logits=True))
  callback = sgk.SamplingCallback(
      sampler or sgk.SGLD(step_size=1e-3),
      **{"num_examples": 40, "prior": 1., **kwargs})
  model.fit(x, y, batch_size=5, epochs=1, steps_per_epoch=steps, verbose=0,
            callbacks=[callback])
  return callback


@pytest.mark.parametrize("loss, message", [
    ("mse", "not a supported negative log-likelihood.*Gaussian"),
    (keras.losses.MeanSquaredError(), "not a supported"),
    (lambda y, p: tf.square(y - p), "not a supported"),
    (keras.losses.BinaryFocalCrossentropy(), "not a supported"),
    (keras.losses.BinaryCrossentropy(label_smoothing=0.1), "label_smoothing"),
    (keras.losses.BinaryCrossentropy(reduction="sum"), "reduction='sum'"),
    ("crossentropy", "name it"),
])
def test_losses_that_are_not_a_mean_negative_log_likelihood_are_refused(
    loss, message):
  with pytest.raises(ValueError, match=message):
    tiny_fit(loss=loss)



class _OneLogit(keras.Model):

  def __init__(self):
    super().__init__()
    self.dense = keras.layers.Dense(1)

  def call(self, x):
    return self.dense(x)


def test_a_categorical_cross_entropy_on_one_output_unit_is_refused():
  # A distribution over one class is 1 whatever the weights: the loss is 0
  # and the chain samples the prior (a Dense(1) logistic regression
  # compiled with CategoricalCrossentropy ran so, loss 0.0 every epoch).
  for loss in (keras.losses.CategoricalCrossentropy(from_logits=True),
               keras.losses.SparseCategoricalCrossentropy(from_logits=True)):
    with pytest.raises(ValueError, match=r"on 1 output unit.*constant "
                       r"\(0\).*samples the prior.*BinaryCrossentropy"):
      tiny_fit(loss=loss)
  # A subclassed model (no output shape before the first batch), with
  # labels that are one-hot rows of one class.
  x, _, _ = logistic_setup(n=40)
  model = _OneLogit()
  model(x[:1])
  model.compile(optimizer="sgd", loss=keras.losses.CategoricalCrossentropy(
      from_logits=True))
  with pytest.raises(ValueError, match="categorical_crossentropy on 1 "
                     "output unit"):
    model.fit(x, np.ones((40, 1), np.float32), batch_size=5, epochs=1,
              verbose=0, callbacks=[sgk.SamplingCallback(
                  sgk.SGLD(step_size=1e-3), num_examples=40, prior=1.)])

def test_other_refused_losses():
  with pytest.raises(ValueError, match="ignore_class"):
    sgk.resolve_likelihood(keras.losses.SparseCategoricalCrossentropy(
        ignore_class=0))
  with pytest.raises(ValueError, match="one negative log-likelihood"):
    sgk.resolve_likelihood(["mse", "mse"])
  three_units = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3)])
  with pytest.raises(ValueError, match="3 output units"):
    tiny_fit(model=three_units)
  for ok in ("sparse_categorical_crossentropy",
             keras.losses.CategoricalCrossentropy(from_logits=True),
             sgk.NegativeLogLikelihood(lambda y, p: tf.square(y - p))):
    sgk.resolve_likelihood(ok)


def test_missing_or_bad_number_of_examples_is_refused():
  sampler = sgk.SGLD(step_size=1e-3)
  with pytest.raises(TypeError, match="num_examples"):
    sgk.SamplingCallback(sampler, prior=1.)  # pylint: disable=missing-kwoa
  with pytest.raises(ValueError, match="num_examples.*required"):
    sgk.SamplingCallback(sampler, num_examples=None, prior=1.)
  with pytest.raises(ValueError, match="num_examples.*>= 1.*0"):
    sgk.SamplingCallback(sampler, num_examples=0, prior=1.)
  with pytest.raises(TypeError, match="num_examples.*2.5"):
    sgk.SamplingCallback(sampler, num_examples=2.5, prior=1.)
  with pytest.raises(ValueError, match="prior.*None"):
    sgk.SamplingCallback(sampler, num_examples=10, prior=None)


@pytest.mark.parametrize("option", [
    dict(clipnorm=1.), dict(clipvalue=1.), dict(global_clipnorm=1.),
    dict(weight_decay=1e-4), dict(use_ema=True),
    dict(gradient_accumulation_steps=2), dict(learning_rate=0.1)])
def test_options_that_bias_a_sampler_are_refused(option):
  key = next(iter(option))
  with pytest.raises(ValueError, match=key):
    sgk.SGHMC(step_size=1e-2, friction=1., **option)


def test_biasing_options_set_after_construction_are_refused():
  sampler = sgk.SGLD(step_size=1e-3)
  sampler.clipnorm = 1.
  with pytest.raises(ValueError, match="clipnorm"):
    sgk.SamplingCallback(sampler, num_examples=10, prior=1.)
  with pytest.raises(TypeError, match="Keras optimizers do not sample"):
    sgk.SamplingCallback(keras.optimizers.SGD(0.1), num_examples=10,
                         prior=1.)


@pytest.mark.parametrize("kwargs, message", [
    (dict(steps_per_execution=4, thinning=6), "thinning=6"),
    (dict(steps_per_execution=2, burnin_steps=3), "burnin_steps=3"),
    (dict(steps_per_execution=3, thinning=3, steps=8),
     "steps per epoch=8"),
    (dict(steps_per_execution=4, sampler=sgk.AMAGOLD(
        step_size=0.1, num_leapfrog_steps=10, friction=1.),
          thinning=4), "num_leapfrog_steps=10"),
])
def test_steps_per_execution_that_would_skip_the_callback_is_refused(
    kwargs, message):
  kwargs = dict(kwargs)
  if isinstance(kwargs.get("sampler"), sgk.AMAGOLD):
    x, y, _ = logistic_setup(n=40)
    kwargs["energy_data"] = (x, y)
  with pytest.raises(ValueError, match=f"steps_per_execution.*{message}"):
    tiny_fit(**kwargs)



def test_amagold_with_steps_per_execution_on_an_epoch_of_unknown_length():
  # 5 batches through a .filter() (Keras does not know the epoch's length)
  # at steps_per_execution=2: the epoch's last execution is one step, which
  # cut a trajectory short; fit stopped mid-run with a RuntimeError ("due
  # after T=2 steps but 3 steps ran"). Refused at the start instead.
  x, y, make = logistic_setup(n=50)
  pipeline = tf.data.Dataset.from_tensor_slices((x, y)).batch(10).filter(
      lambda a, b: True)
  for steps_per_epoch, refused in ((None, True), (4, False)):
    model = make()
    model.compile(optimizer="sgd", steps_per_execution=2,
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
    callback = sgk.SamplingCallback(
        sgk.AMAGOLD(step_size=0.05, num_leapfrog_steps=2, friction=1.,
                    seed=1), num_examples=50, prior=1., energy_data=(x, y))
    data = pipeline.repeat() if steps_per_epoch else pipeline
    if refused:
      with pytest.raises(ValueError, match=r"steps_per_execution=2.*steps "
                         r"per epoch, which Keras does not know.*pass fit a "
                         r"steps_per_epoch"):
        model.fit(data, epochs=3, verbose=0, shuffle=False,
                  callbacks=[callback])
    else:
      model.fit(data, epochs=3, steps_per_epoch=steps_per_epoch, verbose=0,
                shuffle=False, callbacks=[callback])
      assert callback.num_tests == 6

def test_models_that_would_count_the_prior_twice_are_refused():
  regularized = keras.Sequential([
      keras.Input((3,)),
      keras.layers.Dense(1, kernel_regularizer=keras.regularizers.L2(1e-3))])
  with pytest.raises(ValueError, match="regularizer.*N times"):
    tiny_fit(model=regularized)
  activity = keras.Sequential([
      keras.Input((3,)),
      keras.layers.Dense(1, activity_regularizer=keras.regularizers.L2(1.))])
  with pytest.raises(ValueError, match="activity_regularizer"):
    tiny_fit(model=activity)
  constrained = keras.Sequential([
      keras.Input((3,)),
      keras.layers.Dense(1, kernel_constraint=keras.constraints.MaxNorm(1.))])
  with pytest.raises(ValueError, match="constraint"):
    tiny_fit(model=constrained)
  uncompiled = logistic_setup()[2]()
  callback = sgk.SamplingCallback(sgk.SGLD(step_size=1e-3), num_examples=40,
                                  prior=1.)
  callback.set_model(uncompiled)
  with pytest.raises(ValueError, match="compile the model"):
    callback.on_train_begin()


def test_amagold_needs_the_whole_training_set_for_its_test():
  amagold = sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=2, friction=1.)
  with pytest.raises(ValueError, match="energy_data"):
    sgk.SamplingCallback(amagold, num_examples=40, prior=1.)
  x, y, _ = logistic_setup(n=40)
  with pytest.raises(ValueError, match="holds 30 examples.*num_examples=40"):
    tiny_fit(sampler=amagold, energy_data=(x[:30], y[:30]))
  with pytest.raises(ValueError, match="not both"):
    sgk.SamplingCallback(amagold, num_examples=40, prior=1.,
                         burnin_epochs=1, burnin_steps=5,
                         energy_data=(x, y))


class NoisyLayer(keras.layers.Layer):
  """A custom layer drawing noise in training (no known class to name)."""

  def call(self, x, training=False):
    return x + tf.random.normal(tf.shape(x)) if training else x


def nested_noise():
  inner = keras.Sequential([keras.Input((3,)), keras.layers.GaussianNoise(
      0.1), keras.layers.Dense(4)])
  inputs = keras.Input((3,))
  return keras.Model(inputs, keras.layers.Dense(1)(inner(inputs)))


@pytest.mark.parametrize("make, message", [
    (lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dropout(0.5),
                               keras.layers.Dense(1)]), "Dropout 'dropout"),
    (nested_noise, "GaussianNoise 'gaussian_noise"),
    (lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(4),
                               NoisyLayer(), keras.layers.Dense(1)]),
     "its outputs with training=True differ between two calls"),
])
def test_layers_random_in_training_are_refused(make, message):
  # The sampler would follow the gradient of a randomly perturbed network
  # while the predictions average the network without the noise.
  with pytest.raises(ValueError, match=f"is random in training: {message}.*"
                     "Remove the layer for sampling"):
    tiny_fit(model=make())
  # Through a tf.data pipeline too (a batch synthesized from its spec).
  x, y, _ = logistic_setup(n=40)
  model = make()
  model.compile(optimizer="sgd", loss=keras.losses.BinaryCrossentropy(
      from_logits=True))
  with pytest.raises(ValueError, match="is random in training"):
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(5), verbose=0,
              shuffle=False,
              callbacks=[sgk.SamplingCallback(
                  sgk.SGLD(step_size=1e-3), num_examples=40, prior=1.)])


def test_deterministic_training_layers_are_accepted():
  # Dropout at rate 0 and batch normalisation (batch statistics, but no
  # random numbers) pass the check.
  callback = tiny_fit(model=keras.Sequential([
      keras.Input((3,)), keras.layers.Dropout(0.), keras.layers.Dense(4),
      keras.layers.BatchNormalization(), keras.layers.Dense(1)]))
  assert callback.divergence is None and callback.samples  # It sampled.


def test_amagold_energy_data_that_never_ends_is_refused():
  x, y, _ = logistic_setup(n=40)
  amagold = sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=2, friction=1.)
  repeated = tf.data.Dataset.from_tensor_slices((x, y)).batch(10).repeat()
  with pytest.raises(ValueError, match="infinite tf.data.Dataset.*without "
                     r"\.repeat\(\)"):
    sgk.SamplingCallback(amagold, num_examples=40, prior=1.,
                         energy_data=repeated)
  # Of unknown length (a filter after the repeat): counted, and refused as
  # soon as it holds more than N examples, instead of summing forever.
  unknown = repeated.filter(lambda a, b: True)
  assert int(unknown.cardinality()) == tf.data.UNKNOWN_CARDINALITY
  with pytest.raises(ValueError, match="holds more than num_examples=40 "
                     r"examples \(counted 50 so far, and stopped"):
    tiny_fit(sampler=amagold, energy_data=unknown)
  # The minibatch test draws from a stream: a repeated dataset is fine.
  minibatch = sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=2, friction=1.,
                          acceptance_energy="minibatch")
  tiny_fit(sampler=minibatch, energy_data=repeated)
