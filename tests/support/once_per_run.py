"""A module fixture's value computed once per test run, by whichever xdist
worker asks first.

`--dist worksteal` hands a module's later tests to the other worker when it
runs out of its own, and a module-scoped fixture is then built on both. For
a fixture that takes tens of seconds, `once_per_run` keeps its value in a
file of the run's shared temporary folder: the first worker to ask computes
it (holding a lock, so the other waits rather than computes it again) and
every later ask reads it. The value must pickle: plain numbers and arrays,
not models or callbacks.
"""

import fcntl
import os
import pickle


def once_per_run(tmp_path_factory, name, compute):
  """`compute()`, or its value computed earlier in this run under `name`."""
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent  # The folder the run's workers share.
  path = root / f"once_per_run-{name}.pickle"
  with open(root / f"once_per_run-{name}.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if path.exists():
      with open(path, "rb") as f:
        return pickle.load(f)
    value = compute()
    partial = path.with_suffix(".partial")
    with open(partial, "wb") as f:
      pickle.dump(value, f)
    os.replace(partial, path)
    return value
