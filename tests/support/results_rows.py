"""The committed outputs of the paper reproductions and the rows that quote
them: tests that check a row of docs/results.md against the output files
under docs/figures/ it was written from.

A row's CI test can assert its verdict from the full run's file when the
effect takes the full size to appear; these helpers find the file and the row,
so that the test fails when a rerun's numbers no longer say
what the docs say, or when the docs quote a number the file does not give.
"""

import json
import os

from support.paths import REPO

DOCS = os.path.join(REPO, "docs")
FIGURES = os.path.join(DOCS, "figures")


def figure_path(*parts):
  """The path of a committed output file, docs/figures/<parts>."""
  return os.path.join(FIGURES, *parts)


def load_json(*parts):
  with open(figure_path(*parts)) as f:
    return json.load(f)


def read_text(*parts):
  with open(figure_path(*parts)) as f:
    return f.read()


def results_row(title):
  """The line of docs/results.md whose first cell contains `title`."""
  with open(os.path.join(DOCS, "results.md")) as f:
    rows = [line for line in f if line.startswith("| ")
            and title in line.split(" | ")[0]]
  assert len(rows) == 1, (title, len(rows))
  return rows[0]


def assert_quoted(text, *numbers):
  """Every string in `numbers` (formatted from the file) appears in `text`."""
  missing = [n for n in numbers if n not in text]
  assert not missing, (missing, text[:300])
