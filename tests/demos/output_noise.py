"""What the demo must not print: lines of TensorFlow's, Abseil's or XLA's logging, not tfbert's.

`noise(text)` lists them; the demo tests assert it is empty for what their run printed (file
descriptors 1 and 2, `capfd`) and logged (`caplog`).
"""

import logging
import re

# A line written by a logger that is not tfbert's, whatever its level.
_NOISE = re.compile("|".join([
    # Abseil's C++ logging: "I0000 00:00:1795912806.576346   21617 devices.cc:67] ..." (before
    # absl::InitializeLog, month, day, hour and minute are 0 and the seconds count from 1970).
    r"^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] ",
    r"absl::InitializeLog\(\)",  # Abseil's first line in a process.
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\] ",  # TensorFlow's C++ logging.
    r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):tensorflow:",  # TensorFlow's Python handler.
    r"Issue encountered when serializing",  # Freezing after an eager table (also via root).
    r"Compiled cluster using XLA", r"oneDNN custom operations", r"failed call to cuInit",
]))


def noise(text: str) -> list[str]:
  """The lines of `text` that another logger than tfbert's wrote."""
  return [line for line in text.splitlines() if _NOISE.search(line)]


def noise_records(records) -> list[str]:
  """The messages of log `records` (`caplog.records`) that the demo would print from
  TensorFlow's Python logger: WARNING and above (tools/demo.py hides its INFO)."""
  return [record.getMessage() for record in records if record.levelno >= logging.WARNING
          and (record.name == "tensorflow" or record.name.startswith("tensorflow."))]
