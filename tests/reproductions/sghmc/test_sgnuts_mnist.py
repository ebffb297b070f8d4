"""Paper 003, Sec. 5.3 at CI size: SG-NUTS is ahead of SGHMC after one epoch.

The paper's claim: after the first epoch (no warm-up) SG-NUTS's accuracy is
higher than SGHMC's (0.87 against 0.77), because each SG-NUTS iteration runs
a whole trajectory of SGHMC steps, and an epoch costs correspondingly more
gradients. CI size: 2,000 training images, MLP 784-32-10, minibatch 100
(20 iterations per epoch), trajectories of at most 2^4 - 1 = 15 steps.

What is asserted is the claim's direction (SG-NUTS ahead) and its cost, not
the size of the gap: the gap depends on the size of the problem. Here it
was 0.10 to 0.34 over seeds 0-4; at the paper's size (784-100-10, 8,000
images, `examples/papers/sghmc/sgnuts_mnist.py --full`) it was 0.018 (0.899 against
0.881), and with the learning rate rescaled to keep eta N at the paper's,
SG-NUTS lost (0.86 against 0.90): docs/results.md says "holds partly".
"""

import os

import pytest

from support.paths import SHARED_DATA
from support.helpers import load_example

def test_sgnuts_is_ahead_of_sghmc_after_the_first_epoch():
  if not os.path.isdir(SHARED_DATA):
    pytest.skip(f"real data not found at {SHARED_DATA} (../shared/data)")
  ex = load_example("papers/sghmc/sgnuts_mnist")
  train, test = ex.load_split(SHARED_DATA, num_train=2000, num_test=1000)
  target = ex.make_target(train, batch_size=100)
  kernels = ex.make_kernels(target, learning_rate=2e-6, momentum_decay=0.01,
                            max_tree_depth=4)
  init = ex.initial_state(hidden=32, seed=0)
  sghmc = ex.run_one(kernels["SGHMC"], init, 0, 20, 4, test, [0, 0])
  nuts = ex.run_one(kernels["SG-NUTS"], init, 0, 20, 4, test, [0, 0])
  assert sghmc["finite"] and nuts["finite"]
  # One epoch: 20 SGHMC steps; 20 SG-NUTS trajectories of up to 15 steps.
  assert sghmc["gradient_evaluations"] == 20
  assert 20 < nuts["gradient_evaluations"] <= 20 * 15
  # The cost: an SG-NUTS epoch takes at least 5 times SGHMC's gradients.
  assert nuts["gradient_evaluations"] >= 5 * sghmc["gradient_evaluations"]
  # Over seeds 0-4 (initialisation and chain) the accuracy gap was 0.10 to
  # 0.34 (mean 0.23, sd 0.09). The claim is the direction: SG-NUTS ahead.
  assert nuts["accuracy"] > sghmc["accuracy"], (nuts, sghmc)
  assert sghmc["accuracy"] > 0.15  # better than chance: it is learning
