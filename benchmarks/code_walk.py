"""The code a reader walks through on AMAGOLD's path, classified and counted.

Traces (`sys.settrace`) every `tfp_sgmcmc` function entered while

    1. constructing `AMAGOLD(InMemoryTarget(...), ...)`,
    2. `bootstrap_results` of a [4, 2] state, and
    3. one eager `one_step`,

and counts the lines of each function entered, once per function however
often it is called. A nested function, lambda or comprehension counts as
part of the outermost `def` that holds it (in its module), so every line is
counted at most once.

Each function entered is classified by this rule, in this order:

* check: a function of `targets/checks.py` or `kernels/checks.py`; a
  function of `arguments.py` other than the helpers that compute a value
  (`parameter_property`, `is_schedule`, `is_per_part`, `scale_step`); any
  function whose name starts with `check`, `_check`, `refuse`, `_refuse`,
  `_checked`; and the helpers that exist only for a refusal
  (`interop._stripped_by_metropolis_hastings`,
  `interop.without_strip_mark`).
* math: any other function of `dynamics/` (the update, the mass, the
  accept/reject test), the kernels' `_transition`, `_one_step`, and the
  amortized test's `_energies` and `_choose_results`.
* plumbing: the rest (TFP's protocol, random numbers, targets' energies,
  results bookkeeping).

Lines are counted two ways: "code" (the function's lines without its
docstring, blank lines or comment-only lines) and "whole" (def line to
last line). The ratio printed is checks / math in code lines; the whole
count is shown beside it. Of the code lines, "text" counts those that
only continue a string (a line that starts with a string literal, such as
the second and later lines of an error message): the checks' ratio is
also printed without them, their logic against the math.

It also prints how many times the target is resolved
(`interop.resolve_target` calls) and, per file, how many times the walk
enters it (a call from another file into it).

    PYTHONPATH=. python benchmarks/code_walk.py [--list]

`--list` prints every function entered with its class and line counts.
"""

import argparse
import ast
import collections
import os
import sys

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg

PACKAGE = os.path.dirname(os.path.abspath(sg.__file__))

CHECK_MODULES = ("targets/checks.py", "kernels/checks.py")
NOT_CHECKS_IN_ARGUMENTS = ("parameter_property", "is_schedule", "is_per_part",
                           "scale_step")
CHECK_PREFIXES = ("check", "_check", "refuse", "_refuse")
CHECK_HELPERS = {
    ("kernels/interop.py", "_stripped_by_metropolis_hastings"),
    ("kernels/interop.py", "without_strip_mark"),
}
MATH_METHODS = ("_transition", "_one_step", "_energies", "_choose_results")


def classify(module, name):
  if module in CHECK_MODULES or (
      module == "arguments.py" and name not in NOT_CHECKS_IN_ARGUMENTS):
    return "check"
  if name.startswith(CHECK_PREFIXES) or (module, name) in CHECK_HELPERS:
    return "check"
  if module.startswith("dynamics/") or name in MATH_METHODS:
    return "math"
  return "plumbing"


class Module:
  """The outermost functions of one source file, with their line counts."""

  def __init__(self, path):
    with open(path) as f:
      source = f.read()
    self.lines = source.splitlines()
    # (start, end, qualified name, code, whole, text)
    self.functions = []
    self._collect(ast.parse(source).body, "")

  def _collect(self, body, prefix):
    for node in body:
      if isinstance(node, ast.ClassDef):
        self._collect(node.body, prefix + node.name + ".")
      elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        code, text = self._code_lines(node, start)
        self.functions.append((start, node.end_lineno, prefix + node.name,
                               code, node.end_lineno - start + 1, text))

  def _code_lines(self, node, start):
    """(code lines, of which lines that only continue a string)."""
    doc = set()
    first = node.body[0]
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)):
      doc = set(range(first.lineno, first.end_lineno + 1))
    strings = set()
    for child in ast.walk(node):
      if isinstance(child, ast.JoinedStr) or (
          isinstance(child, ast.Constant) and isinstance(child.value, str)):
        strings.update(range(child.lineno, child.end_lineno + 1))
    count = text_count = 0
    for number in range(start, node.end_lineno + 1):
      text = self.lines[number - 1].strip()
      if number not in doc and text and not text.startswith("#"):
        count += 1
        text_count += number in strings and text.lstrip("rbf")[:1] in "'\""
    return count, text_count

  def enclosing(self, line):
    for function in self.functions:
      if function[0] <= line <= function[1]:
        return function
    return None


class Walk:
  """The calls into the package while tracing, and the functions entered."""

  def __init__(self):
    self.modules = {}
    self.functions = collections.OrderedDict()  # (module, name) -> info
    self.entries = collections.Counter()  # module -> calls from elsewhere
    self.calls = collections.Counter()  # (module, name) -> calls

  def _module(self, filename):
    path = os.path.abspath(filename)
    if not path.startswith(PACKAGE + os.sep):
      return None
    return os.path.relpath(path, PACKAGE).replace(os.sep, "/")

  def tracer(self, frame, event, arg):
    del arg
    if event != "call":
      return None
    module = self._module(frame.f_code.co_filename)
    if module is None:
      return None
    if module not in self.modules:
      self.modules[module] = Module(os.path.join(PACKAGE, module))
    function = self.modules[module].enclosing(frame.f_code.co_firstlineno)
    if function is None:  # Module-level code (an import).
      return None
    start, _, name, code, whole, text = function
    key = (module, name)
    self.calls[key] += frame.f_code.co_name == name.split(".")[-1]
    self.functions.setdefault(key, (start, code, whole,
                                    classify(module, name.split(".")[-1]),
                                    text))
    caller = frame.f_back
    if caller is None or self._module(caller.f_code.co_filename) != module:
      self.entries[module] += 1
    return None

  def run(self, fn):
    sys.settrace(self.tracer)
    try:
      return fn()
    finally:
      sys.settrace(None)


def amagold_path(walk):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(100, 2)).astype(np.float32)
  y = (x @ [1., -1.]).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: -0.5 * (b[1] - tf.einsum("nd,...d->...n", b[0], w))**2,
      (x, y), batch_size=10,
      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w**2, -1))
  state = tf.zeros([4, 2])
  kernel = walk.run(lambda: sg.AMAGOLD(target, 0.01, num_leapfrog_steps=5,
                                       friction=0.5))
  results = walk.run(lambda: kernel.bootstrap_results(state))
  walk.run(lambda: kernel.one_step(state, results, seed=[1, 2]))


def measure():
  """The walk of AMAGOLD's path: {"functions": {(module, name): (first
  line, code lines, whole lines, class, text lines)}, "totals": {class:
  [functions, code lines, whole lines, text lines]}, "resolved":
  resolve_target calls, "entries": {module: calls into it from another
  file}}."""
  walk = Walk()
  amagold_path(walk)
  totals = {kind: [0, 0, 0, 0] for kind in ("check", "math", "plumbing")}
  for _, code, whole, kind, text in walk.functions.values():
    totals[kind][0] += 1
    totals[kind][1] += code
    totals[kind][2] += whole
    totals[kind][3] += text
  return dict(functions=dict(walk.functions), totals=totals,
              resolved=walk.calls[("kernels/interop.py", "resolve_target")],
              entries=dict(walk.entries))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--list", action="store_true")
  args = parser.parse_args()
  walk = measure()
  totals = walk["totals"]
  if args.list:
    for (module, name), (start, code, whole, kind, text) in walk[
        "functions"].items():
      print(f"{kind:9s} {code:4d} {whole:4d} {text:4d}  {module}:{start} "
            f"{name}")
  print("lines on AMAGOLD's path (construct, bootstrap, one eager step):")
  print(f"{'':10s}{'functions':>10s}{'code':>7s}{'whole':>7s}{'text':>7s}")
  for kind in ("check", "math", "plumbing"):
    n, code, whole, text = totals[kind]
    print(f"{kind:10s}{n:10d}{code:7d}{whole:7d}{text:7d}")
  check, math = totals["check"], totals["math"]
  print(f"checks / math: {check[1] / max(math[1], 1):.2f} (code lines), "
        f"{check[2] / max(math[2], 1):.2f} (whole functions), "
        f"{(check[1] - check[3]) / max(math[1], 1):.2f} (code lines "
        "without the checks' text lines)")
  print(f"target resolved {walk['resolved']} time(s) in one AMAGOLD "
        "construction")
  print("files entered (calls from another file):")
  for module, count in sorted(walk["entries"].items(),
                              key=lambda kv: -kv[1]):
    print(f"  {count:4d}  {module}")


if __name__ == "__main__":
  main()
