"""Several `fit` calls with one SamplingCallback: a second fit continues the
chain from its position (step count, momentum, samples), later fits retrace
no train step, AMAGOLD's M-H test is one compiled call traced once, and
the process's memory stays flat over repeated fits with every sampler.
"""

import gc
import os

import keras
import numpy as np
import pytest

import tfp_sgmcmc.keras as sgk
from support.keras_fits import iid_batches, regression_model


def test_a_second_fit_continues_the_chain_from_its_position(problem):
  # Splitting SGHMC keeps its variables half a drift ahead during fit; at
  # the end of fit they hold the chain's position (the last kept sample),
  # the compiled optimizer is back, and a second fit with the same callback
  # continues the same chain (step count, momentum, samples).
  model = regression_model(problem.posterior_mean)
  sgd = keras.optimizers.SGD(1e-3)
  model.compile(optimizer=sgd, loss=sgk.GaussianNegativeLogLikelihood(1.))
  sampling = sgk.SamplingCallback(
      sgk.SGHMC(step_size=3e-3, friction=30., integrator="splitting",
                momentum_resampling_period=7, seed=9),
      num_examples=problem.num_examples, prior=1., thinning=10)
  data = iid_batches(problem, 200, seed=3)
  model.fit(data.take(100), epochs=1, shuffle=False, verbose=0,
            callbacks=[sampling])
  np.testing.assert_array_equal(model.get_weights()[0],
                                sampling.samples[-1][0])
  assert model.optimizer is sgd
  momentum = [np.array(r) for r in sampling.sampler.momentum]
  model.fit(data.skip(100), epochs=1, shuffle=False, verbose=0,
            callbacks=[sampling])
  assert sampling.sampler.step_count == 200
  assert len(sampling.samples) == 20
  assert sampling.posterior.num_transitions == 200
  np.testing.assert_array_equal(model.get_weights()[0],
                                sampling.samples[-1][0])
  assert not np.array_equal(sampling.samples[-1][0], sampling.samples[9][0])
  assert not np.array_equal(momentum[0], sampling.sampler.momentum[0])


def count_train_step_traces(model):
  """A list that gets the optimizer's class name each time `model`'s train
  step is traced (the appending runs only while tracing)."""
  traces = []
  train_step = model.train_step

  def counting_train_step(data):
    traces.append(type(model.optimizer).__name__)
    return train_step(data)
  model.train_step = counting_train_step
  return traces


def test_later_fits_retrace_no_train_step(problem):
  # Each optimizer's train step is traced once per compile: the burn-in
  # optimizer's and the sampler's train functions are swapped in with their
  # optimizers, not rebuilt, so a second and third `fit` trace nothing. A
  # new `compile` (possibly a new loss) makes them anew (here only the
  # sampler's runs: the burn-in is over).
  model = regression_model(problem.posterior_mean)
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(1.))
  traces = count_train_step_traces(model)
  sampling = sgk.SamplingCallback(
      sgk.SGHMC(step_size=3e-3, friction=30., seed=9),
      num_examples=problem.num_examples, prior=1., burnin_steps=5)
  data = iid_batches(problem, 20, seed=3)
  for _ in range(3):
    model.fit(data, epochs=1, verbose=0, callbacks=[sampling])
    assert traces == ["SGD", "SGHMC"]
  assert sampling.sampler.step_count == 55
  model.compile(optimizer=model.optimizer,
                loss=sgk.GaussianNegativeLogLikelihood(1.))
  model.fit(data, epochs=1, verbose=0, callbacks=[sampling])
  assert traces == ["SGD", "SGHMC", "SGHMC"]
  assert sampling.sampler.step_count == 75


def test_amagold_test_is_one_call_traced_once_over_fits(problem,
                                                        monkeypatch):
  # AMAGOLD's M-H test (full-data energy, test, health check) is one
  # compiled function, under XLA here as the train step is, traced once:
  # later fits with the same callback retrace neither it nor the train step.
  x, y = problem.data
  model = regression_model(problem.posterior_mean)
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(problem.noise_scale),
                jit_compile=True)
  traces = count_train_step_traces(model)
  test_function = sgk.AMAGOLD.test_function

  def counting_test_function(self, energy_fn, after_fn, jit_compile=False,
                             **kwargs):
    def counting_energy_fn(*args):
      traces.append("M-H test")  # Runs while tracing.
      return energy_fn(*args)
    return test_function(self, counting_energy_fn, after_fn, jit_compile,
                         **kwargs)
  monkeypatch.setattr(sgk.AMAGOLD, "test_function", counting_test_function)
  sampling = sgk.SamplingCallback(
      sgk.AMAGOLD(step_size=0.1, num_leapfrog_steps=5, friction=1.,
                  momentum_std=20., seed=4),
      num_examples=problem.num_examples, prior=problem.prior_scale,
      energy_data=(x, y), energy_batch_size=128)
  for _ in range(3):
    model.fit(iid_batches(problem, 20, seed=5), epochs=1, verbose=0,
              callbacks=[sampling])
  assert traces == ["AMAGOLD", "M-H test"]
  assert sampling.num_tests == 12


def _rss_mib():
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


SAMPLERS = {
    "SGLD": lambda: sgk.SGLD(step_size=1e-4, seed=1),
    "PreconditionedSGLD": lambda: sgk.PreconditionedSGLD(step_size=1e-4,
                                                         seed=1),
    "SGHMC": lambda: sgk.SGHMC(step_size=1e-3, friction=5., seed=1),
    "SGNHT": lambda: sgk.SGNHT(step_size=1e-4, seed=1),
    "AMAGOLD": lambda: sgk.AMAGOLD(step_size=1e-3, num_leapfrog_steps=2,
                                   friction=2., seed=1),
}


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                    reason="reads the resident size from /proc")
@pytest.mark.filterwarnings("ignore:the kept samples will span only")
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_memory_stays_flat_over_repeated_fits(name, problem):
  # fit, fit, fit with one callback (its kept samples already at
  # max_samples): after a warm-up, the resident size's slope over 15 more
  # fits stays under 0.25 MiB per fit. What a fit must not leave behind:
  # a train step or M-H test traced anew (about 1.4 MiB per fit for
  # SGHMC's train step), variables, kept references.
  x, y = problem.data
  model = regression_model(problem.posterior_mean)
  model.compile(optimizer=keras.optimizers.SGD(1e-3),
                loss=sgk.GaussianNegativeLogLikelihood(problem.noise_scale))
  extra = (dict(energy_data=(x, y), energy_batch_size=500)
           if name == "AMAGOLD" else {})
  sampling = sgk.SamplingCallback(
      SAMPLERS[name](), num_examples=problem.num_examples,
      prior=problem.prior_scale, burnin_steps=2, max_samples=3, **extra)
  data = iid_batches(problem, 8, seed=5)
  sizes = []
  try:
    for k in range(18):
      model.fit(data, epochs=1, steps_per_epoch=8, shuffle=False, verbose=0,
                callbacks=[sampling])
      if k >= 3:  # Warm-up: the first fits trace and allocate.
        gc.collect()
        if k == 3:
          # Later collections scan only what the fits allocate, not the
          # objects of everything that ran before in this process (a
          # collection costs as much as the heap is large). A reference
          # a fit keeps still grows the resident size.
          gc.freeze()
        sizes.append(_rss_mib())
  finally:
    gc.unfreeze()
  slope = np.polyfit(np.arange(len(sizes)), sizes, 1)[0]
  assert slope < 0.25, (slope, sizes)
  assert len(sampling.samples) == 3
