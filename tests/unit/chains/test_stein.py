"""The IMQ kernel Stein discrepancy against known answers: a plain NumPy
double loop, SGMCMCJax's implementation (where installed), the exact
expectation for independent Gaussian draws, the order of biased draws, and
the target, structure and thinning routes.
(Under XLA, and choosing a step size or warming up from chains:
tests/integration/test_stein_discrepancy.py.)"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc
from tfp_sgmcmc.chains import stein

from support import stein_reference


# Under XLA: tests/integration/test_stein_discrepancy.py.
@pytest.mark.parametrize("jit", [False])
def test_pairwise_sum_equals_a_numpy_double_loop(jit):
  stein_reference.assert_pairwise_sum_matches(jit)


def test_exact_gaussian_draws_give_the_expected_discrepancy():
  # For independent draws from p = N(mu, Sigma) the off-diagonal terms have
  # mean zero and k0(x, x) = |Sigma^-1 (x - mu)|^2 + d (c = 1, beta = -1/2),
  # so E[n KSD^2] = trace(Sigma^-1) + d at every n: KSD ~ 1/sqrt(n).
  rng = np.random.default_rng(1)
  mu, sd = np.array([1., -2.]), np.array([0.7, 1.5])
  expected = np.sum(sd ** -2) + 2

  def log_prob(w):
    return -0.5 * tf.reduce_sum(((w - mu) / sd) ** 2, -1)
  for n in (50, 200):
    draws = (mu + sd * rng.normal(size=(n, 64, 2))).astype(np.float32)
    value = tfp_sgmcmc.kernel_stein_discrepancy(
        draws, target_log_prob_fn=log_prob, jit_compile=False).numpy()
    scaled = n * value ** 2                        # one per chain
    assert scaled.shape == (64,)
    se = scaled.std(ddof=1) / np.sqrt(scaled.size)
    assert abs(scaled.mean() - expected) < 4 * se, (n, scaled.mean(), se)


def test_the_discrepancy_equals_sgmcmcjaxs_where_it_is_installed():
  # SGMCMCJax's `ksd.imq_KSD` (`pip install sgmcmcjax`; c = 1, beta = -1/2),
  # an implementation written apart from ours, on the same draws and their
  # exact scores: the same number, to float64 rounding.
  ksd_module = pytest.importorskip("sgmcmcjax.ksd")
  jax = pytest.importorskip("jax")
  rng = np.random.default_rng(3)
  mu, sd = np.array([1., -2., 0.5, 3.]), np.array([0.7, 1.5, 0.2, 1.])
  x = mu + 1.3 * sd * rng.normal(size=(300, 4)) + 0.2 * sd

  def log_prob(w):
    return -0.5 * tf.reduce_sum(((w - mu) / sd) ** 2, -1)
  with jax.enable_x64(True):
    want = float(ksd_module.imq_KSD(jax.numpy.asarray(x), jax.numpy.asarray(
        -(x - mu) / sd ** 2)))
  got = float(tfp_sgmcmc.ksd(x, target_log_prob_fn=log_prob,
                             num_chain_dims=0, max_draws=300,
                             jit_compile=False))
  assert got == pytest.approx(want, rel=1e-10), (got, want)


def test_biased_draws_rank_in_the_order_of_their_error():
  # Draws shifted by delta or with the sd scaled: the discrepancy grows
  # with the error, as the true error orders them. The draws are
  # standardised first, so their own sampling error in the mean and sd
  # cannot offset a small shift.
  rng = np.random.default_rng(2)
  z = rng.normal(size=(500, 3))
  z = ((z - z.mean(0)) / z.std(0)).astype(np.float32)

  def log_prob(w):
    return -0.5 * tf.reduce_sum(w ** 2, -1)
  shifts = [0., 0.1, 0.3, 1.]
  by_shift = [float(tfp_sgmcmc.ksd(z + s, target_log_prob_fn=log_prob,
                                   num_chain_dims=0, jit_compile=False))
              for s in shifts]
  assert np.all(np.diff(by_shift) > 0), by_shift
  scales = [1., 1.2, 1.5]
  by_scale = [float(tfp_sgmcmc.ksd(z * s, target_log_prob_fn=log_prob,
                                   num_chain_dims=0, jit_compile=False))
              for s in scales]
  assert np.all(np.diff(by_scale) > 0), by_scale


def test_a_scale_standardises_draws_and_score_as_a_numpy_double_loop():
  # With scale L the KSD is the plain one of z = L^-1 x against the score
  # L^T s(x): checked against the NumPy double loop, for sds and for a
  # lower-triangular factor.
  rng = np.random.default_rng(4)
  n, d = 30, 3
  x = rng.normal(size=(n, d)) * [0.1, 1., 10.] + 1.
  precision = np.diag([100., 1., 0.01])

  def log_prob(w):
    r = tf.cast(w, tf.float64) - 1.
    return -0.5 * tf.einsum("...i,ij,...j->...", r, precision, r)
  score = -(x - 1.) @ precision
  lower = np.array([[0.2, 0., 0.], [0.3, 1.5, 0.], [-2., 1., 8.]])
  for scale in (np.array([0.2, 1.5, 8.]), lower):
    factor = np.diag(scale) if scale.ndim == 1 else scale
    z = np.linalg.solve(factor, x.T).T
    sz = score @ factor
    want = np.sqrt(sum(stein_reference.stein_kernel_numpy(
        z[i], z[j], sz[i], sz[j]) for i in range(n) for j in range(n))) / n
    got = float(tfp_sgmcmc.ksd(x, target_log_prob_fn=log_prob,
                               num_chain_dims=0, scale=scale,
                               jit_compile=False))
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_a_dense_scale_makes_exact_draws_scale_free():
  # Exact draws from N(mu, Sigma) standardised by L = chol(Sigma): E[n
  # KSD^2] = trace(I) + d = 2d, however unequal Sigma's scales are (the unit
  # kernel gives trace(Sigma^-1) + d, here dominated by the narrowest sd).
  rng = np.random.default_rng(5)
  d, n = 3, 100
  a = rng.normal(size=(d, d)) * [1e-2, 1., 1e2]
  covariance = a @ a.T + np.diag([1e-4, 1., 1e4])
  lower = np.linalg.cholesky(covariance)
  precision = np.linalg.inv(covariance)

  def log_prob(w):
    w = tf.cast(w, tf.float64)
    return -0.5 * tf.einsum("...i,ij,...j->...", w, precision, w)
  draws = rng.normal(size=(n, 64, d)) @ lower.T
  scaled = n * tfp_sgmcmc.ksd(draws, target_log_prob_fn=log_prob,
                              scale=lower, jit_compile=False).numpy() ** 2
  se = scaled.std(ddof=1) / np.sqrt(scaled.size)
  assert abs(scaled.mean() - 2 * d) < 4 * se, (scaled.mean(), se)
  # From the draws themselves ("dense"): the same scale up to sampling
  # error, so the same order of value.
  own = n * tfp_sgmcmc.ksd(draws, target_log_prob_fn=log_prob,
                           scale="dense", jit_compile=False).numpy() ** 2
  assert abs(own.mean() - 2 * d) < 4 * se, (own.mean(), se)


def test_common_scale_is_the_median_run_and_skips_runs_that_blew_up():
  rng = np.random.default_rng(6)
  runs = [rng.normal(size=(200, 4, 2)) * s for s in (0.01, 1., 100.)]
  runs.append(np.full((200, 4, 2), np.nan))
  np.testing.assert_allclose(stein.common_scale(runs, "diagonal"),
                             stein.stein_scale(runs[1], "diagonal"))
  lower = stein.common_scale(runs, "dense")
  np.testing.assert_allclose(lower @ lower.T, np.cov(
      runs[1].reshape(-1, 2), rowvar=False), rtol=1e-6)
  assert stein.common_scale(runs[3:], "dense") is None
  with pytest.raises(ValueError, match=r"`scale` has shape \[3\].*\[2\]"):
    tfp_sgmcmc.ksd(runs[0][:, 0], num_chain_dims=0, scale=[1., 2., 3.],
                   target_log_prob_fn=lambda w: -tf.reduce_sum(w ** 2, -1)
                   * tf.ones([], tf.float64), jit_compile=False)


def _regression(rng, num_examples):
  """y = x . (1, -1, 0.5) + N(0, 1) noise: (x, y, log_likelihood,
  log_prior), a N(0, I) prior."""
  x = rng.normal(size=(num_examples, 3)).astype(np.float32)
  y = (x @ np.float32([1., -1., 0.5]) + rng.normal(size=num_examples)
       ).astype(np.float32)

  def log_likelihood(w, batch):
    return -0.5 * (tf.linalg.matvec(batch[0], w) - batch[1]) ** 2
  return x, y, log_likelihood, lambda w: -0.5 * tf.reduce_sum(w ** 2, -1)


def test_a_target_a_list_state_and_pooled_chains_agree_with_the_log_density():
  rng = np.random.default_rng(3)
  x, y, log_likelihood, log_prior = _regression(rng, 200)

  def log_prob(w):
    return tf.reduce_sum(log_likelihood(w, (x, y)), -1) + log_prior(w)
  target = tfp_sgmcmc.InMemoryTarget(log_likelihood, (x, y), full_batch=True,
                                     log_prior_fn=log_prior)
  draws = (np.float32([1., -1., 0.5]) + 0.07 * rng.normal(
      size=(60, 3, 3))).astype(np.float32)
  by_target = tfp_sgmcmc.ksd(draws, target, jit_compile=False)
  by_density = tfp_sgmcmc.ksd(draws, target_log_prob_fn=log_prob,
                              jit_compile=False)
  assert by_target.shape == (3,)
  np.testing.assert_allclose(by_target, by_density, rtol=1e-5)

  def split_log_prob(a, b):
    return log_prob(tf.concat([a, b], -1))
  by_parts = tfp_sgmcmc.ksd(
      [draws[..., :2], draws[..., 2:]],
      target_log_prob_fn=lambda s: split_log_prob(*s), jit_compile=False)
  np.testing.assert_allclose(by_parts, by_density, rtol=1e-5)
  pooled = tfp_sgmcmc.ksd(draws, target_log_prob_fn=log_prob,
                          pool_chains=True, jit_compile=False)
  one_chain = tfp_sgmcmc.ksd(
      np.transpose(draws, [1, 0, 2]).reshape(-1, 3),
      target_log_prob_fn=log_prob, num_chain_dims=0, jit_compile=False)
  np.testing.assert_allclose(pooled, one_chain, rtol=1e-5)


def test_the_score_from_examples_is_unbiased_and_its_noise_independent():
  # score_examples=m: each draw's score from its own m examples around the
  # draws' mean. Averaged over seeds it must be the exact score (a wrong
  # N / m scaling or centre term shows as a bias many standard errors
  # wide), and two draws' noises must be uncorrelated (a shared minibatch
  # would correlate them and bias the off-diagonal terms of KSD^2).
  rng = np.random.default_rng(5)
  x, y, log_likelihood, log_prior = _regression(rng, 400)
  target = tfp_sgmcmc.InMemoryTarget(log_likelihood, (x, y), batch_size=10,
                                     log_prior_fn=log_prior)
  states = np.float32([1., -1., 0.5]) + 0.3 * rng.normal(
      size=(6, 3)).astype(np.float32)
  states[1] = states[0]   # One minibatch for both would give one noise.
  centre = states.mean(0)
  with tf.GradientTape() as tape:
    s = tf.constant(states)
    tape.watch(s)
    exact = -tape.gradient(target.energy(s), s).numpy()
  score = stein._estimated_score_fn(target, 20, [3], jit_compile=False)
  seeds = tfp_sgmcmc.random.split_seed([7, 8], 400)
  noise = np.stack([score(tf.constant(states), tf.constant(centre),
                          seeds[k])[0].numpy() for k in range(400)]) - exact
  standard_error = noise.std(0) / np.sqrt(len(noise))
  assert np.all(standard_error > 0)
  assert np.max(np.abs(noise.mean(0)) / standard_error) < 4.5
  between_draws = np.corrcoef(noise[:, 0, 0], noise[:, 1, 0])[0, 1]
  assert abs(between_draws) < 4.5 / np.sqrt(len(noise))
  with pytest.raises(ValueError, match="estimates the score from examples"):
    tfp_sgmcmc.ksd(states[:, None], target_log_prob_fn=lambda w: -w ** 2,
                   score_examples=10)


def test_the_score_from_examples_takes_a_dict_state_as_a_list_one():
  # A dict state is the list of its values in key order: the same draws
  # give the same KSD with the same seed (a dict of chain shapes was once
  # passed on as the target's `parameter_shapes`, which refused it).
  rng = np.random.default_rng(6)
  x, y, log_likelihood, log_prior = _regression(rng, 300)

  def split(fn):
    return lambda s, *a: fn(tf.concat(list(s.values()) if isinstance(
        s, dict) else list(s), -1), *a)
  draws = (np.float32([1., -1., 0.5]) + 0.05 * rng.normal(
      size=(20, 2, 3))).astype(np.float32)
  values = []
  for state in ({"a": draws[..., :2], "b": draws[..., 2:]},
                [draws[..., :2], draws[..., 2:]]):
    target = tfp_sgmcmc.InMemoryTarget(
        split(log_likelihood), (x, y), batch_size=10,
        log_prior_fn=split(log_prior))
    values.append(tfp_sgmcmc.ksd(state, target, score_examples=30,
                                 seed=[1, 2], jit_compile=False))
  assert values[0].shape == (2,)
  np.testing.assert_array_equal(values[0], values[1])


def test_draws_beyond_max_draws_are_thinned_evenly():
  rng = np.random.default_rng(4)
  draws = rng.normal(size=(300, 2, 2)).astype(np.float32)

  def log_prob(w):
    return -0.5 * tf.reduce_sum(w ** 2, -1)
  thinned = tfp_sgmcmc.ksd(draws, target_log_prob_fn=log_prob,
                           max_draws=100, jit_compile=False)
  by_hand = tfp_sgmcmc.ksd(draws[::3], target_log_prob_fn=log_prob,
                           max_draws=100, jit_compile=False)
  np.testing.assert_array_equal(thinned, by_hand)


@pytest.mark.parametrize("kwargs, message", [
    (dict(), "give the posterior once"),
    (dict(target_log_prob_fn=lambda w: -w ** 2, beta=-1.5), "-1 < beta < 0"),
    (dict(target_log_prob_fn=lambda w: -w ** 2, max_draws=1),
     "`max_draws` must be >= 2"),
])
def test_bad_arguments_are_refused(kwargs, message):
  with pytest.raises(ValueError, match=message):
    tfp_sgmcmc.ksd(np.zeros([10, 2, 1], np.float32), **kwargs)


def test_summarize_reports_the_discrepancy_when_given_the_target():
  rng = np.random.default_rng(6)
  draws = rng.normal(size=(200, 3, 2)).astype(np.float32) + 0.3

  def log_prob(w):
    return -0.5 * tf.reduce_sum(w ** 2, -1)
  target = tfp_sgmcmc.LogProbFnTarget(log_prob)
  health = tfp_sgmcmc.summarize(draws, print_report=False, warn=False,
                                target=target)
  np.testing.assert_allclose(health.ksd, tfp_sgmcmc.ksd(
      draws, target, pool_chains=True, scale="diagonal"), rtol=1e-6)
  assert any("kernel Stein discrepancy" in n for n in health.notes)
  assert tfp_sgmcmc.summarize(draws, print_report=False,
                              warn=False).ksd is None


def test_the_score_cache_does_not_keep_a_target_alive():
  import gc
  import weakref

  def log_prob(w):
    return -0.5 * tf.reduce_sum(w ** 2, -1)
  target = tfp_sgmcmc.LogProbFnTarget(log_prob)
  tfp_sgmcmc.ksd(np.zeros([20, 2, 1], np.float32), target, jit_compile=False)
  alive = weakref.ref(target)
  del target
  gc.collect()
  assert alive() is None


def test_in_the_draws_sds_draws_too_narrow_score_worse_than_exact_ones():
  # Why `sample(ksd=True)` measures in the draws' sds. A posterior much
  # narrower than the unit kernel's width (sds near 0.01, as any large-N
  # regression's) is seen by the unit kernel only through its score, and
  # for draws too narrow by 0.8 the score is 0.8 times an exact draw's at
  # the same z: their KSD^2 is about 0.64 times the exact draws', so the
  # biased draws rank as closer. (In a `sample` run, 1,000 exact draws of
  # a 4-coordinate regression gave 6.5 to 44.8 over 8 sets, and SGHMC's
  # draws, sds 5% low, 19.5.) In the draws' own sds the narrow draws are
  # standardised to the same z, their standardised score is 0.64 times
  # the exact draws', and the Stein identity fails: they rank worse.
  rng = np.random.default_rng(7)
  a = rng.normal(size=(3, 3))
  covariance = 1e-4 * (a @ a.T + 0.1 * np.eye(3))
  lower = np.linalg.cholesky(covariance)
  precision = np.linalg.inv(covariance)

  def log_prob(w):
    return -0.5 * tf.einsum("...i,ij,...j->...", w, precision, w)
  z = rng.normal(size=(300, 16, 3))       # 16 sets of 300 draws
  ksds = {}
  for width in (1., 0.8):
    draws = width * z @ lower.T
    ksds[width] = [tfp_sgmcmc.ksd(draws, target_log_prob_fn=log_prob,
                                  scale=scale, jit_compile=False).numpy()
                   for scale in (None, "diagonal")]
  unit, in_sds = 0, 1
  assert np.all(ksds[0.8][unit] < ksds[1.][unit])
  assert np.all(ksds[0.8][in_sds] > ksds[1.][in_sds])


def test_a_streamed_targets_discrepancy_needs_no_jit_compile_argument():
  # The score reads a tf.data pipeline, which XLA cannot compile: with the
  # default jit_compile=True the call was refused, with a fix (tf.function
  # without jit_compile) that a caller of `ksd` could not apply.
  x = np.linspace(-1., 1., 40, dtype=np.float32)[:, None]
  full = tf.data.Dataset.from_tensor_slices(x).batch(8)
  streamed = tfp_sgmcmc.DatasetTarget(
      lambda w, b: -0.5 * (b[..., 0] - w) ** 2, full.repeat(), 40,
      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1),
      full_dataset=full)
  draws = (np.random.default_rng(0).normal(size=(50, 2, 1)) /
           np.sqrt(41.)).astype(np.float32)
  by_default = tfp_sgmcmc.ksd(draws, streamed)
  np.testing.assert_allclose(by_default, tfp_sgmcmc.ksd(
      draws, streamed, jit_compile=False), rtol=1e-6)
  # The same data in memory, under XLA, give the same discrepancy.
  in_memory = tfp_sgmcmc.InMemoryTarget(
      lambda w, b: -0.5 * (b[..., 0] - w) ** 2, x, batch_size=8,
      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1))
  np.testing.assert_allclose(by_default, tfp_sgmcmc.ksd(draws, in_memory),
                             rtol=1e-4)
