"""Importing the library changes nothing in TensorFlow, TFP or Keras: no
class or module attribute of theirs is replaced, added or removed
(workers/import_snapshot_worker.py compares every one, in a fresh process),
and no line of the package assigns one.
"""

import os
import re
import subprocess
import sys

import tfp_sgmcmc
from support.paths import WORKERS

_WORKER = os.path.join(WORKERS, "import_snapshot_worker.py")
_PACKAGE = os.path.dirname(tfp_sgmcmc.__file__)


def _changed_by_importing(*names, path=()):
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [*path, os.path.dirname(_PACKAGE), env.get("PYTHONPATH", "")])
  proc = subprocess.run([sys.executable, _WORKER, *names],
                        capture_output=True, text=True, timeout=600, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.splitlines()
  compared = [line for line in lines if line.startswith("compared")]
  assert compared, proc.stdout[-3000:]
  modules, classes = map(int, re.findall(r"\d+", compared[0]))
  # TensorFlow alone loads thousands of modules: the snapshot saw them.
  assert modules > 1000 and classes > 1000, compared
  return [line.split(" ", 1)[1] for line in lines
          if line.startswith("CHANGED ")]


def test_importing_the_library_and_its_keras_adapter_changes_nothing():
  assert _changed_by_importing("tfp_sgmcmc", "tfp_sgmcmc.keras") == []


def test_the_snapshot_sees_a_patched_method_and_a_patched_property(tmp_path):
  # The check can fail: a module that patches as the library once did.
  (tmp_path / "patching_module.py").write_text(
      "import keras\n"
      "import tensorflow_probability as tfp\n"
      "fit = keras.Model.fit\n"
      "keras.Model.fit = lambda self, *a, **k: fit(self, *a, **k)\n"
      "remc = tfp.mcmc.ReplicaExchangeMC\n"
      "remc.make_kernel_fn = property(remc.make_kernel_fn.fget)\n"
      "keras.callbacks.CallbackList._marker = True\n")
  changed = _changed_by_importing("patching_module", path=[str(tmp_path)])
  assert changed == [
      "keras.src.callbacks.callback_list.CallbackList._marker",
      "keras.src.models.model.Model.fit",
      "tensorflow_probability.python.mcmc.replica_exchange_mc."
      "ReplicaExchangeMC.make_kernel_fn"], changed


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
