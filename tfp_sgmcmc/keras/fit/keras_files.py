"""The files beside SamplingCallback's backups: the digest that checks
Keras' `latest.weights.h5` against our state, the reads that tell a torn
file from a whole one, and the finished run's state kept outside
`backup_dir` while BackupAndRestore deletes it."""

import atexit
import glob
import hashlib
import json
import os
import shutil
import sys
import warnings
import zipfile

import numpy as np

from tfp_sgmcmc import _files as files

__all__ = ["BACKUP_SUBDIR", "weights_digest", "model_digest",
           "keras_weights_digest", "finished_path", "keep_finished_state",
           "forget_finished_state", "left_by_another_process", "read_json",
           "readable_npz"]

# Our files inside `backup_dir`, and the finished state's beside it.
BACKUP_SUBDIR = "sampling_callback"
FINISHED_SUFFIX = ".sampling_callback.npz"

# The finished states this process wrote (or resumed from), as absolute
# paths: one found at the start of a fit that is not among them was left by
# a process that ended before the user's `save`.
_FINISHED_HERE = set()


def weights_digest(values):
  """SHA-256 of the model's variables (dtype, shape, bytes, in order): the
  check that Keras' `latest.weights.h5` holds the weights of our state."""
  digest = hashlib.sha256()
  for value in values:
    value = np.ascontiguousarray(value)
    digest.update(f"{value.dtype.str}{value.shape}".encode())
    digest.update(value.tobytes())
  return digest.hexdigest()


def model_digest(model):
  return weights_digest([np.array(v.numpy()) for v in
                         model.trainable_variables +
                         model.non_trainable_variables])


def finished_path(callback):
  """Where the state of a finished fit waits, outside `backup_dir` (which
  BackupAndRestore deletes at the end of `fit`), until the user's save or
  the next fit."""
  return os.path.normpath(callback.backup_dir) + FINISHED_SUFFIX


def keep_finished_state(callback):
  """At the end of a fit, before BackupAndRestore deletes `backup_dir`:
  the newest state of ours is linked (or copied) beside it, so that a kill
  during Keras' clean-up cannot lose the finished run's samples."""
  directory = os.path.join(callback.backup_dir, BACKUP_SUBDIR)
  newest = sorted(glob.glob(os.path.join(directory, "epoch_*.npz")))
  final = finished_path(callback)
  if not newest:
    # A fit resumed from the finished state (its backup was deleted): the
    # state stays, now this process's.
    if os.path.exists(final):
      _claim(final)
    return
  files.remove_dead_temporaries(final)
  tmp = files.temporary_name(final)
  try:
    os.link(newest[-1], tmp)
    os.replace(tmp, final)
    files.fsync_directory(os.path.dirname(os.path.abspath(final)))
  except OSError:
    try:
      os.remove(tmp)
    except OSError:
      pass
    with open(newest[-1], "rb") as source:
      files.atomic_write(final, lambda f: shutil.copyfileobj(source, f))
  _claim(final)


def _claim(final):
  if not _FINISHED_HERE:
    atexit.register(_remove_finished_states_at_exit)
  _FINISHED_HERE.add(os.path.abspath(final))


def left_by_another_process(callback):
  """Whether the finished state was written by a process that has ended
  without the user's `save` (killed, or ended by an exception), not by
  this one."""
  return os.path.abspath(finished_path(callback)) not in _FINISHED_HERE


def _remove_finished_states_at_exit():
  """A process that ends normally had the finished fits' samples in
  memory (and the chance to `save` them): their states go once
  BackupAndRestore deleted the backups, so that running the script again
  starts a new fit, as BackupAndRestore does. A process ended by an
  uncaught exception (Python sets `sys.last_value` before this runs), or
  killed, leaves them for the next fit to hand back."""
  if getattr(sys, "last_value", None) is not None:
    return
  for final in sorted(_FINISHED_HERE):
    if not os.path.exists(final[:-len(FINISHED_SUFFIX)]):
      try:
        os.remove(final)
      except OSError:
        pass


def forget_finished_state(callback):
  """The user saved the posterior (or a new fit starts): the finished
  fit's state is no longer needed."""
  if callback.backup_dir is None:
    return
  final = finished_path(callback)
  _FINISHED_HERE.discard(os.path.abspath(final))
  try:
    os.remove(final)
  except FileNotFoundError:
    pass


def keras_weights_digest(callback, weights_path):
  """The digest of the model's variables as Keras' weights file would set
  them (loaded into the model, which `_restore_epoch` then overwrites);
  None if the file is missing or unreadable."""
  if not os.path.exists(weights_path):
    return None
  model = callback.model
  try:
    with callback._strategy.scope(), warnings.catch_warnings():
      # Only the model's variables are compared; Keras' notes on the
      # optimizer's are for its own load, which follows.
      warnings.simplefilter("ignore")
      if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
      model.load_weights(weights_path)
  except Exception:  # pylint: disable=broad-except
    return None  # Torn, truncated, not HDF5: h5py raises many kinds.
  return model_digest(model)


def read_json(path):
  try:
    with open(path) as f:
      data = json.load(f)
  except (OSError, ValueError):
    return None
  return data if isinstance(data, dict) and "epoch" in data else None


def readable_npz(path):
  try:
    with np.load(path, allow_pickle=False) as data:
      json.loads(str(data["header"]))
      for key in data.files:
        data[key]  # pylint: disable=pointless-statement
  except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
    return False
  return True
