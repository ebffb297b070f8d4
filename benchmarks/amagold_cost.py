"""Where an AMAGOLD outer step's time goes, against NUTS's cost per draw.

On the N = 100,000, d = 20 logistic regression of accuracy_per_second.py
(control variates around the mode, b = 1000, T = 10, exact M-H test), for
C chains batched in one kernel, each piece timed alone in a compiled
`while_loop` of its own (XLA, compile excluded, minimum of 3 repeats):

  * energy: the exact full-data energy U(theta*) of the C chains
    (`InMemoryTarget.energy`; also in chunks of 4096 examples, the earlier
    default, and its parts: the matmul x @ w alone);
  * gradient: one full-data gradient (NUTS's unit of work);
  * minibatch: one control-variate minibatch gradient (index draw, gather of
    b rows, the gradient at theta and at the centre), and the index draw and
    gather alone;
  * proposal: `UncalibratedAMAGOLD.one_step` (T minibatch gradients and
    the leapfrog updates);
  * outer step: `AMAGOLD.one_step` (proposal + exact energy + M-H test and
    bookkeeping);
  * NUTS: `tfp.mcmc.NoUTurnSampler.one_step` at the fixed step 5e-3 of
    accuracy_per_second.py, with its mean number of leapfrog steps.

The floor of AMAGOLD's draws per second relative to NUTS's is then
(NUTS per draw) / (outer step); with ESS about equal to the number of
draws for both (as in accuracy_per_second.py) it is the ESS/s ratio's
ceiling. `--clock cpu` (default) is this process's CPU time (for a shared
machine), `--clock wall` wall-clock time.

    python benchmarks/amagold_cost.py --chains 4 8 16 32 [--clock wall]
"""

import argparse
import os

import common  # noqa: E402
import harness  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

def state_loop(fn):
  """run(state, n): n iterations of state <- fn(state, seed_i), compiled;
  fn's output feeds back so that XLA cannot drop it."""
  @tf.function(jit_compile=True, autograph=False)
  def run(state, n):
    def body(i, s):
      return i + 1, fn(s, tf.stack([i, 7]))
    return tf.while_loop(lambda i, s: i < n, body,
                         (tf.constant(0), state))[1]
  return run


def step_loop(kernel, feed_back=False):
  """run(state, n): n steps of kernel.one_step, compiled, with the step
  seeds [i, 9] as `state_loop`'s (not `harness.kernel_loop`'s split seeds);
  with `feed_back` the proposal is folded into the state (for an
  uncalibrated kernel)."""
  @tf.function(jit_compile=True, autograph=False)
  def run(state, n):
    results = kernel.bootstrap_results(state)
    def body(i, s, r):
      new, r = kernel.one_step(s, r, seed=tf.stack([i, 9]))
      return i + 1, (s + 1e-12 * new if feed_back else new), r
    return tf.while_loop(lambda i, *_: i < n, body,
                         (tf.constant(0), state, results))[1]
  return run


def main(chains=(4,), clock="cpu", steps=200, out=None):
  problem = common.synthetic_logistic()
  mode, _ = common.newton_mode(problem)
  centre = tf.constant(mode, tf.float32)
  x, y = tf.constant(problem.x), tf.constant(problem.y)
  base = problem.target(1000)
  chunked = sg.InMemoryTarget(problem.log_likelihood, (problem.x, problem.y),
                              1000, log_prior_fn=problem.log_prior,
                              energy_chunk_size=4096)
  cv = sg.ControlVariateTarget(base, centre)

  def full_energy(w):  # As accuracy_per_second.full_log_prob.
    logits = tf.einsum("nd,...d->...n", x, w)
    return (tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits), -1)
            + 0.5 * tf.reduce_sum(w ** 2, -1))

  def full_gradient(w):
    with tf.GradientTape() as tape:
      tape.watch(w)
      energy = full_energy(w)
    return tape.gradient(energy, w)

  def feed(value):
    return lambda s, seed: s + 1e-12 * value(s, seed)

  pieces = {
      "energy (one pass)": feed(lambda s, _: base.energy(s)[..., None]),
      "energy (chunks of 4096)": feed(
          lambda s, _: chunked.energy(s)[..., None]),
      "  matmul x @ w alone": feed(lambda s, _: tf.reduce_sum(
          tf.einsum("nd,...d->...n", x, s), -1)[..., None]),
      "full-data gradient": feed(lambda s, _: full_gradient(s)),
      "CV minibatch gradient b=1000": feed(
          lambda s, seed: cv.energy_and_gradient(s, seed)[1]),
      "  index draw + gather b=1000": feed(lambda s, seed: tf.reduce_sum(
          base._gather(base.minibatch_indices(seed))[0])),  # pylint: disable=protected-access
  }
  rows = []
  for c in chains:
    rng = np.random.default_rng(c)
    init = tf.constant(mode + 0.007 * rng.normal(size=(c, problem.d)),
                       tf.float32)
    row = dict(chains=c)
    for name, fn in pieces.items():
      row[name], _ = harness.per_call(state_loop(fn), init, steps, clock)
    proposal = sg.UncalibratedAMAGOLD(cv, 2.8e-3, num_leapfrog_steps=10,
                                      friction=0.)
    row["proposal T=10"], _ = harness.per_call(step_loop(proposal, True),
                                               init, steps, clock)
    amagold = sg.AMAGOLD(cv, 2.8e-3, num_leapfrog_steps=10, friction=0.)
    row["AMAGOLD outer step"], _ = harness.per_call(step_loop(amagold),
                                                    init, steps, clock)
    nuts = tfp.mcmc.NoUTurnSampler(lambda w: -full_energy(w), 5e-3)

    @tf.function(jit_compile=True, autograph=False)
    def run_nuts(state, n, nuts=nuts):
      results = nuts.bootstrap_results(state)
      def body(i, s, r, leapfrogs):
        s, r = nuts.one_step(s, r, seed=tf.stack([i, 9]))
        return i + 1, s, r, leapfrogs + tf.reduce_mean(
            tf.cast(r.leapfrogs_taken, tf.float32))
      out = tf.while_loop(lambda i, *_: i < n, body,
                          (tf.constant(0), state, results, 0.))
      return out[1], out[3] / tf.cast(n, tf.float32)
    row["NUTS draw"], (_, leapfrogs) = harness.per_call(
        run_nuts, init, max(10, steps // 5), clock)
    row["NUTS leapfrogs per draw"] = float(leapfrogs.numpy())
    row["floor (NUTS draw / AMAGOLD outer step)"] = (
        row["NUTS draw"] / row["AMAGOLD outer step"])
    rows.append(row)
    print(f"\n{c} chains ({clock} clock, ms per call, all chains):")
    for name, value in row.items():
      if name == "chains":
        continue
      unit = "" if "per draw" in name or "floor" in name else " ms"
      scale = 1 if unit == "" else 1e3
      per_chain = (f"   ({value * scale / c:.3f} per chain)" if unit else "")
      print(f"  {name:42s} {value * scale:8.3f}{unit}{per_chain}",
            flush=True)
  # Against the best NUTS chain count (cost per chain-draw).
  best = min(r["NUTS draw"] / r["chains"] for r in rows)
  print("\nfloor against the best NUTS chain count "
        f"({1e3 * best:.2f} ms per chain-draw):")
  for r in rows:
    r["floor vs best NUTS"] = best / (r["AMAGOLD outer step"] / r["chains"])
    print(f"  AMAGOLD {r['chains']:3d} chains: "
          f"{r['floor vs best NUTS']:.2f}x")
  if out:
    harness.write_json(os.path.join(out, "amagold_cost.json"),
                       dict(clock=clock, rows=rows))
  return rows


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--chains", type=int, nargs="*", default=[4])
  parser.add_argument("--clock", choices=sorted(harness.CLOCKS), default="cpu")
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--out", default=None)
  a = parser.parse_args()
  main(a.chains, a.clock, a.steps, a.out)
