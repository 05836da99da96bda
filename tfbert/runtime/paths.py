"""Outputs never destroy inputs: the rule every tool's paths are checked by before any work.

A tool's outputs are written (a directory replaced as a whole, a file renamed into place), its
inputs are read. An output equal to an input, containing one (replacing or cleaning the
output would delete it) or inside one (a model or data directory grows files the run did not
read, and a later replacement of the input takes the output with it) is refused, naming both.
Two outputs must not be equal or contain one another either: the export's atomic replacement
of `export_dir == output_dir` deleted the run it came from. The one nesting allowed is the
one tfbert lays out itself: outputs inside the run directory (`container`), e.g.
`--export_dir=<output_dir>/export`; the run directory's own entries stay its own. A run that
does not train may read its directory's own model (`--do_eval --init_tfbert=<run>/model.keras`
into the same run): it never writes that file.

Paths are compared after `realpath` (a symlink to an input is that input); a glob compares by
its fixed leading directories (`data/*.tfrecord` is in `data/`) when the output is or
contains them; an output below them conflicts only with the paths the pattern matches now or
would match (`data/runs/` beside `data/*.tfrecord` is apart); URLs compare as strings.

Each output must also be writable where it is named (`output_problems`, checked as early as
the overlaps, creating nothing): an output directory that is an existing file, a path below
a file, or a place whose nearest existing directory cannot be written into is refused,
naming its flag (it failed as a bare `[Errno 17] File exists` after the data was read and
the model built).

Nothing is written into an output tfbert wrote (a directory holding
`tfbert.runtime.atomic.OUTPUT_MARKER`: an export, `best/`) or into a SavedModel: such a
directory is never a run directory, a data or work directory, nor the folder of a checkpoint
or file (`--output_dir=<export>` once wrote a run into the export). Only the same output
replaces it whole (`REPLACED_OUTPUTS`, decided at the write by
`tfbert.runtime.atomic.check_replaceable`).
"""

import fnmatch
import glob as glob_lib
import os
import stat
from typing import Iterable, Mapping, Optional, Sequence, Union

from tfbert.runtime import atomic, files

PathValue = Union[None, str, os.PathLike, Sequence[Union[str, os.PathLike]]]


def _resolved(path) -> str:
  """`path` absolute with symlinks resolved; a glob's fixed leading directories; a URL as is."""
  path = os.fspath(path)
  if files.is_url(path):
    return files.absolute(path)
  if glob_lib.has_magic(path):
    fixed = []
    for part in path.split(os.sep):
      if glob_lib.has_magic(part):
        break
      fixed.append(part)
    path = os.sep.join(fixed) or "."
  return os.path.realpath(path)


def _each(value: PathValue) -> list[str]:
  if value is None or value == "":
    return []
  if isinstance(value, (str, os.PathLike)):
    return [os.fspath(value)]
  return [os.fspath(v) for v in value if v]


def _relation(a: str, b: str) -> Optional[str]:
  """How `a` stands to `b`: "is", "contains", "lies inside" or None."""
  if a == b:
    return "is"
  if files.inside(b, a):
    return "contains"
  if files.inside(a, b):
    return "lies inside"
  return None


def _glob_relation(out: str, pattern: str) -> Optional[str]:
  """How the resolved output `out` stands to the local glob input `pattern`, or None.

  The output conflicts when it is, or contains, the glob's fixed leading directories (it
  holds every path the pattern can match); below them, only when it is, contains or lies
  inside a path the pattern matches now, or when it or a directory above it would match the
  pattern (the run could later read what it writes). An output merely beside the matched
  files is apart. A pattern with `**` keeps the whole fixed directory as the input.
  """
  fixed = _resolved(pattern)
  relation = _relation(out, fixed)
  if relation != "lies inside":
    return relation
  parts = os.fspath(pattern).split(os.sep)
  magic = parts[next(i for i, part in enumerate(parts) if glob_lib.has_magic(part)):]
  if any("**" in part for part in magic):
    return relation
  for match in glob_lib.glob(pattern):
    found = _relation(out, os.path.realpath(match))
    if found:
      return found
  below = os.path.relpath(out, fixed).split(os.sep)
  if len(below) >= len(magic) and all(
      fnmatch.fnmatchcase(name, part) for name, part in zip(below, magic)):
    return "would match" if len(below) == len(magic) else "lies inside a path matching"
  return None


def _input_relation(out: str, in_path: str) -> Optional[str]:
  """How the resolved output `out` stands to input `in_path` (a glob: `_glob_relation`)."""
  if glob_lib.has_magic(in_path) and not files.is_url(in_path):
    return _glob_relation(out, in_path)
  return _relation(out, _resolved(in_path))


def overlap_problems(inputs: Mapping[str, PathValue], outputs: Mapping[str, PathValue], *,
                     container: Optional[str] = None,
                     read_from_container: Sequence[str] = ()) -> list[str]:
  """Every overlap of an output with an input or with another output, one message each.

  Args:
    inputs: setting name (as the user types it, e.g. "--train_file") -> path(s) read.
    outputs: setting name -> path(s) written.
    container: the name in `outputs` of the run directory, inside which other outputs may
      lie (never equal to it).
    read_from_container: names in `inputs` that may lie inside the container: what a run
      reads of its own directory and does not write (an evaluation of the run's own
      `model.keras`).

  Returns:
    Messages naming both settings and their paths ([] when all are apart).
  """
  named_inputs = [(name, path) for name, value in inputs.items() for path in _each(value)]
  named_outputs = [(name, path) for name, value in outputs.items() for path in _each(value)]
  problems = []
  for out_name, out_path in named_outputs:
    out = _resolved(out_path)
    for in_name, in_path in named_inputs:
      relation = _input_relation(out, in_path)
      if relation == "contains" and out_name == container and in_name in read_from_container:
        continue
      if relation == "contains":  # A rerun's output (its model's home) cannot move: the input can.
        problems.append(f"output {out_name} {out_path} contains input {in_name} {in_path}: "
                        "the run replaces files there: move the input out, or choose another "
                        f"{out_name}")
      elif relation:
        problems.append(f"output {out_name} {out_path} {relation} input {in_name} {in_path}: "
                        "writing it could destroy or change what the run reads; choose "
                        f"another {out_name}")
  for i, (name_a, path_a) in enumerate(named_outputs):
    for name_b, path_b in named_outputs[i + 1:]:
      relation = _relation(_resolved(path_a), _resolved(path_b))
      nested_in_run = ((relation == "contains" and name_a == container)
                       or (relation == "lies inside" and name_b == container))
      if relation and not nested_in_run:
        problems.append(f"output {name_a} {path_a} {relation} output {name_b} {path_b}: one "
                        "would replace or delete the other; give them separate paths")
  return problems


def check_apart(inputs: Mapping[str, PathValue], outputs: Mapping[str, PathValue], *,
                container: Optional[str] = None, read_from_container: Sequence[str] = ()) -> None:
  """Raises ValueError listing every `overlap_problems` message (see there)."""
  problems = overlap_problems(inputs, outputs, container=container,
                              read_from_container=read_from_container)
  if problems:
    raise ValueError("; ".join(problems))


OUTPUT_KINDS = ("directory", "file", "prefix")


def _unwritable(directory: str) -> Optional[str]:
  """Why nothing can be created in the existing directory `directory`, or None.

  Creating nothing to find out: a read-only mount, no write permission for this user, or
  no write permission for anyone (root's `os.access` passes everywhere, but `/proc` and
  other directories of mode 0555 refuse it too).
  """
  try:
    mode = stat.S_IMODE(os.stat(directory).st_mode)
    if os.statvfs(directory).f_flag & os.ST_RDONLY:
      return f"{directory} is on a read-only file system"
  except OSError as e:
    return f"{directory}: {e.strerror}"
  if not os.access(directory, os.W_OK | os.X_OK):
    return f"{directory} is not writable by this user"
  if not mode & 0o222:
    return f"{directory} is read-only (mode {mode:04o})"
  return None


# Outputs a tool replaces whole by the output tfbert wrote there before (a SavedModel
# export): whether the one there may go is decided at the write
# (`tfbert.runtime.atomic.check_replaceable`); here only what holds them is checked.
REPLACED_OUTPUTS = frozenset({"--export_dir"})


def _in_output_problem(name: str, path: str, kind: str) -> Optional[str]:
  """Why output `name` at `path` would be written into an output tfbert wrote or a SavedModel
  (`tfbert.runtime.atomic.enclosing_output`), or None."""
  itself = kind == "directory" and name not in REPLACED_OUTPUTS
  found = atomic.enclosing_output(path, include_self=itself)
  if found is None:
    return None
  directory, what = found
  if itself and directory == atomic.real_path(path):
    return (f"{name} {path} is {what}: no other output is written into it (its files would "
            f"mix with that model's); choose another {name}, e.g. a new directory")
  return (f"{name} {path} lies inside {directory}, {what}: writing there would change that "
          f"model's files; choose another {name} outside it")


# What each kind of special file is called in every message naming one (`special_file`).
SPECIAL_FILES = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                 (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"))


def special_file(path: str) -> Optional[str]:
  """What `path` is when it exists and is neither a regular file nor a directory (a device,
  a pipe, a socket: `/dev/null` was once replaced by a regular file), else None. By
  `os.stat` only: a pipe is never opened (which would wait for a writer)."""
  try:
    mode = os.stat(path).st_mode
  except (OSError, ValueError):
    return None
  for test, what in SPECIAL_FILES:
    if test(mode):
      return what
  return None


# Why a run refuses a special file as an input (`special_input_problems`' default reason).
RUN_REREADS = ("a run reads each input more than once (its checks and records before any "
               "work, then the run itself)")


def special_input_problems(inputs: Mapping[str, PathValue],
                           reason: str = RUN_REREADS) -> list[str]:
  """The one check and wording of an input (a data file, a vocabulary, a config) that is a
  special file (`special_file`: a named pipe such as bash's `<(...)` or /dev/stdin, a
  socket, a device), before any work: "--name path is a named pipe: `reason`, which a
  stream cannot serve; write it to a regular file first". `inputs`: {"--name": a path or
  paths}, as `fields` gives them; URLs and paths that do not exist are left to the reads.
  """
  problems = []
  for name, value in inputs.items():
    values = [value] if isinstance(value, (str, os.PathLike)) else list(value or ())
    for path in values:
      path = os.fspath(path) if isinstance(path, os.PathLike) else path
      if not isinstance(path, str) or not path or files.is_url(path):
        continue
      what = special_file(path)
      if what:
        problems.append(f"{name} {path} is {what}: {reason}, which a stream cannot serve; "
                        "write it to a regular file first")
  return problems


def dangling_link_problem(name: str, path: str) -> Optional[str]:
  """Why output `name` cannot be written at `path` when `path`, or a directory above it, is
  a symbolic link to nothing (`tfbert.runtime.files.dangling_link`), naming the link and its
  target; else None. The one wording of every output check: such a link is neither "an
  existing file" nor "not a directory" to a user who sees none there."""
  if files.is_url(path):
    return None
  absolute = current = os.path.abspath(path)
  while True:
    target = files.dangling_link(current)
    if target is not None:
      where = f"{name} {path} is" if current == absolute else f"{name} {path}: {current} is"
      return (f"{where} a symbolic link to {target}, which does not exist: remove the link "
              f"or choose another {name}")
    up = os.path.dirname(current)
    if up == current:
      return None
    current = up


def _name_max(directory: str) -> int:
  """The longest file name (in bytes) the file system of the existing `directory` allows."""
  try:
    return os.pathconf(directory, "PC_NAME_MAX")
  except (OSError, ValueError):
    return 255


def _shown(name: str) -> str:
  return name if len(name) <= 60 else f"{name[:28]}...{name[-28:]}"


def name_length_problem(name: str, path: str, suffix: str = "") -> Optional[str]:
  """Why output `name` cannot be written at the local `path` (its last name with `suffix`
  appended: what is written at a prefix) because a name in it is longer than its file
  system allows (`PC_NAME_MAX` of the nearest existing directory, else 255 bytes); else
  None. Checked before any work: it failed as "File name too long" at the first write."""
  if files.is_url(path):
    return None
  absolute = os.path.abspath(path)
  parts = absolute.split(os.sep)
  parts[-1] += suffix
  existing = os.sep
  for i, part in enumerate(parts):
    here = os.sep.join(parts[:i + 1]) or os.sep
    length = len(os.fsencode(part))
    limit = _name_max(existing)
    if length > limit:
      last = i == len(parts) - 1
      given = part[:len(part) - len(suffix)] if last and suffix else part
      shown = os.fspath(path).replace(given, _shown(given))  # One line of a readable length.
      what = f"its name {_shown(part)!r}" if last else (
          f"the directory name {_shown(part)!r} in it")
      return (f"{name} {shown}: {what} is {length} bytes long, over the {limit} bytes a file "
              f"name may have in {existing}: choose a shorter {name}")
    if os.path.isdir(here):
      existing = here
  return None


# What a "prefix" output appends to its path's last name at most (a Google checkpoint's
# `<prefix>.data-00000-of-00001`, beside `<prefix>.index`).
PREFIX_SUFFIX = ".data-00000-of-00001"


# What a "prefix" output's message suggests naming inside a path that names a directory
# (a Google checkpoint's prefix, as `tfbert.save` suggests it).
PREFIX_EXAMPLE = "bert_model.ckpt"


def directory_named_problem(name: str, path: str, kind: str,
                            example: Optional[str] = None) -> Optional[str]:
  """Why a "file" or "prefix" output `name` cannot be `path` when it ends in a path separator
  (it names a directory: a prefix `DIR/` wrote hidden `DIR/.index` files, or into the parent),
  suggesting `example` (a prefix: `PREFIX_EXAMPLE`) inside it; else None. `output_problems`
  checks it for a "file"; the writer of a real prefix (a Google checkpoint's) calls it."""
  if kind not in ("file", "prefix") or not path.endswith(("/", os.sep)):
    return None
  example = example or (PREFIX_EXAMPLE if kind == "prefix" else None)
  what = "file" if kind == "file" else "path prefix (its files <prefix>.* go beside it)"
  inside = f", e.g. {path}{example}" if example else ""
  return f"{name} {path} names a directory: name the {what} to write inside it{inside}"


def _output_problem(name: str, path: str, kind: str,
                    example: Optional[str] = None) -> Optional[str]:
  """Why output `name` (`--flag`) cannot be written at `path` as a `kind`, or None."""
  # A prefix's own writer checks `directory_named_problem`: `tfbert.save` checks its
  # directory formats' paths (`out/` for hf) as prefixes too.
  directory_named = directory_named_problem(name, path, kind, example) if kind == "file" else None
  if directory_named:
    return directory_named
  if files.is_url(path):  # No parents or permissions to inspect: only what is there.
    if kind == "directory" and files.exists(path) and not files.isdir(path):
      return f"{name} {path} is an existing file, not a directory: choose another {name}"
    if kind == "file" and files.isdir(path):
      return f"{name} {path} is an existing directory, not a file: name a file to write"
    return _in_output_problem(name, path, kind)
  absolute = os.path.abspath(path)
  problem = (dangling_link_problem(name, path)
             or name_length_problem(name, path, PREFIX_SUFFIX if kind == "prefix" else ""))
  if problem:
    return problem
  special = special_file(absolute)
  if special:
    return (f"{name} {path} is {special}, not a file tfbert may replace (writing replaces "
            f"the path whole): choose a regular file's path for {name}")
  if kind == "directory" and os.path.lexists(absolute) and not os.path.isdir(absolute):
    return f"{name} {path} is an existing file, not a directory: choose another {name}"
  if kind == "file" and os.path.isdir(absolute):
    return f"{name} {path} is an existing directory, not a file: name a file to write"
  inside_output = _in_output_problem(name, path, kind)
  if inside_output:
    return inside_output
  # Where the writing happens: in the directory itself, else in the nearest existing
  # directory above it (which gets the missing ones).
  where = absolute if kind == "directory" else os.path.dirname(absolute)
  while not os.path.lexists(where):
    where = os.path.dirname(where)
  if not os.path.isdir(where):
    what = "a file, not a directory" if os.path.isfile(where) else "not a directory"
    return f"{name} {path}: its parent {where} is {what}"
  reason = _unwritable(where)
  if reason:
    verb = "write into" if where == absolute else "create"
    return f"cannot {verb} {name} {path}: {reason}"
  return None


def output_problems(outputs: Mapping[str, PathValue], kind: str = "directory", *,
                    required: bool = False, example: Optional[str] = None) -> list[str]:
  """Why each output cannot be written where it is named, one message each, naming its flag.

  Checks only what exists (creating nothing, so it runs before any work): the path and the
  directories above it (none a symbolic link to nothing, `dangling_link_problem`; no name in
  it longer than its file system allows, `name_length_problem`), the path itself (a
  directory output must not be an existing file, a file output not an existing directory,
  nor a device, pipe or socket; a file output not a path ending in a separator,
  `directory_named_problem`), the directories holding it (none an output tfbert wrote or
  a SavedModel; a directory output, other than one `REPLACED_OUTPUTS` names, none itself
  either), the
  nearest existing directory that would hold it (not a file; writable: not on a read-only
  mount, writable by this user, not of mode 0555 like `/proc`). A URL's output is checked
  only against what exists there.

  Args:
    outputs: setting name (e.g. "--output_dir") -> path(s) written.
    kind: what each path names: "directory" (written into, created if missing), "file"
      (written at the path) or "prefix" (files named `<path>.*`, such as a checkpoint:
      only the directory holding them matters).
    required: whether every output must be named. An empty one (`--workdir=` with an unset
      shell variable) is then refused, not skipped: it would write into the current
      directory. Without it, empty means "not written" (an optional output).
    example: the file name a "file" output ending in a separator is told to name inside
      it (`model.onnx`).

  Returns:
    Messages naming the setting and its path ([] when every output can be written).
  """
  if kind not in OUTPUT_KINDS:
    raise ValueError(f"kind must be one of {OUTPUT_KINDS}, got {kind!r}")
  problems = []
  for name, value in outputs.items():
    if required and not _each(value):
      what = {"directory": "a directory", "file": "a file", "prefix": "a path prefix"}[kind]
      problems.append(f"{name} is empty: name {what} to write")
    for path in _each(value):
      problem = _output_problem(name, path, kind, example)
      if problem:
        problems.append(problem)
  return problems


def check_outputs(outputs: Mapping[str, PathValue], kind: str = "directory", *,
                  required: bool = False, example: Optional[str] = None) -> None:
  """Raises ValueError listing every `output_problems` message (see there)."""
  problems = output_problems(outputs, kind, required=required, example=example)
  if problems:
    raise ValueError("; ".join(problems))


def check_file_output(name: str, path: str, suffix: str) -> None:
  """Checks a required file output whose name must end in `suffix` (".onnx", ".tflite"):
  `check_outputs` (empty, a directory, unwritable; a path ending in a separator is told
  to name `model<suffix>` inside it), then the suffix, so that a slip such as `notes.txt`
  never replaces a user's file.

  Raises:
    ValueError: naming `name` and `path`.
  """
  check_outputs({name: path}, "file", required=True, example=f"model{suffix}")
  if not path.endswith(suffix):
    raise ValueError(f"{name} {path} must be a {suffix} file (its name ends in {suffix})")


def _what_is_there(path: str) -> str:
  """What the existing non-directory `path` is, for a message: "a file", "a symbolic link to
  T, which does not exist", "a named pipe", ..."""
  if files.is_url(path):
    return "a file"
  target = files.dangling_link(path)
  if target is not None:
    return f"a symbolic link to {target}, which does not exist"
  return special_file(path) or "a file"


def entry_problems(name: str, directory: str, entries: Mapping[str, str]) -> list[str]:
  """Why directories a run creates inside its existing directory cannot be created there:
  each entry that exists and is no directory (a file, a link to nothing, a pipe), which the
  run would otherwise meet mid-way (TensorFlow's "Not a directory [Op:CreateSummaryFileWriter]"
  naming no path). Checks only what exists, creating nothing, so it runs before any work.

  Args:
    name: the setting naming the directory (e.g. "--output_dir").
    directory: the run directory (missing: nothing to check).
    entries: entry name -> what the run keeps there (e.g. "train" -> "TensorBoard logs").

  Returns:
    One message per entry in the way, naming its path and what is there.
  """
  if not directory or (not files.is_url(directory) and not os.path.isdir(directory)):
    return []
  problems = []
  for entry, purpose in entries.items():
    path = os.path.join(directory, entry)
    there = (os.path.lexists(path) and not os.path.isdir(path) if not files.is_url(path)
             else files.exists(path) and not files.isdir(path))
    if there:
      problems.append(f"{name} {directory}: {path} is {_what_is_there(path)}, where the run "
                      f"keeps its {entry}/ directory ({purpose}): move it away, or choose "
                      f"another {name}")
  return problems


def fields(config, names: Iterable[str]) -> dict[str, PathValue]:
  """`--<name>` -> the config's value, for the names `config` has."""
  return {f"--{name}": getattr(config, name) for name in names if hasattr(config, name)}
