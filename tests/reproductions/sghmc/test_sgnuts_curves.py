"""Paper 003, Fig. 9: SG-NUTS learning curves on MNIST (CI size).

`examples/papers/sghmc/sgnuts_curves.py` on the MNIST test-file split; the test skips
when ../shared/data is absent. At CI size (784-32-10, 1,000 training images,
10 iterations per epoch, no warm-up, 3 epochs), the row's claim: SG-NUTS's
curve is ahead of SGHMC's early on and rises.
"""

import os

import numpy as np
import pytest

from support.helpers import load_example

ex = load_example("papers/sghmc/sgnuts_curves")
DATA = ex.base.SHARED_DATA

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(DATA, "mnist")),
    reason=f"MNIST files not found under {DATA}")


@pytest.mark.slow  # about 30 s on the shared cores (SG-NUTS compiles slowly)
def test_sgnuts_curve_is_ahead_early_and_rises():
  # Seen (seeds 0-1): SG-NUTS 0.704 / 0.755 / 0.780 and 0.492 / 0.700 /
  # 0.737 after epochs 1-3; SGHMC 0.128 / 0.169 / 0.240 and 0.096 / 0.164 /
  # 0.317 (at 10 iterations per epoch and the paper's eta SGHMC has barely
  # moved); SG-NUTS 310 gradients per epoch against 10.
  result = ex.run_experiment(warmup=0, epochs=3, num_train=1000, hidden=32,
                             draws_per_epoch=2, log=lambda *_: None)
  nuts = np.asarray(result["SG-NUTS"]["accuracy"])
  sghmc = np.asarray(result["SGHMC"]["accuracy"])
  assert np.all(nuts > sghmc + 0.05), (nuts, sghmc)
  assert nuts[-1] > nuts[0], nuts
  assert np.mean(result["SG-NUTS"]["gradients"]) >= 5 * np.mean(
      result["SGHMC"]["gradients"])
