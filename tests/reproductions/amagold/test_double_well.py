"""The double-well experiment of the AMAGOLD paper (Figure 1), CI-sized.

Runs `examples/papers/amagold/double_well.py` at its default size (1e5 draws per sampler
and step size over 40 chains) for the largest step size and the tuned run,
and asserts the paper's ordering. The margins come from the run-to-run
spread over seeds 0-7 of exactly this configuration:

  eps = 0.25  SGHMC sym. KL 0.026 - 0.040, AMAGOLD 0.0022 - 0.0051
              (SGHMC / AMAGOLD ratio 5.7 - 17)
  eps = 0.20  SGHMC 0.0074 - 0.0144, AMAGOLD 0.0014 - 0.0070 (the ratio
              fell to 1.06 on one seed: nothing to assert, not run)
  tuned       acceptance 0.848 - 0.853, step size 0.133 - 0.135,
              sym. KL 0.0008 - 0.0065.

AMAGOLD's KL is the histogram noise floor (110 bins; its spread is mostly
how the mass splits between the wells in a finite run); SGHMC's excess at
eps = 0.25 is its stationary bias. Each bound below sits at about half the
least favourable value seen (twice, for upper bounds).
"""

import os

import pytest
from support.helpers import load_example

@pytest.fixture(scope="module")
def double_well():
  return load_example("papers/amagold/double_well")


@pytest.fixture(scope="module")
def result(double_well):
  return double_well.run_experiment(step_sizes=(0.25,), seed=0,
                                    verbose=False, **double_well.DEFAULT)


def test_amagold_kl_is_well_below_sghmc_at_large_step_size(result):
  row = {r["step_size"]: r for r in result["rows"]}[0.25]
  assert row["sghmc_kl"] > 3. * row["amagold_kl"], row
  assert row["sghmc_kl"] > 0.013, row
  assert row["amagold_kl"] < 0.01, row


def test_tuned_amagold_reaches_85_percent_and_the_true_density(result):
  tuned = result["tuned"]
  assert abs(tuned["accept"] - 0.85) < 0.02
  assert 0.07 < tuned["step_size"] < 0.27  # Up from 0.01.
  assert tuned["kl"] < 0.013


def test_example_writes_the_four_figures(double_well, result, tmp_path):
  paths = double_well.write_figures(result, str(tmp_path))
  assert len(paths) == 4
  for path in paths:
    assert os.path.getsize(path) > 1000
