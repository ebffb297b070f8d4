"""Runs AMAGOLD under TFP's step-size adaptation on a JointDistribution
target inside one XLA program, bootstrap included (run by
tests/processes/test_quiet_console.py, which reads this process's stderr for
TF's warnings).

    python quiet_console_worker.py [SCRIPT ARG...]  ->  "ok <finite draws>"

Given a SCRIPT, it then runs that script as `python SCRIPT ARG...` would,
in this process (one TensorFlow import for both), after printing
"quiet_console_worker: running" and the script's path to stderr, so that
the test can tell whose stderr a line is.
"""
import os
import runpy
import sys

# The warnings under test are C++ log lines at level W: keep them visible.
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

tfd = tfp.distributions


def main():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 2)).astype(np.float32)
  y = (rng.uniform(size=64) < 0.5).astype(np.int32)

  def model(x):
    return tfd.JointDistributionNamed(dict(
        scale=tfd.HalfNormal(1.),
        w=lambda scale: tfd.Independent(
            tfd.Normal(tf.zeros(2), scale[..., None]), 1),
        y=lambda w: tfd.Independent(
            tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1)))

  target = sg.JointDistributionTarget(model, observed={"y": y}, covariates=x,
                                      batch_size=16)
  init = target.initial_state(2, seed=[0, 1])
  # AMAGOLD under TFP's step-size adaptation: the bootstraps of the
  # adaptation, the amortized test and the proposal kernel (the one every
  # kernel of the package shares), and the target's energy, under XLA.
  kernel = tfp.mcmc.SimpleStepSizeAdaptation(
      sg.AMAGOLD(target, 1e-2, num_leapfrog_steps=2, friction=1.),
      num_adaptation_steps=2)
  run = tf.function(lambda: tfp.mcmc.sample_chain(
      3, init, kernel=kernel, trace_fn=None, seed=[1, 2]), jit_compile=True,
                    autograph=False)
  draws = run()
  finite = int(all(np.all(np.isfinite(v)) for v in draws.values()))
  print(f"ok {finite}", flush=True)
  if len(sys.argv) > 1:
    print("quiet_console_worker: running", sys.argv[1], file=sys.stderr,
          flush=True)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
  main()
