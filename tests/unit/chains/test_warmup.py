"""`warm_up`: Stan's windows and the refusals that name their fix (that the
tuned step size does not depend on the user's first guess is a run of 400
warm-up steps per start: tests/statistical/test_warmup_step_size.py; the
dense mass learnt from a correlated posterior is a whole warm-up, in
tests/integration/test_sample_one_call.py)."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import window_adaptation
from support.keras_fits import logistic_setup

tfd = tfp.distributions


def _logistic_target():
  x, y, _ = logistic_setup()

  def log_likelihood(w, batch):
    xb, yb = batch
    logits = tf.einsum("nd,...d->...n", xb, w)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(yb, tf.shape(logits)), logits=logits)
  return sg.InMemoryTarget(log_likelihood, (x, y), batch_size=32,
                           log_prior_fn=lambda w: -0.5 * tf.reduce_sum(
                               w ** 2, -1))


def test_windows_are_stans():
  assert sg.warmup_windows(1000) == [
      ("fast", 75), ("slow", 25), ("slow", 50), ("slow", 100),
      ("slow", 200), ("slow", 500), ("fast", 50)]
  for n in (20, 100, 149, 150, 151, 400, 777, 5000):
    windows = sg.warmup_windows(n)
    assert sum(k for _, k in windows) == n, (n, windows)
    assert windows[0][0] == windows[-1][0] == "fast"
    assert any(kind == "slow" for kind, _ in windows)


def test_refuses_what_it_cannot_tune():
  target = _logistic_target()
  with pytest.raises(TypeError, match="warm_up tunes AMAGOLD, SGHMC"):
    sg.warm_up(sg.SGBD(target, step_size=0.1), tf.zeros([3]))
  with pytest.raises(ValueError, match="SGLD has no mass matrix"):
    sg.warm_up(sg.SGLD(target, step_size=0.1), tf.zeros([3]),
               adapt_mass=True)
  with pytest.raises(TypeError, match="schedule"):
    sg.warm_up(sg.SGLD(target, step_size=sg.PolynomialDecay(0.1, 1., 0.5)),
               tf.zeros([3]))
  with pytest.raises(ValueError, match="temperature 1"):
    sg.warm_up(sg.SGLD(target, step_size=0.1, temperature=0.5),
               tf.zeros([3]))
  with pytest.raises(ValueError, match="target_accept_prob"):
    sg.warm_up(sg.SGLD(target, step_size=0.1), tf.zeros([3]),
               target_accept_prob=1.5)


def test_a_stream_without_its_full_data_is_refused_by_warm_ups_name():
  # The test's own refusal named `acceptance_energy`, which SGLD, SGHMC and
  # SGNHT do not take: warm_up's names the fix that applies to them.
  x, y, _ = logistic_setup()
  stream = sg.DatasetTarget(
      _logistic_target()._log_likelihood_fn,  # pylint: disable=protected-access
      tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(50),
      num_examples=len(x))
  for kernel in (sg.SGLD(stream, step_size=1e-4),
                 sg.SGHMC(stream, step_size=1e-2, friction=1.),
                 sg.SGNHT(stream, step_size=1e-2)):
    with pytest.raises(sg.TargetCapabilityError, match=(
        rf"warm_up tunes {type(kernel).__name__}'s step size on an exact "
        r"(.|\n)*DatasetTarget has none(.|\n)*full_dataset=")):
      sg.warm_up(kernel, tf.zeros([3]), num_steps=20, seed=[0, 1])


def _correlated_gaussian():
  covariance = np.array([[1., 2.85], [2.85, 9.]], np.float32)  # rho 0.95
  posterior = tfd.MultivariateNormalTriL(
      [1., -1.], tf.linalg.cholesky(covariance))
  return sg.LogProbFnTarget(posterior.log_prob), covariance


def test_dense_mass_needs_one_vector_per_chain():
  target, _ = _correlated_gaussian()
  kernel = sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=10,
                      friction=0.5)
  two_parts = sg.AMAGOLD(
      sg.LogProbFnTarget(lambda a, b: -0.5 * tf.reduce_sum(a**2 + b**2, -1)),
      step_size=0.1, num_leapfrog_steps=10, friction=0.5)
  with pytest.raises(ValueError, match="`dense_mass=True` needs"):
    sg.warm_up(two_parts, [tf.zeros([4, 1]), tf.zeros([4, 1])],
               num_steps=20, dense_mass=True)
  with pytest.raises(ValueError, match="`dense_mass=True` needs"):
    sg.warm_up(kernel, tf.zeros([4, 2]), num_steps=20, adapt_mass=False,
               dense_mass=True)
  with pytest.raises(ValueError, match="`mass='low_rank'` needs"):
    sg.warm_up(two_parts, [tf.zeros([4, 1]), tf.zeros([4, 1])],
               num_steps=20, mass="low_rank")
  with pytest.raises(ValueError, match=r"`mass` must be one of .* got "
                     "mass='full'"):
    sg.warm_up(kernel, tf.zeros([4, 2]), num_steps=20, mass="full")
  with pytest.raises(ValueError, match="got mass='low_rank', dense_mass"):
    sg.warm_up(kernel, tf.zeros([4, 2]), num_steps=20, mass="low_rank",
               dense_mass=True)
  with pytest.raises(ValueError, match=r"`mass_rank` .* \[1, 2\].* got 3"):
    sg.warm_up(kernel, tf.zeros([4, 2]), num_steps=20, mass="low_rank",
               mass_rank=3)


def test_regularized_covariance_is_positive_definite_from_few_draws():
  # Three draws of five coordinates: a covariance of rank 2, made positive
  # definite by the shrinkage towards its diagonal.
  draws = np.random.default_rng(0).normal(size=(3, 5))
  sample = np.cov(draws.T, bias=True)
  assert np.linalg.matrix_rank(sample) < 5
  regular = window_adaptation.regularized_covariance(
      tf.constant(sample), 3.).numpy()
  assert np.all(np.linalg.eigvalsh(regular) > 0)
  # Its diagonal is the regularised variance of the diagonal.
  np.testing.assert_allclose(
      np.diag(regular),
      window_adaptation.regularized_variance(np.diag(sample), 3.))


def test_regularized_variance_is_relative_to_the_window_scale():
  # Scaling every variance by c scales M^{-1} by c (Stan's rule, shrinking
  # towards an absolute 1e-3, is not), and each variance of a state that
  # spans 1e-8 to 1e4 comes back within (L / var)^{5 / (n + 5)}, L their
  # geometric mean: within 3.6% at n = 2,000 (1e6^(5/2005) = 1.035).
  variance = 10. ** np.arange(-8., 5.)
  for n in (25., 2000.):
    base = window_adaptation.regularized_variance(variance, n).numpy()
    for c in (1e-6, 1e3):
      np.testing.assert_allclose(
          window_adaptation.regularized_variance(c * variance, n), c * base,
          rtol=1e-10)
    level = np.exp(np.mean(np.log(variance)))
    np.testing.assert_allclose(
        base, variance * (level / variance) ** (5. / (n + 5.)), rtol=1e-10)
  assert np.all(np.abs(np.log(base / variance)) < np.log(1.036))
  # One float32 state part per decade, n a tensor: the same.
  parts = [tf.constant([v], tf.float32) for v in variance]
  got = window_adaptation.regularized_variance(parts, tf.constant(2000.))
  np.testing.assert_allclose(np.concatenate(got), base, rtol=1e-5)


def test_a_coordinate_that_never_moved_keeps_its_mass():
  # A window whose draws did not move a coordinate (every test rejected)
  # says nothing of its scale: M^{-1} stays; with no previous mass it is
  # the level of the other coordinates (1 when none moved).
  got = window_adaptation.regularized_variance(
      [tf.constant([4., 0., 1.])], 100., [tf.constant([2., 3., 5.])])
  np.testing.assert_allclose(got[0].numpy()[1], 3.)
  alone = window_adaptation.regularized_variance(
      [tf.constant([4., 0., 1.])], 100.)
  np.testing.assert_allclose(alone[0].numpy()[1], 2., rtol=1e-6)
  none = window_adaptation.regularized_variance([tf.zeros([3])], 100.)
  np.testing.assert_allclose(none[0], 1.)
  dense = window_adaptation.regularized_covariance(
      tf.constant([[4., 0.], [0., 0.]]), 100.,
      tf.constant([[2., 0.5], [0.5, 3.]])).numpy()
  np.testing.assert_allclose(np.diag(dense), [4., 3.], rtol=1e-6)


def test_regularized_low_rank_keeps_the_directions_farthest_from_one():
  # A correlation matrix with eigenvalues 0.015, 0.073, 0.29 and 3.6: rank
  # 2 keeps 0.015 and 0.073 (farthest from 1 on the log scale: a squeezed
  # direction limits the step size as much as a stretched one), and at
  # full rank M^{-1} is the dense estimate.
  rng = np.random.default_rng(1)
  w, _ = np.linalg.qr(rng.normal(size=(4, 4)))
  correlation = w @ np.diag([30., 1.2, 0.9, 0.05]) @ w.T
  s = np.diag(np.sqrt(np.diag(correlation)))
  correlation = np.linalg.inv(s) @ correlation @ np.linalg.inv(s)
  sd = np.array([1e-3, 0.1, 1., 50.])
  covariance = tf.constant(np.diag(sd) @ correlation @ np.diag(sd))
  n = 1e12  # No shrinkage: the estimate is the covariance itself.
  scale, basis, lam = (x.numpy() for x in
                       window_adaptation.regularized_low_rank(
                           covariance, n, rank=4))
  rebuilt = np.diag(scale) @ (np.eye(4) + basis @ np.diag(lam - 1.) @
                              basis.T) @ np.diag(scale)
  np.testing.assert_allclose(rebuilt, covariance, rtol=1e-6, atol=1e-12)
  _, _, lam = window_adaptation.regularized_low_rank(covariance, n, rank=2)
  true = np.linalg.eigvalsh(correlation)
  np.testing.assert_allclose(true, [0.0155, 0.0727, 0.287, 3.63], rtol=1e-2)
  np.testing.assert_allclose(sorted(lam.numpy()), true[:2], rtol=1e-6)


@pytest.mark.parametrize("make", [
    lambda t, m: sg.SGHMC(t, step_size=1e-3, friction=1.,
                          momentum_distribution=m),
    lambda t, m: sg.SGNHT(t, step_size=1e-3, momentum_distribution=m),
    lambda t, m: sg.AMAGOLD(t, 1e-3, num_leapfrog_steps=5, friction=0.5,
                            momentum_distribution=m)])
def test_a_kernels_own_mass_is_the_one_its_step_size_is_tuned_with(make):
  # sds 0.01: with M^{-1} = 1e-4 I the posterior is standard in the
  # velocity's units, and the tuned step size is of order 1; tested with
  # the identity mass instead, it would be of order 0.01.
  target = sg.LogProbFnTarget(lambda w: -0.5e4 * tf.reduce_sum(w**2, -1))
  mass = sg.dynamics.mass.dense_momentum_distribution(1e-4 * tf.eye(2))
  kernel = make(target, mass)
  warm = sg.warm_up(kernel, tf.zeros([4, 2]), num_steps=150, seed=[0, 1],
                    adapt_mass=False, jit_compile=False)
  assert warm.report.step_size > 0.2, warm.report.step_size
  assert warm.kernel.momentum_distribution is mass


def test_one_chain_of_a_scalar_is_warmed_up():
  # A state of shape [] (one chain, one number) failed before its first
  # test: the identity mass read the state's last axis, which it lacks.
  target = sg.LogProbFnTarget(lambda x: tfd.Normal(2., 0.5).log_prob(x))
  kernel = sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=3,
                      friction=0.5)
  warm = sg.warm_up(kernel, tf.constant(2.), num_steps=40, seed=[0, 1],
                    adapt_num_leapfrog_steps=False, jit_compile=False)
  assert warm.state.shape == [] and np.shape(warm.report.variance[0]) == ()
  assert warm.report.mass == "diagonal" and warm.report.step_size > 0.
