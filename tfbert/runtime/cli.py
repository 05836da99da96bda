"""What every tfbert command-line tool shares: one-line errors and a quiet start.

`run_tool(main, traceback=FLAG)` replaces `absl.app.run(main)` in `tools/*.py`:

* Expected errors (bad input, a missing or corrupt file, a full disk, a refused run
  directory, a data error surfacing from the graph, a flag file that is missing or not
  UTF-8, a word left over after the flags of a tool that takes none: `parse_flags` runs
  under the same guard as `main`) end the tool with ONE line on stderr,
  `<tool>: error: <message>`, and exit status 1; `--traceback` shows the whole trace
  instead. A message is the error's first line (TensorFlow's op errors carry a graph
  trace after it). Anything else is a bug and keeps its traceback.
* Ctrl-C ends with one line and status 130 (the shell's convention for SIGINT), at any
  time: while the tool imports TensorFlow too (`tools/__init__.py`, every tool's first
  import, handles it until `run_tool` takes over).
* SIGTERM (`kill`, a scheduler) ends the tool's `main` as Ctrl-C does: it raises
  `Terminated` there (`sigterm_unwinds`), so the cleanups Ctrl-C runs (hidden temporaries,
  a directory the tool created) run too, then one line, `<tool>: terminated`, and status
  143 (128 + 15). SIGTERM's default ended the process at once and left them behind. Inside
  training the loop's own handler takes over: it saves a checkpoint (`Preempted`, below).
* An error that carries an `exit_status` (a preempted run that saved its checkpoint:
  `tfbert.training.training_loop.Preempted`, status 75) ends with its one line and that
  status, so that a scheduler can tell "run me again" from a failure.
* Python logging (the library's, absl's, TensorFlow's) is plain: INFO lines go to stdout as
  bare messages, beside the tool's own progress; WARNING and worse go to stderr as
  `WARNING: message`. absl's default handler would prefix every line with a level, a
  timestamp, a thread id and a source line, on stderr, among the progress lines.
* A refusal reads in the tool's words: a config's "<Class>Config: " prefix is dropped and
  each of the tool's own snake_case flags the message names is written as the user types
  it, `--max_seq_length` (`in_flag_words`; `flags.common_flags.show_in_help` tells the
  module which flags the running tool has).
* `config_from_values` builds a tool's typed config from its parsed flags by name (one name
  per setting: a config field and its flag are spelt the same), so a tool's `main` is a few
  lines and a new setting is written in its config, its flag definition and its docs only.
* `~` in a flag's value is refused where the shell left it (`check_home_prefixes`): absl and
  `tf.io.gfile` take it literally, so `--output_dir=~/run` wrote `./~/run` and printed
  `wrote: ~/run/model.keras`, which reads as the home directory. The closing `wrote:` lines
  name absolute paths (`format_written`).
* TensorFlow probes for CUDA when it first lists devices; on a machine without an NVIDIA
  driver that prints an error-level "failed call to cuInit" line that is not an error for a
  CPU run. `quiet_device_probe` lists the devices once with stderr captured and passes on
  every other line.

The module reads no flags itself (nothing under `tfbert/` imports `absl.flags`): the tool
passes its `--traceback` flag holder.
"""

import contextlib
import dataclasses
import errno
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import typing
from typing import Any, Callable, Iterable, Mapping, Sequence

from absl import app

# Errors of bad input or environment; a TypeError, KeyError, ... is a bug and keeps its trace.
EXPECTED_ERRORS = (ValueError, OSError, FloatingPointError)
# Lines of TensorFlow's device probe that are noise on a machine with no GPU driver.
_PROBE_NOISE = ("failed call to cuInit", "Could not find cuda drivers")
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130
# The shell's status of a process ended by SIGTERM (128 + 15), as 130 is SIGINT's.
EXIT_TERMINATED = 128 + signal.SIGTERM
# The running tool's flags (`set_tool_flags`), for `in_flag_words`.
_tool_flags: frozenset[str] = frozenset()


# What an operating system error on a named file means to a user of a tool.
_OS_ERRORS = {errno.EISDIR: "a directory, where a file is expected",
              errno.ENOTDIR: "a file, where a directory is expected",
              errno.EACCES: "permission denied"}


_CUT = " (cut: --traceback shows all)"


def one_line(error: BaseException, limit: int = 600) -> str:
  """An error's message as one line of at most `limit` characters.

  TensorFlow's op errors keep their first line (a graph trace follows it); other messages
  have their lines joined (a list of missing weights stays readable). A `FileNotFoundError`
  without the file in its text gets the file appended; an operating system's error on a
  file reads "<file>: <what>", not Python's "[Errno 21] Is a directory: '<file>'".
  """
  message = getattr(error, "message", None)
  if isinstance(message, str) and message.strip():  # tf.errors.OpError
    line = _op_error_reason(message)
  elif isinstance(error, OSError) and error.filename and error.strerror and error.errno:
    line = f"{_file_of(error)}: {_OS_ERRORS.get(error.errno, error.strerror)}"
  else:
    line = " ".join(part.strip() for part in str(error).splitlines() if part.strip())
    line = line or type(error).__name__
  if isinstance(error, OSError) and error.filename and str(_file_of(error)) not in line:
    line = f"{line}: {_file_of(error)}"
  if len(line) > limit:  # The head names the problem, the tail what to do: both kept.
    keep = limit - len(" ... ") - len(_CUT)
    head = keep * 2 // 3
    line = f"{line[:head].rstrip()} ... {line[-(keep - head):].lstrip()}{_CUT}"
  return line


def _file_of(error: OSError) -> str:
  """The file an operating system's error is about: its `filename`, but for a rename of a
  tfbert staging path (`tfbert.runtime.atomic.is_temporary`) onto an output, the output
  (`filename2`): the user named the output, never the staging path."""
  if error.filename2:
    from tfbert.runtime import atomic  # pylint: disable=import-outside-toplevel  # TF: late.
    # A staging file, or a file in a staging directory (`atomic.file_set`).
    if any(atomic.is_temporary(part) for part in str(error.filename).split(os.sep)):
      return error.filename2
  return error.filename


def _op_error_reason(message: str) -> str:
  """The line of a TensorFlow op error's message that states the reason.

  An error raised inside a `tf.function` reads "Graph execution error:", then "Detected at
  node N defined at (most recent call last):" with indented Python frames (once per
  function level), then the reason ("indices[0] = 7 is not in [0, 4)"), then the node
  (`[[{{node N}}]]`); several errors read "k root error(s) found." and "(0) CODE:  reason"
  lines. An eager op error's reason is its first line.
  """
  lines = message.strip().splitlines()
  if lines[0].strip() != "Graph execution error:":
    return lines[0]
  for line in lines[1:]:
    text = line.strip()
    numbered = re.match(r"\(\d+\) [A-Z_]+:\s*(.*)", text)
    if numbered and numbered.group(1):
      return numbered.group(1)
    if (text and not line[0].isspace() and not text.startswith("Detected at node")
        and not text.endswith("root error(s) found.")):
      return text
  return lines[0]


def _is_expected(error: BaseException) -> bool:
  if isinstance(error, EXPECTED_ERRORS):
    return True
  try:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
  except ImportError:
    return False
  return isinstance(error, tf.errors.OpError)


def quiet_device_probe() -> None:
  """Lists TensorFlow's devices once, dropping the no-GPU-driver noise from stderr."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      tf.config.list_physical_devices()
    finally:
      os.dup2(saved, 2)
      os.close(saved)
    captured.seek(0)
    for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True):
      if not any(noise in line for noise in _PROBE_NOISE):
        sys.stderr.write(line)
  sys.stderr.flush()


class _Below(logging.Filter):
  """Passes records below a level."""

  def __init__(self, level: int):
    super().__init__()
    self.level = level

  def filter(self, record: logging.LogRecord) -> bool:
    return record.levelno < self.level


def plain_logging() -> None:
  """Routes Python logging as the module says (replacing the root logger's handlers)."""
  root = logging.getLogger()
  for handler in list(root.handlers):
    root.removeHandler(handler)
  info = logging.StreamHandler(sys.stdout)
  info.addFilter(_Below(logging.WARNING))
  info.setFormatter(logging.Formatter("%(message)s"))
  problems = logging.StreamHandler(sys.stderr)
  problems.setLevel(logging.WARNING)
  problems.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
  root.addHandler(info)
  root.addHandler(problems)
  root.setLevel(logging.INFO)


def set_tool_flags(names: Iterable[str]) -> None:
  """Tells the module the running tool's flag names (`flags.common_flags.show_in_help`)."""
  global _tool_flags
  _tool_flags = frozenset(names)


def in_flag_words(line: str, flag_names: Iterable[str] = None) -> str:
  """`line` (a refusal) in a tool user's words.

  A config's "<Class>Config: " prefix goes (the user set flags, not a class), and each name
  of `flag_names` (default: the running tool's, `set_tool_flags`) that holds an underscore
  and stands alone in `line` becomes `--name`: "max_seq_length (2) must be >= 5" reads
  "--max_seq_length (2) must be >= 5". A name inside a path, a file name, quotes or an
  existing `--name` is left as is, and so is a one-word flag (`--task`, `--output`), which
  reads as English.
  """
  line = re.sub(r"^[A-Z]\w*Config: ", "", line)
  names = sorted((n for n in (_tool_flags if flag_names is None else flag_names) if "_" in n),
                 key=len, reverse=True)
  if not names:
    return line
  alone = (r"(?<![\w./\\'\"=-])(" + "|".join(map(re.escape, names)) +
           r")(?![\w'\"/\\-]|\.\w)")
  return re.sub(alone, r"--\1", line)


class Terminated(BaseException):
  """SIGTERM arrived inside `sigterm_unwinds`. Not an `Exception` (as `KeyboardInterrupt`
  is not): it unwinds through every cleanup (`except BaseException`, `finally`) untouched."""


@contextlib.contextmanager
def sigterm_unwinds():
  """Within: SIGTERM raises `Terminated` in the main thread, as Ctrl-C raises
  `KeyboardInterrupt`, so the temporaries and a directory the tool created are removed on
  the way out. A second SIGTERM while that unwinds is ignored (the cleanups are short).
  Elsewhere than the main thread: a no-op. The previous handler is back on exit."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  def handle(signum, frame):
    del signum, frame
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()

  previous = signal.signal(signal.SIGTERM, handle)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)


def _end_with_one_line(error: BaseException, show_trace: bool, tool: str) -> None:
  """Ends the tool for `error` as the module says (one line, its status), or re-raises it:
  `--traceback` asked for the trace, or the error is a bug. Called inside an `except`."""
  for kind, word, status in ((KeyboardInterrupt, "interrupted", EXIT_INTERRUPTED),
                             (Terminated, "terminated", EXIT_TERMINATED)):
    if isinstance(error, kind):
      if show_trace:
        raise error
      print(f"{tool}: {word}", file=sys.stderr, flush=True)
      sys.exit(status)
  status = getattr(error, "exit_status", None)
  if isinstance(status, int) and not show_trace:
    print(f"{tool}: {in_flag_words(one_line(error))}", file=sys.stderr, flush=True)
    sys.exit(status)
  if show_trace or not _is_expected(error):
    raise error
  print(f"{tool}: error: {in_flag_words(one_line(error))}", file=sys.stderr, flush=True)
  sys.exit(EXIT_ERROR)


def guarded(main: Callable[[Sequence[str]], object], traceback, tool: str):
  """`main` wrapped so that expected errors end the tool with one line (see the module)."""

  def wrapped(argv):
    show_trace = bool(traceback.value)
    plain_logging()
    try:
      with sigterm_unwinds():
        return main(argv)
    except (KeyboardInterrupt, Terminated, Exception) as error:  # pylint: disable=broad-except
      _end_with_one_line(error, show_trace, tool)

  return wrapped


def format_written(paths) -> str:
  """The last lines of a tool: what it wrote where (`wrote:` and a path per line), each
  path absolute (a URL as is): the place written, whatever the current directory."""
  from tfbert.runtime import files  # pylint: disable=import-outside-toplevel
  paths = [files.absolute(p) for p in paths]
  return "wrote:" + "".join(f"\n  {p}" for p in paths) if paths else "wrote nothing new"


def run_tool(main: Callable[[Sequence[str]], object], traceback,
             takes_arguments: bool = False) -> None:
  """`absl.app.run(main)` with one-line errors, flag parsing included.

  Flag files (`--flagfile=F`, nested ones too) are read by tfbert (`read_flagfiles`), so a
  file that is not UTF-8 or is missing ends the tool with one line naming it, like any
  error of `main`. A tool that takes no arguments refuses any word left over after the
  flags (`--do_whole_word_mask false` left `false` unread and ran with the flag true).

  Args:
    main: the tool's `main(argv)`.
    traceback: the tool's `--traceback` flag holder (`.value` read after parsing).
    takes_arguments: whether the tool reads words after its flags (`argv[1:]` of `main`:
      `evaluate_squad.py DATASET PREDICTIONS`); if not, a leftover word is refused.
  """
  tool = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "tfbert"
  try:  # A Ctrl-C outside `parse_flags` and `main` (the device probe, absl's own steps).
    _take_over_interrupts()
    # absl's --help starts with the __main__ module's docstring: the tool's own under
    # `python tools/x.py`, but an installed `tfbert-x` command's __main__ is pip's wrapper,
    # which has none. Lend it the tool's.
    launcher = sys.modules.get("__main__")
    if launcher is not None and not getattr(launcher, "__doc__", None):
      launcher.__doc__ = sys.modules[main.__module__].__doc__
    quiet_device_probe()  # Before app.run, whose init callbacks would probe noisily.
    app.run(guarded(main, traceback, tool), argv=list(sys.argv),
            flags_parser=lambda argv: parse_flags(argv, tool, takes_arguments))
  except KeyboardInterrupt as error:
    _end_with_one_line(error, _asks_for_trace(sys.argv), tool)


def _take_over_interrupts() -> None:
  """Puts Python's own SIGINT handler (`KeyboardInterrupt`, which the guards turn into one
  line) back in place of the one a tool's first import installed for its start
  (`tools/__init__.py`: its handler carries `ends_a_starting_tool`); any other is kept."""
  handler = signal.getsignal(signal.SIGINT)
  if (getattr(handler, "ends_a_starting_tool", False)
      and threading.current_thread() is threading.main_thread()):
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _asks_for_trace(argv: Sequence[str]) -> bool:
  """Whether the command line sets --traceback (read before absl has parsed it)."""
  return any(arg.lstrip("-") in ("traceback", "traceback=true", "traceback=1", "traceback=t")
             for arg in argv if arg.startswith("-"))


def parse_flags(argv: Sequence[str], tool: str, takes_arguments: bool = False) -> list[str]:
  """absl's flag parsing (`app.parse_flags_with_usage`) under the tools' one-line errors:
  flag files first and read by tfbert (`flagfiles_first`, `read_flagfiles`), and leftover
  words refused (`check_no_arguments`) unless the tool `takes_arguments`.

  Returns:
    What absl leaves for `main`: the program name, then the words after the flags.
  """
  try:
    check_control_characters(argv)
    check_home_prefixes(argv)
    origins = {}
    expanded = read_flagfiles(flagfiles_first(argv), origins)
    check_flagfiles_known(expanded, origins)
  except (KeyboardInterrupt, Exception) as error:  # pylint: disable=broad-except
    _end_with_one_line(error, _asks_for_trace(argv), tool)
  left = app.parse_flags_with_usage(expanded)
  if not takes_arguments:
    try:
      check_no_arguments(left[1:], expanded)
    except ValueError as error:
      _end_with_one_line(error, _asks_for_trace(expanded), tool)
  return left


# What absl's boolean flags take as values (`--flag=false`), lower case, by the value.
_TRUE_WORDS = ("true", "t", "1", "yes", "y", "on")
_FALSE_WORDS = ("false", "f", "0", "no", "n", "off")


def _boolean_before(word: str, argv: Sequence[str]) -> typing.Optional[tuple[str, str]]:
  """(the boolean flag as written, its name) right before truth word `word` in `argv`
  (`--do_whole_word_mask false`: absl read the flag as true and left the word); else None."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  if word.lower() not in _TRUE_WORDS + _FALSE_WORDS:
    return None
  for before, arg in zip(argv, argv[1:]):
    if arg != word or not before.startswith("-") or "=" in before:
      continue
    written = before.lstrip("-")
    for name in (written, written[2:] if written.startswith("no") else ""):
      if name and name in flags.FLAGS and flags.FLAGS[name].boolean:
        return before, name
  return None


def check_no_arguments(arguments: Sequence[str], argv: Sequence[str]) -> None:
  """Refuses words left over after the flags, for a tool that takes none.

  Args:
    arguments: what absl left unparsed (the program name excluded).
    argv: the command line they came from, flag files read in (to find a boolean flag
      before a truth word: `--do_whole_word_mask false`).

  Raises:
    ValueError: naming the words; for a truth word after a boolean flag, how to write it.
  """
  for word in arguments:
    found = _boolean_before(word, argv)
    if found:
      written, name = found
      value = word.lower() in _TRUE_WORDS
      raise ValueError(f"unexpected argument {word!r} after the boolean flag {written}, which "
                       f"takes no separate value: use --{name}={str(value).lower()} or "
                       f"--{'' if value else 'no'}{name}")
  if arguments:
    listed = ", ".join(repr(word) for word in arguments)
    raise ValueError(f"unexpected argument{'s' if len(arguments) > 1 else ''} {listed}: this "
                     "tool takes flags only (write --name=value)")


_FLAGFILE = "--flagfile="
_FLAGFILE_NAMES = ("--flagfile", "-flagfile")


def flagfiles_first(argv: Sequence[str]) -> list[str]:
  """`argv` with its flag files moved before every other flag: the command line wins.

  absl applies flags in order, a flag file's where it stands, so the later value wins:
  `--output_dir=NEW --flagfile=OLD/flags.txt` replayed OLD's `--output_dir` and replaced the
  old run's export. A flag given on the command line is meant to override the file it
  replays, whatever its position; flag files keep their own order among themselves.

  Args:
    argv: the command line, program name first (`--flagfile=F` or `--flagfile F`).

  Returns:
    The program name, the flag file arguments, then the rest in their order (`--` and what
    follows it stay last).

  Raises:
    ValueError: a `--flagfile` without its file (last, or before a flag or `--`): moved
      first, it would take the next flag for its file.
  """
  argv = list(argv)
  head, rest = argv[:1], argv[1:]
  tail = []
  if "--" in rest:
    at = rest.index("--")
    rest, tail = rest[:at], rest[at:]
  files_, others = [], []
  i = 0
  while i < len(rest):
    arg = rest[i]
    if arg in _FLAGFILE_NAMES:
      _check_has_file(rest, i)
      files_ += rest[i:i + 2]
      i += 2
      continue
    (files_ if arg.split("=", 1)[0] in _FLAGFILE_NAMES else others).append(arg)
    i += 1
  return head + files_ + others + tail


def _check_has_file(argv: Sequence[str], i: int) -> None:
  """Refuses `argv[i]`, a bare `--flagfile`, when no file follows it: it is last, or a flag
  (or `--`) follows, which it would take for its file (`--flagfile=--odd` names such a
  file)."""
  if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
    raise ValueError(f"{argv[i]} needs a value ({argv[i]}=FILE)")


def _space_form(line: str) -> typing.Optional[tuple[str, str]]:
  """(flag, value) of a flag file line written `--flag value`, else None. absl reads a line
  as one argument: the space would make the value part of the flag's name."""
  if not line.startswith("-") or not any(c.isspace() for c in line.split("=", 1)[0]):
    return None
  flag, value = line.split(None, 1)
  return flag, value


def _flagfile_path(arg: str) -> str:
  """The file of a `--flagfile=F` / `-flagfile=F` argument, as absl reads it (`~` expanded)."""
  return os.path.expanduser(arg.split("=", 1)[1].strip())


def read_flagfiles(argv: Sequence[str], origins: typing.Optional[dict] = None) -> list[str]:
  """`argv` with every flag file read in where it stands, as absl would, but by tfbert.

  absl opened flag files with Python's `open` in the locale's encoding: a Latin-1 "é" in a
  comment ended the tool with a `UnicodeDecodeError` traceback, a UTF-8 byte-order mark
  (Windows editors) was read into the first line (its flag was lost), and a URL
  (`gs://run/flags.txt`) was no file at all. Each flag file, nested `--flagfile=` lines
  included, is read with `tfbert.runtime.files` (local or URL) as UTF-8, a byte-order mark
  dropped; absl's rules otherwise: a line is one argument, stripped; blank lines and
  comments (`#`, `//`) are skipped; nothing after `--` is read. A flag file line that absl
  would misread is refused, naming `file:line`: `--` (it would end the flags there, and
  every flag after the file, the command line's included, would be a leftover word),
  `--flag value` (one argument, the value part of the flag's name: `--flag=value`), and a
  line holding a control character (`--do_train<NUL>` was "Unknown command line flag
  'do_train'. Did you mean: do_train ?").

  Args:
    argv: the command line, program name first (`--flagfile=F` or `--flagfile F`).
    origins: if given, filled with {index in the result: the flag file its line came from}.

  Returns:
    The command line with no flag file left in it.

  Raises:
    ValueError: a flag file that is missing, unreadable or not UTF-8 (naming `file:line`),
      that includes itself, or holds a line absl would misread (naming `file:line`); a
      `--flagfile` without its file.
  """
  # Imported here: `cli` itself does not import TensorFlow (tfbert.runtime.files does).
  from tfbert.runtime import files  # pylint: disable=import-outside-toplevel

  def lines_of(path: str, including: tuple) -> list[str]:
    if not path:
      return []  # absl's rule for `--flagfile=`.
    if path in including:
      raise ValueError(f"--flagfile {path} includes itself (through "
                       f"{' -> '.join(including)})")
    try:
      text = files.decode_utf8(files.read_bytes(path), path)
    except OSError as error:
      raise ValueError(f"--flagfile {path}: "
                       f"{_OS_ERRORS.get(error.errno, error.strerror or str(error))}") from None
    except ValueError as error:  # Not UTF-8: `decode_utf8` names path:line.
      raise ValueError(f"--flagfile {error}") from None
    read = []
    # Lines end as absl's (Python's text mode) do: not at a form feed or another control
    # character `str.splitlines` breaks at, which stays in its line and is refused there.
    for number, line in enumerate(re.split(r"\r\n|\r|\n", text), 1):
      line = line.strip()
      if not line or line.startswith(("#", "//")):
        continue
      _check_line(line, f"{path}:{number}")
      if line.split("=", 1)[0] in _FLAGFILE_NAMES:
        read += lines_of(_flagfile_path(line), including + (path,))
      else:
        read.append(line)
    return read

  argv = list(argv)
  origins = {} if origins is None else origins
  expanded, i = argv[:1], 1

  def add_file(path: str) -> None:
    for line in lines_of(path, ()):
      origins[len(expanded)] = path
      expanded.append(line)

  while i < len(argv):
    arg = argv[i]
    if arg == "--":  # What follows is not for absl.
      expanded += argv[i:]
      break
    if arg in _FLAGFILE_NAMES:
      _check_has_file(argv, i)
      add_file(os.path.expanduser(argv[i + 1]))
      i += 2
      continue
    if arg.split("=", 1)[0] in _FLAGFILE_NAMES and "=" in arg:
      add_file(_flagfile_path(arg))
    else:
      expanded.append(arg)
    i += 1
  return expanded


# The first line of a run's flags.txt (`flags.common_flags.flagfile`), before the tool's name.
WRITTEN_BY = "# flags of "


def _writer(path: str) -> typing.Optional[str]:
  """The tool named on a flag file's `WRITTEN_BY` line (a run's flags.txt), else None."""
  from tfbert.runtime import files  # pylint: disable=import-outside-toplevel
  try:
    first = files.decode_utf8(files.read_bytes(path), path).split("\n", 1)[0].strip()
  except (OSError, ValueError):
    return None
  if not first.startswith(WRITTEN_BY):
    return None
  return first[len(WRITTEN_BY):].strip() or None


def check_flagfiles_known(expanded: Sequence[str], origins: Mapping[int, str]) -> None:
  """Refuses flags from a flag file that the running tool does not define, naming the file
  and them, and the tool that wrote the file when it is a run's flags.txt (absl's "Unknown
  command line flag 'task_name'" named neither: `run_ner --flagfile=<a classifier run>/
  flags.txt`). An unknown flag typed on the command line is left to absl, which suggests
  the nearest name; `--undefok` is left to absl too.

  Args:
    expanded: the command line with its flag files read in (`read_flagfiles`).
    origins: {index in `expanded`: the flag file the line came from}.

  Raises:
    ValueError: naming the flag file, its unknown flags and the tool that wrote it.
  """
  from absl import flags  # pylint: disable=import-outside-toplevel
  if any(arg.lstrip("-").startswith("undefok") for arg in expanded[1:]):
    return
  unknown = {}  # file -> its unknown flag names, in order
  for index, path in origins.items():
    arg = expanded[index]
    if not arg.startswith("-"):
      continue
    name = arg.lstrip("-").split("=", 1)[0]
    known = name in flags.FLAGS or (name.startswith("no") and name[2:] in flags.FLAGS
                                    and flags.FLAGS[name[2:]].boolean)
    if not known and name not in ("flagfile", "undefok"):
      unknown.setdefault(path, []).append(f"--{name}")
  for path, names in unknown.items():
    writer = _writer(path)
    whose = (f": the file holds the flags of a {writer} run (replay it with {writer})"
             if writer else " (a flag file of another tool?)")
    raise ValueError(f"--flagfile {path} sets {', '.join(names)}, which this tool does not "
                     f"have{whose}")


def _control_character(text: str) -> typing.Optional[str]:
  """The first control character in `text` as `U+XXXX`, or None. A tab is none: it separates
  a `--flag value` line, refused as such (`_space_form`), and may be a value's own."""
  for character in text:
    code = ord(character)
    if character != "\t" and (code < 0x20 or 0x7F <= code <= 0x9F):
      return f"U+{code:04X}"
  return None


def _control_problem(text: str) -> typing.Optional[str]:
  found = _control_character(text)
  if found is None:
    return None
  return (f"{text!r} holds the control character {found}, which no flag name or value "
          "holds (a terminal does not show it: absl named the flag unknown, as if spelt "
          "right); remove it")


def check_control_characters(argv: Sequence[str]) -> None:
  """Refuses a command line word holding a control character (a NUL, an escape, a newline;
  a tab is allowed), naming the word and the character as U+XXXX. A flag file's lines are
  checked the same way, by file:line (`read_flagfiles`).

  Raises:
    ValueError: naming the argument and the character.
  """
  for arg in list(argv)[1:]:
    problem = _control_problem(arg)
    if problem:
      raise ValueError(f"argument {problem}")


def _check_line(line: str, where: str) -> None:
  """Refuses a flag file line (stripped, at `where`: file:line) that absl would misread,
  that holds a control character (`check_control_characters`), or whose `~` no shell
  expanded (`check_home_prefixes`)."""
  problem = (_control_problem(line)
             or _home_prefix_problem(line, "", "in a flag file (absl reads a line as written)"))
  if problem:
    raise ValueError(f"{where}: {problem}")
  if line == "--":
    raise ValueError(f"{where}: a '--' line would end the flags there: every flag after it, "
                     "the command line's included, would be read as a leftover word; remove "
                     "the line")
  if line in _FLAGFILE_NAMES:
    raise ValueError(f"{where}: {line} without its file (write {line}=FILE on one line)")
  spaced = _space_form(line)
  if spaced:
    flag, value = spaced
    raise ValueError(f"{where}: {line!r} is read as one argument, the value part of the "
                     f"flag's name: write {flag}={value}")
  quoted = re.fullmatch(r"(--[\w.-]+)=([\"'])(.*)\2", line)
  if quoted:  # `--train_file="a.tsv"`: "file not found: "a.tsv"" for a file that exists.
    flag, _, value = quoted.groups()
    raise ValueError(f"{where}: {line!r}: a flag file is read without a shell, so the quotes "
                     f"would be part of the value; write {flag}={value}")


def check_home_prefixes(argv: Sequence[str]) -> None:
  """Refuses a command line word whose leading `~` (or `~user`) the shell left unexpanded.

  The one rule for `~` in every path of every tool: never expanded by tfbert, as absl, TF's
  `tf.io.gfile` and google-research/bert do not, and refused where it would name a home
  directory (`tfbert.runtime.files.home_expansion`): a shell expands `~` only at the start
  of an unquoted word, not after `--output_dir=`, so `--output_dir=~/run` reached the tool as
  written and was read as a directory `~` below the current one (the run went to
  `./~/run`; an input "did not exist"). Expanding instead would need every path flag known
  (flags have no path kind: a flag left out would keep the silent misreading) and would
  silently turn a quoted `'~/x'`, meant literally, into the home directory. Refusing needs
  no list of path flags and is never silently wrong: any flag's value (each element of a
  comma-separated list), a value after a flag (`--output_dir '~/run'`) and a word after the
  flags are checked the same way, and a flag file's lines too (`read_flagfiles`).
  `./~/run` names a directory called `~`. `--flagfile` keeps absl's own rule (its file's
  `~` is expanded). The Python API refuses such a path the same way
  (`tfbert.runtime.files.as_path`).

  Raises:
    ValueError: naming the flag and its value, the path a shell would have meant, and how to
      write it.
  """
  argv = list(argv)
  for previous, arg in zip(argv, argv[1:]):
    problem = _home_prefix_problem(
        arg, previous, "by the shell (it expands only an unquoted word's leading ~)")
    if problem:
      raise ValueError(problem)


def _takes_value(flag: str) -> bool:
  """Whether `flag` (`--name`, no value) is a defined flag that takes the next word as its
  value (not a boolean)."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  name = flag.lstrip("-")
  return (flag.startswith("-") and flag != "--" and name in flags.FLAGS
          and not flags.FLAGS[name].boolean)


def _home_prefix_problem(arg: str, previous: str, how: str) -> typing.Optional[str]:
  """Why argument `arg` (after `previous`) holds a `~` left unexpanded `how`, or None."""
  from tfbert.runtime import files  # pylint: disable=import-outside-toplevel
  if arg.startswith("-") and "=" in arg:
    flag, value = arg.split("=", 1)
    if flag in _FLAGFILE_NAMES:
      return None  # absl's rule: a flag file's `~` is expanded.
    shown = f"{flag}="
  elif previous in _FLAGFILE_NAMES:
    return None
  elif _takes_value(previous):
    value, shown = arg, f"{previous} "
  else:
    value, shown = arg, ""
  parts = value.split(",")
  for i, part in enumerate(parts):
    expanded = files.home_expansion(part)
    if expanded is None:
      continue
    mine = ",".join(parts[:i] + [expanded] + parts[i + 1:])
    local = ",".join(parts[:i] + ["./" + part] + parts[i + 1:])
    return (f"{shown}{value}: '~' was not expanded {how}, and tfbert, like absl and "
            f"tf.io.gfile, takes it literally: a directory named '~' below {os.getcwd()}; "
            f"write {shown}{mine} (or {shown}{local} for such a directory)")
  return None


def config_from_values(config_class: type, values: Mapping[str, Any],
                       converters: Mapping[str, Callable[[Any], Any]] = None, **explicit):
  """Builds the dataclass `config_class` from settings found by name.

  Each field takes, first that applies: `explicit[name]`; for a field whose type is itself a
  dataclass (e.g. `SquadRunConfig.features`), that dataclass built the same way from
  `values`; `values[name]`, through `converters[name]` if there is one (at any depth); its
  default.

  Args:
    config_class: a dataclass type.
    values: setting values by name, e.g. a tool's parsed flags (`flags.common_flags.values`).
    converters: functions from a value as given to the field's value, by name (e.g.
      `clip_norm`: 0 -> None).
    **explicit: values of top-level fields, used as they are.

  Returns:
    the `config_class` instance (its own checks run).

  Raises:
    TypeError: for an explicit name that is not a field of `config_class`.
    ValueError: for a field without a default that nothing sets, naming it.
  """
  converters = converters or {}
  fields = {field.name: field for field in dataclasses.fields(config_class)}
  unknown = sorted(set(explicit) - set(fields))
  if unknown:
    raise TypeError(f"{config_class.__name__} has no field {', '.join(unknown)}")
  hints = typing.get_type_hints(config_class)
  kwargs = {}
  for name, field in fields.items():
    if name in explicit:
      kwargs[name] = explicit[name]
    elif dataclasses.is_dataclass(hints[name]):
      kwargs[name] = config_from_values(hints[name], values, converters)
    elif name in values:
      kwargs[name] = converters.get(name, lambda value: value)(values[name])
    elif (field.default is dataclasses.MISSING
          and field.default_factory is dataclasses.MISSING):
      raise ValueError(f"{config_class.__name__}.{name}: no value given and no default")
  return config_class(**kwargs)


def zero_is_none(value):
  """A flag's 0 (or 0.0) as None: the command line's spelling of "off" for an optional
  setting such as `clip_norm`."""
  return value or None


def setting_names(config_class: type, explicit: Sequence[str] = ()) -> set[str]:
  """The names `config_from_values` reads for `config_class`: its fields', nested ones'
  included (a dataclass-typed field's own name is not read unless it is in `explicit`,
  the top-level fields the caller gives)."""
  hints = typing.get_type_hints(config_class)
  names = set()
  for field in dataclasses.fields(config_class):
    if dataclasses.is_dataclass(hints[field.name]) and field.name not in explicit:
      names |= setting_names(hints[field.name])
    else:
      names.add(field.name)
  return names


def check_flags_read(reads: Mapping[str, Sequence[str]], choice: str, chosen: str,
                     given: typing.Iterable[str]) -> None:
  """Refuses, before any work, the flags `given` on the command line that the chosen
  `--{choice}={chosen}` does not read: they would be ignored without a word (`align
  --task=pretraining --train_file=...` trained on its own records). One wording for every
  tool whose flags depend on a choice (benchmark's --benchmark, align's --task).

  Args:
    reads: {choice value: names of the flags it reads, among those that depend on the
      choice}; a flag in no entry is read by every choice and never refused.
    choice: the choosing flag's name, e.g. "benchmark".
    chosen: its value.
    given: names of the flags the user set (the tool decides what counts: present on the
      command line, or present at a value other than the default).

  Raises:
    ValueError: naming each stray flag with the choices that read it (in brackets) and the
      chosen one, e.g. "--train_file (squad, classifier): not read by --task=pretraining ...".
  """
  given = set(given)
  stray = sorted({name for names in reads.values() for name in names
                  if name in given and name not in reads[chosen]})
  if not stray:
    return
  owners = [f"--{name} ({', '.join(c for c, names in reads.items() if name in names)})"
            for name in stray]
  them, they = ("them", "they belong") if len(stray) > 1 else ("it", "it belongs")
  raise ValueError(f"{', '.join(owners)}: not read by --{choice}={chosen} (the {choice}s "
                   f"that read {them} in brackets): leave {them} out or choose a {choice} "
                   f"{they} to")

