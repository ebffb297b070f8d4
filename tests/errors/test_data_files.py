"""The real data sets' loaders name what is wrong with a file: missing, a bad
label or feature index, the wrong number of rows or columns.
"""

import pytest

import tfp_sgmcmc as sg


def test_heart_loader_errors_name_the_problem(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"heart_scale"):
    sg.datasets.load_statlog_heart(tmp_path)
  (tmp_path / "heart_scale").write_text("2 1:0.5\n")
  with pytest.raises(ValueError, match=r"label 2\.0"):
    sg.datasets.load_statlog_heart(tmp_path)
  (tmp_path / "heart_scale").write_text("+1 14:0.5\n")
  with pytest.raises(ValueError, match=r"indices \[14\]"):
    sg.datasets.load_statlog_heart(tmp_path)
  (tmp_path / "heart_scale").write_text("+1 1:0.5\n-1 2:0.1\n")
  with pytest.raises(ValueError, match=r"2 rows.*270"):
    sg.datasets.load_statlog_heart(tmp_path)


def test_australian_loader_error_names_the_missing_file(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"australian\.dat.*"
                     + str(tmp_path).replace("\\", "\\\\")):
    sg.datasets.load_statlog_australian(tmp_path)


def test_australian_loader_rejects_a_file_of_the_wrong_shape(tmp_path):
  (tmp_path / "australian.dat").write_text("1 2 3\n4 5 6\n")
  with pytest.raises(ValueError, match=r"shape \(2, 3\).*\(690, 15\)"):
    sg.datasets.load_statlog_australian(tmp_path)
