"""A model whose one output is named in a dict or listed (`keras.Model(
inputs, {"p": logits})`), compiled with one loss, is the model of that
output: Keras' compiled loss pairs the loss with it, so AMAGOLD's energies
and the predictions read it as the loss does. A loss given in a dict or
list is refused with the fix.

Known answer: the dict-output model runs the chain of the same model with a
plain output (same seeds, same batches), and its averaged probabilities are
the average of the samples' sigmoids computed by hand.
"""

import keras
import numpy as np
import pytest

import tfp_sgmcmc.keras as sgk
from support.keras_fits import logistic_setup


def amagold_fit(x, y, structure):
  inputs = keras.Input((3,))
  logits = keras.layers.Dense(1, kernel_initializer="zeros", name="p")(
      inputs)
  outputs = {"dict": {"p": logits}, "list": [logits], "plain": logits,
             "named labels": {"p": logits}}
  model = keras.Model(inputs, outputs[structure])
  if structure == "named labels":  # As Keras takes them for named outputs.
    y = {"p": y}
  model.compile(optimizer="sgd",
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampling = sgk.SamplingCallback(
      sgk.AMAGOLD(step_size=0.05, num_leapfrog_steps=2, friction=1.,
                  seed=3),
      num_examples=len(x), prior=1., energy_data=(x, y), max_samples=10)
  model.fit(x, y, batch_size=20, epochs=2, shuffle=False, verbose=0,
            callbacks=[sampling])
  return sampling


@pytest.mark.parametrize("structure", ["dict", "list", "named labels"])
def test_one_output_in_a_structure_samples_and_predicts_as_the_tensor(
    structure):
  x, y, _ = logistic_setup(n=200)
  plain = amagold_fit(x, y, "plain")
  named = amagold_fit(x, y, structure)  # energy_data=(x, y) as fit's.
  assert named.num_tests == plain.num_tests == 10
  assert 0 < named.num_accepted == plain.num_accepted
  for a, b in zip(named.posterior.samples, plain.posterior.samples):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  posterior = named.posterior
  probs = posterior.predict(x)
  by_hand = np.mean([1. / (1. + np.exp(-(x @ k + b)))
                     for k, b in zip(*posterior.samples)], axis=0)
  np.testing.assert_allclose(probs, by_hand, rtol=1e-5)
  assert posterior.evaluate_classification(x, y)["accuracy"] > 0.7


def test_a_loss_in_a_dict_or_list_is_refused_with_the_fix():
  bce = keras.losses.BinaryCrossentropy(from_logits=True)
  with pytest.raises(ValueError, match=r"`loss` is a dict of 1 loss.*"
                     r"compile with the loss itself, loss=.*"
                     r"BinaryCrossentropy"):
    sgk.resolve_likelihood({"p": bce})
  with pytest.raises(ValueError, match=r"`loss` is a list of 2 losses.*"
                     r"Concatenate.*NegativeLogLikelihood"):
    sgk.resolve_likelihood([bce, bce])
