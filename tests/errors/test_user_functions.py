"""What the user's functions are and return: a log-likelihood that is not
callable, sums or averages the batch, keeps dimensions, adds an axis,
returns a pair, computes in float64, indexes the batch wrongly or cannot
take per-chain batches; a log-prior that sums over chains or expects another
state structure; an energy function that is a number, float64 or summed.
Each is named with the shape or dtype it returned; what is accepted by
design (a constant prior, a one-chain log-likelihood) gives the right
energy.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.bad_inputs import D, RNG, X, Y, boot, classify, clear, correct
from support.bad_inputs import data, ll, location_ll, mem, noisy, prior
from support.bad_inputs import quadratic
from support.linear_regression import LinearRegression
from support.per_chain_minibatches import broadcasting_log_likelihood
from support.per_chain_minibatches import make_target


def test_log_likelihood_that_sums_over_the_batch():
  target = sg.InMemoryTarget(lambda w, b: tf.reduce_sum(b - w),
                             np.zeros((10, 1), np.float32), batch_size=4)
  kernel = sg.SGLD(target, 0.1)
  with pytest.raises(ValueError, match=r"one log-likelihood per example.*"
                     r"returned shape \(\)"):
    kernel.bootstrap_results(tf.zeros([1]))


def test_log_likelihood_with_wrong_number_of_values():
  target = sg.InMemoryTarget(lambda w, b: tf.zeros([3]),
                             np.zeros((10, 1), np.float32), batch_size=4)
  with pytest.raises(ValueError, match=r"batch_shape \+ \[5\].*shape \(3,\).*probe batch of 5"):
    sg.SGLD(target, 0.1).bootstrap_results(tf.zeros([1]))


@pytest.fixture(scope="module")
def problem():
  return LinearRegression(num_examples=500, dim=2, seed=1)


@pytest.mark.parametrize("jit", [False, True])
def test_log_likelihood_that_cannot_take_per_chain_batches_is_named(
    problem, jit):
  # Needs a shared batch [n, d] AND chain-batched params [c, d]: neither the
  # per-chain broadcast call nor the one-chain fallback can run it.
  target = make_target(problem, True, log_likelihood=lambda w, b: tf.einsum(
      "nd,cd->cn", b[0], w))
  energy = target.minibatch_energy
  if jit:
    energy = tf.function(energy, jit_compile=True, autograph=False)
  with pytest.raises(ValueError, match=r"(?s)independent_minibatches=True.*"
                     r"must return shape \(4, 50\).*vectorized_map.*"
                     r"broadcast over leading chain dimensions"):
    energy(tf.zeros([4, 2]), tf.constant([1, 2]))


def test_log_likelihood_that_sums_the_batch_is_rejected(problem):
  target = make_target(problem, True, log_likelihood=lambda w, b: (
      tf.reduce_sum(broadcasting_log_likelihood(w, b), -1)))
  with pytest.raises(ValueError, match=r"returned shape \[4\].*expected "
                     r"\[50\], one value per example"):
    target.minibatch_energy(tf.zeros([4, 2]), [1, 2])


CLEAR_MESSAGES = [
    ("log-likelihood not callable", lambda: sg.InMemoryTarget(
        "ll", data(), 2), TypeError, r"`log_likelihood_fn` must be callable"
     r".*'ll'"),
    ("log-prior not callable", lambda: sg.InMemoryTarget(
        location_ll, data(), 2, log_prior_fn=3.), TypeError,
     r"`log_prior_fn` must be callable or None; got 3.0"),
]


@pytest.mark.parametrize("case,call,error,pattern", CLEAR_MESSAGES,
                         ids=[c[0] for c in CLEAR_MESSAGES])
def test_bad_input_fails_early_with_a_clear_message(case, call, error,
                                                    pattern):
  del case
  with pytest.raises(error, match=pattern):
    call()


def constant_prior_broadcasts():
  target = mem(log_prior_fn=lambda w: 0.)
  flat = mem()
  w = tf.constant(RNG.normal(size=(4, D)).astype(np.float32))
  np.testing.assert_allclose(target.minibatch_energy(w, [1, 2]),
                             flat.minibatch_energy(w, [1, 2]), rtol=1e-6)
  assert target.minibatch_energy(w, [1, 2]).shape == [4]


def integer_constant_prior():
  target = mem(log_prior_fn=lambda w: 0)
  energy = target.minibatch_energy(tf.zeros([D]), [1, 2])
  assert energy.dtype == tf.float32
  np.testing.assert_allclose(energy, mem().minibatch_energy(
      tf.zeros([D]), [1, 2]), rtol=1e-6)


def independent_chains_fallback():
  # A log-likelihood written for one chain, with per-chain minibatches: the
  # library calls it once per chain; the energy equals the per-chain call's.
  target = mem(log_prior_fn=prior, parameter_shapes=[D],
               independent_minibatches=True)
  w = tf.constant(RNG.normal(size=(2, D)).astype(np.float32))
  energy = target.minibatch_energy(w, [4, 5])
  idx = np.asarray(target.minibatch_indices([4, 5], w))
  for c in range(2):
    wc = np.asarray(w[c])
    r = Y[idx[c]] - X[idx[c]] @ wc
    np.testing.assert_allclose(
        energy[c], 40. / 8 * 0.5 * np.sum(r ** 2) + 0.5 * np.sum(wc ** 2),
        rtol=1e-5)


def _joint_node_reads_w0():
  import tensorflow_probability as tfp  # pylint: disable=g-import-not-at-top
  tfd = tfp.distributions

  def model(x):
    return tfd.JointDistributionNamed(dict(
        w=tfd.Independent(tfd.Normal(tf.zeros(D), 1.), 1),
        y=lambda w: tfd.Independent(
            tfd.Normal(tf.linalg.matvec(x, w[0]), 1.), 1)))
  return sg.JointDistributionTarget(model, observed={"y": Y}, covariates=X,
                                    batch_size=8)


OUTCOMES = [
    clear("log-likelihood returns one scalar", lambda: boot(sg.SGLD(mem(
        fn=lambda w, b: tf.reduce_sum(ll(w, b))), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"shape \(\)"),
    clear("log-likelihood averages over the batch", lambda: boot(sg.SGLD(
        mem(fn=lambda w, b: tf.reduce_mean(ll(w, b), -1)), 0.1),
        tf.zeros([D])), "log_likelihood_fn", r"Do not sum or average"),
    clear("log-likelihood with keepdims", lambda: boot(sg.SGLD(mem(
        fn=lambda w, b: ll(w, b)[..., None]), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"one log-likelihood per example"),
    clear("log-likelihood with an extra leading axis", lambda: boot(sg.SGLD(
        mem(fn=lambda w, b: ll(w, b)[None]), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"shape \[1\].*state part 0 has shape \[3\]"),
    clear("log-likelihood returns (value, extra) pair", lambda: boot(sg.SGLD(
        mem(fn=lambda w, b: (ll(w, b), ll(w, b))), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"shape \[2\]"),
    clear("log-likelihood computes in float64", lambda: boot(sg.SGLD(mem(
        fn=lambda w, b: tf.cast(ll(w, b), tf.float64)), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"dtype float64 for a float32 state"),
    clear("log-likelihood indexes a tuple batch by key", lambda: boot(
        sg.SGLD(mem(fn=lambda w, b: -b["y"] ** 2), 0.1), tf.zeros([D])),
          "log_likelihood_fn", r"batch.*float32\[9, 3\]"),
    clear("log-likelihood broadcasts chains against examples (4 chains, "
          "batch 4)", lambda: boot(sg.SGLD(mem(
              fn=lambda w, b: -tf.reduce_sum((b[0] - w) ** 2, -1),
              batch_size=4), 0.1), tf.zeros([4, D])), "log_likelihood_fn",
          r"probe batch of 5"),
    clear("log-likelihood ignores the chain axis (reads w[0])", lambda: boot(
        sg.SGLD(mem(fn=lambda w, b: ll(w[0], b), log_prior_fn=prior), 0.1),
        tf.zeros([4, D])),
          "log_likelihood_fn", r"shape is \[\], but `log_prior_fn`.*\[4\].*ignores the chain axes"),
    clear("ShardedTarget's log-likelihood ignores the chain axis", lambda:
          boot(sg.SGLD(sg.ShardedTarget(lambda w, b: ll(w[0], b), (X, Y), 8,
                                        log_prior_fn=prior), 0.1),
               tf.zeros([4, D])),
          "log_likelihood_fn", r"shape is \[\], but `log_prior_fn`.*\[4\].*"
          r"ignores the chain axes"),
    clear("ShardedTarget's log-prior sums over the chains too", lambda: boot(
        sg.SGLD(sg.ShardedTarget(ll, (X, Y), 8, log_prior_fn=lambda w: -0.5 *
                                 tf.reduce_sum(w ** 2)), 0.1),
        tf.zeros([4, D])), "log_prior_fn", r"returned shape \[\].*\[4\]"),
    clear("per-chain minibatches and a log-likelihood that reads w[0]",
          lambda: sg.SGLD(mem(fn=lambda w, b: ll(w[0], b), log_prior_fn=prior,
                              parameter_shapes=[D],
                              independent_minibatches=True), 0.1).one_step(
                                  tf.zeros([4, D]), boot(sg.SGLD(mem(
                                      fn=lambda w, b: ll(w[0], b),
                                      log_prior_fn=prior,
                                      parameter_shapes=[D],
                                      independent_minibatches=True), 0.1),
                                      tf.zeros([4, D])), seed=[1, 2]),
          "log_likelihood_fn", r"shape \[8\] on one batch shared by the "
          r"chains.*ignores the chain axes"),
    clear("log-prior reads w[0], at a control-variate centre", lambda:
          sg.ControlVariateTarget(mem(log_prior_fn=lambda w: prior(w[0])),
                                  tf.zeros([D])),
          "log_prior_fn", r"float32\[3\]"),
    clear("JointDistribution node reads w[0]", _joint_node_reads_w0,
          "model", r"w\[0\]"),
    clear("log-prior sums over the chains too", lambda: boot(sg.SGLD(mem(
        log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2)), 0.1),
        tf.zeros([4, D])), "log_prior_fn", r"returned shape \[\].*\[4\]"),
    clear("log-prior in float64 for a float32 state", lambda: boot(sg.SGLD(
        mem(log_prior_fn=lambda w: tf.cast(prior(w), tf.float64)), 0.1),
        tf.zeros([D])), "log_prior_fn", r"dtype float64"),
    clear("log-prior expects a list state", lambda: boot(sg.SGLD(mem(
        log_prior_fn=lambda p: prior(p[0]) + prior(p[1])), 0.1),
        tf.zeros([D])), "log_prior_fn", r"float32\[3\]"),
    correct("constant log-prior with 4 chains", constant_prior_broadcasts),
    correct("integer constant log-prior", integer_constant_prior),
    correct("per-chain minibatches with a one-chain log-likelihood",
            independent_chains_fallback),
    clear("energy function that is a number", lambda: sg.NoisyGradientTarget(
        1., gradient_noise_variance=1.), "energy_fn", r"got 1.0"),
    clear("energy computed in float64", lambda: boot(sg.SGLD(
        sg.NoisyGradientTarget(lambda x: tf.cast(quadratic(x), tf.float64),
                               gradient_noise_variance=1.), 0.1),
        tf.zeros([D])), "energy_fn", r"dtype float64"),
    clear("energy summed over declared chains", lambda: boot(sg.SGLD(
        noisy(parameter_shapes=[D]).__class__(
            lambda x: tf.reduce_sum(x ** 2), gradient_noise_variance=1.,
            parameter_shapes=[D]), 0.1), tf.zeros([4, D])), "energy_fn",
          r"shape \[\].*\[4, 3\]"),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"


def test_a_float64_log_density_named_with_how_to_give_a_float64_state():
  # `sample` makes a float32 state from `parameter_shapes` (a log density
  # has no data to read the dtype from); the error asked whether the state
  # structure matched, and the cause (float64 constants) was only in TF's
  # message at its end.
  mvn = tfp.distributions.MultivariateNormalDiag(
      tf.constant([1., -1.], tf.float64), tf.constant([1., 2.], tf.float64))
  with pytest.raises(ValueError, match=r"another float dtype than the "
                     r"float32 state.*`initial_state=`.*np.zeros\(d\)"):
    sg.sample(target_log_prob_fn=mvn.log_prob, parameter_shapes=[2],
              seed=[0, 1], progress=False, print_report=False)
  # Not said where the dtypes agree and the structure is the fault.
  with pytest.raises(ValueError) as error:
    boot(sg.SGLD(target_log_prob_fn=lambda s: mvn.log_prob(s["w"]),
                 step_size=.1), tf.zeros([4, 2], tf.float64))
  assert "another float dtype" not in str(error.value)


def test_a_float32_prior_beside_float64_data_is_told_to_cast_the_data():
  # numpy's default float64 data make `sample` start a float64 state, and
  # a prior written as tfd.Normal(0., 1.) computes in float32. Giving a
  # float32 state alone (what the error said before) fails next on the
  # float64 data; the error names both ways out.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 3))
  y = (rng.uniform(size=200) < 0.5).astype("float64")
  target = sg.InMemoryTarget(
      lambda w, batch: tfp.distributions.Bernoulli(
          logits=tf.linalg.matvec(batch[0], w)).log_prob(batch[1]),
      data=(x, y), batch_size=50, parameter_shapes=[3],
      log_prior_fn=lambda w: tf.reduce_sum(
          tfp.distributions.Normal(0., 1.).log_prob(w), -1))
  with pytest.raises(ValueError, match=r"computes in float32 while the "
                     r"state is float64: give the target's data in float32 "
                     r"\(e.g. x.astype\('float32'\).*build the function in "
                     r"float64 \(e.g. tfd.Normal\(np.float64\(0.\), 1.\)\)"):
    sg.sample(target, seed=[0, 1], progress=False, print_report=False)


def test_labels_of_shape_n_by_1_are_named_as_broadcast_examples():
  # Labels [N, 1] against logits [N] give an [N, N] log-likelihood; the
  # error read the first axis as the chains' and named the state's shape.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(300, 3)).astype(np.float32)
  y = (rng.uniform(size=(300, 1)) < 0.5).astype(np.float32)
  target = sg.InMemoryTarget(
      lambda w, batch: tfp.distributions.Bernoulli(
          logits=tf.linalg.matvec(batch[0], w)).log_prob(batch[1]),
      data=(x, y), batch_size=50, parameter_shapes=[3])
  # One chain's state, as `sample`'s Newton start evaluates the energy.
  with pytest.raises(ValueError, match=r"returned shape \[300, 300\] for a "
                     r"batch of 300.*labels of shape \[300, 1\] against "
                     r"predictions of shape \[300\]"):
    target.energy(tf.zeros([3]))
  # A leading axis that is not the batch's keeps the chains' message.
  other = sg.InMemoryTarget(lambda w, batch: tf.zeros([7, 1]) + batch[1],
                            data=(x, y[:, 0]), batch_size=50,
                            parameter_shapes=[3])
  with pytest.raises(ValueError, match=r"leading \(chain\) axes are of "
                     r"shape \[7\]"):
    other.energy(tf.zeros([4, 3]))
