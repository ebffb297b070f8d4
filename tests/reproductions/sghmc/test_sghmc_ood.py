"""Paper 003, Fig. 6a: SGHMC BNN uncertainty out of distribution (small).

`examples/papers/sghmc/sghmc_ood.py`: MNIST test-file split, Fashion-MNIST sprite images
as the out-of-distribution set; skips when ../shared/data is absent.
"""

import os

import pytest

from support.helpers import load_example

ex = load_example("papers/sghmc/sghmc_ood")
DATA = ex.base.SHARED_DATA

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(DATA, "fashion-mnist-sprite")),
    reason=f"MNIST / Fashion-MNIST files not found under {DATA}")


@pytest.mark.slow  # about 25 s on the shared cores (two compiled samplers)
def test_sghmc_average_is_less_confident_out_of_distribution():
  # 784-32-10 on 2,000 images, 3 warm-up + 7 epochs of 20 iterations. Seen
  # (seeds 0-1): SGHMC's mean OOD entropy 0.948 / 0.952 nats against the
  # point estimate's 0.301 / 0.592 and its own in-distribution 0.350 /
  # 0.506; confident (> 0.9) on 15% / 12% of the OOD images against the
  # point estimate's 69% / 35%.
  result = ex.run_experiment(warmup=3, epochs=7, num_train=2000, hidden=32,
                             draws_per_epoch=4)
  bnn = result["SGHMC (Bayesian average)"]
  point = result["SGD with momentum (point estimate)"]
  assert bnn["entropy_ood"] > 1.3 * point["entropy_ood"], (bnn, point)
  assert bnn["entropy_ood"] > bnn["entropy_in"] + 0.3, bnn
  assert bnn["confident_ood"] < point["confident_ood"], (bnn, point)
  assert bnn["accuracy"] > 0.8, bnn
