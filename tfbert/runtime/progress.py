"""Progress of a training loop as whole lines: step, scalars, speed and time left.

A loop that logs every `log_steps` steps and may resume at any step does not fit Keras'
`Progbar`: the bar rewrites one terminal line with carriage returns, so any other line
printed meanwhile (a checkpoint note, a TensorFlow warning on stderr) is spliced into it,
and its time per step assumes updates from step 0 at every step (a bar first updated at
step 10 of a resumed run shows `1us/step`). `StepProgress` prints one complete line per
update instead, timed from the step the loop started at:

  step 20/300 (6.7%) loss 7.1234 learning_rate 1.2e-04 | 0.26 s/step, eta 1:12
"""

import math
import sys
import time
from typing import Mapping, Optional, TextIO


def format_duration(seconds: float) -> str:
  """`h:mm:ss`, `m:ss` or `Ns` (seconds rounded down)."""
  seconds = int(max(seconds, 0))
  if seconds >= 3600:
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
  if seconds >= 60:
    return f"{seconds // 60}:{seconds % 60:02d}"
  return f"{seconds}s"


def format_value(value: float) -> str:
  """4 decimals for ordinary magnitudes, else 3 significant digits in e-notation."""
  if isinstance(value, float) and not math.isfinite(value):
    return str(value)
  if value == 0 or 1e-3 <= abs(value) < 1e5:
    return f"{value:.4f}"
  return f"{value:.3e}"


class StepProgress:
  """Prints `step N/T (p%) name value ... | s/step, eta` lines for steps start..total.

  Args:
    total: the step the run ends at.
    start_step: the step the loop starts from (a resumed run's restored step).
    stream: where lines go (default sys.stdout).
    clock: seconds now (for tests).
  """

  def __init__(self, total: int, start_step: int = 0, stream: Optional[TextIO] = None,
               clock=time.monotonic):
    self.total, self.start_step = total, start_step
    self._stream, self._clock = stream, clock
    self._started = clock()

  def line(self, step: int, scalars: Mapping[str, float]) -> str:
    """The line for `step` (with `scalars` in their order)."""
    width = len(str(self.total))
    parts = [f"step {step:{width}d}/{self.total} ({100.0 * step / self.total:.1f}%)"]
    parts += [f"{name} {format_value(value)}" for name, value in scalars.items()]
    done = step - self.start_step
    if done > 0:
      per_step = (self._clock() - self._started) / done
      timing = f"{per_step:.3g} s/step"
      timing += f", eta {format_duration(per_step * (self.total - step))}" \
          if step < self.total else f", {format_duration(self._clock() - self._started)} in all"
      parts.append("| " + timing)
    return " ".join(parts)

  def update(self, step: int, scalars: Mapping[str, float]) -> None:
    """Prints the line for `step`, flushed, on a line of its own."""
    print(self.line(step, scalars), file=self._stream or sys.stdout, flush=True)
