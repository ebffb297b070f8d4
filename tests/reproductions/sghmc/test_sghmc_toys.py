"""The toy experiments of the SGHMC paper (Chen, Fox & Guestrin 2014,
Figures 1-3; papers/003 Section 4.1), CI-sized.

Runs `examples/papers/sghmc/sghmc_toys.py` at its default size (`DEFAULT`;
10000 draws per sampler in (a), 200 chains in (b), 4e5 draws per setting in
(c)), seed 0, and asserts the papers' qualitative claims. The margins come from the
run-to-run spread over seeds 0-9 of exactly this configuration:

  (a) sym. KL to the truth: naive SGHMC without M-H 0.201 - 0.237,
      naive SGHMC with M-H 0.006 - 0.036 (acceptance 0.565 - 0.577),
      SGHMC (C = 3) 0.006 - 0.023; per seed, naive / SGHMC >= 8.8 and
      naive / naive-with-M-H >= 5.5.
  (b) mean theta^2 + r^2 over 200 chains, first / last quarter of the 360
      steps: noisy Hamiltonian 2.70 - 3.06 / 12.5 - 15.9; with friction
      2.09 - 2.28 / 2.07 - 2.32 (last / first 0.95 - 1.09); exact gradient:
      max |theta^2 + r^2 - 1| = 0.053 (symplectic Euler's orbit, no noise).
  (c) the two largest settings (k = 0, 1): SGLD error 0.446 - 0.452 and
      0.128 - 0.129 at autocorrelation times 12.0 - 12.9 and 19.6 - 21.7;
      SGHMC error 0.0075 - 0.024 and 0.0032 - 0.027 at 12.4 - 12.5 and
      20.7 - 21.0 (SGLD / SGHMC error >= 19 and >= 4.7; SGHMC / SGLD time
      <= 1.04 and <= 1.07). SGLD's five errors fall with its step size in
      every seed and match the exact stationary errors (its discretisation
      bias: 0.450, 0.129, 0.068, 0.043, 0.029) within 0.9% for k = 0, 1.

Each bound sits at about half the least favourable value seen (twice, for
upper bounds). The module is imported by name from examples/papers/sghmc/ (as the
notebook colab/paper_003_sghmc.ipynb does), so both share compiled samplers
when run in one process.
"""

import os
import sys

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..",
                        "examples", "papers", "sghmc")


@pytest.fixture(scope="module")
def toys():
  if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)
  import sghmc_toys  # pylint: disable=g-import-not-at-top
  return sghmc_toys


@pytest.fixture(scope="module")
def densities_result(toys):
  return toys.run_densities(seed=0, samplers=("naive", "naive_mh", "sghmc"),
                            verbose=False, **toys.DEFAULT["a"])


@pytest.fixture(scope="module")
def densities(densities_result):
  return {r["sampler"]: r for r in densities_result["rows"]}


@pytest.fixture(scope="module")
def phase(toys):
  return toys.run_phase_portrait(seed=0, dynamics=("exact", "noisy",
                                                   "friction"),
                                 verbose=False, **toys.DEFAULT["b"])


@pytest.fixture(scope="module")
def gaussian(toys):
  return toys.run_correlated_gaussian(seed=0, verbose=False,
                                      **toys.DEFAULT["c"])


@pytest.fixture(scope="module")
def gaussian_fig2(toys):
  result = toys.run_densities(seed=0, samplers=("naive", "naive_mh", "sghmc"),
                              verbose=False, energy="gaussian",
                              **toys.DEFAULT["a"])
  return {r["sampler"]: r for r in result["rows"]}


def test_gaussian_fig2_naive_sghmc_is_wide_and_friction_repairs_it(
    gaussian_fig2):
  # papers/003 Fig. 2: the samplers of Fig. 1 on U = theta^2 / 2 (variance
  # 1), 10,000 draws. Over seeds 0-4: naive without M-H variance 2.14-2.18,
  # KL 0.276-0.296; naive with M-H variance 0.997-1.024, KL 0.027-0.039,
  # acceptance 0.549-0.560; SGHMC variance 0.971-1.005, KL 0.012-0.016.
  naive, corrected, sghmc = (gaussian_fig2[k]
                             for k in ("naive", "naive_mh", "sghmc"))
  assert naive["var"] > 1.6 and naive["sym_kl"] > 0.15, naive
  for row in (corrected, sghmc):
    assert abs(row["var"] - 1.) < 0.1 and row["sym_kl"] < 0.07, row
  assert 0.45 < corrected["accept"] < 0.65, corrected


def test_naive_sghmc_without_mh_deviates_and_friction_repairs_it(densities):
  naive, sghmc = densities["naive"], densities["sghmc"]
  assert naive["sym_kl"] > 0.1, naive
  assert sghmc["sym_kl"] < 0.045, sghmc
  assert naive["sym_kl"] > 4. * sghmc["sym_kl"], (naive, sghmc)


def test_mh_repairs_naive_sghmc_at_reduced_acceptance(densities):
  naive, corrected = densities["naive"], densities["naive_mh"]
  assert corrected["sym_kl"] < 0.07, corrected
  assert naive["sym_kl"] > 2.5 * corrected["sym_kl"], (naive, corrected)
  # The noisy trajectories' energy error costs acceptance (exact HMC at the
  # same eps and length accepts 99.6%).
  assert 0.3 < corrected["accept"] < 0.75, corrected


def test_noisy_hamiltonian_dynamics_diverge_while_friction_bounds_them(phase):
  rows = {r["dynamics"]: r for r in phase["rows"]}
  noisy, friction = rows["noisy"], rows["friction"]
  assert noisy["radius2_last_quarter"] > 2. * noisy["radius2_first_quarter"]
  assert (noisy["radius2_last_quarter"] >
          2.5 * friction["radius2_last_quarter"]), (noisy, friction)
  ratio = friction["radius2_last_quarter"] / friction["radius2_first_quarter"]
  assert 0.8 < ratio < 1.25, friction


def test_exact_hamiltonian_dynamics_stay_on_their_orbit(phase):
  theta, r = phase["paths"]["exact"]
  assert np.max(np.abs(theta ** 2 + r ** 2 - 1.)) < 0.1


def test_sghmc_has_lower_covariance_error_at_matched_autocorrelation(
    gaussian):
  sgld = [r for r in gaussian["rows"] if r["sampler"] == "sgld"]
  sghmc = [r for r in gaussian["rows"] if r["sampler"] == "sghmc"]
  for k, factor in ((0, 8.), (1, 2.)):
    # SGHMC's setting k mixes at most as slowly as SGLD's setting k ...
    assert (sghmc[k]["autocorrelation_time"] <
            1.25 * sgld[k]["autocorrelation_time"]), (sghmc[k], sgld[k])
    # ... and estimates the covariance much better.
    assert sgld[k]["cov_error"] > factor * sghmc[k]["cov_error"], (
        sghmc[k], sgld[k])


def test_sgld_error_is_its_discretisation_bias(gaussian):
  sgld = [r for r in gaussian["rows"] if r["sampler"] == "sgld"]
  errors = [r["cov_error"] for r in sgld]
  assert all(a > b for a, b in zip(errors, errors[1:])), errors
  for row in sgld[:2]:
    assert abs(row["cov_error"] - row["stationary_cov_error"]) < (
        0.025 * row["stationary_cov_error"]), row


def test_example_writes_figures_and_tables(toys, densities_result, phase,
                                           gaussian, tmp_path):
  result = dict(a=densities_result, b=phase, c=gaussian, size=toys.DEFAULT)
  paths = toys.write_figures(result, str(tmp_path))
  toys.write_tables(result, str(tmp_path))
  assert len(paths) == 4
  for path in paths:
    assert os.path.getsize(path) > 1000
  assert (tmp_path / "table.md").read_text().count("| SGHMC |") == 5
