"""What the float64 sum of the exact energy costs, and what it corrects.

`InMemoryTarget.energy` sums the per-example log-likelihoods in float64
(`targets.energy.sum_of_examples`) and casts U once to the state's dtype.
This script times it against the same energy summed in float32 (a subclass
here, as the target summed before), side by side (interleaved, compiled
with XLA, compile excluded), and measures both sums' error against the
float64 sum of the same float32 per-example values, N = 200,000 examples,
4 chains, on two problems: a logistic regression with d = 20 (terms below
1 nat) and the mean of data with sd 1,000 under a normal likelihood of sd
500 (terms of about 9 nats, as on a regression with outcomes in
thousands).

    python benchmarks/energy_sum.py [--repeats 5] [--calls 60]
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def logistic(w, batch):
  x, y = batch
  logits = tf.einsum("nd,...d->...n", x, w)
  return -tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits)


def wide_normal(w, batch):
  return -0.5 * ((batch - w) / 500.)**2 - np.log(500. * np.sqrt(2. * np.pi))


class Float32Sum(sg.InMemoryTarget):
  """The exact energy summed in float32, in chunks as the target chunks."""

  def energy(self, state):
    n, chunk = self.num_examples, self.energy_chunk_size
    total = 0.
    for start in range(0, n, chunk):
      batch = tf.nest.map_structure(lambda a: a[start:start + chunk],
                                    self._data)  # pylint: disable=protected-access
      total += tf.reduce_sum(self._log_likelihood_fn(state, batch), axis=-1)  # pylint: disable=protected-access
    return -total


def measure(log_likelihood, data, w, repeats, calls):
  exact = -np.sum(log_likelihood(w, data).numpy().astype(np.float64), -1)
  energies = {
      "float64 sum": tf.function(sg.InMemoryTarget(
          log_likelihood, data, batch_size=1000).energy, jit_compile=True),
      "float32 sum": tf.function(Float32Sum(
          log_likelihood, data, batch_size=1000).energy, jit_compile=True)}
  seconds = {name: [] for name in energies}
  errors = {name: float(np.max(np.abs(np.asarray(fn(w), np.float64) -
                                      exact)))
            for name, fn in energies.items()}
  for _ in range(repeats):
    for name, fn in energies.items():
      start = time.perf_counter()
      for _ in range(calls):
        fn(w).numpy()
      seconds[name].append((time.perf_counter() - start) / calls)
  return {name: dict(ms_per_energy=[round(1e3 * s, 3) for s in seconds[
      name]], max_error_nats=errors[name]) for name in energies}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--calls", type=int, default=60)
  args = parser.parse_args()
  rng = np.random.default_rng(0)
  n, d = 200_000, 20
  x = rng.normal(size=(n, d)).astype(np.float32)
  y = (rng.uniform(size=n) < 0.5).astype(np.float32)
  result = dict(
      logistic=measure(logistic, (x, y), tf.constant(rng.normal(
          size=(4, d)).astype(np.float32)), args.repeats, args.calls),
      wide_normal=measure(wide_normal, (1000. * rng.normal(size=n)).astype(
          np.float32), tf.constant([[3.], [-40.], [700.], [0.]]),
                          args.repeats, args.calls),
      num_examples=n, num_chains=4, load=os.getloadavg()[0])
  print(json.dumps(result, indent=1))
  with open(os.path.join(HERE, "results", "energy_sum.json"), "w") as f:
    json.dump(result, f, indent=1)


if __name__ == "__main__":
  main()
