"""Set-up for every test: tests/ on sys.path, the real-data fixture, and a
marker for each folder.

The folders say what a test checks (markers registered in pytest.ini):

    unit/           pure functions and protocol, mirroring the package (unit)
    integration/    the kernels run as chains through TFP's machinery and the
                    library's long-run drivers (integration)
    statistical/    samplers against known moments and exact stationary
                    laws, Monte Carlo tolerances (statistical)
    errors/         bad input and misuse fail early and clearly (errors)
    keras/          the Keras adapter through `fit` (keras); its conftest.py
                    gives the linear-regression `problem` fixture
    reproductions/  the papers' experiments at CI size, one folder per
                    paper as in examples/papers/, and demos/ (reproduction)
    processes/      runs in fresh processes started from workers/ (processes)
    docs/           README blocks and Colab notebooks (docs)
    benchmarks/     the benchmark scripts at tiny sizes (benchmarks)
    support/        shared machinery, imported as `support.<module>`
    workers/        scripts run in subprocesses, not collected

tests/unit/ is a package (its files mirror the library's modules, so a name
such as test_amagold.py stands in unit/dynamics/ and in unit/kernels/). The
other folders have no __init__.py, so that tests/keras/ can never shadow the
keras package; their modules are imported by file name (pytest's default
import mode), so a test_*.py name outside unit/ must be unique.
"""

import gc
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
if os.environ.get("PYTEST_XDIST_WORKER"):
  # With one worker per core (`-n 2` on 2 cores), a second intra-op thread
  # per worker only competes with the other worker for the cores.
  os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

warnings.filterwarnings("ignore", message=".*is not calibrated.*")

import pytest  # noqa: E402

from support.paths import SHARED_DATA  # noqa: E402,F401  (re-exported)

TESTS = os.path.dirname(os.path.abspath(__file__))

# tests/<folder>/... -> the marker every test under it gets.
FOLDER_MARKERS = {
    "unit": "unit",
    "integration": "integration",
    "statistical": "statistical",
    "errors": "errors",
    "keras": "keras",
    "reproductions": "reproduction",
    "processes": "processes",
    "docs": "docs",
    "benchmarks": "benchmarks",
}

# Tests CI leaves out to keep the suite within 15 minutes on 2 cores, by why;
# `python -m pytest -m slow` runs them (each is a node id or its prefix).
SLOW = {
    'the benchmark scripts at their tiny sizes (each benchmark is run by hand for its table)': (
        'benchmarks/test_gpu_report.py::test_quick_report_writes_every_row',
        'benchmarks/test_posteriors_suite.py::test_posterior_suite_runs_at_its_quick_size',
        'benchmarks/test_posteriors_suite.py::test_posterior_suite_has_a_sample_row',
        'benchmarks/test_benchmark_scripts.py::test_benchmark_scripts_run_at_tiny_sizes',
        'benchmarks/test_ksd_scripts.py::test_ksd_step_size_script_reports_every_scale',
        'benchmarks/test_ksd_scripts.py::test_posterior_start_has_the_reference_means_and_sds',
        'benchmarks/test_one_call.py::test_one_call_runs_at_a_tiny_size',
        'benchmarks/test_one_call.py::test_unstandardised_regression_runs_at_a_tiny_size',
        'benchmarks/test_ksd_scripts.py::test_double_well_replicates_script_reports_each_length_scale',
        'benchmarks/test_random_intercepts.py::test_random_intercepts_script_reports_both_warm_ups',
        'benchmarks/test_golden_streams.py::test_a_record_is_the_same_run_to_run_and_a_changed_bit_is_flagged',
        'benchmarks/test_ksd_scripts.py::test_ksd_cost_script_times_each_score_beside_the_run',
        'benchmarks/test_length_units.py::test_the_tuned_length_depends_on_the_posteriors_units_as_documented',
    ),
    "the paper notebooks (the quickstart and Keras notebooks stay; each paper's example has its own test)": (
        'test_notebook_executes[paper_',
    ),
    'fresh-process, multi-worker and multi-device runs': (
        'processes/test_resume_in_new_process.py',
        'processes/test_constant_memory.py',
        'processes/test_quiet_console.py',
        'processes/test_sharded_devices.py',
        'keras/test_multi_worker.py',
        'keras/test_mirrored_strategy.py',
        'keras/test_resume.py::test_amagold_killed_with_sigkill_resumes_bit_identically',
        'docs/test_package.py::test_wheel_installs_into_a_fresh_venv_and_imports_from_there',
    ),
    'the guides beyond getting started (README and getting started stay)': (
        'docs/test_guides.py::test_tfp_workflow_runs',
        'docs/test_guides.py::test_scaling_out_runs',
    ),
    'the docstring examples that run a warm-up or a long chain': (
        'test_docstring_example_runs[tfp_sgmcmc.warm_up[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.sample[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.JointDistributionTarget[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.SGNUTS[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.diagonal_momentum_distribution[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.summarize[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.kernel_stein_discrepancy[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.sample_chain_with_progress[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.PolynomialDecay[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.to_inference_data[0]]',
        'test_docstring_example_runs[tfp_sgmcmc.chains.diagnostics.divergence_and_heating[0]]',
    ),
    "`sample` end to end on a rule whose unit test stays in CI (tests/unit/chains/test_sample.py)": (
        # test_a_step_size_held_down_by_a_rough_energy_keeps_the_minibatches
        'integration/test_sample_one_call.py::test_a_step_size_held_down_by_a_rough_energy_is_not_blamed_on_noise',
        # test_the_laplace_mass_only_beyond_a_dense_windows_reach
        'integration/test_sample_one_call.py::test_beyond_a_dense_windows_reach_the_mass_is_the_laplace_covariance',
        # test_full_batch_rule_below_the_threshold_only, and the smooth
        # model of the rough-energy test above
        'integration/test_sample_one_call.py::test_minibatch_noise_that_holds_the_step_down_switches_to_full_batch',
    ),
    'second parametrizations of one guarantee (one stays in CI)': (
        # The stationary bound's chains stay in CI through
        # tests/statistical/test_warmup_stationary_bound.py.
        'test_biased_kernels_keep_the_posteriors_sds',
        'test_the_tuned_kernels_chain_holds_and_keeps_its_sd[SGNHT-5-1.0-True]',
        'test_the_tuned_kernels_chain_holds_and_keeps_its_sd[SGLD-5-1.0-False]',
        # [SGHMC-1-1.0-True] stays in CI: the same kernel and mass in 1-D.
        'test_the_tuned_kernels_chain_holds_and_keeps_its_sd[SGHMC-5-1.0-True]',
        # [AmortizedBarker] stays in CI: the same amortized test after a
        # swap, through the wrapper AMAGOLD shares.
        'test_replica_exchange_with_exact_amortized_replicas_is_exact[AMAGOLD]',
        'test_progress_runs_a_warmed_up_kernel[AMAGOLD mass-default_trace-eager]',
        'test_progress_runs_a_warmed_up_kernel[AMAGOLD-default_trace-eager]',
        'test_progress_runs_a_warmed_up_kernel[SGNHT mass-default_trace-eager]',
        'test_progress_runs_a_warmed_up_kernel[SGHMC mass-default_trace-eager]',
        'test_compute_energy_false_is_the_same_chain_with_nan_energies[sgbd_tempered]',
        'test_compute_energy_false_is_the_same_chain_with_nan_energies[sghmc_fisher]',
        'test_compute_energy_false_is_the_same_chain_with_nan_energies[sgnht]',
        'test_a_kill_between_clean_up_and_save_hands_back_the_run[replace:never.npz.posterior]',
        'keras/test_fit_traps.py::test_a_backup_truncated_by_a_kill_resumes_bit_identically',
        'test_amagold_dual_averaging_in_fit_reaches_the_target[0.85]',
        'keras/test_mass_matrix.py::test_warmup_ends_at_the_same_step_size_and_mass_from_100x_off',
        'test_fit_interrupted_by_an_exception_resumes_bit_identically[sghmc]',
        'test_memory_stays_flat_over_repeated_fits[SGNHT]',
        'test_memory_stays_flat_over_repeated_fits[SGLD]',
        'test_memory_stays_flat_over_repeated_fits[PreconditionedSGLD]',
        'test_diagonal_mass_matrix_adaptation_sets_the_mass_and_freezes_it[SGNHT]',
        'test_diagonal_mass_matrix_adaptation_sets_the_mass_and_freezes_it[NaiveSGHMC]',
        'test_frozen_mass_adaptation_of_a_kernel_without_a_mass_sets_it[NaiveSGHMC]',
        'test_without_a_mass_the_identity_chain_is_unchanged_bit_for_bit[SGNHT]',
        'test_warmed_up_amagold_matches_the_eight_schools_reference[gradients]',
        'test_adapted_step_size_reaches_target_acceptance_and_stays_exact[simple]',
        'test_fit_interrupted_by_an_exception_resumes_bit_identically[amagold_minibatch]',
        'keras/test_step_size_adaptation.py::test_warmup_in_fit_ends_at_the_same_step_from_100x_too_large_or_small',
        # [SGLD] stays in CI: the same search from 100x off; SGHMC's warm-up
        # with a diagonal mass stays through test_warmup_stationary_bound.py.
        'test_step_size_is_the_same_from_100x_too_large_or_too_small[SGHMC]',
    ),
    'reproductions beyond the first for each paper (each paper keeps one in CI)': (
        'reproductions/sgbd/test_sgbd_logistic.py::test_short_reference_is_converged',
        'reproductions/sgbd/test_sgbd_logistic.py::test_sgbd_stays_within_over_a_wider_range_of_step_sizes',
        'reproductions/sgbd/test_sgbd_logistic.py::test_sgld_is_off_by_orders_of_magnitude_at_large_step_sizes',
        'reproductions/amagold/test_double_well.py',
        'reproductions/demos/test_joint_distribution.py::test_eight_schools_amagold_matches_nuts_ci_size',
        'reproductions/integrators/test_integrators_example.py::test_splitting_beats_euler_and_euler_explodes',
        'reproductions/amagold/test_synthetic_2d.py::test_sghmc_is_biased_where_amagold_is_exact_at_large_step_size',
        'reproductions/amagold/test_logistic_statlog.py::test_amagold_acceptance_drops_at_large_step_sizes',
        'reproductions/sgbd/test_sgbd_mf_ica.py::test_ica_sgbd_is_robust_where_sgld_collapses',
        'reproductions/sghmc/test_sghmc_vs_vi.py::test_vi_is_ahead_of_sghmc_at_a_short_budget',
        'reproductions/sghmc/test_mnist_sghmc_paper.py::test_sghmc_paper_sghmc_beats_sgld_and_ties_sgd',
        'reproductions/amagold/test_bnn_table2.py::test_sghmc_heats_up_at_small_momentum_decay_not_at_the_control',
        'reproductions/integrators/test_lda_integrators.py',
        'reproductions/integrators/test_sbn_integrators.py::test_euler_degrades_more_than_splitting_at_a_large_step',
        # The SGHMC paper's Fig. 1 (its densities) stays in CI; Figs. 2 and 3,
        # the phase portrait and the figures' writer run with -m slow.
        'reproductions/sghmc/test_sghmc_toys.py::test_gaussian_fig2_',
        'reproductions/sghmc/test_sghmc_toys.py::test_noisy_hamiltonian_dynamics_diverge_while_friction_bounds_them',
        'reproductions/sghmc/test_sghmc_toys.py::test_exact_hamiltonian_dynamics_stay_on_their_orbit',
        'reproductions/sghmc/test_sghmc_toys.py::test_sghmc_has_lower_covariance_error_at_matched_autocorrelation',
        'reproductions/sghmc/test_sghmc_toys.py::test_sgld_error_is_its_discretisation_bias',
        'reproductions/sghmc/test_sghmc_toys.py::test_example_writes_figures_and_tables',
    ),
    "Keras moments of samplers whose Keras chain is the kernel's chain bit for bit (tests/keras/test_same_chain_as_kernels.py), so the kernels' moment tests cover them": (
        'keras/test_posterior_moments.py::test_keras_psgld_matches_its_predicted_moments',
        'keras/test_posterior_moments.py::test_keras_euler_sghmc_matches_its_predicted_moments',
        'keras/test_posterior_moments.py::test_keras_sgnht_matches_its_predicted_moments',
        'keras/test_posterior_moments.py::test_keras_skew_reversible_amagold_samples_the_posterior',
        'keras/test_posterior_moments.py::test_keras_sgld_matches_its_predicted_moments',
        'keras/test_posterior_moments.py::test_keras_sghmc_matches_the_predicted_posterior',
    ),
}


@pytest.hookimpl(tryfirst=True)  # Before -m deselects by marker.
def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    parts = os.path.relpath(str(item.path), TESTS).split(os.sep)
    marker = FOLDER_MARKERS.get(parts[0]) if len(parts) > 1 else None
    if marker is not None:
      item.add_marker(marker)
    node = "/".join(parts[:-1] + [item.nodeid.split("/")[-1]])
    if any(p in node for group in SLOW.values() for p in group):
      item.add_marker("slow")


def pytest_collection_finish(session):
  """Moves what collection made (TensorFlow, TFP and Keras imported, every
  test module) out of the garbage collector's reach: those objects live to
  the end, yet each full collection walked them all, and on this VM a walk
  over pages untouched since import stalled a worker for tens of seconds
  at random points of the run."""
  del session
  gc.collect()
  gc.freeze()


def pytest_runtest_teardown(item, nextitem):
  """Frees each test's garbage at once, then freezes what survives. A fit
  that raised (a refusal tested with `pytest.raises`) leaves Keras' epoch
  iterator in a cycle of frames and traceback (`gc.DEBUG_SAVEALL` showed
  them), and TensorFlow blocks in the deletion of an autotuned tf.data
  iterator until its tuning thread's current period ends, a period that
  doubles with the iterator's age (gdb: the wait in
  `RootDataset::Iterator::~Iterator`). Freed by a full collection long
  after the test, such iterators stalled a worker at a random later test
  (a Keras docstring example's, freed in a later test that made none);
  freed young they wait little, and frozen survivors keep each of these
  collections to the test's own objects, so collecting after every test
  costs no more than after those that drive Keras."""
  del item, nextitem
  gc.collect()
  gc.freeze()


@pytest.fixture
def shared_data():
  if not os.path.isdir(SHARED_DATA):
    pytest.skip(f"real data not found at {SHARED_DATA} (../shared/data)")
  return SHARED_DATA
