"""benchmarks/mutants.py: every mutant still applies to the package (its
code occurs once in its file, its test files exist), so a change to the
update code that moves a mutated line is noticed here, not skipped by the
script. Running the mutants takes minutes: the script, not CI, does it."""

import pytest

from support.paths import benchmark

mutants = benchmark("mutants")


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=lambda m: m[0])
def test_each_mutant_applies_once(mutant):
  mutants.check_applies(mutant)


def test_a_mutant_whose_code_moved_is_refused():
  name, path, _, new, tests = mutants.MUTANTS[0]
  with pytest.raises(ValueError, match="occurs 0 times"):
    mutants.check_applies((name, path, "no such code", new, tests))
