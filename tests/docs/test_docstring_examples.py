"""The examples in the public docstrings run as written.

Every fenced ```python block in the docstring of a public name (the names in
`__all__` of the public packages and modules, and their public methods) is
run in a fresh namespace that has the imports a docstring example assumes,
as TFP's examples do, and, for the examples that show a call on "your"
data and target, a small logistic regression under the names they use
(`x`, `y`, `d`, `log_likelihood`, `prior`, `target`; the API reference's
overview page states the convention):

    import numpy as np, tensorflow as tf, tensorflow_probability as tfp
    import keras, tfp_sgmcmc, tfp_sgmcmc.keras as sgk
    tfd, tfb = tfp.distributions, tfp.bijectors

Examples that need more than a few seconds on 2 cores are marked slow (run
with `python -m pytest -m slow`); one that cannot run alone (it needs
several processes or machines) is listed with its reason and skipped.
"""

import inspect
import re
import types

import pytest

from support import public_api

# The public modules (support.public_api) are walked. A name is walked once,
# under the first module that exports it: `tfp_sgmcmc.dynamics.derive_seeds`,
# say, not `tfp_sgmcmc.random.derive_seeds`.

# public name (as the test ids show it) -> why it is slow (over about 10 s
# on 2 cores): eager chains of thousands of gradients, as the docstrings
# show them.
EAGER_CHAIN = "an eager sample_chain of thousands of gradients"
SLOW = {
    "tfp_sgmcmc.AMAGOLD": EAGER_CHAIN,
    "tfp_sgmcmc.SGHMC": EAGER_CHAIN,
    "tfp_sgmcmc.SGNHT": EAGER_CHAIN,
    "tfp_sgmcmc.AmortizedMetropolisHastings": EAGER_CHAIN,
    "tfp_sgmcmc.AmortizedBarker": EAGER_CHAIN,
    "tfp_sgmcmc.SGBD": EAGER_CHAIN,
    "tfp_sgmcmc.ShardedTarget": "a chain through tf.distribute",
}
# public name -> why it cannot run as a single-process example.
DATA_FILES = "it reads a data set's files from a `data` directory"
NOT_RUNNABLE = {
    "tfp_sgmcmc.keras.enable_keras_multi_worker_fit":
        "it needs one process per worker of a TF_CONFIG cluster",
    "tfp_sgmcmc.datasets.load_statlog_australian": DATA_FILES,
    "tfp_sgmcmc.datasets.load_statlog_heart": DATA_FILES,
    "tfp_sgmcmc.datasets.load_mnist": DATA_FILES,
    "tfp_sgmcmc.datasets.load_fashion_mnist_sprite": DATA_FILES,
    "tfp_sgmcmc.datasets.load_mnist_split": DATA_FILES,
}

PRELUDE = """
import numpy as np, tensorflow as tf, tensorflow_probability as tfp
import keras, tfp_sgmcmc, tfp_sgmcmc.keras as sgk
tfd, tfb = tfp.distributions, tfp.bijectors

# "Your" data and target: a logistic regression, N = 1,024, d = 2.
d = 2
_rng = np.random.default_rng(0)
x = _rng.normal(size=(1024, d)).astype(np.float32)
y = (_rng.uniform(size=1024) < 1 / (1 + np.exp(-x @ [1., -1.]))).astype(np.int32)
def log_likelihood(w, batch):
  xb, yb = batch
  return tfd.Bernoulli(logits=tf.linalg.matvec(xb, w)).log_prob(yb)
prior = lambda w: tf.reduce_sum(tfd.Normal(0., 1.).log_prob(w), -1)
target = tfp_sgmcmc.InMemoryTarget(log_likelihood, (x, y), batch_size=32,
                                   log_prior_fn=prior)
"""


def _public_objects():
  modules = public_api.public_modules()
  seen = set()
  for module_name, module in modules.items():
    yield from _walk(module_name, module, seen)
    for exported in getattr(module, "__all__", ()):
      value = getattr(module, exported)
      if not isinstance(value, types.ModuleType):
        yield from _walk(f"{module_name}.{exported}", value, seen)


def _walk(name, value, seen):
  if id(value) in seen:
    return
  seen.add(id(value))
  yield name, value
  if inspect.isclass(value):
    for attribute, member in vars(value).items():
      if attribute.startswith("_"):
        continue
      member = getattr(member, "__func__", getattr(member, "fget", member))
      if inspect.isfunction(member):
        yield from _walk(f"{name}.{attribute}", member, seen)


def examples():
  found = []
  for name, value in _public_objects():
    doc = inspect.getdoc(value) or ""
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", doc,
                                         flags=re.S)):
      marks = []
      key = name  # The Keras samplers share the kernels' class names.
      if key in SLOW:
        marks.append(pytest.mark.slow)
      if key in NOT_RUNNABLE:
        marks.append(pytest.mark.skip(reason=NOT_RUNNABLE[key]))
      found.append(pytest.param(name, block, id=f"{name}[{i}]",
                                marks=marks))
  return found


def test_the_public_docstrings_have_examples():
  names = {p.values[0] for p in examples()}
  for name in ("tfp_sgmcmc.SGLD", "tfp_sgmcmc.InMemoryTarget",
               "tfp_sgmcmc.keras.SamplingCallback"):
    assert name in names, f"{name}'s docstring has no ```python example"


@pytest.mark.parametrize("name,block", examples())
def test_docstring_example_runs(name, block, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)  # an example may write files
  namespace = {"__name__": "__main__"}
  exec(compile(PRELUDE + block, f"{name} docstring example", "exec"),
       namespace)
