"""Kernel constructors and wrappers refuse bad arguments early, naming the
argument and the value received: step sizes, frictions, temperatures, noise
estimates, integrators, leapfrog steps, tree depths, compute_energy, the
target itself (a plain function, None), and the amortized M-H wrapper's
inner kernel. Numbers given as NumPy values or Variables are accepted and
give the same chain.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.amagold_targets import noisy_gaussian
from support.bad_inputs import D, bootstrap, classify, clear, correct, noisy
from support.bad_inputs import quadratic, steps
from support.sgnuts_gaussian import gaussian


@pytest.fixture
def target():
  return sg.NoisyGradientTarget(quadratic, gradient_noise_variance=1.)


@pytest.mark.parametrize("step_size", [0., -0.1, float("nan")])
def test_non_positive_step_size(target, step_size):
  with pytest.raises(ValueError, match=r"`step_size` must be > 0.*got"):
    sg.SGLD(target, step_size)
  with pytest.raises(ValueError, match=r"`step_size` must be > 0"):
    sg.SGHMC(target, step_size, friction=1.)


@pytest.mark.parametrize("friction", [0., -1.])
def test_non_positive_friction(target, friction):
  with pytest.raises(ValueError, match=r"`friction` must be > 0.*got"):
    sg.SGHMC(target, 0.1, friction=friction)


def test_friction_smaller_than_noise_estimate(target):
  with pytest.raises(ValueError, match=r"`friction` C = 0.5 must be >= "
                     r"`noise_estimate` B-hat = 1.0"):
    sg.SGHMC(target, 0.1, friction=0.5, noise_estimate=1.0)


def test_other_bad_kernel_arguments(target):
  with pytest.raises(ValueError, match="`integrator` must be one of"):
    sg.SGHMC(target, 0.1, 1., integrator="rk4")
  with pytest.raises(ValueError, match="`noise_estimate` must be"):
    sg.SGHMC(target, 0.1, 1., noise_estimate="fisher")
  with pytest.raises(ValueError, match="`momentum_resampling_period`"):
    sg.SGHMC(target, 0.1, 1., momentum_resampling_period=0)
  with pytest.raises(ValueError, match="`temperature` must be > 0"):
    sg.SGLD(target, 0.1, temperature=0.)
  with pytest.raises(TypeError, match="`target` must be a tfp_sgmcmc target"):
    sg.SGLD(quadratic, 0.1)
  with pytest.raises(ValueError, match="PolynomialDecay `gamma`"):
    sg.PolynomialDecay(a=0.1, gamma=-1.)


_ENERGY_FREE_KERNELS = {
    "SGLD": lambda t, **kw: sg.SGLD(t, 0.1, **kw),
    "SGHMC": lambda t, **kw: sg.SGHMC(t, 0.1, friction=1., **kw),
    "PreconditionedSGLD": lambda t, **kw: sg.PreconditionedSGLD(t, 0.1, **kw),
    "SGNHT": lambda t, **kw: sg.SGNHT(t, 0.1, **kw),
    "SGBD": lambda t, **kw: sg.SGBD(t, 0.5, variant="extreme", **kw),
}
_WITH_COMPUTE_ENERGY = dict(
    _ENERGY_FREE_KERNELS,
    AMAGOLD=lambda t, **kw: sg.AMAGOLD(t, 0.1, num_leapfrog_steps=2,
                                       friction=0.5, **kw))


_FULL_BATCH_WITHOUT_ENERGY = ("SGHMC", "SGNHT", "AMAGOLD")


@pytest.mark.parametrize("name", sorted(_WITH_COMPUTE_ENERGY))
def test_compute_energy_must_be_a_python_bool(target, name):
  make = _WITH_COMPUTE_ENERGY[name]
  for bad in ("no", 0, None, tf.constant(False)):
    with pytest.raises(TypeError, match=r"`compute_energy` must be True or "
                       r"False; got .* of type"):
      make(target, compute_energy=bad)
  full = sg.InMemoryTarget(lambda w, b: -0.5 * tf.reduce_sum(
      (b - w[..., None, :]) ** 2, -1), np.zeros((10, 2), np.float32),
                           full_batch=True)
  make(full, compute_energy=True)  # The default is accepted everywhere.
  if name in _FULL_BATCH_WITHOUT_ENERGY:
    # Nothing in their step reads the log density: a full-batch step then
    # evaluates the gradient alone.
    make(None, target_log_prob_fn=lambda x: -quadratic(x),
         compute_energy=False)
    make(full, compute_energy=False)
    return
  # The kernel's own step needs the exact log density: refused, not ignored.
  with pytest.raises(ValueError, match=r"`compute_energy=False` with a "
                     r"full-batch target.*needs the exact log density.*Drop "
                     r"`compute_energy=False`"):
    make(None, target_log_prob_fn=lambda x: -quadratic(x),
         compute_energy=False)
  with pytest.raises(ValueError, match="full-batch target"):
    make(full, compute_energy=False)


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(num_leapfrog_steps=0), ValueError, "num_leapfrog_steps.*>= 1.*0"),
    (dict(num_leapfrog_steps=2.5), TypeError, "num_leapfrog_steps.*2.5"),
    (dict(friction=-0.1), ValueError, "friction.*>= 0.*-0.1"),
    (dict(momentum_std=0.), ValueError, "momentum_std.*> 0.*0.0"),
    (dict(momentum_std=-1.), ValueError, "momentum_std.*> 0.*-1.0"),
    (dict(step_size=0.), ValueError, "step_size.*> 0.*0.0"),
    (dict(resample_momentum="yes"), TypeError, "resample_momentum.*'yes'"),
    (dict(acceptance_energy="approx"), ValueError,
     "acceptance_energy.*'approx'"),
])
def test_bad_arguments_raise_clear_errors(kwargs, error, match):
  args = dict(target=noisy_gaussian(), step_size=0.1, num_leapfrog_steps=10,
              friction=0.5)
  args.update(kwargs)
  with pytest.raises(error, match=match):
    sg.AMAGOLD(**args)


def test_wrapper_rejects_a_kernel_without_a_proposal_ratio():
  kernel = sg.AmortizedMetropolisHastings(
      sg.SGHMC(noisy_gaussian(), step_size=0.1, friction=1.))
  with pytest.raises(ValueError, match="log_acceptance_correction"):
    kernel.bootstrap_results(tf.zeros([2, 2]))
  with pytest.raises(TypeError, match="inner_kernel"):
    sg.AmortizedMetropolisHastings(lambda x: x)


def test_sgnuts_bad_arguments_and_reproducibility():
  target = gaussian([1., 1.])
  with pytest.raises(ValueError, match="`max_tree_depth` must be"):
    sg.SGNUTS(target, 0.1, 1., max_tree_depth=0)
  with pytest.raises(ValueError, match="`weighting` must be one of"):
    sg.SGNUTS(target, 0.1, 1., weighting="slice")
  with pytest.raises(ValueError, match="`friction` must be > 0"):
    sg.SGNUTS(target, 0.1, 0.)
  # Reproducible: one compiled chain (the seed its argument; SG-NUTS
  # compiles slowly) gives the same draws for the same seed, other draws
  # for another.
  kernel = sg.SGNUTS(target, 0.1, friction=0.1, max_tree_depth=8)
  chain = tf.function(lambda seed: tfp.mcmc.sample_chain(
      20, tf.zeros([8, 2]), kernel=kernel, trace_fn=None,
      num_burnin_steps=100, seed=seed), jit_compile=True, autograph=False)
  a = chain(tf.constant([1, 2]))
  b = chain(tf.constant([1, 2]))
  c = chain(tf.constant([3, 4]))
  np.testing.assert_array_equal(a, b)
  assert not np.allclose(a, c)


tfd, tfb = tfp.distributions, tfp.bijectors
MVN = tfd.MultivariateNormalDiag([1., -1.], [1., 2.])


def test_a_callable_passed_as_target_gets_a_clear_error():
  with pytest.raises(TypeError, match="target_log_prob_fn="):
    sg.SGLD(MVN.log_prob, step_size=0.1)
  with pytest.raises(TypeError, match="give `target`"):
    sg.SGLD(step_size=0.1)


CLEAR_MESSAGES = [
    ("infinite step size", lambda: sg.SGLD(noisy(), float("inf")),
     ValueError, r"`step_size` must be > 0 and finite; got inf"),
    ("negative temperature on SGHMC", lambda: sg.SGHMC(
        noisy(), 0.1, 1., temperature=-1.), ValueError,
     r"`temperature` must be > 0 and finite; got -1.0"),
    ("negative per-coordinate noise estimate", lambda: sg.SGHMC(
        noisy(), 0.1, 1., noise_estimate=[0.1, -0.1]), ValueError,
     r"`noise_estimate` must be >= 0"),
    ("SGD form with zero learning rate", lambda: sg.SGHMC.from_sgd_momentum(
        noisy(), 0., 0.1), ValueError, r"`learning_rate` must be > 0.*got 0"),
    ("SGNHT negative diffusion", lambda: sg.SGNHT(noisy(), 0.1, -1.),
     ValueError, r"`diffusion` must be >= 0 and finite; got -1.0"),
    ("pSGLD decay of one", lambda: sg.PreconditionedSGLD(
        noisy(), 0.1, decay=1.), ValueError,
     r"`decay` \(alpha\) must be in \[0, 1\); got 1.0"),
    ("pSGLD zero regularizer", lambda: sg.PreconditionedSGLD(
        noisy(), 0.1, regularizer=0.), ValueError, r"`regularizer` must be"),
    ("kernel given a plain function as target", lambda: sg.SGNHT(
        quadratic, 0.1), TypeError, r"`target` must be a tfp_sgmcmc target"
     r".*got function"),
    ("M-H wrapper around a kernel without log proposal ratio", bootstrap(
        sg.AmortizedMetropolisHastings(sg.SGLD(noisy(), 0.1)),
        tf.zeros([1])), ValueError, r"no `log_acceptance_correction`"),
    ("M-H wrapper around a non-kernel", lambda: sg.AmortizedMetropolisHastings(
        noisy()), TypeError, r"`inner_kernel` must be a "
     r"tfp.mcmc.TransitionKernel; got NoisyGradientTarget"),
    ("unknown acceptance energy", lambda: sg.AMAGOLD(
        noisy(), 0.1, 5, 0.5, acceptance_energy="approx"), ValueError,
     r"`acceptance_energy` must be one of.*got 'approx'"),
    ("SG-NUTS tree depth not an integer", lambda: sg.SGNUTS(
        noisy(), 0.1, 1., max_tree_depth=3.5), TypeError,
     r"`max_tree_depth` must be an integer in \[1, 12\]; got 3.5"),
]


@pytest.mark.parametrize("case,call,error,pattern", CLEAR_MESSAGES,
                         ids=[c[0] for c in CLEAR_MESSAGES])
def test_bad_input_fails_early_with_a_clear_message(case, call, error,
                                                    pattern):
  del case
  with pytest.raises(error, match=pattern):
    call()


def variable_step_size_as_float():
  a, _ = steps(sg.SGLD(noisy(), tf.Variable(0.1)), tf.ones([D]))
  b, _ = steps(sg.SGLD(noisy(), 0.1), tf.ones([D]))
  np.testing.assert_array_equal(a, b)


def numpy_step_size_as_float():
  a, _ = steps(sg.SGHMC(noisy(), np.float64(0.1), np.array(2.)),
               tf.ones([D]))
  b, _ = steps(sg.SGHMC(noisy(), 0.1, 2.), tf.ones([D]))
  np.testing.assert_array_equal(a, b)


def _friction_lowered_below_noise(jit):
  # A friction Variable lowered below noise_estimate after construction:
  # eagerly an error, and in a compiled run (where XLA drops assertions)
  # every chain is flagged diverged instead of running as noiseless SGD
  # with momentum.
  friction = tf.Variable(2.)
  kernel = sg.SGHMC(noisy(), 0.1, friction, noise_estimate=1.)
  state = tf.ones([2, D])
  results = kernel.bootstrap_results(state)
  friction.assign(0.5)
  if jit is None:
    return kernel.one_step(state, results, seed=[1, 2])
  step = tf.function(lambda s, r: kernel.one_step(s, r, seed=[1, 2]),
                     jit_compile=True, autograph=False)
  new_state, new_results = step(state, results)
  assert np.all(np.asarray(new_results.diverged)), new_results.diverged
  np.testing.assert_array_equal(new_state, state)
  friction.assign(2.)  # Back above: the same step runs.
  assert not np.any(np.asarray(step(state, results)[1].diverged))


def _wrong_length(kernel, state=None):
  state = tf.zeros([2, D]) if state is None else state
  return lambda: kernel.one_step(state, kernel.bootstrap_results(state),
                                 seed=[1, 2])


def _per_part_steps_fit():
  # One step size per part of a list state, and one per coordinate of a
  # part: accepted.
  kernel = sg.SGLD(target_log_prob_fn=lambda a, b: -0.5 * tf.reduce_sum(
      a ** 2, -1) - 0.5 * tf.reduce_sum(b ** 2, -1),
                   step_size=[tf.constant([0.1, 0.2, 0.3]), 0.1])
  steps(kernel, [tf.zeros([2, D]), tf.zeros([2, 1])])


def _two_normals(w, b):
  return -0.5 * tf.reduce_sum(w ** 2, -1) - 0.5 * tf.reduce_sum(b ** 2, -1)


def _dict_state(keys, make):
  # tf.nest reads a dict in sorted-key order: a per-part list written in
  # the order of a dict {"w", "b"} gave w's step size to b, silently.
  state = {k: tf.ones([2, 1]) for k in keys}
  return steps(make(target_log_prob_fn=_two_normals), state)


def _sorted_dict_state_steps():
  # Keys written in sorted order: the list is read in the order written;
  # step size 0 for b cannot be given, so b gets a tiny one and stays put.
  moved, _ = _dict_state("bw", lambda **kw: sg.SGLD(step_size=[1e-12, 0.5],
                                                    **kw))
  assert np.all(np.abs(moved["b"].numpy() - 1.) < 1e-4)
  assert np.all(np.abs(moved["w"].numpy() - 1.) > 1e-4)


OUTCOMES = [
    clear("friction Variable below noise_estimate at construction",
          lambda: sg.SGHMC(noisy(), 0.1, tf.Variable(0.5), noise_estimate=1.),
          "friction", r"Variable.*0.5.*`noise_estimate` B-hat = 1.0"),
    clear("friction Variable lowered below noise_estimate, eager",
          lambda: _friction_lowered_below_noise(None), "friction",
          r"at every step.*C = tf.Variable.*0.5"),
    correct("friction Variable lowered below noise_estimate, XLA: flagged",
            lambda: _friction_lowered_below_noise(True)),
    clear("SG-NUTS noise estimate above the friction", lambda: sg.SGNUTS(
        noisy(), 0.1, 0.5, noise_estimate=1.), "friction",
          r"`noise_estimate` B-hat = 1.0"),
    clear("per-coordinate step sizes of the wrong length",
          _wrong_length(sg.SGLD(noisy(), tf.constant([0.1, 0.1]))),
          "step_size", r"shape \[2\].*`current_state` of shape \[2, 3\]"),
    clear("per-coordinate numpy step sizes of the wrong length (SGNHT)",
          _wrong_length(sg.SGNHT(noisy(), np.full(4, 0.1, np.float32))),
          "step_size", r"shape \[4\].*shape \[2, 3\]"),
    clear("per-coordinate AMAGOLD step sizes of the wrong length",
          _wrong_length(sg.AMAGOLD(noisy(), tf.constant([0.1, 0.1]), 2, 1.)),
          "step_size", r"shape \[2\].*shape \[2, 3\]"),
    clear("per-coordinate noise estimate of the wrong length",
          _wrong_length(sg.SGHMC(noisy(), 0.1, 1.,
                                 noise_estimate=tf.constant([0.1, 0.1]))),
          "noise_estimate", r"shape \[2\].*shape \[2, 3\]"),
    clear("per-coordinate friction of the wrong length",
          _wrong_length(sg.SGHMC(noisy(), 0.1, np.ones(4, np.float32))),
          "friction", r"shape \[4\].*shape \[2, 3\]"),
    clear("step sizes that would add chains",
          _wrong_length(sg.SGLD(noisy(), tf.fill([5, 1, D], 0.1))),
          "step_size", r"shape \[5, 1, 3\].*shape \[2, 3\]"),
    correct("per-part and per-coordinate step sizes that fit",
            _per_part_steps_fit),
    # A list is one step size per state part (TFP's convention): a list of
    # one per coordinate for a one-part state failed deep in tf.nest at the
    # first step, in sample_chain and under TFP's step-size adaptation.
    clear("a list of per-coordinate step sizes for a one-part state (SGLD)",
          lambda: tfp.mcmc.sample_chain(
              2, tf.zeros([2, D]), kernel=sg.SGLD(noisy(), [0.1] * D),
              trace_fn=None, seed=[1, 2]),
          "step_size", r"3 entries but the state has 1 parts.*np.array"),
    clear("a list of per-coordinate AMAGOLD step sizes under adaptation",
          lambda: tfp.mcmc.sample_chain(
              2, tf.zeros([2, D]), kernel=tfp.mcmc.SimpleStepSizeAdaptation(
                  sg.AMAGOLD(noisy(), [0.1] * D, 2, 1.), 2),
              trace_fn=None, seed=[1, 2]),
          "step_size", r"3 entries but the state has 1 parts.*np.array"),
    clear("a per-part step-size list for a dict written out of key order",
          lambda: _dict_state("wb", lambda **kw: sg.SGLD(step_size=[
              0.5, 1e-6], **kw)), "step_size",
          r"sorts a dict's keys \(\['b', 'w'\]\).*\['w', 'b'\]"),
    clear("a per-part friction list for a dict written out of key order",
          lambda: _dict_state("wb", lambda **kw: sg.SGHMC(
              step_size=0.1, friction=[1., 2.], **kw)), "friction",
          r"\['w', 'b'\].*ambiguous.*dict\(sorted\(state.items"),
    correct("a per-part step-size list for a dict in key order",
            _sorted_dict_state_steps),
    clear("step size None", lambda: sg.SGLD(noisy(), None), "step_size",
          r"got None"),
    clear("per-coordinate step sizes with a negative one", lambda: sg.SGLD(
        noisy(), [0.1, -0.1, 0.1]), "step_size", r"-0.1"),
    clear("complex step size", lambda: sg.SGLD(noisy(), 0.1j),
          "step_size", r"0.1j"),
    clear("friction as a string", lambda: sg.SGHMC(noisy(), 0.1, "1"),
          "friction", r"got '1'"),
    clear("negative friction in a Variable", lambda: sg.SGHMC(
        noisy(), 0.1, tf.Variable(-1.)), "friction", r"Variable.*-1"),
    clear("NaN step size in numpy float32", lambda: sg.SGNHT(
        noisy(), np.float32(np.nan)), "step_size", r"nan"),
    clear("zero temperature", lambda: sg.SGLD(noisy(), 0.1, temperature=0),
          "temperature", r"got 0"),
    clear("boolean temperature", lambda: sg.SGLD(noisy(), 0.1,
                                                 temperature=True),
          "temperature", r"got True"),
    clear("momentum resampling every 0 steps", lambda: sg.SGHMC(
        noisy(), 0.1, 1., momentum_resampling_period=0),
          "momentum_resampling_period", r"got 0"),
    clear("noise estimate above the friction", lambda: sg.SGHMC(
        noisy(), 0.1, 1., noise_estimate=2.), "friction", r"noise_estimate"),
    clear("pSGLD negative decay", lambda: sg.PreconditionedSGLD(
        noisy(), 0.1, decay=-0.1), "decay", r"-0.1"),
    clear("SG-NUTS tree depth 0", lambda: sg.SGNUTS(
        noisy(), 0.1, 1., max_tree_depth=0), "max_tree_depth", r"got 0"),
    clear("AMAGOLD with no leapfrog steps", lambda: sg.AMAGOLD(
        noisy(), 0.1, 0, 1.), "num_leapfrog_steps", r"got 0"),
    clear("kernel without a target", lambda: sg.SGLD(None, 0.1), "target",
          r"NoneType"),
    correct("step size in a positive Variable", variable_step_size_as_float),
    correct("numpy step size and friction", numpy_step_size_as_float),
]


@pytest.mark.parametrize("case", OUTCOMES, ids=[c.name for c in OUTCOMES])
def test_case_has_its_declared_outcome(case, tmp_path):
  outcome, detail = classify(case, tmp_path)
  assert outcome == case.outcome, f"{case.name}: {outcome}: {detail}"
