"""The Keras adapter's modules (tfp_sgmcmc/keras/) stay small, one job each,
and every attribute a class sets is created in an `__init__`.
"""

import tfp_sgmcmc.keras as sgk


def test_keras_modules_are_small_and_create_attributes_in_init():
  # One job per module: none over about 400 lines, and every attribute a
  # class sets is created in an `__init__` of the adapter (no state that
  # appears later, half-initialised).
  import ast  # pylint: disable=import-outside-toplevel
  import pathlib  # pylint: disable=import-outside-toplevel
  folder = pathlib.Path(sgk.__file__).parent
  trees = {str(p.relative_to(folder)): ast.parse(p.read_text())
           for p in folder.rglob("*.py")}
  assert len(trees) > 20, sorted(trees)  # The subpackages are read too.
  for name, tree in trees.items():
    lines = len((folder / name).read_text().splitlines())
    assert lines <= 420, f"{name}: {lines} lines"

  def self_targets(node):
    for n in ast.walk(node):
      targets = (n.targets if isinstance(n, ast.Assign) else
                 [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign))
                 else [])
      for t in targets:
        for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
          if (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name)
              and e.value.id == "self"):
            yield e.attr
  methods = [(c.name, m) for tree in trees.values() for c in ast.walk(tree)
             if isinstance(c, ast.ClassDef) for m in c.body
             if isinstance(m, ast.FunctionDef)]
  created = {a for _, m in methods if m.name == "__init__"
             for a in self_targets(m)}
  late = sorted(f"{c}.{m.name}: self.{a}" for c, m in methods
                if m.name != "__init__" for a in self_targets(m)
                if a not in created)
  assert not late, late
