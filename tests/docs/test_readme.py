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
  assert len(python_blocks()) >= 3


def test_every_readme_python_block_runs_in_order():
  namespace = {"__name__": "__main__"}
  for i, block in enumerate(python_blocks()):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      exec(compile(block, f"README.md python block {i}", "exec"), namespace)
  # The `sample` block: near the weights the data came from, from a
  # warm-up that arrived, with four chains of their own minibatches.
  fit = namespace["fit"]
  np.testing.assert_allclose(fit.draws.mean(axis=(0, 1)), [1., -1., .5],
                             atol=0.1)
  assert fit.report.arrived and fit.draws.shape == (500, 4, 3)
  assert fit.report.minibatches == "independent minibatches"
  # The data block's claim: the posterior mean is close to the true weights
  # (posterior sd is about 0.01 with N = 10,000 unit-noise examples).
  draws = np.asarray(namespace["draws"])
  assert np.all(np.isfinite(draws))
  np.testing.assert_allclose(draws.mean(axis=(0, 1)), [1., -2., .5],
                             atol=0.05)
  # The Keras block's claim: a Bayesian model average of 20 kept samples,
  # one probability vector per test example.
  probs = np.asarray(namespace["probs"])
  assert probs.shape == (500, 3)
  np.testing.assert_allclose(probs.sum(-1), 1., atol=1e-5)
  assert len(namespace["sampling"].posterior.samples[0]) == 20
  # The JointDistribution block's draws, in the model's structure.
  assert set(namespace["posterior"]) == {"scale", "w"}
  assert np.all(np.isfinite(np.asarray(namespace["posterior"]["w"])))
  # The ArviZ block records that these chains shared their minibatches,
  # as the text after it says.
  assert namespace["idata"].attrs["minibatches"] == "shared by all chains"


def test_pyproject_lower_bounds_are_the_documented_versions_and_hold_here():
  # pyproject.toml's lowest versions are the ones docs/getting_started.md
  # states as checked, it caps no TensorFlow (a cap below Colab's would make
  # pip replace it), and the installed versions satisfy the ranges.
  import tomllib  # pylint: disable=import-outside-toplevel
  from importlib import metadata  # pylint: disable=import-outside-toplevel
  root = os.path.dirname(README)
  with open(os.path.join(root, "pyproject.toml"), "rb") as f:
    dependencies = tomllib.load(f)["project"]["dependencies"]
  with open(os.path.join(root, "docs", "getting_started.md")) as f:
    guide = f.read()
  names = {"tensorflow": "TensorFlow", "tensorflow-probability":
           "TensorFlow Probability", "tf-keras": "tf-keras"}
  for name, label in names.items():
    found = [d[len(name):] for d in dependencies
             if re.fullmatch(rf"{name}\s*>=.*", d)]
    assert len(found) == 1 and "<" not in found[0], (name, dependencies)
    lowest = found[0].strip()[2:]
    assert re.search(rf"{label}\s+>=\s+{re.escape(lowest)}\b", guide), (
        label, lowest)
    assert re.search(rf"\| {re.escape(lowest)}[.\d]* ", guide), (
            f"getting_started.md's table shows no check of {name} {lowest}")
    try:
      installed = metadata.version(name)
    except metadata.PackageNotFoundError:
      continue
    as_tuple = lambda v: tuple(int(p) for p in re.findall(r"\d+", v)[:2])
    assert as_tuple(installed) >= as_tuple(lowest), (name, installed)
