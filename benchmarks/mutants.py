"""Which tests catch a wrong sampler: each mutant changes one constant of the
shared update code in a scratch copy of the package, and the test files
that guard it are run against that copy.

A mutant is caught when at least one of its tests fails. Every mutant's
tests pass on the package as it is (`--baseline` runs them all once,
unchanged, to show it), so each failure is the mutant's doing. Some
mutants still sample the right law (AMAGOLD with twice the friction is
AMAGOLD at another friction; SGNHT's thermostat absorbs extra noise):
no moment test can catch those, and their names say so.

    python benchmarks/mutants.py                 # all, about 10 minutes
    python benchmarks/mutants.py --only "SGLD noise variance x1.1"
    python benchmarks/mutants.py --baseline      # the tests, unchanged
    python benchmarks/mutants.py --check         # each change still applies

The tests run are CI's selection; `--slow` adds those CI leaves out (the
Keras moment tests among them). Writes benchmarks/results/mutants.json
(mutants_slow.json, mutants_baseline.json; not with --only or --check) and
prints one markdown row per mutant.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

KERAS_MOMENTS = "tests/keras/test_posterior_moments.py"
AMAGOLD_TESTS = (KERAS_MOMENTS, "tests/statistical/test_amagold_exactness.py",
                 "tests/unit/kernels/test_amagold.py")
SGNHT_TESTS = (KERAS_MOMENTS, "tests/statistical/test_sgnht_thermostat.py")
SGHMC_TESTS = (KERAS_MOMENTS,
               "tests/statistical/test_sghmc_stationary_moments.py",
               "tests/unit/kernels/test_sghmc.py")

# (name, file, code as it is, code of the mutant, test files run).
MUTANTS = [
    ("SGLD noise variance x1.1", "tfp_sgmcmc/dynamics/langevin.py",
     "tf.sqrt(2. * h * t) * xi", "tf.sqrt(2.2 * h * t) * xi",
     ("tests/statistical/test_sgld_stationary_moments.py",
      "tests/statistical/test_linear_regression_posterior.py",
      KERAS_MOMENTS)),
    ("pSGLD noise variance x2", "tfp_sgmcmc/dynamics/langevin.py",
     "tf.sqrt(2. * h * t * p)", "tf.sqrt(4. * h * t * p)",
     (KERAS_MOMENTS, "tests/statistical/test_psgld_preconditioning.py")),
    ("SGNHT thermostat's target temperature x2",
     "tfp_sgmcmc/dynamics/thermostat.py",
     "new_thermostat = thermostat + h * (sq / tf.cast(dim, dtype) - t)",
     "new_thermostat = thermostat + h * (sq / tf.cast(dim, dtype) - 2. * t)",
     SGNHT_TESTS),
    ("SGNHT noise variance x2 (the thermostat absorbs it, as it absorbs "
     "unknown gradient noise: still right)",
     "tfp_sgmcmc/dynamics/thermostat.py",
     "scale = tf.sqrt(2. * a * h * t)", "scale = tf.sqrt(4. * a * h * t)",
     SGNHT_TESTS),
    ("SGHMC (Euler) friction x2 in the drag only",
     "tfp_sgmcmc/dynamics/hamiltonian.py",
     "return r - h * g - h * c * r + scale * xi",
     "return r - h * g - 2. * h * c * r + scale * xi", SGHMC_TESTS),
    ("SGHMC (splitting) noise variance x1.1",
     "tfp_sgmcmc/dynamics/hamiltonian.py",
     "decay * r - h * g + tf.sqrt(variance) * xi",
     "decay * r - h * g + tf.sqrt(1.1 * variance) * xi", SGHMC_TESTS),
    ("AMAGOLD energy accumulator x0.5", "tfp_sgmcmc/dynamics/amagold.py",
     "lambda g, eps: 0.5 * as_dtype", "lambda g, eps: 0.25 * as_dtype",
     AMAGOLD_TESTS),
    ("AMAGOLD noise variance x1.1", "tfp_sgmcmc/dynamics/amagold.py",
     "eta = tf.sqrt(4. * a) * sigma * xi",
     "eta = tf.sqrt(4.4 * a) * sigma * xi", AMAGOLD_TESTS),
    ("AMAGOLD friction x2 (its noise doubles with it: still exact)",
     "tfp_sgmcmc/dynamics/amagold.py",
     "a = eps * as_dtype(friction, r.dtype)",
     "a = 2. * eps * as_dtype(friction, r.dtype)", AMAGOLD_TESTS),
    ("N/n off by 10% (the minibatch energy's N)",
     "tfp_sgmcmc/targets/energy.py",
     "n = tf.cast(num_examples, mean_nll.dtype)",
     "n = 1.1 * tf.cast(num_examples, mean_nll.dtype)",
     ("tests/unit/targets/test_in_memory.py",
      "tests/statistical/test_linear_regression_posterior.py",
      "tests/statistical/test_amagold_exactness.py", KERAS_MOMENTS)),
]


def mutated_text(mutant):
  """The text of the mutant's file with its change made; raises unless the
  code to change occurs exactly once there and its test files exist (so a
  change to the package that moves it is noticed, not silently skipped)."""
  name, path, old, new, tests = mutant
  with open(os.path.join(ROOT, path)) as f:
    text = f.read()
  count = text.count(old)
  if count != 1:
    raise ValueError(f"mutant {name!r}: {old!r} occurs {count} times in "
                     f"{path}, not once; update MUTANTS to the code.")
  for test in tests:
    if not os.path.exists(os.path.join(ROOT, test)):
      raise ValueError(f"mutant {name!r}: no test file {test}.")
  return text.replace(old, new)


def scratch_copy():
  """A temporary copy of the package, its tests and their configuration."""
  where = tempfile.mkdtemp(prefix="mutant_")
  ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
  for name in ("tfp_sgmcmc", "tests"):
    shutil.copytree(os.path.join(ROOT, name), os.path.join(where, name),
                    ignore=ignore)
  shutil.copy(os.path.join(ROOT, "pytest.ini"), where)
  return where


def run_tests(where, tests, slow=False):
  """(failed test ids, pytest's summary line) of `tests` run in `where`,
  with the copy's package first on the path: CI's selection, or with
  `slow` also the tests CI leaves out."""
  env = dict(os.environ, PYTHONPATH=where)
  seen = subprocess.run(
      [sys.executable, "-c", "import tfp_sgmcmc; print(tfp_sgmcmc.__file__)"],
      env=env, cwd=where, capture_output=True, text=True, check=True)
  if not seen.stdout.strip().startswith(where):
    raise RuntimeError(f"the copy is not the package imported: "
                       f"{seen.stdout.strip()}")
  out = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p",
       "no:cacheprovider", "-rf", "--durations=0",
       *(["-m", "slow or not slow"] if slow else []), *tests],
      env=env, cwd=where, capture_output=True, text=True).stdout
  failed = sorted(set(re.findall(r"^FAILED (\S+)", out, flags=re.M)))
  summary = out.strip().splitlines()[-1] if out.strip() else "(no output)"
  return failed, summary


def run_mutant(mutant, slow=False):
  """The mutant's tests run on a copy of the package with its change (with
  none for the baseline, whose `path` is None)."""
  name, path, old, new, tests = mutant
  where = scratch_copy()
  try:
    if path is not None:
      with open(os.path.join(where, path), "w") as f:
        f.write(mutated_text(mutant))
    failed, summary = run_tests(where, tests, slow)
  finally:
    shutil.rmtree(where, ignore_errors=True)
  return dict(name=name, file=path, code=old, mutant=new, tests=list(tests),
              failed=failed, caught=bool(failed), summary=summary)


def baseline(mutants):
  """No change: every test file of `mutants`, run once."""
  tests = sorted({t for m in mutants for t in m[4]})
  return ("the package as it is (every mutant's tests)", None, None, None,
          tests)


def row(result):
  failed = result["failed"]
  shown = ", ".join(f"`{f}`" for f in failed[:4]) + (
      f" and {len(failed) - 4} more" if len(failed) > 4 else "")
  verdict = ("all pass" if result["file"] is None and not failed else
             "caught" if failed else "not caught")
  return (f"| {result['name']} (`{result['file']}`) | "
          f"{verdict}: {len(failed)} failed "
          f"({result['summary']}) | {shown or '-'} |")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--only", help="run the mutant of this name only")
  parser.add_argument("--baseline", action="store_true",
                      help="run every mutant's tests on the package as it is")
  parser.add_argument("--slow", action="store_true",
                      help="also the slow tests CI leaves out")
  parser.add_argument("--check", action="store_true",
                      help="only check that every mutant still applies")
  args = parser.parse_args()
  chosen = [m for m in MUTANTS if args.only in (None, m[0])]
  if not chosen:
    raise SystemExit(f"no mutant named {args.only!r}")
  for mutant in chosen:
    mutated_text(mutant)
  if args.check:
    print(f"{len(chosen)} mutants apply")
    return
  print("| mutant | result | failing tests |\n|---|---|---|")
  results = []
  for mutant in [baseline(chosen)] if args.baseline else chosen:
    results.append(run_mutant(mutant, args.slow))
    print(row(results[-1]), flush=True)
  if args.only is None:
    name = ("mutants_baseline" if args.baseline else "mutants") + (
        "_slow.json" if args.slow else ".json")
    with open(os.path.join(HERE, "results", name), "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
