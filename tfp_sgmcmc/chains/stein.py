"""Kernel Stein discrepancy: how far a set of draws is from the posterior.

ESS and R-hat measure mixing, not bias: chains of a kernel without a
Metropolis-Hastings test (SGLD, SGHMC, ...) can agree with each other
around the wrong answer. The kernel Stein discrepancy (Gorham & Mackey
2017, "Measuring sample quality with kernels") compares draws x_1..x_n with
the posterior p through its score s(x) = grad log p(x) = -grad U(x) alone,
so the normalising constant is never needed. With the inverse multiquadric
(IMQ) kernel k(x, y) = (c^2 + |x - y|^2)^beta, beta in (-1, 0), it
detects non-convergence (it goes to zero only if the draws converge to p):

    KSD^2 = (1 / n^2) sum_{i,j} k0(x_i, x_j),

    k0(x, y) = s(x).s(y) u^beta - 2 beta s(x).r u^(beta-1)
               + 2 beta s(y).r u^(beta-1) - 2 beta d u^(beta-1)
               - 4 beta (beta - 1) |r|^2 u^(beta-2),

with r = x - y, u = c^2 + |r|^2 and d the dimension (the Langevin Stein
operator applied to k in both arguments). For exact, independent draws
E[KSD^2] = E[k0(x, x)] / n: with c = 1, beta = -1/2 and p = N(mu, Sigma)
that is (trace(Sigma^-1) + d) / n, so KSD shrinks like 1/sqrt(n); bias
adds a term that does not shrink.

The unit kernel measures every coordinate in the units of the state, so a
posterior much wider in some directions than others (or two modes far
apart) is seen only through its narrowest scale. With a `scale` L (sds,
or a lower-triangular factor of a covariance) the KSD is that of the
standardised draws z = L^-1 x against the standardised posterior, whose
score is L^T s(x): the IMQ kernel then measures distances in posterior sds
in every direction, and for exact draws from N(mu, L L^T), E[KSD^2] = 2d /
n whatever the scales. To compare runs, measure them all with one scale.

The double sum costs n^2 d: draws beyond `max_draws` are thinned (every
k-th draw, evenly along the chain), and the sum runs over blocks of
`block_size` rows, so memory stays at block_size x n per chain.
"""

import collections
import math
import weakref

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.targets import dataset, wrappers

__all__ = ["kernel_stein_discrepancy", "ksd", "stein_kernel_sum",
           "stein_scale", "common_scale", "step_size_by_ksd", "StepSizeByKSD"]


def stein_kernel_sum(x, score, c=1., beta=-0.5, block_size=256):
  """sum_{i,j} k0(x_i, x_j) of the IMQ Stein kernel, per batch member.

  Args:
    x: draws, `[batch, n, d]` (a batch of independent sets of n draws).
    score: grad log p at each draw, the shape of `x`.
    c, beta: the IMQ kernel's parameters (beta in (-1, 0)).
    block_size: rows of the n x n sum computed at once.

  Returns:
    `[batch]`: the double sums (KSD^2 times n^2).
  """
  x = tf.convert_to_tensor(x)
  score = tf.convert_to_tensor(score, x.dtype)
  n, d = x.shape[1], x.shape[2]
  block = min(int(block_size), n)
  num_blocks = -(-n // block)
  pad = num_blocks * block - n
  # The pairwise quantities come from inner products (x_i.x_j, s_i.x_j, ...):
  # a [block, n, d] tensor of differences would not fit for large d. They
  # are translation invariant, so centring first keeps |x_i|^2 + |x_j|^2 -
  # 2 x_i.x_j from cancelling away the digits of nearby draws.
  x = x - tf.reduce_mean(x, axis=1, keepdims=True)
  sq = tf.reduce_sum(x * x, -1)                    # |x_j|^2
  sx = tf.reduce_sum(score * x, -1)                # s_j.x_j
  weight = tf.pad(tf.ones_like(sq), [[0, 0], [0, pad]])
  xp = tf.pad(x, [[0, 0], [0, pad], [0, 0]])
  sp = tf.pad(score, [[0, 0], [0, pad], [0, 0]])
  sqp = tf.pad(sq, [[0, 0], [0, pad]])
  sxp = tf.pad(sx, [[0, 0], [0, pad]])
  c2 = tf.constant(c * c, x.dtype)
  beta = tf.constant(beta, x.dtype)
  dim = tf.constant(d, x.dtype)

  def rows(start):
    # Static block sizes (tf.slice), so that XLA compiles one loop body.
    def take(t):
      return tf.slice(t, [0, start] + [0] * (t.shape.rank - 2),
                      [-1, block] + [-1] * (t.shape.rank - 2))
    xb, sb = take(xp), take(sp)
    r2 = tf.maximum(take(sqp)[..., None] + sq[:, None, :]
                    - 2. * tf.matmul(xb, x, transpose_b=True), 0.)
    u = c2 + r2
    s_i_r = take(sxp)[..., None] - tf.matmul(
        sb, x, transpose_b=True)                    # s_i.(x_i - x_j)
    s_j_r = tf.matmul(xb, score, transpose_b=True) - sx[:, None, :]
    # One power and two divisions, not three powers: the n^2 powers, not
    # the inner products, dominated the sum's time.
    power = u ** beta
    k0 = (tf.matmul(sb, score, transpose_b=True) * power
          + 2. * beta * (s_j_r - s_i_r - dim) * (power / u)
          - 4. * beta * (beta - 1.) * r2 * (power / (u * u)))
    return tf.reduce_sum(k0 * take(weight)[..., None], axis=[1, 2])

  def body(i, total):
    return i + 1, total + rows(i * block)

  _, total = tf.while_loop(lambda i, _: i < num_blocks, body,
                           (0, tf.zeros(tf.shape(x)[:1], x.dtype)))
  return total


# One traced pairwise sum per shape and kernel parameters, shared by every
# call (a grid of step sizes measures draws of one shape again and again).
_COMPILED_SUM = {jit: tf.function(stein_kernel_sum, autograph=False,
                                  jit_compile=jit) for jit in (True, False)}


def _flat_draws(draws, num_chain_dims):
  """[num_results, chains..., *event] per part -> [num_results, chains, d]."""
  parts = [tf.convert_to_tensor(p) for p in tf.nest.flatten(draws)]
  lead = parts[0].shape[:1 + num_chain_dims]
  return tf.concat([tf.reshape(p, lead.as_list()[:1] + [
      int(np.prod(lead[1:]))] + [-1]) for p in parts], -1), lead


# Compiled score functions, per target (or log density) and compilation
# mode, kept only as long as the target lives: measuring several runs of
# one model traces its score once.
_SCORES = weakref.WeakKeyDictionary()


def _score_fn(target, target_log_prob_fn, jit_compile):
  """score(states, seed): grad log p of a batch of states (a leading batch
  axis per part), compiled once per target and mode."""
  key = target_log_prob_fn if target_log_prob_fn is not None else target
  cached = _SCORES.setdefault(key, {})
  if jit_compile in cached:
    return cached[jit_compile]
  # The compiled function reaches the target through a weak reference: a
  # strong one, held by the cache's value, would keep its key (the target
  # and its data) alive for good.
  ref = weakref.ref(key)
  if target_log_prob_fn is not None:
    log_prob = lambda s, _: ref()(s)
  elif target.has_exact_energy:
    log_prob = lambda s, _: -ref().energy(s)
  else:
    # An unbiased minibatch estimate of the score: its noise adds
    # E|noise|^2 / n to KSD^2 through the diagonal terms, and the states
    # of one call share their minibatch.
    log_prob = lambda s, seed: -ref().minibatch_energy(s, seed)

  def score(state, seed):
    parts = tf.nest.flatten(state)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      lp = log_prob(tf.nest.pack_sequence_as(state, parts), seed)
    return tape.gradient(lp, parts,
                         unconnected_gradients=tf.UnconnectedGradients.ZERO)
  cached[jit_compile] = tf.function(score, autograph=False,
                                    jit_compile=jit_compile)
  return cached[jit_compile]


def _estimated_score_fn(target, score_examples, parameter_shapes,
                        jit_compile):
  """score(states, centre, seed): grad log p of a batch of states, each
  estimated from its own `score_examples` examples with control variates
  at `centre` (`ControlVariateTarget`), compiled once per target, size and
  mode."""
  cached = _SCORES.setdefault(target, {})
  key = (int(score_examples), jit_compile)
  if key in cached:
    return cached[key]
  subsampled = target.with_batch_size(int(score_examples))
  if not subsampled.independent_minibatches:
    subsampled = subsampled.with_independent_minibatches(parameter_shapes)
  del target  # The compiled function must not keep the cache's key alive.

  def score(state, centre, seed):
    estimate = wrappers.ControlVariateTarget(subsampled, centre)
    parts = tf.nest.flatten(state)
    with tf.GradientTape() as tape:
      tape.watch(parts)
      energy = estimate.minibatch_energy(
          tf.nest.pack_sequence_as(state, parts), seed)
    return [-g for g in tape.gradient(
        energy, parts, unconnected_gradients=tf.UnconnectedGradients.ZERO)]
  cached[key] = tf.function(score, autograph=False, jit_compile=jit_compile)
  return cached[key]


def stein_scale(draws, kind="diagonal", num_chain_dims=1):
  """The `scale` of a KSD, from draws: their sds ("diagonal", `[d]`) or the
  lower Cholesky factor of their covariance ("dense", `[d, d]`), a float64
  numpy array, all chains pooled, in the flattened coordinates
  `kernel_stein_discrepancy` uses (the parts of a structure concatenated in
  `tf.nest.flatten` order). `draws`: `[num_results, chains..., *event]` per
  part; `num_chain_dims`: chain axes after the draw axis.

  ```python
  scale = tfp_sgmcmc.chains.stein.stein_scale(draws, "dense")
  tfp_sgmcmc.ksd(draws, target, scale=scale)
  ```
  """
  if kind not in ("diagonal", "dense"):
    raise ValueError(f"`kind` must be 'diagonal' or 'dense'; got {kind!r}.")
  flat, _ = _flat_draws(draws, num_chain_dims)
  x = np.asarray(flat, np.float64).reshape(-1, flat.shape[-1])
  if kind == "diagonal":
    return x.std(0) + 1e-12 * np.abs(x).max()
  covariance = np.atleast_2d(np.cov(x, rowvar=False))
  # A jitter relative to the largest variance keeps the factor defined for
  # draws that do not span every direction (a chain that has not moved).
  jitter = 1e-10 * np.trace(covariance) + 1e-300
  return np.linalg.cholesky(covariance + jitter * np.eye(len(covariance)))


def common_scale(runs, kind="diagonal", num_chain_dims=1):
  """One `scale` for KSDs that compare several runs (e.g. a grid of step
  sizes): the `stein_scale` of the run whose scale has the median
  log-determinant among the runs with finite draws, so that neither a run
  that has not moved nor one blown up sets the unit. None when no run is
  finite."""
  scales = [stein_scale(r, kind, num_chain_dims) for r in runs
            if all(np.isfinite(np.asarray(p)).all()
                   for p in tf.nest.flatten(r))]
  if not scales:
    return None
  log_dets = [np.sum(np.log(np.abs(np.diagonal(np.atleast_2d(s))
                                   if s.ndim == 2 else s)))
              for s in scales]
  return scales[int(np.argsort(log_dets)[(len(scales) - 1) // 2])]


def _standardised(x, score, scale):
  """(L^-1 x, L^T s) of `[batch, n, d]` draws and scores: sds `[d]` or a
  lower-triangular `[d, d]` L."""
  scale = tf.convert_to_tensor(scale, tf.float64)
  d = int(x.shape[-1])
  if scale.shape.rank == 1 and scale.shape[0] == d:
    return x / scale, score * scale
  if scale.shape.as_list() != [d, d]:
    raise ValueError(
        f"`scale` has shape {scale.shape.as_list()}; for draws of {d} "
        f"coordinates (parts flattened and concatenated) give [{d}] sds or "
        f"a [{d}, {d}] lower Cholesky factor (see `stein_scale`).")
  flat = tf.reshape(x, [-1, d])
  z = tf.transpose(tf.linalg.triangular_solve(scale, tf.transpose(flat)))
  return (tf.reshape(z, tf.shape(x)),
          tf.reshape(tf.reshape(score, [-1, d]) @ scale, tf.shape(score)))


def kernel_stein_discrepancy(draws, target=None, *, target_log_prob_fn=None,
                             num_chain_dims=1, pool_chains=False,
                             max_draws=1000, c=1., beta=-0.5,
                             block_size=256, score_batch_size=256,
                             score_examples=None, scale=None, seed=None,
                             jit_compile=True):
  """The IMQ kernel Stein discrepancy of draws against a posterior.

  KSD^2 = (1 / n^2) sum_{i,j} k0(x_i, x_j) with the IMQ Stein kernel k0 of
  `tfp_sgmcmc.chains.stein` (c = 1, beta = -1/2 by default, as Gorham &
  Mackey 2017 and SGMCMCJax). Zero only for draws distributed as the
  posterior, in the limit; exact independent draws give E[KSD^2] of order
  d / n (for N(mu, Sigma): (trace(Sigma^-1) + d) / n), so compare chains
  at the same number of draws. It measures bias and mixing together, in
  the units of the score: use it to rank runs of one model (step sizes,
  kernels), not as an absolute threshold.

  Args:
    draws: the draws as `sample_chain` returns them:
      `[num_results, chains..., *event]` per part (any structure).
    target: a `tfp_sgmcmc` target; the score is -grad of its exact
      full-data energy where it has one (`has_exact_energy`), else of one
      minibatch energy per call (an unbiased estimate whose noise inflates
      KSD^2 by its variance / n: prefer an exact energy).
    target_log_prob_fn: instead of `target`, the log density (full data).
    num_chain_dims: chain axes after the draw axis (0 for one chain
      without a chain axis).
    pool_chains: one KSD of all chains' draws together (a scalar) instead
      of one per chain.
    max_draws: at most this many draws per KSD (per chain, or in all when
      pooled): every k-th draw along the chain is kept, k =
      ceil(num_results / max_draws) (pooled: ceil(num_results * chains /
      max_draws)). The cost is quadratic in the draws kept.
    c, beta: the IMQ kernel's parameters, c > 0 and -1 < beta < 0.
    block_size: rows of the pairwise sum at once (memory block_size x n).
    score_batch_size: draws whose score is evaluated at once.
    score_examples: None (default): the score as above. An integer m: an
      `InMemoryTarget`'s (or a `ControlVariateTarget` on one) score estimated
      for each draw from its own m examples, with control variates at the kept
      draws' mean (`ControlVariateTarget`): one full-data gradient per batch
      of draws plus m examples per draw, instead of N per draw. The estimate
      is unbiased and its noise, independent between draws, adds E|noise|^2 /
      n to KSD^2; near the centre the control variates make that noise small
      (it grows with the draws' distance from their mean).
    scale: None (default): the unit IMQ kernel. "diagonal" or "dense": the
      KSD of the draws standardised by their own sds or covariance (all
      chains pooled; `stein_scale`). An array: sds `[d]` or a lower
      Cholesky factor `[d, d]` of the flattened coordinates; give one
      array to every run being compared (KSDs under different scales are
      on different scales).
    seed: the minibatch seed of an estimated score.
    jit_compile: compile the pairwise sum with XLA, and the score unless
      the target reads a tf.data pipeline (XLA cannot compile one).

  Returns:
    A float64 tensor: the KSD per chain (the chain shape), or a scalar
    when pooled or when there is no chain axis.

  #### Example

  ```python
  # SGLD's draws after a burn-in: one KSD per chain (lower is closer).
  run = tf.function(lambda: tfp.mcmc.sample_chain(
      500, tf.zeros([4, d]), kernel=tfp_sgmcmc.SGLD(target, step_size=1e-3),
      num_burnin_steps=500, trace_fn=None, seed=[0, 1]), jit_compile=True)
  print(tfp_sgmcmc.ksd(run(), target).numpy())
  ```
  """
  if (target is None) == (target_log_prob_fn is None):
    raise ValueError("give the posterior once: `target` (a tfp_sgmcmc "
                     "target) or `target_log_prob_fn`, not both or neither.")
  if not (c > 0 and -1 < beta < 0):
    raise ValueError(f"the IMQ kernel needs c > 0 and -1 < beta < 0; got "
                     f"c={c!r}, beta={beta!r}.")
  if int(max_draws) < 2:
    raise ValueError(f"`max_draws` must be >= 2; got {max_draws!r}.")
  flat, lead = _flat_draws(draws, num_chain_dims)   # [n, chains, d]
  num_results, num_chains = int(flat.shape[0]), int(flat.shape[1])
  keep = max_draws if not pool_chains else max(
      1, int(max_draws) // num_chains)
  thin = max(1, math.ceil(num_results / keep))
  selected = tf.nest.map_structure(
      lambda p: tf.convert_to_tensor(p)[::thin], draws)
  flat = flat[::thin]
  n = int(flat.shape[0])
  # One batch of states for the score: [n * chains, *event] per part.
  states = tf.nest.map_structure(
      lambda p: tf.reshape(p, [-1] + p.shape.as_list()[
          1 + num_chain_dims:]), selected)
  if score_examples is None:
    score_fn = _score_fn(target, target_log_prob_fn, bool(jit_compile) and
                         not dataset.reads_pipelines(target))
  else:
    if isinstance(target, wrappers.ControlVariateTarget):
      target = target.base_target  # The same energy; re-centred below.
    if not hasattr(target, "with_batch_size"):
      raise ValueError(
          f"`score_examples={score_examples!r}` estimates the score from "
          "examples of an `InMemoryTarget`; got "
          f"{type(target if target is not None else target_log_prob_fn).__name__}"
          ". Drop `score_examples` for the exact score.")
    shapes = [p.shape[1:].as_list() for p in tf.nest.flatten(states)]
    estimated = _estimated_score_fn(  # `parameter_shapes` takes no dict.
        target, score_examples, shapes if tf.nest.is_nested(states) else
        shapes[0], bool(jit_compile))
    centre = tf.nest.map_structure(lambda p: tf.reduce_mean(p, 0), states)
    score_fn = lambda part, seed: estimated(part, centre, seed)
  total = n * num_chains
  batch = min(int(score_batch_size), total)
  pad = -total % batch
  # The last batch is padded with repeats of the first draw, so that one
  # trace serves every batch.
  states = tf.nest.map_structure(
      lambda p: tf.concat([p, tf.repeat(p[:1], pad, axis=0)], 0), states)
  pieces = []
  # A seed per batch of draws: no two draws share a minibatch.
  seeds = tfp.random.split_seed(tfp.random.sanitize_seed(seed),
                                (total + pad) // batch)
  for i, start in enumerate(range(0, total + pad, batch)):
    part = tf.nest.map_structure(lambda p, s=start: p[s:s + batch], states)
    pieces.append(tf.concat(
        [tf.reshape(g, [batch, -1]) for g in score_fn(part, seeds[i])], -1))
  score = tf.reshape(tf.concat(pieces, 0)[:total], flat.shape)
  x, score = tf.cast(flat, tf.float64), tf.cast(score, tf.float64)
  if scale is not None:
    if isinstance(scale, str):
      scale = stein_scale(selected, scale, num_chain_dims)
    x, score = _standardised(x, score, scale)
  if pool_chains:
    x, score = (tf.reshape(t, [1, n * num_chains, -1]) for t in (x, score))
  else:
    x, score = (tf.transpose(t, [1, 0, 2]) for t in (x, score))
  summed = _COMPILED_SUM[bool(jit_compile)](
      x, score, c=float(c), beta=float(beta), block_size=int(block_size))
  m = tf.cast(tf.shape(x)[1], tf.float64)
  value = tf.sqrt(tf.maximum(summed, 0.)) / m
  if pool_chains or num_chain_dims == 0:
    return tf.reshape(value, [])
  return tf.reshape(value, lead[1:])


ksd = kernel_stein_discrepancy


class StepSizeByKSD(collections.namedtuple(
    "StepSizeByKSD", ["step_size", "kernel", "step_sizes", "ksd",
                      "final_states", "num_gradients", "scale"])):
  """What `step_size_by_ksd` chose and from what.

  Attributes:
    step_size: the step size with the lowest KSD.
    kernel: the kernel with that step size (`kernel.copy(step_size=...)`).
    step_sizes: the grid, as given.
    ksd: per step size, the KSD of the kept draws, all chains pooled.
    final_states: per step size, the chains' last state (the chosen one's
      continues the chain).
    num_gradients: per step size, the kernel steps run (the same for every
      step size, so a lower KSD is a lower KSD per unit of compute).
    scale: the KSD's `scale` for every step size (sds, a Cholesky factor,
      or None for the unit kernel).
  """
  __slots__ = ()


def step_size_by_ksd(kernel, initial_state, step_sizes, num_steps=1000,
                     seed=None, *, target=None, target_log_prob_fn=None,
                     max_draws=500, scale="diagonal", jit_compile=True):
  """The step size of a kernel without an M-H test, chosen by KSD.

  The tuning of Coullon, South & Nemeth (2021): from one start, the kernel
  runs `num_steps` steps at each step size of the grid; the second half of
  each run is kept and its KSD (all chains pooled, thinned to `max_draws`)
  measured against the target's score. Every run costs the same, so the
  lowest KSD is the lowest per unit of compute: a step too small has not
  arrived (or mixes slowly), one too large is biased, and KSD sees both,
  where an acceptance rate or ESS sees neither bias.

  Args:
    kernel: a `tfp_sgmcmc` kernel (SGLD, SGHMC, ...) whose `step_size` is
      replaced (`kernel.copy(step_size=h)`).
    initial_state: the chains' state (leading chain axis).
    step_sizes: the grid (at least 2).
    num_steps: steps per step size; the last half is measured.
    seed: stateless seed; every step size runs on the same one.
    target, target_log_prob_fn: the posterior for the KSD (default: the
      kernel's target, its exact energy).
    max_draws: draws per KSD (`kernel_stein_discrepancy`).
    scale: the KSD's `scale`, one for the whole grid (`common_scale`: the
      median run's), so that the KSDs compare: "diagonal" (the sds; it
      ranked step sizes best of the three in `docs/stein_discrepancy.md`),
      "dense" (the covariance), None (the unit kernel), or an array.
    jit_compile: compile each run with XLA (one compilation serves the
      grid: the step size is a tensor argument).

  Returns:
    A `StepSizeByKSD`.

  #### Example

  ```python
  choice = tfp_sgmcmc.chains.stein.step_size_by_ksd(
      tfp_sgmcmc.SGLD(target, step_size=1e-3), tf.zeros([4, d]),
      step_sizes=[1e-5, 1e-4, 1e-3], num_steps=400, seed=[0, 1])
  print(choice.step_size, choice.ksd)
  ```
  """
  step_sizes = [float(h) for h in step_sizes]
  if len(step_sizes) < 2:
    raise ValueError(f"`step_sizes` needs at least 2 step sizes to choose "
                     f"from; got {step_sizes!r}.")
  if int(num_steps) < 2:
    raise ValueError(f"`num_steps` must be >= 2; got {num_steps!r}.")
  if target is None and target_log_prob_fn is None:
    target = kernel.target
  half = int(num_steps) // 2
  seed = tfp.random.sanitize_seed(seed)

  def run(h, seed):
    return tfp.mcmc.sample_chain(
        int(num_steps) - half, initial_state,
        kernel=kernel.copy(step_size=h), num_burnin_steps=half,
        trace_fn=None, seed=seed)
  run = tf.function(run, autograph=False, jit_compile=jit_compile)
  runs, finals = [], []
  for h in step_sizes:
    draws = run(tf.constant(h, tf.nest.flatten(initial_state)[0].dtype),
                seed)
    finals.append(tf.nest.map_structure(lambda d: d[-1], draws))
    # Thinned as the KSD will be, so that the grid's draws fit in memory.
    num_draws = int(np.prod(tf.nest.flatten(draws)[0].shape[:2]))
    thin = max(1, math.ceil(num_draws / int(max_draws)))
    runs.append(tf.nest.map_structure(lambda d, t=thin: d[::t], draws))
  if isinstance(scale, str):
    scale = common_scale(runs, scale)
  values = [float(kernel_stein_discrepancy(
      draws, target, target_log_prob_fn=target_log_prob_fn,
      pool_chains=True, max_draws=max_draws, scale=scale,
      jit_compile=jit_compile)) for draws in runs]
  # A run that diverged has a NaN KSD: never the choice.
  best = int(np.nanargmin(np.where(np.isfinite(values), values, np.nan)))
  return StepSizeByKSD(
      step_size=step_sizes[best],
      kernel=kernel.copy(step_size=step_sizes[best]), step_sizes=step_sizes,
      ksd=values, final_states=finals,
      num_gradients=[int(num_steps)] * len(step_sizes), scale=scale)
