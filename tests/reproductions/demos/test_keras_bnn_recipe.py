"""The default Keras BNN recipe (examples/keras_bnn_recipe.py,
docs/keras_bnn.md) beats SGD at its best epoch in test NLL (slow: a
paper-size run)."""

import os
import sys

import keras
import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..",
                        "examples")
sys.path.insert(0, EXAMPLES)


@pytest.mark.slow
def test_default_recipe_beats_sgd_at_its_best_epoch_in_nll(shared_data):
  # docs/keras_bnn.md, "A default recipe": 784-100-10 on 6,000 MNIST images;
  # SGD scored at its best validation epoch against the Bayesian average of
  # SGHMC (lr 0.1 / N, alpha 0.1, prior N(0, 0.3^2), T = 0.1) after 10
  # burn-in + 10 sampling epochs, 2 samples per epoch. Seeds 0, 1, 2 gave
  # test NLL 0.181 / 0.192 / 0.186 against SGD's 0.200 / 0.216 / 0.208
  # (at 40 epochs the paired difference is 3-4 standard errors), so the
  # check is the direction.
  import keras_bnn_recipe as recipe  # pylint: disable=import-outside-toplevel
  keras.utils.set_random_seed(0)
  data = recipe.load(shared_data, 6000)
  sgd = recipe.run_sgd(data, epochs=20, seed=0)
  bma = recipe.run_recipe(data, epochs=20, burnin=10, prior=0.3,
                          temperature=0.1, lr=0.1, per_epoch=2, seed=0)
  assert bma["num_samples"] == 20
  assert bma["curve"][-1]["test_nll"] < sgd["test_nll"], (bma["curve"][-1],
                                                         sgd["test_nll"])
