"""Run by tests/keras/test_mirrored_strategy.py in a subprocess: the
samplers under tf.distribute.MirroredStrategy on two logical CPU devices.

The logical devices must be configured before TensorFlow initialises its
devices, hence a fresh process. For each sampler the same fit runs twice,
once on the default (single-device) strategy and once mirrored over the two
devices with the same global batch, and the script prints one JSON line:
per sampler, whether every variable's replicas are bitwise identical
(model weights and sampler state) and the largest difference between the
mirrored and the single-device weights.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * 2)

import numpy as np  # noqa: E402

import tfp_sgmcmc.keras as sgk  # noqa: E402

# tests/, for the shared test machinery in tests/support.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from support.distributed_logistic import BATCH, NUM_EXAMPLES  # noqa: E402
from support.distributed_logistic import compiled_model, data  # noqa: E402


def make_sampler(name):
  if name == "sghmc":
    return sgk.SGHMC(step_size=0.01, friction=10., integrator="splitting",
                     momentum_resampling_period=7, seed=5)
  if name == "sgnht":
    return sgk.SGNHT(step_size=0.01, diffusion=1., seed=5)
  if name == "amagold_warmup":  # 40 tests: the warm-up's windows end at 18, 20.
    return sgk.AMAGOLD(step_size=0.02, num_leapfrog_steps=1, friction=1.,
                       seed=5)
  return sgk.AMAGOLD(step_size=0.02, num_leapfrog_steps=4, friction=1.,
                     resample_momentum=False, seed=5)


def run(strategy, name):
  x, y = data()
  with strategy.scope():
    model = compiled_model()
  amagold = name.startswith("amagold")
  callback = sgk.SamplingCallback(
      make_sampler(name), num_examples=NUM_EXAMPLES, prior=1.,
      burnin_steps=8, thinning=4, max_samples=100,
      energy_data=(x, y) if amagold else None,
      # The warm-up's mass windows and dual averaging across replicas.
      warmup=20 if name == "amagold_warmup" else None)
  model.fit(x, y, batch_size=BATCH, epochs=12, shuffle=False, verbose=0,
            callbacks=[callback])
  replicas_equal = True
  for v in list(model.trainable_variables) + list(callback.sampler.variables):
    values = getattr(v.value, "values", None)
    if values is not None:
      arrays = [np.asarray(c.numpy()) for c in values]
      replicas_equal &= all(np.array_equal(arrays[0], a) for a in arrays[1:])
  weights = [np.asarray(v.numpy()) for v in model.trainable_variables]
  return weights, replicas_equal, callback


def main():
  mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  results = {"num_replicas": mirrored.num_replicas_in_sync}
  for name in sys.argv[1:]:
    single, _, single_cb = run(tf.distribute.get_strategy(), name)
    multi, replicas_equal, multi_cb = run(mirrored, name)
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(
        multi, [s[0] for s in single_cb.posterior.samples]))
    results[name] = dict(
        replicas_equal=bool(replicas_equal),
        max_difference=max(float(np.max(np.abs(a - b)))
                           for a, b in zip(single, multi)),
        moved_from_first_sample=moved,
        kept=[single_cb.posterior.num_samples,
              multi_cb.posterior.num_samples],
        accepted=[single_cb.num_accepted, multi_cb.num_accepted],
        tests=[single_cb.num_tests, multi_cb.num_tests],
        step_size=[single_cb.sampler.log_diagnostics()["step_size"],
                   multi_cb.sampler.log_diagnostics()["step_size"]])
  print(json.dumps(results))


if __name__ == "__main__":
  main()
