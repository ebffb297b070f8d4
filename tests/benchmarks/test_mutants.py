"""benchmarks/mutants.py: every mutant still applies to the package (its
code occurs once in its file, its test files exist), so a change to the
update code that moves a mutated line is noticed here, not skipped by the
script. Running the mutants takes minutes: the script, not CI, does it."""

import os

import pytest

from support.paths import REPO, benchmark

mutants = benchmark("mutants")


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=lambda m: m[0])
def test_each_mutant_changes_its_code_once(mutant):
  _, path, old, new, _ = mutant
  with open(os.path.join(REPO, path)) as f:
    text = f.read()
  mutated = mutants.mutated_text(mutant)
  assert mutated != text
  assert mutated.count(new) == text.count(new) + 1


def test_a_mutant_whose_code_moved_is_refused():
  name, path, _, new, tests = mutants.MUTANTS[0]
  with pytest.raises(ValueError, match="occurs 0 times"):
    mutants.mutated_text((name, path, "no such code", new, tests))
