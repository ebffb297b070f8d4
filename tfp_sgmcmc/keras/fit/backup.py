"""Backup and restore of `SamplingCallback`'s state, beside Keras'
`BackupAndRestore`, so that a resumed `fit` continues the chain that never
stopped (bit-identical; see docs/keras.md)."""

import glob
import json
import os
import warnings

import numpy as np
import tensorflow as tf

from tfp_sgmcmc import _files as files
from tfp_sgmcmc.keras.fit import keras_files
from tfp_sgmcmc.keras.fit.keras_files import (BACKUP_SUBDIR, finished_path,
                                               forget_finished_state,
                                               keep_finished_state,
                                               weights_digest)
from tfp_sgmcmc.keras.posterior import io as posterior_io

__all__ = ["backup_path", "save_backup", "restore_backup", "jsonable",
           "posterior_settings",
           "keep_finished_state", "forget_finished_state", "finished_path",
           "weights_digest"]

_BACKUP_FORMAT_VERSION = 1


def _atomic_write(path, write):
  files.atomic_write(path, write)


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


def posterior_settings(callback, weights):
  """What the kept samples are samples of, as a backup records it: N, the
  prior (its settings, or a function by its name and its value at the
  backup's trainable `weights`, which tells two of one name apart), and a
  digest of exact AMAGOLD's `energy_data` arrays. A resumed `fit` with
  others would keep samples of two posteriors in one chain (and test its
  next proposal against a U(theta) summed over the old examples)."""
  prior = callback._log_prior
  get_config = getattr(prior, "get_config", None)
  value = None
  if callable(get_config):
    described = jsonable(get_config())
  else:
    described = (f"{getattr(prior, '__module__', '')}."
                 f"{getattr(prior, '__qualname__', type(prior).__name__)}")
    value = float(prior([tf.convert_to_tensor(w) for w in weights]))
  return dict(num_examples=int(callback.num_examples), prior=described,
              prior_value=value, energy_data=callback._energies.digest())


def _same_setting(key, saved, mine):
  """Whether a backup's posterior setting is this callback's. The prior's
  value is a float32 sum over the weights, whose last digits may differ
  between machines (another summation order); a different prior differs
  by far more than 1e-3."""
  if key == "prior_value" and saved is not None and mine is not None:
    return saved == mine or abs(saved - mine) <= 1e-3 * max(
        abs(saved), abs(mine), 1.)
  return saved == mine


def backup_path(callback, fit_epoch):
  return os.path.join(callback.backup_dir, BACKUP_SUBDIR,
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
      posterior=posterior_settings(callback, [
          arrays[f"model_{i}"] for i in range(num_vars)]),
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
      variable_paths=posterior_io.variable_paths(model),
      weights_sha256=keras_files.weights_digest(
          [arrays[f"model_{i}"] for i in range(
              len(model.trainable_variables) +
              len(model.non_trainable_variables))]))
  arrays["header"] = np.array(json.dumps(header))
  directory = os.path.join(callback.backup_dir, BACKUP_SUBDIR)
  os.makedirs(directory, exist_ok=True)
  _atomic_savez(backup_path(callback, fit_epoch), arrays)
  for old in sorted(glob.glob(os.path.join(directory, "epoch_*.npz")))[:-2]:
    os.remove(old)


def _epoch_of(path):
  return int(os.path.basename(path)[len("epoch_"):-len(".npz")])


def _states(callback):
  """Our readable states, newest first, as (fit_epoch, path)."""
  directory = os.path.join(callback.backup_dir, BACKUP_SUBDIR)
  out = []
  for path in sorted(glob.glob(os.path.join(directory, "epoch_*.npz")),
                     reverse=True):
    if keras_files.readable_npz(path):
      out.append((_epoch_of(path), path))
  return out


def _header(path):
  with np.load(path, allow_pickle=False) as data:
    return json.loads(str(data["header"]))


def restore_backup(callback):
  """Restores the state of the epoch the resumed `fit` starts after;
  returns whether it did.

  SamplingCallback's own files (CRC-checked, written atomically, with a
  digest of the model's weights) are the source of truth. Keras' files
  (`latest.weights.h5`, `training_metadata.json`), written after ours and
  not atomically, are checked against them; where a kill left them torn,
  missing, newer or older than ours, or altered, the run resumes from the
  last consistent state and Keras' files are rewritten from it.
  """
  if callback.backup_dir is None:
    return False
  directory = os.path.join(callback.backup_dir, BACKUP_SUBDIR)
  metadata_path = os.path.join(callback.backup_dir, "training_metadata.json")
  weights_path = os.path.join(callback.backup_dir, "latest.weights.h5")
  for stale in glob.glob(os.path.join(directory, "*.tmp-*")):
    # A write killed before its rename (never a live writer's).
    files.remove_dead_temporaries(stale[:stale.index(".tmp-")])
  files.remove_dead_temporaries(weights_path)
  final = keras_files.finished_path(callback)
  states = _states(callback)
  metadata = (keras_files.read_json(metadata_path)
              if os.path.exists(metadata_path) else None)
  if os.path.exists(final):
    if not keras_files.readable_npz(final):
      keras_files.forget_finished_state(callback)
    elif os.path.isdir(callback.backup_dir):
      final_epoch = int(_header(final)["fit_epoch"])
      if not any(e >= final_epoch for e, _ in states):
        # The last fit finished, and was killed while BackupAndRestore
        # deleted its backup (in the file system's order, ours possibly
        # first): its final state is complete. (Our state of that epoch or
        # a later one still there, e.g. delete_checkpoint=False or a fit
        # that went on from the finished state: the backup resumes as
        # usual, Keras' files checked against it.)
        return _restore_and_rewrite(
            callback, final_epoch, final,
            f"the previous fit with backup_dir={callback.backup_dir!r} "
            "finished, and was killed while BackupAndRestore deleted its "
            "backup")
    elif keras_files.left_by_another_process(callback):
      # The backup is gone and the user's `save` never came: the process
      # that finished the fit was killed (or died of an exception) in
      # between. Its state comes back as a resumed run's does, so this fit
      # runs the epochs left (none for the same call).
      os.makedirs(callback.backup_dir, exist_ok=True)
      return _restore_and_rewrite(
          callback, int(_header(final)["fit_epoch"]), final,
          f"the previous fit with backup_dir={callback.backup_dir!r} "
          f"finished, and its process ended before `save` (its state "
          f"waited in {final!r})")
    else:
      # A new fit in the process that finished the last one (which had
      # its samples in memory).
      keras_files.forget_finished_state(callback)
  if metadata is None:
    if states:
      why = (f"{metadata_path!r} is truncated or unreadable (the process "
             "was killed while Keras wrote it)"
             if os.path.exists(metadata_path) else
             f"Keras' {metadata_path!r} is missing (the process was killed "
             "before Keras wrote it)")
      return _restore_and_rewrite(callback, *states[0], why)
    leftovers = [p for p in (metadata_path, weights_path,
                             weights_path + ".bkp")
                 if os.path.exists(p)]
    for path in leftovers + glob.glob(os.path.join(directory,
                                                   "epoch_*.npz")):
      # Keras' files without a state of ours (a run killed during its
      # first backup): Keras would load them, or raise on a torn one, at
      # every restart; ours unreadable: nothing to resume.
      os.remove(path)
    if leftovers:
      warnings.warn(
          f"{callback.backup_dir!r} held Keras' backup "
          f"{[os.path.basename(p) for p in leftovers]} but no state of "
          "SamplingCallback (the process was killed during the first "
          "backup): they were removed and this fit starts from the "
          "beginning.", RuntimeWarning, stacklevel=4)
    return False
  if metadata.get("batch", 0):
    raise ValueError(
        f"the backup in {callback.backup_dir!r} was written in the middle of "
        f"an epoch (batch {metadata['batch']}), and Keras restarts that "
        "epoch from its first batch with the mid-epoch weights, which "
        "breaks the chain. Use BackupAndRestore(save_freq='epoch').")
  fit_epoch = int(metadata["epoch"])
  at_or_before = [(e, p) for e, p in states if e <= fit_epoch]
  if not at_or_before:
    found = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    raise ValueError(
        f"BackupAndRestore resumes after epoch {fit_epoch}, but "
        f"SamplingCallback has no readable state of that epoch or an "
        f"earlier one in {directory!r} (found: {found}), and Keras' files "
        "alone cannot resume the chain (its momentum, counters and kept "
        f"samples are in ours). Delete {callback.backup_dir!r} to start "
        "over.")
  epoch, path = at_or_before[0]
  if epoch != fit_epoch:
    return _restore_and_rewrite(
        callback, epoch, path, f"SamplingCallback's state for epoch "
        f"{fit_epoch} in {directory!r} is missing or unreadable")
  keras_digest = keras_files.keras_weights_digest(callback, weights_path)
  saved_digest = _header(path).get("weights_sha256")
  if keras_digest is None or (saved_digest is not None and
                              keras_digest != saved_digest):
    newer = [(e, p) for e, p in states if e > fit_epoch and
             _header(p).get("weights_sha256") == keras_digest]
    if newer:
      # Killed after Keras wrote the weights, before its metadata: the
      # newer pair is complete.
      return _restore_and_rewrite(
          callback, *newer[-1],
          f"Keras' {weights_path!r} holds the weights after epoch "
          f"{newer[-1][0]} but its metadata says {fit_epoch} (the process "
          "was killed between the two writes)")
    why = (f"Keras' backup {weights_path!r} is missing"
           if not os.path.exists(weights_path) else
           f"Keras' backup {weights_path!r} is truncated or unreadable (the "
           "process was killed while BackupAndRestore wrote it)"
           if keras_digest is None else
           f"Keras' backup {weights_path!r} holds other weights than "
           f"SamplingCallback's state for epoch {fit_epoch} (a kill "
           "between writes, or the file was altered)")
    return _restore_and_rewrite(callback, epoch, path, why)
  return _restore_epoch(callback, fit_epoch, path)


def _restore_and_rewrite(callback, fit_epoch, path, why):
  """Restores our state `path` (after `fit_epoch` epochs), then rewrites
  Keras' weights and metadata from it (atomically), so that
  BackupAndRestore resumes from the same epoch with the same weights."""
  _restore_epoch(callback, fit_epoch, path)
  model = callback.model
  weights_path = os.path.join(callback.backup_dir, "latest.weights.h5")
  # Keras names its files by their ending.
  tmp = files.temporary_name(weights_path) + ".weights.h5"
  try:
    with callback._strategy.scope():
      model.save_weights(tmp, overwrite=True)
    with open(tmp, "rb+") as f:
      os.fsync(f.fileno())
    os.replace(tmp, weights_path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
  _atomic_write(
      os.path.join(callback.backup_dir, "training_metadata.json"),
      lambda f: f.write(json.dumps({"epoch": fit_epoch, "batch": 0}).encode()))
  warnings.warn(
      f"{why}. Resuming from SamplingCallback's complete state after epoch "
      f"{fit_epoch} ({os.path.basename(path)}), from which Keras' backup "
      "files were rewritten.", RuntimeWarning, stacklevel=4)
  return True


def _restore_epoch(callback, fit_epoch, path):
  del fit_epoch  # In the header; the callers chose `path` for it.
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
  # Backups written before the posterior's settings (or one of them) were
  # recorded have none to compare.
  saved_posterior = header.get("posterior") or {}
  mine_posterior = json.loads(json.dumps(posterior_settings(callback, [
      arrays[f"model_{i}"] for i in range(len(model.trainable_variables))])))
  diffs = {k: (saved_posterior[k], mine_posterior.get(k))
           for k in sorted(saved_posterior)
           if not _same_setting(k, saved_posterior[k], mine_posterior.get(k))}
  if diffs:
    raise ValueError(
        f"{path!r} holds a chain of another posterior (backup, this "
        f"callback): {diffs}. Its kept samples and running moments would "
        "mix the two posteriors' draws. Pass the backup's values to "
        "SamplingCallback, or use a new backup_dir to start a new chain.")
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
