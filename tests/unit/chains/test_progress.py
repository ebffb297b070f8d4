"""The text progress lines' estimate of the time left."""

import itertools

from tfp_sgmcmc.chains import progress


def test_the_time_left_is_not_inflated_by_the_first_chunks_compilation(
    capsys):
  # 100 steps in chunks: the first 5 took 10 s (9 s of it compiling the
  # loop), the next 5 took 1 s, the last 90 took 18 s. After 10 steps the
  # time left is 90 steps at 0.2 s: 18 s. Counted from the start (11 s for
  # 10 steps) it was 99 s, and 19 s after 50 steps (for 10).
  times = iter([0., 10., 11., 19., 29.])
  report, close = progress._text_progress(100, "run", clock=lambda: next(
      times))
  for done in (5, 10, 50, 100):
    report(done)
  close()
  lines = capsys.readouterr().err.splitlines()
  left = [float(line.split(",")[-1].split()[0]) for line in lines]
  assert left == [190., 18., 10., 0.], lines
  assert lines[1] == "run: 10/100 ( 10%),   11.0 s elapsed,   18.0 s left"
