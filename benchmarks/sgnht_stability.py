"""SGNHT's Euler step against the step sizes `warm_up` picks for it.

`warm_up` tunes SGNHT through AMAGOLD's test of its dynamics at the
thermostat's resting friction A (docs/warmup.md, "The test"); the chain's
own thermostat moves, and its Euler step can diverge where the test
accepts. On a standard normal in d dimensions (exact gradients, A = 1):
the step size `warm_up` tunes (diagonal mass, 500 steps, 4 chains), and,
for h in 0.2, 0.3 and 0.4, how many of 16 chains of 4,000 steps diverge
and the sd of the draws of those that do not (the posterior's is 1).

    python benchmarks/sgnht_stability.py
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc  # noqa: E402

NUM_CHAINS, NUM_STEPS = 16, 4000


def log_prob(x):
  return -0.5 * tf.reduce_sum(x ** 2, -1)


def run(dim, step_size):
  kernel = tfp_sgmcmc.SGNHT(target_log_prob_fn=log_prob,
                            step_size=step_size, diffusion=1.)
  with tfp_sgmcmc.chains.quiet.expected_warnings_silenced():
    states, diverged = tf.function(lambda: tfp.mcmc.sample_chain(
        NUM_STEPS, tf.zeros([NUM_CHAINS, dim]), kernel=kernel,
        trace_fn=lambda _, r: r.diverged, seed=[0, 1]), jit_compile=True)()
  held = ~np.asarray(diverged)[-1]
  sd = (np.asarray(states)[NUM_STEPS // 2:, held].std() if held.any()
        else float("nan"))
  return int((~held).sum()), sd


def main():
  for dim in (1, 5, 50):
    with tfp_sgmcmc.chains.quiet.expected_warnings_silenced():
      warm = tfp_sgmcmc.warm_up(
          tfp_sgmcmc.SGNHT(target_log_prob_fn=log_prob, step_size=0.1),
          tf.zeros([4, dim]), num_steps=500, seed=[1, 2], dense_mass=False)
    cells = [f"warm_up's h {warm.report.step_size:.2f}"]
    for h in (0.2, 0.3, 0.4):
      diverged, sd = run(dim, h)
      cells.append(f"h = {h}: {diverged}/{NUM_CHAINS} diverged, sd {sd:.3f}")
    print(f"d = {dim}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
  main()
