"""TFP's step-size adaptation inside `fit`, driven by the Keras M-H tests:
dual averaging reaches the target acceptance then freezes, simple
adaptation adapts then freezes, and only AMAGOLD takes it.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc.keras as sgk
from support.keras_fits import batch_indices, fit


class EpochLogs(keras.callbacks.Callback):
  """The logs of every epoch end (listed after SamplingCallback)."""

  def __init__(self):
    super().__init__()
    self.logs = []

  def on_epoch_end(self, epoch, logs=None):
    self.logs.append(dict(logs))


def adapted_fit(problem, make, epochs, per_epoch=100):
  sigma = float(np.sqrt(np.max(np.linalg.eigvalsh(problem.precision))))
  x, y = problem.data
  t = 5
  log = EpochLogs()
  callback = fit(problem, sgk.AMAGOLD(
      step_size=0.01, num_leapfrog_steps=t, friction=1., momentum_std=sigma,
      seed=18), batch_indices(problem, t * per_epoch * epochs, seed=17),
                 steps_per_execution=t, epochs=epochs, jit_compile=True,
                 energy_data=(x, y), energy_batch_size=500,
                 step_size_adaptation=make, after=[log])
  return callback, log.logs


@pytest.mark.parametrize("target", [0.65, 0.85])
def test_amagold_dual_averaging_in_fit_reaches_the_target(problem, target):
  # TFP's DualAveragingStepSizeAdaptation, driven by the Keras M-H tests:
  # adapt during the first 200 tests (2 epochs) from a step size far too
  # small, then freeze. Over the 400 tests after it the acceptance is
  # near the target, and the logged step size no longer moves. The rate's
  # spread from seed to seed is not only binomial (sd 0.018 at 0.85, 0.024
  # at 0.65): the frozen step size varies too. Over 13 seed pairs at 0.65
  # the rate ranged 0.63-0.75 (sd about 0.03, mean 0.66-0.69 depending on
  # the noise generator), so the bound is 0.1, about 3 sd; a chain left at
  # the starting step accepts nearly always and fails it at both targets.
  callback, logs = adapted_fit(
      problem, lambda inner: tfp.mcmc.DualAveragingStepSizeAdaptation(
          inner, num_adaptation_steps=200, target_accept_prob=target),
      epochs=6)
  assert not callback.sampler.adapting
  step_sizes = [e["step_size"] for e in logs]
  assert step_sizes[1] > 0.03  # it moved from 0.01
  assert len(set(step_sizes[1:])) == 1  # then froze
  rate = np.mean([e["accept_rate"] for e in logs[2:]])
  assert abs(rate - target) < 0.1, (target, rate, step_sizes)


def test_amagold_simple_adaptation_in_fit_adapts_then_freezes(problem):
  # SimpleStepSizeAdaptation moves eps up while the test accepts with
  # probability above the target: with one chain it tracks the median
  # acceptance probability, not the mean (use dual averaging for a rate).
  callback, logs = adapted_fit(
      problem, lambda inner: tfp.mcmc.SimpleStepSizeAdaptation(
          inner, num_adaptation_steps=100, target_accept_prob=0.75,
          adaptation_rate=0.05), epochs=2)
  step_sizes = [e["step_size"] for e in logs]
  assert step_sizes[0] > 0.03 and step_sizes[0] == step_sizes[1]
  assert 0.4 < logs[1]["accept_rate"] < 1.


def test_step_size_adaptation_is_for_amagold_only(problem):
  with pytest.raises(ValueError, match="only AMAGOLD"):
    sgk.SamplingCallback(
        sgk.SGLD(1e-3), num_examples=10, prior=1.,
        step_size_adaptation=lambda inner: tfp.mcmc.SimpleStepSizeAdaptation(
            inner, 10))


def warmed_fit(problem, step_size, epochs=4, per_epoch=100):
  sigma = float(np.sqrt(np.max(np.linalg.eigvalsh(problem.precision))))
  x, y = problem.data
  t = 5
  log = EpochLogs()
  callback = fit(problem, sgk.AMAGOLD(
      step_size=step_size, num_leapfrog_steps=t, friction=1.,
      momentum_std=sigma, seed=18),
                 batch_indices(problem, t * per_epoch * epochs, seed=17),
                 steps_per_execution=t, epochs=epochs, jit_compile=True,
                 energy_data=(x, y), energy_batch_size=500, warmup=200,
                 adapt_mass=False, after=[log])
  return callback, log.logs


def test_warmup_in_fit_ends_at_the_same_step_from_100x_too_large_or_small(
    problem):
  # SamplingCallback(warmup=200, adapt_mass=False): dual averaging to 0.75
  # over the first 200 tests, then frozen (with the mass too:
  # test_mass_matrix.py). From 100x below and 100x above the value it
  # settles at (0.06 here) the frozen step sizes agree within 15%
  # (the two fits share their batches and noise; between seeds the frozen
  # value spreads by about as much as the acceptance rate's 0.03 sd
  # allows, see the dual-averaging test above).
  frozen = []
  for start in (6e-4, 6.):
    callback, logs = warmed_fit(problem, start)
    assert not callback.sampler.adapting
    steps = [e["step_size"] for e in logs]
    assert steps[2] == steps[3]
    frozen.append(steps[3])
  assert abs(np.log(frozen[0] / frozen[1])) < np.log(1.15), frozen


class AdaptationAtEpochEnd(keras.callbacks.Callback):
  """At each epoch end (after SamplingCallback, which has swapped the
  sampler in as the model's optimizer): the logged step size, the step size
  the sampler runs at (the dual averaging's iterate), the average it
  freezes at, exp(log_averaging_step), and whether it is still adapting."""

  def __init__(self):
    super().__init__()
    self.rows = []

  def on_epoch_end(self, epoch, logs=None):
    sampler = self.model.optimizer
    averaging = sampler._warmup.state().dual_averaging  # pylint: disable=protected-access
    # The sampler's own log value: the step size it runs at now.
    running = sampler.log_diagnostics()["step_size"]
    self.rows.append((logs["step_size"], running,
                      float(np.exp(np.ravel(averaging.log_averaging_step)[0])),
                      sampler.adapting))


def test_warmup_logs_the_step_size_it_will_freeze_at(problem):
  # During the warm-up each test runs at the dual averaging's iterate,
  # which searches around the target (up to 10x above it); the step size
  # frozen at the end is the iterates' average. The epoch log shows that
  # average while adapting, then the frozen value: not points of the
  # search that the frozen value can lie above or below.
  sigma = float(np.sqrt(np.max(np.linalg.eigvalsh(problem.precision))))
  x, y = problem.data
  t, per_epoch, epochs = 5, 50, 4
  late = AdaptationAtEpochEnd()
  fit(problem, sgk.AMAGOLD(step_size=6e-4, num_leapfrog_steps=t,
                           friction=1., momentum_std=sigma, seed=18),
      batch_indices(problem, t * per_epoch * epochs, seed=17),
      steps_per_execution=t, epochs=epochs, jit_compile=True,
      energy_data=(x, y), energy_batch_size=500, warmup=150,
      adapt_mass=False, after=[late])
  rows = late.rows
  adapting = [r for r in rows if r[3]]
  assert len(adapting) == 2, rows  # After 50 and 100 of the 150 tests.
  for logged, iterate, average, _ in adapting:
    assert logged == pytest.approx(average, rel=1e-6), rows
    assert logged != pytest.approx(iterate, rel=1e-3), rows
  # Frozen from test 150 on, at the average, and logged as such.
  frozen = rows[-1][1]
  assert rows[2][0] == rows[3][0] == pytest.approx(frozen, rel=1e-6), rows
  assert frozen == pytest.approx(rows[2][2], rel=1e-6), rows


def test_warmup_in_fit_is_for_amagold_only_and_not_with_adaptation():
  with pytest.raises(ValueError, match="tfp_sgmcmc.warm_up"):
    sgk.SamplingCallback(sgk.SGLD(1e-3), num_examples=10, prior=1.,
                         warmup=100)
  with pytest.raises(ValueError, match="give one"):
    sgk.SamplingCallback(
        sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=2, friction=1.),
        num_examples=10, prior=1., warmup=100,
        step_size_adaptation=lambda inner: inner)
