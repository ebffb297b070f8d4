"""Chen, Ding & Carin (2015), Fig. 4 on a synthetic LDA corpus (CI size).

`examples/papers/integrators/lda_integrators.py`: topics of an LDA model sampled by SGHMC with
the Euler and the symmetric splitting integrators (friction D = 20), on a
synthetic corpus with known topics in place of the paper's Wikipedia
corpus. The claim asserted: at a large step size (h = 0.1, where hD = 2
and Euler's explicit friction step |1 - hD| reaches 1) the Euler integrator
explodes while the splitting integrator's test perplexity stays close to
its small-step value.
"""

import dataclasses

import numpy as np
import pytest

from support.helpers import load_example


@pytest.fixture(scope="module")
def ex():
  return load_example("papers/integrators/lda_integrators")


def test_euler_explodes_where_splitting_does_not(ex):
  # 300 training documents, one chain of 600 steps per step size. Seen
  # (seeds 1-2): splitting 129.0 / 129.5 at h = 0.01 and 122.7 / 125.4 at
  # h = 0.1; Euler 128.6 / 127.2 at h = 0.01 and exploded (non-finite) at
  # h = 0.1. Asserted: Euler exploded at 0.1 and not at 0.01; splitting
  # finite at both, within 15% of each other and below 150 (a uniform
  # guess: 200; the generating topics: 112.0).
  corpus = ex.make_corpus(num_train=300, num_test=100)
  config = dataclasses.replace(ex.Config(), sghmc_steps=(0.01, 0.1), reps=1,
                               num_steps=600, kept=10)
  _, res = ex.run_experiment(config, corpus=corpus,
                             methods=("splitting", "euler"),
                             log=lambda *_: None)
  split, euler = res["splitting"], res["euler"]
  assert list(euler["diverged"]) == [False, True], euler
  assert not split["diverged"].any(), split
  assert np.all(split["mcmc"] < 150.), split["mcmc"]
  assert abs(split["mcmc"][1] / split["mcmc"][0] - 1.) < 0.15, split["mcmc"]
