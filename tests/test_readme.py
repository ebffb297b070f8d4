"""Every python block of README.md runs as written (each on its own)."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def _blocks():
  with open(README, encoding="utf-8") as f:
    text = f.read()
  return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_python_block_runs_as_written(index):
  code = _blocks()[index]
  exec(compile(code, f"README.md python block {index}", "exec"), {})  # pylint: disable=exec-used
