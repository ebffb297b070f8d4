"""Paper 003, Fig. 8: SGHMC with m steps per minibatch, eps m fixed (small).

`examples/papers/sghmc/sghmc_steps_per_sample.py` on the MNIST test-file split; skips
when ../shared/data is absent. The row's claim ("does not hold"): at fixed
eps m, m = 5 does not reach a low test error sooner than m = 1.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from support.helpers import load_example

ex = load_example("papers/sghmc/sghmc_steps_per_sample")
DATA = ex.base.SHARED_DATA

needs_data = pytest.mark.skipif(
    not os.path.exists(os.path.join(DATA, "mnist")),
    reason=f"MNIST files not found under {DATA}")


def test_held_batch_target_keeps_the_batch_until_told():
  x = np.arange(20, dtype=np.float32)[:, None]
  target = ex.HeldBatchTarget(lambda s, b: -0.5 * (b[..., 0] - s[..., 0]) ** 2,
                              x, batch_size=5)
  a = target.minibatch_indices(tf.constant([1, 0]))
  b = target.minibatch_indices(tf.constant([2, 0]))
  np.testing.assert_array_equal(a, b)
  target.batch_seed.assign([3, 4])
  c = target.minibatch_indices(tf.constant([1, 0]))
  assert not np.array_equal(a, c)


@needs_data
@pytest.mark.slow  # about 20 s on the shared cores
def test_more_steps_per_sample_is_not_faster():
  # 784-32-10 on 2,000 images, 1 warm-up + 4 epochs of 20 minibatches.
  # Seen (seeds 0-1): m = 1 errors 0.598 / 0.342 / 0.236 / 0.199 / 0.178
  # and 0.666 / 0.491 / 0.346 / 0.255 / 0.212; m = 5 0.591 / 0.312 / 0.229 /
  # 0.195 / 0.178 and 0.666 / 0.482 / 0.348 / 0.251 / 0.203: final errors
  # within 0.01, mean advantage of m = 5 0.010 and 0.004.
  result = ex.run_experiment(ms=(1, 5), warmup=1, epochs=4, num_train=2000,
                             hidden=32, draws_per_epoch=4,
                             log=lambda *_: None)
  e1 = np.asarray(result[1]["error"])
  e5 = np.asarray(result[5]["error"])
  assert abs(e5[-1] - e1[-1]) < 0.02, (e1, e5)
  assert np.mean(e1 - e5) < 0.02, (e1, e5)


# --- The row's verdict from the committed run
# (docs/figures/sghmc_steps_per_sample/steps_per_sample.json: 784-100-10 on
# 8,000 images, 2 + 10 epochs; the CI-size run above is slow).


def check_steps_verdict(results, text):
  """'Does not hold': more steps per sample do not reach a low error
  sooner. From epoch 3 on the three curves stay within 1.1 points of each
  other, m = 1 is the lowest at epochs 3-5 (the early part the claim is
  about), and m = 1 reaches 8% no later than m = 3 or 5; the row quotes the
  final errors."""
  from support import results_rows  # pylint: disable=g-import-not-at-top
  error = {int(m): np.asarray(r["error"]) for m, r in results.items()}
  curves = np.stack([error[m] for m in (1, 3, 5)])
  spread = curves[:, 2:].max(0) - curves[:, 2:].min(0)
  assert np.all(spread <= 0.011), spread
  assert np.all(np.argmin(curves[:, 2:5], axis=0) == 0), curves[:, 2:5]
  first = {m: int(np.argmax(error[m] <= 0.08)) for m in error}
  assert all(error[m].min() <= 0.08 for m in error), error
  assert first[1] <= min(first[3], first[5]), first
  results_rows.assert_quoted(
      text, "**does not hold**",
      f"({100 * error[1][-1]:.2f}%, {100 * error[3][-1]:.2f}%, "
      f"{100 * error[5][-1]:.2f}% for m = 1, 3, 5 after 12 epochs")


def test_fig8_row_states_its_runs_verdict():
  from support import results_rows  # pylint: disable=g-import-not-at-top
  check_steps_verdict(
      results_rows.load_json("sghmc_steps_per_sample",
                             "steps_per_sample.json")["results"],
      results_rows.results_row("003, Fig. 8"))


def test_the_fig8_check_fails_if_more_steps_were_faster():
  # Able to fail: an m = 5 curve 2 points below m = 1's from epoch 3 on
  # (the paper's claim) is rejected.
  from support import results_rows  # pylint: disable=g-import-not-at-top
  results = results_rows.load_json("sghmc_steps_per_sample",
                                   "steps_per_sample.json")["results"]
  e5 = np.asarray(results["5"]["error"])
  e5[2:] = np.asarray(results["1"]["error"])[2:] - 0.02
  results["5"]["error"] = list(e5)
  with pytest.raises(AssertionError):
    check_steps_verdict(results, results_rows.results_row("003, Fig. 8"))
