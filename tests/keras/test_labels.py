"""Labels outside a Keras cross-entropy's likelihood are refused
(tfp_sgmcmc/keras/validation/labels.py).

Keras computes a cross-entropy's formula for any numbers. A binary
cross-entropy of labels coded 1 / 2 (the Statlog files' coding) or -1 / +1
trained and sampled without a word, its mean loss turning negative (it has
no lower bound): the chain samples no posterior of the model. Tiny models
(4 features, 60 examples), one or a few epochs.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc.keras as sgk

N = 60


def data():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(N, 4)).astype(np.float32)
  y = (x[:, 0] + 0.5 * rng.normal(size=N) > 0).astype(np.float32)
  return x, y


def fit(loss, y, units=1, x=None, epochs=1, **kwargs):
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(units)])
  model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
  callback = sgk.SamplingCallback(sgk.SGLD(step_size=1e-3, seed=1),
                                  num_examples=N, prior=1., burnin_epochs=1)
  if x is None:
    x = data()[0]
    kwargs.update(y=y, batch_size=20)
  model.fit(x, epochs=epochs, verbose=0, shuffle=False, callbacks=[callback],
            **kwargs)
  return model


def bce():
  return keras.losses.BinaryCrossentropy(from_logits=True)


def test_binary_labels_coded_1_2_or_minus_1_plus_1_are_refused():
  _, y = data()
  with pytest.raises(ValueError, match=r"binary_crossentropy got labels "
                     r"taking the values 1, 2 \(\d+ of 60 not 0 or 1.*"
                     r"Give fit y - 1"):
    fit(bce(), y + 1)
  with pytest.raises(ValueError, match=r"values -1, 1 .*unbounded below.*"
                     r"Give fit \(y \+ 1\) / 2"):
    fit(bce(), 2 * y - 1)
  with pytest.raises(ValueError, match=r"values 0, 0.1, 0.9, 1 .*soft "
                     r"labels"):
    fit(bce(), np.where(np.arange(N) % 2, y, 0.1 + 0.8 * y))


def test_categorical_labels_must_be_one_hot_rows():
  _, y = data()
  one_hot = keras.utils.to_categorical(y, 2)
  with pytest.raises(ValueError, match=r"categorical_crossentropy got 60 "
                     r"of 60 label rows not one-hot.*soft labels"):
    fit(keras.losses.CategoricalCrossentropy(from_logits=True),
        0.9 * one_hot + 0.05, units=2)
  multi_hot = np.concatenate([one_hot, np.ones((N, 1))], 1)
  with pytest.raises(ValueError, match=r"row sums 2.*multi-hot.*"
                     r"event_ndims=1, predictive='sigmoid'"):
    fit(keras.losses.CategoricalCrossentropy(from_logits=True), multi_hot,
        units=3)


def test_sparse_labels_must_be_class_indices():
  _, y = data()
  with pytest.raises(ValueError, match=r"values 1, 2 \(\d+ of 60 not an "
                     r"integer in \[0, 2\).*y - 1 \(labels numbered 1 to 2"):
    fit(keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        y + 1, units=2)
  with pytest.raises(ValueError, match=r"values 0, 0.5, 1 .*class indices"):
    fit(keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        np.where(np.arange(N) == 3, 0.5, y), units=2)


def ran(model, epochs=1):
  """Whether `fit` ran its epochs: one loss per epoch in the History."""
  return len(model.history.history["loss"]) == epochs


def test_labels_of_the_likelihood_are_accepted():
  _, y = data()
  for labels in (y, y[:, None], y.astype(np.int32)):
    assert ran(fit(bce(), labels))
  assert ran(fit(keras.losses.CategoricalCrossentropy(from_logits=True),
                 keras.utils.to_categorical(y, 2), units=2))
  assert ran(fit(keras.losses.SparseCategoricalCrossentropy(
      from_logits=True), y.astype(np.int64), units=2))
  # NaN is left to the divergence check, which names non-finite data.
  assert ran(fit(bce(), np.where(np.arange(N) == 5, np.nan, y)))
  # Not a Keras cross-entropy: the user's function decides.
  assert ran(fit(sgk.NegativeLogLikelihood(
      lambda t, p: tf.square(t - p[:, 0])), y + 1))


def test_a_pipeline_with_wrong_labels_is_refused_when_its_loss_turns_negative():
  # A tf.data pipeline is not read at fit start; a cross-entropy of labels
  # 0 / 1 is never negative, a 1 / 2 coding drives it below zero.
  x, y = data()
  dataset = tf.data.Dataset.from_tensor_slices((x, y + 1)).batch(20)
  with pytest.raises(ValueError, match=r"binary_crossentropy averaged "
                     r"-[\d.]+ over epoch \d+.*never negative.*1 / 2"):
    fit(bce(), None, x=dataset, epochs=20)
  good = tf.data.Dataset.from_tensor_slices((x, y)).batch(20)
  assert ran(fit(bce(), None, x=good, epochs=20), epochs=20)
