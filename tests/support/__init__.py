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
"""
