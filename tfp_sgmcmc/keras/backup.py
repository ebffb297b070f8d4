"""Backup and restore of `SamplingCallback`'s state, beside Keras'
`BackupAndRestore`, so that a resumed `fit` continues the chain that never
stopped (bit-identical; see docs/keras.md)."""

import glob
import json
import os

import numpy as np

from tfp_sgmcmc.keras import posterior as posterior_lib

__all__ = ["backup_path", "save_backup", "restore_backup", "jsonable"]

_BACKUP_FORMAT_VERSION = 1
_BACKUP_SUBDIR = "sampling_callback"


def _atomic_savez(path, arrays):
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "wb") as f:
    np.savez(f, **arrays)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


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
  header = dict(
      format_version=_BACKUP_FORMAT_VERSION, fit_epoch=int(fit_epoch),
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
      variable_paths=posterior_lib.variable_paths(model))
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
  if not os.path.exists(metadata_path):
    # BackupAndRestore has nothing to resume: a fresh fit. Stale files of
    # ours (a run killed before its first backup) are dropped.
    for old in glob.glob(os.path.join(directory, "epoch_*.npz")):
      os.remove(old)
    return False
  with open(metadata_path) as f:
    metadata = json.load(f)
  if metadata.get("batch", 0):
    raise ValueError(
        f"the backup in {callback.backup_dir!r} was written in the middle of "
        f"an epoch (batch {metadata['batch']}), and Keras restarts that "
        "epoch from its first batch with the mid-epoch weights, which "
        "breaks the chain. Use BackupAndRestore(save_freq='epoch').")
  fit_epoch = int(metadata["epoch"])
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
  num_samples = arrays["samples_0"].shape[0]
  for k in range(num_samples):
    callback._samples.append([arrays[f"samples_{j}"][k]
                          for j in range(len(model.trainable_variables))])
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
