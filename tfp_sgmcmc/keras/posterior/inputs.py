"""The inputs a `Posterior` predicts on, as a list of batches."""

import tensorflow as tf

__all__ = ["input_batches"]


def input_batches(x, batch_size):
  """`x` as a list of batches: arrays (or a structure of them) in batches
  of `batch_size`, or the batches of a finite `tf.data.Dataset` (their
  inputs, for (x, y) batches), read once, so that every sample predicts
  on the same inputs in the same order."""
  if isinstance(x, tf.data.Dataset):
    if int(x.cardinality()) == int(tf.data.INFINITE_CARDINALITY):
      # Its batches are read into memory: the call would never return.
      raise ValueError(
          "predict got an infinite tf.data.Dataset (cardinality INFINITE, "
          "e.g. a training pipeline with .repeat()): its batches are read "
          "into memory once, so the call would never end. Pass a finite "
          "dataset (the test set's, without .repeat()), "
          "dataset.take(num_batches), or arrays.")
    batches = list(x)
    return [b[0] if isinstance(b, tuple) else b for b in batches]
  n = len(tf.nest.flatten(x)[0])
  return [tf.nest.map_structure(lambda a, i=i: a[i:i + batch_size], x)
          for i in range(0, n, batch_size)]
