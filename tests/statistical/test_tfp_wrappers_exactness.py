"""TFP's wrappers around the kernels sample the right law: MetropolisHastings
around full-batch SGLD (MALA) removes SGLD's bias; TransformedTransitionKernel
with exact AMAGOLD samples positive, simplex and correlation parameters
exactly (log-det included), with SGLD its predicted bias, and works around
every other kernel; ReplicaExchangeMC with MALA, AMAGOLD or amortized Barker
replicas is exact; per-part
step sizes give each part its predicted variance.
"""

import numpy as np
import pytest
import scipy.special
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import NUM_SE, mean_and_se, sample, variance_and_se
from support.variance_problem import variance_problem


tfd, tfb = tfp.distributions, tfp.bijectors
MVN = tfd.MultivariateNormalDiag([1., -1.], [1., 2.])


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


def test_transformed_kernel_samples_a_positive_parameter_exactly_with_amagold():
  target, log_mean, log_var = variance_problem()
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
  target, log_mean, log_var = variance_problem()
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
  target, _, _ = variance_problem(num_examples=40, batch_size=10, scale=0.5)
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


@pytest.mark.parametrize("make_kernel", [
    lambda fn: sg.AMAGOLD(target_log_prob_fn=fn, step_size=0.3,
                          num_leapfrog_steps=3, friction=0.5),
    lambda fn: sg.AmortizedBarker(target_log_prob_fn=fn, step_size=0.5,
                                  num_steps=2),
], ids=["AMAGOLD", "AmortizedBarker"])
def test_replica_exchange_with_exact_amortized_replicas_is_exact(
    make_kernel):
  # After a swap, ReplicaExchangeMC re-evaluates only the innermost
  # `target_log_prob` of each replica's results: the amortized test must
  # take U(theta) from there, not from a cache of the pre-swap state at the
  # other temperature (which widened the sds by 7% and 6%).
  gaussian = tfd.MultivariateNormalDiag([1., -2.], [0.5, 1.5])
  remc = tfp.mcmc.ReplicaExchangeMC(
      target_log_prob_fn=gaussian.log_prob,
      inverse_temperatures=[1., 0.3, 0.1], make_kernel_fn=make_kernel)
  draws, swapped = sample(
      remc, tf.zeros([8, 2]), 4000, seed=[10, 11], num_burnin_steps=500,
      trace_fn=lambda _, r: r.is_swap_accepted_adjacent)
  assert np.mean(swapped) > 0.1  # The replicas do exchange states.
  mean, mean_se = mean_and_se(draws)
  var, var_se = variance_and_se(draws)
  assert np.all(np.abs(mean - [1., -2.]) < NUM_SE * mean_se), (mean, mean_se)
  assert np.all(np.abs(var - [0.25, 2.25]) < NUM_SE * var_se), (var, var_se)


def _two_part_log_prob(a, b):
  return (tfd.Normal(0., 1.).log_prob(a) +
          tf.reduce_sum(tfd.Normal(0., 2.).log_prob(b), -1))


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
  target, log_mean, _ = variance_problem()
  kernel = tfp.mcmc.TransformedTransitionKernel(
      _TRANSFORMED_KERNELS[name](target), tfb.Exp())
  init = tf.fill([4, 1], np.float32(np.exp(log_mean)))
  draws = np.asarray(sample(kernel, init, 1500, seed=[4, 5]))
  assert np.all(draws > 0.)  # The draws come back constrained.
  mean, mean_se = mean_and_se(np.log(draws))
  assert abs(mean[0] - log_mean) < NUM_SE * mean_se[0], (mean, log_mean)
