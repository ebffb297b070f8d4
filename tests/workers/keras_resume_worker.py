"""A small Keras fit with SamplingCallback + BackupAndRestore, for the
resume tests in tests/keras/test_resume.py and tests/keras/test_fit_traps.py.

Imported by the tests (in-process runs) and run as a script (a process that
kills itself with SIGKILL in the middle of an epoch, then a fresh process
that resumes with the same call):

    python tests/workers/keras_resume_worker.py SAMPLER BACKUP_DIR OUT.npz \
        [--kill EPOCH BATCH] [--seed-file PATH] \
        [--kill-point SPEC --arm-epoch EPOCH]

`--kill-point` kills the process before one file operation (see
support/kill_points.py) of the saves from the end of epoch `--arm-epoch` on
(the epoch-end backups of ours and Keras', and the clean-up at the end of
`fit`).

The data are numpy arrays fitted with shuffle=False, so that every epoch
sees the same batches in the same order whether or not the run was
restarted (Keras' own shuffling draws from an unseeded global RNG and
cannot be reproduced across a restart; a tf.data iterator restarts from its
first element).
"""

import argparse
import json
import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tfp_sgmcmc.keras as sgk  # noqa: E402

NUM_EXAMPLES, DIM, BATCH, EPOCHS = 60, 3, 6, 6  # 10 train steps per epoch


def data():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(NUM_EXAMPLES, DIM)).astype(np.float32)
  y = (x @ np.array([1., -0.5, 0.25]) +
       rng.normal(size=NUM_EXAMPLES)).astype(np.float32)
  return x, y


def make_sampler(name, seed):
  if name == "sghmc":
    # Splitting integrator (the variables hold a half drift between steps)
    # and momentum resampling: the state that must survive is more than
    # the weights.
    return sgk.SGHMC(step_size=0.02, friction=5., integrator="splitting",
                     momentum_resampling_period=7, seed=seed)
  if name == "sgnht":
    return sgk.SGNHT(step_size=0.01, diffusion=2., seed=seed)
  if name == "amagold":
    # T = 3 does not divide the 10 steps of an epoch: trajectories cross
    # the epoch boundaries where the backups are written.
    # eps = 0.01: about 9 of 13 trajectories accepted, so the run holds
    # both accepted and rejected tests.
    return sgk.AMAGOLD(step_size=0.01, num_leapfrog_steps=3, friction=2.,
                       resample_momentum=False, seed=seed)
  if name == "amagold_warmup":
    # T = 1 and warmup=20: windows of 3, 15 and 2 tests over epochs 2-3,
    # the slow window under way at the end of epoch 2.
    return sgk.AMAGOLD(step_size=0.01, num_leapfrog_steps=1, friction=2.,
                       seed=seed)
  if name == "amagold_minibatch":
    return sgk.AMAGOLD(step_size=0.01, num_leapfrog_steps=3, friction=2.,
                       acceptance_energy="minibatch", seed=seed)
  raise ValueError(name)


class Arm(keras.callbacks.Callback):
  """Starts counting file operations at the end of one epoch (listed first,
  so before SamplingCallback's backup)."""

  def __init__(self, epoch):
    super().__init__()
    self.epoch = epoch

  def on_epoch_end(self, epoch, logs=None):
    if epoch == self.epoch:
      from support import kill_points  # pylint: disable=g-import-not-at-top
      kill_points.arm()


class Interrupt(keras.callbacks.Callback):
  """Kills the process (SIGKILL) or raises at (epoch, batch), once."""

  def __init__(self, epoch, batch, kill):
    super().__init__()
    self.at, self.kill, self.fired = (epoch, batch), kill, False

  def on_epoch_begin(self, epoch, logs=None):
    self.epoch = epoch

  def on_train_batch_end(self, batch, logs=None):
    if (self.epoch, batch) == self.at and not self.fired:
      self.fired = True
      if self.kill:
        os.kill(os.getpid(), signal.SIGKILL)
      raise RuntimeError("interrupted")


def build(sampler_name, backup_dir, seed=None):
  """The model (compiled, built) and the two callbacks, in the order the
  docs ask for: SamplingCallback before BackupAndRestore."""
  x, y = data()
  keras.utils.set_random_seed(1)  # The same initial weights every time.
  model = keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(1)])
  model.compile(optimizer=keras.optimizers.SGD(1e-2, momentum=0.5),
                loss=sgk.GaussianNegativeLogLikelihood(1.))
  sampler = make_sampler(sampler_name, seed)
  kwargs = dict(thinning=4)  # Not a divisor of the 10 steps of an epoch.
  if sampler_name.startswith("amagold"):
    kwargs = dict(energy_data=(x, y), energy_batch_size=20, thinning=1)
  if sampler_name == "amagold_warmup":
    kwargs["warmup"] = 20
  sampling = sgk.SamplingCallback(
      sampler, num_examples=NUM_EXAMPLES, prior=1., burnin_epochs=2,
      max_samples=25, backup_dir=backup_dir, **kwargs)
  backup = keras.callbacks.BackupAndRestore(backup_dir)
  return model, sampling, backup


def fit(model, callbacks):
  x, y = data()
  return model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False,
                   verbose=0, callbacks=callbacks)


def result(model, sampling):
  """Everything that must be bit-identical, as a dict of arrays."""
  out = {f"weight_{i}": np.array(w) for i, w in enumerate(model.get_weights())}
  for j, s in enumerate(sampling.posterior.samples):
    out[f"samples_{j}"] = s
  posterior = sampling.posterior
  for j, (m, v) in enumerate(zip(posterior.mean, posterior.variance)):
    out[f"mean_{j}"], out[f"variance_{j}"] = m, v
  out["num_transitions"] = np.array(posterior.num_transitions)
  out["step_count"] = np.array(sampling.sampler.step_count)
  out["num_tests"] = np.array(sampling.num_tests)
  out["num_accepted"] = np.array(sampling.num_accepted)
  out["seed"] = np.array(sampling.sampler.seed)
  if sampling.sampler._uses_momentum:  # pylint: disable=protected-access
    for j, r in enumerate(sampling.sampler.momentum):
      out[f"momentum_{j}"] = np.array(r)
  if getattr(sampling.sampler, "_inverse_mass", None) is not None:
    for j, m in enumerate(sampling.sampler.inverse_mass):
      out[f"inverse_mass_{j}"] = m
    out["step_size"] = np.array(float(sampling.sampler.learning_rate))
  for i, v in enumerate(model.optimizer.variables):  # The burn-in SGD's.
    out[f"burnin_optimizer_{i}"] = np.array(v.numpy())
  return out


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("sampler")
  parser.add_argument("backup_dir")
  parser.add_argument("out")
  parser.add_argument("--kill", nargs=2, type=int)
  parser.add_argument("--seed-file")
  parser.add_argument("--seed", type=int)
  parser.add_argument("--kill-point")
  parser.add_argument("--arm-epoch", type=int, default=0)
  args = parser.parse_args()
  model, sampling, backup = build(args.sampler, args.backup_dir, args.seed)
  first = []
  if args.kill_point:
    sys.path.insert(0, os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    from support import kill_points  # pylint: disable=g-import-not-at-top
    kill_points.install(args.kill_point)
    first = [Arm(args.arm_epoch)]
  if args.seed_file:  # seed=None drew a seed: tell the test which.
    seed = sampling._spec.seed  # pylint: disable=protected-access
    with open(args.seed_file, "w") as f:
      json.dump({"seed": seed}, f)
  callbacks = first + [sampling, backup]
  if args.kill:
    callbacks.append(Interrupt(*args.kill, kill=True))
  history = fit(model, callbacks)
  sampling.save(args.out + ".posterior.npz")  # The user's own save.
  with open(args.out + ".json", "w") as f:
    json.dump({"epochs_run": len(history.history.get("loss", []))}, f)
  np.savez(args.out, **result(model, sampling))
  return 0


if __name__ == "__main__":
  sys.exit(main())
