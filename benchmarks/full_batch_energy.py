"""What a full-batch step pays for the log density it reports.

A kernel given `target_log_prob_fn` reports the exact log density at each
new state (`target_log_prob`, which `tfp.mcmc.MetropolisHastings` compares)
and the energy where it took the gradient (`energy`). SGHMC, SGNHT and
AMAGOLD do not need either for their own step; `compute_energy=False`
skips both, so a step costs one gradient. This script times, side by side
(interleaved, compiled with XLA, compile excluded), a full-batch step of

  * the gradient alone (`tf.GradientTape` of the log density);
  * SGLD (MALA's proposal: it needs the log density);
  * SGHMC, SGNHT with and without `compute_energy`;
  * AMAGOLD (T = 10 leapfrog steps, the exact test's U(theta*) per outer
    step) with and without `compute_energy`, per gradient;

on a logistic regression with d = 500 features and a bias (501
parameters), N = 1,000 rows, one chain. Two uses of the results:

  * unread (`harness.kernel_loop`: only the state leaves the loop): XLA
    and TF's graph optimizer drop the unread log density themselves, so
    `compute_energy` changes nothing there;
  * traced: the loop sums the results' `target_log_prob` (what a
    `sample_chain` trace of the results, its default, reads), so the log
    density at each new state is a forward pass of its own unless
    `compute_energy=False`.

Compiled with XLA (both uses) and as a plain TF graph (`tf.function`
without `jit_compile`, traced).

    python benchmarks/full_batch_energy.py [--clock wall]
"""

import argparse
import os

import harness  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402


def logistic_log_prob(n=1000, d=500, seed=0):
  rng = np.random.default_rng(seed)
  x = tf.constant((rng.normal(size=(n, d)) / np.sqrt(d)).astype(np.float32))
  y = tf.constant((rng.uniform(size=n) < 0.5).astype(np.float32))

  def log_prob(w):
    logits = tf.linalg.matvec(x, w[..., :-1]) + w[..., -1:]
    return (-tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits), -1)
            - 0.5 * tf.reduce_sum(w ** 2, -1))
  return log_prob, d + 1


def gradient_loop(log_prob, jit_compile=True):
  """run(state, seed, n): n gradients, each fed back into the state."""
  @tf.function(jit_compile=jit_compile, autograph=False)
  def run(state, seed, n):
    del seed
    def body(i, w):
      with tf.GradientTape() as tape:
        tape.watch(w)
        lp = log_prob(w)
      return i + 1, w + 1e-6 * tape.gradient(lp, w)
    return tf.while_loop(lambda i, w: i < n, body, (tf.constant(0), state))[1]
  return run


def traced_loop(kernel, jit_compile=True):
  """run(state, seed, n): n steps, the sum of the results' target_log_prob
  over the steps leaving the loop with the state (NaN when not computed)."""
  @tf.function(jit_compile=jit_compile, autograph=False)
  def run(state, seed, n):
    results = kernel.bootstrap_results(state)
    def body(i, state, results, seed, total):
      seed, step_seed = tfp.random.split_seed(seed)
      state, results = kernel.one_step(state, results, seed=step_seed)
      return i + 1, state, results, seed, total + tf.reduce_sum(
          results.target_log_prob)
    out = tf.while_loop(lambda i, *_: i < n, body,
                        (tf.constant(0), state, results, seed,
                         tf.constant(0.)))
    return out[1], out[4]
  return run


def kernels(log_prob):
  fn = dict(target_log_prob_fn=log_prob)
  out = {"SGLD": (sg.SGLD(step_size=1e-3, **fn), 1)}
  for energy in (True, False):
    tag = "" if energy else ", compute_energy=False"
    out["SGHMC" + tag] = (sg.SGHMC(step_size=1e-2, friction=1.,
                                   compute_energy=energy, **fn), 1)
    out["SGNHT" + tag] = (sg.SGNHT(step_size=1e-2, compute_energy=energy,
                                   **fn), 1)
    out["AMAGOLD" + tag] = (sg.AMAGOLD(
        step_size=1e-2, num_leapfrog_steps=10, friction=0.5,
        compute_energy=energy, **fn), 10)
  return out


def main(smoke=False, clock="cpu", out=harness.RESULTS):
  log_prob, dim = logistic_log_prob(n=200 if smoke else 1000)
  state = tf.zeros([dim])
  seed = tf.constant([1, 2])
  target, repeats = (0.05, 1) if smoke else (1.0, 5)
  rows = []
  for jit, use in ((True, "unread"), (True, "traced"), (False, "traced")):
    fns = {"gradient": (gradient_loop(log_prob, jit), (state, seed))}
    grads = {"gradient": 1}
    for name, (kernel, per_step) in kernels(log_prob).items():
      loop = (harness.kernel_loop(kernel, jit_compile=jit) if
              use == "unread" else traced_loop(kernel, jit))
      fns[name] = (loop, (state, seed))
      grads[name] = per_step
    wall, cpu, steps = harness.interleaved_per_step_cpu(fns, target, repeats)
    times = cpu if clock == "cpu" else wall
    base = harness.spread(times["gradient"])["median"]
    mode = ("XLA" if jit else "graph") + ", results " + use
    print(f"{mode}: per gradient, {clock} time, median [min, max] of "
          f"{repeats}:")
    for name in fns:
      per_gradient = [t / grads[name] for t in times[name]]
      s = harness.spread(per_gradient)
      rows.append(dict(kernel=name, compiled=mode,
                       ms_per_gradient=harness.spread(
                           [1e3 * t for t in per_gradient]),
                       steps=steps[name], gradients_per_step=grads[name],
                       vs_gradient=s["median"] / base))
      print(f"  {name:34s} {harness.fmt(s, 1e3, 3)} ms "
            f"({s['median'] / base:.2f}x the gradient)")
  harness.write_json(os.path.join(out, "full_batch_energy.json"),
                     dict(clock=clock, parameters=dim, rows=rows))
  return rows


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
  main(clock=parser.parse_args().clock)
