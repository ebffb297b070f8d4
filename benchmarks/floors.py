"""Floor proofs for chains.py's goals: what optimized code elsewhere
needs for the work a batched SG-MCMC step cannot avoid, timed side by side
with the shared-minibatch gradient floor of `chains.py` (same process, one
thread, process CPU time, interleaved repeats).

(a) normals: our SplitMix64 + erfinv normal (`dynamics.standard_normal_like`)
    and TF's Philox `stateless_normal`, each in a compiled XLA loop, against
    NumPy's C generators (`Generator.standard_normal(out=, dtype=float32)`
    with PCG64's ziggurat and with the Philox bit generator), per normal, at
    the 64-chain size (1,280) and the MNIST MLP's size (79,510). NumPy is
    called once per draw from Python; its per-call cost (a zero-size draw)
    is reported and subtracted in the "net" figure.
(b) gather: 6,400 random rows of 20 float32 (64 chains x n = 100) from the
    [100000, 20] data, by XLA's gather in a compiled loop and by C
    (`np.take(x, idx, axis=0, out=out)`), with sorted indices, from a
    1.6 MB array, and a contiguous copy of the same 512 KB: random access
    into 8 MB, not the gather code, sets the cost.
(c) arithmetic: the 64-chain gradient's own arithmetic on a fixed batch
    (no index draw, no gather): the two [100, 20] x [20, C] products and the
    C x 100 sigmoids, together and apart, at 1 and 64 chains.

`chains.py` runs these in its shared-minibatch sweep (`--quick` too) and
writes them to its JSON under "floors"; `python benchmarks/floors.py` runs
them alone with the shared gradient floor at 1 and 64 chains.
"""

import os
import time

import common  # noqa: E402
import harness  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfp_sgmcmc import dynamics  # noqa: E402

NORMAL_SIZES = {"1,280 (64 chains x d=20)": 1280,
                "79,510 (MNIST MLP)": 79_510}


def _xla_loop(step):
  """`run(state, num_steps)`: state = step(state, i) num_steps times in one
  compiled while_loop (the step's inputs change every step, so XLA cannot
  hoist the work out of the loop)."""
  @tf.function(jit_compile=True, autograph=False)
  def run(state, num_steps):
    def body(i, state):
      return i + 1, step(state, i)
    _, state = tf.while_loop(lambda i, _: i < num_steps, body,
                             (tf.constant(0), state))
    return state
  return run


def _step_seed(i):
  # Integer ops only: no Philox key schedule in the loop.
  return tf.stack([i, tf.constant(7)])


def normal_fns():
  """name -> (fn, args, normals per call)."""
  out = {}
  for label, size in NORMAL_SIZES.items():
    x = tf.zeros([size])
    out[f"normals {label}: bare XLA loop (x + c)"] = (_xla_loop(
        lambda s, i: s + 1e-9 * tf.cast(i, tf.float32)), (x,), size)
    out[f"normals {label}: ours, SplitMix64+erfinv (XLA)"] = (_xla_loop(
        lambda s, i: s + 1e-9 * dynamics.standard_normal_like(
            s, _step_seed(i))), (x,), size)
    out[f"normals {label}: TF Philox stateless_normal (XLA)"] = (_xla_loop(
        lambda s, i: s + 1e-9 * tf.random.stateless_normal(
            tf.shape(s), _step_seed(i), alg="philox")), (x,), size)
    for bit in ("PCG64", "Philox"):
      gen = np.random.Generator(getattr(np.random, bit)(0))
      buf = np.empty(size, np.float32)
      def draw(gen, buf, n):
        for _ in range(int(n)):
          gen.standard_normal(out=buf, dtype=np.float32)
        return buf
      name = ("ziggurat, PCG64" if bit == "PCG64" else "ziggurat, Philox")
      out[f"normals {label}: NumPy C {name}"] = (draw, (gen, buf), size)
  gen = np.random.Generator(np.random.PCG64(0))
  empty = np.empty(0, np.float32)
  def call_only(gen, buf, n):
    for _ in range(int(n)):
      gen.standard_normal(out=buf, dtype=np.float32)
    return buf
  out["normals: NumPy call cost (zero-size draw)"] = (call_only,
                                                      (gen, empty), 1)
  return out


def gather_fns(x, chains=64, n=100):
  """name -> (fn, args, rows per call). x: the [N, d] float32 data."""
  rng = np.random.default_rng(0)
  rows = chains * n
  tables = [rng.integers(0, len(x), rows) for _ in range(16)]
  small = np.ascontiguousarray(x[:len(x) // 5])  # 20,000 rows: 1.6 MB.
  small_tables = [rng.integers(0, len(small), rows) for _ in range(16)]
  out_buf = np.empty((rows, x.shape[1]), np.float32)

  def take(x, tables, out_buf, n):
    for k in range(int(n)):
      np.take(x, tables[k % 16], axis=0, out=out_buf)
    return out_buf

  def copy(x, starts, out_buf, n):
    for k in range(int(n)):
      s = starts[k % 16]
      np.copyto(out_buf, x[s:s + rows])
    return out_buf

  xt = tf.constant(x)
  table = tf.constant(np.stack(tables).astype(np.int32))

  @tf.function(jit_compile=True, autograph=False)
  def xla_gather(acc, num_steps):
    def body(i, acc):
      rows_ = tf.gather(xt, tf.gather(table, i % 16))
      return i + 1, acc + 1e-30 * tf.reduce_sum(rows_, 0)
    _, acc = tf.while_loop(lambda i, _: i < num_steps, body,
                           (tf.constant(0), acc))
    return acc

  starts = list(rng.integers(0, len(x) - rows, 16))
  return {
      "gather 6,400 rows: XLA gather in a compiled loop": (
          xla_gather, (tf.zeros([x.shape[1]]),), rows),
      "gather 6,400 rows: C np.take from the 8 MB data": (
          take, (x, tables, out_buf), rows),
      "gather 6,400 rows: C np.take, sorted indices": (
          take, (x, [np.sort(t) for t in tables], out_buf), rows),
      "gather 6,400 rows: C np.take from a 1.6 MB array": (
          take, (small, small_tables, out_buf), rows),
      "gather 6,400 rows: contiguous copy of 512 KB": (
          copy, (x, starts, out_buf), rows),
  }


def arithmetic_fns(x, y, chains_list=(1, 64), n=100):
  """The gradient's arithmetic on a fixed batch: name -> (fn, args, C)."""
  xb = tf.constant(x[:n])
  yb = tf.constant(y[:n])
  out = {}
  for c in chains_list:
    w = tf.zeros([c, x.shape[1]])

    def both(w, i):
      logits = tf.einsum("nd,cd->cn", xb, w)
      g = tf.einsum("cn,nd->cd", tf.sigmoid(logits) - yb, xb)
      return w - 1e-12 * g

    def dots(w, i):
      logits = tf.einsum("nd,cd->cn", xb, w)
      g = tf.einsum("cn,nd->cd", logits - yb, xb)
      return w - 1e-12 * g

    def sigmoids(w, i, c=c):
      # C x n sigmoids of inputs that change every step, nothing else.
      z = tf.broadcast_to(w[:, :1], [c, n]) + 1e-3 * tf.cast(
          tf.range(n), tf.float32) + 1e-6 * tf.cast(i, tf.float32)
      return w + 1e-12 * tf.reduce_sum(tf.sigmoid(z), -1, keepdims=True)

    out[f"arithmetic {c} chains: 2 products + {c * n} sigmoids"] = (
        _xla_loop(both), (w,), c)
    out[f"arithmetic {c} chains: the 2 products alone"] = (
        _xla_loop(dots), (w,), c)
    out[f"arithmetic {c} chains: {c * n} sigmoids alone"] = (
        _xla_loop(sigmoids), (w,), c)
  return out


def all_fns(problem):
  """name -> (fn, args, count) for the three proofs."""
  out = {}
  out.update(normal_fns())
  out.update(gather_fns(problem.x))
  out.update(arithmetic_fns(problem.x, problem.y))
  return out


def report(cpu, floor_cpu):
  """Prints the proofs and returns their JSON.

  cpu: name -> CPU seconds per call per repeat (the proofs'); floor_cpu:
  chains -> CPU seconds per step per repeat of the shared gradient floor at
  1 and 64 chains, from the same interleaved repeats."""
  def med(v):
    return float(np.median(v))
  rows = {}
  floor64 = floor_cpu[64]
  call = med(cpu["normals: NumPy call cost (zero-size draw)"])
  print("\n(a) normals, ns per float32 normal (median over repeats; NumPy "
        f"'net' subtracts its per-call cost, {1e6 * call:.2f} us)")
  for label, size in NORMAL_SIZES.items():
    for name, t in cpu.items():
      if not name.startswith(f"normals {label}:"):
        continue
      ns = 1e9 * med(t) / size
      row = dict(ns_per_normal=ns, us_per_call=1e6 * med(t), size=size)
      text = f"  {name:70s} {ns:6.2f} ns"
      if "NumPy" in name:
        row["ns_per_normal_net"] = 1e9 * (med(t) - call) / size
        text += f"  (net {row['ns_per_normal_net']:.2f})"
      rows[name] = row
      print(text)
  print("\n(b) gather of 6,400 random rows of 20 float32 (64 chains x n = "
        "100): us per gather, and / the shared gradient floor at 64 chains "
        f"({1e6 * med(floor64):.1f} us; per-repeat ratios, median [min, max])"
        )
  for name, t in cpu.items():
    if name.startswith("gather"):
      ratio = harness.ratios(t, floor64)
      rows[name] = dict(us=1e6 * med(t), over_shared_floor_64=ratio)
      print(f"  {name:55s} {1e6 * med(t):7.1f} us  "
            f"/ floor {harness.fmt(ratio)}")
  print("\n(c) the gradient's arithmetic on a fixed batch (no index draw, no "
        "gather): us per step, / the shared gradient floor at the same chain "
        "count and / the one-chain floor")
  for name, t in cpu.items():
    if not name.startswith("arithmetic"):
      continue
    c = int(name.split()[1])
    r_same = harness.ratios(t, floor_cpu[c])
    r_one = harness.ratios(t, floor_cpu[1])
    rows[name] = dict(us=1e6 * med(t), over_shared_floor_same_chains=r_same,
                      over_shared_floor_1_chain=r_one)
    print(f"  {name:52s} {1e6 * med(t):7.2f} us  / floor({c}) "
          f"{r_same['median']:.2f}  / floor(1) {r_one['median']:.2f}")
  return rows


def main(repeats=3, target_seconds=0.1, out=None):
  problem = common.synthetic_logistic()
  target = problem.target()
  floor = harness.kernel_loop(common.GradientOnly(target))
  seed = tf.constant([1, 2])
  fns = {("floor", c): (floor, (tf.zeros([c, problem.d]), seed))
         for c in (1, 64)}
  proofs = all_fns(problem)
  for name, (fn, args, _) in proofs.items():
    fns[name] = (fn, args)
  _, cpu, _ = harness.interleaved_per_step_cpu(fns, target_seconds, repeats)
  rows = report({k: v for k, v in cpu.items() if isinstance(k, str)},
                {c: cpu[("floor", c)] for c in (1, 64)})
  harness.write_json(os.path.join(out or harness.RESULTS, "floors.json"),
                     dict(floors=rows, repeats=repeats,
                          timing="process CPU time, one thread"))


if __name__ == "__main__":
  import argparse
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--out", default=None)
  a = parser.parse_args()
  import chains  # noqa: E402
  chains.set_threads(1)
  start = time.time()
  main(repeats=a.repeats, out=a.out)
  print(f"({time.time() - start:.0f} s)")
