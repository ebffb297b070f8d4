"""Run by tests/keras/test_multi_worker.py: Keras `fit` with a sampler under
`tf.distribute.MultiWorkerMirroredStrategy`, one process per worker.

    python tests/workers/multi_worker_worker.py OUT_DIR PHASE single
    python tests/workers/multi_worker_worker.py OUT_DIR PHASE worker INDEX PORT0 PORT1

PHASE "first": SGHMC for the whole fit, then exact AMAGOLD with a
`BackupAndRestore`, interrupted by an exception after epoch INTERRUPT.
PHASE "resume": the same AMAGOLD call again, which resumes from the backup.
`single` runs both fits uninterrupted in one process on the default
strategy (the reference, same global batch). `worker` is worker INDEX of
two, with TF_CONFIG set here from the two 127.0.0.1 ports. Each finished fit
writes OUT_DIR/<sampler>_<role>.npz: the final weights, the largest
difference between the replicas' copies of every model and sampler
variable, the kept samples and the M-H counters. The chief (worker 0) also
saves the posterior with `Posterior.save` to OUT_DIR/<sampler>_posterior;
each worker backs up into its own directory (the chief's is the real one).
"""

import json
import os
import sys
import time

START = time.time()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

OUT_DIR, PHASE, ROLE = sys.argv[1], sys.argv[2], sys.argv[3]
INDEX = int(sys.argv[4]) if ROLE == "worker" else 0
if ROLE == "worker":
  os.environ["TF_CONFIG"] = json.dumps({
      "cluster": {"worker": [f"127.0.0.1:{p}" for p in sys.argv[5:7]]},
      "task": {"type": "worker", "index": INDEX}})

import tensorflow as tf  # noqa: E402

# Created before anything else starts TensorFlow's runtime, as
# MultiWorkerMirroredStrategy requires.
STRATEGY = (tf.distribute.MultiWorkerMirroredStrategy() if ROLE == "worker"
            else tf.distribute.get_strategy())

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tfp_sgmcmc.keras as sgk  # noqa: E402
from tfp_sgmcmc.keras import enable_keras_multi_worker_fit  # noqa: E402

# tests/, for the shared test machinery in tests/support.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from support.distributed_logistic import BATCH, NUM_EXAMPLES  # noqa: E402
from support.distributed_logistic import compiled_model, data  # noqa: E402

enable_keras_multi_worker_fit()

EPOCHS, INTERRUPT = 10, 4
NAME = ROLE if ROLE == "single" else f"worker{INDEX}"


class Interrupt(Exception):
  pass


class InterruptAfter(keras.callbacks.Callback):

  def __init__(self, epoch):
    super().__init__()
    self._epoch = epoch

  def on_epoch_end(self, epoch, logs=None):
    if epoch == self._epoch:
      raise Interrupt(f"interrupted after epoch {epoch}")


def make_sampler(name):
  if name == "sghmc":
    return sgk.SGHMC(step_size=0.01, friction=10., integrator="splitting",
                     momentum_resampling_period=7, seed=5)
  # Exact test (energy_data below) with both outcomes. The test needs the
  # single-process chain to move over its 8 M-H tests (4 kept): at eps =
  # 0.05 about 20% of tests accept, and for 5 of seeds 1-16 (with either
  # noise generator) every kept test rejected, so whether the reference
  # moved was luck of the stream. At eps = 0.03 about 63% accept and 15 of
  # 16 seeds both moved and rejected at least once.
  return sgk.AMAGOLD(step_size=0.03, num_leapfrog_steps=4, friction=1.,
                     resample_momentum=False, seed=5)


def fit(name, backup=False, interrupt=None):
  x, y = data()
  with STRATEGY.scope():
    model = compiled_model()
  backup_dir = os.path.join(OUT_DIR, f"{name}_backup_{NAME}")
  callback = sgk.SamplingCallback(
      make_sampler(name), num_examples=NUM_EXAMPLES, prior=1.,
      burnin_steps=8, thinning=2, max_samples=100,
      energy_data=(x, y) if name == "amagold" else None,
      backup_dir=backup_dir if backup else None)
  callbacks = [callback]
  if backup:
    callbacks.append(keras.callbacks.BackupAndRestore(backup_dir))
  if interrupt is not None:
    callbacks.append(InterruptAfter(interrupt))
  try:
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False,
              verbose=0, callbacks=callbacks)
  except Interrupt as e:
    print(NAME, name, e, "backup kept:", os.path.isdir(backup_dir))
    return
  spreads = []
  for v in list(model.trainable_variables) + list(callback.sampler.variables):
    values = getattr(v.value, "values", None) or [v.value]
    arrays = [np.asarray(c.numpy()) for c in values]
    spreads.append(max(float(np.max(np.abs(a - arrays[0]))) for a in arrays))
  np.savez(
      os.path.join(OUT_DIR, f"{name}_{NAME}.npz"),
      weights=np.concatenate([np.ravel(v.numpy())
                              for v in model.trainable_variables]),
      sampler_state=np.concatenate([
          np.ravel(np.asarray(v.numpy(), np.float64))
          for v in callback.sampler.variables]),
      replica_max_spread=max(spreads),
      samples=np.concatenate([np.reshape(s, [len(s), -1]) for s in
                              callback.posterior.samples], axis=1),
      tests=callback.num_tests, accepted=callback.num_accepted,
      backup_left=os.path.isdir(backup_dir))
  if ROLE == "single" or INDEX == 0:
    callback.posterior.save(os.path.join(
        OUT_DIR, f"{name}_posterior" + ("_single" if ROLE == "single" else
                                        "")))
  print(NAME, name, "done", f"{time.time() - START:.1f}s")


def main():
  print(NAME, "started", f"{time.time() - START:.1f}s")
  if PHASE == "first":
    fit("sghmc")
    fit("amagold", backup=ROLE == "worker",
        interrupt=INTERRUPT if ROLE == "worker" else None)
  else:
    fit("amagold", backup=True)


if __name__ == "__main__":
  main()
  print(NAME, "finished", f"{time.time() - START:.1f}s", flush=True)
