"""DatasetTarget: the exact energy streamed from a full dataset, the first
minibatch scaled by N / n, its gradient and Hessian (Newton's start), and
no exact energy without a full dataset.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.chains import laplace
from tfp_sgmcmc.chains import start as start_lib
from support.linear_regression import LinearRegression


@pytest.fixture(scope="module")
def problem():
  return LinearRegression(num_examples=203, dim=3, seed=0)


def test_dataset_target_energy_and_minibatch_scaling(problem):
  x, y = problem.data
  full = tf.data.Dataset.from_tensor_slices((x, y)).batch(50)
  batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(10)
  target = sg.DatasetTarget(problem.log_likelihood, batches.repeat(),
                            problem.num_examples,
                            log_prior_fn=problem.log_prior,
                            full_dataset=full)
  w = np.array([0.3, -0.2, 0.5], np.float32)
  assert target.has_exact_energy
  np.testing.assert_allclose(target.energy(tf.constant(w)),
                             problem.energy(w), rtol=1e-5)
  # The first streamed batch is examples 0..9, scaled by N / 10.
  energy = target.minibatch_energy(tf.constant(w), None).numpy()
  ll = problem.per_example_log_likelihood(w)[:10]
  want = -problem.num_examples / 10 * ll.sum() - problem.log_prior_np(w)
  np.testing.assert_allclose(energy, want, rtol=1e-5)


def test_dataset_target_without_full_data_has_no_exact_energy(problem):
  x, y = problem.data
  batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(10).repeat()
  target = sg.DatasetTarget(problem.log_likelihood, batches,
                            problem.num_examples)
  assert not target.has_exact_energy
  with pytest.raises(sg.TargetCapabilityError, match="exact full-data"):
    target.energy(tf.zeros([3]))


def test_dataset_target_energy_has_the_data_gradient_and_hessian(problem):
  # `sample` starts a chain at Newton's mode of the exact energy, and its
  # arrival check and the KSD use the exact gradient. Streamed through
  # Dataset.reduce that gradient was the prior's alone (the data's part
  # silently zero), so Newton's method stopped at its start.
  x, y = problem.data
  full = tf.data.Dataset.from_tensor_slices((x, y)).batch(50)
  target = sg.DatasetTarget(problem.log_likelihood,
                            full.repeat(), problem.num_examples,
                            log_prior_fn=problem.log_prior,
                            full_dataset=full.filter(lambda *_: True))
  w = tf.constant([0.3, -0.2, 0.5])
  with tf.GradientTape() as tape:
    tape.watch(w)
    energy = target.energy(w)
  np.testing.assert_allclose(tape.gradient(energy, w), problem.gradient(w),
                             rtol=1e-4)
  # Second derivatives too, under tf.function (the filter leaves the
  # batches' count unknown, so the target counts them).
  mode, hessian, _, converged = start_lib.newton_mode(target, tf.zeros([3]))
  assert converged
  np.testing.assert_allclose(hessian, problem.precision, rtol=1e-4)
  np.testing.assert_allclose(mode, problem.posterior_mean, atol=1e-4)


def test_with_full_batch_gives_exact_gradients_from_the_full_dataset(problem):
  # What `sample` moves a streamed target to where the minibatch noise
  # holds the step size down: every energy, minibatch or not, is the exact
  # one (two calls agree where two batches of the stream would not).
  x, y = problem.data
  batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(10).repeat()
  target = sg.DatasetTarget(
      problem.log_likelihood, batches, problem.num_examples,
      log_prior_fn=problem.log_prior,
      full_dataset=tf.data.Dataset.from_tensor_slices((x, y)).batch(50))
  exact = target.with_full_batch()
  assert exact.is_full_batch and not target.is_full_batch
  assert exact.base_target is target and exact.minibatches_from_seed
  w = tf.constant([[0.3, -0.2, 0.5], [0.1, 0.4, -0.3]])
  for seed in ([0, 1], [2, 3]):
    energy, gradient = exact.energy_and_gradient(w, seed)
    np.testing.assert_allclose(energy, [problem.energy(v) for v in w.numpy()],
                               rtol=1e-5)
    np.testing.assert_allclose(
        gradient, [problem.gradient(v) for v in w.numpy()], rtol=1e-4)
  np.testing.assert_array_equal(exact.gradient_noise_variance(w, [0, 1]),
                                np.zeros([2, 3]))
  without = sg.DatasetTarget(problem.log_likelihood, batches,
                             problem.num_examples)
  with pytest.raises(sg.TargetCapabilityError,
                     match="FullBatchTarget needs a target with an exact"):
    without.with_full_batch()


def test_more_than_32_batches_and_traces_work_in_graphs_without_autograph(
    problem):
  # Runs trace without AutoGraph, where tf.data's get_next refuses its 33rd
  # call on one iterator: an exact energy over 41 batches (a TFRecordTarget
  # beyond about 135,000 examples) and a 33rd trace drawing from one
  # dataset both failed.
  full = tf.data.Dataset.from_tensor_slices(problem.data).batch(5)  # 41
  target = sg.DatasetTarget(problem.log_likelihood, full.repeat(),
                            problem.num_examples,
                            log_prior_fn=problem.log_prior, full_dataset=full)
  w = np.array([0.3, -0.2, 0.5], np.float32)
  graph = tf.function(target.energy, autograph=False)(tf.constant(w))
  np.testing.assert_allclose(graph, problem.energy(w), rtol=1e-5)
  for _ in range(40):   # A new trace each time, one iterator.
    tf.function(lambda s: target.minibatch_energy(s, None),
                autograph=False)(tf.constant(w))


def test_control_variates_on_a_dataset_target_read_the_centre_on_its_batch(
    problem):
  # Each draw of a pipeline is the next batch: the centre's terms were
  # read from another batch than the state's, so at the centre itself the
  # control-variate gradient was the exact one plus the difference of two
  # batches' noise (sqrt(2)x the raw noise, not about 0).
  full = tf.data.Dataset.from_tensor_slices(problem.data).batch(50)
  batches = tf.data.Dataset.from_tensor_slices(problem.data).shuffle(
      203, seed=0).repeat().batch(10)
  target = sg.DatasetTarget(problem.log_likelihood, batches,
                            problem.num_examples,
                            log_prior_fn=problem.log_prior, full_dataset=full)
  centre = tf.constant([0.3, -0.2, 0.5], tf.float32)
  cv = sg.ControlVariateTarget(target, centre)
  with tf.GradientTape() as tape:
    tape.watch(centre)
    exact = target.energy(centre)
  exact_gradient = tape.gradient(exact, centre)
  at_centre = tf.constant(centre.numpy())   # Not the centre's own tensor.
  for _ in range(3):
    energy, gradient = cv.energy_and_gradient(at_centre, None)
    np.testing.assert_allclose(energy, exact, rtol=1e-6)
    np.testing.assert_allclose(gradient, exact_gradient, rtol=1e-4,
                               atol=1e-3)
  both = cv.minibatch_energies(
      [at_centre, tf.stack([at_centre, at_centre])], None)
  np.testing.assert_allclose(both[0], exact, rtol=1e-6)
  np.testing.assert_allclose(both[1], [exact, exact], rtol=1e-6)


def _traced_ops(fn, *args):
  graph = tf.function(fn, autograph=False).get_concrete_function(*args).graph
  return len(graph.get_operations())


def test_the_exact_energy_and_its_derivatives_trace_one_body_whatever_n(
    problem):
  # The exact energy was written out batch by batch: its graph, and its
  # gradient's and Hessian's, held a copy of the likelihood per batch of
  # `full_dataset` (245 at 10^6 rows of a TFRecordTarget), so tracing
  # Newton's start took over a minute there and grew with N.
  def target_of(batch_size):
    full = tf.data.Dataset.from_tensor_slices(problem.data).batch(batch_size)
    return sg.DatasetTarget(problem.log_likelihood, full.repeat(),
                            problem.num_examples,
                            log_prior_fn=problem.log_prior, full_dataset=full)

  def derivatives(target):
    def fn(w):
      with tf.GradientTape() as outer:
        outer.watch(w)
        with tf.GradientTape() as inner:
          inner.watch(w)
          energy = target.energy(w)
        gradient = inner.gradient(energy, w)
      return energy, gradient, outer.gradient(gradient, w)
    return fn

  w = tf.constant([[0.3, -0.2, 0.5]])
  few, many = target_of(101), target_of(5)   # 3 and 41 batches
  assert _traced_ops(few.energy, w) == _traced_ops(many.energy, w)
  assert (_traced_ops(derivatives(few), w) ==
          _traced_ops(derivatives(many), w))
  for target in (few, many):   # The same values, eagerly and traced.
    for run in (derivatives(target),
                tf.function(derivatives(target), autograph=False)):
      energy, gradient, curvature = run(w)
      np.testing.assert_allclose(energy, [problem.energy(w[0].numpy())],
                                 rtol=1e-5)
      np.testing.assert_allclose(gradient, [problem.gradient(w[0].numpy())],
                                 rtol=1e-4)
      # The gradient of the gradient's sum: the Hessian's row sums.
      np.testing.assert_allclose(curvature, [problem.precision.sum(1)],
                                 rtol=1e-4)


def test_a_likelihood_that_reads_a_variable_has_its_derivatives(problem):
  # The exact energy's derivatives are written by hand, per batch; a
  # variable the likelihood reads (here its noise scale) gets its own.
  scale = tf.Variable(1.5)
  x, y = problem.data

  def log_likelihood(w, batch):
    return problem.log_likelihood(w / scale, batch)

  full = tf.data.Dataset.from_tensor_slices((x, y)).batch(50)
  streamed = sg.DatasetTarget(log_likelihood, full.repeat(),
                              problem.num_examples,
                              log_prior_fn=problem.log_prior, full_dataset=full)
  in_memory = sg.InMemoryTarget(log_likelihood, (x, y), batch_size=10,
                                log_prior_fn=problem.log_prior)
  w = tf.constant([0.3, -0.2, 0.5])
  results = []
  for target in (streamed, in_memory):
    with tf.GradientTape(persistent=True) as outer:
      outer.watch(w)
      with tf.GradientTape() as inner:
        inner.watch(w)
        energy = target.energy(w)
      by_w, by_scale = inner.gradient(energy, [w, scale])
    results.append([energy, by_w, by_scale,
                    outer.jacobian(by_w, w, experimental_use_pfor=False),
                    outer.gradient(by_scale, w)])
  for got, want in zip(*results):
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_exact_gradients_read_the_full_dataset_once(problem):
  # `sample` moves a streamed target whose minibatches hold the step size
  # down to exact gradients, one evaluation per leapfrog step: each one
  # pass over the data, not one for U and one more for its gradient.
  passes = tf.Variable(0)

  def count(x, y):
    with tf.control_dependencies([passes.assign_add(1)]):
      return tf.identity(x), y

  full = tf.data.Dataset.from_tensor_slices(problem.data).batch(50).map(
      count)   # 5 batches
  target = sg.DatasetTarget(problem.log_likelihood, full.repeat(),
                            problem.num_examples,
                            log_prior_fn=problem.log_prior, full_dataset=full)
  w = tf.constant([[0.3, -0.2, 0.5], [0.1, 0.4, -0.3]])
  exact = target.with_full_batch()
  for run in (exact.energy_and_gradient,
              tf.function(exact.energy_and_gradient, autograph=False)):
    before = int(passes.numpy())
    energy, gradient = run(w, [0, 1])
    assert int(passes.numpy()) - before == 5
    np.testing.assert_allclose(energy, [problem.energy(v) for v in w.numpy()],
                               rtol=1e-5)
    np.testing.assert_allclose(
        gradient, [problem.gradient(v) for v in w.numpy()], rtol=1e-4)
  # Newton's start too: each of its energy-and-gradient evaluations.
  _, energy_and_gradient = laplace.hessian_products(target, w[0])
  before = int(passes.numpy())
  energy, gradient = energy_and_gradient(w[0])
  assert int(passes.numpy()) - before == 5
  np.testing.assert_allclose(gradient, problem.gradient(w[0].numpy()),
                             rtol=1e-4)
