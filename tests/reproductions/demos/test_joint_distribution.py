"""examples/joint_distribution.py: AMAGOLD on TFP JointDistribution models
(eight schools; logistic regression on Statlog Australian) agrees with NUTS,
each posterior moment within 4 Monte Carlo standard errors. CI size here, the
long runs marked slow.
"""

import os

import pytest

from support.helpers import NUM_SE


def _compare(problem, sizes):
  from support.helpers import load_example  # pylint: disable=import-outside-toplevel
  example = load_example("joint_distribution")
  data_dir = example.DEFAULT_DATA_DIR
  if problem == "logistic" and not os.path.exists(
      os.path.join(data_dir, "statlog", "australian.dat")):
    pytest.skip(f"Statlog Australian not found under {data_dir}")
  rows, facts = example.compare(problem, sizes, data_dir=data_dir)
  return rows, facts


def test_eight_schools_amagold_matches_nuts_ci_size():
  rows, facts = _compare("eight_schools", dict(
      amagold=400, amagold_burnin=200, nuts=200, nuts_burnin=200, chains=4))
  assert facts["batch_size"] == facts["num_examples"] == 8  # Full batch.
  assert max(max(r[5], r[6]) for r in rows) < NUM_SE, rows


@pytest.mark.slow
@pytest.mark.parametrize("problem", ["eight_schools", "logistic"])
def test_joint_distribution_example_amagold_matches_long_nuts(problem):
  rows, _ = _compare(problem, dict(amagold=20000, amagold_burnin=2000,
                                   nuts=5000, nuts_burnin=1000, chains=4))
  assert max(max(r[5], r[6]) for r in rows) < NUM_SE, rows
