"""Chen, Ding & Carin (2015), Figures 1-3: SG-MCMC integrators and step sizes.

The Gaussian model x_i ~ N(theta, 1), theta ~ N(0, 1), N = 1000 points,
minibatch 10, test function phi(theta) = theta^2.

Fig. 1 (`--figure 1`, the default). For each step size h, SGHMC with the
Euler integrator and with the symmetric splitting (ABOBA) integrator
(friction D = 10, as the paper's grid) estimates E[theta^2]; the bias
|estimate - truth| is plotted against h. The paper's claim: the Euler
integrator has larger bias and explodes at large step sizes; the splitting
integrator does not.

Fig. 2 (`--figure 2`). The bias and MSE, over independent runs, of the
step-size-weighted average phi~_L = sum h_l phi(theta_l) / sum h_l against
the number of iterations L, for SGHMC with decreasing step sizes
h_l = 0.045 l^-alpha (SGHMC-D) and fixed ones h = 0.033 L^-alpha (SGHMC-F),
alpha in {0.1, 1/5, 1/3, 1/2}, splitting and Euler integrators. The theory:
bias-optimal alpha = 1/(K+1), MSE-optimal 1/(2K+1) for a K-th order
integrator, with rates L^-K/(K+1) and L^-2K/(2K+1).

Fig. 3 (`--figure 3`). SGHMC (splitting, alpha = 1/3) against SGLD (alpha =
1/2), constants grid-searched at L = 500 as in the paper, bias and MSE
against L, fixed and decreasing step sizes.

Here the minibatch gradient is (N + 1) theta - (N / n) sum_batch x_i, whose
noise does not depend on theta, so each chain is a linear recursion: its
exact stationary E[theta^2] (Lyapunov equation; the "predicted" columns of
Fig. 1) and the exact bias of phi~_L at every L (a moment recursion; the
dotted curves of Figs. 2-3, and the same with full-data gradients) are
computed too, against which the sampled values can be checked.

    python examples/papers/integrators/integrators.py [--figure {1,2,3,all}] \
        [--out DIR] [--full]

Fig. 1 default: 8 chains x 1e5 steps per step size; --full: the paper's
L = 1e6 steps. Figs. 2-3 default: 200 runs to L = 1e4; --full: L = 1e5 and
50 runs per grid setting; --max-steps, --runs and --grid-runs override.
"""
import argparse
import json
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402

warnings.filterwarnings("ignore", message=".*is not calibrated.*")

N, BATCH, FRICTION = 1000, 10, 10.
STEP_SIZES = [0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06]


def make_problem(seed=0):
  rng = np.random.default_rng(seed)
  theta_true = rng.normal()
  x = (theta_true + rng.normal(size=N)).astype(np.float32)
  post_var = 1. / (N + 1)
  post_mean = x.sum() * post_var
  target = sg.InMemoryTarget(
      lambda w, b: -0.5 * (b - w) ** 2,  # w: [..., 1] against b: [n].
      x, BATCH, log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1))
  return x, target, post_mean, post_var


def predicted_second_moment(x, post_mean, h, integrator):
  """Exact stationary E[theta^2] of the discretised chain."""
  precision = N + 1.
  noise = N ** 2 / BATCH * np.var(x.astype(np.float64))
  eye, zero = np.eye(1), np.zeros((1, 1))
  if integrator == "euler":
    a = np.block([[eye, h * eye], [zero, eye]]) @ np.block(
        [[eye, zero], [-h * precision * eye, (1 - h * FRICTION) * eye]])
    g = np.block([[eye, h * eye], [zero, eye]]) @ np.block([[zero], [eye]])
  else:
    half = np.block([[eye, 0.5 * h * eye], [zero, eye]])
    decay = np.block([[eye, zero], [zero, np.exp(-0.5 * FRICTION * h) * eye]])
    kick = np.block([[eye, zero], [-h * precision * eye, eye]])
    a = half @ decay @ kick @ decay @ half
    g = half @ decay @ np.block([[zero], [eye]])
  if np.max(np.abs(np.linalg.eigvals(a))) >= 1:
    return np.inf
  q = (h * h * noise + 2 * FRICTION * h) * (g @ g.T)
  var = scipy.linalg.solve_discrete_lyapunov(a, q)[0, 0]
  return post_mean ** 2 + var  # The recursion has no mean bias.


def run(target, h, integrator, num_steps, chains, seed):
  kernel = sg.SGHMC(target, h, FRICTION, integrator=integrator)

  # Second moment from the running mean and variance of theta.
  moments = sg.sample_moments(kernel, tf.zeros([chains, 1]), num_steps,
                              seed=seed, num_burnin_steps=1000)
  mean = np.asarray(moments.mean, np.float64)
  var = np.asarray(moments.variance, np.float64)
  second = mean ** 2 + var
  diverged = np.asarray(moments.final_kernel_results.diverged)
  finite = np.isfinite(second[:, 0]) & ~diverged & (np.abs(second[:, 0]) <
                                                     1e6)
  return (float(np.mean(second[finite, 0])) if finite.all() else np.inf,
          bool((~finite).any()))


def figure1(args):
  """Fig. 1: stationary bias of Euler and splitting SGHMC against h."""
  num_steps = args.steps or (1_000_000 if args.full else 100_000)
  os.makedirs(args.out, exist_ok=True)
  x, target, post_mean, post_var = make_problem()
  truth = post_mean ** 2 + post_var
  rows = []
  print(f"E[theta^2] = {truth:.5f}; SGHMC friction D = {FRICTION}, "
        f"8 chains x {num_steps} steps per step size")
  print(f"{'h':>6s} {'Euler bias':>11s} {'(pred.)':>9s} "
        f"{'split bias':>11s} {'(pred.)':>9s}")
  for i, h in enumerate(STEP_SIZES):
    row = {"step_size": h}
    for integrator in ("euler", "splitting"):
      second, exploded = run(target, h, integrator, num_steps, 8, [i, 7])
      row[integrator] = abs(second - truth) if np.isfinite(second) else np.inf
      row[integrator + "_exploded"] = exploded
      row[integrator + "_predicted"] = abs(
          predicted_second_moment(x, post_mean, h, integrator) - truth)
    rows.append(row)
    fmt = lambda v: "exploded" if not np.isfinite(v) else f"{v:.2e}"
    print(f"{h:6.3f} {fmt(row['euler']):>11s} "
          f"{fmt(row['euler_predicted']):>9s} {fmt(row['splitting']):>11s} "
          f"{fmt(row['splitting_predicted']):>9s}", flush=True)

  fig, ax = plt.subplots(figsize=(6, 4))
  for integrator, style in (("euler", "o-"), ("splitting", "s-")):
    hs = [r["step_size"] for r in rows if np.isfinite(r[integrator])]
    bias = [r[integrator] for r in rows if np.isfinite(r[integrator])]
    ax.semilogy(hs, bias, style, label=f"SGHMC {integrator}")
    boom = [r["step_size"] for r in rows if not np.isfinite(r[integrator])]
    if boom:
      ax.scatter(boom, [max(bias) * 3] * len(boom), marker="x", color="r",
                 label=f"{integrator} exploded")
  ax.set_xlabel("step size h")
  ax.set_ylabel("bias of E[theta^2]")
  ax.set_title("Euler vs splitting (Chen, Ding & Carin 2015, Fig. 1)")
  ax.legend()
  fig.tight_layout()
  path = os.path.join(args.out, "fig1_bias_vs_step_size.png")
  fig.savefig(path, dpi=120)
  with open(os.path.join(args.out, "table.md"), "w") as f:
    f.write("| h | Euler bias | Euler predicted | splitting bias | "
            "splitting predicted |\n|---|---|---|---|---|\n")
    for r in rows:
      f.write(f"| {r['step_size']} | {r['euler']:.3g} | "
              f"{r['euler_predicted']:.3g} | {r['splitting']:.3g} | "
              f"{r['splitting_predicted']:.3g} |\n")
  print(f"wrote {path}")
  return rows, truth


# ---------------------------------------------------------------------------
# Figures 2 and 3: the step-size-weighted sample average against the number of
# iterations L, its bias and MSE over many independent runs.

# Fig. 2 (Sec. 5): SGHMC-D uses h_l = 0.045 l^-alpha, SGHMC-F h = 0.033 L^-alpha
# (the paper's grid-searched prefactors). The alphas: the theory's optima for
# the splitting integrator (1/3 bias, 1/5 MSE) and for Euler (1/2 bias, 1/3
# MSE), and 0.1, below all of them.
FIG2_ALPHAS = (0.1, 0.2, 1. / 3., 0.5)
FIG2_DECREASING_SCALE, FIG2_FIXED_SCALE = 0.045, 0.033
# Fig. 3: constants grid-searched at L = 500 (fixed step sizes C from 1e-3 to
# 0.5 by 0.002; initial step sizes of the decreasing runs from 0.003 to 0.05 by
# 0.002; SGHMC's D in {10, 20, 30}); alpha at each method's bias-optimal rate.
FIG3_SELECT_AT = 500
FIG3_FIXED_GRID = np.arange(0.001, 0.5, 0.002)
FIG3_DECREASING_GRID = np.arange(0.003, 0.05 + 1e-9, 0.002)
FIG3_FRICTIONS = (10., 20., 30.)
FIG3_SGLD_EXTENDED_GRID = np.arange(0.0001, 0.003, 0.0001)
# Integrator order K: bias-optimal alpha = 1/(K+1), MSE-optimal 1/(2K+1).
ORDER = {"splitting": 2, "euler": 1, "sgld": 1}
LABEL = {"splitting": "SGHMC splitting", "euler": "SGHMC Euler",
         "sgld": "SGLD (Euler)"}


def theory_slopes(order, alpha):
  """Log-log slopes of the paper's bounds for h ~ L^-alpha (Thms 2, 3, 5).

  Bias O(L^(alpha-1) + L^(-K alpha)); MSE O(L^-1 + L^(alpha-1) +
  L^(-2 K alpha)): the slowest term sets the slope.
  """
  return (-min(1. - alpha, order * alpha),
          -min(1., 1. - alpha, 2. * order * alpha))


def checkpoint_grid(max_steps, first=10):
  """1-2-5 grid of iteration counts from `first` to `max_steps`."""
  grid, decade = [], 1
  while decade <= max_steps:
    grid += [m * decade for m in (1, 2, 5)
             if first <= m * decade <= max_steps]
    decade *= 10
  if grid[-1] != max_steps:
    grid.append(max_steps)
  return grid


def gaussian_model_target(x):
  """The Gaussian model's target with one minibatch per chain.

  By default `sg.InMemoryTarget` gives all chains of a step the same
  minibatch (common random numbers), so their gradient noise would be one
  realisation shared by every chain, and an average over chains would not be
  an average over independent runs. The paper's bias and MSE are averages
  over 200 runs, so each chain draws its own n indices
  (`independent_minibatches=True`).
  """
  return sg.InMemoryTarget(
      lambda w, b: -0.5 * (b - w) ** 2, x, BATCH,
      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1),
      parameter_shapes=[1], independent_minibatches=True)


class PerChainPolynomialDecay:
  """h_l = a_c l^(-gamma_c) (l = 1, 2, ...), one (a, gamma) per chain.

  `sg.PolynomialDecay(a, 0., gamma)` for every chain c at once, so that one
  compiled loop runs several step-size sequences side by side; gamma_c = 0 is
  the constant step size a_c. The values live in variables, so a new
  experiment assigns them without recompiling.
  """

  def __init__(self, num_chains):
    self.a = tf.Variable(tf.ones([num_chains, 1]), trainable=False)
    self.gamma = tf.Variable(tf.zeros([num_chains, 1]), trainable=False)

  def __call__(self, step_count, dtype=tf.float32):
    l = tf.cast(step_count, dtype) + 1.
    return tf.cast(self.a, dtype) * tf.pow(l, -tf.cast(self.gamma, dtype))


class WeightedAverageRunner:
  """Independent chains of one method, recording phi~_L at checkpoints.

  phi~_L = sum_{l<=L} h_l phi(theta_l) / sum_{l<=L} h_l with phi = theta^2
  (Sec. 3.3; with a constant step size it is the plain sample average). The
  sums are streamed in float64 inside one XLA-compiled loop, so a million
  steps need no memory for the draws. Every chain has its own step-size
  sequence and friction (variables), so a grid of settings x runs is one
  batch of chains, and the loop compiles once per runner.
  """

  def __init__(self, x, method, num_chains):
    self.method, self.num_chains = method, int(num_chains)
    self.target = gaussian_model_target(x)
    self.schedule = PerChainPolynomialDecay(num_chains)
    self.friction = tf.Variable(tf.fill([num_chains, 1], FRICTION),
                                trainable=False)
    if method == "sgld":
      self.kernel = sg.SGLD(self.target, self.schedule)
    else:
      self.kernel = sg.SGHMC(self.target, self.schedule, self.friction,
                             integrator=method)
    self._advance = tf.function(self._advance_fn, jit_compile=True,
                                autograph=False)

  def _advance_fn(self, state, results, sum_h, sum_h_phi, start, num_steps,
                  seed):
    def body(i, state, results, sum_h, sum_h_phi):
      # Each step's seed depends only on its index: checkpoints do not change
      # the chain.
      step_seed = tf.random.experimental.stateless_fold_in(seed, start + i)
      state, results = self.kernel.one_step(state, results, seed=step_seed)
      h = tf.cast(results.step_size, tf.float64)
      return (i + 1, state, results, sum_h + h,
              sum_h_phi + h * tf.cast(state, tf.float64) ** 2)
    _, state, results, sum_h, sum_h_phi = tf.while_loop(
        lambda i, *_: i < num_steps, body,
        (tf.constant(0), state, results, sum_h, sum_h_phi))
    return state, results, sum_h, sum_h_phi

  def run(self, a, gamma, checkpoints, seed, friction=FRICTION):
    """phi~ at each checkpoint, [len(checkpoints), num_chains], and per-chain
    divergence flags. a, gamma, friction: scalars or one value per chain."""
    shape = [self.num_chains, 1]
    self.schedule.a.assign(np.broadcast_to(a, shape[:1])[:, None])
    self.schedule.gamma.assign(np.broadcast_to(gamma, shape[:1])[:, None])
    self.friction.assign(np.broadcast_to(friction, shape[:1])[:, None])
    init_seed, run_seed = tfp.random.split_seed(seed)
    # Random initialisations (the paper's 200 runs): draws from the prior.
    state = tf.random.stateless_normal(shape, seed=init_seed)
    results = self.kernel.bootstrap_results(state)
    sum_h = tf.zeros(shape, tf.float64)
    sum_h_phi = tf.zeros(shape, tf.float64)
    estimates, done = [], 0
    for num_steps in checkpoints:
      state, results, sum_h, sum_h_phi = self._advance(
          state, results, sum_h, sum_h_phi, tf.constant(done),
          tf.constant(num_steps - done), run_seed)
      done = num_steps
      estimates.append((sum_h_phi / sum_h).numpy()[:, 0])
    diverged = results.diverged.numpy().reshape(-1)
    return np.array(estimates), diverged


def error_summary(estimates, truth):
  """Bias |E phi~ - phi-bar| and MSE E (phi~ - phi-bar)^2 over the last axis
  (runs), with standard errors; non-finite where any run diverged."""
  err = np.asarray(estimates, np.float64) - truth
  runs = err.shape[-1]
  bias = np.abs(err.mean(-1))
  bias_se = err.std(-1, ddof=1) / np.sqrt(runs)
  mse = (err ** 2).mean(-1)
  mse_se = (err ** 2).std(-1, ddof=1) / np.sqrt(runs)
  bad = ~np.isfinite(err).all(-1) | (np.abs(err) > 1e6).any(-1)
  for a in (bias, bias_se, mse, mse_se):
    a[bad] = np.inf
  return bias, bias_se, mse, mse_se


def fitted_slope(steps, values, last_decades=1.):
  """Least-squares log-log slope over the last `last_decades` of steps."""
  steps, values = np.asarray(steps, float), np.asarray(values, float)
  keep = (steps >= steps[-1] / 10 ** last_decades) & np.isfinite(values) & (
      values > 0)
  if keep.sum() < 2:
    return np.nan
  return float(np.polyfit(np.log(steps[keep]), np.log(values[keep]), 1)[0])


def _one_step_matrices(method, h, friction, noise_variance):
  """z' = A z + g e for one step of size h (a tensor over settings), with z =
  (theta - posterior mean, r) and e the step's momentum noise (position noise
  for SGLD) of variance q: minibatch gradient noise h^2 V plus the injected
  2 D h (2 h for SGLD)."""
  precision = tf.constant(N + 1., tf.float64)
  one, zero = tf.ones_like(h), tf.zeros_like(h)
  def mat(a, b, c, d):
    return tf.stack([tf.stack([a, b], -1), tf.stack([c, d], -1)], -2)
  if method == "sgld":
    return ((1. - h * precision)[..., None, None], one[..., None],
            h * h * noise_variance + 2. * h)
  q = h * h * noise_variance + 2. * friction * h
  if method == "euler":
    drift = mat(one, h, zero, one)
    a = drift @ mat(one, zero, -h * precision, 1. - h * friction)
    g = drift[..., :, 1]
  else:
    half = mat(one, 0.5 * h, zero, one)
    decay = mat(one, zero, zero, tf.exp(-0.5 * friction * h))
    a = half @ decay @ mat(one, zero, -h * precision, one) @ decay @ half
    g = (half @ decay)[..., :, 1]
  return a, g, q


def predicted_bias_traces(x, post_mean, method, a, gamma, checkpoints,
                          friction=FRICTION, gradient_noise=True):
  """Exact E[phi~_L] - phi-bar at each checkpoint, for step sizes
  h_l = a l^-gamma (a, gamma: one value per setting).

  The minibatch gradient is (N + 1) theta - sum x + e with e independent of
  theta (variance V = N^2 / n Var(x), or 0 with `gradient_noise=False`, the
  full-data gradient), so the chain's mean and covariance follow a linear
  recursion from the runs' start (theta_0 ~ N(0, 1), r ~ N(0, 1)), and
  E[theta_l^2] = mean^2 + variance exactly, whatever the noise's law.
  Returns [len(checkpoints), num_settings].
  """
  a = tf.constant(np.atleast_1d(np.asarray(a, np.float64)))
  gamma = tf.constant(np.broadcast_to(np.asarray(gamma, np.float64),
                                      a.shape))
  noise_variance = (N ** 2 / BATCH * np.var(x.astype(np.float64))
                    if gradient_noise else 0.)
  friction = tf.constant(friction, tf.float64)
  truth = post_mean ** 2 + 1. / (N + 1)
  dim = 1 if method == "sgld" else 2

  def advance(l0, l1, mean, cov, sum_h, sum_h_phi):
    def body(l, mean, cov, sum_h, sum_h_phi):
      h = a * tf.pow(tf.cast(l, tf.float64), -gamma)
      mat, g, q = _one_step_matrices(method, h, friction, noise_variance)
      mean = tf.linalg.matvec(mat, mean)
      cov = mat @ cov @ tf.linalg.matrix_transpose(mat) + q[
          ..., None, None] * (g[..., :, None] * g[..., None, :])
      phi = (mean[..., 0] + post_mean) ** 2 + cov[..., 0, 0]
      return l + 1, mean, cov, sum_h + h, sum_h_phi + h * phi
    return tf.while_loop(lambda l, *_: l <= l1, body,
                         (l0, mean, cov, sum_h, sum_h_phi))[1:]

  advance = tf.function(advance, jit_compile=True, autograph=False)
  mean = np.zeros(a.shape + (dim,))
  mean[..., 0] = -post_mean
  state = (tf.constant(mean),
           tf.constant(np.broadcast_to(np.eye(dim), a.shape + (dim, dim))),
           tf.zeros(a.shape, tf.float64), tf.zeros(a.shape, tf.float64))
  out, done = [], 0
  for num_steps in checkpoints:
    state = advance(tf.constant(done + 1), tf.constant(num_steps), *state)
    done = num_steps
    out.append((state[3] / state[2]).numpy() - truth)
  return np.array(out)

def _progress(msg):
  print(msg, flush=True)


def figure2_runs(x, truth, post_mean, methods, schedules, alphas, runs,
                 max_steps, seed=(2, 0), predict=True, log=_progress):
  """Bias and MSE traces of SGHMC-D and SGHMC-F for each alpha.

  Returns {(method, schedule): dict(steps, alphas, bias, bias_se, mse,
  mse_se, predicted, predicted_full_gradient)}, each array [len(alphas),
  len(steps)]; `predicted` is the exact bias with minibatch gradients,
  `predicted_full_gradient` with the full-data gradient.
  """
  steps = checkpoint_grid(max_steps)
  alphas = np.asarray(alphas, np.float64)
  out = {}
  for m, method in enumerate(methods):
    runner = WeightedAverageRunner(x, method, runs * len(alphas))
    gamma = np.repeat(alphas, runs)
    for schedule in schedules:
      t0 = time.time()
      if schedule == "decreasing":
        est, _ = runner.run(FIG2_DECREASING_SCALE, gamma, steps,
                            seed=[seed[0], seed[1] + m])
        est = est.reshape(len(steps), len(alphas), runs).transpose(1, 0, 2)
        predict_fn = lambda noise: predicted_bias_traces(
            x, post_mean, method, np.full(len(alphas), FIG2_DECREASING_SCALE),
            alphas, steps, gradient_noise=noise).T
      else:
        cols = []
        for i, num_steps in enumerate(steps):
          # SGHMC-F: a new run for each L, at h = 0.033 L^-alpha.
          e, _ = runner.run(FIG2_FIXED_SCALE * num_steps ** -gamma, 0.,
                            [num_steps], seed=[seed[0] + 1 + i, seed[1] + m])
          cols.append(e[0].reshape(len(alphas), runs))
        est = np.stack(cols, axis=1)
        def predict_fn(noise):
          a = FIG2_FIXED_SCALE * np.asarray(steps)[None, :] ** -alphas[:, None]
          traces = predicted_bias_traces(x, post_mean, method, a.ravel(), 0.,
                                         steps, gradient_noise=noise)
          traces = traces.reshape(len(steps), len(alphas), len(steps))
          return np.diagonal(traces, axis1=0, axis2=2)  # [alphas, steps]
      bias, bias_se, mse, mse_se = error_summary(est, truth)
      nan = np.full_like(bias, np.nan)
      out[(method, schedule)] = dict(
          steps=steps, alphas=list(alphas), bias=bias, bias_se=bias_se,
          mse=mse, mse_se=mse_se,
          predicted=np.abs(predict_fn(True)) if predict else nan,
          predicted_full_gradient=(np.abs(predict_fn(False)) if predict
                                   else nan))
      log(f"  {LABEL[method]}, {schedule} step sizes: {runs} runs x "
          f"{len(alphas)} alphas to L = {max_steps} in "
          f"{time.time() - t0:.0f} s")
  return out


def _alpha_label(alpha):
  for text, value in (("1/3", 1 / 3), ("1/5", 0.2), ("1/2", 0.5)):
    if abs(alpha - value) < 1e-9:
      return text
  return f"{alpha:g}"


def _plot_panel(ax, steps, curves, alphas, optimal, theory_slope, ylabel,
                title, dotted=None):
  """One panel of Fig. 2: a curve per alpha, the optimal alpha thick red,
  `dotted` (the exact predictions) thin, and the theory's slope."""
  colors = dict(zip(FIG2_ALPHAS, ("tab:blue", "tab:orange", "tab:green",
                                  "tab:purple")))
  s = np.asarray(steps, float)
  for i, alpha in enumerate(alphas):
    best = abs(alpha - optimal) < 1e-9
    color = "r" if best else colors.get(alpha)
    y = curves[i]
    ok = np.isfinite(y) & (y > 0)
    ax.loglog(s[ok], y[ok], "-", color=color, lw=2.5 if best else 1.2,
              label=f"alpha = {_alpha_label(alpha)}")
    if dotted is not None:
      ok = np.isfinite(dotted[i]) & (dotted[i] > 0)
      ax.loglog(s[ok], dotted[i][ok], ":", color=color, lw=1)
  i = int(np.argmin(np.abs(np.asarray(alphas) - optimal)))
  if np.isfinite(curves[i][-1]) and curves[i][-1] > 0:
    ax.loglog(s, curves[i][-1] * (s / s[-1]) ** theory_slope, "--",
              color="k", lw=0.8, label=f"theory: L^{theory_slope:.2f}")
  ax.set_xlabel("iterations L")
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=7)


def plot_figure2(res, methods, schedule):
  """One row per method: bias (with the exact prediction dotted), MSE, and
  the exact bias with full-data gradients, a curve per alpha."""
  fig, axes = plt.subplots(len(methods), 3, figsize=(13, 3.6 * len(methods)),
                           squeeze=False)
  for row_axes, method in zip(axes, methods):
    r = res[(method, schedule)]
    k = ORDER[method]
    name = LABEL[method] + (", h_l = 0.045 l^-alpha" if schedule ==
                            "decreasing" else ", h = 0.033 L^-alpha")
    bias_opt, mse_opt = 1. / (k + 1), 1. / (2 * k + 1)
    _plot_panel(row_axes[0], r["steps"], r["bias"], r["alphas"], bias_opt,
                theory_slopes(k, bias_opt)[0], "bias",
                f"Bias, {name}\n(dotted: exact prediction)",
                dotted=r["predicted"])
    _plot_panel(row_axes[1], r["steps"], r["mse"], r["alphas"], mse_opt,
                theory_slopes(k, mse_opt)[1], "MSE", f"MSE, {name}")
    _plot_panel(row_axes[2], r["steps"], r["predicted_full_gradient"],
                r["alphas"], bias_opt, theory_slopes(k, bias_opt)[0],
                "bias (exact)",
                f"Bias with full-data gradients (exact),\n{name}")
  fig.tight_layout()
  return fig


def figure2(args, methods=("splitting", "euler"),
            schedules=("decreasing", "fixed")):
  """Fig. 2: bias and MSE against L for h ~ L^-alpha, several alphas."""
  x, _, post_mean, post_var = make_problem()
  truth = post_mean ** 2 + post_var
  max_steps = args.max_steps or (100_000 if args.full else 10_000)
  runs = args.runs or 200
  print(f"Fig. 2: E[theta^2] = {truth:.5f}; {runs} independent runs; "
        f"SGHMC-D h_l = {FIG2_DECREASING_SCALE} l^-alpha, SGHMC-F h = "
        f"{FIG2_FIXED_SCALE} L^-alpha; D = {FRICTION}", flush=True)
  res = figure2_runs(x, truth, post_mean, methods, schedules, FIG2_ALPHAS,
                     runs, max_steps)
  rows = []
  for (method, schedule), r in res.items():
    for i, alpha in enumerate(r["alphas"]):
      theory_bias, theory_mse = theory_slopes(ORDER[method], alpha)
      rows.append(dict(
          method=method, schedule=schedule, alpha=alpha,
          steps=r["steps"][-1], bias=float(r["bias"][i, -1]),
          bias_se=float(r["bias_se"][i, -1]),
          predicted=float(r["predicted"][i, -1]),
          bias_slope=fitted_slope(r["steps"], r["bias"][i]),
          theory_bias_slope=theory_bias,
          mse=float(r["mse"][i, -1]),
          mse_slope=fitted_slope(r["steps"], r["mse"][i]),
          theory_mse_slope=theory_mse,
          full_gradient_bias=float(r["predicted_full_gradient"][i, -1]),
          full_gradient_bias_slope=fitted_slope(
              r["steps"], r["predicted_full_gradient"][i])))
  print(f"{'method':27s} {'alpha':>5s} {'bias(L)':>9s} {'pred.':>9s} "
        f"{'slope':>6s} {'theory':>6s} {'MSE(L)':>9s} {'slope':>6s} "
        f"{'theory':>6s} {'full-grad slope':>15s}")
  for row in rows:
    print(f"{LABEL[row['method']]:16s} {row['schedule']:10s} "
          f"{_alpha_label(row['alpha']):>5s} {row['bias']:9.2e} "
          f"{row['predicted']:9.2e} "
          f"{row['bias_slope']:6.2f} {row['theory_bias_slope']:6.2f} "
          f"{row['mse']:9.2e} {row['mse_slope']:6.2f} "
          f"{row['theory_mse_slope']:6.2f} "
          f"{row['full_gradient_bias_slope']:15.2f}")
  os.makedirs(args.out, exist_ok=True)
  paths = []
  for schedule in schedules:
    path = os.path.join(args.out, f"fig2_{schedule}.png")
    _save(plot_figure2(res, methods, schedule), path)
    paths.append(path)
  _write_table(os.path.join(args.out, "fig2_table"), rows, [
      ("method", "{}"), ("schedule", "{}"), ("alpha", "{:.3g}"),
      ("steps", "{}"), ("bias", "{:.3g}"), ("bias_se", "{:.2g}"),
      ("predicted", "{:.3g}"), ("bias_slope", "{:.2f}"),
      ("theory_bias_slope", "{:.2f}"), ("mse", "{:.3g}"),
      ("mse_slope", "{:.2f}"), ("theory_mse_slope", "{:.2f}"),
      ("full_gradient_bias", "{:.3g}"),
      ("full_gradient_bias_slope", "{:.2f}")])
  print("wrote " + ", ".join(paths))
  return res, rows, truth


def _save(fig, path):
  """PNG at dpi 100, palette-quantised (a quarter of the size) when Pillow
  is there."""
  fig.savefig(path, dpi=100)
  plt.close(fig)
  try:
    from PIL import Image  # pylint: disable=g-import-not-at-top
  except ImportError:
    return
  with Image.open(path) as image:
    image = image.convert("RGB").quantize(colors=64)
  image.save(path, optimize=True)


def _write_table(stem, rows, columns):
  with open(stem + ".md", "w") as f:
    f.write("| " + " | ".join(c for c, _ in columns) + " |\n")
    f.write("|" + "---|" * len(columns) + "\n")
    for r in rows:
      f.write("| " + " | ".join(fmt.format(r[c]) for c, fmt in columns)
              + " |\n")
  with open(stem + ".json", "w") as f:
    json.dump(rows, f, indent=1, default=float)


FIG3_METHODS = (("splitting", 1. / 3.), ("sgld", 0.5))


def _fig3_grids(method):
  """The grid-searched settings: {kind: (constants, frictions)}."""
  frictions = (FRICTION,) if method == "sgld" else FIG3_FRICTIONS
  grids = {"fixed": FIG3_FIXED_GRID, "decreasing": FIG3_DECREASING_GRID}
  if method == "sgld":
    # The paper's initial step sizes start at 0.003, above SGLD's stability
    # limit h < 2 / (N + 1) ~ 0.002 here (footnote: "SGLD requires much
    # smaller step sizes"); our extension searches below it as well.
    grids["decreasing_extended"] = FIG3_SGLD_EXTENDED_GRID
  return {kind: (grid, frictions) for kind, grid in grids.items()}


def figure3_select(x, truth, method, alpha, grid_runs, seed=(3, 0),
                   grids=None, log=_progress):
  """The paper's grid search at L = 500, for one method.

  Fixed: h = C L^-alpha with C on the fixed grid; decreasing: h_l = h_1
  l^-alpha with h_1 on the decreasing grid; SGHMC also over D in
  {10, 20, 30}. All settings x `grid_runs` runs are one batch of chains.
  Returns {kind: (constant, D, bias at L = 500)}, the smallest bias of each
  kind (diverged settings excluded).
  """
  grids = grids or _fig3_grids(method)
  settings = [(kind, c, d) for kind, (grid, frictions) in grids.items()
              for d in frictions for c in grid]
  kinds = np.array([s[0] for s in settings])
  consts = np.array([s[1] for s in settings])
  frics = np.array([s[2] for s in settings])
  num_steps = FIG3_SELECT_AT
  fixed = kinds == "fixed"
  a = np.where(fixed, consts * num_steps ** -alpha, consts)
  gamma = np.where(fixed, 0., alpha)
  t0 = time.time()
  runner = WeightedAverageRunner(x, method, len(settings) * grid_runs)
  est, diverged = runner.run(np.repeat(a, grid_runs),
                             np.repeat(gamma, grid_runs), [num_steps],
                             seed=list(seed),
                             friction=np.repeat(frics, grid_runs))
  est = est[0].reshape(len(settings), grid_runs)
  est[diverged.reshape(len(settings), grid_runs)] = np.inf
  with np.errstate(invalid="ignore"):
    bias = error_summary(est, truth)[0]
  chosen = {}
  for kind in grids:
    idx = np.flatnonzero(kinds == kind)
    best = idx[np.argmin(bias[idx])]
    chosen[kind] = (float(consts[best]), float(frics[best]),
                    float(bias[best]))
  log(f"  {LABEL[method]}: grid search over {len(settings)} settings x "
      f"{grid_runs} runs at L = {num_steps} in {time.time() - t0:.0f} s: " +
      "; ".join(f"{kind} {'C' if kind == 'fixed' else 'h_1'} = {c:.4f}"
                + ("" if method == "sgld" else f", D = {d:g}")
                for kind, (c, d, _) in chosen.items()))
  return chosen


def figure3_runs(x, truth, post_mean, chosen, runs, max_steps, seed=(4, 0),
                 predict=True, log=_progress):
  """Bias and MSE traces of SGHMC (splitting) and SGLD at the chosen
  constants. Returns {(method, kind): dict(steps, alpha, h, D, bias, bias_se,
  mse, mse_se, predicted)}."""
  steps = checkpoint_grid(max_steps)
  s = np.asarray(steps, np.float64)
  out = {}
  for m, (method, alpha) in enumerate(FIG3_METHODS):
    runner = WeightedAverageRunner(x, method, runs)
    t0 = time.time()
    for k, (kind, (c, d, _)) in enumerate(chosen[method].items()):
      if kind == "fixed":
        cols = []
        for i, num_steps in enumerate(steps):
          e, _ = runner.run(c * num_steps ** -alpha, 0., [num_steps],
                            seed=[seed[0] + 1 + i, seed[1] + m], friction=d)
          cols.append(e[0])
        est = np.stack(cols)
        predicted = np.diagonal(predicted_bias_traces(
            x, post_mean, method, c * s ** -alpha, 0., steps,
            friction=d)) if predict else np.full(len(steps), np.nan)
      else:
        est, _ = runner.run(c, alpha, steps,
                            seed=[seed[0], seed[1] + 10 * m + k], friction=d)
        predicted = predicted_bias_traces(
            x, post_mean, method, [c], alpha, steps,
            friction=d)[:, 0] if predict else np.full(len(steps), np.nan)
      r = dict(steps=steps, alpha=alpha, h=c, D=d,
               predicted=np.abs(predicted))
      with np.errstate(invalid="ignore"):
        r.update(zip(("bias", "bias_se", "mse", "mse_se"),
                     error_summary(est, truth)))
      out[(method, kind)] = r
    log(f"  {LABEL[method]}: {runs} runs to L = {max_steps} in "
        f"{time.time() - t0:.0f} s")
  return out


def plot_figure3(res):
  """Bias (top, exact prediction dotted) and MSE (bottom) against L, fixed
  (left) and decreasing (right) step sizes, SGHMC against SGLD."""
  fig, axes = plt.subplots(2, 2, figsize=(10, 7))
  styles = {("splitting", "fixed"): ("tab:blue", "s-"),
            ("splitting", "decreasing"): ("tab:blue", "s-"),
            ("sgld", "fixed"): ("tab:orange", "o-"),
            ("sgld", "decreasing"): ("tab:orange", "o-"),
            ("sgld", "decreasing_extended"): ("tab:red", "^-")}
  for (method, kind), r in res.items():
    j = 0 if kind == "fixed" else 1
    color, style = styles[(method, kind)]
    const = (f"h = {r['h']:.3g} L^-{_alpha_label(r['alpha'])}"
             if kind == "fixed" else
             f"h_l = {r['h']:.3g} l^-{_alpha_label(r['alpha'])}")
    if method != "sgld":
      const += f", D = {r['D']:g}"
    if kind == "decreasing_extended":
      const += " (h_1 below the paper's grid)"
    for i, key in enumerate(("bias", "mse")):
      y = r[key]
      ok = np.isfinite(y) & (y > 0)
      axes[i, j].loglog(np.asarray(r["steps"])[ok], y[ok], style, ms=3,
                        color=color, label=f"{LABEL[method]}: {const}")
      if key == "bias":
        axes[i, j].loglog(r["steps"], r["predicted"], ":", color=color,
                          lw=1)
  for j, schedule in enumerate(("fixed", "decreasing")):
    for i, key in enumerate(("Bias", "MSE")):
      axes[i, j].set_xlabel("iterations L")
      axes[i, j].set_ylabel(key)
      axes[i, j].set_title(f"{key}, {schedule} step sizes" + (
          " (dotted: exact prediction)" if key == "Bias" else ""),
                           fontsize=9)
      axes[i, j].legend(fontsize=7)
  fig.tight_layout()
  return fig


def figure3(args):
  """Fig. 3: SGHMC (splitting) against SGLD, fixed and decreasing steps."""
  x, _, post_mean, post_var = make_problem()
  truth = post_mean ** 2 + post_var
  max_steps = args.max_steps or (100_000 if args.full else 10_000)
  runs = args.runs or 200
  grid_runs = args.grid_runs or (50 if args.full else 20)
  print(f"Fig. 3: E[theta^2] = {truth:.5f}; SGHMC (splitting, alpha = 1/3) "
        f"vs SGLD (alpha = 1/2); grid search at L = {FIG3_SELECT_AT} with "
        f"{grid_runs} runs, then {runs} runs to L = {max_steps}",
        flush=True)
  chosen = {method: figure3_select(x, truth, method, alpha, grid_runs)
            for method, alpha in FIG3_METHODS}
  res = figure3_runs(x, truth, post_mean, chosen, runs, max_steps)
  rows = []
  for (method, kind), r in res.items():
    rows.append(dict(
        method=method, schedule=kind, alpha=r["alpha"], constant=r["h"],
        friction=r["D"] if method != "sgld" else "-", steps=r["steps"][-1],
        bias=float(r["bias"][-1]), bias_se=float(r["bias_se"][-1]),
        predicted=float(r["predicted"][-1]),
        bias_slope=fitted_slope(r["steps"], r["bias"]),
        mse=float(r["mse"][-1]),
        mse_slope=fitted_slope(r["steps"], r["mse"])))
  for row in rows:
    print(f"{LABEL[row['method']]:16s} {row['schedule']:19s} "
          f"const {row['constant']:.4f} bias(L) {row['bias']:.2e} "
          f"(+- {row['bias_se']:.1e}, predicted {row['predicted']:.2e}) "
          f"slope {row['bias_slope']:.2f}  MSE(L) {row['mse']:.2e} "
          f"slope {row['mse_slope']:.2f}")
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "fig3_sghmc_vs_sgld.png")
  _save(plot_figure3(res), path)
  _write_table(os.path.join(args.out, "fig3_table"), rows, [
      ("method", "{}"), ("schedule", "{}"), ("alpha", "{:.3g}"),
      ("constant", "{:.4f}"), ("friction", "{}"), ("steps", "{}"),
      ("bias", "{:.3g}"), ("bias_se", "{:.2g}"), ("predicted", "{:.3g}"),
      ("bias_slope", "{:.2f}"), ("mse", "{:.3g}"), ("mse_slope", "{:.2f}")])
  print(f"wrote {path}")
  return res, rows, chosen, truth


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", default="out/integrators")
  parser.add_argument("--full", action="store_true")
  parser.add_argument("--figure", choices=("1", "2", "3", "all"),
                      default="1")
  parser.add_argument("--steps", type=int, default=None,
                      help="Fig. 1: steps per chain and step size")
  parser.add_argument("--max-steps", type=int, default=None,
                      help="Figs. 2-3: largest number of iterations L")
  parser.add_argument("--runs", type=int, default=None,
                      help="Figs. 2-3: independent runs (default 200)")
  parser.add_argument("--grid-runs", type=int, default=None,
                      help="Fig. 3: runs per setting in the grid search")
  args = parser.parse_args(argv)
  if args.figure == "1":
    return figure1(args)
  results = {}
  if args.figure == "all":
    results["1"] = figure1(args)
  if args.figure in ("2", "all"):
    results["2"] = figure2(args)
  if args.figure in ("3", "all"):
    results["3"] = figure3(args)
  return results


if __name__ == "__main__":
  main(sys.argv[1:])
