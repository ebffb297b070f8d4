"""A diverging chain in `fit` stops with a message naming the sampler, the
epoch, the step and what went non-finite, and keeps its finite samples; it
can raise instead, a weight bound catches growth early, and AMAGOLD rejects
divergent trajectories rather than stopping. A chain that heats up while
staying finite is warned about (once), and a correct chain is not; an
AMAGOLD chain whose test accepts few trajectories is warned about at the
end of `fit`.
"""

import re
import warnings

import numpy as np
import pytest

import tfp_sgmcmc as sg

import tfp_sgmcmc.keras as sgk
from support.keras_fits import regression_fit
from workers import keras_resume_worker as worker


def test_a_diverging_sghmc_stops_with_a_message_and_keeps_finite_samples():
  # Euler SGHMC at h = 0.5 on a posterior of precision about 60: every step
  # multiplies |theta| by about h^2 * 60 = 15 until float32 overflows, in
  # the first of three epochs of 20 steps.
  with pytest.warns(RuntimeWarning) as record:
    model, sampling, history, sgd = regression_fit(
        sgk.SGHMC(step_size=0.5, friction=0.1, seed=0))
  message = str(record[-1].message)
  info = sampling.divergence
  assert info is not None and model.stop_training
  assert (f"SGHMC diverged at epoch {info['epoch']}, batch {info['batch']} "
          f"(sampler step {info['step']})") in message
  assert "non-finite" in message
  assert "smaller step_size (now 0.5)" in message
  assert "larger friction (now 0.1)" in message
  assert len(history.history["loss"]) == info["epoch"] + 1 < 3
  # Every transition before the divergent one was kept (thinning 1), and
  # they are all finite; the model holds the last of them.
  samples = sampling.samples
  assert len(samples) == info["step"] - 1 >= 5, info
  assert all(np.all(np.isfinite(w)) for s in samples for w in s)
  for w, last in zip(model.get_weights(), samples[-1]):
    np.testing.assert_array_equal(w, last)
  assert np.max(np.abs(samples[-1][0])) > 1e6  # It really was diverging.
  assert model.optimizer is sgd
  assert sampling.posterior.num_samples == len(samples)
  # A diverged chain is not continued by another fit.
  with pytest.raises(sgk.SamplerDivergenceError, match="diverged"):
    model.fit(*worker.data(), epochs=1, verbose=0, callbacks=[sampling])


def test_the_message_names_the_learning_rate_passed_and_division_by_n():
  # SGHMC built from SGD units with learning_rate=0.25 (h = 0.5, as above):
  # the message speaks of the learning_rate passed, not only of the step
  # size it gives, and of its usual cause, a rate not divided by N.
  with pytest.warns(RuntimeWarning) as record:
    _, sampling, _, _ = regression_fit(sgk.SGHMC.from_sgd_momentum(
        learning_rate=0.25, momentum_decay=0.05, seed=0))
  message = str(record[-1].message)
  assert sampling.divergence is not None
  assert ("a smaller learning_rate (you passed learning_rate=0.25 to "
          "SGHMC.from_sgd_momentum; the step_size it gives is "
          "sqrt(learning_rate) = 0.5)") in message
  assert "a larger momentum_decay (now 0.05)" in message
  n = worker.NUM_EXAMPLES
  assert (f"not divided by N = num_examples = {n}" in message and
          f"learning_rate=0.25 / {n} = {0.25 / n:.3g}" in message), message
  # Built from step_size, the hint and the cause are in step_size's units.
  with pytest.warns(RuntimeWarning) as record:
    regression_fit(sgk.SGLD(step_size=0.5, seed=0))
  message = str(record[-1].message)
  assert "smaller step_size (now 0.5)" in message
  assert f"step_size=0.5 / {n} = {0.5 / n:.3g}" in message, message
  # A config round trip keeps working (what was passed is not in it).
  sampler = sgk.SGHMC.from_sgd_momentum(learning_rate=0.25,
                                        momentum_decay=0.05)
  again = sgk.SGHMC.from_config(sampler.get_config())
  assert again.get_config() == sampler.get_config()
  # The same sampler object given to a second callback (a new model): the
  # callback runs a copy of it, whose message named only step_size.
  sampler = sgk.SGHMC.from_sgd_momentum(learning_rate=0.25,
                                        momentum_decay=0.05, seed=0)
  for _ in range(2):
    with pytest.warns(RuntimeWarning) as record:
      _, sampling, _, _ = regression_fit(sampler)
    assert "you passed learning_rate=0.25" in str(record[-1].message)
  assert sampling.sampler is not sampler  # The copy.


def test_divergence_can_raise_and_a_weight_bound_catches_growth_early():
  with pytest.raises(sgk.SamplerDivergenceError,
                     match="SGLD diverged.*Try a smaller step_size"):
    regression_fit(sgk.SGLD(step_size=0.5, seed=0), on_divergence="raise")
  # A finite bound stops the same chain long before it overflows.
  with pytest.warns(RuntimeWarning, match="grew to.*max_abs_weight=100"):
    _, sampling, _, _ = regression_fit(sgk.SGLD(step_size=0.5, seed=0),
                                       max_abs_weight=100.)
  assert sampling.divergence["step"] < 10
  with pytest.raises(ValueError, match="on_divergence"):
    sgk.SamplingCallback(sgk.SGLD(step_size=0.1), num_examples=10, prior=1.,
                         on_divergence="ignore")


def test_amagold_rejects_divergent_trajectories_instead_of_stopping():
  # AMAGOLD's M-H test rejects a trajectory whose energy is non-finite and
  # returns to its start, so a huge step size gives zero acceptance, not a
  # divergence; the chain stays finite.
  x, y = worker.data()
  _, sampling, history, _ = regression_fit(
      sgk.AMAGOLD(step_size=5., num_leapfrog_steps=4, friction=0.1, seed=0),
      epochs=2, energy_data=(x, y))
  assert sampling.divergence is None
  assert len(history.history["loss"]) == 2
  assert sampling.num_tests == 10 and sampling.num_accepted == 0
  assert all(np.all(np.isfinite(w)) for s in sampling.samples for w in s)


def _linear_fit(sampler, epochs=8, with_energy_data=False):
  """3 epochs of Adam, then the sampler, on a Bayesian linear regression
  (N = 1000, 4 features and a bias, Gaussian noise 1, prior N(0, 1)):
  posterior precision about N along each feature."""
  import keras  # pylint: disable=g-import-not-at-top
  import warnings  # pylint: disable=g-import-not-at-top
  import tfp_sgmcmc as sg  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(0)
  rng = np.random.default_rng(0)
  x = rng.normal(size=(1000, 4)).astype(np.float32)
  y = (x @ np.array([[1.], [-1.], [.5], [2.]]) +
       rng.normal(size=(1000, 1))).astype(np.float32)
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
  model.compile(optimizer=keras.optimizers.Adam(0.02),
                loss=sgk.GaussianNegativeLogLikelihood(1.))
  sampling = sgk.SamplingCallback(
      sampler, num_examples=1000, prior=1., burnin_epochs=3,
      energy_data=(x, y) if with_energy_data else None)
  with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    model.fit(x, y, batch_size=50, epochs=epochs, verbose=0,
              callbacks=[sampling])
  return sampling, [str(w.message) for w in seen
                    if issubclass(w.category, sg.UnhealthyChainWarning)]


def test_a_heating_chain_warns_before_anything_overflows():
  # SGLD at h = 2.05e-3 on a posterior of precision about 1000: theta'
  # - mean = (1 - h 1000) (theta - mean) + noise grows by 5% a step, so the
  # energy climbs epoch after epoch while every weight stays finite and the
  # divergence rule never fires. The heating check warns, with the numbers.
  sampling, warned = _linear_fit(sgk.SGLD(step_size=2.05e-3, seed=0))
  assert sampling.divergence is None
  assert all(np.all(np.isfinite(w)) for s in sampling.samples for w in s)
  assert len(warned) == 1, warned  # Once, not at every later epoch.
  assert "SGLD: the chain is heating up" in warned[0]
  assert "d/2 = 2.5 that sampling 5 parameters" in warned[0]
  assert "step size is probably too large" in warned[0]
  assert sampling.heating > 8.
  # The same chain at a sound step size: no warning. On correct chains
  # (SGLD and SGHMC on this regression, a logistic regression and a
  # regression MLP, 6 seeds each) the statistic stayed below 1.1 and never
  # warned (docs/long_runs.md), so any seed passes.
  sampling, warned = _linear_fit(sgk.SGLD(step_size=1e-4, seed=0))
  assert not warned and sampling.heating < 4., (warned, sampling.heating)


def test_amagolds_heating_warning_names_its_trajectories_not_its_chain():
  # AMAGOLD at 3.5x the step size whose 10-step trajectories stay bounded
  # on this regression: every trajectory's energy explodes and the exact
  # test rejects them all. The epoch energy (the loss where each gradient
  # was taken) is the trajectories', so the warning says that, with the
  # acceptance; the chain itself stays exact (and stuck).
  sampling, warned = _linear_fit(
      sgk.AMAGOLD(step_size=0.07, num_leapfrog_steps=10, friction=0.5,
                  seed=0), with_energy_data=True)
  assert sampling.num_tests > 0 and sampling.num_accepted == 0
  heating = [w for w in warned if "heating" in w]
  assert len(heating) == 1, warned
  assert "AMAGOLD: the trajectories are heating up" in heating[0]
  assert "accepted 0% of this epoch's trajectories" in heating[0]
  assert "not the chain's" in heating[0]
  assert "The samples are not the posterior's" not in heating[0]


def test_kept_samples_that_are_one_point_are_warned_at_the_fit_end():
  # AMAGOLD whose every trajectory is rejected while their energy stays
  # below the heating threshold: no other check fires, and every kept
  # sample is the burn-in's point. At a step size it accepts half of its
  # trajectories: its samples differ, no warning.
  sampling, warned = _linear_fit(
      sgk.AMAGOLD(step_size=0.02, num_leapfrog_steps=10, friction=0.5,
                  seed=0), with_energy_data=True)
  assert sampling.num_accepted == 0 and len(sampling.samples) == 10
  assert len(warned) == 1, warned
  assert "AMAGOLD: all 10 kept samples are the same point" in warned[0]
  assert "accepted 0 of 10 trajectories" in warned[0]
  sampling, warned = _linear_fit(
      sgk.AMAGOLD(step_size=1e-3, num_leapfrog_steps=10, friction=0.5,
                  seed=0), with_energy_data=True)
  assert sampling.num_accepted > 0 and not warned, warned


def test_a_chain_accepting_few_trajectories_is_warned_at_the_fit_end():
  # AMAGOLD with 2-step trajectories (50 M-H tests over the 5 sampling
  # epochs) at a step size its exact test accepts 2 of them (4%): the
  # chain moves, so the one-point warning is silent, but its 50 kept
  # samples are 3 points. Warned once, with the count and the fix.
  def fit(step_size, num_leapfrog_steps=2):
    return _linear_fit(
        sgk.AMAGOLD(step_size=step_size,
                    num_leapfrog_steps=num_leapfrog_steps, friction=0.5,
                    seed=0), with_energy_data=True)
  sampling, warned = fit(0.03)
  assert sampling.num_tests == 50 and 0 < sampling.num_accepted < 5
  assert len(warned) == 1, warned
  match = re.search(r"AMAGOLD: the M-H test accepted (\d) of 50 "
                    r"trajectories \(\d%\) in this fit: the chain is exact "
                    r"but barely moves, and its 50 kept samples hold (\d) "
                    "distinct points", warned[0])
  assert match, warned[0]
  assert int(match.group(1)) == sampling.num_accepted
  # Each accepted trajectory adds at most one point to the start's.
  assert 1 < int(match.group(2)) <= sampling.num_accepted + 1
  assert "a smaller step_size (now 0.03)" in warned[0]
  assert "(`SamplingCallback(warmup=n)`" in warned[0]
  # A step size its test accepts 84% of (42 of 50): no warning.
  sampling, warned = fit(5e-4)
  assert sampling.num_accepted > 0.5 * sampling.num_tests and not warned, (
      sampling.num_accepted, warned)
  # None of 25 accepted (enough tests to judge): the kept samples are one
  # point, and that stronger warning comes alone.
  sampling, warned = fit(0.02, num_leapfrog_steps=4)
  assert sampling.num_tests == 25 and sampling.num_accepted == 0
  assert len(warned) == 1 and "same point" in warned[0], warned


def test_an_energy_still_rising_when_sampling_ends_warns_at_the_fit_end():
  # The epoch energies of a fit whose energy climbed 6,694 -> 7,931 over its
  # 6 sampling epochs from a burn-in reference of 6,650, for a model of
  # d = 4,000 parameters: the level test allows d/2 = 2,000 plus 8 x
  # (sqrt(d/2) + noise), so it stays quiet, but the last third of the
  # sampling epochs sits far above the middle third: warned at the end.
  from tfp_sgmcmc.keras.fit.health import HeatingMonitor  # pylint: disable=g-import-not-at-top

  def run(energies, d=4000, n=1000, tested=False):
    monitor = HeatingMonitor()
    rng = np.random.default_rng(0)
    messages = []
    for epoch, energy in enumerate([6650.] + list(energies)):
      # 20 batches whose losses scatter by 0.01 (an epoch energy noise of
      # N x 0.01 / sqrt(20) = 2.2).
      losses = energy / n + 0.01 * rng.normal(size=20)
      for b in range(20):
        monitor.batch_end(b + 1, losses[:b + 1].mean())
      messages.append(monitor.epoch_end(energy, epoch > 0, epoch == 0, d, n))
    return monitor, [m for m in messages if m], monitor.fit_end(d, tested)
  rising = [6694., 6900., 7150., 7400., 7650., 7931.]
  monitor, during, end = run(rising)
  assert not during and monitor.heating < 8.
  assert monitor.trend > 8. and end is not None
  assert "the energy was still rising when sampling ended" in end
  assert "6694 to 7931 over the 6 sampling epochs" in end
  assert "has not settled at the posterior" in end
  # A sampler with a test (AMAGOLD): the epoch energy is its trajectories',
  # not its exact chain's, so the warning names them, not the chain.
  _, _, end = run(rising, tested=True)
  assert end.startswith("the trajectories' energy was still rising"), end
  assert "6694 to 7931 over the 6 sampling epochs" in end
  assert "has not settled" not in end and "exact_energy" in end
  # Settled: the same rise within the first epoch, then flat with noise.
  flat = [7900., 7931., 7910., 7925., 7905., 7920.]
  monitor, during, end = run(flat)
  assert end is None and abs(monitor.trend) < 1., monitor.trend


def test_sampling_begun_above_the_posterior_warns_at_the_fit_end():
  # A new-user trial's epoch energies (a linear regression, d = 5, N =
  # 2,000, 4 batches an epoch): a burn-in of 20 SGD steps ended at 4,526,
  # and the sampling epochs fell from 4,461 to settle near 4,187. The kept
  # samples held the descent (one sd 1.65x the posterior's), and no check
  # spoke: the level and trend tests look for a rise.
  from tfp_sgmcmc.keras.fit.health import HeatingMonitor  # pylint: disable=g-import-not-at-top

  def run(reference, energies, d=5, n=2000):
    monitor = HeatingMonitor()
    rng = np.random.default_rng(0)
    for epoch, energy in enumerate([reference] + list(energies)):
      # Batch losses scattered by 0.056: an epoch energy noise of
      # N x 0.056 / sqrt(20) = 25, the trial's.
      losses = energy / n + 0.056 * rng.normal(size=20)
      for b in range(20):
        monitor.batch_end(b + 1, losses[:b + 1].mean())
      assert monitor.epoch_end(energy, epoch > 0, epoch == 0, d, n) is None
    return monitor, monitor.fit_end(d)
  settled = list(4187. + 25. * np.random.default_rng(1).normal(size=25))
  descent = [4461., 4382., 4412., 4340., 4302.]
  monitor, end = run(4526., descent + settled)
  assert monitor.descent > 8. and end is not None, monitor.descent
  assert end.startswith("sampling began above the posterior"), end
  assert "first sampling epoch's energy was 4461" in end
  assert "burnin_epochs" in end
  # Begun at the mode: the energy rises by about d/2 and settles there.
  monitor, end = run(4187. - 2.5, settled)
  assert end is None and abs(monitor.descent) < 2., monitor.descent
  # Settled within the first sampling epoch, from the same burn-in: the
  # epoch means show no descent.
  monitor, end = run(4526., settled)
  assert end is None and abs(monitor.descent) < 2., monitor.descent


def test_a_converged_fit_shows_no_rising_trend():
  # The sound SGLD fit of the heating test: its energy settles in the first
  # sampling epoch, the trend over its 5 sampling epochs stays small.
  sampling, warned = _linear_fit(sgk.SGLD(step_size=1e-4, seed=0))
  assert not warned
  assert sampling.heating_trend is not None
  assert abs(sampling.heating_trend) < 4., sampling.heating_trend


def _nan_data_fit(sampler, where, feed):
  """A fit whose training data has one NaN (`where`: "x" or "y"), fed as
  arrays or a dataset; returns (callback, divergence message)."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  x, y = worker.data()
  (x if where == "x" else y)[4] = np.nan  # Example 4: the second batch of 3.
  keras.utils.set_random_seed(1)
  model = keras.Sequential([keras.Input((worker.DIM,)),
                            keras.layers.Dense(1)])
  model.compile(optimizer=keras.optimizers.SGD(1e-2),
                loss=sgk.GaussianNegativeLogLikelihood(1.))
  sampling = sgk.SamplingCallback(sampler, num_examples=worker.NUM_EXAMPLES,
                                  prior=1., on_divergence="raise")
  if feed == "arrays":
    data, kwargs = (x, y), dict(batch_size=3, shuffle=False)
  else:
    data = (tf.data.Dataset.from_tensor_slices((x, y)).batch(3),)
    kwargs = dict(shuffle=False)
  with pytest.raises(sgk.SamplerDivergenceError) as raised:
    model.fit(*data, epochs=2, verbose=0, callbacks=[sampling], **kwargs)
  return sampling, str(raised.value)


@pytest.mark.parametrize("where,feed", [("x", "arrays"), ("y", "dataset")])
@pytest.mark.parametrize("name", ["SGLD", "SGHMC", "SGNHT",
                                  "PreconditionedSGLD"])
def test_non_finite_data_is_named_as_the_cause_of_a_divergence(
    name, where, feed):
  # A step size that is fine for this data: only the NaN example diverges.
  kwargs = dict(friction=1.) if name == "SGHMC" else {}
  sampler = getattr(sgk, name)(step_size=1e-3, seed=0, **kwargs)
  sampling, message = _nan_data_fit(sampler, where, feed)
  assert sampling.divergence["batch"] == 1, message
  if feed == "arrays":
    assert (f"training data is not finite: `{where}` has NaN or inf in 1 of "
            f"{worker.NUM_EXAMPLES} examples (the first at index 4)"
            ) in message, message
  else:
    assert ("training data is not finite: batch 1 of a new pass over the "
            f"dataset given to fit: `{where}` has NaN or inf in 1 of 3 "
            "examples (the first at index 1)") in message, message
  assert "Remove or impute those examples" in message
  assert "smaller step_size" not in message  # Not the step size's fault.


@pytest.mark.parametrize("where", ["fit", "energy_data"])
def test_amagold_names_non_finite_fit_or_energy_data(where):
  # AMAGOLD's M-H test compares the energy of `energy_data`: a NaN there
  # (fit's data finite) stops the chain as a NaN in fit's data does.
  import keras  # pylint: disable=g-import-not-at-top
  x, y = worker.data()
  bad = x.copy()
  bad[4] = np.nan
  keras.utils.set_random_seed(1)
  model = keras.Sequential([keras.Input((worker.DIM,)),
                            keras.layers.Dense(1)])
  model.compile(optimizer=keras.optimizers.SGD(1e-2),
                loss=sgk.GaussianNegativeLogLikelihood(1.))
  sampling = sgk.SamplingCallback(
      sgk.AMAGOLD(step_size=1e-3, num_leapfrog_steps=3, friction=1., seed=0),
      num_examples=worker.NUM_EXAMPLES, prior=1., on_divergence="raise",
      energy_data=(bad if where == "energy_data" else x, y))
  fit = lambda: model.fit(bad if where == "fit" else x, y, batch_size=3,
                          shuffle=False, epochs=2, verbose=0,
                          callbacks=[sampling])
  prefix = "`energy_data`'s " if where == "energy_data" else ""
  named = (f"training data is not finite: {prefix}`x` has NaN or inf in 1 "
           f"of {worker.NUM_EXAMPLES} examples (the first at index 4)")
  if where == "energy_data":
    # The energy of every proposal is NaN: the chain diverges.
    with pytest.raises(sgk.SamplerDivergenceError, match=re.escape(named)):
      fit()
  else:
    # The trajectories through the NaN batch are rejected; the others are
    # not, and the chain goes on with the epoch's loss NaN: warned, once.
    with warnings.catch_warnings(record=True) as seen:
      warnings.simplefilter("always")
      fit()
    messages = [str(w.message) for w in seen
                if issubclass(w.category, sg.UnhealthyChainWarning)]
    assert len(messages) == 1 and named in messages[0], messages
    assert "loss of epoch 0 is not finite (nan)" in messages[0]
    assert sampling.divergence is None and 0 < sampling.num_accepted


def test_the_data_check_reads_every_feed_fit_can_read_again():
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfp_sgmcmc.keras.validation import finite_data  # pylint: disable=g-import-not-at-top
  from tfp_sgmcmc.keras.validation import fit_arguments  # pylint: disable=g-import-not-at-top
  x, y = worker.data()
  x[7, 1] = np.inf

  class Batches(keras.utils.PyDataset):

    def __len__(self):
      return 20

    def __getitem__(self, i):
      return x[3 * i:3 * i + 3], y[3 * i:3 * i + 3]

  def check(x_arg, y_arg=None, steps=None):
    return finite_data.non_finite_data(
        fit_arguments.FitArguments(dict(x=x_arg, y=y_arg)), steps)
  assert check(x, y) == ("`x` has NaN or inf in 1 of 60 examples (the "
                         "first at index 7)")
  assert "`x` part 1 has NaN or inf" in check([x[:, :1], x], y)
  assert check(Batches()) == (
      "batch 2 of the PyDataset given to fit: `x` has NaN or inf in 1 of 3 "
      "examples (the first at index 1)")
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(3)
  assert check(dataset).startswith("batch 2 of a new pass over the dataset")
  assert check(dataset, steps=2) == ""  # One epoch of 2 batches is read.
  assert check(iter([(x, y)])) == ""  # A generator is not read again.
  assert check(x[:7], y[:7]) == ""
  assert finite_data.non_finite_data(None) == ""
