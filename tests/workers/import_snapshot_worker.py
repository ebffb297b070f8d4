"""Imports the modules named on the command line and prints, one a line,
every attribute of TensorFlow, TFP and Keras that the import changed.

    python import_snapshot_worker.py NAME... [-- NAME...]...

Each group of names (groups separated by `--`) is imported in turn and
compared against a snapshot taken just before it, so that one process (one
TensorFlow import) checks several imports; each group's report starts with
its "compared" line.

Before the import it records, for every loaded module of those packages
(with TFP's and Keras' public namespaces loaded first), each module
attribute and each attribute in the `__dict__` of each class found there,
as name -> id of the value; after the import it compares. A submodule the
import loaded for the first time (a new module attribute holding a
module, or a lazy loader replaced by its module) is not a change.
"""

import importlib
import sys
import types

import keras
import tensorflow as tf  # pylint: disable=unused-import
import tensorflow_probability as tfp
from keras.src.callbacks import callback_list  # pylint: disable=unused-import

PACKAGES = ("tensorflow", "tensorflow_probability", "keras", "tf_keras")

# TFP's namespaces load lazily: touch them so that they are compared.
for namespace in ("mcmc", "experimental.mcmc", "experimental.stats",
                  "distributions", "bijectors", "math", "random", "stats",
                  "optimizer"):
  obj = tfp
  for part in namespace.split("."):
    obj = getattr(obj, part)
for namespace in (keras.callbacks, keras.optimizers, keras.layers,
                  keras.losses, keras.metrics, keras.models, keras.utils):
  vars(namespace)


def snapshot():
  modules, classes = {}, {}
  for name, module in list(sys.modules.items()):
    if (not isinstance(module, types.ModuleType) or
        name.split(".")[0] not in PACKAGES):
      continue
    try:
      values = dict(vars(module))
    except TypeError:
      continue
    modules[name] = {k: id(v) for k, v in values.items()}
    for value in values.values():
      if isinstance(value, type) and id(value) not in classes:
        classes[id(value)] = (
            f"{value.__module__}.{value.__qualname__}", value,
            {k: id(v) for k, v in vars(value).items()})
  return modules, classes


def changes(before_modules, before_classes):
  found = []
  for name, cls, attributes in before_classes.values():
    now = {k: id(v) for k, v in vars(cls).items()}
    found += [f"{name}.{k}" for k in sorted(set(attributes) | set(now))
              if attributes.get(k) != now.get(k)]
  for name, attributes in before_modules.items():
    module = sys.modules.get(name)
    now = {k: id(v) for k, v in vars(module).items()}
    for k in sorted(set(attributes) | set(now)):
      if attributes.get(k) == now.get(k):
        continue
      if isinstance(getattr(module, k, None), types.ModuleType):
        continue  # A submodule loaded (or a lazy loader resolved).
      found.append(f"{name}.{k}")
  return found


def main(args):
  groups = [[]]
  for arg in args:
    if arg == "--":
      groups.append([])
    else:
      groups[-1].append(arg)
  for names in groups:
    before = snapshot()
    for name in names:
      importlib.import_module(name)
    print(f"compared {len(before[0])} modules and {len(before[1])} classes")
    for change in changes(*before):
      print("CHANGED", change)


if __name__ == "__main__":
  main(sys.argv[1:])
