"""The command-line tools (thin mains) and the packages only they use.

Importing this package first, as every tool does, ends a Ctrl-C while the tool starts as a
later Ctrl-C ends: one line, `<tool>: interrupted`, and exit status 130.
`tfbert.runtime.cli.run_tool` does so, but only once it runs: a tool first spends seconds
importing TensorFlow, and a Ctrl-C then ended it with a Python traceback
(`KeyboardInterrupt` at the tool's import line). This package (stdlib only: instant)
installs `on_interrupt` as the SIGINT handler until `run_tool` takes over (it puts Python's
own back, under its guard). The handler prints the same line and raises `SystemExit(130)`:
nothing is written while a tool imports, so nothing needs the cleanup a `KeyboardInterrupt`
gets under the guard.

Installed only when this process is a tool: `python tools/<tool>.py`, `python -m
tfbert_tools.<tool>` or an installed `tfbert-<tool>` command (whose wrapper imports this
package before the tool); a test importing a tool keeps its own Ctrl-C. Not under
`--traceback`, which asks for the trace.
"""

import os
import signal
import sys
import threading

EXIT_INTERRUPTED = 130  # The shell's status for SIGINT, as `tfbert.runtime.cli`'s.


def _tool() -> str:
  """The tool's name as `tfbert.runtime.cli.run_tool` prints it."""
  return os.path.splitext(os.path.basename(sys.argv[0]))[0] or "tfbert"


def _is_tool_process() -> bool:
  """Whether this process runs a tool: its program is a file of this directory or a
  `tfbert-*` command, or `python -m` imports this package to run a module of it (the
  program reads "-m" until the module is found)."""
  program = sys.argv[0] if sys.argv else ""
  here = os.path.dirname(os.path.realpath(__file__))
  return bool(program) and (program == "-m"
                            or os.path.dirname(os.path.realpath(program)) == here
                            or os.path.basename(program).startswith("tfbert-"))


def on_interrupt(signum, frame) -> None:
  """SIGINT while the tool starts: one line, then `SystemExit(130)` (quiet: a second Ctrl-C
  while that unwinds prints nothing more)."""
  del signum, frame
  signal.signal(signal.SIGINT, _quiet_exit)
  print(f"{_tool()}: interrupted", file=sys.stderr, flush=True)
  raise SystemExit(EXIT_INTERRUPTED)


def _quiet_exit(signum, frame) -> None:
  del signum, frame
  raise SystemExit(EXIT_INTERRUPTED)


# `run_tool` replaces only a handler that says it is this one.
on_interrupt.ends_a_starting_tool = True
_quiet_exit.ends_a_starting_tool = True



def _asks_for_trace() -> bool:
  """Whether the command line sets --traceback (as `tfbert.runtime.cli` reads it)."""
  return any(arg.lstrip("-") in ("traceback", "traceback=true", "traceback=1", "traceback=t")
             for arg in sys.argv[1:] if arg.startswith("-"))


if (_is_tool_process() and not _asks_for_trace()
    and threading.current_thread() is threading.main_thread()
    and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
  signal.signal(signal.SIGINT, on_interrupt)
