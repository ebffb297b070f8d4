"""The python blocks of the user guides run as written.

Each page's blocks run in order in one namespace, as a reader copies them
into one session; the page's printed claims are checked where a comment
states one. (docs/index.md shows a sketch with the user's own names and is
not run; the Keras pages need data sets and minutes and are run through
their examples; getting_started.md runs in tests/docs/test_readme.py, from
the `sample` block it shares with README.md.)
"""

import contextlib
import io
import os
import re

import numpy as np
import pytest

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs")


def run_page(name):
  with open(os.path.join(DOCS, name)) as f:
    blocks = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
  assert blocks, f"{name} has no python block"
  namespace = {"__name__": "__main__"}
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    for i, block in enumerate(blocks):
      exec(compile(block, f"{name} python block {i}", "exec"), namespace)
  return namespace, out.getvalue()


def test_tfp_workflow_runs_and_its_claims_hold():
  namespace, _ = run_page("tfp_workflow.md")
  # The variance of y ~ N(0, 2^2) through an Exp bijector: about 4.
  assert abs(float(np.mean(namespace["v"])) - 4.) < 0.3
  assert set(namespace["posterior"]) == {"scale", "w"}
  # TFP's frozen mass adaptation around SGHMC built without a mass runs.
  assert np.all(np.isfinite(np.asarray(namespace["adapted_draws"])))


def test_scaling_out_runs():
  namespace, _ = run_page("scaling_out.md")
  for name in ("sharded_draws", "files_draws"):
    assert np.all(np.isfinite(np.asarray(namespace[name]))), name


@pytest.mark.slow
def test_step_sizes_tuning_ends_in_the_same_place_from_any_start():
  # Three XLA-compiled tunings (about half a minute on 2 cores).
  _, printed = run_page("step_sizes.md")
  results = re.findall(r"^([\d.]+) \(([\d.]+), ([\d.]+)\)$", printed, re.M)
  assert [float(r[0]) for r in results] == [0.001, 0.1, 10.], printed
  for start, step_size, acceptance in results:
    # On the double well AMAGOLD accepts 0.89 at 0.10 and 0.83 at 0.15
    # (docs/papers/amagold.md): 85% lies between.
    assert 0.10 < float(step_size) < 0.18, (start, step_size)
    assert abs(float(acceptance) - 0.85) < 0.05, (start, acceptance)
