"""Faults for tests: a disk that fills up, and processes killed by PID.

`limited_disk` gives a directory where writes fail past a size limit:
* a real full disk (ENOSPC) where the test runs as root and may mount a small tmpfs;
* else a file-size limit (`RLIMIT_FSIZE`, SIGXFSZ ignored, so a write past the limit fails
  with EFBIG), applied to the child process that does the writing.
Either way the writing happens in a child Python process (`LimitedDisk.run`, forked by
`tests.forked` from a server that imported TensorFlow once, or a fresh interpreter where a
fork cannot serve), so the parent test can inspect what was left behind.
"""

import contextlib
import os
import subprocess
import sys
import uuid

from tests import forked

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_LIMIT_FILE_SIZE = """
import resource, signal, sys
limit = int(sys.argv.pop(1))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
code = sys.argv.pop(1)
exec(compile(code, "<test code>", "exec"), {"__name__": "__main__"})
"""


class LimitedDisk:
  """A directory (`path`) whose writes fail past `limit` bytes (see the module)."""

  def __init__(self, path: str, limit: int, kind: str):
    self.path, self.limit, self.kind = path, limit, kind

  def run(self, code: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs Python `code` with argv `args` in a child process (cwd: the repository, which
    `python -c` puts first on the path)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if self.kind == "tmpfs":
      argv = [sys.executable, "-c", code, *args]
    else:
      argv = [sys.executable, "-c", _LIMIT_FILE_SIZE, str(self.limit), code, *args]
    return forked.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                      timeout=timeout)

  def files(self) -> list[str]:
    """Every file and directory under `path`, relative, sorted."""
    found = []
    for root, dirs, names in os.walk(self.path):
      for name in dirs + names:
        found.append(os.path.relpath(os.path.join(root, name), self.path))
    return sorted(found)


def _mount_tmpfs(path: str, size: int) -> bool:
  if os.geteuid() != 0:
    return False
  result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                          capture_output=True, check=False)
  return result.returncode == 0


@contextlib.contextmanager
def limited_disk(parent, limit: int):
  """A `LimitedDisk` under `parent` of `limit` bytes (tmpfs if mountable, else RLIMIT_FSIZE).

  tmpfs sizes are whole pages: `limit` is rounded up to 4096 bytes.
  """
  path = os.path.join(str(parent), f"disk-{uuid.uuid4().hex[:8]}")
  os.makedirs(path)
  limit = -(-limit // 4096) * 4096
  mounted = _mount_tmpfs(path, limit)
  try:
    yield LimitedDisk(path, limit, "tmpfs" if mounted else "rlimit")
  finally:
    if mounted:
      subprocess.run(["umount", "-l", path], capture_output=True, check=False)


def fail_renames_to(monkeypatch, suffix: str, error: BaseException) -> None:
  """Makes `os.replace` raise `error` for a destination ending in `suffix` (a crash or a
  failure at that rename); every other rename still happens. `monkeypatch.undo()` ends it."""
  rename = os.replace

  def replace(src, dst):
    if str(dst).endswith(suffix):
      raise error
    rename(src, dst)

  monkeypatch.setattr(os, "replace", replace)
