"""The logistic regression that the distributed Keras workers fit
(workers/keras_mirrored_worker.py, workers/multi_worker_worker.py): the data
and the model, the same in every process and replica.

Imported by the workers after they have configured TensorFlow's devices or
created their strategy (this module imports keras); `compiled_model` is
called inside the strategy's scope.
"""

import keras
import numpy as np

NUM_EXAMPLES, BATCH = 256, 64


def data():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(NUM_EXAMPLES, 3)).astype(np.float32)
  logits = x @ np.array([1.5, -2., 0.5]) + 0.3
  y = (rng.uniform(size=NUM_EXAMPLES) < 1. / (1. + np.exp(-logits)))
  return x, y.astype(np.float32)


def compiled_model():
  """3 -> Dense(4, tanh) -> Dense(1) logits, seeded Glorot weights, SGD."""
  model = keras.Sequential([
      keras.Input((3,)),
      keras.layers.Dense(4, activation="tanh",
                         kernel_initializer=keras.initializers.GlorotNormal(
                             seed=1)),
      keras.layers.Dense(1, kernel_initializer=keras.initializers.
                         GlorotNormal(seed=2))])
  model.compile(optimizer=keras.optimizers.SGD(0.1),
                loss=keras.losses.BinaryCrossentropy(from_logits=True))
  return model
