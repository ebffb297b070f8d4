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

needs_data = pytest.mark.skipif(
    not os.path.exists(os.path.join(DATA, "mnist")),
    reason=f"MNIST files not found under {DATA}")


@needs_data
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


# --- The row's verdict from the committed run
# (docs/figures/sgnuts_curves/sgnuts_curves.json: 784-100-10 on 8,000
# images, 2 + 8 epochs; the CI-size run above is slow).


def check_curves_verdict(results, text):
  """'Holds partly': SG-NUTS's curve rises fast (>= 0.88 after the first
  epoch) but stays below the paper's 0.94; it leads SGHMC only in the first
  2 epochs, ties at the third and trails after, at >= 20x SGHMC's gradients
  per epoch; the row quotes the numbers."""
  from support import results_rows  # pylint: disable=g-import-not-at-top
  nuts = np.asarray(results["SG-NUTS"]["accuracy"])
  sghmc = np.asarray(results["SGHMC"]["accuracy"])
  assert nuts[0] >= 0.88 and nuts[-1] > nuts[0], nuts
  assert nuts.max() < 0.94, nuts
  assert np.all(nuts[:2] > sghmc[:2]), (nuts, sghmc)
  assert nuts[2] == sghmc[2], (nuts, sghmc)
  assert np.all(nuts[3:] < sghmc[3:]), (nuts, sghmc)
  ratio = np.mean(results["SG-NUTS"]["gradients"]) / np.mean(
      results["SGHMC"]["gradients"])
  assert ratio >= 20., ratio
  results_rows.assert_quoted(
      text, "**holds partly**", f"({nuts[0]:.2f} after the first epoch)",
      f"**{nuts[-1]:.3f} after {len(nuts)} epochs**",
      f"({nuts[0]:.2f} vs {sghmc[0]:.2f}-{sghmc[1]:.2f})",
      f"SGHMC ends higher ({sghmc[-1]:.3f}) with 1/{ratio:.0f} of the "
      "gradients")


def test_fig9_row_states_its_runs_verdict():
  from support import results_rows  # pylint: disable=g-import-not-at-top
  check_curves_verdict(
      results_rows.load_json("sgnuts_curves", "sgnuts_curves.json")["results"],
      results_rows.results_row("003, Fig. 9"))


def test_the_fig9_check_fails_if_sgnuts_stayed_ahead():
  # Able to fail: an SG-NUTS curve ahead of SGHMC's at every epoch is
  # rejected.
  from support import results_rows  # pylint: disable=g-import-not-at-top
  results = results_rows.load_json("sgnuts_curves",
                                   "sgnuts_curves.json")["results"]
  results["SG-NUTS"]["accuracy"] = [a + 0.01 for a in
                                    results["SGHMC"]["accuracy"]]
  with pytest.raises(AssertionError):
    check_curves_verdict(results, results_rows.results_row("003, Fig. 9"))
