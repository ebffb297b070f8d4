"""SG-NUTS on noisy Gaussians, as its tests run it: `gaussian(scales)` is
N(0, diag(scales^2)) with grad U~ = grad U + N(0, noise I), and `run` samples
it with 8 chains from 0 (100 burn-in steps, tree depth at most 8), returning
the draws, the tree depths and the gradient evaluations per step."""

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from support.helpers import sample


def gaussian(scales, noise=1.):
  scales = np.asarray(scales, np.float32)
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x / scales) ** 2, -1),
      gradient_noise_variance=noise)


def run(target, friction, num_results=2000, eps=0.1, seed=(1, 2)):
  kernel = sg.SGNUTS(target, eps, friction=friction, max_tree_depth=8)
  draws, (depth, grads) = sample(
      kernel, tf.zeros([8, 2]), num_results, seed=list(seed),
      num_burnin_steps=100,
      trace_fn=lambda _, r: (r.tree_depth, r.num_gradient_evaluations))
  return np.asarray(draws), np.asarray(depth), np.asarray(grads)
