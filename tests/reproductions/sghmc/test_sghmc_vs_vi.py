"""Paper 003, Fig. 6b at CI size: SGHMC against mean-field VI on an MNIST BNN.

`examples/papers/sghmc/sghmc_vs_vi.py` on the MNIST test-file split; skips when
../shared/data is absent. The row (docs/results.md, 003 Fig. 6b) says the
paper's claim does not hold at our budget: VI's averaged test error is below
SGHMC's. This test asserts that direction at a small size.
"""

import os

import numpy as np
import pytest

from support.helpers import load_example

ex = load_example("papers/sghmc/sghmc_vs_vi")
DATA = ex.base.DEFAULT_DATA

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(DATA, "mnist")),
    reason=f"MNIST files not found under {DATA}")


def test_vi_is_ahead_of_sghmc_at_a_short_budget():
  # 2,000 training images, 1,000 test images, 6 epochs (SGHMC: 1 warm-up).
  # Seen (seeds 0-1): SGHMC 0.155 / 0.140, VI 0.115 / 0.110 after epoch 6
  # (SGHMC's curve 0.46 -> 0.155, VI's 0.27 -> 0.115 on seed 0).
  data = ex.base.load(DATA, 0)
  for key in ("x_train", "y_train"):
    data[key] = data[key][:2000]
  data["x_test"], data["y_test"] = data["x_test"][:1000], data["y_test"][:1000]
  curves, _ = ex.base.run(data, 6, 1, 0, methods=("SGHMC",),
                          progress=lambda _: None)
  vi, _, _ = ex.run_vi(data, 6, 0, progress=lambda _: None)
  sghmc = np.asarray(curves["SGHMC"])
  vi = np.asarray(vi)
  assert np.all(np.isfinite(sghmc)) and np.all(np.isfinite(vi))
  assert sghmc[-1] < 0.25 and vi[-1] < 0.25, (sghmc, vi)   # both learn
  assert vi[-1] < sghmc[-1], (vi, sghmc)
