"""ArviZ output: `to_inference_data` puts draws in ArviZ's [chain, draw]
order with the state's names, reads `sample_stats` from every kernel's
results (through TFP's wrappers too), and ArviZ's diagnostics on it agree
with TFP's on the same draws; a trace plot renders.
"""

import os
import sys
import warnings

import arviz as az
import matplotlib
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.keras import Posterior

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  pylint: disable=g-import-not-at-top

tfd = tfp.distributions
SCALES = np.array([1., 0.5, 2.], np.float32)


def gaussian():
  return sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x / SCALES) ** 2, -1), 0.5)


@pytest.fixture(scope="module")
def sghmc_run():
  # 4 chains x 1000 draws of a 3-d Gaussian, well mixed (autocorrelation
  # times of about 1 to 40 draws).
  kernel = sg.SGHMC(gaussian(), 0.2, friction=1.)
  run = tf.function(lambda: tfp.mcmc.sample_chain(
      1000, tf.zeros([4, 3]), kernel=kernel, num_burnin_steps=200,
      trace_fn=lambda _, r: r, seed=[1, 2]), jit_compile=True,
                    autograph=False)
  draws, trace = run()
  return np.asarray(draws, np.float64), trace


def test_draws_are_in_arviz_order_with_the_state_names():
  # Draw d of chain c of part i holds 100 c + d + 0.1 i: a chain / draw
  # transpose (or a reshape) would put other numbers in place.
  d, c = np.meshgrid(np.arange(7), np.arange(3), indexing="ij")
  value = (100. * c + d)[..., None] + 0.1 * np.arange(2)
  state = {"w": value, "scale": value[..., 0]}       # [7 draws, 3 chains]
  idata = sg.to_inference_data(state, dims={"w": ["feature"]},
                               coords={"feature": ["a", "b"]})
  post = idata.posterior
  assert dict(post.sizes) == {"chain": 3, "draw": 7, "feature": 2}
  assert post["w"].dims == ("chain", "draw", "feature")
  for chain in range(3):
    np.testing.assert_array_equal(post["w"].sel(chain=chain), value[:, chain])
    np.testing.assert_array_equal(post["scale"].sel(chain=chain),
                                  value[:, chain, 0])
  np.testing.assert_array_equal(post["w"].sel(feature="b", chain=2, draw=5),
                                205.1)
  # One chain without a chain axis; chains on another axis.
  single = sg.to_inference_data(value[:, 0], chain_axis=None)
  assert dict(single.posterior.sizes) == {"chain": 1, "draw": 7,
                                          "x_dim_0": 2}
  moved = sg.to_inference_data(np.moveaxis(value, 1, 2), chain_axis=2)
  np.testing.assert_array_equal(moved.posterior["x"],
                                np.moveaxis(value, 1, 0))


@pytest.mark.parametrize("model", ["named", "sequential", "coroutine"])
def test_joint_distribution_states_are_named_by_their_nodes(model):
  x = np.random.default_rng(0).normal(size=(20, 2)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32)
  scale = tfd.HalfNormal(1., name="scale")
  w = lambda scale: tfd.Independent(  # noqa: E731
      tfd.Normal(tf.zeros(2), scale[..., None]), 1, name="w")
  lik = lambda w: tfd.Independent(  # noqa: E731
      tfd.Bernoulli(logits=tf.linalg.matvec(x, w)), 1, name="y")
  if model == "named":
    jd = tfd.JointDistributionNamed(dict(scale=scale, w=w, y=lik))
  elif model == "sequential":
    jd = tfd.JointDistributionSequential([scale, w, lik])
  else:
    @tfd.JointDistributionCoroutine
    def jd():
      s = yield tfd.JointDistributionCoroutine.Root(scale)
      yield lik((yield w(s)))
  name = jd._flat_resolve_names()[-1]  # pylint: disable=protected-access
  target = sg.JointDistributionTarget(jd, {name: y})
  init = target.initial_state(3, seed=[0, 1])
  draws = tf.nest.map_structure(lambda t: tf.stack([t] * 5), init)
  var_names = target if model == "sequential" else None
  idata = sg.to_inference_data(draws, var_names=var_names)
  assert sorted(idata.posterior.data_vars) == ["scale", "w"]
  assert idata.posterior["w"].shape == (3, 5, 2)
  assert idata.posterior["scale"].shape == (3, 5)



def test_a_dict_state_is_named_by_its_keys_whatever_the_models_order():
  # A JointDistributionNamed orders its nodes by their dependencies (here
  # tau, mu, theta, sigma) while a dict state flattens in key order: the
  # names were once paired with the parts by position, so `sigma` held
  # theta's draws, with no error.
  y = np.zeros(8, np.float32)
  jd = tfd.JointDistributionNamed(dict(
      mu=tfd.Normal(0., 5.), tau=tfd.HalfNormal(1.), sigma=tfd.HalfNormal(2.),
      theta=lambda mu, tau: tfd.Independent(tfd.Normal(
          mu[..., None] * tf.ones(4), tau[..., None] * tf.ones(4)), 1),
      y=lambda theta, sigma: tfd.Independent(tfd.Normal(tf.gather(
          theta, np.arange(8) % 4, axis=-1), sigma[..., None]), 1)))
  target = sg.JointDistributionTarget(jd, {"y": y})
  assert target.latent_names != sorted(target.latent_names)
  draws = {"mu": np.zeros((5, 2)), "tau": np.ones((5, 2)),
           "sigma": np.full((5, 2), 2.), "theta": np.full((5, 2, 4), 3.)}
  idata = sg.to_inference_data(draws, var_names=target)
  for name, value in draws.items():
    np.testing.assert_array_equal(idata.posterior[name],
                                  np.swapaxes(value, 0, 1))
  with pytest.raises(ValueError, match="are not the keys of `samples`"):
    sg.to_inference_data(draws, var_names=["a", "b", "c", "d"])

def kernels():
  target = gaussian()
  mvn = tfd.MultivariateNormalDiag(tf.zeros(3), SCALES)
  amagold = lambda: sg.AMAGOLD(target, 0.3, num_leapfrog_steps=3,  # noqa: E731
                               friction=0.5)
  plain = ("diverging", "lp", "step_size")
  tested = plain + ("acceptance_rate",)
  return {
      "SGLD": (sg.SGLD(target, 0.1), plain),
      "pSGLD": (sg.PreconditionedSGLD(target, 0.01), plain),
      "SGHMC": (sg.SGHMC(target, 0.1, friction=1.), plain),
      "SGNHT": (sg.SGNHT(target, 0.1), plain),
      "SGBD": (sg.SGBD(target, 0.5), plain),
      "AMAGOLD": (amagold(), tested),
      "AmortizedBarker": (sg.AmortizedBarker(target, 0.5, num_steps=2),
                          tested),
      "SGNUTS": (sg.SGNUTS(target, 0.2, friction=1.),
                 tested + ("tree_depth", "n_steps")),
      "SimpleStepSizeAdaptation(AMAGOLD)": (
          tfp.mcmc.SimpleStepSizeAdaptation(amagold(), 5), tested),
      "DualAveragingStepSizeAdaptation(AMAGOLD)": (
          tfp.mcmc.DualAveragingStepSizeAdaptation(amagold(), 5), tested),
      "MetropolisHastings(SGLD) (MALA)": (tfp.mcmc.MetropolisHastings(
          sg.SGLD(target_log_prob_fn=mvn.log_prob, step_size=0.5)), tested),
  }


@pytest.mark.parametrize("name", list(kernels()))
def test_sample_stats_of_every_kernel(name):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the uncalibrated kernels say so
    kernel, expected = kernels()[name]
    # 4 draws of 2 chains: a chain / draw transpose cannot pass unseen.
    draws, trace = tfp.mcmc.sample_chain(
        4, tf.zeros([2, 3]), kernel=kernel, trace_fn=lambda _, r: r,
        seed=[3, 4])
  stats = sg.to_inference_data(draws, trace).sample_stats
  assert sorted(stats.data_vars) == sorted(expected)
  for var in expected:
    assert stats[var].dims == ("chain", "draw"), var
  # The values are the results', moved to [chain, draw].
  levels = [trace]
  while True:
    inner = getattr(levels[-1], "inner_results", None)
    inner = getattr(levels[-1], "accepted_results", inner)
    if inner is None:
      break
    levels.append(inner)
  innermost = levels[-1]
  np.testing.assert_array_equal(stats["diverging"],
                                np.transpose(innermost.diverged))
  step_size = np.broadcast_to(
      np.reshape(innermost.step_size, [4, -1]), [4, 2])
  np.testing.assert_array_equal(stats["step_size"], step_size.T)
  if "acceptance_rate" in expected:
    ratio = next(lv.log_accept_ratio for lv in levels
                 if hasattr(lv, "log_accept_ratio"))
    np.testing.assert_allclose(stats["acceptance_rate"],
                               np.exp(np.minimum(np.asarray(
                                   ratio, np.float64), 0.)).T)
    assert np.all((stats["acceptance_rate"] >= 0) &
                  (stats["acceptance_rate"] <= 1))
  if "Adaptation" in name:  # the step size each draw used, as it adapts
    assert len(np.unique(stats["step_size"].sel(chain=0))) > 1
  if "tree_depth" in expected:
    np.testing.assert_array_equal(stats["tree_depth"],
                                  np.transpose(innermost.tree_depth))
    np.testing.assert_array_equal(
        stats["n_steps"], np.transpose(innermost.num_gradient_evaluations))


def test_rhat_is_tfps_split_rhat(sghmc_run):
  # The same statistic, two conventions: ArviZ's split R-hat is
  # sqrt(sigma2_+ / W) (BDA3), TFP's potential_scale_reduction is Brooks
  # and Gelman's (m + 1) / m * sigma2_+ / W - (n - 1) / (m n), for m split
  # chains of n draws. Converted, they agree to float64 rounding; a chain /
  # draw transpose changes both W and B and would not.
  draws, _ = sghmc_run
  idata = sg.to_inference_data(draws)
  psrf = tfp.mcmc.potential_scale_reduction(
      draws, independent_chain_ndims=1, split_chains=True).numpy()
  m, n = 2 * draws.shape[1], draws.shape[0] // 2
  rhat = np.sqrt((psrf + (n - 1) / (m * n)) * m / (m + 1))
  np.testing.assert_allclose(az.rhat(idata, method="split")["x"], rhat,
                             rtol=1e-10)
  # The rank-normalized default differs by its normalization; on these
  # well-mixed chains both are near 1.
  assert np.all(np.abs(az.rhat(idata)["x"] - 1.) < 0.05)


def test_summarize_reports_arvizs_rank_normalised_rhat(sghmc_run):
  # The same number as az.rhat's default, to rounding: on the SGHMC run,
  # and on heavy-tailed draws with ties (a chain stuck in one coordinate),
  # an odd number of draws, and chains that differ in location and spread.
  draws, _ = sghmc_run
  health = sg.summarize(draws, print_report=False, warn=False)
  np.testing.assert_allclose(
      health.max_rank_rhat,
      float(np.max(az.rhat(sg.to_inference_data(draws))["x"])), rtol=1e-10)
  rng = np.random.default_rng(3)
  for n in (7, 501):
    x = rng.standard_t(3, size=(n, 4, 3))
    x[:, 1] *= 2.
    x[:, 2, 0] = 0.5
    x[:, 3] += 0.3
    ours = sg.summarize(x, print_report=False, warn=False).max_rank_rhat
    theirs = max(az.rhat(x[:, :, j].T, method="rank") for j in range(3))
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)
  # float32 draws are ranked in float64, as ArviZ ranks their float64
  # values (in float32, ranks of 4,000 draws lose digits).
  x = rng.normal(size=(1000, 4, 3)).astype(np.float32)
  ours = sg.summarize(x, print_report=False, warn=False).max_rank_rhat
  theirs = max(az.rhat(x[:, :, j].T.astype(np.float64), method="rank")
               for j in range(3))
  np.testing.assert_allclose(ours, theirs, rtol=1e-10)


def test_summarize_reports_arvizs_bulk_and_tail_ess(sghmc_run):
  # az.ess's "bulk" and "tail" to rounding, on the SGHMC run and on AR(1)
  # chains of every sign of autocorrelation, with ties, one or four chains
  # and short runs (Geyer's sequences end early), where a quantile falls on
  # a draw (4 x 1001 and 1 x 1001 draws: R's type 7 at 0.05 and 0.95).
  draws, _ = sghmc_run
  health = sg.summarize(draws, print_report=False, warn=False)
  idata = sg.to_inference_data(draws)
  for field, method in (("min_bulk_ess", "bulk"), ("min_tail_ess", "tail")):
    np.testing.assert_allclose(
        getattr(health, field),
        float(np.min(az.ess(idata, method=method)["x"])), rtol=1e-10)
  rng = np.random.default_rng(4)
  for n in (5, 8, 11, 60, 1001):
    for phi in (-0.8, 0., 0.95):
      for m in (1, 4):
        x = np.zeros((n, m, 2))
        for t in range(1, n):
          x[t] = phi * x[t - 1] + rng.normal(size=(m, 2))
        x[:, :, 1] = np.round(x[:, :, 1])
        x[:, :1] += 0.5
        health = sg.summarize(x, print_report=False, warn=False)
        for field, method in (("min_bulk_ess", "bulk"),
                              ("min_tail_ess", "tail")):
          theirs = min(az.ess(x[:, :, j].T, method=method) for j in range(2))
          np.testing.assert_allclose(getattr(health, field), theirs,
                                     rtol=1e-10, err_msg=f"{n} {phi} {m}")


def test_ess_agrees_with_tfps(sghmc_run):
  # az.ess(method="identity") and TFP's effective_sample_size with
  # cross_chain_dims=1, filter_beyond_positive_pairs=True are one estimator
  # (multi-chain autocorrelations, Geyer's initial positive sequence, no
  # rank normalization, no split), except that ArviZ also applies Geyer's
  # monotone smoothing and keeps the last positive even lag. Those change
  # tau = M N / ESS only through a few autocorrelation estimates at the
  # truncation lag, where the true autocorrelation is about 0 and each
  # estimate has standard deviation about sqrt(tau / (M N)) (Bartlett): we
  # allow three such terms at two standard deviations each.
  draws, _ = sghmc_run
  idata = sg.to_inference_data(draws)
  total = draws.shape[0] * draws.shape[1]
  ess_tfp = tfp.mcmc.effective_sample_size(
      draws, cross_chain_dims=1, filter_beyond_positive_pairs=True).numpy()
  ess_az = az.ess(idata, method="identity")["x"].values
  tau_tfp, tau_az = total / ess_tfp, total / ess_az
  bound = 6. * np.sqrt(tau_tfp / total)
  assert np.all(np.abs(tau_az - tau_tfp) < bound), (tau_az, tau_tfp, bound)
  # Genuinely different autocorrelation times (the check is not between
  # constants): the three scales mix at different speeds.
  assert tau_tfp.max() > 3 * tau_tfp.min(), tau_tfp


def test_summary_matches_the_draws_and_its_diagnostics(sghmc_run):
  draws, trace = sghmc_run
  idata = sg.to_inference_data(draws, trace)
  summary = az.summary(idata, round_to="none")
  flat = draws.reshape(-1, 3)
  np.testing.assert_allclose(summary["mean"], flat.mean(0), rtol=1e-12)
  np.testing.assert_allclose(summary["sd"], flat.std(0, ddof=1), rtol=1e-12)
  np.testing.assert_allclose(summary["r_hat"], az.rhat(idata)["x"],
                             rtol=1e-12)
  np.testing.assert_allclose(summary["ess_bulk"], az.ess(idata)["x"],
                             rtol=1e-12)
  assert not idata.sample_stats["diverging"].any()


def test_a_trace_plot_renders(sghmc_run, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  draws, trace = sghmc_run
  axes = az.plot_trace(sg.to_inference_data(draws[:200], trace._replace(
      **{f: getattr(trace, f)[:200] for f in ("diverged", "step_size",
                                               "target_log_prob")})))
  figure = np.ravel(axes)[0].figure
  try:
    assert np.shape(axes) == (1, 2)
    lines = [line for ax in np.ravel(axes) for line in ax.get_lines()]
    assert len(lines) >= 4  # one per chain at least
    figure.canvas.draw()
  finally:
    plt.close(figure)
  assert os.listdir(tmp_path) == []


def test_keras_posterior_to_inference_data():
  rng = np.random.default_rng(0)
  kernel, bias = rng.normal(size=(6, 3, 2)), rng.normal(size=(6, 2))
  posterior = Posterior([kernel, bias], ["dense/kernel", "dense/bias"])
  idata = posterior.to_inference_data(dims={"dense/bias": ["unit"]})
  post = idata.posterior
  assert post["dense/kernel"].shape == (1, 6, 3, 2)
  assert post["dense/bias"].dims == ("chain", "draw", "unit")
  np.testing.assert_array_equal(post["dense/kernel"][0], kernel)
  np.testing.assert_array_equal(post["dense/bias"][0], bias)


def test_bad_arguments_name_the_fix():
  draws = np.zeros([5, 2, 3])
  with pytest.raises(ValueError, match="chain_axis=None for a single chain"):
    sg.to_inference_data(np.zeros([5]))
  with pytest.raises(ValueError, match="`chain_axis` must be"):
    sg.to_inference_data(draws, chain_axis=0)
  with pytest.raises(ValueError, match=r"`var_names` = \['a'\] must be 2"):
    sg.to_inference_data([draws, draws], var_names=["a"])
  with pytest.raises(ValueError, match="the parts must come from one run"):
    sg.to_inference_data([draws, draws[:4]])
  with pytest.raises(ValueError, match="not 5 draws first"):
    sg.to_inference_data(draws, {"lp": np.zeros([4, 2])})
  with pytest.raises(TypeError, match="trace_fn=lambda _, r: r"):
    sg.to_inference_data(draws, np.zeros([5, 2]))


def test_without_arviz_the_error_says_how_to_install_it(monkeypatch):
  monkeypatch.setitem(sys.modules, "arviz", None)  # import arviz fails
  with pytest.raises(ImportError, match=r'pip install -e "\.\[arviz\]"'):
    sg.to_inference_data(np.zeros([5, 2]))


def _regression(**options):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 2)).astype(np.float32)
  y = (x @ np.float32([1., -1.]) + rng.normal(size=200)).astype(np.float32)
  return sg.InMemoryTarget(
      lambda w, b: -0.5 * (b[1] - tf.linalg.matvec(b[0], w)) ** 2, (x, y),
      log_prior_fn=lambda w: -0.5 * tf.reduce_sum(w ** 2, -1), **options)


@pytest.mark.parametrize("options, expected", [
    (dict(batch_size=20), "shared by all chains"),
    (dict(batch_size=20, parameter_shapes=[2], independent_minibatches=True),
     "independent per chain"),
    (dict(full_batch=True), "full batch"),
])
def test_attrs_record_whether_the_chains_shared_their_minibatches(
    options, expected):
  target = _regression(**options)
  draws = np.zeros([5, 4, 2], np.float32)
  # Through control variates and TFP's step-size adaptation too.
  for kernel in (sg.SGLD(target, 1e-3), tfp.mcmc.SimpleStepSizeAdaptation(
      sg.SGHMC(sg.ControlVariateTarget(target, tf.zeros([2])), 1e-3,
               friction=1.), 10)):
    idata = sg.to_inference_data(draws, kernel=kernel)
    assert idata.attrs["minibatches"] == expected
    assert idata.posterior.attrs["minibatches"] == expected
  # Without a kernel, or with one that does not tell, nothing is claimed.
  assert "minibatches" not in sg.to_inference_data(draws).attrs
  hmc = tfp.mcmc.HamiltonianMonteCarlo(lambda x: -tf.reduce_sum(x ** 2, -1),
                                       0.1, 3)
  assert "minibatches" not in sg.to_inference_data(draws, kernel=hmc).attrs


def test_rejected_divergent_transitions_are_diverging():
  # A proposal with a non-finite energy is rejected and the chain stays
  # finite; ArviZ's `diverging` (its pair plots' marks of a funnel) shows
  # it, as `summarize` counts it. A half-normal written on the whole line
  # under TFP's HMC: the proposals across 0 are such transitions.
  def log_prob(x):
    return tf.reduce_sum(tf.where(x > 0., -0.5 * x**2, -np.inf), -1)
  draws, trace = tfp.mcmc.sample_chain(
      100, tf.fill([4, 1], 1.), kernel=tfp.mcmc.HamiltonianMonteCarlo(
          log_prob, 0.5, 4), seed=[7, 8], trace_fn=lambda _, r: r)
  stats = sg.to_inference_data(draws, trace).sample_stats
  rejected = ~np.isfinite(trace.log_accept_ratio.numpy())
  assert rejected.sum() > 5
  np.testing.assert_array_equal(stats["diverging"], rejected.T)


def test_one_chain_of_a_vector_state_is_exported_as_one_chain():
  # One chain of a 3-d state, draws [500, 3] with no chain axis: its
  # traced per-chain `diverged` ([500]) says so. Taken in TFP's layout
  # [draws, chains], the three coordinates were exported as three chains
  # of a scalar `x` (az.rhat far above 1 for a healthy chain), each given
  # the one chain's sample stats.
  mean = tf.constant([0., 5., -5.])
  target = sg.NoisyGradientTarget(
      lambda x: 0.5 * tf.reduce_sum((x - mean) ** 2, -1), 0.5)
  draws, trace = tf.function(lambda: tfp.mcmc.sample_chain(
      500, mean, kernel=sg.SGHMC(target, 0.2, friction=1.),
      trace_fn=lambda _, r: r, seed=[3, 4]), autograph=False)()
  idata = sg.to_inference_data(draws, trace)
  post = idata.posterior
  assert dict(post.sizes) == {"chain": 1, "draw": 500, "x_dim_0": 3}
  np.testing.assert_array_equal(post["x"].values[0], draws)
  assert idata.sample_stats["diverging"].shape == (1, 500)
  np.testing.assert_array_equal(idata.sample_stats["lp"].values[0],
                                trace.target_log_prob)
  # An explicit chain_axis=None is the same export.
  again = sg.to_inference_data(draws, trace, chain_axis=None)
  np.testing.assert_array_equal(again.posterior["x"], post["x"])
  # Without results nothing tells one chain from three: TFP's layout.
  assert dict(sg.to_inference_data(draws).posterior.sizes) == {
      "chain": 3, "draw": 500}
