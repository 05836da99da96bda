"""The demo's output is tfbert's lines: TF_CPP_MIN_LOG_LEVEL applied to Abseil's C++ logging.

TensorFlow's C++ code logs through two loggers. Its own (`tsl` logging: lines such as
"2026-11-29 00:39:20.076885: I tensorflow/core/util/port.cc:153] oneDNN custom operations
are on ...") obeys TF_CPP_MIN_LOG_LEVEL, which `bootstrap.sh` sets to 2. Other parts (in
TensorFlow 2.20, the pinned release) log through Abseil's logging, which no environment
variable reaches; in the demo:

  WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
  I0000 00:00:1795912771.181735   21617 device_compiler.h:196] Compiled cluster using XLA!
      This line is logged at most once for the lifetime of the process.
  I0000 00:00:1795912806.576211   21617 devices.cc:67] Number of eligible GPUs (core count
      >= 8, compute capability >= 0.0): 0
  I0000 00:00:1795912806.576346   21617 single_machine.cc:376] Starting new session

(Abseil's first line in a process; the first XLA-compiled function, one of tfbert's fused
kernels; Grappler, run by every export that freezes its model).
`follow_tf_cpp_min_log_level` gives Abseil the same minimum level, through
`absl::SetMinLogLevel`, which TensorFlow's framework library exports: with level 2, INFO and
WARNING lines are dropped before Abseil writes anything, its banner included; errors still
show.
"""

import ctypes
import functools
import glob
import mmap
import os
import re
from typing import Callable, Optional

import tensorflow as tf


def follow_tf_cpp_min_log_level() -> bool:
  """Sets Abseil's minimum C++ log level to TF_CPP_MIN_LOG_LEVEL (0 INFO ... 3 FATAL).

  Harmless to call again; it changes nothing when the variable is unset or not a number,
  or when this TensorFlow has no Abseil logging to set.

  Returns:
    whether Abseil's level was set.
  """
  try:
    level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", ""))
  except ValueError:
    return False
  set_min_log_level = _absl_set_min_log_level()
  if set_min_log_level is None:
    return False
  set_min_log_level(ctypes.c_int(min(max(level, 0), 3)))  # absl::LogSeverityAtLeast
  return True


@functools.lru_cache(maxsize=1)
def _absl_set_min_log_level() -> Optional[Callable[[ctypes.c_int], None]]:
  """`absl::SetMinLogLevel` of the Abseil inside TensorFlow's framework library, or None.

  Its C++ name carries Abseil's release namespace (`absl::lts_20250127::`), which changes
  with TensorFlow's version, so the name is read from the library's symbol table.
  """
  libraries = sorted(glob.glob(os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework*")))
  if not libraries:
    return None
  symbol = _find_symbol(libraries[0], re.compile(
      rb"_ZN4absl(?:\d+lts_\d+)?14SetMinLogLevelENS\d*_18LogSeverityAtLeastE"))
  if symbol is None:
    return None
  library = ctypes.CDLL(libraries[0])  # Already loaded by TensorFlow: the same Abseil.
  function = getattr(library, symbol, None)
  if function is not None:
    function.restype = None
    function.argtypes = [ctypes.c_int]
  return function


def _find_symbol(path: str, pattern: re.Pattern) -> Optional[str]:
  """The first name in the file at `path` that `pattern` matches, or None."""
  with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as image:
    view = memoryview(image)
    try:
      match = pattern.search(view)
      return match.group(0).decode("ascii") if match else None
    finally:
      match = None
      view.release()
