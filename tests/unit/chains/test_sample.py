"""`tfp_sgmcmc.sample`'s rules, checked without a run: full-batch gradients
on a small data set, which targets can give each chain its own minibatches,
and the refusals that come before any sampling. The whole call (warm-up,
sampling, report) is tests/integration/test_sample_one_call.py."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import sample as sample_lib
from tfp_sgmcmc.chains import sample_kernels
from tfp_sgmcmc.chains import start as start_lib

from support.linear_regression import write_shards
from support.sample_problems import (FAST, logistic, normal_model,
                                     poisson_near_mode, random_intercepts)

tfd = tfp.distributions
tfb = tfp.bijectors


def test_a_target_that_cannot_be_rebuilt_says_so():
  target, x, y = logistic()
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(50)
  streamed = sg.DatasetTarget(target._log_likelihood_fn, dataset,
                              num_examples=2000,
                              log_prior_fn=target._log_prior_fn,
                              full_dataset=tf.data.Dataset.from_tensor_slices(
                                  (x, y)).batch(500))
  kept, note = start_lib.independent(streamed, [3])
  assert kept is streamed
  assert note.startswith("SHARED minibatches: a DatasetTarget cannot")
  # An in-memory target can: it is rebuilt with one minibatch per chain.
  rebuilt, note = start_lib.independent(target, [3])
  assert rebuilt.independent_minibatches and note == "independent minibatches"
  # Through control variates, around the same centre.
  centred = sg.ControlVariateTarget(target, tf.zeros([3]))
  rebuilt, _ = start_lib.independent(centred, [3])
  assert isinstance(rebuilt, sg.ControlVariateTarget)
  assert rebuilt.base_target.independent_minibatches


@pytest.mark.parametrize("kernel", [None, "sghmc"])
def test_a_stream_without_its_full_dataset_is_refused_for_every_kernel(
    kernel):
  # SGHMC draws with no test of its own, yet `sample` tunes its step size
  # on an exact test and finds the mode on the full-data energy: the
  # refusal says so, where it spoke of a test SGHMC does not use.
  target, x, y = logistic()
  streamed = sg.DatasetTarget(
      target._log_likelihood_fn,
      tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(50),
      num_examples=2000, log_prior_fn=target._log_prior_fn)
  with pytest.raises(sg.TargetCapabilityError, match=(
      r"warms up every kernel \(SGHMC and SGLD too\) on an exact "
      r"Metropolis-Hastings test.*DatasetTarget\(\.\.\., full_dataset")):
    sg.sample(streamed, kernel=kernel, parameter_shapes=[3], **FAST)


def test_a_stream_that_ends_is_refused_before_any_step():
  # Not repeated, the stream ran out 2.5 s into the warm-up of a new-user
  # trial (a long graph error), or minutes in where it is long; `sample`
  # takes a batch per gradient for thousands of steps.
  target, x, y = logistic()
  full = tf.data.Dataset.from_tensor_slices((x, y)).batch(500)
  ends = sg.DatasetTarget(
      target._log_likelihood_fn,
      tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000).batch(50),
      num_examples=2000, log_prior_fn=target._log_prior_fn,
      full_dataset=full)
  with pytest.raises(ValueError, match=(
      r"The DatasetTarget's `dataset` ends after 40 batches \(it is not "
      r"repeated\).*repeat it \(dataset.repeat\(\)\)")):
    sg.sample(ends, parameter_shapes=[3], **FAST)
  # Through control variates too; a repeated stream passes the check.
  with pytest.raises(ValueError, match="ends after 40 batches"):
    sg.sample(sg.ControlVariateTarget(ends, tf.zeros([3])),
              parameter_shapes=[3], **FAST)
  start_lib.check_repeated(sg.DatasetTarget(
      target._log_likelihood_fn,
      tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(50),
      num_examples=2000, full_dataset=full))


def test_a_kernel_name_sample_does_not_know_is_refused():
  target, _, _ = logistic()
  with pytest.raises(ValueError, match="`kernel` = 'nuts'"):
    sg.sample(target, kernel="nuts", parameter_shapes=[3], **FAST)


def test_kernel_by_name_and_its_dense_mass_follow_the_gradients():
  target, _, _ = logistic()
  # AMAGOLD: friction 0.5 on raw minibatch gradients, the low friction on
  # exact ones (control variates or a full batch).
  noisy = sample_kernels.build_kernel(None, target, 0.01, noisy=True)
  exact = sample_kernels.build_kernel("AMAGOLD", target, 0.01, noisy=False)
  assert isinstance(noisy, sg.AMAGOLD) and noisy.friction == 0.5
  assert exact.friction == sample_lib.AMAGOLD_EXACT_GRADIENT_FRICTION
  # SGLD's step size is the square of the Hamiltonian kernels' one.
  sgld = sample_kernels.build_kernel("sgld", target, 0.1, noisy=True)
  assert isinstance(sgld, sg.SGLD)
  np.testing.assert_allclose(float(sgld.step_size), 0.01, rtol=1e-6)
  # Dense where the warm-up is long enough for a covariance, and the
  # kernel takes a mass; diagonal otherwise.
  states = tf.zeros([4, 3])
  steps = sample_lib.DENSE_MIN_STEPS
  assert sample_lib._dense_applies(exact, states, None, steps)
  assert not sample_lib._dense_applies(exact, states, None, steps - 1)
  assert not sample_lib._dense_applies(sgld, states, None, steps)
  assert not sample_lib._dense_applies(exact, states, False, steps)


def test_full_batch_rule_below_the_threshold_only():
  largest = start_lib.FULL_BATCH_MAX_EXAMPLES
  small, _, _ = logistic(num_examples=largest)
  large, _, _ = logistic(num_examples=largest + 1)
  chosen, note = start_lib.full_batch(small, None)
  assert chosen.is_full_batch and chosen.batch_size == largest
  assert note.startswith(f"full batch: N = {largest:,} <= {largest:,}")
  kept, note = start_lib.full_batch(large, None)
  assert kept is large and note is None
  # A ControlVariateTarget on a small data set: its base's full batch.
  chosen, _ = start_lib.full_batch(
      sg.ControlVariateTarget(small, tf.zeros([3])), None)
  assert isinstance(chosen, sg.InMemoryTarget) and chosen.is_full_batch
  # The override, both ways.
  assert start_lib.full_batch(small, False) == (small, None)
  assert start_lib.full_batch(large, True)[0].is_full_batch
  with pytest.raises(TypeError, match="`full_batch` must be None"):
    start_lib.full_batch(small, "yes")
  posterior = tfd.Normal(0., 1.)
  with pytest.raises(ValueError, match="`full_batch=True` needs an "
                                       "InMemoryTarget"):
    sg.sample(target_log_prob_fn=posterior.log_prob, parameter_shapes=[],
              full_batch=True, **FAST)


def _poisson_near_mode(dtype):
  """A Poisson regression (counts near 1e5) and 4 chains around its mode."""
  return poisson_near_mode(dtype, 2000, 11.5, (4, 4))


def test_a_step_size_held_down_by_a_rough_energy_keeps_the_minibatches():
  # A minibatch warm-up's small step size moved the chains to full-data
  # gradients "held down by the gradient noise", also where the float32
  # energy was rough (1.1 nats at N = 50,000): there the exact test,
  # which full-data gradients share, rejected for the rounding (step size
  # 0.0037 on them, R-hat 8,700), and the same model in float64 tuned 0.64
  # on the minibatches. The cause is measured where the warm-up ended:
  # rough, the minibatches are kept and the note names float64; smooth,
  # the full batch.
  h = 0.5 * start_lib.MINIBATCH_MIN_STEP_SIZE
  rough, state = _poisson_near_mode(np.float32)
  kept, note = start_lib.full_batch_for_noise(rough, None, h, state)
  assert kept is rough and note.startswith(
      "minibatches kept: the warm-up's step size was 0.05 < 0.1, held down "
      "by float rounding"), note
  assert "rounded by" in note and note.endswith(
      "build the model in float64 (its data, parameters and constants)")
  # The rule applies only below the threshold and with full_batch=None.
  assert start_lib.full_batch_for_noise(rough, None, 0.2, state) is None
  assert start_lib.full_batch_for_noise(rough, False, h, state) is None
  smooth, state = _poisson_near_mode(np.float64)
  full, note = start_lib.full_batch_for_noise(smooth, None, h, state)
  assert full.is_full_batch and "held down by the gradient noise" in note


def test_control_variates_by_default_where_the_seed_draws_the_minibatch(
    tmp_path):
  """In memory and from TFRecord files the kernel's seed draws each batch,
  so AMAGOLD through control variates stays exact; a DatasetTarget's
  pipeline chooses its own batches, so it gets none (it moves to full-data
  gradients instead)."""
  ratio = start_lib.CONTROL_VARIATE_MIN_RATIO
  small_share, x, y = logistic(num_examples=int(ratio * 50))
  assert start_lib.use_control_variates(small_share, None)
  large_share, _, _ = logistic(num_examples=int(ratio * 50) - 1)
  assert not start_lib.use_control_variates(large_share, None)
  _, layout = write_shards(str(tmp_path), record_size=4)
  def log_likelihood(w, batch):
    return -0.5 * (batch[1] - tf.linalg.matvec(batch[0], w)) ** 2
  records = {k: sg.TFRecordTarget(log_likelihood, layout, k)
             for k in (15, 16)}   # 60 and 64 of 600 examples
  assert start_lib.use_control_variates(records[15], None)
  assert not start_lib.use_control_variates(records[16], None)
  stream = sg.DatasetTarget(
      lambda w, b: -0.5 * (b[1] - tf.linalg.matvec(b[0], w)) ** 2,
      tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(10),
      num_examples=len(x), full_dataset=tf.data.Dataset.from_tensor_slices(
          (x, y)).batch(500))
  assert not start_lib.use_control_variates(stream, None)
  assert start_lib.use_control_variates(stream, True)   # As asked.
  assert not start_lib.use_control_variates(small_share, False)


def test_with_full_batch_is_a_full_batch_copy():
  target, x, y = logistic(num_examples=300)
  independent = target.with_independent_minibatches([3])
  full = independent.with_full_batch()
  assert full.is_full_batch and full.batch_size == 300
  assert not full.independent_minibatches
  assert not target.is_full_batch and target.batch_size == 50
  assert independent.independent_minibatches
  assert full.with_full_batch() is full
  # Exact: the full-data energy and gradient, at any seed; the minibatch
  # target's gradient differs with the seed.
  w = tf.constant([[0.3, -0.2, 0.1]])
  reference = sg.InMemoryTarget(target._log_likelihood_fn, (x, y),
                                full_batch=True,
                                log_prior_fn=target._log_prior_fn)
  u, g = full.energy_and_gradient(w, seed=[1, 2])
  u_ref, g_ref = reference.energy_and_gradient(w, seed=[5, 6])
  np.testing.assert_allclose(u, u_ref, rtol=1e-6)
  np.testing.assert_allclose(g, g_ref, rtol=1e-5)
  np.testing.assert_allclose(u, target.energy(w), rtol=1e-5)
  assert not np.allclose(target.gradient(w, seed=[1, 2]),
                         target.gradient(w, seed=[5, 6]))


def test_needs_the_state_shape():
  posterior = tfd.MultivariateNormalDiag([1., -1.], [0.5, 2.])
  with pytest.raises(ValueError, match="`parameter_shapes` is required"):
    sg.sample(target_log_prob_fn=posterior.log_prob, **FAST)


def test_dense_mass_refused_where_it_cannot_apply():
  target, _ = random_intercepts()   # A state of two parts.
  with pytest.raises(ValueError, match="`dense_mass=True` but the state"):
    sg.sample(target, dense_mass=True, **FAST)


def test_the_laplace_mass_only_beyond_a_dense_windows_reach():
  # The start's Laplace covariance becomes AMAGOLD's fixed mass only where
  # the warm-up would adapt a diagonal one for a vector too long for a
  # dense one, and the user left the mass to `sample`.
  def rule(d, covariance=True, dense_mass=None, kernel=None):
    target = sg.LogProbFnTarget(lambda w: -0.5 * tf.reduce_sum(w**2, -1))
    kernel = kernel or sg.AMAGOLD(target, 0.1, num_leapfrog_steps=10,
                                   friction=0.1)
    return sample_kernels.laplace_mass(
        kernel, tf.zeros([4, d]), 0.25 * np.eye(d) if covariance else None,
        dense_mass, 1000)
  big = sample_lib.DENSE_MASS_MAX + 1
  mass = rule(big)
  np.testing.assert_allclose(mass.precision.to_dense(), 0.25 * np.eye(big))
  assert rule(sample_lib.DENSE_MASS_MAX) is None   # the windows' dense one
  assert rule(big, covariance=False) is None       # no Newton Hessian
  assert rule(big, dense_mass=False) is None       # asked for diagonal
  # A kernel instance's scalar mass gives way to it.
  amagold = sg.AMAGOLD(sg.LogProbFnTarget(lambda w: -0.5 * tf.reduce_sum(
      w**2, -1)), 0.1, num_leapfrog_steps=10, friction=0.1, momentum_std=2.)
  given = sample_kernels.with_mass(
      amagold, amagold.target, 0.1, False, mass)
  assert given.momentum_std == 1. and given.momentum_distribution is mass
  assert rule(big, kernel=sg.SGLD(sg.LogProbFnTarget(
      lambda w: -0.5 * tf.reduce_sum(w**2, -1)), 0.1)) is None  # no mass
  # Not positive definite, or not one vector: no covariance at all.
  assert start_lib.laplace_covariance(-np.eye(3), tf.zeros([3])) is None
  assert start_lib.laplace_covariance(np.eye(4), [tf.zeros([2]),
                                                  tf.zeros([2])]) is None



def _gaussian_target(precision):
  p = tf.constant(precision, tf.float64)
  return sg.LogProbFnTarget(
      lambda w: -0.5 * tf.einsum("...i,ij,...j->...", w, p, w))


def test_laplace_sds_beyond_the_full_hessian_never_start_wider_than_it():
  # Past FULL_HESSIAN_MAX coordinates the sds come from Rademacher probes.
  # On a precision with one strong shared direction (as features sharing a
  # factor give a regression), the unbiased probe estimate of H_ii was
  # non-positive for some coordinates (taken as sd 1, here 10x the
  # conditional sd) or far above it: the chains started far outside the
  # posterior. (H^2)_ii^(-1/4) is at most the conditional sd, up to the
  # probes' noise, and close to it.
  d = start_lib.FULL_HESSIAN_MAX + 50
  a = np.random.default_rng(0).normal(size=d)
  precision = 100. * (0.36 * np.eye(d) + 0.16 * np.outer(a, a))
  conditional = 1. / np.sqrt(np.diag(precision))
  sd = start_lib.laplace_scale(_gaussian_target(precision),
                               tf.zeros([d], tf.float64), [1, 2]).numpy()
  assert np.all(sd <= 1.1 * conditional), (sd / conditional).max()
  assert np.all(sd >= 0.2 * conditional), (sd / conditional).min()
  # Where H is diagonal every probe gives (H s)_i^2 = H_ii^2: exact.
  diagonal = np.linspace(1., 1e4, d)
  sd = start_lib.laplace_scale(_gaussian_target(np.diag(diagonal)),
                               tf.zeros([d], tf.float64), [1, 2]).numpy()
  np.testing.assert_allclose(sd, 1. / np.sqrt(diagonal), rtol=1e-6)


def _newton_reference(x, y, prior_sd):
  """The logistic regression's mode by Newton's method in float64, and the
  Hessian there."""
  w = np.zeros(x.shape[1])
  for _ in range(100):
    p = 1. / (1. + np.exp(-x @ w))
    hessian = x.T @ (x * (p * (1. - p))[:, None]) + np.eye(
        x.shape[1]) / prior_sd**2
    w = w - np.linalg.solve(hessian, x.T @ (p - y) + w / prior_sd**2)
  return w, hessian


def test_the_start_reaches_a_mode_that_adam_cannot():
  # A feature in small units (sd 0.01) has a coefficient of about 60; Adam
  # moves a coordinate at most its learning rate per step, so find_mode's
  # steps stopped far short of it. Newton's method reaches the mode, and
  # the Laplace sds are those of the Hessian there.
  rng = np.random.default_rng(3)
  n, prior_sd = 4000, 100.
  x = rng.normal(size=(n, 3)) * [1., 1., 0.01]
  y = (rng.uniform(size=n) < 1. / (1. + np.exp(
      -x @ [1., -0.5, 60.]))).astype(np.float64)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Bernoulli(logits=tf.linalg.matvec(b[0], w)).log_prob(
          b[1]), (x, y), batch_size=100, parameter_shapes=[3],
      log_prior_fn=lambda w: tf.reduce_sum(
          tfd.Normal(tf.constant(0., tf.float64), prior_sd).log_prob(w), -1))
  mode, hessian = _newton_reference(x, y, prior_sd)
  sd = np.sqrt(np.diag(np.linalg.inv(hessian)))
  _, found, scale, how, covariance = start_lib.initial_states(
      target, tf.zeros([3], tf.float64), 4, [1, 2], num_mode_steps=300,
      learning_rate=0.01)
  assert "Newton" in how, how
  np.testing.assert_array_less(np.abs(found.numpy() - mode) / sd, 0.01)
  np.testing.assert_allclose(scale.numpy(), sd, rtol=1e-3)
  np.testing.assert_allclose(covariance, np.linalg.inv(hessian), rtol=1e-3)



def test_newton_from_zeros_is_not_cut_short_at_a_few_hundred_coordinates():
  # At 400 coordinates Newton's method needs 7 steps from zeros. Capped at
  # Adam's budget in Hessians (2,000 / 400 = 5 steps) it stopped short, and
  # the start ran 2,000 Adam steps and another Newton step after it.
  rng = np.random.default_rng(1)
  x = rng.normal(size=(4000, 400)).astype(np.float32)
  y = (rng.uniform(size=4000) < 1. / (1. + np.exp(
      -x @ (0.3 * rng.normal(size=400))))).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Bernoulli(logits=tf.linalg.matvec(b[0], w)).log_prob(
          b[1]), (x, y), batch_size=100,
      log_prior_fn=lambda w: tf.reduce_sum(-0.5 * w ** 2, -1))
  _, _, _, how, _ = start_lib.initial_states(
      target, tf.zeros([400]), 4, [1, 2], num_mode_steps=2000,
      learning_rate=0.01)
  assert how.startswith("around the mode (Newton's method, "), how

def test_newtons_method_passes_where_autodiff_second_derivatives_overflow():
  # Outcomes with a noise sd of 500, its scale in softplus coordinates (TFP's
  # default bijector for a positive parameter): the second derivative of
  # TFP's softplus is NaN past 88 in float32, where Newton's method once
  # stopped short (and Adam, 0.01 a step, could not go on). Those Hessian
  # entries are now central differences of the gradient.
  y = (3. + 500. * np.random.default_rng(0).normal(size=400)).astype(
      np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Normal(w[..., :1], tfb.Softplus().forward(
          w[..., 1:])).log_prob(b), y, batch_size=50,
      parameter_shapes=[2])
  found, hessian, steps, converged = start_lib.newton_mode(
      target, tf.constant([0., 1.]), max_steps=60)
  # The flat-prior mode: the sample mean and the maximum-likelihood sd
  # (softplus(z) = z to float32 precision here).
  mean, scale = y.mean(dtype=np.float64), y.std(dtype=np.float64)
  assert converged and hessian is not None and steps > 20
  sd = np.array([scale, scale / np.sqrt(2.)]) / np.sqrt(len(y))
  np.testing.assert_array_less(
      np.abs(found.numpy() - [mean, scale]) / sd, 0.01)
  np.testing.assert_allclose(np.diag(hessian), 1. / sd**2, rtol=0.02)


def test_newtons_method_crosses_negative_curvature_to_the_mode():
  # A double well in w0, U = N (w0^2 - 1)^2 + N w1^2 / 2: at w0 = 0.1 the
  # Hessian is not positive definite (12 w0^2 - 4 < 0), where Newton's
  # method once stopped and Adam took over; damped (Levenberg-Marquardt)
  # steps carry it into the well, and plain Newton steps finish.
  n = 2000
  target = sg.InMemoryTarget(
      lambda w, b: (-(w[..., :1]**2 - 1.)**2 - 0.5 * w[..., 1:]**2 +
                    0. * b[:, 0]),
      np.zeros((n, 1)), batch_size=100, parameter_shapes=[2])
  found, hessian, steps, converged = start_lib.newton_mode(
      target, tf.constant([0.1, 0.5], tf.float64))
  assert converged and steps > 1
  # Stopped within 0.01 posterior sd (its tolerance on the decrement).
  sd = 1. / np.sqrt([8. * n, n])
  np.testing.assert_array_less(np.abs(found.numpy() - [1., 0.]) / sd, 0.01)
  np.testing.assert_allclose(hessian, np.diag([8. * n, n]), rtol=1e-3)


def test_newtons_method_at_a_float32_mode_of_large_values_converges():
  # A float32 regression whose intercept is 5,000 (posterior sd 0.007):
  # the gradient's rounding alone keeps the Newton decrement above 1e-4 at
  # the mode, where the steps then wander at random until they run out.
  # Reported unconverged, `sample` started the chains at uniform(-2, 2),
  # 700,000 sds away, and blamed an improper density.
  n = 20_000
  rng = np.random.default_rng(1)
  x = rng.normal(size=(n, 2)).astype(np.float32)
  y = (x @ [0.5, -1.] + 5000. + rng.normal(size=n)).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, b: tfd.Normal(tf.linalg.matvec(b[0], w[..., :2]) +
                              w[..., 2], 1.).log_prob(b[1]),
      (x, y), batch_size=100, parameter_shapes=[3])
  design = np.concatenate([x.astype(np.float64), np.ones((n, 1))], 1)
  precision = design.T @ design
  mode = np.linalg.solve(precision, design.T @ y.astype(np.float64))
  sd = np.sqrt(np.diag(np.linalg.inv(precision)))
  found, hessian, _, converged = start_lib.newton_mode(
      target, tf.constant([0., 0., 0.]))
  assert converged and hessian is not None
  np.testing.assert_array_less(np.abs(found.numpy() - mode) / sd, 0.1)
  # Out of steps far from the mode, it has not converged.
  _, _, _, converged = start_lib.newton_mode(
      target, tf.constant([0., 0., 0.]), max_steps=0)
  assert not converged


def test_a_numpy_initial_state_keeps_its_float_dtype():
  # A float64 model started from a numpy float64 state was cast to float32
  # and refused ("give the target data and state of one float dtype"),
  # which the user had done. A Python number stays float32, as in TF.
  template = sample_lib._template(  # pylint: disable=protected-access
      None, {"w": np.zeros(3), "b": np.float64(0.), "c": 1.5,
             "d": np.zeros(2, np.int32), "e": tf.zeros([2], tf.float64)},
      None, None)
  assert {k: v.dtype for k, v in template.items()} == dict(
      w=tf.float64, b=tf.float64, c=tf.float32, d=tf.float32, e=tf.float64)


def test_a_state_made_from_shapes_takes_the_float_dtype_of_the_data():
  # A model built in float64 (data and functions) with its shapes on the
  # target: `sample` made a float32 state, which the functions refused.
  x = np.zeros((20, 3))
  y = np.zeros(20, np.int32)     # Labels do not decide the dtype.
  linear = lambda w, b: tf.einsum("nd,...d->...n", b[0], w)
  in_memory = sg.InMemoryTarget(linear, (x, y), batch_size=5,
                                parameter_shapes=[3])
  streamed = sg.DatasetTarget(
      lambda w, b: linear(w[0], b) + w[1][..., None],
      tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(5), 20,
      parameter_shapes=[[3], []])
  wrapped = sg.ControlVariateTarget(in_memory, tf.zeros([3], tf.float64))
  template = sample_lib._template  # pylint: disable=protected-access
  for target in (in_memory, streamed, wrapped):
    for part in tf.nest.flatten(template(target, None, None, None)):
      assert part.dtype == tf.float64, type(target).__name__
  # float32 data, mixed float data or none (a log density): float32.
  mixed = sg.InMemoryTarget(linear, (x.astype(np.float32), np.zeros(20)),
                            batch_size=5, parameter_shapes=[3])
  assert template(mixed, None, None, None).dtype == tf.float32
  assert template(start_lib.as_target(None, lambda w: -w**2, None, None,
                                      None), None, [2], None).dtype == (
                                          tf.float32)


def test_initial_state_with_a_chain_axis_is_refused_with_how_to_continue():
  # A fit's `final_state` (shape [4, 3]) given back as `initial_state`, to
  # go on from where the chains ended: the target's checks refused a
  # log-likelihood "whose leading (chain) axes are of shape [4]" and
  # advised giving the target `parameter_shapes`, which it had.
  target, x, y = logistic()
  target = sg.InMemoryTarget(target._log_likelihood_fn, (x, y),
                             batch_size=50, parameter_shapes=[3])
  with pytest.raises(ValueError, match=(
      r"`initial_state` has shape \[4, 3\] where the InMemoryTarget's "
      r"`parameter_shapes` are \[3\].*leads with 4 chains.*"
      r"kernel=fit.kernel")):
    sg.sample(target, initial_state=np.zeros([4, 3], np.float32),
              seed=[0, 1], **FAST)
  # Another shape: refused, without the advice for chains.
  with pytest.raises(ValueError, match=r"has shape \[2\]") as error:
    sg.sample(target, initial_state=np.zeros([2], np.float32),
              seed=[0, 1], **FAST)
  assert "chains" not in str(error.value)


@pytest.mark.parametrize("name,value", [
    ("num_results", 0), ("num_chains", 0), ("num_adaptation_steps", 10),
    ("num_burnin_steps", -1), ("num_mode_steps", -3)])
def test_the_counts_are_refused_by_their_names_before_the_start(name, value):
  # Each was read where a later stage used it: num_chains=0 ended in
  # "`step_size` must be > 0 and finite; got nan.", num_adaptation_steps=10
  # was "`num_steps` of the warm-up", num_results=0 came after the
  # warm-up, and num_mode_steps=-3 was taken.
  def log_prob(w):
    raise AssertionError("the model was evaluated")
  least = {"num_adaptation_steps": 20, "num_burnin_steps": 0,
           "num_mode_steps": 0}.get(name, 1)
  with pytest.raises(ValueError, match=(
      rf"^`{name}` must be an integer >= {least}; got {value}\.$")):
    sg.sample(target_log_prob_fn=log_prob, parameter_shapes=[2],
              seed=[0, 1], progress=False, print_report=False,
              **{name: value})


def test_a_log_density_that_is_not_one_value_per_chain_is_refused():
  # Summed over the last axis only, a matrix state's density has a value
  # per row: TFP's kernels ran each row as a chain (16 where `sample` made
  # 4), and the call failed after the warm-up in the arrival check with
  # "operands could not be broadcast together with shapes (4,80) (20,)".
  per_row = lambda w: -0.5 * tf.reduce_sum(w ** 2, -1)
  with pytest.raises(ValueError, match=(
      r"log density of one chain \(a state of shape \[4, 20\].*has shape "
      r"\[1, 4\].*axis=\[-2, -1\].*run as extra chains")):
    sg.sample(target_log_prob_fn=per_row, initial_state=tf.zeros([4, 20]),
              seed=[0, 1], **FAST)
  # Summed over the chains too: one value for them all.
  with pytest.raises(ValueError, match=r"has shape \[\].*chain axis too"):
    sg.sample(target_log_prob_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2),
              parameter_shapes=[3], seed=[0, 1], **FAST)
  # Summed over the state's axes: taken.
  start_lib.check_one_chain(start_lib.as_target(
      None, lambda w: -0.5 * tf.reduce_sum(w ** 2, [-2, -1]), None, None,
      None), tf.zeros([4, 20]))


def test_a_uniform_start_where_the_density_is_not_finite_is_drawn_again():
  # A noise scale used without a bijector: its log density is -inf (or
  # NaN) below 0, half of Stan's box. The chains started there never
  # moved, the warm-up's step size fell to 0, and `sample` ended in
  # "`step_size` must be > 0 and finite; got 0.0.".
  y = np.random.default_rng(3).normal(1., 0.5, size=20).astype(np.float32)

  def log_prob(state):
    loc, noise = state[..., 0], state[..., 1]
    return (tfd.HalfNormal(2.).log_prob(noise) + tf.reduce_sum(
        tfd.Normal(loc[..., None], noise[..., None]).log_prob(y), -1))
  target = start_lib.as_target(None, log_prob, None, None, None)
  states, mode, _, how, _ = start_lib.initial_states(
      target, tf.zeros([2]), 8, [0, 1], 0, 0.)
  assert mode is None and np.all(np.isfinite(target.energy(states)))
  assert np.all(states.numpy()[:, 1] > 0)
  assert how.startswith("uniform(-2, 2) in the unconstrained space (as "
                        "Stan; ") and "drawn again" in how
  # Finite everywhere: the same draws as before, and the same words.
  everywhere = start_lib.as_target(None, lambda w: -tf.reduce_sum(w**2, -1),
                                   None, None, None)
  states, _, _, how, _ = start_lib.initial_states(
      everywhere, tf.zeros([2]), 8, [0, 1], 0, 0.)
  draw_seed = tfp.random.split_seed([0, 1], 3)[2]
  np.testing.assert_array_equal(states, tf.random.stateless_uniform(
      [8, 2], tfp.random.split_seed(draw_seed, 1)[0], -2., 2.))
  assert how == "uniform(-2, 2) in the unconstrained space (as Stan)"
  # Finite nowhere in the box: named, with the fixes.
  nowhere = start_lib.as_target(
      None, lambda w: tfd.HalfNormal(1.).log_prob(w[..., 0] - 3.), None,
      None, None)
  with pytest.raises(ValueError, match=r"not finite at any of 100 uniform"
                     r".*without a bijector.*`initial_state=`"):
    start_lib.initial_states(nowhere, tf.zeros([1]), 2, [0, 1], 0, 0.)


def test_an_operation_xla_cannot_compile_is_named_with_the_fix():
  # A JointDistribution draws from every node when TFP builds its
  # distributions; a NegativeBinomial's gamma draws have no XLA kernel, and
  # `sample` (jit_compile=True by default) ended in a 40-line traceback.
  @tf.function(jit_compile=True)
  def draws():
    return tf.random.stateless_gamma([3], seed=[1, 2], alpha=2.)

  run = sg.chains.runs.explain_xla_errors(draws)
  with pytest.raises(ValueError, match=r"StatelessRandomGamma.*"
                     r"jit_compile=False"):
    run()
  # Other errors pass as they are.
  with pytest.raises(tf.errors.InvalidArgumentError):
    sg.chains.runs.explain_xla_errors(
        lambda: tf.debugging.assert_equal(1, 2))()


def test_the_approximate_draws_sentence_for_each_kernel_and_ksd_choice():
  target, _, _ = logistic()
  sgld = sg.SGLD(target, step_size=1e-3)
  text = sample_kernels.approximate(sgld, ksd=False)
  assert text.startswith("SGLD has no exact Metropolis-Hastings test")
  assert text.endswith("(compare step sizes); kernel='amagold' draws "
                       "exactly.")
  assert sample_kernels.approximate(sgld, ksd=True).endswith(
      "do not show. kernel='amagold' draws exactly.")
  # AMAGOLD with a minibatch test: its own note, no advice to switch to it,
  # and one full stop where the KSD is already measured.
  inexact = sg.AMAGOLD(target, 0.01, num_leapfrog_steps=3, friction=0.5,
                       acceptance_energy="minibatch")
  assert sample_kernels.approximate(inexact, ksd=True) == (
      inexact.calibration_note)
  assert not sample_kernels.approximate(inexact, ksd=False).endswith("..")
  exact = sg.AMAGOLD(target, 0.01, num_leapfrog_steps=3, friction=0.5)
  assert sample_kernels.approximate(exact, ksd=False) is None


def test_xla_asked_for_a_dataset_target_is_refused_before_any_work():
  target, x, y = logistic()
  streamed = sg.DatasetTarget(
      target._log_likelihood_fn,
      tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(50),
      num_examples=2000, log_prior_fn=target._log_prior_fn)
  with pytest.raises(ValueError, match=r"`jit_compile=True` with a "
                     r"DatasetTarget: XLA cannot compile its tf.data"):
    sg.sample(streamed, parameter_shapes=[3],
              **dict(FAST, jit_compile=True))


def test_a_batch_size_beside_a_target_is_refused_not_ignored():
  # The target's own minibatch size was kept, silently.
  target, _, _ = logistic()
  with pytest.raises(ValueError, match=r"`batch_size` = 256: these go with "
                     r"a JointDistribution(.|\n)*\(InMemoryTarget\) would "
                     r"ignore"
                     r"(.|\n)*leave them None"):
    sg.sample(target, batch_size=256, parameter_shapes=[3], **FAST)
  with pytest.raises(ValueError, match=r"`observed` = .*`batch_size` = 8: "
                     r"(.|\n)*`target_log_prob_fn` would ignore them"):
    sg.sample(target_log_prob_fn=lambda w: -tf.reduce_sum(w**2, -1),
              observed=np.zeros(3), batch_size=8, parameter_shapes=[3],
              **FAST)


def test_the_report_counts_chains_and_names_a_test_kernels_acceptance():
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel
  warmup = SimpleNamespace(num_steps=200, num_leapfrog_steps=None,
                           step_size=0.5, acceptance=0.8)
  report = sg.chains.sample_report.SampleReport(
      kernel="AMAGOLD", start="around the mode", control_variates=False,
      minibatches="independent minibatches", warmup=warmup, arrived=True,
      arrival=SimpleNamespace(distance=0.3), extended=False,
      acceptance=np.array([0.8]), divergences=np.array([0]),
      heating=np.array([0.]), max_rhat=1.0, min_ess=400., problems=[],
      seconds={"total": 1.})
  assert str(report).startswith("tfp_sgmcmc.sample: AMAGOLD, 1 chain; ")
  four = report._replace(divergences=np.zeros(4), acceptance=np.ones(4))
  assert str(four).startswith("tfp_sgmcmc.sample: AMAGOLD, 4 chains; ")
  assert ("step size 0.5, acceptance 0.80, arrived (distance 0.3 posterior "
          "sds)." in str(four))
  # Arrived 21 sds away: only where the chains' gradients disagree in sign.
  weak = four._replace(arrival=SimpleNamespace(distance=21.4))
  assert ("arrived (distance 21.4 posterior sds, along a poorly identified "
          "direction, where the chains' slopes disagree)." in str(weak))
  # SGHMC's warm-up tunes its step size by the acceptance of an exact test
  # of its dynamics; its own draws are accepted without a test.
  sghmc = four._replace(kernel="SGHMC", approximate="SGHMC has no exact "
                        "Metropolis-Hastings test", acceptance=None)
  assert "step size 0.5, acceptance of its exact test 0.80, arrived" in (
      str(sghmc))
