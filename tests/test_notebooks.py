"""The Colab notebooks run top to bottom (at a small size).

Each code cell is executed in order in one namespace, as a kernel would,
with matplotlib's non-interactive backend; shell and magic lines (`!`, `%`)
are skipped because the package is already installed here. Sizes come from
environment variables that the notebooks read in their parameter cell.
"""

import json
import os

import matplotlib
import pytest

matplotlib.use("Agg")

COLAB = os.path.join(os.path.dirname(__file__), "..", "colab")
NOTEBOOKS = sorted(f for f in os.listdir(COLAB) if f.endswith(".ipynb"))
SMALL = {"NOTEBOOK_NUM_GRADIENTS": "20000", "NOTEBOOK_SMALL": "1"}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name, monkeypatch):
  for key, value in SMALL.items():
    monkeypatch.setenv(key, value)
  with open(os.path.join(COLAB, name)) as f:
    notebook = json.load(f)
  namespace = {"__name__": "__main__"}
  cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
  assert cells, f"{name} has no code"
  for i, cell in enumerate(cells):
    source = "".join(cell["source"])
    lines = [l for l in source.splitlines()
             if not l.lstrip().startswith(("!", "%"))]
    try:
      exec(compile("\n".join(lines), f"{name}[cell {i}]", "exec"),
           namespace)
    except Exception as e:  # pylint: disable=broad-except
      pytest.fail(f"{name}, code cell {i} failed: {type(e).__name__}: {e}")
