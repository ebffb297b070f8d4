"""The fixture that the Keras tests share (their fit helpers are in
support/keras_fits.py)."""

import pytest

from support.linear_regression import LinearRegression


@pytest.fixture(scope="module")
def problem():
  """The Bayesian linear regression the Keras chains sample: 500 examples,
  2 weights, built once per test module."""
  return LinearRegression(num_examples=500, dim=2, seed=1)
