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

needs_data = pytest.mark.skipif(
    not os.path.exists(os.path.join(DATA, "mnist")),
    reason=f"MNIST files not found under {DATA}")


@needs_data
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


# --- The row's verdict from the committed run (docs/figures/sghmc_cnn/,
# `python examples/papers/sghmc/sghmc_cnn.py`: 12 epochs of the CNN on
# 8,000 images, about a minute).

ROW = "003, Fig. 7b"
# Every way the run differs from the paper's set-up, as the row names it.
DIFFERENCES = ("instead of CIFAR-10", "batch-norm momentum 0.9 instead of "
               "Keras' default 0.99", "2-epoch warm-up instead of the "
               "paper's 150", "every trainable weight sampled")


def check_cnn_verdict(run, run_099, text):
  """'Holds partly, on a substitute': SGHMC's averaged error falls at every
  epoch and ends below 5%, but above SGD with momentum's; the row quotes
  both runs' numbers and declares every difference."""
  sghmc = np.asarray(run["curves"]["SGHMC"])
  sgd = np.asarray(run["curves"]["SGD with momentum"])
  assert np.all(np.diff(sghmc) < 0), sghmc
  assert sghmc[-1] < 0.05, sghmc
  assert sghmc[-1] > sgd[-1], (sghmc[-1], sgd[-1])
  slow = {m: np.asarray(c) for m, c in run_099["curves"].items()}
  first5 = {m: f"{100 * c[:5].min():.2f}-{100 * c[:5].max():.2f}%"
            for m, c in slow.items()}
  from support import results_rows  # pylint: disable=g-import-not-at-top
  results_rows.assert_quoted(
      text, "**holds partly, on a substitute**", f"{100 * sghmc[0]:.2f}%",
      f"{100 * sghmc[-1]:.2f}%", f"{100 * sgd[-1]:.2f}%",
      first5["SGHMC"], first5["SGD with momentum"],
      f"{100 * slow['SGHMC'][-1]:.2f}%",
      f"{100 * slow['SGD with momentum'][-1]:.2f}%", *DIFFERENCES)


def test_fig7b_row_states_its_runs_verdict():
  from support import results_rows  # pylint: disable=g-import-not-at-top
  check_cnn_verdict(
      results_rows.load_json("sghmc_cnn", "sghmc_cnn.json"),
      results_rows.load_json("sghmc_cnn", "bn_momentum_0.99",
                             "sghmc_cnn.json"),
      results_rows.results_row(ROW))


def test_the_fig7b_check_fails_if_sghmc_led():
  # Able to fail: an SGHMC curve ending below SGD with momentum's, or a row
  # that leaves out a difference, is rejected.
  from support import results_rows  # pylint: disable=g-import-not-at-top
  run = results_rows.load_json("sghmc_cnn", "sghmc_cnn.json")
  run_099 = results_rows.load_json("sghmc_cnn", "bn_momentum_0.99",
                                   "sghmc_cnn.json")
  text = results_rows.results_row(ROW)
  led = dict(run, curves=dict(run["curves"]))
  led["curves"]["SGHMC"] = run["curves"]["SGHMC"][:-1] + [0.03]
  with pytest.raises(AssertionError):
    check_cnn_verdict(led, run_099, text)
  with pytest.raises(AssertionError):
    check_cnn_verdict(run, run_099, text.replace("every trainable weight",
                                                 "the weights"))
