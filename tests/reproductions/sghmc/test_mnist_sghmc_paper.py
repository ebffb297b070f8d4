"""SGHMC paper (003), Fig. 5 at CI size: SGHMC, SGLD, SGD and SGD with
momentum on an MNIST MLP (examples/papers/sghmc/mnist_sghmc_paper.py), on
the MNIST file of ../shared/data."""

import os
import sys

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..",
                        "examples", "papers")
for _paper in ("amagold", "sghmc"):
  sys.path.insert(0, os.path.join(EXAMPLES, _paper))

import bnn_table2  # noqa: E402  pylint: disable=wrong-import-position
import mnist_sghmc_paper  # noqa: E402  pylint: disable=wrong-import-position

DATA = bnn_table2.DEFAULT_DATA
needs_data = pytest.mark.skipif(
    not os.path.exists(os.path.join(DATA, "mnist",
                                    "t10k-images-idx3-ubyte.gz")),
    reason=f"MNIST test file not found under {DATA} (../shared/data)")


@needs_data
def test_sghmc_paper_sghmc_beats_sgld_and_ties_sgd():
  # Paper 003, Fig. 5 at CI size: 4 epochs (1 warm-up) of the four methods
  # with the paper's eta and alpha. Measured over seeds 0, 1, 2: errors
  # after epoch 4: SGD 9.1 / 9.4 / 9.6%, SGD with momentum 12.0 / 16.3 /
  # 14.0%, SGHMC 9.2 / 11.1 / 11.7%, SGLD 61.8 / 48.0 / 68.3% (its eta =
  # 4e-5 starts slowly from the random initialisation, and the average
  # still holds its first samples); chance is 90%.
  data = mnist_sghmc_paper.load(DATA, 0)
  curves, _ = mnist_sghmc_paper.run(data, epochs=4, warmup=1, seed=0,
                                    progress=lambda _: None)
  assert set(curves) == {"SGD", "SGD with momentum", "SGLD", "SGHMC"}
  for name, errors in curves.items():
    assert len(errors) == 4 and np.all(np.isfinite(errors)), (name, errors)
  # The row's claim (docs/results.md, 003 Fig. 5): SGHMC beats SGLD clearly
  # but only ties the optimisers. Over seeds 0-2, SGLD - SGHMC was 0.36 to
  # 0.57 (asserted 0.25) and SGHMC - SGD -0.001 to 0.021 (asserted |.| <
  # 0.05, "within 5 points").
  assert curves["SGHMC"][-1] < 0.2
  assert curves["SGLD"][-1] > curves["SGHMC"][-1] + 0.25, curves
  assert abs(curves["SGHMC"][-1] - curves["SGD"][-1]) < 0.05, curves
