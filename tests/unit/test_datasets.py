"""The real data sets' loaders (tfp_sgmcmc.datasets) read the files as
published, from ../shared/data (skipped where it is absent).
"""

import os

import numpy as np
import pytest

import tfp_sgmcmc as sg


def test_australian_loader_reads_the_original_file(shared_data):
  x, y = sg.datasets.load_statlog_australian(shared_data)
  assert x.shape == (690, 14) and y.shape == (690,)
  assert set(np.unique(y)) == {0., 1.}
  # The raw covariates range over orders of magnitude (no scaling applied).
  assert x.max() == 100001. and x[:, 0].max() == 1.
  # Also from the directory that holds the file itself.
  x2, _ = sg.datasets.load_statlog_australian(
      os.path.join(shared_data, "statlog"))
  np.testing.assert_array_equal(x, x2)


def test_mnist_and_fashion_loaders_read_the_original_files(shared_data):
  images, labels = sg.datasets.load_mnist(shared_data, "test")
  assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
  np.testing.assert_array_equal(labels[:10], [7, 2, 1, 0, 4, 1, 4, 9, 5, 9])
  assert np.bincount(labels).min() > 800
  ood = sg.datasets.load_fashion_mnist_sprite(shared_data)
  assert ood.shape == (900, 28, 28) and ood.max() > 200
  with pytest.raises(FileNotFoundError, match="t10k-images"):
    sg.datasets.load_mnist(os.path.join(shared_data, "statlog"), "test")
