"""Keras 3 `fit` under `tf.distribute.MultiWorkerMirroredStrategy`.

Keras 3 (checked with 3.x as installed beside TensorFlow 2.21) cannot run
`model.fit` across worker processes: before the first step its TensorFlow
trainer all-reduces the first (x, y) batch *structure* to learn its shapes
(`_maybe_symbolic_build` calls `strategy.reduce("MEAN", (x, y))`, which the
collective strategy rejects), and after each step it reduces the scalar
logs with `strategy.reduce("MEAN", v, axis=0)`, which fails on a scalar
(keras-team/keras#20585, open). `enable_keras_multi_worker_fit()` replaces
those two reductions:

* the symbolic build takes its shapes from this worker's first replica's
  batch (only shapes and dtypes are used; no values cross workers);
* the logs are averaged over all replicas of all workers with
  `strategy.reduce("MEAN", v, axis=None)`, which is what "mean" means.

The training step itself (gradients all-reduced by the optimizer, the
`tfp_sgmcmc.keras` samplers' cross-replica updates) is Keras' and
TensorFlow's own, unchanged. Call it once, before `fit`, in every worker.
"""

import tensorflow as tf

__all__ = ["enable_keras_multi_worker_fit"]

_PATCHED = {}


def _multi_worker(strategy):
  return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and (
      strategy.extended._in_multi_worker_mode())  # pylint: disable=protected-access


def enable_keras_multi_worker_fit():
  """Makes Keras 3's TensorFlow trainer run `fit` across worker processes.

  Idempotent. Affects only strategies in multi-worker mode; every other
  strategy takes Keras' own code path. It takes no arguments and returns
  None; call it in every worker, before `fit`.

  #### Example

  Each worker runs this after the usual imports and data (docs/keras.md
  has the whole script):

  ```python
  import json, os, sys
  i = int(sys.argv[1])  # this worker's index
  os.environ["TF_CONFIG"] = json.dumps({
      "cluster": {"worker": ["host0:12345", "host1:12345"]},
      "task": {"type": "worker", "index": i}})
  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  sgk.enable_keras_multi_worker_fit()
  with strategy.scope():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
  sampling = sgk.SamplingCallback(sgk.SGLD(step_size=1e-4, seed=5),
                                  num_examples=len(x), prior=1.)
  model.fit(x, y, batch_size=64, epochs=2, callbacks=[sampling])
  ```
  """
  if _PATCHED:
    return
  from keras.src import tree  # pylint: disable=import-outside-toplevel
  from keras.src.backend.tensorflow import trainer  # pylint: disable=import-outside-toplevel

  original_reduce = trainer.reduce_per_replica
  original_build = trainer.TensorFlowTrainer._maybe_symbolic_build  # pylint: disable=protected-access

  def reduce_per_replica(values, strategy, reduction):
    if not _multi_worker(strategy) or reduction not in ("auto", "mean"):
      return original_reduce(values, strategy, reduction)

    def mean(v):
      if not isinstance(v, tf.distribute.DistributedValues):
        return v
      return strategy.reduce("MEAN", v, axis=None)
    return tree.map_structure(mean, values)

  def maybe_symbolic_build(self, iterator=None, data_batch=None):
    if not _multi_worker(self.distribute_strategy) or iterator is None:
      return original_build(self, iterator=iterator, data_batch=data_batch)
    local = self.distribute_strategy.experimental_local_results
    for _, _, it in iterator:
      data_batch = tree.map_structure(
          lambda v: local(v)[0] if isinstance(
              v, tf.distribute.DistributedValues) else v, next(it))
      break
    with self.distribute_strategy.scope():
      self._symbolic_build(data_batch=data_batch)  # pylint: disable=protected-access

  trainer.reduce_per_replica = reduce_per_replica
  trainer.TensorFlowTrainer._maybe_symbolic_build = maybe_symbolic_build  # pylint: disable=protected-access
  _PATCHED.update(reduce_per_replica=original_reduce,
                  maybe_symbolic_build=original_build)
