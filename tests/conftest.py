"""Set-up for every test: tests/ on sys.path, the real-data fixture, and a
marker for each folder.

The folders say what a test checks (markers registered in pytest.ini):

    unit/           pure functions and protocol, mirroring the package (unit)
    integration/    the kernels run as chains through TFP's machinery and the
                    library's long-run drivers (integration)
    statistical/    samplers against known moments and exact stationary
                    laws, Monte Carlo tolerances (statistical)
    errors/         bad input and misuse fail early and clearly (errors)
    keras/          the Keras adapter through `fit` (keras); its conftest.py
                    gives the linear-regression `problem` fixture
    reproductions/  the papers' experiments at CI size, one folder per
                    paper as in examples/papers/, and demos/ (reproduction)
    processes/      runs in fresh processes started from workers/ (processes)
    docs/           README blocks and Colab notebooks (docs)
    benchmarks/     the benchmark scripts at tiny sizes (benchmarks)
    support/        shared machinery, imported as `support.<module>`
    workers/        scripts run in subprocesses, not collected

tests/unit/ is a package (its files mirror the library's modules, so a name
such as test_amagold.py stands in unit/dynamics/ and in unit/kernels/). The
other folders have no __init__.py, so that tests/keras/ can never shadow the
keras package; their modules are imported by file name (pytest's default
import mode), so a test_*.py name outside unit/ must be unique.
"""

import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

warnings.filterwarnings("ignore", message=".*is not calibrated.*")

import pytest  # noqa: E402

from support.paths import SHARED_DATA  # noqa: E402,F401  (re-exported)

TESTS = os.path.dirname(os.path.abspath(__file__))

# tests/<folder>/... -> the marker every test under it gets.
FOLDER_MARKERS = {
    "unit": "unit",
    "integration": "integration",
    "statistical": "statistical",
    "errors": "errors",
    "keras": "keras",
    "reproductions": "reproduction",
    "processes": "processes",
    "docs": "docs",
    "benchmarks": "benchmarks",
}


@pytest.hookimpl(tryfirst=True)  # Before -m deselects by marker.
def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    parts = os.path.relpath(str(item.path), TESTS).split(os.sep)
    marker = FOLDER_MARKERS.get(parts[0]) if len(parts) > 1 else None
    if marker is not None:
      item.add_marker(marker)


@pytest.fixture
def shared_data():
  if not os.path.isdir(SHARED_DATA):
    pytest.skip(f"real data not found at {SHARED_DATA} (../shared/data)")
  return SHARED_DATA
