"""Paths on any filesystem TensorFlow knows: local paths and URLs (`gs://`, `s3://`, `ram://`).

Every tfbert path (inputs, run directories, exports) goes through these functions, so a
Google Cloud Storage bucket works wherever a local folder does, as in google-research/bert
and Model Garden, whose users write `gs://` paths.

A local path keeps the `os` calls (exact `OSError`s, `fsync`, file modes); a URL (any
path holding `://`) goes through `tf.io.gfile`, TensorFlow's filesystem layer. What a URL
filesystem cannot give is written in `docs/filesystems.md`: no `flock` (a run directory's
lock holds only within one process there), no `fsync`, no file modes, and a rename that
object stores implement as copy + delete (a single file still appears only complete; a
directory is moved file by file).

Errors: a URL filesystem's missing file raises `FileNotFoundError` here as a local one
does (`tf.errors.NotFoundError` is translated), so callers handle one exception type.

A path given to the Python API (`tfbert.load`, `tfbert.save`) is read by `as_path`: a str or
an `os.PathLike` (`pathlib.Path`) alike, anything else refused naming the argument. `~` is
never expanded, as Python's `open`, `pathlib` and `tf.io.gfile` do not (nor absl, nor
google-research/bert): a path whose leading `~` names a home directory is refused rather than
read as a directory named `~` below the current one (`home_expansion`; the tools refuse such
a flag value the same way, `tfbert.runtime.cli`). `./~/x` names such a directory.
"""

import contextlib
import json
import os
import posixpath
import shlex
import shutil
from typing import IO, Iterator, Optional, Union

import tensorflow as tf


def is_url(path: str) -> bool:
  """Whether `path` names a file through a URL scheme (`gs://...`, `ram://...`)."""
  return "://" in str(path)


def home_expansion(path: str) -> Optional[str]:
  """What a shell would make of `path`'s leading `~` or `~user` (`os.path.expanduser`: the
  home directory), when it names one; else None (no `~`, an unknown user, a URL). tfbert
  reads `path` as it is: a directory named `~` below the current one."""
  if not path.startswith("~"):
    return None
  expanded = os.path.expanduser(path)
  return expanded if expanded != path else None


def as_path(value, name: str) -> str:
  """`value`, a path argument of the Python API, as the str every function here takes.

  Args:
    value: a str or an `os.PathLike` (`pathlib.Path`) naming a local path or a URL.
    name: the argument's name, for the messages (e.g. "path", "vocab_file").

  Raises:
    TypeError: `value` is neither (bytes, a number), naming `name` and the types taken.
    ValueError: an empty path; a leading `~` that names a home directory, which tfbert
      does not expand (`home_expansion`), naming the expanded path to pass instead.
  """
  text = os.fspath(value) if isinstance(value, os.PathLike) else value
  if not isinstance(text, str):
    hint = " (decode bytes to a str)" if isinstance(text, bytes) else ""
    raise TypeError(f"{name} must be a str or an os.PathLike such as pathlib.Path, got "
                    f"{type(value).__name__} {value!r}{hint}")
  if not text:
    raise ValueError(f"{name} is empty: name a file or directory")
  expanded = home_expansion(text)
  if expanded is not None:
    raise ValueError(f"{name} {text!r} starts with '~', which tfbert does not expand (no "
                     "more than open() or tf.io.gfile do): it would name a directory '~' "
                     f"below {os.getcwd()}; pass {expanded!r} (os.path.expanduser), or "
                     f"'./{text}' for a directory named '~'")
  return text


def absolute(path: str) -> str:
  """`os.path.abspath` for a local path; a URL unchanged but for a trailing `/`."""
  path = str(path)
  if is_url(path):
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{rest.rstrip('/')}" if rest.rstrip("/") else path
  return os.path.abspath(path)


def parent(path: str) -> str:
  """The directory holding `path` (absolute for a local path). A URL's parent keeps its
  scheme: `ram://x`'s is `ram://` (`os.path.dirname` says "ram:", a local relative path)."""
  path = absolute(path)
  if is_url(path):
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{posixpath.dirname(rest)}"
  return os.path.dirname(path)


def inside(path: str, directory: str) -> bool:
  """Whether `path` is `directory` or lies below it (both made absolute)."""
  path, directory = absolute(path), absolute(directory)
  return path == directory or path.startswith(directory.rstrip("/") + "/")


@contextlib.contextmanager
def _not_found_as_os_error(path: str) -> Iterator[None]:
  """Raises TensorFlow's filesystem errors as the `OSError` a local path would give."""
  try:
    yield
  except tf.errors.NotFoundError as error:
    raise FileNotFoundError(2, error.message or "No such file or directory", path) from None
  except tf.errors.AlreadyExistsError as error:
    raise FileExistsError(17, error.message or "File exists", path) from None
  except tf.errors.FailedPreconditionError as error:  # e.g. a directory where a file was named.
    raise OSError(20, error.message or "Failed precondition", path) from None


def _listed(path: str) -> bool:
  """Whether `path`'s name is in its parent's listing. TensorFlow's `ram://` filesystem
  calls any string prefix of an existing name a directory (with `ckpt-2.index` present,
  `ckpt-2` and `ckpt` "exist"); only the parent's listing tells. Other schemes: True."""
  if not str(path).startswith("ram://"):
    return True
  path = absolute(path)
  parent_dir, name = path.rsplit("/", 1)
  if parent_dir.endswith(":/"):  # "ram://name": its parent is the filesystem's root.
    return tf.io.gfile.exists(path)
  try:
    return name in {entry.rstrip("/") for entry in tf.io.gfile.listdir(parent_dir)}
  except tf.errors.NotFoundError:
    return False


def exists(path: str) -> bool:
  """Whether a file or directory exists at `path`."""
  if is_url(path):
    return tf.io.gfile.exists(path) and _listed(path)
  return os.path.lexists(path)


def dangling_link(path: str) -> Optional[str]:
  """The target of `path` when it is a symbolic link to nothing, else None (a URL has no
  links). `exists` counts such a link (something is there), `isdir` and `isfile` do not: a
  check that says "an existing file" of it names what is not there."""
  if is_url(path) or not os.path.islink(path) or os.path.exists(path):
    return None
  try:
    return os.readlink(path)
  except OSError:  # Gone meanwhile.
    return None


def missing_file_message(path: str, what: str) -> str:
  """The message for `what` (e.g. "task file") that is not at `path`: "<what> <path> is a
  symbolic link to T, which does not exist" when a link to nothing is there (`ls` lists it,
  so "not found" would puzzle), else "<what> not found: <path>"."""
  target = dangling_link(path)
  if target is not None:
    return f"{what} {path} is a symbolic link to {target}, which does not exist"
  return f"{what} not found: {path}"


def check_not_dangling(path: str, what: str) -> None:
  """Raises FileNotFoundError (`missing_file_message`) when `path` is a symbolic link to
  nothing: an optional record, read when it is there, must not pass as absent when it is
  broken. Nothing there, or a real file, passes."""
  if dangling_link(path) is not None:
    raise FileNotFoundError(missing_file_message(path, what))


def check_found(path: str, what: str) -> None:
  """Raises FileNotFoundError (`missing_file_message`) unless something other than a
  symbolic link to nothing is at `path`."""
  if not exists(path) or dangling_link(path) is not None:
    raise FileNotFoundError(missing_file_message(path, what))


def isdir(path: str) -> bool:
  """Whether `path` is a directory."""
  if is_url(path):
    return tf.io.gfile.isdir(path) and _listed(path)
  return os.path.isdir(path)


def isfile(path: str) -> bool:
  """Whether `path` is a file (exists and is not a directory)."""
  if is_url(path):
    return exists(path) and not tf.io.gfile.isdir(path)
  return os.path.isfile(path)


def size(path: str) -> int:
  """The size of the file at `path` in bytes."""
  if is_url(path):
    with _not_found_as_os_error(path):
      return tf.io.gfile.stat(path).length
  return os.path.getsize(path)


def listdir(path: str) -> list[str]:
  """The names in directory `path` (no trailing `/` on subdirectories), unsorted."""
  if is_url(path):
    with _not_found_as_os_error(path):
      return [name.rstrip("/") for name in tf.io.gfile.listdir(path)]
  return os.listdir(path)


def glob(pattern: str) -> list[str]:
  """The paths matching `pattern` (`*`, `?`, `[...]`), sorted."""
  return sorted(tf.io.gfile.glob(pattern))


def makedirs(path: str) -> None:
  """Creates directory `path` and its parents; fine when it exists."""
  if is_url(path):
    tf.io.gfile.makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def mkdir(path: str) -> None:
  """Creates the single directory `path` (local: honours the umask; fails if it exists)."""
  if is_url(path):
    with _not_found_as_os_error(path):
      tf.io.gfile.mkdir(path)
  else:
    os.mkdir(path)


def remove(path: str) -> None:
  """Removes the file at `path`."""
  if is_url(path):
    with _not_found_as_os_error(path):
      tf.io.gfile.remove(path)
  else:
    os.remove(path)


def rmtree(path: str) -> None:
  """Removes the directory tree at `path`; never raises (missing is fine)."""
  if is_url(path):
    try:
      tf.io.gfile.rmtree(path)
    except (tf.errors.OpError, OSError):
      pass
  else:
    shutil.rmtree(path, ignore_errors=True)


def rename(source: str, target: str, overwrite: bool = True) -> None:
  """Renames a file or directory (`os.replace` locally: atomic for a file).

  On object stores (`gs://`, `s3://`) a rename is a copy then a delete. A URL directory is
  moved file by file here (not every filesystem's rename moves a directory's contents:
  `ram://` renames only the directory's own entry); `overwrite` does not apply to a
  directory, which must not exist at `target`.
  """
  if is_url(source) or is_url(target):
    with _not_found_as_os_error(source):
      if not tf.io.gfile.isdir(source):
        tf.io.gfile.rename(source, target, overwrite=overwrite)
        return
      if tf.io.gfile.exists(target):
        raise FileExistsError(17, "File exists", target)
      for directory, _, names in list(tf.io.gfile.walk(source)):
        moved = target + directory[len(source):]
        tf.io.gfile.makedirs(moved)
        for name in names:
          tf.io.gfile.rename(f"{directory}/{name}", f"{moved}/{name}", overwrite=False)
      tf.io.gfile.rmtree(source)
  elif overwrite:
    os.replace(source, target)
  else:
    os.rename(source, target)


def copy(source: str, target: str) -> None:
  """Copies the file `source` to `target` (replacing it), across filesystems too."""
  if is_url(source) or is_url(target):
    with _not_found_as_os_error(source):
      _truncate(target)
      tf.io.gfile.copy(source, target, overwrite=True)
  else:
    shutil.copyfile(source, target)


def open_file(path: str, mode: str = "r") -> IO:
  """Opens `path` like `open` (text modes as UTF-8); a URL through `tf.io.gfile.GFile`.

  Args:
    path: the file.
    mode: "r", "w", "a", "rb", "wb" or "ab".

  Returns:
    A file object (a context manager); text modes read and write `str`.
  """
  if is_url(path):
    with _not_found_as_os_error(path):
      if "w" in mode:
        _truncate(path)
      f = tf.io.gfile.GFile(path, mode)
      if "r" in mode:
        f.size()  # GFile opens lazily: a missing file fails here, not at the first read.
      return f
  if "b" in mode:
    return open(path, mode)  # pylint: disable=unspecified-encoding
  return open(path, mode, encoding="utf-8")


def _truncate(path: str) -> None:
  """Removes an existing URL file before it is written anew: TensorFlow's `ram://` appends
  to an existing file opened for writing (or copied onto) instead of replacing it."""
  if is_url(path) and tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    tf.io.gfile.remove(path)


def read_text(path: str) -> str:
  """The UTF-8 text of the file at `path`, as Python's text mode reads a local file.

  A leading byte-order mark (which Windows editors and Excel write) is dropped, and line
  ends are "\n" whatever the file used ("\r\n", "\r"), for URLs as for local files.

  Raises:
    FileNotFoundError: naming the file.
    ValueError: bytes that are not UTF-8, naming `path:line` and the byte.
  """
  return decode_utf8(read_bytes(path), path).replace("\r\n", "\n").replace("\r", "\n")


def read_lines(path: str) -> list[str]:
  """The lines of the text file at `path` (`read_text`), split at line ends only.

  Not `str.splitlines`, which also splits at characters a cell or label may hold (U+0085,
  U+2028, U+2029, form feed, ...): a text holding one would become two rows. A final line
  end adds no empty line.
  """
  lines = read_text(path).split("\n")
  return lines[:-1] if lines and lines[-1] == "" else lines


UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")  # UTF-16 byte-order marks (little, big endian).


GZIP_MAGIC = b"\x1f\x8b"  # The first two bytes of every gzip file (RFC 1952).


def gzip_message(path: str) -> str:
  """The error for a gzip-compressed file where UTF-8 text is read (a text reader of a
  task file, CoNLL file or flag file; only SQuAD JSON is read compressed, as its own
  releases are): "save as UTF-8" would be wrong advice."""
  if path.endswith(".gz") and len(path) > 3:
    how = f"gunzip {shlex.quote(path)}), then pass {path[:-3]}"
  else:  # gunzip refuses a name without .gz: write the text under another name.
    how = f"gunzip -c {shlex.quote(path)} > {shlex.quote(path + '.txt')}), then pass that file"
  return f"{path} is gzip-compressed: decompress it ({how}"


def utf16_message(path: str) -> str:
  """The error for a text file saved as UTF-16 (Windows' "Unicode")."""
  return (f"{path}: UTF-16 text (it starts with a UTF-16 byte-order mark, as Windows' "
          "'Unicode' saves); save the file as UTF-8")


def binary_message(path: str, line: int, expected: str) -> str:
  """The error for a file holding a NUL byte (at `line`) where text is read: no text file
  holds one, a binary file (a TFRecord, a checkpoint) or UTF-16 without a byte-order mark
  does. `expected` says what the reader takes, e.g. "--input_file takes plain UTF-8 text"."""
  return (f"{path}:{line}: a NUL byte: {path} is not a text file (a binary file such as a "
          f"TFRecord, or UTF-16 text); {expected}")


def decode_utf8(data: bytes, path: str) -> str:
  """`data` (the bytes of the file at `path`) as UTF-8 text, a leading byte-order mark
  dropped, line ends as they are.

  Raises:
    ValueError: bytes that are not UTF-8, naming `path:line`, the column and the byte; a
      gzip-compressed file (`gzip_message`) or UTF-16 text, naming `path` and what to do.
  """
  if data.startswith(GZIP_MAGIC):
    raise ValueError(gzip_message(path))
  if data.startswith(UTF16_MARKS):
    raise ValueError(utf16_message(path))
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as error:
    line = data.count(b"\n", 0, error.start) + 1
    column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
    raise ValueError(f"{path}:{line}: not UTF-8 text (byte 0x{data[error.start]:02x} at "
                     f"column {column}); save the file as UTF-8") from None
  return text.removeprefix("\ufeff")


def read_bytes(path: str) -> bytes:
  """The bytes of the file at `path`."""
  with open_file(path, "rb") as f:
    return f.read()


def same_content(name: str, old: bytes, new: Union[str, bytes]) -> bool:
  """Whether the existing file `name` (`old` bytes) holds `new` (str or bytes); JSON
  files are compared by value (key order and layout aside)."""
  new = new.encode("utf-8") if isinstance(new, str) else new
  if old == new:
    return True
  if not name.endswith(".json"):
    return False
  try:
    return json.loads(old) == json.loads(new)
  except (ValueError, RecursionError):  # Not JSON (or too deep): not the same file.
    return False
