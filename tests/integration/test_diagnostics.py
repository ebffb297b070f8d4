"""summarize reports a diverged chain, a healthy AMAGOLD run's acceptance and
step size, and an energy that grows while every value is still finite.
"""

import collections
import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from support.helpers import sample


def test_summary_reports_divergence_acceptance_and_unbounded_energy():
  target = sg.NoisyGradientTarget(
      lambda x: tf.reduce_sum(0.25 * x ** 4, -1), gradient_noise_variance=0.)
  kernel = sg.SGHMC(target, step_size=0.2, friction=0.1)
  draws, trace = sample(kernel, tf.constant([[20.], [0.], [0.5], [-0.5]]),
                        300, seed=[1, 2], trace_fn=lambda _, r: r)
  with pytest.warns(sg.UnhealthyChainWarning, match="1 of 4 chains diverged"):
    health = sg.summarize(draws, trace, print_report=False)
  assert health.divergences[0] > 0 and not health.divergences[1:].any()

  # A healthy AMAGOLD run: no warning, acceptance and step size reported.
  gauss = sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x ** 2, -1),
                                 gradient_noise_variance=1.)
  kernel = sg.AMAGOLD(gauss, 0.3, num_leapfrog_steps=5, friction=0.5)
  draws, trace = sample(kernel, tf.zeros([4, 2]), 1000, seed=[3, 4],
                        trace_fn=lambda _, r: r)
  with warnings.catch_warnings():
    warnings.simplefilter("error", sg.UnhealthyChainWarning)
    health = sg.summarize(draws, trace, print_report=False)
  assert not health.problems
  assert np.all((health.acceptance_rate > 0.3) & (health.acceptance_rate < 1))
  assert np.allclose(health.step_size, 0.3)
  report = sg.diagnostics.format_report(health)
  assert "healthy" in report and "accept" in report

  # SGLD at h = 2.02 on U = x^2 / 2: theta' = (1 - h) theta + noise grows
  # by 2% a step, so the energy climbs for hundreds of steps before any
  # overflow. Flagged as growing energy while every value is still finite.
  draws, trace = sample(sg.SGLD(gauss, 2.02), tf.ones([2, 1]), 400,
                        seed=[5, 6], trace_fn=lambda _, r: r)
  assert np.all(np.isfinite(draws)) and not np.any(trace.diverged)
  with pytest.warns(sg.UnhealthyChainWarning, match="energy grows"):
    sg.summarize(draws, trace, print_report=False)


def test_chains_batched_in_two_axes_are_summarized_as_chains():
  # Chains of shape [2, 3] are 6 chains: the diverged one (0, 1) is chain
  # 1 of 6 (it crashed in numpy's broadcasting; healthy runs were reported
  # as 2 chains with the second chain axis taken for parameters).
  target = sg.NoisyGradientTarget(
      lambda x: tf.reduce_sum(0.25 * x ** 4, -1), gradient_noise_variance=0.)
  start = np.zeros([2, 3, 1], np.float32)
  start[0, 1] = 20.
  draws, trace = sample(sg.SGHMC(target, step_size=0.2, friction=0.1),
                        tf.constant(start), 300, seed=[1, 2],
                        trace_fn=lambda _, r: r)
  with pytest.warns(sg.UnhealthyChainWarning, match="1 of 6 chains diverged"):
    health = sg.summarize(draws, trace, print_report=False)
  flat = sg.summarize(np.reshape(draws, [300, 6, 1]), tf.nest.map_structure(
      lambda t: np.reshape(t, (300, 6) + np.shape(t)[3:])
      if np.shape(t)[1:3] == (2, 3) else t, trace), print_report=False,
                      warn=False)
  assert health.num_chains == 6
  np.testing.assert_array_equal(health.divergences, flat.divergences)
  assert health.divergences[1] > 0 and not np.delete(health.divergences,
                                                     1).any()
  verdict = sg.diagnostics.divergence_and_heating(draws, trace)
  np.testing.assert_array_equal(verdict.divergences, flat.divergences)


def test_chains_batched_in_two_axes_under_tfps_own_kernel():
  # TFP's HMC traces no `diverged`, from which the chain axes were read:
  # chains [2, 3] stayed 2 chains of [3, 2] parameters, and summarize
  # raised numpy's "operands could not be broadcast together with shapes
  # (2,) (6,)". Its `is_accepted` gives them: 6 chains, and chain (0, 2)
  # moved 5 sds off is a disagreement (TFP's R-hat about 1 + 25 / 6).
  kernel = tfp.mcmc.HamiltonianMonteCarlo(
      lambda x: -0.5 * tf.reduce_sum(x ** 2, -1), 0.5, 3)
  draws, trace = sample(kernel, tf.zeros([2, 3, 2]), 200, seed=[0, 1],
                        trace_fn=lambda _, r: r)
  draws = np.array(draws)
  draws[:, 0, 2] += 5.
  health = sg.summarize(draws, trace, print_report=False, warn=False)
  assert health.num_chains == 6 and health.acceptance_rate.shape == (6,)
  assert health.max_rhat > 2.
  assert health.problems[0].endswith("chains disagree")


def test_divergent_transitions_are_counted_and_named():
  # An M-H kernel rejects a proposal with a non-finite energy and its chain
  # stays finite (nothing is flagged `diverged`): Stan's divergent
  # transition. Where they gather, the chains miss part of the posterior
  # (the centred eight schools' funnel neck, with R-hat 1.005 and "no
  # problems found" before they were counted). Here a half-normal written
  # on the whole line, -inf below 0: HMC's proposals across 0 are rejected.
  def log_prob(x):
    return tf.reduce_sum(tf.where(x > 0., -0.5 * x**2, -np.inf), -1)
  kernel = tfp.mcmc.HamiltonianMonteCarlo(log_prob, 0.5, 4)
  draws, trace = tfp.mcmc.sample_chain(
      100, tf.fill([4, 1], 1.), kernel=kernel, seed=[7, 8],
      trace_fn=lambda _, r: r)
  rejected = np.sum(~np.isfinite(trace.log_accept_ratio.numpy()), 0)
  assert np.all(np.isfinite(draws)) and rejected.sum() > 5
  with pytest.warns(sg.UnhealthyChainWarning, match="divergent transitions"):
    health = sg.summarize(draws, trace, print_report=False)
  np.testing.assert_array_equal(health.divergences, rejected)
  assert any(f"{rejected.sum()} divergent transitions in 4 of 4 chains" in p
             for p in health.problems)
  # Written on the half line the sampler has no such proposals.
  kernel = tfp.mcmc.HamiltonianMonteCarlo(
      lambda x: tf.reduce_sum(-0.5 * x**2, -1), 0.5, 4)
  draws, trace = tfp.mcmc.sample_chain(
      100, tf.fill([4, 1], 1.), kernel=kernel, seed=[7, 8],
      trace_fn=lambda _, r: r)
  assert not sg.summarize(draws, trace, print_report=False,
                          warn=False).divergences.any()


# The heating statistic's threshold (8) was calibrated on correct chains:
# SGLD, SGHMC and AMAGOLD at sound step sizes on a Gaussian (linear
# regression) and a logistic regression posterior, 4 seeds x 32 chains each
# (768 chains, docs/long_runs.md): the largest statistic was 3.6 and none
# exceeded 4. So a false alarm on the few correct chains below would take a
# statistic more than twice the largest of 768, and the seeds are not
# chosen: any seed passes.
N, D, H_GAUSS = 1000, 5, 3e-3


def _regression_target():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(N, D)).astype(np.float32)
  y = (x @ rng.normal(size=D) + rng.normal(size=N)).astype(np.float32)

  def log_likelihood(w, batch):
    prediction = tf.reduce_sum(w[..., None, :] * batch[0], -1)
    return -0.5 * (batch[1] - prediction) ** 2
  return sg.InMemoryTarget(log_likelihood, (x, y), 50,
                           log_prior_fn=lambda w: -0.5 * tf.reduce_sum(
                               w ** 2, -1))


def _run(kernel, seed, chains=8, n=1000):
  return sample(kernel, tf.zeros([chains, D]), n, seed=seed,
                num_burnin_steps=300, trace_fn=lambda _, r: r)


def test_heating_chain_is_reported_while_every_value_is_finite():
  # SGHMC at 10x a sound step size on a posterior of precision about N:
  # the chains heat up (means of 1e10 and more) without any non-finite
  # value, so no divergence flag fires.
  target = _regression_target()
  draws, trace = _run(sg.SGHMC(target, 10 * H_GAUSS, friction=1.), [1, 2])
  fine = ~np.asarray(sg.diagnostics.find_field(trace, "diverged")).any(0)
  assert fine.sum() >= 4 and np.all(np.isfinite(np.asarray(draws)[:, fine]))
  with pytest.warns(sg.UnhealthyChainWarning, match="heats up"):
    health = sg.summarize(draws, trace, print_report=False)
  assert np.all(health.heating[fine] > sg.diagnostics.HEATING_THRESHOLD)
  # The same sampler at the sound step size: no chain is reported.
  for kernel in (sg.SGHMC(target, H_GAUSS, friction=1.),
                 sg.SGLD(target, 1e-4),
                 sg.AMAGOLD(target, H_GAUSS, num_leapfrog_steps=5,
                            friction=1.)):
    draws, trace = _run(kernel, [3, 4])
    health = sg.summarize(draws, trace, print_report=False, warn=False)
    assert not any("heats up" in p for p in health.problems), (
        kernel, health.heating)
    assert np.all(health.heating < 4.), health.heating


def test_heating_against_a_reference_catches_a_chain_hot_from_the_start():
  # SGLD at 1000x a sound step size on a logistic regression stays finite
  # and flat after its burn-in, with energies 400x the posterior's: compared
  # with its own start it looks steady; compared with the energy at the
  # mode it is not (statistic 16-18 on 8 chains; 11 at 100x the step).
  rng = np.random.default_rng(1)
  x = rng.normal(size=(N, D)).astype(np.float32)
  y = (rng.uniform(size=N) < 1 / (1 + np.exp(-x @ rng.normal(size=D)))
       ).astype(np.float32)

  def log_likelihood(w, batch):
    logits = tf.reduce_sum(w[..., None, :] * batch[0], -1)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(batch[1], tf.shape(logits)), logits=logits)
  target = sg.InMemoryTarget(log_likelihood, (x, y), 50,
                             log_prior_fn=lambda w: -0.5 * tf.reduce_sum(
                                 w ** 2, -1))
  mode = sg.find_mode(target, tf.zeros([D]), num_steps=500)
  reference = float(target.energy(mode))
  for h, hot in ((1e-3, False), (1., True)):
    draws, trace = _run(sg.SGLD(target, h), [5, 6], chains=4)
    assert np.all(np.isfinite(np.asarray(draws)))
    alone = sg.summarize(draws, trace, print_report=False, warn=False)
    assert np.all(alone.heating < 4.), (h, alone.heating)
    health = sg.summarize(draws, trace, print_report=False, warn=False,
                          reference_energy=reference)
    threshold = sg.diagnostics.HEATING_THRESHOLD
    if hot:
      assert np.all(health.heating > threshold), health.heating
    else:
      assert np.all(health.heating < 4.), health.heating


def test_sample_moments_reports_diverged_and_heating_chains():
  target = _regression_target()
  # Every chain overflows and is flagged: its frozen draws (1e17 and more)
  # used to be folded into finite moments with no word.
  with pytest.warns(sg.UnhealthyChainWarning, match="4 of 4 chains diverged"):
    m = sg.sample_moments(sg.SGLD(target, 0.1), tf.zeros([4, D]), 1000,
                          seed=[1, 2], num_burnin_steps=300)
  assert m.num_diverged == 4 and np.all(m.diverged)
  assert np.all(np.isnan(m.mean)) and np.all(np.isnan(m.variance))
  # Heating without divergence: reported per chain, moments kept.
  with pytest.warns(sg.UnhealthyChainWarning, match="heats up"):
    m = sg.sample_moments(sg.SGHMC(target, 10 * H_GAUSS, friction=1.),
                          tf.zeros([4, D]), 1000, seed=[1, 2],
                          num_burnin_steps=300)
  assert np.all(m.heating[~m.diverged] > sg.diagnostics.HEATING_THRESHOLD)
  # A sound run: no warning, nothing flagged.
  with warnings.catch_warnings():
    warnings.simplefilter("error", sg.UnhealthyChainWarning)
    m = sg.sample_moments(sg.SGHMC(target, H_GAUSS, friction=1.),
                          tf.zeros([4, D]), 1000, seed=[1, 2],
                          num_burnin_steps=300)
  assert m.num_diverged == 0 and np.all(m.heating < 4.)
  assert np.all(np.isfinite(m.mean))


def test_sample_moments_excludes_a_frozen_finite_chain():
  # SGHMC on U = x^4 / 4: the chain started at 20 overflows its momentum
  # and is frozen at its last finite state (finite draws); the others are
  # untouched by it (the noise of a chain depends only on its index).
  target = sg.NoisyGradientTarget(
      lambda x: tf.reduce_sum(0.25 * x ** 4, -1), gradient_noise_variance=0.)
  kernel = sg.SGHMC(target, step_size=0.2, friction=0.1)
  with pytest.warns(sg.UnhealthyChainWarning, match="1 of 4 chains diverged"):
    m = sg.sample_moments(kernel, tf.constant([[20.], [0.], [0.5], [-0.5]]),
                          300, seed=[1, 2], jit_compile=False)
  assert m.num_diverged == 1 and list(m.diverged) == [True, False, False,
                                                       False]
  assert np.isnan(m.mean[0, 0]) and np.isnan(m.variance[0, 0])
  assert np.all(np.isfinite(np.asarray(m.final_state)))  # Frozen, finite.
  clean = sg.sample_moments(kernel, tf.constant([[0.], [0.], [0.5], [-0.5]]),
                            300, seed=[1, 2], jit_compile=False)
  np.testing.assert_array_equal(m.mean[1:], clean.mean[1:])
  np.testing.assert_array_equal(m.variance[1:], clean.variance[1:])


def test_shared_minibatches_are_noted_as_optimistic_rhat_and_ess(capsys):
  # 4 chains sharing each step's minibatch: the report (and the record)
  # says R-hat and ESS are optimistic; independent minibatches, or no
  # kernel given, say nothing of it.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 2)).astype(np.float32)
  y = (x @ np.float32([1., -1.]) + rng.normal(size=200)).astype(np.float32)

  def target(**options):
    return sg.InMemoryTarget(
        lambda w, b: -0.5 * (b[1] - tf.linalg.matvec(b[0], w)) ** 2, (x, y),
        batch_size=20, log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1),
        **options)
  draws = rng.normal(size=(50, 4, 2))
  shared = sg.SGLD(target(), 1e-3)
  health = sg.summarize(draws, kernel=shared, warn=False)
  assert len(health.notes) == 1 and "optimistic" in health.notes[0]
  assert "independent_minibatches=True" in health.notes[0]
  assert "note: the chains shared each step's minibatch" in (
      capsys.readouterr().out)
  own = sg.SGLD(target(parameter_shapes=[2], independent_minibatches=True),
                1e-3)
  assert not sg.summarize(draws, kernel=own, warn=False).notes
  assert not sg.summarize(draws, warn=False).notes
  # One chain has nothing to compare across.
  assert not sg.summarize(draws[:, :1], kernel=shared, warn=False).notes


def test_divergence_and_heating_is_summarizes_verdict_without_ess():
  # The same problems as summarize's, for a caller that reports them itself.
  draws = np.random.default_rng(1).normal(size=(40, 3, 2))
  draws[30:, 1] = np.inf
  verdict = sg.diagnostics.divergence_and_heating(draws, None)
  assert verdict.problems == ["samples contain NaN or inf"]
  assert verdict.heating is None and list(verdict.divergences) == [0, 0, 0]
  health = sg.summarize(draws, print_report=False, warn=False)
  assert verdict.problems[0] in health.problems


def test_summarize_logs_no_casting_warning(caplog):
  # ESS by a real FFT: TFP's complex FFT cast back to real made TensorFlow
  # log "casting an input of type complex64" at each call.
  draws = np.random.default_rng(2).normal(size=(100, 4, 3)).astype(
      np.float32)
  with caplog.at_level("WARNING"):
    health = sg.summarize(draws, print_report=False, warn=False)
  assert not [r for r in caplog.records if "casting" in r.getMessage()]
  expected = np.asarray(tfp.mcmc.effective_sample_size(
      tf.constant(draws.reshape(100, 4, 3)),
      filter_beyond_positive_pairs=True)).sum(axis=0).min()
  np.testing.assert_allclose(health.min_ess, expected, rtol=1e-5)


def test_the_library_drivers_do_not_repeat_tfps_calibration_warning():
  # TFP warns "not calibrated" for every SG kernel without an M-H test:
  # expected, nothing to act on (docs/tfp_workflow.md). The library's own
  # loops run quiet; TFP's own sample_chain still warns, as TFP intends.
  # The warning is raised when a loop is traced: graphs without XLA do.
  target = sg.NoisyGradientTarget(lambda x: 0.5 * tf.reduce_sum(x ** 2, -1),
                                  0.1)

  def calibration_warnings(run):
    with warnings.catch_warnings(record=True) as record:
      warnings.simplefilter("always")
      run(sg.SGLD(target, 1e-2))  # A new kernel: its loops are traced anew.
    return [w for w in record if "not calibrated" in str(w.message)]
  state = tf.zeros([2, 2])
  assert calibration_warnings(lambda k: tfp.mcmc.sample_chain(
      3, state, kernel=k, trace_fn=None, seed=[0, 1]))
  assert not calibration_warnings(lambda k: sg.sample_chain_with_progress(
      3, state, k, seed=[0, 1], progress=False, jit_compile=False))
  assert not calibration_warnings(lambda k: sg.sample_moments(
      k, state, num_steps=3, seed=[0, 1], jit_compile=False))


def _ar1_draws(num_draws, rho=0.95):
  """[num_draws, 4 chains, 2] AR(1) draws: ESS about n (1 - rho) / (1 + rho)
  per chain."""
  rng = np.random.default_rng(3)
  draws = np.zeros((num_draws, 4, 2))
  for t in range(1, num_draws):
    draws[t] = rho * draws[t - 1] + np.sqrt(1 - rho**2) * rng.normal(
        size=(4, 2))
  return draws


def test_a_low_ess_says_how_many_draws_would_reach_the_threshold():
  # Chains that agree (R-hat under its bar): the problem names the run
  # length that the run's own ESS per draw scales to, so a user knows what
  # "longer" means.
  health = sg.summarize(_ar1_draws(4000), print_report=False, warn=False,
                        min_ess=1000.)
  assert health.max_rhat <= 1.05
  problem = next(p for p in health.problems if p.startswith("min ESS"))
  needed = int(np.ceil(4000 * 1000. / health.min_ess))
  assert f"about {needed:,} draws per chain would reach it" in problem
  assert health.min_ess < 1000. and needed > 4000


def test_where_chains_disagree_the_draws_needed_are_a_floor():
  # The same chains, two of them shifted by 3 sds: R-hat is high, and the
  # ESS (each chain's own mixing, summed) cannot see it, so the run length
  # it scales to is named as a floor, not as enough.
  draws = _ar1_draws(4000)
  draws[:, :2] += 3.
  health = sg.summarize(draws, print_report=False, warn=False,
                        min_ess=1000.)
  assert health.max_rhat > 1.05
  problem = next(p for p in health.problems if p.startswith("min ESS"))
  needed = int(np.ceil(4000 * 1000. / health.min_ess))
  assert (f"this run's ESS per draw scales to {needed:,} draws per chain, "
          "but with R-hat that high more are needed" in problem)
  assert "would reach it" not in problem


def test_one_chain_whose_halves_differ_is_caught_by_its_split_rhat():
  # With no other chain, R-hat was reported as 1.000: a `sample` run of
  # one chain on a two-mode mixture (modes at -3 and 3, weights 0.3 and
  # 0.7) stayed in one mode, 0.62 sd from the mean, and was "healthy"
  # (ESS 133), where split R-hat, comparing the chain's halves as Stan's
  # does, was 1.071. Here the second half is shifted by 0.5 sd: TFP's
  # split R-hat (a ratio of variances) is then about 1 + 1.5 * 0.5^2 / 2 =
  # 1.19, and at least 1.12 at 2 sd of the halves' means' noise (0.045),
  # while 2 x 1,000 independent draws give 1 to within a few 1e-3.
  rng = np.random.default_rng(0)
  draws = rng.normal(size=(2000, 1, 2))
  healthy = sg.summarize(draws, print_report=False, warn=False)
  assert healthy.max_rhat < 1.01 and not healthy.problems
  draws[1000:, :, 0] += 0.5
  health = sg.summarize(draws, print_report=False, warn=False)
  assert health.max_rhat > 1.1
  assert health.problems[0] == (f"R-hat {health.max_rhat:.3f} > 1.05: the "
                                "chain's halves disagree (one chain)")
  # Too few draws to halve: 1, as before.
  assert sg.summarize(draws[:3], print_report=False,
                      warn=False).max_rhat == 1.


def test_chains_that_differ_in_spread_are_caught_by_the_rank_normalised_rhat():
  # Chains that agree on their means but not on their spread (one confined
  # to a narrower region, as a chain kept out of a funnel's neck is to a
  # wider one): TFP's split R-hat compares means only and stays near 1.
  rng = np.random.default_rng(0)
  wide = rng.normal(size=(1000, 4, 2))
  wide[:, 0] *= 3.
  frozen_coordinate = rng.normal(size=(1000, 4, 2))
  frozen_coordinate[:, 0, 0] = 0.
  for draws in (wide, frozen_coordinate):
    health = sg.summarize(draws, print_report=False, warn=False)
    assert health.max_rhat < 1.01
    assert health.max_rank_rhat**2 > 1.2
    assert health.problems == [
        f"rank-normalised R-hat {health.max_rank_rhat:.3f} (ArviZ's; squared"
        f" {health.max_rank_rhat**2:.3f} > 1.05): the chains (or one chain's"
        " halves) differ in spread or tails where their means agree, e.g. "
        "one confined to a narrower region"]
  # Twice the spread in one of four chains is caught too; independent
  # chains of one law are not (20 seeds of 4 x 200 draws, 5 coordinates).
  wide[:, 0] *= 2. / 3.
  assert sg.summarize(wide, print_report=False, warn=False).problems
  for seed in range(20):
    honest = np.random.default_rng(seed).normal(size=(200, 4, 5))
    assert not sg.summarize(honest, print_report=False,
                            warn=False).problems


def test_chains_in_two_modes_hold_few_effective_draws_together():
  # Each chain mixes within its own mode: their ESS summed is about 3,600,
  # while the chains together hold about 6 effective draws (ArviZ's bulk
  # ESS), which the report now prints beside it; R-hat names the cause.
  draws = np.random.default_rng(0).normal(size=(1000, 4, 1))
  draws[:, :2] += 5.
  health = sg.summarize(draws, print_report=False, warn=False)
  assert health.min_ess > 3000
  assert health.min_bulk_ess < 10
  assert [p[:5] for p in health.problems] == ["R-hat"]
  assert (f"min ESS {health.min_ess:.0f} (ArviZ's bulk / tail "
          f"{health.min_bulk_ess:.0f} / {health.min_tail_ess:.0f})"
          ) in sg.diagnostics.format_report(health)
  # Independent chains of one law: the three ESS agree.
  honest = sg.summarize(np.random.default_rng(1).normal(size=(1000, 4, 3)),
                        print_report=False, warn=False)
  assert not honest.problems
  np.testing.assert_allclose([honest.min_bulk_ess, honest.min_tail_ess],
                             honest.min_ess, rtol=0.25)


def test_a_chain_that_did_not_move_is_named():
  # A chain stuck where every proposal is rejected (a `sample` run on a
  # noise scale used without a bijector: acceptance 0.00, sd 4e-6 against
  # the others' 0.15). Without a trace, summarize saw R-hat 1.03 and no
  # problem (the float32 ESS was NaN, which no threshold crosses).
  rng = np.random.default_rng(0)
  draws = rng.normal(size=(1000, 4, 2)).astype(np.float32)
  draws[:, 0] = 0.3 + 4e-6 * rng.normal(size=(1000, 2))
  health = sg.summarize(draws, print_report=False, warn=False)
  assert health.max_rhat < 1.05
  assert health.problems[0] == (
      "chain 0 did not move (every draw the same, or sds under 0.01 of the "
      "other chains' in every coordinate): stuck, e.g. every proposal "
      "rejected; its draws are not the posterior's")
  # Its spread, unlike the others', is also what the rank-normalised R-hat
  # sees (TFP's split R-hat does not).
  assert health.problems[1].startswith("rank-normalised R-hat")
  assert len(health.problems) == 2
  # Its draws add nothing to the ESS: the other three chains' (about 3,000
  # for independent draws).
  assert np.isfinite(health.min_ess) and 2000 < health.min_ess < 4000
  # One chain, every draw the same.
  frozen = sg.summarize(np.full((50, 1, 2), 0.3), print_report=False,
                        warn=False)
  assert frozen.problems[0].startswith("chain 0 did not move")
  assert frozen.min_ess == 0.
  # No alarm for honest chains, even short ones (10 independent draws:
  # an sd under 1% of the others' in both coordinates has probability
  # far below 1e-6).
  for seed in range(20):
    short = np.random.default_rng(seed).normal(size=(10, 4, 2))
    assert not any("did not move" in p for p in sg.summarize(
        short, print_report=False, warn=False).problems)


def test_beside_diverged_chains_the_one_healthy_chain_is_not_called_stuck():
  # SGHMC on a banana: three of four chains blew up to 1e13-1e27 and the
  # healthy one, whose sd was under 1% of theirs (the median chain's), was
  # called stuck beside them. The stuck test now compares the chains that
  # did not diverge; a chain that diverged is reported as diverged.
  rng = np.random.default_rng(0)
  draws = rng.normal(size=(1000, 4, 2))
  draws[:, 1:] *= 10.**np.array([13., 20., 27.])[:, None]
  diverged = np.zeros((1000, 4), bool)
  diverged[500:, 1:] = True
  trace = collections.namedtuple("Trace", ["diverged"])(diverged)
  health = sg.summarize(draws, trace, print_report=False, warn=False)
  assert health.problems[0] == (
      "3 of 4 chains diverged (non-finite energy or state)")
  assert not any("did not move" in p for p in health.problems)
  # Among chains that did not diverge the rule is as before.
  draws[:, 2] = 0.3 + 1e-6 * rng.normal(size=(1000, 2))
  diverged[:, 2] = False
  health = sg.summarize(draws, trace, print_report=False, warn=False)
  assert any(p.startswith("chain 2 did not move") for p in health.problems)


def test_a_nan_rhat_neither_hides_other_coordinates_nor_passes():
  # TFP's R-hat is 0 / 0 in a coordinate no chain moved in, and NaN where
  # the variances pass float32's range; NaN crosses no threshold, and the
  # largest R-hat over coordinates was NaN: chains 5 sds apart in another
  # coordinate were not called disagreeing, and a chain off at 1e20 (with
  # no trace) left the run "healthy".
  rng = np.random.default_rng(0)
  draws = rng.normal(size=(500, 4, 3)).astype(np.float32)
  draws[:, :, 2] = 1.
  healthy = sg.summarize(draws, print_report=False, warn=False)
  # 4 x 500 independent draws: R-hat (a variance ratio) 1 within 1e-2.
  assert healthy.max_rhat < 1.01
  assert not any(p.startswith("R-hat") for p in healthy.problems)
  draws[:, 2, 0] += 5.
  health = sg.summarize(draws, print_report=False, warn=False)
  # 2 of 8 half-chains 5 sds off: about 1 + 25 * 3 / 14, at least 3.
  assert health.max_rhat > 3.
  assert health.problems[0] == (f"R-hat {health.max_rhat:.3f} > 1.05: "
                                "chains disagree")
  far = rng.normal(size=(200, 4, 2)).astype(np.float32)
  far[:, 0, 0] = 1e21 + 1e20 * rng.normal(size=200)
  health = sg.summarize(far, print_report=False, warn=False)
  assert health.max_rhat == np.inf
  assert health.problems == ["R-hat inf > 1.05: chains disagree"]


def test_chains_of_fewer_than_4_draws_are_compared_whole():
  # Split R-hat needs 2 draws per half; with 2 or 3 draws summarize raised
  # TFP's "Must provide at least 4 samples when splitting chains" for
  # several chains (documented: 1 below 4 draws). The chains are compared
  # whole: with one chain 100 sds off, R-hat is about 1.25 x 2,500 / W,
  # above 100 unless W (a mean of 4 chains' variances, 4 or 8 degrees of
  # freedom, mean 1) exceeds 31: probability below 1e-20.
  rng = np.random.default_rng(0)
  for num_draws in (2, 3):
    draws = rng.normal(size=(num_draws, 4, 2))
    draws[:, 0] += 100.
    health = sg.summarize(draws, print_report=False, warn=False)
    assert health.max_rhat > 100.
    assert health.problems[0].endswith("chains disagree")


def test_an_antithetic_chains_ess_is_bounded_not_negative():
  # Autocorrelations of alternating sign (AR(1) at phi = -0.8, as an
  # over-relaxed or near-unstable integrator gives: ESS 9 n per chain)
  # leave Geyer's sum, tau = (1 + phi) / (1 - phi) = 0.11, noise about 0:
  # TFP's formula gave chains ESS of -2e4 or +1e4, and the sum over chains
  # a "min ESS" below 0. Stan's bound, tau >= 1 / log10(n), gives at most
  # 3,000 a chain of 1,000 draws (in 1,600 simulated chains, never below
  # 2,600).
  rng = np.random.default_rng(0)
  draws = np.zeros((1000, 4, 2))
  draws[0] = rng.normal(size=(4, 2))
  for t in range(1, 1000):
    draws[t] = -0.8 * draws[t - 1] + 0.6 * rng.normal(size=(4, 2))
  per_chain = sg.diagnostics.effective_sample_size(draws)
  assert np.all(per_chain > 2000.) and np.all(per_chain <= 3000. + 1e-9)
  health = sg.summarize(draws, print_report=False, warn=False)
  assert 8000. < health.min_ess <= 12000. + 1e-9 and not health.problems
  # 10 independent draws: at most 10 a chain (TFP's formula gave more for
  # over half of the chains, and a negative ESS for 2 in 100).
  short = sg.diagnostics.effective_sample_size(rng.normal(size=(10, 64)))
  assert np.all(short > 0.) and np.all(short <= 10. + 1e-9)


def test_per_part_step_sizes_are_reported_per_part():
  # SGLD with step_size=[0.1, 0.02] on a two-part state traces one step
  # size per part; summarize took the last draw of np.asarray(list), i.e.
  # the last part's whole trace: `step_size` was 20 values of 0.02 and the
  # report gave every chain 0.02, the first part's 0.1 nowhere.
  target = sg.NoisyGradientTarget(
      lambda s: 0.5 * tf.reduce_sum(s[0] ** 2, -1) + 0.5 * s[1] ** 2,
      gradient_noise_variance=0.)
  draws, trace = sample(sg.SGLD(target, step_size=[0.1, 0.02]),
                        [tf.zeros([3, 2]), tf.zeros([3])], 20, seed=[0, 1],
                        trace_fn=lambda _, r: r)
  health = sg.summarize(draws, trace, print_report=False, warn=False)
  np.testing.assert_allclose(health.step_size, [0.1, 0.02])
  rows = sg.diagnostics.format_report(health).splitlines()[2:5]
  assert all(row.split()[2] == "0.1/0.02" for row in rows)


def _one_chain_run():
  """One SGHMC chain of a 3-d state (no chain axis: draws [1000, 3]) on a
  Gaussian with means (0, 5, -5) and sd 1 (split R-hat 1.009 to 1.015
  and ESS 211 to 233 over three seeds)."""
  mean = tf.constant([0., 5., -5.])
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x - mean) ** 2, -1), 0.5)
  return tf.function(lambda: tfp.mcmc.sample_chain(
      1000, mean, kernel=sg.SGHMC(target, 0.5, friction=1.),
      num_burnin_steps=100, trace_fn=lambda _, r: r, seed=[3, 4]),
                     autograph=False)()


def test_one_chain_of_a_vector_state_is_summarized_as_one_chain(capsys):
  # The trace's per-chain `diverged` holds one value per draw: one chain,
  # whose draws [1000, 3] have no chain axis. Read as [draws, chains],
  # its three coordinates were three chains: R-hat 1000 and more ("chains
  # disagree") for a healthy chain whose coordinates have other means,
  # and the printed report raised an IndexError.
  draws, trace = _one_chain_run()
  assert draws.shape == (1000, 3) and trace.diverged.shape == (1000,)
  health = sg.summarize(draws, trace, warn=False)
  assert "1 chain x 1000 draws" in capsys.readouterr().out
  assert health.num_chains == 1
  assert health.max_rhat < 1.05  # The chain's halves agree.
  assert np.shape(health.heating) == (1,)
  assert not health.problems, health.problems  # R-hat 1.015, ESS 233.
