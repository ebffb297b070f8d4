"""TFP's modelling workflow: target_log_prob_fn, TFP's wrappers, composition,
JointDistribution targets, targets that say what they are (issue 15)."""

import numpy as np
import pytest
import scipy.special
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.internal import unnest

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, sample, variance_and_se

tfd, tfb = tfp.distributions, tfp.bijectors

MVN = tfd.MultivariateNormalDiag([1., -1.], [1., 2.])


def _kernels(**target):
  """One of every kernel on the given target (keyword target or fn)."""
  return {
      "SGLD": sg.SGLD(step_size=0.05, **target),
      "PreconditionedSGLD": sg.PreconditionedSGLD(step_size=0.01, **target),
      "SGHMC": sg.SGHMC(step_size=0.05, friction=1., **target),
      "NaiveSGHMC": sg.NaiveSGHMC(step_size=0.05, **target),
      "SGNHT": sg.SGNHT(step_size=0.05, **target),
      "SGNUTS": sg.SGNUTS(step_size=0.1, friction=1., max_tree_depth=3,
                          **target),
      "SGBD": sg.SGBD(step_size=0.5, **target),
      "AMAGOLD": sg.AMAGOLD(step_size=0.1, num_leapfrog_steps=3, friction=0.5,
                            **target),
      "UncalibratedAMAGOLD": sg.UncalibratedAMAGOLD(
          step_size=0.1, num_leapfrog_steps=3, friction=0.5, **target),
      "AmortizedBarker": sg.AmortizedBarker(step_size=0.5, num_steps=2,
                                            **target),
  }


@pytest.mark.parametrize("name", list(_kernels(target_log_prob_fn=MVN.log_prob)))
def test_every_kernel_takes_target_log_prob_fn_and_reports_it(name):
  kernel = _kernels(target_log_prob_fn=MVN.log_prob)[name]
  assert kernel.parameters["target_log_prob_fn"] == MVN.log_prob
  state = tf.zeros([3, 2])
  results = kernel.bootstrap_results(state)
  for _ in range(2):
    state, results = kernel.one_step(state, results, seed=[1, 2])
  tlp = unnest.get_innermost(results, "target_log_prob")
  # Full batch: the exact log density at the state the step returned.
  np.testing.assert_allclose(tlp, MVN.log_prob(state), rtol=1e-5, atol=1e-5)
  # And the kernel rebuilds itself from TFP's `copy`.
  copy = kernel.copy(target_log_prob_fn=lambda x: MVN.log_prob(x) + 1.)
  assert copy.parameters["target_log_prob_fn"] != MVN.log_prob


def test_mala_is_metropolis_hastings_around_full_batch_sgld():
  # At h = 0.9 plain SGLD's variances are 1/(1 - h lambda/2): 1.82 and 1.13
  # times the truth in the two coordinates; M-H removes the bias exactly.
  kernel = tfp.mcmc.MetropolisHastings(
      sg.SGLD(target_log_prob_fn=MVN.log_prob, step_size=0.9))
  draws, accepted = sample(kernel, tf.zeros([8, 2]), 3000, seed=[1, 2],
                           num_burnin_steps=200,
                           trace_fn=lambda _, r: r.is_accepted)
  assert 0.2 < np.mean(accepted) < 0.95
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert np.all(np.abs(mean - [1., -1.]) < NUM_SE * mean_se), (mean, mean_se)
  assert np.all(np.abs(var - [1., 4.]) < NUM_SE * var_se), (var, var_se)
  # Without the test the same proposal is visibly biased (the check above
  # would catch a missing or wrong correction).
  plain = sample(sg.SGLD(target_log_prob_fn=MVN.log_prob, step_size=0.9),
                 tf.zeros([8, 2]), 3000, seed=[1, 2], num_burnin_steps=200)
  plain_var, plain_se = variance_and_se(plain)
  assert abs(plain_var[0] - 1.) > NUM_SE * plain_se[0], plain_var


def _variance_problem(num_examples=10_000, batch_size=1000, scale=1.5):
  """y_i ~ N(0, v) with v ~ InverseGamma(a, b): v | y ~ InvGamma(a + N/2,
  b + sum y^2 / 2), so log v has mean log(b') - digamma(a') and variance
  trigamma(a')."""
  rng = np.random.default_rng(3)
  y = rng.normal(0., scale, size=num_examples).astype(np.float32)
  a, b = 2., 2.
  target = sg.InMemoryTarget(
      lambda v, yb: tfd.Normal(0., tf.sqrt(v)).log_prob(yb[..., 0]),
      y[:, None], batch_size=batch_size,
      log_prior_fn=lambda v: tfd.InverseGamma(a, b).log_prob(v[..., 0]))
  a_post, b_post = a + num_examples / 2, b + np.sum(y.astype(np.float64)**2) / 2
  log_mean = np.log(b_post) - scipy.special.digamma(a_post)
  log_var = scipy.special.polygamma(1, a_post)
  return target, log_mean, log_var


def test_transformed_kernel_samples_a_positive_parameter_exactly_with_amagold():
  target, log_mean, log_var = _variance_problem()
  sd = np.sqrt(log_var)
  kernel = tfp.mcmc.TransformedTransitionKernel(
      sg.AMAGOLD(target, step_size=0.25 * sd, num_leapfrog_steps=5,
                 friction=0.5 / sd), tfb.Exp())
  init = tf.fill([4, 1], np.float32(np.exp(log_mean)))
  draws, accepted = sample(
      kernel, init, 1500, seed=[4, 5],
      trace_fn=lambda _, r: r.inner_results.is_accepted)
  assert np.mean(accepted) > 0.15
  assert np.all(draws > 0.)  # The draws come back constrained.
  z = np.log(draws)
  mean, mean_se = mean_and_se(z)
  var, var_se = variance_and_se(z)
  assert abs(mean[0] - log_mean) < NUM_SE * mean_se[0], (mean, log_mean)
  assert abs(var[0] - log_var) < NUM_SE * var_se[0], (var, log_var)


def test_transformed_kernel_sgld_matches_its_predicted_bias():
  # In z = log v the posterior is Gaussian to O(1/sqrt(N)) with precision
  # lam = 1/trigamma(a'); SGLD with step h and gradient-noise variance V is
  # the recursion z' = z - h lam z + h noise + sqrt(2h) xi, stationary
  # variance (2 + h V) / (lam (2 - h lam)).
  target, log_mean, log_var = _variance_problem()
  lam = 1. / log_var
  h = 0.2 / lam
  kernel = sg.SGLD(target, step_size=h)
  ttk = tfp.mcmc.TransformedTransitionKernel(kernel, tfb.Exp())
  # V, the variance of the minibatch gradient in z at the mode: n examples
  # drawn with replacement, per-example gradient 1/2 - y_i^2 exp(-z) / 2.
  y = target.data[:, 0].numpy().astype(np.float64)
  per_example = 0.5 - 0.5 * y**2 * np.exp(-log_mean)
  noise_var = len(y)**2 / target.batch_size * np.var(per_example)
  predicted = (2. + h * noise_var) / (lam * (2. - h * lam))
  assert predicted > 1.5 * log_var  # The bias is large enough to test.
  init = tf.fill([4, 1], np.float32(np.exp(log_mean)))
  draws = sample(ttk, init, 3000, seed=[6, 7], num_burnin_steps=100)
  z = np.log(draws)
  var, var_se = variance_and_se(z)
  assert abs(var[0] - predicted) < NUM_SE * var_se[0], (var, predicted,
                                                         log_var)
  mean, mean_se = mean_and_se(z)
  assert abs(mean[0] - log_mean) < NUM_SE * mean_se[0]


def test_transformed_kernel_softplus_positive_parameter_exact_with_amagold():
  # The same conjugate model through Softplus instead of Exp; moments of v
  # itself: InvGamma(a', b') has mean b'/(a'-1), var b'^2/((a'-1)^2(a'-2)).
  # Small N and v ~ 0.25, where Softplus is far from linear: there the
  # log-det shifts the mean by ~0.2 posterior sd, which the check resolves
  # (at N = 10,000 and v ~ 2 a missing log-det would go unnoticed).
  target, _, _ = _variance_problem(num_examples=40, batch_size=10, scale=0.5)
  y = target.data[:, 0].numpy().astype(np.float64)
  a_post, b_post = 2. + len(y) / 2, 2. + np.sum(y**2) / 2
  v_mean = b_post / (a_post - 1.)
  v_var = b_post**2 / ((a_post - 1.)**2 * (a_post - 2.))
  # Posterior sd in z = softplus^-1(v): sd(v) / (dv/dz), dv/dz = 1 - e^-v.
  sd = np.sqrt(v_var) / (1. - np.exp(-v_mean))
  kernel = tfp.mcmc.TransformedTransitionKernel(
      sg.AMAGOLD(target, step_size=0.25 * sd, num_leapfrog_steps=5,
                 friction=0.5 / sd), tfb.Softplus())
  init = tf.fill([4, 1], np.float32(v_mean))
  draws, accepted = sample(
      kernel, init, 1500, seed=[4, 6],
      trace_fn=lambda _, r: r.inner_results.is_accepted)
  assert np.mean(accepted) > 0.15
  assert np.all(draws > 0.)
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert abs(mean[0] - v_mean) < NUM_SE * mean_se[0], (mean, v_mean)
  assert abs(var[0] - v_var) < NUM_SE * var_se[0], (var, v_var)


def test_transformed_kernel_samples_a_simplex_exactly_with_amagold():
  # Categorical observations with a Dirichlet prior: p | y ~
  # Dirichlet(alpha + counts). Minibatches of one-hot rows; the simplex is
  # sampled in R^{K-1} through IteratedSigmoidCentered. (SoftmaxCentered, the
  # Dirichlet's default event-space bijector, cannot be built with TFP 0.25 on
  # numpy >= 2.4: tfb.Pad calls np.reshape(newshape=...).)
  rng = np.random.default_rng(5)
  # Small N, so the posterior is wide and a missing log-det is visible.
  num_examples, k = 20, 3
  labels = rng.choice(k, size=num_examples, p=[0.2, 0.3, 0.5])
  onehot = np.eye(k, dtype=np.float32)[labels]
  alpha = np.array([2., 3., 4.])
  target = sg.InMemoryTarget(
      lambda p, yb: tf.einsum("...k,nk->...n", tf.math.log(p), yb),
      onehot, batch_size=5,
      log_prior_fn=lambda p: tfd.Dirichlet(alpha.astype(np.float32))
      .log_prob(p))
  post = alpha + onehot.sum(0)
  a0 = post.sum()
  p_mean = post / a0
  p_var = post * (a0 - post) / (a0**2 * (a0 + 1.))
  bijector = tfb.IteratedSigmoidCentered()
  # Posterior sd in the unconstrained space, from exact Dirichlet draws (only
  # to set the step size; the check below is against the exact moments).
  exact = rng.dirichlet(post, size=4000).astype(np.float32)
  sd = np.min(np.std(bijector.inverse(exact), axis=0))
  kernel = tfp.mcmc.TransformedTransitionKernel(
      sg.AMAGOLD(target, step_size=0.25 * sd, num_leapfrog_steps=5,
                 friction=0.5 / sd), bijector)
  init = tf.constant(np.tile(p_mean, [4, 1]), tf.float32)
  draws, accepted = sample(
      kernel, init, 1500, seed=[7, 8],
      trace_fn=lambda _, r: r.inner_results.is_accepted)
  assert np.mean(accepted) > 0.15, np.mean(accepted)
  draws = np.asarray(draws)
  assert np.all(draws > 0.)  # Draws come back on the simplex.
  np.testing.assert_allclose(draws.sum(-1), 1., atol=1e-5)
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert np.all(np.abs(mean - p_mean) < NUM_SE * mean_se), (mean, p_mean)
  assert np.all(np.abs(var - p_var) < NUM_SE * var_se), (var, p_var)


def test_transformed_kernel_samples_a_correlation_exactly_with_amagold():
  # y_i ~ N(0, C) with unit variances, C = [[1, rho], [rho, 1]] and an LKJ(c)
  # prior on its Cholesky factor: p(rho | y) is proportional to
  # (1 - rho^2)^(c-1) prod_i N(y_i; 0, C(rho)), whose moments come from 1-D
  # quadrature. Sampled through CorrelationCholesky (its log-det is needed:
  # without it the x-space density lacks (1 - rho^2)^(3/2)).
  rng = np.random.default_rng(6)
  num_examples, c, rho_true = 500, 2., 0.6
  cov = np.array([[1., rho_true], [rho_true, 1.]])
  y = rng.multivariate_normal([0., 0.], cov, size=num_examples)
  target = sg.InMemoryTarget(
      lambda chol, yb: tfd.MultivariateNormalTriL(
          scale_tril=chol[..., None, :, :]).log_prob(yb),
      y.astype(np.float32), batch_size=100,
      log_prior_fn=lambda chol: tfd.CholeskyLKJ(2, c).log_prob(chol))
  grid = np.linspace(-1., 1., 200_001)[1:-1]
  s11, s22, s12 = np.sum(y[:, 0]**2), np.sum(y[:, 1]**2), np.sum(
      y[:, 0] * y[:, 1])
  one_minus = 1. - grid**2
  log_post = ((c - 1.) * np.log(one_minus)
              - 0.5 * num_examples * np.log(one_minus)
              - (s11 + s22 - 2. * grid * s12) / (2. * one_minus))
  weights = np.exp(log_post - log_post.max())
  weights /= weights.sum()
  rho_mean = np.sum(weights * grid)
  rho_var = np.sum(weights * (grid - rho_mean)**2)
  # Posterior sd in x = rho / sqrt(1 - rho^2): sd(rho) (1 - rho^2)^(-3/2).
  sd = np.sqrt(rho_var) * (1. - rho_mean**2)**-1.5
  kernel = tfp.mcmc.TransformedTransitionKernel(
      sg.AMAGOLD(target, step_size=0.25 * sd, num_leapfrog_steps=5,
                 friction=0.5 / sd), tfb.CorrelationCholesky())
  init_chol = np.array([[1., 0.], [rho_mean, np.sqrt(1. - rho_mean**2)]])
  init = tf.constant(np.tile(init_chol, [4, 1, 1]), tf.float32)
  draws, accepted = sample(
      kernel, init, 1500, seed=[9, 10],
      trace_fn=lambda _, r: r.inner_results.is_accepted)
  assert np.mean(accepted) > 0.15, np.mean(accepted)
  draws = np.asarray(draws)
  # Valid Cholesky factors of correlation matrices: lower triangular,
  # positive diagonal, unit rows.
  assert np.all(draws[..., 0, 1] == 0.) and np.all(draws[..., 1, 1] > 0.)
  np.testing.assert_allclose(np.sum(draws**2, -1), 1., atol=1e-5)
  rho = draws[..., 1, 0]
  mean, mean_se = mean_and_se(rho)
  var, var_se = variance_and_se(rho)
  assert abs(mean - rho_mean) < NUM_SE * mean_se, (mean, rho_mean, mean_se)
  assert abs(var - rho_var) < NUM_SE * var_se, (var, rho_var, var_se)


def test_replica_exchange_with_full_batch_mala_replicas_is_exact():
  mixture = tfd.MixtureSameFamily(
      tfd.Categorical(probs=[0.3, 0.7]),
      tfd.Normal([-3., 3.], [0.7, 0.7]))
  true_mean = 0.7 * 3. - 0.3 * 3.
  true_var = 0.49 + 9. - true_mean**2
  remc = tfp.mcmc.ReplicaExchangeMC(
      target_log_prob_fn=mixture.log_prob,
      inverse_temperatures=[1., 0.3, 0.1],
      make_kernel_fn=lambda fn: tfp.mcmc.MetropolisHastings(
          sg.SGLD(target_log_prob_fn=fn, step_size=0.4)))
  draws = sample(remc, tf.zeros([8]), 2000, seed=[8, 9],
                 num_burnin_steps=100)
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert abs(mean - true_mean) < NUM_SE * mean_se, (mean, true_mean)
  assert abs(var - true_var) < NUM_SE * var_se, (var, true_var)


# --- composition ---------------------------------------------------------


def _two_part_log_prob(a, b):
  return (tfd.Normal(0., 1.).log_prob(a) +
          tf.reduce_sum(tfd.Normal(0., 2.).log_prob(b), -1))


@pytest.mark.parametrize("make", [
    lambda fn: sg.SGLD(target_log_prob_fn=fn, step_size=[0.01, 0.04]),
    lambda fn: sg.SGHMC(target_log_prob_fn=fn, step_size=[0.05, 0.1],
                        friction=1.),
    lambda fn: sg.AMAGOLD(target_log_prob_fn=fn, step_size=[0.1, 0.2],
                          num_leapfrog_steps=3, friction=0.5),
])
def test_tuple_states_and_one_step_size_per_part(make):
  state = (tf.zeros([4]), tf.zeros([4, 3]))
  draws = sample(make(_two_part_log_prob), state, 5, seed=[1, 2], jit=False)
  assert isinstance(draws, tuple) and draws[1].shape == (5, 4, 3)
  # A dict state, as TFP's JointDistributionNamed gives.
  dict_draws = sample(make(lambda **d: _two_part_log_prob(d["a"], d["b"])),
                      {"a": tf.zeros([4]), "b": tf.zeros([4, 3])}, 5,
                      seed=[1, 2], jit=False)
  assert set(dict_draws) == {"a", "b"}


def test_per_part_step_sizes_give_each_part_its_predicted_variance():
  # Independent parts with precisions 1 and 1/4, step sizes 0.2 and 1.6:
  # SGLD's stationary variance is 2 h / (lam h (2 - lam h)) per part.
  kernel = sg.SGLD(target_log_prob_fn=_two_part_log_prob,
                   step_size=[0.2, 1.6])
  draws = sample(kernel, (tf.zeros([8]), tf.zeros([8, 1])), 3000,
                 seed=[3, 4], num_burnin_steps=100)
  for part, lam, h in zip(draws, [1., 0.25], [0.2, 1.6]):
    part = np.asarray(part)
    var, se = variance_and_se(part.reshape(part.shape[:2] + (-1,)))
    predicted = 2. / (lam * (2. - lam * h))
    assert abs(var[0] - predicted) < NUM_SE * se[0], (var, predicted)


def test_per_part_step_sizes_under_step_size_adaptation():
  kernel = tfp.mcmc.SimpleStepSizeAdaptation(
      sg.AMAGOLD(target_log_prob_fn=_two_part_log_prob,
                 step_size=[0.05, 0.05], num_leapfrog_steps=3, friction=0.5),
      num_adaptation_steps=150, target_accept_prob=0.8)
  _, step_sizes = sample(
      kernel, (tf.zeros([4]), tf.zeros([4, 3])), 200, seed=[5, 6],
      trace_fn=lambda _, r: r.inner_results.accepted_results.step_size)
  assert len(step_sizes) == 2
  assert all(s[-1] > 0.1 for s in step_sizes)  # Grown from 0.05.


def test_sgnuts_under_dual_averaging_reports_log_accept_ratio():
  target = sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x**2, -1),
                                  gradient_noise_variance=0.1)
  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      sg.SGNUTS(target, step_size=0.01, friction=1., max_tree_depth=4),
      num_adaptation_steps=100, target_accept_prob=0.75)
  _, (step_size, log_accept) = sample(
      kernel, tf.zeros([4, 2]), 200, seed=[7, 8],
      trace_fn=lambda _, r: (r.new_step_size,
                             r.inner_results.log_accept_ratio))
  assert step_size[-1] > 0.05  # Tuned up from a too-small start.
  accept = np.exp(np.minimum(log_accept[100:], 0.)).mean()
  assert 0.6 < accept < 0.9, accept


# --- targets that say what they are ------------------------------------------


def test_in_memory_full_batch_uses_every_example_once_in_order():
  x = np.arange(50, dtype=np.float32)[:, None]
  full = sg.InMemoryTarget(lambda w, b: -(b[..., 0] - w) ** 2, x,
                           full_batch=True)
  np.testing.assert_array_equal(full.minibatch_indices([1, 2]), np.arange(50))
  assert full.is_full_batch and full.batch_size == 50
  w = tf.constant([[0.5]])
  np.testing.assert_allclose(full.minibatch_energy(w, [3, 4]), full.energy(w),
                             rtol=1e-6)
  draws = sg.InMemoryTarget(lambda w, b: -(b[..., 0] - w) ** 2, x,
                            batch_size=50).minibatch_indices([1, 2])
  assert len(np.unique(draws)) < 50  # With replacement, as documented.
  with pytest.raises(TypeError, match="full_batch=True"):
    sg.InMemoryTarget(lambda w, b: -(b[..., 0] - w) ** 2, x)


def test_amagold_on_a_dataset_target_says_it_is_not_exact():
  y = np.zeros([20, 1], np.float32)
  ds = tf.data.Dataset.from_tensor_slices(y)
  target = sg.DatasetTarget(lambda w, b: -(b[..., 0] - w) ** 2,
                            ds.repeat().batch(5), 20,
                            full_dataset=ds.batch(5))
  with pytest.warns(UserWarning, match="not guaranteed exact"):
    kernel = sg.AMAGOLD(target, step_size=0.1, num_leapfrog_steps=2,
                        friction=0.5)
  assert not kernel.is_calibrated and "DatasetTarget" in (
      kernel.calibration_note)
  exact = sg.AMAGOLD(sg.InMemoryTarget(lambda w, b: -(b[..., 0] - w) ** 2, y,
                                       batch_size=5),
                     step_size=0.1, num_leapfrog_steps=2, friction=0.5)
  assert exact.is_calibrated and not exact.calibration_note


# --- JointDistribution targets -------------------------------------------------


def _logistic_data(n=300, d=3, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)).astype(np.float32)
  p = 1. / (1. + np.exp(-x @ np.linspace(1., -1., d)))
  return x, (rng.uniform(size=n) < p).astype(np.int32)


def _named_model(x):
  d = x.shape[-1]
  return tfd.JointDistributionNamed(dict(
      scale=tfd.HalfNormal(1.),
      w=lambda scale: tfd.Independent(
          tfd.Normal(tf.zeros(d), scale[..., None]), 1),
      y=lambda w: tfd.Independent(
          tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1)))


def _sequential_model(x):
  d = x.shape[-1]
  return tfd.JointDistributionSequential([
      tfd.HalfNormal(1.),
      lambda scale: tfd.Independent(
          tfd.Normal(tf.zeros(d), scale[..., None]), 1),
      lambda w: tfd.Independent(
          tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1)])


def _coroutine_model(x):
  d = x.shape[-1]

  @tfd.JointDistributionCoroutine
  def model():
    scale = yield tfd.JointDistributionCoroutine.Root(
        tfd.HalfNormal(1., name="scale"))
    w = yield tfd.Independent(tfd.Normal(tf.zeros(d), scale[..., None]), 1,
                              name="w")
    yield tfd.Independent(tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1,
                          name="y")
  return model


@pytest.mark.parametrize("model,structure", [
    (_named_model, dict), (_sequential_model, list),
    (_coroutine_model, tuple)])
def test_joint_distribution_target_energy_and_structure(model, structure):
  x, y = _logistic_data()
  name = "y" if model is not _sequential_model else (
      model(x)._flat_resolve_names()[-1])  # pylint: disable=protected-access
  target = sg.JointDistributionTarget(model, {name: y}, covariates=x,
                                      batch_size=30)
  init = target.initial_state(4, seed=[1, 2])
  assert isinstance(init, structure)
  # The exact energy is the pinned model's log density in the unconstrained
  # space (the default event-space bijector's log-det included).
  pinned = model(x).experimental_pin(**{name: y})
  bij = pinned.experimental_default_event_space_bijector()
  ranks = tf.nest.map_structure(lambda s: s.rank, pinned.event_shape)
  want = (pinned.unnormalized_log_prob(bij.forward(init)) +
          bij.forward_log_det_jacobian(init, event_ndims=ranks))
  np.testing.assert_allclose(-target.energy(init), want, rtol=1e-5)
  # Only the likelihood is scaled by N/n: the minibatch estimate averaged
  # over all batches of a partition equals the exact energy.
  parts = np.split(np.arange(300), 10)
  estimates = [target._energy_from_batch(  # pylint: disable=protected-access
      init, target._gather(idx), 30) for idx in parts]  # pylint: disable=protected-access
  np.testing.assert_allclose(np.mean(estimates, 0), target.energy(init),
                             rtol=1e-4)
  draws = sample(sg.SGLD(target, 1e-3), init, 5, seed=[3, 4], jit=False)
  assert isinstance(draws, structure)
  constrained = target.constrain(draws)
  scale = (constrained["scale"] if structure is dict else constrained[0])
  assert np.all(np.asarray(scale) > 0.)


@pytest.mark.parametrize("make_kernel", [
    lambda t: sg.SGLD(t, step_size=1e-3),
    lambda t: sg.SGHMC(t, step_size=1e-2, friction=5.),
    lambda t: sg.AMAGOLD(t, step_size=1e-2, num_leapfrog_steps=3,
                         friction=1.),
], ids=["sgld", "sghmc", "amagold"])
def test_copy_with_a_new_target_samples_the_new_target(make_kernel):
  # `parameters` holds the old target's own `target_log_prob_fn`; a copy
  # given only a new `target` must sample the new one, not the old one.
  def target_at(centre):
    return sg.NoisyGradientTarget(
        lambda x: 0.5 * tf.reduce_sum((x - centre) ** 2, -1),
        gradient_noise_variance=0.)
  kernel = make_kernel(target_at(0.)).copy(target=target_at(3.))
  assert kernel.target_log_prob_fn.target is kernel.target
  state = tf.zeros([2, 1])
  kernel.bootstrap_results(state)
  np.testing.assert_allclose(kernel.target.energy(state), [4.5, 4.5])


_LOG_V_SD = float(np.sqrt(scipy.special.polygamma(1, 2. + 10_000 / 2)))
# Every other kernel under TransformedTransitionKernel(Exp) on the variance
# problem (SGLD and AMAGOLD have their own tests above). In z = log v the
# posterior is Gaussian to O(1/sqrt(N)) with sd _LOG_V_SD; there the SG
# recursions are linear (Barker's by symmetry), so their stationary mean is
# the posterior mean whatever their step-size bias in the variance. Step
# sizes: about 0.1 to 0.5 posterior sd per step (pSGLD's preconditioner is on
# the per-example gradient scale, so its step is about N times smaller).
# Measured |z| of the mean over seed [4, 5]: 0.03 to 1.25. That the log-det
# term is included is checked by the exact (AMAGOLD) tests above, where it
# moves the posterior by more than the Monte Carlo error.
_TRANSFORMED_KERNELS = {
    "sghmc_euler": lambda t: sg.SGHMC(t, step_size=0.1 * _LOG_V_SD,
                                      friction=1. / _LOG_V_SD),
    "sghmc_splitting": lambda t: sg.SGHMC(
        t, step_size=0.1 * _LOG_V_SD, friction=1. / _LOG_V_SD,
        integrator="splitting"),
    "sgnht": lambda t: sg.SGNHT(t, step_size=0.1 * _LOG_V_SD),
    "psgld": lambda t: sg.PreconditionedSGLD(t, step_size=1e-6),
    "sgnuts": lambda t: sg.SGNUTS(t, step_size=0.1 * _LOG_V_SD,
                                  friction=1. / _LOG_V_SD, max_tree_depth=3),
    "sgbd": lambda t: sg.SGBD(t, step_size=0.5 * _LOG_V_SD),
    "amortized_barker": lambda t: sg.AmortizedBarker(
        t, step_size=0.5 * _LOG_V_SD, num_steps=5),
}


@pytest.mark.parametrize("name", sorted(_TRANSFORMED_KERNELS))
def test_transformed_kernel_works_around_every_kernel(name):
  target, log_mean, _ = _variance_problem()
  kernel = tfp.mcmc.TransformedTransitionKernel(
      _TRANSFORMED_KERNELS[name](target), tfb.Exp())
  init = tf.fill([4, 1], np.float32(np.exp(log_mean)))
  draws = np.asarray(sample(kernel, init, 1500, seed=[4, 5]))
  assert np.all(draws > 0.)  # The draws come back constrained.
  mean, mean_se = mean_and_se(np.log(draws))
  assert abs(mean[0] - log_mean) < NUM_SE * mean_se[0], (mean, log_mean)


def _logistic_target(batch_size=20):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 3)).astype(np.float32)
  y = (rng.uniform(size=200) < 0.5).astype(np.float32)

  def log_likelihood(w, batch):
    xb, yb = batch
    logits = tf.einsum("nd,...d->...n", xb, w)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(yb, tf.shape(logits)), logits=logits)
  return sg.InMemoryTarget(log_likelihood, (x, y), batch_size,
                           log_prior_fn=lambda w: -0.5 * tf.reduce_sum(
                               w ** 2, -1))


# The kernels whose update uses only the gradient (issue 19, third round).
_ENERGY_FREE = {
    "sgld": lambda t, **kw: sg.SGLD(t, step_size=1e-3, **kw),
    "sghmc_fisher": lambda t, **kw: sg.SGHMC(
        t, step_size=1e-2, friction=5., noise_estimate="empirical_fisher",
        **kw),
    "sghmc_splitting": lambda t, **kw: sg.SGHMC(
        t, step_size=1e-2, friction=5., integrator="splitting",
        momentum_resampling_period=7, **kw),
    "psgld": lambda t, **kw: sg.PreconditionedSGLD(t, step_size=1e-3, **kw),
    "sgnht": lambda t, **kw: sg.SGNHT(t, step_size=1e-2, **kw),
    "sgbd_tempered": lambda t, **kw: sg.SGBD(
        t, step_size=0.1, variant="corrected", temperature=2., **kw),
}


@pytest.mark.parametrize("name", sorted(_ENERGY_FREE))
def test_compute_energy_false_is_the_same_chain_with_nan_energies(name):
  # TFP's UncalibratedLangevin(compute_acceptance=False) precedent: the
  # energy does not feed the update, so skipping it must leave the chain
  # bit for bit as it was (compiled with XLA, which then drops the energy's
  # log1p), and the fields it would fill hold NaN.
  make = _ENERGY_FREE[name]
  target = _logistic_target()
  init = tf.constant(np.random.default_rng(1).normal(
      size=(4, 3)).astype(np.float32))
  trace = lambda _, r: (r.energy, r.target_log_prob, r.diverged)
  draws, (energy, _, _) = sample(make(target), init, 25, seed=[3, 4],
                                 trace_fn=trace)
  kernel = make(target, compute_energy=False)
  same, (nan_energy, nan_tlp, diverged) = sample(kernel, init, 25,
                                                 seed=[3, 4], trace_fn=trace)
  np.testing.assert_array_equal(np.asarray(same), np.asarray(draws))
  assert np.all(np.isfinite(energy))
  assert np.all(np.isnan(nan_energy)) and np.all(np.isnan(nan_tlp))
  assert nan_energy.shape == energy.shape and not np.any(diverged)
  results = kernel.bootstrap_results(init)
  assert np.all(np.isnan(results.energy)) and results.energy.shape == [4]
  # Kept in `parameters`, so TFP's copy (and its wrappers) keep it.
  assert kernel.parameters["compute_energy"] is False
  assert kernel.copy(target=target).compute_energy is False
  assert make(target).compute_energy is True


def test_compute_energy_false_under_transformed_transition_kernel():
  # TransformedTransitionKernel rebuilds the kernel with `copy`: the flag
  # is kept and the step needs only the gradient through the bijector.
  kernel = tfp.mcmc.TransformedTransitionKernel(
      sg.SGLD(_logistic_target(), 1e-3, compute_energy=False), tfb.Exp())
  state = tf.ones([2, 3])
  results = kernel.bootstrap_results(state)
  assert results.inner_results is not None
  new_state, results = kernel.one_step(state, results, seed=[1, 2])
  assert kernel.inner_kernel.compute_energy is False
  assert np.all(np.isnan(results.inner_results.energy))
  assert np.all(np.isfinite(new_state)) and not np.any(
      results.inner_results.diverged)
  naive = sg.NaiveSGHMC(_logistic_target(), 1e-2, compute_energy=False)
  assert naive.copy().parameters["compute_energy"] is False


@pytest.mark.parametrize("acceptance_energy", ["exact", "minibatch"])
def test_amagold_compute_energy_false_is_the_same_chain(acceptance_energy):
  # The last leapfrog step's minibatch energy is a diagnostic: neither test
  # reads it (exact: U(theta*); minibatch: two energies on a batch of its
  # own), so skipping it leaves every accept/reject and state as it was.
  target = _logistic_target()
  init = tf.constant(np.random.default_rng(1).normal(
      size=(4, 3)).astype(np.float32))
  def make(**kw):
    return sg.AMAGOLD(target, 0.05, num_leapfrog_steps=3, friction=1.,
                      acceptance_energy=acceptance_energy, **kw)
  trace = lambda _, r: (r.is_accepted, r.accepted_results.minibatch_energy,
                        r.accepted_results.diverged)
  # A graph without XLA (the other kernels' test compiles with XLA).
  draws, (accepted, energy, _) = sample(make(), init, 15, seed=[3, 4],
                                        trace_fn=trace, jit=False)
  kernel = make(compute_energy=False)
  same, (same_accepted, nan_energy, diverged) = sample(
      kernel, init, 15, seed=[3, 4], trace_fn=trace, jit=False)
  np.testing.assert_array_equal(np.asarray(same), np.asarray(draws))
  np.testing.assert_array_equal(same_accepted, accepted)
  assert 0 < np.mean(accepted) < 1  # The test decided something.
  assert np.all(np.isfinite(energy)) and np.all(np.isnan(nan_energy))
  assert not np.any(diverged)
  assert kernel.copy().inner_kernel.compute_energy is False


_ENERGY_FREE_KERNELS = {
    "SGLD": lambda t, **kw: sg.SGLD(t, 0.1, **kw),
    "SGHMC": lambda t, **kw: sg.SGHMC(t, 0.1, friction=1., **kw),
    "PreconditionedSGLD": lambda t, **kw: sg.PreconditionedSGLD(t, 0.1, **kw),
    "SGNHT": lambda t, **kw: sg.SGNHT(t, 0.1, **kw),
    "SGBD": lambda t, **kw: sg.SGBD(t, 0.5, variant="extreme", **kw),
}


@pytest.mark.parametrize("name", sorted(_ENERGY_FREE_KERNELS))
def test_diverging_chain_is_flagged_without_the_energy(name):
  # U = -10 x, finite everywhere, with a NaN gradient from x = 3 on: every
  # kernel climbs from x = 0 and meets the NaN gradient; a chain at -1000
  # cannot reach it in 60 steps. With compute_energy=False the flag reads the
  # gradient (SGBD's move stays finite with a NaN gradient: without that
  # check its chain 0 is not flagged and this test fails).
  @tf.custom_gradient
  def energy_nan_gradient(x):
    def gradient(upstream):
      return upstream[..., None] * tf.where(
          x < 3., tf.fill(tf.shape(x), -10.), tf.fill(tf.shape(x), np.nan))
    return -10. * x[..., 0], gradient
  target = sg.NoisyGradientTarget(energy_nan_gradient,
                                  gradient_noise_variance=0.)
  kernel = _ENERGY_FREE_KERNELS[name](target, compute_energy=False)
  draws, (diverged, reported) = sample(
      kernel, tf.constant([[0.], [-1000.]]), 60, seed=[1, 2],
      trace_fn=lambda _, r: (r.diverged, r.energy))
  draws, diverged = np.asarray(draws), np.asarray(diverged)
  assert np.all(np.isnan(reported))
  assert diverged[-1, 0] and not diverged[:, 1].any()
  assert np.all(np.isfinite(draws))
  first = np.argmax(diverged[:, 0])
  assert diverged[first:, 0].all()
  assert np.all(draws[first:, 0] == draws[first, 0])
  assert draws[first, 0, 0] >= 3.  # The state whose gradient was NaN.
