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
import os
import uuid
from typing import Any, Callable, Iterator

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
def atomic_path(path: str, tag: str = "", kind: str = "directory") -> Iterator[str]:
  """Yields a temporary path to write; renames it to `path` when the block succeeds.

  The writer may create a file or a directory there. On any exception (including
  KeyboardInterrupt) the temporary is removed and `path` is left as it was. Replacing an
  existing *directory* goes through `replace_directory`.

  Args:
    path: the final path, local or a URL (its directory must exist).
    tag: optional label of the temporary (see `temporary_sibling`).
    kind: what a directory written there is (`replace_directory`).

  Yields:
    The temporary path.
  """
  temporary = temporary_sibling(path, tag)
  try:
    yield temporary
    if files.isdir(temporary):
      replace_directory(temporary, path, kind)
    else:
      if not files.is_url(temporary):
        os.chmod(temporary, 0o666 & ~_umask())
      files.rename(temporary, path)
  finally:
    if files.exists(temporary):
      remove_quietly(temporary)


def write_with(path: str, write: Callable[[str], Any], tag: str = "",
               kind: str = "directory") -> str:
  """Runs `write(temporary)` and renames the result to `path`; returns `path`. A directory
  replaces only one of the same `kind` (`replace_directory`)."""
  with atomic_path(path, tag, kind) as temporary:
    write(temporary)
  return path


def write_text(path: str, text: str) -> str:
  """Writes UTF-8 `text` to `path` atomically (fsynced first if local); returns `path`."""

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
  """
  staging = temporary_sibling(os.path.join(directory, marker), tag)
  files.mkdir(staging)
  try:
    yield staging
    names = sorted(files.listdir(staging))
    if marker not in names:
      raise FileNotFoundError(f"{marker} was not written; nothing moved into {directory}")
    others = [name for name in names if name != marker]
    if others and files.exists(os.path.join(directory, marker)):
      files.remove(os.path.join(directory, marker))
    mode = 0o666 & ~_umask()
    for name in others + [marker]:
      if not files.is_url(staging):
        os.chmod(os.path.join(staging, name), mode)
      files.rename(os.path.join(staging, name), os.path.join(directory, name))
  finally:
    remove_quietly(staging)


# In every directory `replace_directory` writes: what kind of output tfbert wrote there. Only
# a directory holding this file with the same kind (or an empty one) is ever replaced.
OUTPUT_MARKER = ".tfbert_output"


def check_replaceable(path: str, kind: str) -> None:
  """Raises unless `path` is absent, an empty directory, or a `kind` tfbert wrote.

  Raises:
    FileExistsError: naming `path`, what it is, and what to do.
  """
  if not path or not files.exists(path):
    return
  if not files.isdir(path):
    raise FileExistsError(f"{path} is a file, not a directory tfbert wrote as a {kind}: "
                          "refusing to replace it; remove it or choose another path")
  marker = os.path.join(path, OUTPUT_MARKER)
  found = files.read_text(marker).strip() if files.isfile(marker) else None
  if found == kind or (found is None and not files.listdir(path)):
    return
  what = (f"a {found} tfbert wrote" if found
          else f"a directory tfbert did not write (no {OUTPUT_MARKER})")
  raise FileExistsError(f"{path} exists and is {what}, not a {kind}: refusing to replace it "
                        "(that would delete it); remove it or choose another path")


def replace_directory(staging: str, final: str, kind: str = "directory") -> None:
  """Renames the complete directory `staging` to `final`, replacing any old one that tfbert
  wrote as the same `kind` of output (`check_replaceable`; `OUTPUT_MARKER` records it).

  POSIX cannot rename a directory onto a non-empty one, so the old directory first moves
  aside to a temporary name; if the second rename fails, it moves back. The old copy is
  removed last.

  Raises:
    FileExistsError: `final` is something else (`check_replaceable`); nothing is changed.
  """
  check_replaceable(final, kind)
  with files.open_file(os.path.join(staging, OUTPUT_MARKER), "w") as f:
    f.write(kind + "\n")
  if not files.exists(final):
    files.rename(staging, final, overwrite=False)
    return
  old = temporary_sibling(final, "old")
  files.rename(final, old, overwrite=False)
  try:
    files.rename(staging, final, overwrite=False)
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
