"""benchmarks/code_walk.py: the walk of AMAGOLD's path classifies what it
enters by its stated rule, and the target is resolved once per
construction."""

from support import paths


def test_code_walk_classifies_the_path_and_resolves_the_target_once():
  code_walk = paths.benchmark("code_walk")
  walk = code_walk.measure()
  assert walk["resolved"] == 1
  kinds = {key: info[3] for key, info in walk["functions"].items()}
  assert kinds[("arguments.py", "check_positive")] == "check"
  assert kinds[("kernels/checks.py", "check_step")] == "check"
  assert kinds[("dynamics/amagold.py", "leapfrog_step")] == "math"
  assert kinds[("kernels/amagold.py", "UncalibratedAMAGOLD._transition")] == (
      "math")
  assert kinds[("kernels/base.py", "StochasticGradientKernel._finish")] == (
      "plumbing")
  for kind in ("check", "math", "plumbing"):
    functions, code, whole, text = walk["totals"][kind]
    assert 0 < functions and 0 <= text < code <= whole, kind
  # Text lines only continue a string: an error message's second line is
  # one, its `raise` line is not, and the update's math has none.
  assert walk["totals"]["math"][3] == 0
  texts = {key: info[4] for key, info in walk["functions"].items()}
  assert texts[("arguments.py", "check_step_size_matches")] == 5
  assert texts[("arguments.py", "check_integer")] == 0
  assert walk["entries"]["kernels/interop.py"] >= 1
