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

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


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


def test_setup_py_lower_bounds_are_the_readme_versions_and_hold_here():
  # setup.py's lowest versions are the ones README states as checked, it
  # caps no TensorFlow (a cap below Colab's would make pip replace it), and
  # the installed versions satisfy the ranges.
  from importlib import metadata  # pylint: disable=import-outside-toplevel
  with open(os.path.join(os.path.dirname(README), "setup.py")) as f:
    setup = f.read()
  with open(README) as f:
    readme = f.read()
  names = {"tensorflow": "TensorFlow", "tensorflow-probability":
           "TensorFlow Probability", "tf-keras": "tf-keras"}
  for name, label in names.items():
    found = re.findall(rf'"{name}(>=[\d.]+[^"]*)"', setup)
    assert len(found) == 1 and "<" not in found[0], (name, found)
    lowest = found[0][2:]
    assert re.search(rf"{label}\s+>=\s+{re.escape(lowest)}\b", readme), (
        label, lowest)
    assert re.search(rf"\| {re.escape(lowest)}[.\d]* ", readme), (
            f"README's table shows no check of {name} {lowest}")
    try:
      installed = metadata.version(name)
    except metadata.PackageNotFoundError:
      continue
    as_tuple = lambda v: tuple(int(p) for p in re.findall(r"\d+", v)[:2])
    assert as_tuple(installed) >= as_tuple(lowest), (name, installed)
