"""Checkpoints: save_chain and load_chain name a bad path, a missing,
truncated or foreign file, a template of another shape, a checkpoint of
another kernel class, other parameters, fields in another order or another
seed (with both values and the escape); StepSeeded refuses a bad seed or a
target in place of a kernel. A pathlib round trip is exact and a dead
writer's temporary is removed. Crafted archives are refused from their
headers, before any data is decompressed, with our own error.
"""

import collections
import io
import json
import os
import subprocess
import sys
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc import _files as files
from tfp_sgmcmc.chains import checkpoint_header
from tfp_sgmcmc.kernels import langevin_path
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
  dead = subprocess.Popen([sys.executable, "-c", ""])
  dead.wait()  # A writer of this host that no longer runs.
  stale = files.temporary_name(path).replace(f"-{os.getpid()}-",
                                             f"-{dead.pid}-")
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


# --- What wrote a checkpoint ------------------------------------------------


def _target():
  return sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x ** 2, -1),
                                gradient_noise_variance=1.)


def _saved(tmp_path, kernel, state=None):
  state = tf.ones([2, D]) if state is None else state
  state, results = steps(kernel, state)
  path = str(tmp_path / "c.npz")
  sg.save_chain(path, state, results, kernel=kernel)
  return path, state, results


def test_a_checkpoint_of_another_kernel_class_is_refused(tmp_path):
  # SGHMC and NaiveSGHMC have results of the same type, fields and shapes.
  target = _target()
  sghmc = sg.StepSeeded(sg.SGHMC(target, 0.1, 1.), seed=[1, 2])
  naive = sg.StepSeeded(sg.NaiveSGHMC(target, 0.1), seed=[1, 2])
  path, state, _ = _saved(tmp_path, sghmc)
  with pytest.raises(ValueError, match=r"another kernel.*inner_kernel\.class"
                     r".*sghmc\.SGHMC.*sghmc\.NaiveSGHMC.*allow_other_kernel"):
    sg.load_chain(path, naive.bootstrap_results(state), state, kernel=naive)
  s2, _ = sg.load_chain(path, naive.bootstrap_results(state), state,
                        kernel=naive, allow_other_kernel=True)
  np.testing.assert_array_equal(s2, state)


@pytest.mark.parametrize("writer,reader", [("SGHMC", "NaiveSGHMC"),
                                           ("NaiveSGHMC", "SGHMC")])
def test_sghmc_and_naive_sghmc_are_told_apart_without_kernel(
    tmp_path, writer, reader):
  # Without `kernel=` load_chain has only the results template: the results
  # type must name the kernel, or the two load into each other silently.
  def build(name):
    kernel = (sg.SGHMC(_target(), 0.1, 1.) if name == "SGHMC" else
              sg.NaiveSGHMC(_target(), 0.1))
    return sg.StepSeeded(kernel, seed=[1, 2])
  path, state, _ = _saved(tmp_path, build(writer))
  other = build(reader)
  with pytest.raises(ValueError, match=rf"another kernel.*\b{writer}Results"
                     rf".*\b{reader}Results.*allow_other_kernel=True"):
    sg.load_chain(path, other.bootstrap_results(state), state)
  s2, _ = sg.load_chain(path, other.bootstrap_results(state), state,
                        allow_other_kernel=True)
  np.testing.assert_array_equal(s2, state)


def _as_written_before_naive_sghmc_had_its_own_results(path):
  # NaiveSGHMC's results were SGHMCResults: its older files name that type.
  with np.load(path) as f:
    arrays = dict(f)
  arrays["header"] = np.array(str(arrays["header"]).replace(
      "NaiveSGHMCResults.", "SGHMCResults."))
  np.savez(path, **arrays)


def test_an_older_naive_sghmc_checkpoint_loads_into_naive_sghmc_only(
    tmp_path):
  naive = sg.StepSeeded(sg.NaiveSGHMC(_target(), 0.1), seed=[1, 2])
  sghmc = sg.StepSeeded(sg.SGHMC(_target(), 0.1, 1.), seed=[1, 2])
  path, state, results = _saved(tmp_path, naive)
  _as_written_before_naive_sghmc_had_its_own_results(path)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    _, r2 = sg.load_chain(path, naive.bootstrap_results(state), state,
                          kernel=naive)
  assert type(r2.inner_results) is sg.NaiveSGHMCResults
  for a, b in zip(tf.nest.flatten(r2), tf.nest.flatten(results)):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(ValueError, match=r"another kernel "
                     r"\(StepSeeded\(NaiveSGHMC\)\).*NaiveSGHMCResults \(file\)"):
    sg.load_chain(path, sghmc.bootstrap_results(state), state)


def test_every_kernel_class_writes_results_of_its_own_type():
  # Two kernel classes whose results have the same field paths cannot be
  # told apart by a checkpoint loaded without `kernel=`.
  target = _target()
  state = tf.ones([2, D])
  kernels = {
      "SGLD": sg.SGLD(target, 0.1),
      "PreconditionedSGLD": sg.PreconditionedSGLD(target, 0.1),
      "SGHMC": sg.SGHMC(target, 0.1, 1.),
      "NaiveSGHMC": sg.NaiveSGHMC(target, 0.1),
      "SGNHT": sg.SGNHT(target, 0.1),
      "SGNUTS": sg.SGNUTS(target, 0.1, friction=1.),
      "SGBD": sg.SGBD(target, 0.1),
      "AMAGOLD": sg.AMAGOLD(target, 0.1, num_leapfrog_steps=2, friction=1.),
      "AmortizedBarker": sg.AmortizedBarker(target, 0.1, num_steps=2),
      "AmortizedMetropolisHastings(UncalibratedLangevinPath)":
          sg.AmortizedMetropolisHastings(langevin_path.UncalibratedLangevinPath(
              target, 0.1, num_steps=2)),
  }
  seen = {}
  for name, kernel in kernels.items():
    paths = tuple(checkpoint_header.field_paths(
        kernel.bootstrap_results(state), "results"))
    assert paths not in seen, (name, seen.get(paths))
    seen[paths] = name


def test_a_checkpoint_of_other_kernel_parameters_is_refused(tmp_path):
  target = _target()
  path, state, _ = _saved(tmp_path, sg.SGHMC(target, 0.1, 1.))
  other = sg.SGHMC(target, 0.1, 2.)
  with pytest.raises(ValueError, match=r"other parameters.*'friction': "
                     r"\(1\.0, 2\.0\).*allow_other_kernel=True"):
    sg.load_chain(path, other.bootstrap_results(state), state, kernel=other)
  # The same kernel built again (a new process) is accepted, silently.
  same = sg.SGHMC(_target(), 0.1, 1.)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    sg.load_chain(path, same.bootstrap_results(state), state, kernel=same)


def _mass(inverse_mass):
  return sg.diagonal_momentum_distribution(
      tf.ones([2, D]), batch_ndims=1,
      inverse_mass=np.full([D], inverse_mass, np.float32))


# (kernel with a setting, kernel with another, the difference named): each
# loaded into the other before, as their settings were named by type only.
SETTINGS = {
    "schedule": (
        lambda: sg.SGLD(_target(), sg.PolynomialDecay(0.1, 10., 0.55)),
        lambda: sg.SGLD(_target(), sg.PolynomialDecay(0.01, 10., 0.55)),
        r"'step_size\.a': \(0\.1, 0\.01\)"),
    "cycle": (
        lambda: sg.SGHMC(_target(), sg.CyclicalSchedule(0.1, 1000, 4), 1.),
        lambda: sg.SGHMC(_target(), sg.CyclicalSchedule(0.1, 2000, 4), 1.),
        r"'step_size\.num_steps': \(1000, 2000\)"),
    "mass": (
        lambda: sg.SGHMC(_target(), 0.1, 1., momentum_distribution=_mass(1.)),
        lambda: sg.SGHMC(_target(), 0.1, 1., momentum_distribution=_mass(4.)),
        r"'momentum_distribution\.tensors': \(\[.*1\.0.*4\.0"),
}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_a_checkpoint_of_another_schedule_or_mass_is_refused(tmp_path,
                                                             setting):
  build, build_other, named = SETTINGS[setting]
  path, state, _ = _saved(tmp_path, build())
  other = build_other()
  with pytest.raises(ValueError, match=r"other parameters.*" + named):
    sg.load_chain(path, other.bootstrap_results(state), state, kernel=other)
  # Rebuilt as saved (a new process), and from a file that names the
  # setting by its type only (written before), it loads without a word.
  same = build()
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    sg.load_chain(path, same.bootstrap_results(state), state, kernel=same)
    with np.load(path) as f:
      arrays = dict(f)
    header = json.loads(str(arrays["header"]))
    parameters = header["kernel"]["parameters"]
    for name, value in parameters.items():
      if isinstance(value, dict) and "object" in value:
        parameters[name] = value["object"]
    arrays["header"] = np.array(json.dumps(header, sort_keys=True))
    np.savez(path, **arrays)
    sg.load_chain(path, same.bootstrap_results(state), state, kernel=same)


def test_a_float64_dict_state_loads_without_a_state_template(tmp_path):
  # Refused before as float64 against a float32 template nobody passed,
  # and a dict came back as a list in key order, which a density of named
  # parts calls by position.
  log_prob = lambda w, b: -0.5 * (tf.reduce_sum(w ** 2, -1) +
                                  tf.reduce_sum((b - 3.) ** 2, -1))
  kernel = sg.StepSeeded(sg.SGHMC(target_log_prob_fn=log_prob,
                                  step_size=0.1, friction=1.), [1, 2])
  init = {"w": tf.zeros([2, D], tf.float64),
          "b": tf.ones([2, D], tf.float64)}
  def run(n, state, results):  # The last state and the final results.
    out = tfp.mcmc.sample_chain(
        n, state, kernel=kernel, previous_kernel_results=results,
        trace_fn=None, return_final_kernel_results=True, seed=[0, 0])
    return ({k: v[-1] for k, v in out.all_states.items()},
            out.final_kernel_results)
  path = str(tmp_path / "c.npz")
  sg.save_chain(path, *run(3, init, kernel.bootstrap_results(init)),
                kernel=kernel)
  state, results = sg.load_chain(path, kernel.bootstrap_results(init),
                                 kernel=kernel)
  assert sorted(state) == ["b", "w"] and state["w"].dtype == tf.float64
  whole, _ = run(6, init, kernel.bootstrap_results(init))
  for name, value in run(3, state, results)[0].items():
    np.testing.assert_array_equal(value, whole[name])


def _amagold_on(y):
  """A StepSeeded exact AMAGOLD on a linear regression with responses `y`
  (the same covariates): a target rebuilt on other data has the same
  type, and so the same kernel summary."""
  x = np.random.default_rng(0).normal(size=(200, 2)).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, batch: -0.5 * (tf.linalg.matvec(batch[0], w) -
                               batch[1]) ** 2,
      (x, y), batch_size=20, parameter_shapes=[2],
      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1))
  return sg.StepSeeded(sg.AMAGOLD(target, 0.01, num_leapfrog_steps=2,
                                  friction=0.5), seed=[7, 8])


def test_a_checkpoint_of_another_targets_data_is_refused(tmp_path):
  # AMAGOLD's results cache the full-data U(theta) its next M-H test
  # compares with. Resumed as docs/long_runs.md's loop does, load_chain
  # with kernel= and no check_kernel_results, on data regenerated between
  # sessions (same N and shapes), the checkpoint loaded without a word and
  # the chain tested against the old data's energy: on a regression of
  # N = 1,000, 0 of 1,000 proposals accepted in each of 4 chains, which
  # never moved. load_chain now compares the cached energy with the
  # kernel's target at the state; the same target rebuilt loads and
  # continues bit for bit.
  rng = np.random.default_rng(1)
  y_old = rng.normal(size=200).astype(np.float32)
  y_new = rng.normal(size=200).astype(np.float32)
  kernel, init = _amagold_on(y_old), tf.zeros([2, 2])
  state, results = init, kernel.bootstrap_results(init)
  for _ in range(3):
    state, results = kernel.one_step(state, results)
  path = str(tmp_path / "chain.npz")
  sg.save_chain(path, state, results, kernel=kernel)
  other = _amagold_on(y_new)
  with pytest.raises(ValueError, match=r"chain\.npz cannot continue with "
                     r"`kernel`.*cached `energy` \(chain \(0,\): .* in the "
                     r"results, .* now.*bootstrap_results"):
    sg.load_chain(path, other.bootstrap_results(init), init, kernel=other)
  rebuilt = _amagold_on(y_old.copy())
  loaded, loaded_results = sg.load_chain(
      path, rebuilt.bootstrap_results(init), init, kernel=rebuilt)
  expected, _ = kernel.one_step(state, results)
  got, _ = rebuilt.one_step(loaded, loaded_results)
  np.testing.assert_array_equal(got, expected)


def test_a_checkpoint_of_another_seed_is_refused_or_reseeded(tmp_path):
  target = _target()
  path, state, results = _saved(
      tmp_path, sg.StepSeeded(sg.SGLD(target, 0.1), seed=[1, 2]))
  other = sg.StepSeeded(sg.SGLD(target, 0.1), seed=[1, 3])
  with pytest.raises(ValueError, match=r"seed \[1, 2\] \(file\).*seed "
                     r"\[1, 3\].*reseed=True"):
    sg.load_chain(path, other.bootstrap_results(state), state, kernel=other)
  _, r2 = sg.load_chain(path, other.bootstrap_results(state), state,
                        kernel=other, reseed=True)
  np.testing.assert_array_equal(r2.base_seed, [1, 3])
  np.testing.assert_array_equal(r2.step, results.step)


Ordered = collections.namedtuple("Results", ["energy", "target_log_prob"])
Swapped = collections.namedtuple("Results", ["target_log_prob", "energy"])


def test_results_with_fields_in_another_order_are_refused(tmp_path):
  # Same type name, dtypes and shapes: only the field paths tell them apart.
  path = str(tmp_path / "c.npz")
  state = tf.zeros([2])
  sg.save_chain(path, state, Ordered(tf.constant([1., 2.]),
                                     tf.constant([-1., -2.])))
  with pytest.raises(ValueError, match=r"other fields.*Results\.energy.*"
                     r"Results\.target_log_prob"):
    sg.load_chain(path, Swapped(tf.zeros([2]), tf.zeros([2])), state)


def test_a_checkpoint_of_the_old_format_loads_with_a_warning(tmp_path):
  kernel = sg.SGLD(_target(), 0.1)
  state = tf.ones([2, D])
  results = kernel.bootstrap_results(state)
  path = str(tmp_path / "old.npz")
  np.savez(path, **{f"leaf_{i:05d}": np.asarray(leaf) for i, leaf in
                    enumerate(tf.nest.flatten((state, results)))})
  with pytest.warns(UserWarning, match=r"older save_chain \(format version "
                    r"1.*cannot be checked.*kernel=kernel"):
    s2, _ = sg.load_chain(path, results, state, kernel=kernel)
  np.testing.assert_array_equal(s2, state)


# --- Crafted files ------------------------------------------------------------


def _crafted_leaf(path, array, compression=zipfile.ZIP_DEFLATED):
  """A save_chain file whose state entry is replaced by `array`."""
  kernel = sg.SGLD(_target(), 0.1)
  state = tf.ones([2, D])
  results = kernel.bootstrap_results(state)
  sg.save_chain(path, state, results)
  with zipfile.ZipFile(path) as z:
    entries = {n: z.read(n) for n in z.namelist()}
  buffer = io.BytesIO()
  np.lib.format.write_array(buffer, array)
  entries["leaf_00000.npy"] = buffer.getvalue()
  with zipfile.ZipFile(path, "w", compression) as z:
    for name, data in entries.items():
      z.writestr(name, data)
  return results, state


def test_shapes_are_checked_from_the_headers_before_any_data_is_read(
    tmp_path):
  # 32 MiB of float32 zeros deflate to about 32 KiB: the template's shape [2, 3]
  # refuses the file from its .npy header, without decompressing it.
  path = str(tmp_path / "bomb.npz")
  results, state = _crafted_leaf(path, np.zeros([2, 1 << 22], np.float32))
  assert os.path.getsize(path) < 1 << 17
  tracemalloc.start()
  try:
    with pytest.raises(ValueError, match=r"shape \[2, 4194304\].*\[2, 3\]"):
      sg.load_chain(path, results, state)
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  assert peak < 4 << 20


@pytest.mark.parametrize("damage", ["compression method", "data bit",
                                    "declared size"])
def test_damaged_archives_get_our_error(tmp_path, damage):
  path = str(tmp_path / "c.npz")
  results, state = _crafted_leaf(path, np.ones([2, D], np.float32),
                                 zipfile.ZIP_STORED)
  raw = bytearray(open(path, "rb").read())
  local = raw.find(b"PK\x03\x04")
  central = raw.find(b"PK\x01\x02")
  if damage == "compression method":
    raw[local + 8] = raw[central + 10] = 99  # No such method in zipfile.
  elif damage == "data bit":
    raw[raw.find(b"\x00\x00\x80\x3f", local)] ^= 1  # In a stored 1.0.
  else:  # The entry claims more bytes than its .npy header needs.
    for at in (local + 22, central + 24):
      raw[at] += 4
  open(path, "wb").write(bytes(raw))
  with pytest.raises(ValueError, match=r"not a complete checkpoint.*"
                     r"load an earlier checkpoint"):
    sg.load_chain(path, results, state)
