"""The bad-input catalogues as a whole. Their rows sit in the errors/ files by
subject (CLEAR_MESSAGES and OUTCOMES lists); here, over all of them: enough
cases, each name once, no case silent (a wrong answer accepted) and at most
3 whose error does not name the cause.
"""

import collections

import test_chain_state
import test_checkpoints
import test_dataset_targets
import test_kernel_arguments
import test_kernel_results
import test_noisy_and_wrapped_targets
import test_run_arguments
import test_schedule_arguments
import test_summary_and_mode_search
import test_target_data
import test_user_functions


CLEAR_MESSAGES = (
    test_chain_state.CLEAR_MESSAGES +
    test_dataset_targets.CLEAR_MESSAGES +
    test_kernel_arguments.CLEAR_MESSAGES +
    test_noisy_and_wrapped_targets.CLEAR_MESSAGES +
    test_schedule_arguments.CLEAR_MESSAGES +
    test_target_data.CLEAR_MESSAGES +
    test_user_functions.CLEAR_MESSAGES
)
OUTCOMES = (
    test_chain_state.OUTCOMES +
    test_checkpoints.OUTCOMES +
    test_dataset_targets.OUTCOMES +
    test_kernel_arguments.OUTCOMES +
    test_kernel_results.OUTCOMES +
    test_noisy_and_wrapped_targets.OUTCOMES +
    test_run_arguments.OUTCOMES +
    test_schedule_arguments.OUTCOMES +
    test_summary_and_mode_search.OUTCOMES +
    test_target_data.OUTCOMES +
    test_user_functions.OUTCOMES
)

NAMES = [c.name for c in OUTCOMES]


assert len(set(NAMES)) == len(NAMES)


def test_catalogue_size():
  # At least 30 cases with a checked message across targets, kernels,
  # wrappers, schedules and checkpoints (the other tests of errors/ add
  # more).
  assert len(CLEAR_MESSAGES) >= 30


def test_catalogue_outcome_counts():
  counts = collections.Counter(c.outcome for c in OUTCOMES)
  print(dict(counts))
  assert len(OUTCOMES) >= 60
  assert counts["silent"] == 0
  assert counts["unclear"] <= 3
