"""Deterministic kill injection: a process kills itself (SIGKILL, nothing
cleaned up) just before one chosen file operation.

`install(spec)` wraps the file operations a save runs through -- opening a
file for writing, each write to it, `os.replace` / `os.rename`, `os.remove`
/ `os.unlink` / `os.rmdir` (so also `shutil.rmtree`), `os.link`, and
Keras' HDF5 weight store (its creation and its close) -- and counts them
once `arm()` is called. `spec` is either a number k (die before the k-th
operation, 1-based) or `LABEL[@n]` (die before the n-th operation whose
label contains LABEL, default the first). Labels look like
`open:training_metadata.json`, `write:c.npz.tmp-...`, `replace:...`,
`unlink:...`, `h5open:...`, `h5close:...`.

Run every k from 1 until a run finishes to place a kill before each file
operation of a save; name a label to place one kill in a chosen window.
`install(spec, log=PATH)` appends each label to PATH, so a test can see
the operations a save runs.
"""

import builtins
import os
import signal

_state = dict(armed=False, count=0, matches=0, spec=None, log=None)


def _hit(label):
  if not _state["armed"]:
    return
  _state["count"] += 1
  if _state["log"]:
    with _real_open(_state["log"], "a") as f:
      f.write(label + "\n")
  spec = _state["spec"]
  if spec is None:
    return
  if isinstance(spec, int):
    die = _state["count"] == spec
  else:
    name, _, nth = spec.partition("@")
    if name in label:
      _state["matches"] += 1
    die = name in label and _state["matches"] == int(nth or 1)
  if die:
    os.kill(os.getpid(), signal.SIGKILL)


_real_open = builtins.open


class _Writer:
  """A file opened for writing whose first write is a kill point (later
  writes only extend the same torn file)."""

  def __init__(self, f, name):
    self._f, self._name, self._written = f, name, False

  def write(self, data):
    if not self._written:
      self._written = True
      _hit(f"write:{self._name}")
    return self._f.write(data)

  def __enter__(self):
    self._f.__enter__()
    return self

  def __exit__(self, *exc):
    return self._f.__exit__(*exc)

  def __iter__(self):
    return iter(self._f)

  def __getattr__(self, name):
    return getattr(self._f, name)


def _wrap(module, name, label):
  real = getattr(module, name)

  def wrapped(*args, **kwargs):
    what = os.path.basename(os.fsdecode(args[0])) if args and isinstance(
        args[0], (str, bytes, os.PathLike)) else "?"
    _hit(f"{label}:{what}")
    return real(*args, **kwargs)

  setattr(module, name, wrapped)


def install(spec=None, log=None):
  """Wraps the file operations; `spec` chooses the kill point (None: only
  log). Counting starts at `arm()`."""
  if spec is not None and str(spec).isdigit():
    spec = int(spec)
  _state.update(spec=spec, log=log)

  def opened(file, mode="r", *args, **kwargs):
    if any(c in mode for c in "wax+") and isinstance(
        file, (str, bytes, os.PathLike)):
      name = os.path.basename(os.fsdecode(file))
      _hit(f"open:{name}")  # Before the open truncates the file.
      return _Writer(_real_open(file, mode, *args, **kwargs), name)
    return _real_open(file, mode, *args, **kwargs)

  builtins.open = opened
  for name, label in (("replace", "replace"), ("rename", "rename"),
                      ("remove", "unlink"), ("unlink", "unlink"),
                      ("rmdir", "rmdir"), ("link", "link")):
    _wrap(os, name, label)
  try:  # Keras' HDF5 store, where the process uses Keras.
    from keras.src.saving import saving_lib  # pylint: disable=import-error
  except ImportError:
    return
  store = saving_lib.H5IOStore
  real_init, real_close = store.__init__, store.close

  def init(self, path_or_io, *args, **kwargs):
    writing = kwargs.get("mode", args[1] if len(args) > 1 else "r") == "w"
    if writing:
      _hit(f"h5open:{os.path.basename(str(path_or_io))}")
    real_init(self, path_or_io, *args, **kwargs)

  def close(self):
    if getattr(self, "mode", "r") == "w":
      _hit(f"h5close:{os.path.basename(str(self.path_or_io))}")
    return real_close(self)

  store.__init__, store.close = init, close


def arm():
  """Starts counting (e.g. at the epoch whose saves are under test)."""
  _state["armed"] = True
