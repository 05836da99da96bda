"""What every tfbert command-line tool shares: one-line errors and a quiet start.

`run_tool(main, traceback=FLAG)` replaces `absl.app.run(main)` in `tools/*.py`:

* Expected errors (bad input, a missing or corrupt file, a full disk, a refused run
  directory, a data error surfacing from the graph) end the tool with ONE line on stderr,
  `<tool>: error: <message>`, and exit status 1; `--traceback` shows the whole trace
  instead. A message is the error's first line (TensorFlow's op errors carry a graph
  trace after it). Anything else is a bug and keeps its traceback.
* Ctrl-C ends with one line and status 130 (the shell's convention for SIGINT).
* An error that carries an `exit_status` (a preempted run that saved its checkpoint:
  `tfbert.training.training_loop.Preempted`, status 75) ends with its one line and that
  status, so that a scheduler can tell "run me again" from a failure.
* Python logging (the library's, absl's, TensorFlow's) is plain: INFO lines go to stdout as
  bare messages, beside the tool's own progress; WARNING and worse go to stderr as
  `WARNING: message`. absl's default handler would prefix every line with a level, a
  timestamp, a thread id and a source line, on stderr, among the progress lines.
* `config_from_values` builds a tool's typed config from its parsed flags by name (one name
  per setting: a config field and its flag are spelt the same), so a tool's `main` is a few
  lines and a new setting is written in its config, its flag definition and its docs only.
* TensorFlow probes for CUDA when it first lists devices; on a machine without an NVIDIA
  driver that prints an error-level "failed call to cuInit" line that is not an error for a
  CPU run. `quiet_device_probe` lists the devices once with stderr captured and passes on
  every other line.

The module reads no flags itself (nothing under `tfbert/` imports `absl.flags`): the tool
passes its `--traceback` flag holder.
"""

import dataclasses
import errno
import logging
import os
import re
import sys
import tempfile
import typing
from typing import Any, Callable, Mapping, Sequence

from absl import app

# Errors of bad input or environment; a TypeError, KeyError, ... is a bug and keeps its trace.
EXPECTED_ERRORS = (ValueError, OSError, FloatingPointError)
# Lines of TensorFlow's device probe that are noise on a machine with no GPU driver.
_PROBE_NOISE = ("failed call to cuInit", "Could not find cuda drivers")
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


# What an operating system error on a named file means to a user of a tool.
_OS_ERRORS = {errno.EISDIR: "a directory, where a file is expected",
              errno.ENOTDIR: "a file, where a directory is expected",
              errno.EACCES: "permission denied"}


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
    line = f"{error.filename}: {_OS_ERRORS.get(error.errno, error.strerror)}"
  else:
    line = " ".join(part.strip() for part in str(error).splitlines() if part.strip())
    line = line or type(error).__name__
  if isinstance(error, OSError) and error.filename and str(error.filename) not in line:
    line = f"{line}: {error.filename}"
  if len(line) > limit:
    line = line[:limit - 40].rstrip() + " ... (--traceback shows all)"
  return line


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


def guarded(main: Callable[[Sequence[str]], object], traceback, tool: str):
  """`main` wrapped so that expected errors end the tool with one line (see the module)."""

  def wrapped(argv):
    show_trace = bool(traceback.value)
    plain_logging()
    try:
      return main(argv)
    except KeyboardInterrupt:
      if show_trace:
        raise
      print(f"{tool}: interrupted", file=sys.stderr, flush=True)
      sys.exit(EXIT_INTERRUPTED)
    except Exception as error:  # pylint: disable=broad-except
      status = getattr(error, "exit_status", None)
      if isinstance(status, int) and not show_trace:
        print(f"{tool}: {one_line(error)}", file=sys.stderr, flush=True)
        sys.exit(status)
      if show_trace or not _is_expected(error):
        raise
      print(f"{tool}: error: {one_line(error)}", file=sys.stderr, flush=True)
      sys.exit(EXIT_ERROR)

  return wrapped


def format_written(paths) -> str:
  """The last lines of a tool: what it wrote where (`wrote:` and a path per line)."""
  paths = list(paths)
  return "wrote:" + "".join(f"\n  {p}" for p in paths) if paths else "wrote nothing new"


def run_tool(main: Callable[[Sequence[str]], object], traceback) -> None:
  """`absl.app.run(main)` with one-line errors.

  Args:
    main: the tool's `main(argv)`.
    traceback: the tool's `--traceback` flag holder (`.value` read after parsing).
  """
  tool = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "tfbert"
  # absl's --help starts with the __main__ module's docstring: the tool's own under
  # `python tools/x.py`, but an installed `tfbert-x` command's __main__ is pip's wrapper,
  # which has none. Lend it the tool's.
  launcher = sys.modules.get("__main__")
  if launcher is not None and not getattr(launcher, "__doc__", None):
    launcher.__doc__ = sys.modules[main.__module__].__doc__
  quiet_device_probe()  # Before app.run, whose init callbacks would probe noisily.
  app.run(guarded(main, traceback, tool), argv=flagfiles_first(local_flagfiles(sys.argv)))


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
    if arg in _FLAGFILE_NAMES and i + 1 < len(rest):
      files_ += rest[i:i + 2]
      i += 2
      continue
    (files_ if arg.split("=", 1)[0] in _FLAGFILE_NAMES else others).append(arg)
    i += 1
  return head + files_ + others + tail


_BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark, which Windows editors write first.


def _needs_copy(path: str) -> bool:
  """Whether absl cannot read flag file `path` as it is: a URL, or a local file starting with
  a byte-order mark (absl read it into the first line, so the file's first flag was lost)."""
  if "://" in path:
    return True
  try:
    with open(path, "rb") as f:
      return f.read(len(_BOM)) == _BOM
  except OSError:
    return False  # absl names a missing file.


def local_flagfiles(argv: Sequence[str], directory: typing.Optional[str] = None) -> list[str]:
  """`argv` with every `--flagfile=<URL>` (`gs://run/flags.txt`), and every local flag file
  that starts with a byte-order mark, read into a local copy absl reads whole.

  absl reads flag files with Python's `open`, which knows no URL; a run's `flags.txt` on a
  bucket then replays like a local one. A `--flagfile=<URL>` line inside such a file is
  copied the same way. Other local flag files are left to absl. `--flagfile F` is written
  `--flagfile=F`.

  Args:
    argv: the command line.
    directory: where the copies go (default: a fresh temporary directory).

  Returns:
    The command line with each URL flag file replaced by its local copy.

  Raises:
    FileNotFoundError: a URL flag file that does not exist (named).
  """
  joined, i = [], 0
  while i < len(argv):
    if argv[i] == "--":  # What follows is not for absl.
      joined += argv[i:]
      break
    if argv[i] in _FLAGFILE_NAMES and i + 1 < len(argv):
      joined.append(f"{_FLAGFILE}{argv[i + 1]}")
      i += 2
    else:
      joined.append(argv[i])
      i += 1
  argv = joined
  if not any(arg.startswith(_FLAGFILE) and any(map(_needs_copy, arg[len(_FLAGFILE):].split(",")))
             for arg in argv):
    return list(argv)
  # Imported here: `cli` itself does not import TensorFlow (tfbert.runtime.files does).
  from tfbert.runtime import files  # pylint: disable=import-outside-toplevel

  copies = {}

  def localize(arg: str) -> str:
    if not arg.startswith(_FLAGFILE):
      return arg
    paths = arg[len(_FLAGFILE):].split(",")  # absl accepts a comma-separated list.
    if not any(map(_needs_copy, paths)):
      return arg
    return _FLAGFILE + ",".join(copy(path) if _needs_copy(path) else path for path in paths)

  def copy(url: str) -> str:
    if url not in copies:
      lines = [localize(line.strip()) for line in files.read_text(url).splitlines()]
      target = tempfile.mkdtemp(prefix="tfbert-flags-") if directory is None else directory
      local = os.path.join(target, f"{len(copies)}-{os.path.basename(url)}")
      with open(local, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
      copies[url] = local
    return copies[url]

  return [localize(arg) for arg in argv]


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
