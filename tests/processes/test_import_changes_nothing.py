"""Importing the library changes nothing in TensorFlow, TFP or Keras: no
class or module attribute of theirs is replaced, added or removed
(workers/import_snapshot_worker.py compares every one, in a fresh process),
and no line of the package assigns one.
"""

import os
import re
import subprocess
import sys

import pytest

import tfp_sgmcmc
from support.paths import WORKERS

_WORKER = os.path.join(WORKERS, "import_snapshot_worker.py")
_PACKAGE = os.path.dirname(tfp_sgmcmc.__file__)


def _changed_by_importing(*groups, path=()):
  """Per group of module names, imported in turn in one fresh process: the
  attributes of TF, TFP and Keras that importing the group changed."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [*path, os.path.dirname(_PACKAGE), env.get("PYTHONPATH", "")])
  args = [a for k, names in enumerate(groups)
          for a in (["--"] if k else []) + list(names)]
  proc = subprocess.run([sys.executable, _WORKER, *args],
                        capture_output=True, text=True, timeout=600, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  reports = proc.stdout.split("compared ")[1:]
  assert len(reports) == len(groups), proc.stdout[-3000:]
  changed = []
  for report in reports:
    lines = report.splitlines()
    modules, classes = map(int, re.findall(r"\d+", lines[0]))
    # TensorFlow alone loads thousands of modules: the snapshot saw them.
    assert modules > 1000 and classes > 1000, lines[0]
    changed.append([line.split(" ", 1)[1] for line in lines[1:]
                    if line.startswith("CHANGED ")])
  return changed


# A module that patches as the library once did.
_PATCHING_MODULE = (
    "import keras\n"
    "import tensorflow_probability as tfp\n"
    "fit = keras.Model.fit\n"
    "keras.Model.fit = lambda self, *a, **k: fit(self, *a, **k)\n"
    "remc = tfp.mcmc.ReplicaExchangeMC\n"
    "remc.make_kernel_fn = property(remc.make_kernel_fn.fget)\n"
    "keras.callbacks.CallbackList._marker = True\n")


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
  """One process imports the library and its Keras adapter, then (against
  a new snapshot) a module that patches TF's classes."""
  folder = tmp_path_factory.mktemp("patching")
  (folder / "patching_module.py").write_text(_PATCHING_MODULE)
  library, patching = _changed_by_importing(
      ("tfp_sgmcmc", "tfp_sgmcmc.keras"), ("patching_module",),
      path=[str(folder)])
  return {"library": library, "patching": patching}


def test_importing_the_library_and_its_keras_adapter_changes_nothing(
    changed):
  assert changed["library"] == []


def test_the_snapshot_sees_a_patched_method_and_a_patched_property(changed):
  # The check can fail: the patching module's changes are all seen.
  assert changed["patching"] == [
      "keras.src.callbacks.callback_list.CallbackList._marker",
      "keras.src.models.model.Model.fit",
      "tensorflow_probability.python.mcmc.replica_exchange_mc."
      "ReplicaExchangeMC.make_kernel_fn"], changed["patching"]


# An assignment to an attribute of a name bound to TF/TFP/Keras, or a
# setattr / delattr call on one.
_ASSIGNMENT = re.compile(
    r"^\s*(tf|tfp|keras|tensorflow|tensorflow_probability|tfd|tfb)"
    r"(\.[A-Za-z_]\w*)+\s*(=|\+=)(?!=)")
_SETATTR = re.compile(r"\b(setattr|delattr)\(")


def test_no_line_of_the_package_assigns_a_tensorflow_attribute():
  found = []
  for root, _, files in os.walk(_PACKAGE):
    for name in files:
      if not name.endswith(".py"):
        continue
      path = os.path.join(root, name)
      with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
          if _ASSIGNMENT.search(line) or _SETATTR.search(line):
            found.append(f"{os.path.relpath(path, _PACKAGE)}:{number}: "
                         f"{line.strip()}")
  assert not found, "\n".join(found)
