"""Paper 003, Fig. 7b at CI size: SGHMC samples a Bayesian CNN (convolutions,
batch norm, max pooling, tanh) through Keras `fit`.

`examples/papers/sghmc/sghmc_cnn.py` on the MNIST test-file split; skips when
../shared/data is absent. The row's claim (docs/results.md, 003 Fig. 7b):
SGHMC trains the CNN, its averaged test error falling far below chance.
"""

import os

import numpy as np
import pytest

from support.helpers import load_example

ex = load_example("papers/sghmc/sghmc_cnn")
DATA = ex.base.DEFAULT_DATA

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(DATA, "mnist")),
    reason=f"MNIST files not found under {DATA}")


def test_sghmc_trains_a_bayesian_cnn_with_batch_norm():
  data = ex.base.load(DATA, 0)
  for key in ("x_train", "y_train"):
    data[key] = data[key][:2000]
  data["x_test"], data["y_test"] = data["x_test"][:1000], data["y_test"][:1000]
  curves, _ = ex.run(data, epochs=4, warmup=1, seed=0, methods=("SGHMC",),
                     batch=100, progress=lambda _: None)
  errors = np.asarray(curves["SGHMC"])
  assert np.all(np.isfinite(errors)), errors
  # Seen (seed 0 three times, seeds 1-2; 2,000 images, batch 100, 1 warm-up
  # + 3 epochs, the averaged error over 1,000 test images): 0.226 -> 0.120,
  # 0.157 -> 0.115 (the same seed, in a later full-suite run; why it differs
  # was not investigated), 0.209 -> 0.113, 0.246 -> 0.136; chance is 0.9.
  # Asserted: the average improves, and ends below 0.17 (seen at most 0.136;
  # the binomial sd of a 13% error on 1,000 images is 0.011). A chain that
  # does not move stays near its random start's error, about 0.9.
  assert errors[-1] < errors[0], errors
  assert errors[-1] < 0.17, errors
