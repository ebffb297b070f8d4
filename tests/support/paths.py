"""Where the tests find the repository's files and the real data sets.

Computed from this file's place (tests/support/), so that a test module at
any depth under tests/ reaches the same files.
"""

import os

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)
# The scripts that tests run in fresh Python processes.
WORKERS = os.path.join(TESTS, "workers")

# ../shared/data from the repository's root; TFP_SGMCMC_SHARED_DATA overrides
# it (e.g. for a git worktree that lives elsewhere).
SHARED_DATA = os.path.abspath(os.environ.get(
    "TFP_SGMCMC_SHARED_DATA", os.path.join(REPO, "..", "shared", "data")))

# The benchmark scripts, importable as modules by `benchmark`.
BENCHMARKS = os.path.join(REPO, "benchmarks")


def benchmark(name):
  """The script benchmarks/`name`.py as a module (its folder on sys.path
  only while it is imported, as its own sibling imports need)."""
  import importlib  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  sys.path.insert(0, BENCHMARKS)
  try:
    return importlib.import_module(name)
  finally:
    sys.path.remove(BENCHMARKS)
