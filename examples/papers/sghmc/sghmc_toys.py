"""SGHMC paper (Chen, Fox & Guestrin 2014), Figures 1-3: the toy experiments.

Figure numbers below are Chen et al.'s; papers/003 numbers the same
figures 1, 3 and 4 and adds its own Figure 2, part (g).

Reproduced as in papers/003 (Section 4.1), with the settings of the authors'
MATLAB code (tqchen/ML-SGHMC, matlab/figure1-3) where the text is silent.

(a) Figure 1. U(theta) = -2 theta^2 + theta^4, noisy gradient
    grad U~ = grad U + N(0, V), V = 4; step size eps = 0.1, 50 steps per
    trajectory, momentum resampled at the start of every trajectory, one draw
    kept at the end of each trajectory. Five samplers (plus one extra row):

    * HMC with M-H:   `tfp.mcmc.HamiltonianMonteCarlo` (exact gradient).
    * HMC without M-H: `tfp_sgmcmc.UncalibratedAMAGOLD(exact target,
      friction=0)`: with beta = 0 and exact gradients AMAGOLD's proposal is
      the leapfrog of HMC (position-Verlet form), momentum resampled per
      trajectory, no test.
    * naive SGHMC without M-H: the same proposal on the noisy target.
    * naive SGHMC with M-H: `AmortizedMetropolisHastings(UncalibratedAMAGOLD(
      noisy target, friction=0))` with the exact energy. With beta = 0 the
      energy accumulator rho is exactly K(r) - K(r*) whatever the gradients
      (r' - r = -eps g telescopes), so the test is the HMC test
      exp(H(theta, r) - H(theta*, r*)) on the exact energy that the SGHMC paper
      applies at the end of each noisy trajectory.
    * SGHMC: `tfp_sgmcmc.SGHMC(noisy target, eps, friction=C,
      noise_estimate=B-hat = eps V / 2, integrator="euler",
      momentum_resampling_period=50)`, the authors' sghmc.m update. C = 3 in
      the authors' code (figure1.m); C = 4 is reported in the table too.
    * extra row: `tfp_sgmcmc.NaiveSGHMC` (the library's Euler form of naive
      SGHMC) without M-H, which must be as wrong as the leapfrog form.

    Densities are histograms on 80 bins over [-4, 4] (U > 190 outside)
    against exp(-U) integrated over each bin; the distance is the symmetric
    KL of `tfp_sgmcmc.synthetic` (empty bins floored at 1e-10).

(g) papers/003's own Figure 2 (no counterpart in Chen et al.): the samplers
    of (a) with the same settings on U = theta^2 / 2 (true variance 1),
    `--parts g`; the table adds each sampler's variance. Not in the default
    `--parts abc`.

(b) Figure 2 (papers/003 Figure 3). U = theta^2 / 2, grad U~ = theta + N(0, 4) (papers/003; the
    authors' figure2.m used N(0, 0.25) and plotted every 50th of 15000 steps;
    papers/003 plots 360 steps, which we follow, one point per step).
    From (theta, r) = (1, 0), eps = 0.1: Hamiltonian dynamics with the exact
    gradient (`NaiveSGHMC` on a noise-free target: symplectic Euler, no
    friction), noisy Hamiltonian dynamics (`NaiveSGHMC`), the same with the
    momentum resampled every 50 steps (`NaiveSGHMC(...,
    momentum_resampling_period=50)`), and SGHMC with friction C = 3 and
    B-hat = eps V / 2. The starting momentum r = 0 is put into the kernels'
    results (`momentum`) with `step_count` set to 1, so that the kernels'
    draw of a fresh momentum at step 0 does not replace it. Many chains run
    side by side, all from (1, 0); the figure shows the first chain of each
    dynamics in its own panel (points coloured by step, the exact orbit in
    grey), the table the mean of theta^2 + r^2 over the chains.

(c) Figure 3 (papers/003 Figure 4). U = theta^T Sigma^-1 theta / 2, Sigma = [[1, .9], [.9, 1]],
    grad U~ = Sigma^-1 theta + N(0, I). As the authors' figure3a/3b.m, in the
    SGD-with-momentum units: SGLD with eta_k = 0.18 * 0.8^k and SGHMC with
    eta_k = 0.05 * 0.36^k, alpha_k = 0.05 * 0.6^k (so C = alpha / sqrt(eta)
    is the same for all five), k = 0..4; both subtract the known gradient
    noise beta = V eta / 2 from the injected noise (SGHMC: noise_estimate
    B-hat = V h / 2; SGLD: `temperature` = 1 - V h / 2, which makes the
    injected variance 2 h (1 - V h / 2), the authors' sgld.m). The five
    settings of one sampler run side by side as chains with per-chain step
    sizes. Error: mean absolute error of the 4 entries of the sample
    covariance (pooled over chains), as the authors' drawcmp.m, and the same
    error of the chain's exact stationary covariance (discrete Lyapunov
    equation: the bias alone); autocorrelation time: the integrated
    tau = 1 + 2 sum_j rho_j, summed until rho_j first drops below 0.05 (the
    cut-off of the authors' aucTime.m, which adds 2 (1 - j / L) per lag
    instead of 2 rho_j), per coordinate and chain, averaged.
    Chains start from draws of N(0, Sigma) and discard a burn-in.
    Panel (a) of the figure: the first 50 steps of SGLD (eta = 0.05) and
    SGHMC (eta = 0.05, alpha = 0.035) from theta = 0 (figure3b.m), run as an
    extra setting started at the origin in the same compiled loop.

Default size: the CI tests' and the notebook's; --full: 80000 draws per
sampler in (a), the paper's count, and 1e7 draws per setting in (c), the
authors' L.

Outputs in --out: fig1_double_well_densities.png, fig2_phase_portrait.png,
fig3a_first_50_samples.png, fig3b_cov_error_vs_autocorrelation.png,
table.md, table.json.

    python examples/papers/sghmc/sghmc_toys.py [--out out/sghmc_toys] [--full] \
        [--seed 0]
"""

import argparse
import functools
import json
import os
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
from tfp_sgmcmc import synthetic  # noqa: E402

# Naive SGHMC and the uncorrected proposals are uncalibrated by design.
warnings.filterwarnings("ignore", message=".*is not calibrated.*")

# (a) Figure 1.
STEP_SIZE = 0.1
NUM_STEPS = 50            # leapfrog / SGHMC steps per trajectory
NOISE_VARIANCE = 4.       # V
FRICTION = 3.             # C of the authors' figure1.m and figure2.m
FRICTION_ALT = 4.
EDGES = np.linspace(-4., 4., 81)
SAMPLERS_A = ("hmc_mh", "hmc", "naive_mh", "naive", "sghmc", "sghmc_c4",
              "naive_euler")
LABELS_A = {
    "hmc_mh": "HMC (with M-H)",
    "hmc": "HMC (no M-H)",
    "naive_mh": "naive SGHMC (with M-H)",
    "naive": "naive SGHMC (no M-H)",
    "sghmc": f"SGHMC (C = {FRICTION:g})",
    "sghmc_c4": f"SGHMC (C = {FRICTION_ALT:g})",
    "naive_euler": "naive SGHMC, Euler form (no M-H)",
}

# (b) Figure 2.
PHASE_STEPS = 360
PHASE_START = (1., 0.)
PHASE_RESAMPLING_PERIOD = 50
SAMPLERS_B = ("exact", "noisy", "noisy_resample", "friction")
LABELS_B = {
    "exact": "Hamiltonian dynamics (exact gradient)",
    "noisy": "noisy Hamiltonian dynamics",
    "noisy_resample": "noisy, r resampled every 50 steps",
    "friction": f"noisy with friction (SGHMC, C = {FRICTION:g})",
}

# (c) Figure 3.
RHO = 0.9
SIGMA = np.array([[1., RHO], [RHO, 1.]])
SGLD_ETAS = tuple(0.18 * 0.8 ** k for k in range(5))
SGHMC_ETAS = tuple(0.05 * 0.36 ** k for k in range(5))
SGHMC_ALPHAS = tuple(0.05 * 0.6 ** k for k in range(5))
RUN_SGLD_ETA, RUN_SGHMC_ETA, RUN_SGHMC_ALPHA = 0.05, 0.05, 0.035
RUN_STEPS = 50
ACF_CUTOFF = 0.05

DEFAULT = dict(
    a=dict(num_chains=200, num_results=50, burnin=10),
    b=dict(num_chains=200),
    c=dict(chains_per_setting=100, num_steps=4000, burnin=500,
           acf_chains=40))
FULL = dict(
    a=dict(num_chains=1000, num_results=80, burnin=20),      # 80000 draws
    b=dict(num_chains=1000),
    c=dict(chains_per_setting=200, num_steps=10000, burnin=2000,
           acf_chains=100, replicas=5))                        # 1e7 draws


# ---------------------------------------------------------------- (a)


def _half_square(x):
  """U(x) = x^2 / 2 for x of shape [..., 1] (papers/003, Figures 2 and 3)."""
  return 0.5 * x[..., 0] ** 2


# The energies of part (a): papers/003's Figure 1 (Chen et al.'s Figure 1)
# and its Figure 2, the same five samplers on U = theta^2 / 2 (part "g").
ENERGIES_A = {"double_well": synthetic.sghmc_toy_energy,
              "gaussian": _half_square}


def double_well_target(noise_variance=NOISE_VARIANCE, energy="double_well"):
  return synthetic.noisy_target(ENERGIES_A[energy], noise_variance)


@functools.lru_cache(maxsize=None)
def true_bin_probabilities(energy="double_well"):
  return synthetic.grid_density(ENERGIES_A[energy], EDGES)


def kl_to_truth(draws, energy="double_well"):
  return synthetic.symmetric_kl(true_bin_probabilities(energy),
                                synthetic.histogram_density(draws, EDGES))


def _kernel_a(sampler, energy="double_well"):
  """(kernel, steps per kept draw) for one sampler of Figure 1."""
  exact = double_well_target(0., energy)
  noisy = double_well_target(energy=energy)
  if sampler == "hmc_mh":
    return tfp.mcmc.HamiltonianMonteCarlo(
        lambda x: -ENERGIES_A[energy](x), step_size=STEP_SIZE,
        num_leapfrog_steps=NUM_STEPS), 1
  leapfrog = functools.partial(sg.UncalibratedAMAGOLD, step_size=STEP_SIZE,
                               num_leapfrog_steps=NUM_STEPS, friction=0.,
                               resample_momentum=True)
  if sampler == "hmc":
    return leapfrog(exact), 1
  if sampler == "naive":
    return leapfrog(noisy), 1
  if sampler == "naive_mh":
    return sg.AmortizedMetropolisHastings(leapfrog(noisy)), 1
  if sampler == "naive_euler":
    return sg.NaiveSGHMC(noisy, STEP_SIZE,
                         momentum_resampling_period=NUM_STEPS), NUM_STEPS
  friction = FRICTION if sampler == "sghmc" else FRICTION_ALT
  return sg.SGHMC(noisy, STEP_SIZE, friction=friction,
                  noise_estimate=0.5 * STEP_SIZE * NOISE_VARIANCE,
                  integrator="euler",
                  momentum_resampling_period=NUM_STEPS), NUM_STEPS


@functools.lru_cache(maxsize=None)
def _compiled_a(sampler, num_chains, num_results, burnin,
                energy="double_well"):
  kernel, every = _kernel_a(sampler, energy)

  def accepted(_, results):
    if sampler in ("hmc_mh", "naive_mh"):
      return results.is_accepted
    return tf.ones([num_chains], tf.bool)

  def run(seed):
    init_seed, chain_seed = tfp.random.split_seed(seed)
    init = tf.random.stateless_normal([num_chains, 1], seed=init_seed)
    # For the per-step kernels a kept draw is the end of a 50-step
    # trajectory: momentum is resampled when step_count % 50 == 0.
    return tfp.mcmc.sample_chain(
        num_results, init, kernel=kernel, num_burnin_steps=burnin * every,
        num_steps_between_results=every - 1, trace_fn=accepted,
        seed=chain_seed)
  return tf.function(run, jit_compile=True, autograph=False)


def run_densities(num_chains, num_results, burnin, seed=0,
                  samplers=SAMPLERS_A, verbose=True, energy="double_well"):
  """Figure 1 (energy "double_well") or papers/003's Figure 2 ("gaussian"):
  draws, symmetric KL and acceptance rate of each sampler."""
  rows, draws = [], {}
  for i, name in enumerate(SAMPLERS_A):
    if name not in samplers:
      continue
    start = time.time()
    fn = _compiled_a(name, num_chains, num_results, burnin, energy)
    x, acc = fn(tf.constant([seed, 100 + i], tf.int32))
    x = np.asarray(x)[..., 0].ravel()
    draws[name] = x
    row = dict(sampler=name, label=LABELS_A[name],
               sym_kl=kl_to_truth(x, energy), var=float(np.var(x)),
               accept=float(np.mean(np.asarray(acc))),
               frac_abs_gt_2=float(np.mean(np.abs(x) > 2.)),
               num_draws=int(x.size), secs=time.time() - start)
    rows.append(row)
    if verbose:
      print(f"  ({'a' if energy == 'double_well' else 'g'}) {row['label']:34s} sym. KL {row['sym_kl']:7.4f}  "
            f"accept {row['accept']:5.3f}  ({row['secs']:.1f} s)", flush=True)
  return dict(rows=rows, draws=draws, energy=energy)


# ---------------------------------------------------------------- (b)

def _quadratic(x):
  return 0.5 * x[..., 0] ** 2


def _kernel_b(sampler):
  exact = sg.NoisyGradientTarget(_quadratic, gradient_noise_variance=0.,
                                 parameter_shapes=[1])
  noisy = sg.NoisyGradientTarget(_quadratic,
                                 gradient_noise_variance=NOISE_VARIANCE,
                                 parameter_shapes=[1])
  if sampler == "exact":
    return sg.NaiveSGHMC(exact, STEP_SIZE)
  if sampler == "noisy":
    return sg.NaiveSGHMC(noisy, STEP_SIZE)
  if sampler == "noisy_resample":
    return sg.NaiveSGHMC(noisy, STEP_SIZE,
                         momentum_resampling_period=PHASE_RESAMPLING_PERIOD)
  return sg.SGHMC(noisy, STEP_SIZE, friction=FRICTION,
                  noise_estimate=0.5 * STEP_SIZE * NOISE_VARIANCE,
                  integrator="euler")


@functools.lru_cache(maxsize=None)
def _compiled_b(sampler, num_chains, num_steps):
  kernel = _kernel_b(sampler)

  def run(seed):
    theta0 = tf.fill([num_chains, 1], PHASE_START[0])
    # Start every chain at (theta, r) = PHASE_START: the kernels draw a
    # fresh momentum at step_count 0 (and every period), so begin at 1.
    results = kernel.bootstrap_results(theta0)._replace(
        momentum=tf.fill([num_chains, 1], PHASE_START[1]),
        step_count=tf.constant(1, tf.int32))
    return tfp.mcmc.sample_chain(
        num_steps, theta0, previous_kernel_results=results, kernel=kernel,
        trace_fn=lambda _, r: r.momentum, seed=seed)
  return tf.function(run, jit_compile=True, autograph=False)


def run_phase_portrait(num_chains, num_steps=PHASE_STEPS, seed=0,
                       dynamics=SAMPLERS_B, verbose=True):
  """Figure 2: (theta, r) paths [steps, chains] of the four dynamics."""
  paths, rows = {}, []
  for name in dynamics:
    fn = _compiled_b(name, num_chains, num_steps)
    # The same seed for every sampler (the authors reset randn('seed')).
    theta, r = fn(tf.constant([seed, 200], tf.int32))
    theta, r = np.asarray(theta)[..., 0], np.asarray(r)[..., 0]
    paths[name] = (theta, r)
    radius2 = theta ** 2 + r ** 2
    quarter = max(num_steps // 4, 1)
    row = dict(dynamics=name, label=LABELS_B[name],
               start_radius2=PHASE_START[0] ** 2 + PHASE_START[1] ** 2,
               radius2_first_quarter=float(radius2[:quarter].mean()),
               radius2_last_quarter=float(radius2[-quarter:].mean()),
               radius2_final=float(radius2[-1].mean()),
               radius2_final_chain0=float(radius2[-1, 0]))
    rows.append(row)
    if verbose:
      print(f"  (b) {row['label']:44s} mean theta^2 + r^2: first quarter "
            f"{row['radius2_first_quarter']:6.2f}, last quarter "
            f"{row['radius2_last_quarter']:6.2f}", flush=True)
  return dict(rows=rows, paths=paths)


# ---------------------------------------------------------------- (c)

def gaussian_target():
  precision = np.linalg.inv(SIGMA).astype(np.float32)

  def energy(x):
    return 0.5 * tf.reduce_sum(x * tf.linalg.matvec(precision, x), -1)
  return sg.NoisyGradientTarget(energy, gradient_noise_variance=1.,
                                parameter_shapes=[2])


def _per_chain(values, chains_per_setting):
  return tf.constant(np.repeat(np.asarray(values, np.float32),
                               chains_per_setting)[:, None])


def _kernel_c(sampler, etas, alphas, chains_per_setting):
  """One kernel running every setting, `chains_per_setting` chains each."""
  target = gaussian_target()
  v = 1.
  if sampler == "sgld":
    # SGLD's h is the authors' eta. Temperature 1 - V h / 2 subtracts the
    # known gradient noise (sgld.m: sigma^2 = 2 eta (1 - V eta / 2)).
    h = np.asarray(etas)
    return sg.SGLD(target, _per_chain(h, chains_per_setting),
                   temperature=_per_chain(1. - 0.5 * v * h,
                                          chains_per_setting))
  # SGD-with-momentum units: h = sqrt(eta), C = alpha / h,
  # B-hat = beta-hat / h = V h / 2 (beta-hat = V eta / 2 as sghmc.m).
  h = np.sqrt(np.asarray(etas))
  c = np.asarray(alphas) / h
  return sg.SGHMC(target, _per_chain(h, chains_per_setting),
                  friction=_per_chain(c, chains_per_setting),
                  noise_estimate=_per_chain(0.5 * v * h, chains_per_setting),
                  integrator="euler")


@functools.lru_cache(maxsize=None)
def _compiled_c(sampler, etas, alphas, chains_per_setting, num_steps):
  """Every setting of one sampler, `chains_per_setting` chains each, plus
  one chain of the first-50-samples setting (last) started at the origin."""
  if sampler == "sgld":
    etas, alphas = etas + (RUN_SGLD_ETA,), alphas + (0.,)
  else:
    etas, alphas = etas + (RUN_SGHMC_ETA,), alphas + (RUN_SGHMC_ALPHA,)
  kernel = _kernel_c(sampler, etas, alphas, chains_per_setting)
  num_chains = len(etas) * chains_per_setting

  def run(seed):
    init_seed, chain_seed = tfp.random.split_seed(seed)
    # The compared settings start from exact draws of N(0, Sigma) (their
    # burn-in is discarded afterwards); the last setting from the origin.
    chol = tf.constant(np.linalg.cholesky(SIGMA), tf.float32)
    init = tf.linalg.matvec(chol, tf.random.stateless_normal(
        [num_chains, 2], seed=init_seed))
    from_origin = tf.range(num_chains)[:, None] >= (
        num_chains - chains_per_setting)
    init = tf.where(from_origin, 0., init)
    return tfp.mcmc.sample_chain(num_steps, init, kernel=kernel,
                                 trace_fn=None, seed=chain_seed)
  return tf.function(run, jit_compile=True, autograph=False)


def autocorrelation_time(x, cutoff=ACF_CUTOFF):
  """Integrated autocorrelation time of each series in x [steps, series].

  tau = 1 + 2 sum_{j >= 1} rho_j, summed while rho_j >= cutoff (the
  truncation rule of the authors' aucTime.m). rho is the biased (FFT)
  autocorrelation around the series' own mean.
  """
  x = np.asarray(x, np.float64)
  n = x.shape[0]
  x = x - x.mean(0)
  f = np.fft.rfft(x, n=2 * n, axis=0)
  acov = np.fft.irfft(f * np.conj(f), axis=0)[:n] / n
  rho = acov / acov[:1]
  below = rho < cutoff
  below[0] = False
  first = np.where(below.any(0), below.argmax(0), n)
  mask = np.arange(n)[:, None] < first[None, :]
  return 1. + 2. * np.sum(np.where(mask, rho, 0.)[1:], axis=0)


def stationary_covariance_error(sampler, eta, alpha=0.):
  """The same error for the discretised chain's exact stationary covariance
  (its bias alone, no Monte Carlo error), from a discrete Lyapunov equation.

  Both chains are linear: SGLD x' = (I - eta A) x + N(0, 2 eta I) (gradient
  noise eta^2 V plus injected 2 eta (1 - V eta / 2)); SGHMC in SGD units
  v' = (1 - alpha) v - eta A x + N(0, 2 alpha eta I), x' = x + v'.
  """
  a, eye = np.linalg.inv(SIGMA), np.eye(2)
  if sampler == "sgld":
    cov = scipy.linalg.solve_discrete_lyapunov(eye - eta * a, 2 * eta * eye)
  else:
    m = np.block([[eye - eta * a, (1 - alpha) * eye],
                  [-eta * a, (1 - alpha) * eye]])
    w = 2 * alpha * eta * np.block([[eye, eye], [eye, eye]])
    cov = scipy.linalg.solve_discrete_lyapunov(m, w)[:2, :2]
  return float(np.mean(np.abs(cov - SIGMA)))


def run_correlated_gaussian(chains_per_setting, num_steps, burnin,
                            acf_chains, replicas=1, seed=0,
                            settings=(0, 1, 2, 3, 4), verbose=True):
  """Figure 3: covariance error and autocorrelation time per setting.

  `settings` picks a subset of the five (indices into SGLD_ETAS etc.).
  `replicas` independent runs of `chains_per_setting` chains each are pooled
  for the covariance (to bound memory); the autocorrelation time comes from
  `acf_chains` chains of the first.
  """
  rows, first = [], {}
  for i, (sampler, all_etas, all_alphas) in enumerate((
      ("sgld", SGLD_ETAS, (0.,) * 5), ("sghmc", SGHMC_ETAS, SGHMC_ALPHAS))):
    start = time.time()
    etas = tuple(all_etas[k] for k in settings)
    alphas = tuple(all_alphas[k] for k in settings)
    fn = _compiled_c(sampler, etas, alphas, chains_per_setting,
                     burnin + num_steps)
    # Pooled sums of x and x x^T per setting, over replicas.
    sums = np.zeros([len(etas), 2])
    sums2 = np.zeros([len(etas), 2, 2])
    for rep in range(replicas):
      x = np.asarray(fn(tf.constant([seed, 300 + 10 * rep + i], tf.int32)))
      x = x.reshape(burnin + num_steps, len(etas) + 1, chains_per_setting, 2)
      if rep == 0:
        first[sampler] = x[:RUN_STEPS, -1, 0]
        taus = [np.mean(autocorrelation_time(
            x[burnin:, k, :acf_chains].reshape(num_steps, -1)))
                for k in range(len(etas))]
      x = x[burnin:, :-1].astype(np.float64)
      sums += x.sum((0, 2))
      sums2 += np.einsum("tkci,tkcj->kij", x, x)
      del x
    n = replicas * num_steps * chains_per_setting
    for k, (eta, alpha) in enumerate(zip(etas, alphas)):
      mean = sums[k] / n
      cov = sums2[k] / n - np.outer(mean, mean)
      rows.append(dict(
          sampler=sampler, eta=float(eta), alpha=float(alpha),
          cov_error=float(np.mean(np.abs(cov - SIGMA))),
          stationary_cov_error=stationary_covariance_error(sampler, eta,
                                                           alpha),
          autocorrelation_time=float(taus[k]), num_draws=int(n)))
    if verbose:
      for row in rows[-len(etas):]:
        print(f"  (c) {row['sampler']:5s} eta {row['eta']:.5f} alpha "
              f"{row['alpha']:.4f}  cov error {row['cov_error']:.4f} "
              f"(stationary {row['stationary_cov_error']:.4f})  "
              f"autocorrelation time {row['autocorrelation_time']:6.1f}",
              flush=True)
      print(f"      ({time.time() - start:.1f} s)", flush=True)
  return dict(rows=rows, first=first)


def interpolated_error_at(rows, sampler, tau):
  """The sampler's covariance error at autocorrelation time `tau`, by
  linear interpolation in log(tau) between its settings (None outside)."""
  pts = sorted((r["autocorrelation_time"], r["cov_error"]) for r in rows
               if r["sampler"] == sampler)
  taus = np.log([p[0] for p in pts])
  if not taus[0] <= np.log(tau) <= taus[-1]:
    return None
  return float(np.interp(np.log(tau), taus, [p[1] for p in pts]))


# ---------------------------------------------------------------- output

def write_figures(result, out):
  os.makedirs(out, exist_ok=True)
  paths = []
  for part, title, filename in (
      ("a", "U = -2 theta^2 + theta^4, grad U~ = grad U + N(0, 4)",
       "fig1_double_well_densities.png"),
      ("g", "U = theta^2 / 2, grad U~ = grad U + N(0, 4) (papers/003 Fig. 2)",
       "fig2_gaussian_densities.png")):
    if part not in result:
      continue
    energy = result[part]["energy"]
    d = result[part]["draws"]
    centres = 0.5 * (EDGES[1:] + EDGES[:-1])
    width = np.diff(EDGES)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(centres, true_bin_probabilities(energy) / width, "k-", lw=2.5,
            label="true distribution")
    styles = {"hmc_mh": "b-", "hmc": "c--", "naive_mh": "g-",
              "naive": "m--", "sghmc": "r-"}
    kl = {r["sampler"]: r["sym_kl"] for r in result[part]["rows"]}
    for name, style in styles.items():
      if name in d:
        ax.plot(centres, synthetic.histogram_density(d[name], EDGES) / width,
                style, lw=1.3, label=f"{LABELS_A[name]}, KL {kl[name]:.3f}")
    ax.set_xlim(-2.5, 2.5) if part == "a" else ax.set_xlim(-4., 4.)
    ax.set_xlabel("theta")
    ax.set_ylabel("density")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper right", framealpha=0.7)
    fig.tight_layout()
    path = os.path.join(out, filename)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    paths.append(path)
  if "b" in result:
    paths_b = result["b"]["paths"]
    circle = np.linspace(0., 2. * np.pi, 200)
    lim = 1.1 * max(np.abs(np.stack(p)[:, :, 0]).max()
                    for p in paths_b.values())
    fig, axes = plt.subplots(2, 2, figsize=(7, 6.4), sharex=True,
                             sharey=True, layout="constrained")
    names = [n for n in SAMPLERS_B if n in paths_b]
    for ax in axes.ravel()[len(names):]:
      ax.set_visible(False)
    for ax, name in zip(axes.ravel(), names):
      theta, r = paths_b[name]
      # The exact flow's orbit through (1, 0): the unit circle.
      ax.plot(np.cos(circle), np.sin(circle), "-", color="0.75", lw=1)
      ax.plot(theta[:, 0], r[:, 0], "-", color="0.6", lw=0.4)
      points = ax.scatter(theta[:, 0], r[:, 0], c=np.arange(len(theta)),
                          cmap="viridis", s=7, zorder=3)
      ax.plot(*PHASE_START, "r*", ms=10, zorder=4)
      ax.set_title(LABELS_B[name], fontsize=8)
      ax.set_xlim(-lim, lim)
      ax.set_ylim(-lim, lim)
      ax.set_aspect("equal")
    for ax in axes[1]:
      ax.set_xlabel("theta")
    for ax in axes[:, 0]:
      ax.set_ylabel("r")
    fig.colorbar(points, ax=axes, shrink=0.7, label="step")
    fig.suptitle(f"U = theta^2/2, grad U~ = theta + N(0, 4): {PHASE_STEPS} "
                 "steps from (1, 0) (grey: exact orbit)", fontsize=9)
    path = os.path.join(out, "fig2_phase_portrait.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    paths.append(path)
  if "c" in result:
    first = result["c"]["first"]
    fig, ax = plt.subplots(figsize=(5, 4.3))
    g = np.linspace(-2, 2, 100)
    xx, yy = np.meshgrid(g, g)
    prec = np.linalg.inv(SIGMA)
    zz = np.exp(-0.5 * (prec[0, 0] * xx ** 2 + 2 * prec[0, 1] * xx * yy +
                        prec[1, 1] * yy ** 2))
    ax.contour(xx, yy, zz, levels=8, cmap="viridis", linewidths=0.8)
    ax.plot(first["sgld"][:, 0], first["sgld"][:, 1], "bx", label="SGLD")
    ax.plot(first["sghmc"][:, 0], first["sghmc"][:, 1], "ro", mfc="none",
            label="SGHMC")
    ax.set_xlim(-2.1, 3)
    ax.set_ylim(-2.1, 3)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(f"first {RUN_STEPS} samples")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out, "fig3a_first_50_samples.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    paths.append(path)
    fig, ax = plt.subplots(figsize=(5, 4))
    for sampler, style in (("sgld", "b-x"), ("sghmc", "r-o")):
      rows = [r for r in result["c"]["rows"] if r["sampler"] == sampler]
      ax.plot([r["autocorrelation_time"] for r in rows],
              [r["cov_error"] for r in rows], style, label=sampler.upper())
    ax.set_xscale("log")
    ax.set_xlabel("autocorrelation time (steps)")
    ax.set_ylabel("average absolute error of sample covariance")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out, "fig3b_cov_error_vs_autocorrelation.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    paths.append(path)
  return paths


def markdown_table(result):
  lines = []
  if "a" in result:
    lines += ["(a) U = -2 theta^2 + theta^4, V = 4, eps = 0.1, 50 steps per "
              "trajectory", "",
              "| sampler | symmetric KL | M-H acceptance | P(abs(theta) > 2) "
              "| draws |", "|---|---|---|---|---|"]
    for r in result["a"]["rows"]:
      acc = f"{r['accept']:.3f}" if r["sampler"].endswith("_mh") else "-"
      lines.append(f"| {r['label']} | {r['sym_kl']:.4f} | {acc} | "
                   f"{r['frac_abs_gt_2']:.4f} | {r['num_draws']} |")
    lines.append("")
  if "g" in result:
    lines += ["(g) papers/003 Figure 2: U = theta^2 / 2 (true variance 1), "
              "V = 4, eps = 0.1, 50 steps per trajectory", "",
              "| sampler | symmetric KL | M-H acceptance | variance | draws |",
              "|---|---|---|---|---|"]
    for r in result["g"]["rows"]:
      acc = f"{r['accept']:.3f}" if r["sampler"].endswith("_mh") else "-"
      lines.append(f"| {r['label']} | {r['sym_kl']:.4f} | {acc} | "
                   f"{r['var']:.3f} | {r['num_draws']} |")
    lines.append("")
  if "b" in result:
    lines += [f"(b) U = theta^2 / 2, V = 4, {PHASE_STEPS} steps from "
              "(theta, r) = (1, 0): mean of theta^2 + r^2 over chains", "",
              "| dynamics | first quarter | last quarter | final step |",
              "|---|---|---|---|"]
    for r in result["b"]["rows"]:
      lines.append(f"| {r['label']} | {r['radius2_first_quarter']:.2f} | "
                   f"{r['radius2_last_quarter']:.2f} | "
                   f"{r['radius2_final']:.2f} |")
    lines.append("")
  if "c" in result:
    lines += ["(c) correlated Gaussian, rho = 0.9, V = I", "",
              "| sampler | eta | alpha | autocorrelation time | "
              "cov. error | cov. error of the exact stationary law | draws |",
              "|---|---|---|---|---|---|---|"]
    for r in result["c"]["rows"]:
      alpha = f"{r['alpha']:.4f}" if r["sampler"] == "sghmc" else "-"
      lines.append(f"| {r['sampler'].upper()} | {r['eta']:.5f} | {alpha} | "
                   f"{r['autocorrelation_time']:.1f} | {r['cov_error']:.4f} "
                   f"| {r['stationary_cov_error']:.4f} | {r['num_draws']} |")
    lines.append("")
  return "\n".join(lines)


def write_tables(result, out):
  os.makedirs(out, exist_ok=True)
  with open(os.path.join(out, "table.md"), "w") as f:
    f.write(markdown_table(result))
  summary = {k: v["rows"] for k, v in result.items() if "rows" in v}
  summary["size"] = result.get("size")
  with open(os.path.join(out, "table.json"), "w") as f:
    json.dump(summary, f, indent=1)


def run_all(size, seed=0, parts="abc", verbose=True):
  result = dict(size=size)
  if "a" in parts:
    result["a"] = run_densities(seed=seed, verbose=verbose, **size["a"])
  if "b" in parts:
    result["b"] = run_phase_portrait(seed=seed, verbose=verbose, **size["b"])
  if "g" in parts:
    result["g"] = run_densities(seed=seed, verbose=verbose,
                                energy="gaussian", **size["a"])
  if "c" in parts:
    result["c"] = run_correlated_gaussian(seed=seed, verbose=verbose,
                                          **size["c"])
  return result


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", default=os.path.join("out", "sghmc_toys"))
  parser.add_argument("--full", action="store_true",
                      help="paper size: 80000 draws per sampler in (a), 1e7 "
                           "per setting in (c)")
  parser.add_argument("--parts", default="abc",
                      help="which experiments to run (subset of 'abcg'; g "
                      "is papers/003's Figure 2, the samplers of (a) on "
                      "U = theta^2 / 2)")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  size = FULL if args.full else DEFAULT
  print(f"SGHMC toys ({'full' if args.full else 'CI'} size): {size}",
        flush=True)
  start = time.time()
  result = run_all(size, seed=args.seed, parts=args.parts)
  paths = write_figures(result, args.out)
  write_tables(result, args.out)
  print(markdown_table(result))
  print(f"wrote {', '.join(paths)} and table.md/json to {args.out} "
        f"({time.time() - start:.0f} s)")


if __name__ == "__main__":
  main()
