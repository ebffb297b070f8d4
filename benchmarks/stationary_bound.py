"""SGHMC's, SGNHT's and SGLD's own chains at the step sizes `warm_up`
picks.

`warm_up` tunes SGHMC and SGNHT through AMAGOLD's test of their dynamics
(docs/warmup.md, "The test"), which does not run their own steps, and
SGLD through the test of its own (M-H corrected) path; it then caps the
step size at the largest at which their chain on a standard normal in the
mass's units (SGLD: the draws') keeps its sd within 5%
(`dynamics.stationary`).
On a standard normal in d dimensions (exact gradients, SGHMC friction 1,
SGNHT diffusion 1; diagonal mass, SGLD none; 500 warm-up steps, 16
chains): the step size the test reached, the one `warm_up` froze, and for
each how many of the 16 chains diverge in 20,000 steps and the sd of the
draws of those that do not (the posterior's is 1; the step sizes are in
the mass's units, and the mass is the estimated variance, about 1).

    python benchmarks/stationary_bound.py
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc  # noqa: E402

NUM_CHAINS, NUM_STEPS = 16, 20000


def log_prob(x):
  return -0.5 * tf.reduce_sum(x ** 2, -1)


KERNELS = {
    "SGHMC": lambda: tfp_sgmcmc.SGHMC(target_log_prob_fn=log_prob,
                                      step_size=0.1, friction=1.),
    "SGNHT": lambda: tfp_sgmcmc.SGNHT(target_log_prob_fn=log_prob,
                                      step_size=0.1, diffusion=1.),
    # No mass: the bound is read in the units of the draws' sd.
    "SGLD": lambda: tfp_sgmcmc.SGLD(target_log_prob_fn=log_prob,
                                    step_size=0.1),
}


def run(kernel, state):
  with tfp_sgmcmc.chains.quiet.expected_warnings_silenced():
    states, diverged = tf.function(lambda: tfp.mcmc.sample_chain(
        NUM_STEPS, state, kernel=kernel,
        trace_fn=lambda _, r: r.diverged, seed=[5, 6]), jit_compile=True)()
  held = ~np.asarray(diverged)[-1]
  sd = (np.asarray(states)[NUM_STEPS // 2:, held].std() if held.any()
        else float("nan"))
  return f"{int((~held).sum())}/{NUM_CHAINS} diverged, sd {sd:.3f}"


def main():
  for name, make in KERNELS.items():
    for dim in (1, 5, 50):
      with tfp_sgmcmc.chains.quiet.expected_warnings_silenced():
        warm = tfp_sgmcmc.warm_up(make(), tf.zeros([NUM_CHAINS, dim]),
                                  num_steps=500, seed=[1, 2],
                                  **({} if name == "SGLD" else
                                     dict(dense_mass=False)))
      tested = warm.report.windows[-1]["step_size"]
      frozen = float(warm.kernel.step_size)
      at_test = run(warm.kernel.copy(step_size=tested), warm.state)
      at_frozen = run(warm.kernel, warm.state)
      print(f"{name} d = {dim}: the test's h {tested:.3f}: {at_test}; "
            f"warm_up's h {frozen:.3f}: {at_frozen}", flush=True)


if __name__ == "__main__":
  main()
