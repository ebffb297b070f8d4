"""Backup and restore of `SamplingCallback`'s state, beside Keras'
`BackupAndRestore`, so that a resumed `fit` continues the chain that never
stopped (bit-identical; see docs/keras.md)."""

import glob
import json
import os
import warnings
import zipfile

import numpy as np

from tfp_sgmcmc.keras.posterior import io as posterior_io

__all__ = ["backup_path", "save_backup", "restore_backup", "jsonable"]

_BACKUP_FORMAT_VERSION = 1
_BACKUP_SUBDIR = "sampling_callback"


def _fsync_directory(directory):
  try:
    fd = os.open(directory, os.O_RDONLY)
  except OSError:
    return  # Not supported here (e.g. Windows): the rename is still atomic.
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)


def _atomic_write(path, write):
  """Writes `path` whole or not at all: `write(file)` into a temporary
  file beside it, fsync, rename over `path`, fsync the directory."""
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "wb") as f:
    write(f)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
  _fsync_directory(os.path.dirname(os.path.abspath(path)))


def _atomic_savez(path, arrays):
  _atomic_write(path, lambda f: np.savez(f, **arrays))


def jsonable(config):
  out = {}
  for key, value in config.items():
    if isinstance(value, (str, int, float, bool)) or value is None:
      out[key] = value
    else:
      out[key] = repr(value)
  return out


def backup_path(callback, fit_epoch):
  return os.path.join(callback.backup_dir, _BACKUP_SUBDIR,
                      f"epoch_{fit_epoch:06d}.npz")

def save_backup(callback, fit_epoch):
  """Writes the callback's state after `fit_epoch` epochs of this `fit`
  (BackupAndRestore's `epoch`), then deletes all but the last two."""
  model = callback.model
  arrays = {}
  with callback._strategy.scope():
    for i, v in enumerate(model.trainable_variables +
                          model.non_trainable_variables):
      arrays[f"model_{i}"] = np.array(v.numpy())
    burnin = callback._burnin_optimizer
    burnin_vars = burnin.variables if (burnin is not None and
                                       burnin.built) else []
    for i, v in enumerate(burnin_vars):
      arrays[f"burnin_optimizer_{i}"] = np.array(v.numpy())
    sampler_vars = callback.sampler.variables if callback._sampling else []
    for i, v in enumerate(sampler_vars):
      arrays[f"sampler_{i}"] = np.array(v.numpy())
  num_vars = len(model.trainable_variables)
  for j in range(num_vars):
    arrays[f"samples_{j}"] = (
        np.stack([s[j] for s in callback._samples]) if callback._samples else
        np.zeros((0,) + tuple(model.trainable_variables[j].shape),
                 np.dtype(model.trainable_variables[j].dtype)))
  states = posterior_io.stack_states(
      callback._sample_states, len(callback._samples),
      model.non_trainable_variables)
  for j, state in enumerate(states or []):
    arrays[f"sample_states_{j}"] = state
  header = dict(
      format_version=_BACKUP_FORMAT_VERSION, fit_epoch=int(fit_epoch),
      num_sample_states=None if states is None else len(states),
      sampler=type(callback._spec).__name__, seed=int(callback._spec.seed),
      sampler_config=(jsonable(callback.sampler.get_config())
                      if callback._sampling else None),
      sampling=callback._sampling, epochs_seen=callback._epochs_seen,
      steps_seen=callback._steps_seen, sampler_steps=callback._sampler_steps,
      transitions=callback._transitions,
      trajectory_steps=callback._trajectory_steps,
      mh_seconds=callback.mh_seconds, num_tests=callback.num_tests,
      num_accepted=callback.num_accepted,
      **callback._energies.state(),
      num_model_variables=len(model.trainable_variables) +
      len(model.non_trainable_variables),
      num_burnin_optimizer_variables=len(burnin_vars),
      num_sampler_variables=len(sampler_vars),
      variable_paths=posterior_io.variable_paths(model))
  arrays["header"] = np.array(json.dumps(header))
  directory = os.path.join(callback.backup_dir, _BACKUP_SUBDIR)
  os.makedirs(directory, exist_ok=True)
  _atomic_savez(backup_path(callback, fit_epoch), arrays)
  for old in sorted(glob.glob(os.path.join(directory, "epoch_*.npz")))[:-2]:
    os.remove(old)

def restore_backup(callback):
  """Restores the state of the epoch BackupAndRestore resumes from;
  returns whether it did."""
  if callback.backup_dir is None:
    return False
  directory = os.path.join(callback.backup_dir, _BACKUP_SUBDIR)
  metadata_path = os.path.join(callback.backup_dir, "training_metadata.json")
  for stale in glob.glob(os.path.join(directory, "*.tmp-*")):
    os.remove(stale)  # A write killed before its rename.
  if not os.path.exists(metadata_path):
    # BackupAndRestore has nothing to resume: a fresh fit. Stale files of
    # ours (a run killed before its first backup) are dropped.
    for old in glob.glob(os.path.join(directory, "epoch_*.npz")):
      os.remove(old)
    return False
  metadata = _read_json(metadata_path)
  if metadata is None:
    # Killed while Keras wrote the metadata (after its weights): resume from
    # our newest complete state and rewrite Keras' files from it.
    return _recover(callback, None, f"{metadata_path!r} is truncated or "
                    "unreadable (the process was killed while Keras wrote "
                    "it)")
  if metadata.get("batch", 0):
    raise ValueError(
        f"the backup in {callback.backup_dir!r} was written in the middle of "
        f"an epoch (batch {metadata['batch']}), and Keras restarts that "
        "epoch from its first batch with the mid-epoch weights, which "
        "breaks the chain. Use BackupAndRestore(save_freq='epoch').")
  fit_epoch = int(metadata["epoch"])
  path = backup_path(callback, fit_epoch)
  weights_path = os.path.join(callback.backup_dir, "latest.weights.h5")
  if os.path.exists(path) and not _readable_npz(path):
    return _recover(callback, fit_epoch, f"SamplingCallback's state for epoch "
                    f"{fit_epoch}, "
                    f"{path!r}, is unreadable")
  if os.path.exists(weights_path) and not _readable_h5(weights_path):
    if not os.path.exists(path):
      raise ValueError(
          f"Keras' backup {weights_path!r} is truncated or unreadable (the "
          "process was killed while BackupAndRestore wrote it) and "
          f"SamplingCallback has no state for epoch {fit_epoch} in "
          f"{directory!r} to rebuild it from. Delete {callback.backup_dir!r} "
          "to start over.")
    return _recover(callback, fit_epoch, f"Keras' backup {weights_path!r} "
                    "is truncated or unreadable (the process was killed "
                    "while BackupAndRestore wrote it)")
  return _restore_epoch(callback, fit_epoch)


def _read_json(path):
  try:
    with open(path) as f:
      data = json.load(f)
  except (OSError, ValueError):
    return None
  return data if isinstance(data, dict) and "epoch" in data else None


def _readable_npz(path):
  try:
    with np.load(path, allow_pickle=False) as data:
      json.loads(str(data["header"]))
      for key in data.files:
        data[key]  # pylint: disable=pointless-statement
  except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
    return False
  return True


def _readable_h5(path):
  import h5py  # pylint: disable=import-outside-toplevel
  try:
    with h5py.File(path, "r") as f:
      f.visititems(lambda name, item: getattr(item, "shape", None) and None)
  except Exception:  # pylint: disable=broad-except
    return False
  return True


def _recover(callback, fit_epoch, why):
  """Restores the newest readable state of ours (at most `fit_epoch`),
  then rewrites Keras' weights and metadata from it (atomically), so that
  BackupAndRestore resumes from the same epoch."""
  directory = os.path.join(callback.backup_dir, _BACKUP_SUBDIR)
  candidates = sorted(glob.glob(os.path.join(directory, "epoch_*.npz")),
                      reverse=True)
  for path in candidates:
    epoch = int(os.path.basename(path)[len("epoch_"):-len(".npz")])
    if (fit_epoch is None or epoch <= fit_epoch) and _readable_npz(path):
      break
  else:
    raise ValueError(
        f"{why}, and SamplingCallback has no readable state in "
        f"{directory!r} to resume from (found: "
        f"{[os.path.basename(c) for c in candidates]}). Delete "
        f"{callback.backup_dir!r} to start over.")
  _restore_epoch(callback, epoch)
  model = callback.model
  weights_path = os.path.join(callback.backup_dir, "latest.weights.h5")
  tmp = os.path.join(callback.backup_dir, f"recovered-{os.getpid()}.weights.h5")
  model.save_weights(tmp, overwrite=True)
  with open(tmp, "rb+") as f:
    os.fsync(f.fileno())
  os.replace(tmp, weights_path)
  _atomic_write(
      os.path.join(callback.backup_dir, "training_metadata.json"),
      lambda f: f.write(json.dumps({"epoch": epoch, "batch": 0}).encode()))
  warnings.warn(
      f"{why}. Resuming from SamplingCallback's complete state after epoch "
      f"{epoch} ({os.path.basename(path)}), from which Keras' backup files "
      "were rewritten.", RuntimeWarning, stacklevel=4)
  return True


def _restore_epoch(callback, fit_epoch):
  directory = os.path.join(callback.backup_dir, _BACKUP_SUBDIR)
  path = backup_path(callback, fit_epoch)
  if not os.path.exists(path):
    found = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    raise ValueError(
        f"BackupAndRestore resumes after epoch {fit_epoch}, but "
        f"SamplingCallback has no state for that epoch in {directory!r} "
        f"(found: {found}). "
        "Give SamplingCallback(backup_dir=...) the same directory as "
        "BackupAndRestore and list SamplingCallback first.")
  model = callback.model
  with np.load(path, allow_pickle=False) as data:
    header = json.loads(str(data["header"]))
    arrays = {k: data[k] for k in data.files if k != "header"}
  if header.get("format_version") != _BACKUP_FORMAT_VERSION:
    raise ValueError(f"{path!r}: unknown format version "
                     f"{header.get('format_version')!r}.")
  if header["sampler"] != type(callback._spec).__name__:
    raise ValueError(f"{path!r} holds a {header['sampler']} chain; this "
                     f"callback samples with {type(callback._spec).__name__}.")
  # Matched by position and shape, as BackupAndRestore does (the paths
  # carry layer-name counters that differ between processes).
  model_vars = model.trainable_variables + model.non_trainable_variables
  saved_shapes = [tuple(arrays[f"model_{i}"].shape)
                  for i in range(header["num_model_variables"])]
  shapes = [tuple(v.shape) for v in model_vars]
  if saved_shapes != shapes:
    raise ValueError(f"{path!r} holds model variables of shapes "
                     f"{saved_shapes}; the model has {shapes}.")
  if header["sampling"]:
    saved = dict(header["sampler_config"])
    mine = jsonable(callback._spec.get_config())
    # The seed (drawn when None was given) and the name come from the
    # backup; everything else must be the same sampler.
    diffs = {k: (saved.get(k), mine.get(k)) for k in set(saved) | set(mine)
             if k not in ("seed", "name") and saved.get(k) != mine.get(k)}
    if diffs:
      raise ValueError(
          f"{path!r} was written by a sampler with other settings "
          f"(backup, this callback): {diffs}. Use a new backup_dir.")
  with callback._strategy.scope():
    for i, v in enumerate(model_vars):
      v.assign(arrays[f"model_{i}"])
    burnin = callback._burnin_optimizer
    count = header["num_burnin_optimizer_variables"]
    if burnin is not None and count:
      if not burnin.built:
        burnin.build(model.trainable_variables)
      if len(burnin.variables) != count:
        raise ValueError(
            f"{path!r} holds {count} variables of the burn-in optimizer; "
            f"the compiled optimizer has {len(burnin.variables)}.")
      for i, v in enumerate(burnin.variables):
        v.assign(arrays[f"burnin_optimizer_{i}"])
  callback._samples.clear()
  callback._sample_states.clear()
  num_samples = arrays["samples_0"].shape[0]
  num_states = header.get("num_sample_states")
  for k in range(num_samples):
    callback._samples.append([arrays[f"samples_{j}"][k]
                          for j in range(len(model.trainable_variables))])
    if num_states is not None:
      callback._sample_states.append([arrays[f"sample_states_{j}"][k]
                                      for j in range(num_states)])
  callback._epochs_seen = header["epochs_seen"]
  callback._steps_seen = header["steps_seen"]
  callback._sampler_steps = header["sampler_steps"]
  callback._transitions = header["transitions"]
  callback._trajectory_steps = header["trajectory_steps"]
  callback.mh_seconds = header["mh_seconds"]
  callback.num_tests = header["num_tests"]
  callback.num_accepted = header["num_accepted"]
  callback._energies.restore(header)
  callback._sampling = bool(header["sampling"])
  callback._health.reset()
  if callback._spec.seed != header["seed"]:
    # seed=None drew another seed in this process: the chain's is saved.
    config = dict(callback._spec.get_config())
    config["seed"] = header["seed"]
    callback._spec = type(callback._spec).from_config(config)
  if not callback._sampling:
    callback.sampler = None
    callback._use_burnin_optimizer()
    return True
  callback.sampler = callback._build_sampler(callback._spec)
  with callback._strategy.scope():
    variables = callback.sampler.variables
    if len(variables) != header["num_sampler_variables"]:
      raise ValueError(
          f"{path!r} holds {header['num_sampler_variables']} sampler "
          f"variables; the sampler has {len(variables)}.")
    for i, v in enumerate(variables):
      v.assign(arrays[f"sampler_{i}"])
  callback._install(begin=False)
  return True
