"""SGNHT, preconditioned SGLD, control variates, cyclical schedules,
temperature: the features users of the peer libraries expect."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, ess, mean_and_se, sample, stationary_covariance
from support.helpers import variance_and_se


def isotropic_gaussian(noise, precision=1.):
  precision = np.asarray(precision, np.float32)
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum(precision * x ** 2, -1),
      gradient_noise_variance=noise)


# --- SGNHT -----------------------------------------------------------------

def test_sgnht_holds_the_temperature_under_unknown_gradient_noise():
  # The thermostat update xi' = xi + h (r'^T r' / d - 1) has zero mean
  # increment in stationarity, so the kinetic energy per dimension averages
  # exactly 1 in the discrete chain, whatever the noise. SGHMC with friction
  # set without knowing the noise (B = h V / 2 = 0.625 against C = 1) runs
  # hot.
  target = isotropic_gaussian(25.)
  kinetic = {}
  for name, kernel in (("sgnht", sg.SGNHT(target, 0.05, diffusion=1.)),
                       ("sghmc", sg.SGHMC(target, 0.05, friction=1.))):
    _, momentum = sample(kernel, tf.zeros([4, 10]), 20000, seed=[1, 2],
                         num_burnin_steps=2000,
                         trace_fn=lambda _, r: r.momentum)
    per_dim = np.mean(np.asarray(momentum) ** 2, axis=-1, keepdims=True)
    kinetic[name] = mean_and_se(per_dim)
  (ke, se), (ke_sghmc, se_sghmc) = kinetic["sgnht"], kinetic["sghmc"]
  assert abs(ke[0] - 1.) < NUM_SE * se[0]
  assert ke_sghmc[0] - 1. > NUM_SE * se_sghmc[0]


def test_sgnht_thermostat_tracks_the_noise_and_temperature():
  # More gradient noise needs more friction: the thermostat settles higher.
  def mean_thermostat(noise, temperature=1.):
    kernel = sg.SGNHT(isotropic_gaussian(noise), 0.05, diffusion=1.,
                      temperature=temperature)
    _, (xi, r) = sample(kernel, tf.zeros([4, 10]), 5000, seed=[3, 4],
                        num_burnin_steps=2000,
                        trace_fn=lambda _, r: (r.thermostat, r.momentum))
    return mean_and_se(np.asarray(xi)[..., None]), np.mean(
        np.asarray(r) ** 2)
  (low, low_se), _ = mean_thermostat(1.)
  (high, high_se), _ = mean_thermostat(100.)
  assert high[0] - low[0] > NUM_SE * np.hypot(low_se[0], high_se[0])
  _, cold_kinetic = mean_thermostat(1., temperature=0.25)
  assert abs(cold_kinetic - 0.25) < 0.05  # Mean of 200k squares; sd 0.01.


@pytest.mark.parametrize("step_count", [0, 1])
def test_sgnht_first_momentum_has_its_exact_distribution(step_count):
  # One step of many chains from theta0 = 1 with carried momentum m0 on
  # U = theta^2 / 2 (no gradient noise), thermostat xi = A: step 0 starts
  # from a fresh r ~ N(0, T) (folded into the step's noise), step 1 from
  # m0. r' = (1 - h xi) r - h theta0 + N(0, 2 A h T) in both cases.
  h, a, temp, theta0, m0, n = 0.5, 1.0, 3.0, 1.0, 3.0, 100000
  kernel = sg.SGNHT(isotropic_gaussian(0.), h, diffusion=a, temperature=temp)
  state = tf.fill([n, 1], theta0)
  results = kernel.bootstrap_results(state)._replace(
      momentum=tf.fill([n, 1], m0), step_count=tf.constant(step_count))
  _, results = kernel.one_step(state, results, seed=[5, 6])
  r = results.momentum.numpy()[:, 0].astype(np.float64)
  decay = 1. - h * a
  fresh = step_count == 0
  mean = -h * theta0 + (0. if fresh else decay * m0)
  var = 2. * a * h * temp + (decay ** 2 * temp if fresh else 0.)
  var_se = var * np.sqrt(2. / (n - 1))
  assert abs(r.mean() - mean) < NUM_SE * np.sqrt(var / n)
  assert abs(r.var() - var) < NUM_SE * var_se
  # Told apart by over 3 x NUM_SE: m0 kept or dropped (mean); the fresh
  # draw dropped or drawn at temperature 1 (variance).
  assert abs(decay * m0) > 3 * NUM_SE * np.sqrt(var / n)
  assert decay ** 2 * (temp - 1.) > 3 * NUM_SE * var_se


# --- Preconditioned SGLD ---------------------------------------------------

def test_psgld_mixes_faster_per_gradient_on_an_ill_conditioned_gaussian():
  # Precisions 1 and 1e4: SGLD's step is capped by the stiff direction
  # (h < 2e-4), so the loose direction barely moves. pSGLD's RMSprop
  # preconditioner gives each coordinate its own effective step h G_j.
  precision = np.array([1., 1e4], np.float32)
  target = isotropic_gaussian(1., precision)
  n, chains = 20000, 4
  results = {}
  for name, kernel in (
      ("sgld", sg.SGLD(target, 1e-4)),
      ("psgld", sg.PreconditionedSGLD(target, 5e-3, decay=0.999))):
    draws, g = sample(kernel, tf.zeros([chains, 2]), n, seed=[5, 6],
                      num_burnin_steps=2000,
                      trace_fn=lambda _, r: getattr(r, "preconditioner",
                                                    r.step_size))
    draws = np.asarray(draws)
    results[name] = (draws, np.asarray(g))
    min_ess_per_gradient = ess(draws).min() / (n * chains)
    print(f"{name}: ESS per gradient {ess(draws) / (n * chains)}, min "
          f"{min_ess_per_gradient:.2e}")
    results[name] += (min_ess_per_gradient,)
  assert results["psgld"][2] > 3. * results["sgld"][2]
  # Means are right for both; pSGLD's stiff-direction variance follows the
  # SGLD recursion with step h * mean(G) (the loose direction's G tracks
  # theta, the bias the dropped Gamma term would correct, so it is not
  # asserted).
  for name in ("sgld", "psgld"):
    mean, se = mean_and_se(results[name][0])
    assert np.all(np.abs(mean) < NUM_SE * se), name
  draws, g, _ = results["psgld"]
  g_stiff = g[..., 1].mean()
  var, var_se = variance_and_se(draws, mean=0.)
  # theta' = theta - h G (lambda theta + eta) + sqrt(2 h G) xi is SGLD with
  # step h G and the same gradient noise V = 1.
  predicted = stationary_covariance("sgld", [[1e4]], 5e-3 * g_stiff,
                                    gradient_noise=[[1.]])[0, 0]
  assert abs(var[1] - predicted) < NUM_SE * var_se[1]


# --- Control variates --------------------------------------------------------

class Logistic:
  """Bayesian logistic regression, N = 2000, d = 3, prior N(0, 10^2)."""

  def __init__(self, n=2000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    self.x = rng.normal(size=(n, d)).astype(np.float32)
    w = np.array([1., -1., 0.5])
    p = 1. / (1. + np.exp(-self.x @ w))
    self.y = (rng.uniform(size=n) < p).astype(np.float32)
    self.n, self.d = n, d

  def log_likelihood(self, w, batch):
    x, y = batch
    logits = tf.einsum("nd,...d->...n", x, w)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits)

  @staticmethod
  def log_prior(w):
    return tf.reduce_sum(-0.5 * (w / 10.) ** 2, -1)

  def target(self, batch_size):
    return sg.InMemoryTarget(self.log_likelihood, (self.x, self.y),
                             batch_size, log_prior_fn=self.log_prior)


@pytest.fixture(scope="module")
def logistic():
  problem = Logistic()
  target = problem.target(batch_size=20)
  mode = sg.find_mode(target, tf.zeros([problem.d]), num_steps=3000,
                      learning_rate=0.05)
  # Reference posterior: full-batch NUTS, compiled (about 10 s).
  full = problem.target(batch_size=problem.n)
  nuts = tfp.mcmc.NoUTurnSampler(lambda w: -full.energy(w), step_size=0.05)
  nuts = tfp.mcmc.DualAveragingStepSizeAdaptation(nuts, 400)
  ref = sample(nuts, tf.tile(mode[None], [4, 1]), 2000, seed=[9, 9],
               num_burnin_steps=500)
  return problem, target, mode, np.asarray(ref)


def test_control_variate_gradient_variance_is_far_below_plain(logistic):
  problem, target, mode, ref = logistic
  cv = sg.ControlVariateTarget(target, mode)
  # At a typical posterior point (mode + 1 posterior sd).
  w = mode + tf.constant(ref.reshape(-1, problem.d).std(axis=0), tf.float32)
  seeds = tf.stack(tfp.random.split_seed([1, 2], n=2000))
  grads = {}
  for name, t in (("plain", target), ("cv", cv)):
    fn = tf.function(lambda s, t=t: tf.map_fn(
        lambda si: t.energy_and_gradient(w, si)[1], s,
        fn_output_signature=tf.float32), autograph=False)
    grads[name] = np.asarray(fn(seeds), np.float64)
  var_plain = grads["plain"].var(axis=0)
  var_cv = grads["cv"].var(axis=0)
  print("gradient variance plain", var_plain, "cv", var_cv)
  assert np.all(var_cv < 0.05 * var_plain)
  # Both are unbiased estimates of the same full gradient.
  with tf.GradientTape() as tape:
    tape.watch(w)
    energy = target.energy(w)
  exact = tape.gradient(energy, w).numpy()
  for g in grads.values():
    se = g.std(axis=0) / np.sqrt(len(g))
    assert np.all(np.abs(g.mean(axis=0) - exact) < NUM_SE * se)


def test_sgld_cv_is_closer_to_the_reference_than_plain_sgld(logistic):
  problem, target, mode, ref = logistic
  ref_sd = ref.reshape(-1, problem.d).std(axis=0)
  cv = sg.ControlVariateTarget(target, mode)
  init = tf.tile(mode[None], [8, 1])
  errors = {}
  for name, t in (("plain", target), ("cv", cv)):
    draws = np.asarray(sample(sg.SGLD(t, 5e-4), init, 10000, seed=[3, 4],
                              num_burnin_steps=500))
    var, var_se = variance_and_se(draws)
    sd = np.sqrt(var)
    errors[name] = (np.abs(sd / ref_sd - 1.), 0.5 * var_se / var)
    print(name, "sd", sd, "reference sd", ref_sd)
  (err_plain, se_plain), (err_cv, se_cv) = errors["plain"], errors["cv"]
  # The reference sd has its own MC error (ESS > 1000: about 2%).
  assert np.all(err_plain - err_cv > NUM_SE * np.hypot(se_plain, se_cv))


# --- Schedules ---------------------------------------------------------------

def test_cyclical_schedule_values_and_phases():
  schedule = sg.CyclicalSchedule(0.1, num_steps=100, num_cycles=4,
                                 exploration_fraction=0.5)
  k = np.arange(100)
  want = 0.05 * (np.cos(np.pi * (k % 25) / 25) + 1)
  np.testing.assert_allclose(schedule(tf.constant(k)), want, rtol=1e-5)
  np.testing.assert_array_equal(schedule.is_sampling(tf.constant(k)),
                                (k % 25) / 25 >= 0.5)


@pytest.mark.parametrize("make", [
    lambda t, s: sg.SGLD(t, s),
    lambda t, s: sg.SGHMC(t, s, friction=1.),
    lambda t, s: sg.SGNHT(t, s),
    lambda t, s: sg.PreconditionedSGLD(t, s),
])
def test_cyclical_schedule_explores_without_noise_then_samples(make):
  # With exact gradients the exploration phase is deterministic (an
  # optimiser): two seeds give the same path until sampling starts.
  target = isotropic_gaussian(0.)
  schedule = sg.CyclicalSchedule(0.05, num_steps=40, num_cycles=2,
                                 exploration_fraction=0.5)
  kernel = make(target, schedule)
  init = tf.fill([1, 2], 3.)
  a, ha = sample(kernel, init, 40, seed=[1, 1],
                 trace_fn=lambda _, r: r.step_size)
  b = sample(kernel, init, 40, seed=[2, 2])
  a, b = np.asarray(a), np.asarray(b)
  if isinstance(kernel, (sg.SGHMC, sg.SGNHT)):
    # Their initial momentum is drawn from N(0, T I) at the first step.
    assert not np.allclose(a[:10], b[:10])
  else:
    np.testing.assert_allclose(a[:10], b[:10], rtol=1e-6)
    assert np.all(np.abs(a[9]) < np.abs(init.numpy()))  # Moving to the mode.
  assert not np.allclose(a[10:20], b[10:20])
  # XLA and eager cos differ in float32 round-off near h = 0.
  np.testing.assert_allclose(ha, schedule(tf.range(40)), rtol=1e-5)


def test_sghmc_temperature_matches_exact_prediction():
  h, c, t = 0.1, 1., 0.2
  kernel = sg.SGHMC(isotropic_gaussian(0.), h, c, temperature=t,
                    integrator="splitting")
  draws = sample(kernel, tf.zeros([8, 1]), 10000, seed=[7, 7],
                 num_burnin_steps=200)
  var, se = variance_and_se(draws, mean=0.)
  predicted = stationary_covariance("splitting", [[1.]], h, c,
                                    temperature=t)[0, 0]
  assert abs(var[0] - predicted) < NUM_SE * se[0]
  assert abs(predicted - t) < 0.01 * t


@pytest.mark.parametrize("make", [
    lambda t: sg.AMAGOLD(t, 0.3, num_leapfrog_steps=5, friction=0.5,
                         temperature=0.25),
    lambda t: sg.AmortizedBarker(t, 0.4, num_steps=3, temperature=0.25),
])
def test_exact_kernels_sample_the_tempered_posterior_exactly(make):
  # AMAGOLD and amortized Barker are exact for exp(-U / T): on a unit
  # Gaussian with noisy gradients their variance must be T = 0.25 within
  # Monte Carlo error, with no discretisation or noise bias.
  target = isotropic_gaussian(1.)
  kernel = make(target)
  assert kernel.temperature == 0.25
  assert isinstance(kernel.target, sg.TemperedTarget)
  draws = sample(kernel, tf.zeros([8, 2]), 4000, seed=[8, 8],
                 num_burnin_steps=200)
  var, se = variance_and_se(draws, mean=0.)
  assert np.all(np.abs(var - 0.25) < NUM_SE * se)
  assert np.all(se < 0.02)  # The check has power against T = 1 or T^2.


def test_sgbd_temperature_scales_the_target():
  target = isotropic_gaussian(0.)
  kernel = sg.SGBD(target, 0.1, temperature=0.25)
  cold = sg.SGBD(sg.TemperedTarget(target, 0.25), 0.1)
  a = sample(kernel, tf.zeros([2, 2]), 50, seed=[1, 1])
  b = sample(cold, tf.zeros([2, 2]), 50, seed=[1, 1])
  np.testing.assert_array_equal(a, b)
  with pytest.raises(ValueError, match="`temperature` must be > 0"):
    sg.SGBD(target, 0.1, temperature=0.)
