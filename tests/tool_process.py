"""Runs a command-line tool inside the test's process, as `python tools/<name>.py ARGS` would.

A fresh interpreter costs ~4-5 s of TensorFlow import, and a fresh autograph cache traces the
training step again from scratch; a tool called here pays neither. Use it wherever the
process boundary is not what the test is about (a kill, a signal, a second worker, an
interpreter without tfbert: keep a subprocess for those).

The tool's module and its flag modules are imported for the call and forgotten after it, and
every flag they defined is deleted again, so tools whose flags share names (`output_dir`,
`max_seq_length`) run one after another in one process, each from its own defaults. The
root logger's handlers, `sys.argv` and the SIGTERM handler are restored. What the tool
prints is captured at the file-descriptor level too, so TensorFlow's own C++ log lines
count in what a test says a user sees (except the device probe's, which a process shows
only once: tests/runtime/cli_test.py checks a fresh process for those).
"""

import contextlib
import dataclasses
import importlib
import io
import logging
import os
import signal
import sys
import tempfile
from typing import Iterator

from absl import (
  app,  # noqa: F401  (its flags, and absl.logging's, exist before any tool's)
  flags,
)

_TOOL_PACKAGES = ("tfbert_tools", "tfbert_flags")
app.define_help_flags()  # What app.run defines on its first call, defined before any tool.


@dataclasses.dataclass(frozen=True)
class ToolRun:
  """What a tool run gave: its exit status (0, or sys.exit's), stdout and stderr."""
  returncode: int
  stdout: str
  stderr: str


def _status(code) -> int:
  if code is None:
    return 0
  return code if isinstance(code, int) else 1


def _forget_tools(known_flags: set, known_modules: set) -> None:
  for name in set(flags.FLAGS) - known_flags:
    module = flags.FLAGS.find_module_defining_flag(name) or ""
    if module.split(".")[0] in _TOOL_PACKAGES:
      delattr(flags.FLAGS, name)
  for module in set(sys.modules) - known_modules:
    if module.split(".")[0] in _TOOL_PACKAGES and not module.startswith(
        ("tfbert_tools.demos", "tfbert_tools.benchmarks")):
      del sys.modules[module]


@contextlib.contextmanager
def _native_output() -> Iterator[dict]:
  """Captures what native code (TensorFlow's C++ logging) writes to file descriptors 1 and 2
  while inside, as a user's terminal would show it; the dict is filled on exit."""
  captured = {}
  sys.stdout.flush()
  sys.stderr.flush()
  with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
    saved = {1: os.dup(1), 2: os.dup(2)}
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    try:
      yield captured
    finally:
      for fd, copy in saved.items():
        os.dup2(copy, fd)
        os.close(copy)
      for name, file in (("stdout", out), ("stderr", err)):
        file.seek(0)
        captured[name] = file.read().decode("utf-8", "replace")


def _set_aside_other_flags() -> list:
  """Unregisters the flags that modules other than absl's defined in this process (Model
  Garden's `create_pretraining_data`, imported by a peer test, defines `max_seq_length` and
  `do_lower_case` at import), so that a tool defines its own as in a fresh process. Returns
  what `_restore_flags` registers again."""
  aside = []
  for name in list(flags.FLAGS):
    module = flags.FLAGS.find_module_defining_flag(name) or ""
    if name in flags.FLAGS and not module.startswith("absl"):
      flag = flags.FLAGS[name]
      aside.append((module, flag))
      for key in {flag.name, flag.short_name} - {None}:
        if key in flags.FLAGS:
          delattr(flags.FLAGS, key)
  return aside


def _restore_flags(aside: list) -> None:
  for module, flag in aside:
    flags.FLAGS[flag.name] = flag
    if module:
      flags.FLAGS.register_flag_by_module(module, flag)


@contextlib.contextmanager
def tool_modules() -> Iterator[None]:
  """Within: import tools and flag modules freely; after: they and their flags are gone, and
  the flags other modules had defined are back."""
  aside = _set_aside_other_flags()
  known_flags, known_modules = set(flags.FLAGS), set(sys.modules)
  try:
    yield
  finally:
    flags.FLAGS.unparse_flags()
    _forget_tools(known_flags, known_modules)
    _restore_flags(aside)


def run_tool(name: str, *args: str) -> ToolRun:
  """Runs `tools/<name>.py` with `args` (strings, as on a command line) in this process.

  Returns:
    The `ToolRun`. An uncaught exception (a bug, or `--traceback`) propagates.
  """
  root, absl_logger = logging.getLogger(), logging.getLogger("absl")
  saved_handlers, saved_level = list(root.handlers), root.level
  saved_absl_level = absl_logger.level
  saved_argv, saved_sigterm = sys.argv, signal.getsignal(signal.SIGTERM)
  stdout, stderr = io.StringIO(), io.StringIO()
  status = 0
  with tool_modules(), _native_output() as native:
    try:
      module = importlib.import_module(f"tfbert_tools.{name}")
      flags.FLAGS.unparse_flags()
      # Resetting --verbosity set absl's logger to WARNING (absl's handler is not the root
      # logger's here); a fresh process's first app.run leaves it NOTSET, following the root
      # logger, so that the library's absl INFO lines reach the tool's output.
      absl_logger.setLevel(logging.NOTSET)
      sys.argv = [module.__file__, *args]
      with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
          module.run()
        except SystemExit as done:
          status = _status(done.code)
    finally:
      sys.argv = saved_argv
      signal.signal(signal.SIGTERM, saved_sigterm)
      for handler in list(root.handlers):
        root.removeHandler(handler)
      for handler in saved_handlers:
        root.addHandler(handler)
      root.setLevel(saved_level)
  absl_logger.setLevel(saved_absl_level)  # After tool_modules' exit, which unparses again.
  return ToolRun(status, native["stdout"] + stdout.getvalue(),
                 native["stderr"] + stderr.getvalue())
