"""tfbert.runtime.progress: whole lines, timed from the step the loop started at."""

import io

from tfbert.runtime import progress


class FakeClock:

  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def test_a_resumed_loop_times_only_its_own_steps():
  clock = FakeClock()
  stream = io.StringIO()
  bar = progress.StepProgress(300, start_step=200, stream=stream, clock=clock)
  clock.now += 25.0  # 10 steps of 2.5 s.
  bar.update(210, {"loss": 7.123456, "learning_rate": 1.25e-4})
  # Keras' Progbar, first updated at step 210, would report (25 s / 210) per step.
  assert stream.getvalue() == ("step 210/300 (70.0%) loss 7.1235 learning_rate 1.250e-04 "
                               "| 2.5 s/step, eta 3:45\n")


def test_the_last_line_gives_the_total_time_and_lines_never_share_a_line():
  clock = FakeClock()
  stream = io.StringIO()
  bar = progress.StepProgress(7, stream=stream, clock=clock)
  clock.now += 3.5
  bar.update(5, {"loss": 0.5})
  stream.write("a checkpoint note\n")  # Another line between two updates stays whole.
  clock.now += 1.4
  bar.update(7, {"loss": float("nan")})
  assert stream.getvalue().splitlines() == [
      "step 5/7 (71.4%) loss 0.5000 | 0.7 s/step, eta 1s",
      "a checkpoint note",
      "step 7/7 (100.0%) loss nan | 0.7 s/step, 4s in all"]


def test_durations_and_values_format():
  assert [progress.format_duration(s) for s in (0.4, 59.9, 61, 3600 + 62)] == [
      "0s", "59s", "1:01", "1:01:02"]
  assert [progress.format_value(v) for v in (0.0, 12.5, 3e-5, 2.5e6, float("inf"))] == [
      "0.0000", "12.5000", "3.000e-05", "2.500e+06", "inf"]
