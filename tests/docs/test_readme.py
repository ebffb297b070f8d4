"""Every python block of README.md runs as written, in order, in one namespace,
and so do docs/getting_started.md's (the other guides: test_guides.py).

A reader copies the blocks one after another into one session; a later block
may use what an earlier one defined, and nothing else. Each block's printed
result is checked against the claim its comment makes.

Both pages open with the same `sample` call on the same data (getting
started's block adds a print): the test runs that code once, in a fresh
namespace, and each page continues from its own copy of that namespace.
"""

import contextlib
import io
import os
import re

import numpy as np

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
GETTING_STARTED = os.path.join(os.path.dirname(README), "docs",
                               "getting_started.md")


def python_blocks(path=README):
  with open(path) as f:
    return re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)


def run_blocks(blocks, name, namespace):
  """Runs `blocks` in order in `namespace`; returns what they printed."""
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    for i, block in enumerate(blocks):
      exec(compile(block, f"{name} python block {i}", "exec"), namespace)
  return out.getvalue()


def test_readme_has_python_blocks():
  assert len(python_blocks()) >= 3


def check_sample_block(fit):
  # The `sample` block: near the weights the data came from (posterior sd
  # about 0.01), from a warm-up that arrived, with four chains of their own
  # minibatches.
  np.testing.assert_allclose(fit.draws.mean(axis=(0, 1)), [1., -1., .5],
                             atol=0.1)
  assert fit.report.arrived and fit.draws.shape == (500, 4, 3)
  assert fit.report.minibatches == "independent minibatches"


def numbers_masked(text):
  return re.sub(r"-?\d[\d,]*(\.\d+)?", "#", text)


def check_report_shown(printed):
  # getting_started.md's "Reading the report" shows the report this call
  # prints: line for line the same words, whatever the numbers (timings
  # and the last digits of a float vary with the machine).
  with open(GETTING_STARTED) as f:
    shown = re.search(r"### Reading the report\n.*?```text\n(.*?)```",
                      f.read(), flags=re.S).group(1)
  report = printed[printed.index("tfp_sgmcmc.sample:"):]
  report = report[:report.index("problems found.") + len("problems found.")]
  assert numbers_masked(report) == numbers_masked(shown.strip()), (
      report, shown)


def test_every_readme_and_getting_started_python_block_runs_in_order():
  readme, guide = python_blocks(), python_blocks(GETTING_STARTED)
  # The shared opening: README's first block is the start of getting
  # started's first block, character for character.
  assert guide[0].startswith(readme[0]), (readme[0], guide[0])
  opening = {"__name__": "__main__"}
  printed = run_blocks(readme[:1], "README.md", opening)
  check_report_shown(printed)

  namespace = dict(opening)
  run_blocks(readme[1:], "README.md", namespace)
  check_sample_block(namespace["fit"])
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

  # docs/getting_started.md, from its own copy of the opening's namespace.
  namespace = dict(opening)
  printed = run_blocks([guide[0][len(readme[0]):]] + guide[1:],
                       "docs/getting_started.md", namespace)
  # Its `fit` is the opening's, checked above; the guide prints its claim.
  assert printed.splitlines()[0] == "True independent minibatches", printed
  # The step size is tuned to 85% acceptance.
  accepted = np.asarray(namespace["accepted"], dtype=float)
  assert abs(accepted.mean() - 0.85) < 0.1, accepted.mean()
  # Posterior sd about 0.01 with N = 10,000 unit-noise examples.
  draws = np.asarray(namespace["draws"])
  np.testing.assert_allclose(draws.mean(axis=(0, 1)), [1., -2., .5],
                             atol=0.05)


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
