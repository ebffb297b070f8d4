"""Machinery the tests share (importable as `support` from any test: the
top conftest puts tests/ on sys.path).

* helpers: running chains, Monte Carlo standard errors, exact stationary
  covariances of the kernels on Gaussian targets, loading examples/ scripts.
* linear_regression: Bayesian linear regression with its analytic posterior.
* barker_stationary: exact stationary laws of the SGBD variants (quadrature).
* paths: the repository's folders and the shared real data.
* keras_fits: the Keras `fit` runs of tests/keras/ (the linear regression's
  model, batches and fits, kept draws; a logistic set-up); the `problem`
  fixture they take is tests/keras/conftest.py's.
* distributed_logistic: the data and model of the distributed Keras workers.
* Targets that several test files sample: barker_gaussian (SGBD's noisy
  N(MEAN, I) and its predicted variance), amagold_targets (AMAGOLD's noisy
  Gaussian and quartic energy), sgnuts_gaussian (SG-NUTS's noisy Gaussians
  and run), gaussian_targets (the noisy Gaussian stationary_covariance
  predicts), variance_problem (a Normal variance with an InverseGamma
  prior).
* bad_inputs: inputs and machinery of the bad-input catalogues in errors/.
* per_chain_minibatches: the per-chain minibatch target on the linear
  regression.
* public_api: the public modules the docs tests walk.
"""
