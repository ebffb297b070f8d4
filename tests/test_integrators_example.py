"""CI-sized run of examples/integrators.py (Chen, Ding & Carin 2015, Fig. 1).

The paper's claims: Euler SGHMC is more biased than the symmetric splitting
integrator at the same step size, and explodes at large step sizes where
splitting does not. The margins: at h >= 0.04 the exact stationary
predictions differ by a factor of 2 or more (0.38 vs 0.19 at h = 0.04), and
the sampled biases, with 8 chains x 20,000 steps, are within a few percent of
the predictions (relative standard error of a variance with ESS > 2,000 is
under 3%), so a factor of 1.5 cannot be crossed by Monte Carlo error.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import integrators  # noqa: E402  pylint: disable=g-import-not-at-top


def test_splitting_beats_euler_and_euler_explodes(tmp_path):
  rows, _ = integrators.main(["--out", str(tmp_path), "--steps", "20000"])
  by_h = {r["step_size"]: r for r in rows}
  assert by_h[0.06]["euler_exploded"] and not np.isfinite(by_h[0.06]["euler"])
  assert all(np.isfinite(r["splitting"]) and not r["splitting_exploded"]
             for r in rows)
  for h in (0.04, 0.05):
    assert by_h[h]["euler"] > 1.5 * by_h[h]["splitting"], h
  assert os.path.exists(tmp_path / "fig1_bias_vs_step_size.png")
