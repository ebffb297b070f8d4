import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

warnings.filterwarnings("ignore", message=".*is not calibrated.*")

import pytest  # noqa: E402

# ../shared/data from the repository's root; TFP_SGMCMC_SHARED_DATA overrides
# it (e.g. for a git worktree that lives elsewhere).
SHARED_DATA = os.path.abspath(os.environ.get(
    "TFP_SGMCMC_SHARED_DATA",
    os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")))


def pytest_configure(config):
  config.addinivalue_line("markers", "slow: long reproduction, CI runs a "
                          "small size (select with -m slow)")


@pytest.fixture
def shared_data():
  if not os.path.isdir(SHARED_DATA):
    pytest.skip(f"real data not found at {SHARED_DATA} (../shared/data)")
  return SHARED_DATA
