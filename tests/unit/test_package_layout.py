"""The package's layout: no import circle among tfp_sgmcmc's modules and no
module longer than MAX_LINES.

The import graph is read from the source (ast), every `import` and
`from ... import` anywhere in a module, function bodies included (an import
inside a function is still a dependency, only a late one). Its nodes are
the modules and the packages' `__init__`s.

Package `__init__`s: an explicit import of a package (`from tfp_sgmcmc
import kernels`, `from tfp_sgmcmc.keras import SamplingCallback`) is an edge
to its `__init__`, and the `__init__`'s own imports (its re-exports) are its
edges; so a module that imports a name through a package whose `__init__`
imports that module back is a circle. Not an edge: the parents Python
initialises before a submodule (`import a.b.c` runs `a/__init__` and
`a/b/__init__` first). Counting those, every re-exporting `__init__` would
form a circle with each submodule that imports a sibling by its full name,
which Python resolves by that full name without the parent's names.
"""

import ast
import pathlib

import tfp_sgmcmc

PACKAGE = "tfp_sgmcmc"
MAX_LINES = 500


def _modules(package_dir):
  """{dotted name: (path, is_package_init)} under `package_dir`."""
  root = package_dir.parent
  modules = {}
  for path in sorted(package_dir.rglob("*.py")):
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_init = parts[-1] == "__init__"
    if is_init:
      parts = parts[:-1]
    modules[".".join(parts)] = (path, is_init)
  return modules


def import_graph(package_dir):
  """{module: set of modules of the package it imports}."""
  package = package_dir.name
  modules = _modules(package_dir)

  def owner(name):  # The module a dotted name lives in.
    while name and name not in modules:
      name = name.rpartition(".")[0]
    return name or None

  graph = {}
  for name, (path, is_init) in modules.items():
    here = name.split(".") if is_init else name.split(".")[:-1]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
      if isinstance(node, ast.Import):
        targets.update(owner(alias.name) for alias in node.names)
      elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # Relative: from the importing module's package.
          parts = here[:len(here) - node.level + 1]
          base = ".".join(parts + ([base] if base else []))
        for alias in node.names:
          full = f"{base}.{alias.name}"
          # `from a.b import c`: the module a.b.c if there is one, else a
          # name of a.b.
          targets.add(full if full in modules else owner(base))
    graph[name] = {t for t in targets
                   if t and t != name and (t == package or
                                           t.startswith(package + "."))}
  return graph


def find_cycle(graph):
  """One import circle as a list [m0, m1, ..., m0], or None."""
  state = {}  # Absent: unvisited; 1: on the current path; 2: done.
  path = []

  def visit(node):
    state[node] = 1
    path.append(node)
    for nxt in sorted(graph.get(node, ())):
      if state.get(nxt) == 1:
        return path[path.index(nxt):] + [nxt]
      if nxt not in state:
        found = visit(nxt)
        if found:
          return found
    path.pop()
    state[node] = 2
    return None

  for node in sorted(graph):
    if node not in state:
      found = visit(node)
      if found:
        return found
  return None


def _package_dir():
  return pathlib.Path(tfp_sgmcmc.__file__).parent


def test_no_import_circle_among_the_package_modules():
  graph = import_graph(_package_dir())
  assert len(graph) > 50  # The whole package was read.
  cycle = find_cycle(graph)
  assert cycle is None, (
      "import circle: " + " -> ".join(cycle) + ". Move what the modules "
      "share into a module that imports neither.")


def test_the_circle_check_sees_function_level_and_init_imports(tmp_path):
  pkg = tmp_path / "pkg"
  (pkg / "sub").mkdir(parents=True)
  (pkg / "__init__.py").write_text("")
  (pkg / "a.py").write_text("from pkg.sub import b\n")
  (pkg / "sub" / "__init__.py").write_text("")
  (pkg / "sub" / "b.py").write_text(
      "def f():\n  from pkg import a\n  return a\n")
  assert find_cycle(import_graph(pkg)) == ["pkg.a", "pkg.sub.b", "pkg.a"]
  # Through a re-exporting __init__: a imports a name of pkg.sub, whose
  # __init__ imports b, which imports a.
  (pkg / "a.py").write_text("from pkg.sub import g\n")
  (pkg / "sub" / "__init__.py").write_text("from pkg.sub.b import f as g\n")
  assert find_cycle(import_graph(pkg)) == [
      "pkg.a", "pkg.sub", "pkg.sub.b", "pkg.a"]
  # The parent packages Python initialises first are not edges.
  (pkg / "sub" / "b.py").write_text("from pkg import a\n")
  (pkg / "a.py").write_text("X = 1\n")
  (pkg / "__init__.py").write_text("from pkg.sub import b\n")
  assert find_cycle(import_graph(pkg)) is None


def test_no_module_is_longer_than_max_lines():
  long = {}
  for path in sorted(_package_dir().rglob("*.py")):
    with open(path, encoding="utf-8") as f:
      lines = sum(1 for _ in f)
    if lines > MAX_LINES:
      long[str(path.relative_to(_package_dir().parent))] = lines
  assert not long, (
      f"modules longer than {MAX_LINES} lines: {long}; split each by job "
      "(keep every public name importable from where it is).")
