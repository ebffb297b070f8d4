"""The built package, not the checkout, installs and works.

Builds the wheel and sdist from a copy of the sources (offline:
`python -m build --no-isolation`), checks both with `twine check --strict`,
installs the wheel with `pip install --no-deps` into a fresh virtual
environment that sees this machine's TensorFlow (`--system-site-packages`),
and imports it from a directory outside the checkout: the module imported
must be the venv's copy, not the editable checkout.
"""

import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# What a build needs; the copy keeps the checkout free of build/ and
# *.egg-info and lets two test workers build at once.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "LICENSE",
                "tfp_sgmcmc")

SMOKE_TEST = """
import os, sys
import tfp_sgmcmc, tfp_sgmcmc.keras
venv = os.path.realpath(sys.prefix)
where = os.path.realpath(tfp_sgmcmc.__file__)
assert where.startswith(venv + os.sep), (where, venv)
import tensorflow as tf
target = tfp_sgmcmc.NoisyGradientTarget(
    lambda x: 0.5 * tf.reduce_sum(x ** 2, -1), gradient_noise_variance=0.)
kernel = tfp_sgmcmc.SGLD(target, step_size=0.1)
state = tf.zeros([2, 1])
results = kernel.bootstrap_results(state)
state, results = kernel.one_step(state, results, seed=[0, 1])
assert bool(tf.reduce_all(tf.math.is_finite(state)))
print("OK", tfp_sgmcmc.__version__, where)
"""


def _run(args, **kwargs):
  done = subprocess.run(args, capture_output=True, text=True, check=False,
                        **kwargs)
  assert done.returncode == 0, (args, done.stdout[-3000:],
                                done.stderr[-3000:])
  return done


def _version():
  with open(os.path.join(ROOT, "tfp_sgmcmc", "__init__.py")) as f:
    for line in f:
      if line.startswith("__version__"):
        return line.split("=")[1].strip().strip("\"'")
  raise AssertionError("tfp_sgmcmc/__init__.py sets no __version__")


def test_pyproject_reads_the_version_from_the_package():
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    project = tomllib.load(f)
  assert "version" in project["project"]["dynamic"]
  assert "version" not in project["project"]
  assert (project["tool"]["setuptools"]["dynamic"]["version"]
          == {"attr": "tfp_sgmcmc.__version__"})
  with open(os.path.join(ROOT, "setup.py")) as f:
    assert "version" not in f.read()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  pytest.importorskip("build")
  source = tmp_path_factory.mktemp("source")
  for name in BUILD_INPUTS:
    path = os.path.join(ROOT, name)
    if os.path.isdir(path):
      shutil.copytree(path, source / name, ignore=shutil.ignore_patterns(
          "__pycache__", "*.pyc"))
    else:
      shutil.copy(path, source / name)
  dist = tmp_path_factory.mktemp("dist")
  _run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
        str(dist), str(source)])
  wheels = sorted(dist.glob("*.whl"))
  sdists = sorted(dist.glob("*.tar.gz"))
  assert len(wheels) == 1 and len(sdists) == 1, os.listdir(dist)
  return wheels[0], sdists[0]


def test_wheel_and_sdist_pass_twine_check_and_hold_the_package(built):
  pytest.importorskip("twine")
  wheel, sdist = built
  version = _version()
  assert wheel.name == f"tfp_sgmcmc-{version}-py3-none-any.whl"
  _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel),
        str(sdist)])
  names = zipfile.ZipFile(wheel).namelist()
  for module in ("tfp_sgmcmc/__init__.py", "tfp_sgmcmc/keras/__init__.py",
                 "tfp_sgmcmc/kernels/amagold.py"):
    assert module in names, module
  assert not any(n.startswith(("tests/", "examples/", "benchmarks/"))
                 for n in names)
  assert any(n.endswith(".dist-info/LICENSE")
             or "/licenses/LICENSE" in n for n in names), names
  with tarfile.open(sdist) as tar:
    members = tar.getnames()
  for name in ("LICENSE", "README.md", "pyproject.toml"):
    assert f"tfp_sgmcmc-{version}/{name}" in members, name


def test_wheel_installs_into_a_fresh_venv_and_imports_from_there(
    built, tmp_path):
  wheel, _ = built
  venv = tmp_path / "venv"
  # Without pip inside (no ensurepip needed, and faster): this pip installs
  # into it through --python.
  _run([sys.executable, "-m", "venv", "--system-site-packages",
        "--without-pip", str(venv)])
  python = str(venv / "bin" / "python")
  # --force-reinstall: this machine's editable install has the same
  # version, and pip would otherwise call the wheel already satisfied.
  _run([sys.executable, "-m", "pip", "--python", python, "install",
        "--quiet", "--no-deps", "--no-index", "--force-reinstall",
        str(wheel)])
  outside = tmp_path / "elsewhere"
  outside.mkdir()
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  done = _run([python, "-c", SMOKE_TEST], cwd=outside, env=env)
  assert done.stdout.startswith(f"OK {_version()} "), done.stdout
