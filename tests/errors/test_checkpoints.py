"""Checkpoints: save_chain and load_chain name a bad path, a missing,
truncated or foreign file, a template of another shape, a checkpoint of
another kernel; StepSeeded refuses a bad seed or a target in place of a
kernel. A pathlib round trip is exact and a stale temporary is removed.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from support.bad_inputs import D, classify, clear, correct, noisy, steps


def test_load_chain_rejects_a_checkpoint_of_another_kernel(tmp_path):
  target = sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x ** 2, -1),
                                  gradient_noise_variance=1.)
  sgld, sghmc = sg.SGLD(target, 0.1), sg.SGHMC(target, 0.1, 1.)
  init = tf.zeros([2])
  path = str(tmp_path / "c.npz")
  sg.save_chain(path, init, sgld.bootstrap_results(init))
  with pytest.raises(ValueError, match="another kernel"):
    sg.load_chain(path, sghmc.bootstrap_results(init), init)


def pathlib_round_trip(tmp_path):
  import pathlib  # pylint: disable=g-import-not-at-top
  kernel = sg.SGHMC(noisy(), 0.1, 1.)
  state, results = steps(kernel, tf.ones([2, D]))
  path = pathlib.Path(tmp_path) / "chain.npz"
  sg.save_chain(path, state, results)
  s2, r2 = sg.load_chain(path, kernel.bootstrap_results(state), state)
  np.testing.assert_array_equal(s2, state)
  for a, b in zip(tf.nest.flatten(r2), tf.nest.flatten(results)):
    np.testing.assert_array_equal(a, b)
  assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]


def stale_temporary_removed(tmp_path):
  path = os.path.join(tmp_path, "c.npz")
  stale = path + ".tmp12345.npz"
  with open(stale, "wb") as f:
    f.write(b"PK\x03\x04 partial")  # Left by a process killed mid-write.
  kernel = sg.SGLD(noisy(), 0.1)
  sg.save_chain(path, tf.ones([D]), kernel.bootstrap_results(tf.ones([D])))
  assert os.listdir(tmp_path) == ["c.npz"]


def _bad_zip(tmp_path):
  path = os.path.join(tmp_path, "c.npz")
  kernel = sg.SGLD(noisy(), 0.1)
  sg.save_chain(path, tf.ones([D]), kernel.bootstrap_results(tf.ones([D])))
  with open(path, "r+b") as f:
    f.truncate(30)
  return sg.load_chain(path, kernel.bootstrap_results(tf.ones([D])))


def _text_file(tmp_path):
  path = os.path.join(tmp_path, "notes.npz")
  with open(path, "w") as f:
    f.write("not a checkpoint")
  return sg.load_chain(path, sg.SGLD(noisy(), 0.1).bootstrap_results(
      tf.ones([D])))


def _wrong_parameter_count(tmp_path):
  path = os.path.join(tmp_path, "c.npz")
  kernel = sg.SGLD(noisy(), 0.1)
  sg.save_chain(path, tf.ones([2, D]), kernel.bootstrap_results(
      tf.ones([2, D])))
  return sg.load_chain(path, kernel.bootstrap_results(tf.ones([2, 5])),
                       tf.ones([2, 5]))


OUTCOMES = [
    clear("checkpoint path that is a number", lambda: sg.save_chain(
        123, tf.zeros([D]), ()), "path", r"int"),
    clear("missing checkpoint", lambda: sg.load_chain(
        "/nonexistent/c.npz", ()), "path", r"no such checkpoint"),
    clear("truncated checkpoint", _bad_zip, "path", r"truncated or corrupt"),
    clear("text file as checkpoint", _text_file, "path", r"not a complete"),
    clear("checkpoint of 3 parameters into a template of 5",
          _wrong_parameter_count, "state_template", r"shape \[2, 3\].*\[2, 5\]"),
    clear("step seed as a string", lambda: sg.StepSeeded(
        sg.SGLD(noisy(), 0.1), seed="1,2"), "seed", r"'1,2'"),
    clear("step-seeded target", lambda: sg.StepSeeded(noisy(), [1, 2]),
          "inner_kernel", r"NoisyGradientTarget"),
    correct("save and load through pathlib, exactly", pathlib_round_trip),
    correct("stale temporary removed by the next save",
            stale_temporary_removed),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"
