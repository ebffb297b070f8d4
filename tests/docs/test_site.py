"""The documentation site builds with `mkdocs build --strict`, and its API
reference documents every public name.

A broken link, a missing page in the nav or a reference mkdocstrings cannot
resolve is a warning, and `--strict` turns it into a failure. The site is
built into a temporary folder from this checkout's docs/ and sources
(mkdocstrings reads them statically, through `paths: [.]` in mkdocs.yml).

Public names: everything in `__all__` of the top-level package, of
`tfp_sgmcmc.keras`, of the layer packages (`kernels`, `targets`, `chains`,
`dynamics`) and of each public module those name (`random`, `datasets`,
`synthetic`, `diagnostics`, `keras.evaluation`). A name counts as documented
when an API page has an anchor for the same object under any module path
(`tfp_sgmcmc.SGLD` is `tfp_sgmcmc.kernels.SGLD`).
"""

import glob
import importlib
import os
import re
import subprocess
import sys
import types

import pytest

from support import public_api

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# The packages whose namespaces the API pages must cover (support.public_api
# has the modules they list too).
PUBLIC_PACKAGES = ("tfp_sgmcmc", "tfp_sgmcmc.keras", "tfp_sgmcmc.kernels",
                   "tfp_sgmcmc.targets", "tfp_sgmcmc.chains",
                   "tfp_sgmcmc.dynamics")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
  pytest.importorskip("mkdocs")
  pytest.importorskip("mkdocstrings")
  out = tmp_path_factory.mktemp("site")
  env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
  done = subprocess.run(
      [sys.executable, "-m", "mkdocs", "build", "--strict",
       "--config-file", os.path.join(ROOT, "mkdocs.yml"), "--site-dir",
       str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
      check=False)
  assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
  return out


def public_modules():
  return public_api.public_modules(PUBLIC_PACKAGES)


def public_names(module):
  if hasattr(module, "__all__"):
    return list(module.__all__)
  return [n for n in vars(module) if not n.startswith("_")]


def documented_objects(site_dir):
  """(name, object) for each anchor of the API pages, found by import."""
  anchors = set()
  for page in glob.glob(os.path.join(site_dir, "api", "**", "*.html"),
                        recursive=True):
    with open(page, encoding="utf-8") as f:
      anchors.update(re.findall(r'id="(tfp_sgmcmc(?:\.\w+)+)"', f.read()))
  objects = []
  for anchor in anchors:
    parts = anchor.split(".")
    # The longest importable module prefix, then attributes.
    for cut in range(len(parts), 0, -1):
      try:
        value = importlib.import_module(".".join(parts[:cut]))
      except ImportError:
        continue
      try:
        for attribute in parts[cut:]:
          value = getattr(value, attribute)
      except AttributeError:
        break
      objects.append((parts[-1], value))
      break
  return objects


def test_mkdocs_build_strict_passes_and_has_every_page(site):
  for page in ("index.html", "getting_started/index.html",
               "choosing_a_sampler/index.html", "step_sizes/index.html",
               "results/index.html", "performance/index.html",
               "api/kernels/index.html"):
    assert os.path.exists(os.path.join(site, page)), page


def test_the_api_reference_documents_every_public_name(site):
  documented = documented_objects(str(site))
  documented_ids = {id(v) for _, v in documented}
  missing = []
  for module_name, module in public_modules().items():
    for name in public_names(module):
      value = getattr(module, name)
      if isinstance(value, (type, types.FunctionType, types.ModuleType)):
        found = id(value) in documented_ids
      else:
        # A constant: an anchor of the same name with an equal value (its
        # identity says nothing for small strings and numbers).
        found = any(n == name and _equal(v, value) for n, v in documented)
      if not found:
        missing.append(f"{module_name}.{name}")
  assert not missing, (
      "public names with no entry in the API reference (docs/api/*.md): "
      + ", ".join(sorted(missing)))


def _equal(a, b):
  try:
    return bool(a == b)
  except Exception:  # pylint: disable=broad-except
    return a is b
