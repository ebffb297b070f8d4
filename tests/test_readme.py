"""Every python block of README.md runs as written, in order, in one namespace.

A reader copies the blocks one after another into one session; a later block
may use what an earlier one defined, and nothing else. Each block's printed
result is checked against the claim its comment makes.
"""

import contextlib
import io
import os
import re

import numpy as np

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def python_blocks():
  with open(README) as f:
    return re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)


def test_readme_has_python_blocks():
  assert len(python_blocks()) >= 2


def test_every_readme_python_block_runs_in_order():
  namespace = {"__name__": "__main__"}
  for i, block in enumerate(python_blocks()):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      exec(compile(block, f"README.md python block {i}", "exec"), namespace)
  # The data block's claim: the posterior mean is close to the true weights
  # (posterior sd is about 0.01 with N = 10,000 unit-noise examples).
  draws = np.asarray(namespace["draws"])
  assert np.all(np.isfinite(draws))
  np.testing.assert_allclose(draws.mean(axis=(0, 1)), [1., -2., .5],
                             atol=0.05)
  # The quickstart's claim: the step size is tuned to 85% acceptance.
  accepted = np.asarray(namespace["accepted"], dtype=float)
  assert abs(accepted.mean() - 0.85) < 0.1, accepted.mean()
