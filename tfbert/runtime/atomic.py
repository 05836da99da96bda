"""Files that appear under their final name only when complete.

Every file a tfbert tool writes (`.keras`, safetensors, JSON, TFRecord shards, predictions)
is written to a temporary sibling and renamed into place, so a crash, a kill or a full disk
leaves either the old file or the complete new one, never a truncated file under the final
name. `os.replace` is atomic within one filesystem, hence siblings, not `/tmp`.

Temporaries are named `.tfbert-tmp-<pid>-<random>` (with an optional short tag): hidden, and
free of the final name, so a glob such as `dir/*tfrecord*` or `dir/*.json` never matches
one, and `is_temporary` recognizes them. A later run removes the leftovers of a killed one
(`remove_stale_temporaries`: those whose process is gone). On failure the temporary is
removed by a cleanup that cannot itself fail (it ignores `OSError`), so the original error
is the one raised.

Final files get mode 0644 less the umask (a `mkstemp` file would stay 0600, unreadable to
a model server running as another user).

**URLs** (`gs://`, `s3://`, `hdfs://`, `ram://`: any `tf.io.gfile` filesystem, through
`tfbert.runtime.files`) get the same staging and renames, with what the filesystem gives: a
rename there is the filesystem's (on object stores a copy then a delete: a single file still
appears only complete, since an object is visible only once uploaded, but a directory is moved
file by file, and a `file_set`'s marker still comes last); no `fsync` and no file modes; and
process IDs of other machines mean nothing, so `remove_stale_temporaries` there removes every
temporary but this process's (a claimed run directory is one run's).
"""

import contextlib
import dataclasses
import errno
import json
import os
import uuid
from typing import Any, Callable, Iterator, Optional

from tfbert.runtime import files, json_values

TEMP_PREFIX = ".tfbert-tmp-"


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def temporary_sibling(path: str, tag: str = "") -> str:
  """A fresh temporary name in `path`'s directory (nothing is created).

  Args:
    path: the final path.
    tag: optional short label kept in the name (letters, digits, `-`), e.g. "export".

  Returns:
    `<dir>/.tfbert-tmp-<pid>-<32 hex digits>[-tag]`.
  """
  directory = files.parent(path)
  suffix = f"-{tag}" if tag else ""
  return os.path.join(directory, f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}{suffix}")


def is_temporary(name: str) -> bool:
  """Whether a file or directory name (or path) is a tfbert temporary."""
  return os.path.basename(name).startswith(TEMP_PREFIX)


def _directory_in_the_way(path: str, where: str = "") -> IsADirectoryError:
  """The error of a directory standing at `path`, where an output writes a file."""
  return IsADirectoryError(f"{path} is a directory where this output writes a file: nothing "
                           f"was written{where}; remove it or choose another path")


def _replace(staged: str, path: str, overwrite: bool = True) -> None:
  """`files.rename(staged, path)`; an operating system's error names `path`, the output, never
  the staging path a user does not know ("[Errno 21] Is a directory: '.tfbert-tmp-...'")."""
  try:
    files.rename(staged, path, overwrite=overwrite)
  except OSError as error:
    if not error.errno:
      raise
    # OSError(errno, ...) is the subclass of that errno (IsADirectoryError, ...).
    raise OSError(error.errno, error.strerror or str(error), path) from None


def _without_directory(error: OSError, temporary: str, path: str) -> Optional[OSError]:
  """The error to raise for `error`, raised writing `temporary` (or inside it) for `path`,
  when the directory of `path` is missing or not a directory: one naming that directory and
  `path`, not the hidden temporary a user never named ("No such file or directory:
  '.../.tfbert-tmp-...'"; sweep 34, B4b). None for any other error (raised as it is).

  The new error is of `error`'s class (`FileNotFoundError`, `NotADirectoryError`), so a
  caller catching it still does.
  """
  filename = error.filename if isinstance(error.filename, str) else ""
  if error.errno not in (errno.ENOENT, errno.ENOTDIR) or not filename.startswith(temporary):
    return None
  directory = files.parent(temporary)
  if files.isdir(directory):
    return None
  if files.exists(directory):
    return OSError(errno.ENOTDIR, f"{path} cannot be written: its directory is not a "
                   "directory (nothing was written)", directory)
  return OSError(errno.ENOENT, f"{path} cannot be written: its directory does not exist "
                 "(nothing was written; create it first)", directory)


@contextlib.contextmanager
def _directory_named(temporary: str, path: str) -> Iterator[None]:
  """Raises an `OSError` of writing `temporary` for `path` in a missing directory as one
  naming that directory (`_without_directory`)."""
  try:
    yield
  except OSError as error:
    replacement = _without_directory(error, temporary, path)
    if replacement is None:
      raise
    raise replacement from None


def remove_quietly(path: str) -> None:
  """Removes a file or directory tree; never raises (cleanup after another error)."""
  try:
    if files.is_url(path):
      if files.isdir(path):
        files.rmtree(path)
      else:
        files.remove(path)
    elif os.path.isdir(path) and not os.path.islink(path):
      files.rmtree(path)
    else:
      os.remove(path)
  except Exception:  # pylint: disable=broad-except  # OSError, or a filesystem's OpError.
    pass


@contextlib.contextmanager
def atomic_path(path: str, tag: str = "", kind: str = "directory",
                task: Optional[str] = None) -> Iterator[str]:
  """Yields a temporary path to write; renames it to `path` when the block succeeds.

  The writer may create a file or a directory there. On any exception (including
  KeyboardInterrupt) the temporary is removed and `path` is left as it was. Replacing an
  existing *directory* goes through `replace_directory`.

  Args:
    path: the final path, local or a URL (its directory must exist).
    tag: optional label of the temporary (see `temporary_sibling`).
    kind: what a directory written there is (`replace_directory`).
    task: what it holds within its kind (`OutputRecord.task`; None for a kind without).

  Yields:
    The temporary path.
  """
  temporary = temporary_sibling(path, tag)
  try:
    with _directory_named(temporary, path):
      yield temporary
    if files.isdir(temporary):
      replace_directory(temporary, path, kind, task)
    else:
      if files.isdir(path):  # Named as such, not as os.replace's error on the staging path.
        raise _directory_in_the_way(path)
      if not files.is_url(temporary):
        os.chmod(temporary, 0o666 & ~_umask())
      _replace(temporary, path)
  finally:
    if files.exists(temporary):
      remove_quietly(temporary)


def write_with(path: str, write: Callable[[str], Any], tag: str = "",
               kind: str = "directory", task: Optional[str] = None) -> str:
  """Runs `write(temporary)` and renames the result to `path`; returns `path`. A directory
  replaces only the same output: `kind` and `task` (`replace_directory`)."""
  with atomic_path(path, tag, kind, task) as temporary:
    write(temporary)
  return path


def write_text(path: str, text: str) -> str:
  """Writes UTF-8 `text` to `path` atomically (fsynced first if local); returns `path`.

  Raises:
    IsADirectoryError: naming `path`, a directory, before anything is written.
  """
  if files.isdir(path):
    raise _directory_in_the_way(path)

  def write(temporary):
    with files.open_file(temporary, "w") as f:
      f.write(text)
      if not files.is_url(temporary):
        f.flush()
        os.fsync(f.fileno())

  return write_with(path, write)


def write_json(path: str, value: Any) -> str:
  """Writes `value` as indented, key-sorted JSON (and a final newline) atomically."""
  return write_text(path, json_values.dumps(value, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def file_set(directory: str, marker: str, tag: str = "") -> Iterator[str]:
  """Yields a staging directory; on success moves its files into `directory`, `marker` last.

  For an output of several files that readers find through one of them (a Google
  checkpoint through its `.index`, a Hugging Face directory through `config.json`, a
  `.keras` file with its `vocab.txt`) and that shares its directory with files that are not
  ours (a run's output, a user's model folder), so the directory as a whole cannot be
  replaced. The block writes every file under its final name into the staging directory (a
  temporary sibling, so the moves are renames within one filesystem). When it succeeds, the
  old `marker` is removed first (a reader never finds an old marker beside new data), the
  other files are renamed into place, and the new `marker` last: until it appears the set
  reads as absent, never as mixed or truncated. A full disk fails inside the block, before
  anything is renamed: `directory` is left as it was and the staging directory is removed.

  Files get mode 0644 less the umask, as `atomic_path`'s.

  Args:
    directory: the existing directory of the final files.
    marker: the file name (not a path) that marks the set complete; the block must write it.
    tag: optional label of the staging directory (see `temporary_sibling`).

  Yields:
    The staging directory's path (empty; plain files only).

  Raises:
    FileNotFoundError: the block did not write `marker` (nothing is moved).
    IsADirectoryError: a file of the set is a directory in `directory` (nothing is moved).
  """
  staging = temporary_sibling(os.path.join(directory, marker), tag)
  with _directory_named(staging, os.path.join(directory, marker)):
    files.mkdir(staging)
  try:
    yield staging
    names = sorted(files.listdir(staging))
    if marker not in names:
      raise FileNotFoundError(f"{marker} was not written; nothing moved into {directory}")
    # Before the first rename: a directory in a file's place would stop the set half-moved.
    blocked = [name for name in names if files.isdir(os.path.join(directory, name))]
    if blocked:
      raise _directory_in_the_way(os.path.join(directory, blocked[0]), f" into {directory}")
    others = [name for name in names if name != marker]
    if others and files.exists(os.path.join(directory, marker)):
      files.remove(os.path.join(directory, marker))
    mode = 0o666 & ~_umask()
    for name in others + [marker]:
      if not files.is_url(staging):
        os.chmod(os.path.join(staging, name), mode)
      _replace(os.path.join(staging, name), os.path.join(directory, name))
  finally:
    remove_quietly(staging)


# In every directory `replace_directory` writes: what tfbert wrote there (`OutputRecord`, as
# JSON). Only a directory holding this file with the same record (or an empty one) is ever
# replaced, and no other output is ever written into one (`tfbert.runtime.paths`). An
# earlier tfbert wrote the kind alone, as one line; it is read as a record of unknown task
# and run.
OUTPUT_MARKER = ".tfbert_output"
# The lock file of a tool's run directory (`tfbert.runtime.run_directory.LOCK_FILE`).
RUN_LOCK_FILE = ".tfbert-run.lock"

# What makes a directory a SavedModel (one tfbert did not write has no `OUTPUT_MARKER`).
SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")


@dataclasses.dataclass(frozen=True)
class OutputRecord:
  """What `OUTPUT_MARKER` records of a directory tfbert wrote as one output.

  Attributes:
    kind: what the directory is (`tfbert.serving.export.EXPORT_KIND`,
      `tfbert.training.training_loop.BEST_KIND`, a pretraining export, ...).
    task: what it holds within its kind: for a SavedModel export the class of the model it
      serves ("BertClassifier", "BertSpanLabeler", "BertEncoder", ...); None for a kind of
      one content.
    run: the run directory (absolute) whose run wrote it; None when written outside a run.
    legacy: written by an earlier tfbert, whose marker holds the kind alone: the task and
      the run are unknown.
  """
  kind: str
  task: Optional[str] = None
  run: Optional[str] = None
  legacy: bool = False

  def what(self) -> str:
    """E.g. "a SavedModel export of a BertClassifier"."""
    return f"a {self.kind}" + (f" of a {self.task}" if self.task else "")

  def describe(self) -> str:
    """What it is and who wrote it, e.g. "a SavedModel export of a BertClassifier written by
    the run /runs/mrpc"."""
    if self.legacy:
      return (f"{self.what()} an earlier tfbert wrote (its {OUTPUT_MARKER} records the kind "
              "alone, not the model it holds nor the run that wrote it)")
    if self.run:
      return f"{self.what()} written by the run {self.run}"
    return f"{self.what()} tfbert wrote"


def write_marker(directory: str, record: OutputRecord) -> None:
  """Writes `record` as `directory/OUTPUT_MARKER` (a staging directory: not atomically)."""
  values = {"kind": record.kind, "task": record.task, "run": record.run}
  with files.open_file(os.path.join(directory, OUTPUT_MARKER), "w") as f:
    f.write(json_values.dumps(values, indent=2, sort_keys=True) + "\n")


def read_marker(directory: str) -> Optional[OutputRecord]:
  """The `OutputRecord` of `directory`, or None when it holds no `OUTPUT_MARKER`. A marker of
  an earlier tfbert (the kind alone, one line) reads as a `legacy` record."""
  path = os.path.join(directory, OUTPUT_MARKER)
  if not files.isfile(path):
    return None
  try:
    text = files.read_text(path)
  except ValueError:  # Not UTF-8: nothing tfbert wrote; never the kind of any output.
    return OutputRecord(f"directory with an unreadable {OUTPUT_MARKER}", legacy=True)
  try:
    values = json.loads(text)
  except (ValueError, RecursionError):  # Not JSON, or JSON nested too deeply to read.
    values = None
  if isinstance(values, dict) and isinstance(values.get("kind"), str):
    return OutputRecord(values["kind"], values.get("task"), values.get("run"))
  return OutputRecord(text.strip(), legacy=True)


# In an output directory that a run writes file by file (`file_set`) beside files that are
# not its own (a sentence-transformers directory, which may hold the user's model card), so
# that carries no `OUTPUT_MARKER` and is not taken for an output: what it is and the run that
# wrote it (`OutputRecord`'s kind and run, as JSON). A replay of that run's flags.txt with a
# new output directory would otherwise replace it unseen.
RUN_RECORD = ".tfbert_run"


def write_run_record(directory: str, kind: str, run: Optional[str] = None) -> None:
  """Records in `directory` (`RUN_RECORD`, atomically) that the run `run` (default:
  `current_run`) wrote it as `kind`; outside a run nothing is recorded (an old record is
  removed: it no longer says who wrote the files)."""
  run = run or current_run()
  path = os.path.join(directory, RUN_RECORD)
  if not run:
    remove_quietly(path)
    return
  write_json(path, {"kind": kind, "run": files.absolute(run)})


def read_run_record(directory: str) -> Optional[OutputRecord]:
  """The `OutputRecord` (kind and run) of `directory`'s `RUN_RECORD`, or None when it has
  none, or one that does not read as a record (not tfbert's: nothing is known)."""
  path = os.path.join(directory, RUN_RECORD)
  if not files.isfile(path):
    return None
  try:
    values = json.loads(files.read_text(path))
  except (ValueError, RecursionError):
    return None
  if (isinstance(values, dict) and isinstance(values.get("kind"), str)
      and isinstance(values.get("run"), str)):
    return OutputRecord(values["kind"], run=values["run"])
  return None


def describe_output(directory: str) -> Optional[str]:
  """What `directory` is when tfbert wrote it as an output (its `OutputRecord`) or it is a
  SavedModel (`SAVED_MODEL_FILES`); None for anything else (a plain or missing directory, a
  run directory, a file)."""
  if not files.isdir(directory):
    return None
  record = read_marker(directory)
  if record is not None:
    return record.describe()
  for name in SAVED_MODEL_FILES:
    if files.isfile(os.path.join(directory, name)):
      return f"a SavedModel (it holds {name})"
  return None


def enclosing_output(path: str, *, include_self: bool = True) -> Optional[tuple[str, str]]:
  """(directory, `describe_output` of it) for the nearest directory at or above `path` (only
  strictly above with `include_self=False`) that is an output tfbert wrote or a SavedModel:
  nothing else may be written there. None when there is none. Symlinks are resolved."""
  current = real_path(path)
  if not include_self:
    current = files.parent(current)
  while True:
    what = describe_output(current)
    if what is not None:
      return current, what
    up = files.parent(current)
    if up == current:
      return None
    current = up


# The run directories this process holds (`tfbert.runtime.run_directory.claim`), newest
# last: an output written meanwhile records the newest as the run that wrote it.
_HELD_RUNS: list[str] = []


def hold_run(directory: str) -> None:
  """Records that this process holds the run directory `directory` (`current_run`)."""
  _HELD_RUNS.append(files.absolute(directory))


def release_run(directory: str) -> None:
  """Undoes one `hold_run(directory)` (missing: nothing happens)."""
  directory = files.absolute(directory)
  for i in range(len(_HELD_RUNS) - 1, -1, -1):
    if _HELD_RUNS[i] == directory:
      del _HELD_RUNS[i]
      return


def current_run() -> Optional[str]:
  """The run directory this process holds (the newest claimed), or None."""
  return _HELD_RUNS[-1] if _HELD_RUNS else None


def real_path(path: str) -> str:
  """`path` absolute, symlinks resolved (a URL: `files.absolute`)."""
  return files.absolute(path) if files.is_url(path) else os.path.realpath(path)


def same_run(a: str, b: str) -> bool:
  """Whether two run directories are one (symlinks resolved)."""
  return real_path(a) == real_path(b)


def by_another_run(record: OutputRecord, path: str, run: Optional[str]) -> bool:
  """Whether `record`, the marker of the output at `path`, names a run other than `run`
  (both known), `path` not lying inside `run`'s directory (a moved run's own output)."""
  return bool(run and record.run and not same_run(record.run, run)
              and not files.inside(real_path(path), real_path(run)))


def _check(path: str, wanted: OutputRecord, task_known: bool) -> None:
  """Raises FileExistsError when the existing `path` must not be replaced by `wanted`."""
  if not path or not files.exists(path):
    return
  keep = "refusing to replace it (that would delete it); remove it or choose another path"
  target = files.dangling_link(path)
  if target is not None:
    raise FileExistsError(f"{path} is a symbolic link to {target}, which does not exist, not "
                          f"a directory tfbert wrote as {wanted.what()}: {keep}")
  if not files.isdir(path):
    raise FileExistsError(f"{path} is a file, not a directory tfbert wrote as "
                          f"{wanted.what()}: {keep}")
  found = read_marker(path)
  if found is None:
    names = files.listdir(path)
    if not names:
      return
    if RUN_LOCK_FILE in names:  # Sweep 27, A112: it was called one tfbert did not write.
      raise FileExistsError(f"{path} is another tfbert run's directory (it holds "
                            f"{RUN_LOCK_FILE}), not {wanted.what()}: {keep}")
    raise FileExistsError(f"{path} exists and is a directory tfbert did not write (no "
                          f"{OUTPUT_MARKER}), not {wanted.what()}: {keep}")
  if found.kind != wanted.kind:
    raise FileExistsError(f"{path} exists and is {found.describe()}, not {wanted.what()}: "
                          f"{keep}")
  if task_known and found.legacy and wanted.task is not None:
    raise FileExistsError(f"{path} exists and is {found.describe()}: it may hold another "
                          f"model than {wanted.what()}, so tfbert does not take it for one; "
                          f"{keep}")
  other_task = task_known and not found.legacy and found.task != wanted.task
  if other_task or by_another_run(found, path, wanted.run):
    by = f" of the run {wanted.run}" if wanted.run else ""
    raise FileExistsError(f"{path} exists and is {found.describe()}; this would replace it "
                          f"with {wanted.what()}{by}: {keep}")


def check_replaceable(path: str, kind: str, task: Optional[str] = None,
                      run: Optional[str] = None) -> None:
  """Raises unless `path` is absent, an empty directory, or the same output tfbert wrote.

  The same output: its `OUTPUT_MARKER` records `kind`; the same `task` (when given; a marker
  of an earlier tfbert, which recorded the kind alone, may hold another task's model and is
  then not replaced); and, when both are known, the same run, unless `path` lies inside this
  run's directory (a run's own outputs, which move with it).

  Args:
    path: the directory to replace.
    kind: what this write makes of it (`OutputRecord.kind`).
    task: what it will hold (`OutputRecord.task`), when known; None: not compared here
      (`replace_directory` compares what was written).
    run: the run directory writing it; default: the one this process holds (`current_run`).

  Raises:
    FileExistsError: naming `path`, what it is and who wrote it, what this write would put
      there, and what to do.
  """
  _check(path, OutputRecord(kind, task, run or current_run()), task_known=task is not None)


def replace_directory(staging: str, final: str, kind: str = "directory",
                      task: Optional[str] = None, run: Optional[str] = None) -> None:
  """Renames the complete directory `staging` to `final`, replacing any old one that tfbert
  wrote as the same output (`check_replaceable`, the task compared always: None is a kind
  without tasks); records `OutputRecord(kind, task, run)` in it (`OUTPUT_MARKER`; `run`
  defaults to `current_run`).

  POSIX cannot rename a directory onto a non-empty one, so the old directory first moves
  aside to a temporary name; if the second rename fails, it moves back. The old copy is
  removed last.

  Raises:
    FileExistsError: `final` is something else (`check_replaceable`); nothing is changed.
  """
  record = OutputRecord(kind, task, run or current_run())
  _check(final, record, task_known=True)
  write_marker(staging, record)
  if not files.exists(final):
    _replace(staging, final, overwrite=False)
    return
  old = temporary_sibling(final, "old")
  files.rename(final, old, overwrite=False)  # Its error names `final` (the source).
  try:
    _replace(staging, final, overwrite=False)
  except BaseException:
    files.rename(old, final, overwrite=False)
    raise
  remove_quietly(old)


def process_alive(pid: int) -> bool:
  """Whether a process with this PID exists (one of another user's counts)."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def remove_stale_temporaries(directory: str) -> list[str]:
  """Removes the tfbert temporaries in `directory` whose writing process is gone.

  Args:
    directory: a directory (missing is fine).

  Returns:
    The removed paths (for a log line).
  """
  removed = []
  try:
    names = files.listdir(directory)
  except OSError:
    return removed
  for name in sorted(names):
    if not is_temporary(name):
      continue
    pid_text = name[len(TEMP_PREFIX):].split("-", 1)[0]
    if (pid_text.isdigit() and int(pid_text) != os.getpid() and not files.is_url(directory)
        and process_alive(int(pid_text))):
      continue
    if pid_text.isdigit() and int(pid_text) == os.getpid():
      continue
    path = os.path.join(directory, name)
    remove_quietly(path)
    removed.append(path)
  return removed
