"""A run directory belongs to one run: a lock, and a recorded configuration that a rerun must match.

Every tool that owns a directory (`run_pretraining`'s `model_dir`, the fine-tuning tools'
`output_dir`) claims it before writing anything there:

1. **Lock.** `claim` takes an exclusive `flock` on `<dir>/.tfbert-run.lock` and writes its
   PID there. A second run on the same directory at the same time fails at once with
   `RunDirectoryError` naming the holder's PID (two runs would interleave `metrics.jsonl`
   and checkpoints). The kernel drops the lock when its process ends, however it ends
   (SIGKILL included), so a killed run never leaves the directory locked; the stale PID in
   the file is harmless.
2. **Records.** The run's resolved configuration is a few JSON files (`bert_config.json`,
   `run_config.json`). On a rerun, `claim` compares the new values with the recorded ones
   and refuses any difference outside the record's `rerun_may_change` keys, listing every
   difference as `key: recorded -> new` (nested keys dotted). `allow_changes=True` (the
   tools' `--allow_config_change`) continues deliberately; the new values are then recorded.
   A refusal's way out names only what the running tool takes: a tool that runs another
   tool's run without that flag (align) says its own (`way_out`).
3. **Nothing before validation.** `claim` writes only the lock file; the tool writes the
   records (`write_records`, atomically) after every other check has passed.
4. **Leftovers.** Temporaries of a killed run in the directory (`tfbert.runtime.atomic`) are
   removed when the claim succeeds.
5. **URLs.** A run directory may be any `tf.io.gfile` path (`gs://bucket/run`). Such a
   filesystem has no `flock`: the lock file still records the holder (`PID@host`), and a
   second claim *in the same process* is refused, but two processes cannot be kept apart
   there: give each run its own directory.
6. **Data.** A record's `data_keys` hold `data_identity` lists (each training file's name,
   size and, where cheap, content hash). A rerun on files of other content (or other files)
   is refused like another configuration, naming each file and what changed: a resumed run
   would continue its checkpoints on other data without a word. A file moved elsewhere (the
   same size and hash under another path) is the same data: the rerun is refused as another
   configuration (its path setting changed), naming the move, not as other data. A record
   written before tfbert recorded its data is not compared there (its data becomes recorded).
7. **A failed start owns nothing.** A run that fails before its first checkpoint in a
   directory it found fresh removes its records again on the way out (`RunLock` as a
   context manager, or `forget_if_untrained`): nothing of it can be continued (a rerun
   starts at step 0 whatever it is given), so the corrected rerun, on other data or with
   other settings, starts clean instead of being refused. A run that logged steps keeps
   its `metrics.jsonl` and TensorBoard files (they say how far it got, until a rerun
   starts over); one that logged none leaves nothing (a directory it created goes).
8. **Outputs.** A directory that is (or lies inside) an output tfbert wrote (an export,
   `best/`) or a SavedModel is never claimed (`check_not_an_output`). While a run holds its
   directory, the outputs it writes record it as the run that wrote them
   (`tfbert.runtime.atomic.current_run`), and an output that another run wrote is refused at
   the claim (`check_outputs`): a replayed `flags.txt` names the old run's export.
"""

import contextlib
import contextvars
import dataclasses
import fcntl
import hashlib
import json
import os
import socket
import threading
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional, Sequence

from absl import logging

from tfbert.runtime import atomic, files, json_values, paths

LOCK_FILE = atomic.RUN_LOCK_FILE

# What a refusal of another configuration, other data or missing records says to do, when
# the running tool has no --allow_config_change (`way_out`); None: the tools' flag.
_WAY_OUT: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
    "tfbert_run_directory_way_out", default=None)


@contextlib.contextmanager
def way_out(text: str):
  """Within this block, `claim`'s refusals of a run of another configuration, other data or
  missing records say `text` as what to do instead of "use another directory, or rerun
  with --allow_config_change ...": for a tool that runs a tool's run without that flag
  (align: "choose another --workdir, or remove <workdir>/runs").

  Args:
    text: the way out, a clause ("choose another --workdir, or remove w/runs").
  """
  token = _WAY_OUT.set(text)
  try:
    yield
  finally:
    _WAY_OUT.reset(token)


def _way_out(continue_with: str) -> str:
  """The way out of a refusal: `way_out`'s text, or another directory or the tools'
  --allow_config_change `continue_with` (what the flag does here)."""
  text = _WAY_OUT.get()
  if text is not None:
    return text
  return f"use another directory, or rerun with --allow_config_change {continue_with}"


class RunDirectoryError(ValueError):
  """The directory is in use by another run, or holds a run with another configuration."""


@dataclasses.dataclass(frozen=True)
class RunRecord:
  """One JSON file of a run's configuration.

  Attributes:
    name: file name in the run directory (e.g. "run_config.json").
    values: the JSON-compatible dict to record.
    rerun_may_change: dotted keys a rerun may change without `allow_changes` (settings that
      do not change what is trained, e.g. how often to log, or where to stop this time).
    fixed_by_checkpoint: keys no rerun may change once the directory holds a checkpoint,
      `allow_changes` or not (the model's shapes: `tfbert.config.SHAPE_FIELDS`); refused at
      the claim, before any record is rewritten, instead of at the restore.
    data_keys: top-level keys holding `data_identity` lists, compared file by file
      (`data_changes`) when the recorded run has them.
    path_keys: keys whose values are paths (or lists of paths), compared as real absolute
      paths (`real_path`): `sst` from the data's parent is the run's `/data/sst`.
  """
  name: str
  values: dict
  rerun_may_change: frozenset = frozenset()
  fixed_by_checkpoint: frozenset = frozenset()
  data_keys: frozenset = frozenset()
  path_keys: frozenset = frozenset()
  key_names: Mapping[str, str] = dataclasses.field(default_factory=dict)  # Key -> its flag.


class RunLock:
  """An exclusive lock of a run directory, held until `release` (or process exit).

  Attributes:
    directory: the locked directory.
    created: whether `acquire_lock` created it.
    fresh: whether the claim found no record of an earlier run there (`claim` sets it).
    recorded: names of the files that record this run there (`claim` lists the records and
      `flags.txt`; the caller adds what else it writes, e.g. the vocabulary), forgotten by
      `forget_if_untrained`.
  """

  def __init__(self, directory: str, fd: Optional[int], created: bool = False):
    self.directory = directory
    self.created = created
    self.fresh = False
    self.recorded: list[str] = []
    self._fd: Optional[int] = fd
    self._held = True

  def release(self) -> None:
    """Drops the lock (idempotent); outputs written later no longer record this run."""
    if self._fd is not None:
      os.close(self._fd)  # Closing the descriptor releases its flock.
      self._fd = None
    if self._held:
      atomic.release_run(self.directory)
    if self._held and files.is_url(self.directory):
      with _URL_LOCKS_GUARD:
        _URL_LOCKS.discard(files.absolute(self.directory))
    self._held = False

  def forget_if_untrained(self) -> bool:
    """After a failure: a run that found the directory fresh and wrote no checkpoint does
    not own it (nothing of it can be continued). The directory goes when the claim created
    it and no step was logged (`has_trained`); otherwise the run's records (`recorded`) go
    and the rest stays (a logged step's `metrics.jsonl`, which says how far it got). A
    corrected rerun, on other data or with other settings, is then not refused. Returns
    whether it forgot the run."""
    if not self.fresh or has_checkpoint(self.directory):
      return False
    logged = has_trained(self.directory)
    if self.created and not logged:  # Everything in it is this run's.
      files.rmtree(self.directory)
    else:
      for name in self.recorded:
        path = os.path.join(self.directory, name)
        if files.isfile(path):
          files.remove(path)
    logging.info("the run failed before its first %s: %s no longer records it%s",
                 "checkpoint" if logged else "step", self.directory,
                 f" ({METRICS_FILE} says how far it got; a rerun starts at step 0)"
                 if logged else "")
    return True

  def __enter__(self) -> "RunLock":
    return self

  def __exit__(self, exc_type, exc, traceback) -> None:
    try:
      if exc_type is not None:
        self.forget_if_untrained()
    finally:
      self.release()


CHECKPOINTS_DIR = "checkpoints"  # `tfbert.training.training_loop`'s, in a run directory.


def has_checkpoint(directory: str) -> bool:
  """Whether `directory` holds a training checkpoint (`checkpoints/*.index`)."""
  folder = os.path.join(directory, CHECKPOINTS_DIR)
  return files.isdir(folder) and any(name.endswith(".index") for name in files.listdir(folder))


METRICS_FILE = "metrics.jsonl"  # The training loop's log, in a run directory.


def has_trained(directory: str) -> bool:
  """Whether a run in `directory` got anywhere: a checkpoint, or a logged step."""
  metrics = os.path.join(directory, METRICS_FILE)
  return has_checkpoint(directory) or (files.isfile(metrics) and files.size(metrics) > 0)


# URL run directories this process holds: their filesystems have no flock.
_URL_LOCKS: set[str] = set()
_URL_LOCKS_GUARD = threading.Lock()


def _acquire_url_lock(directory: str) -> RunLock:
  """`acquire_lock` on a URL filesystem: held within this process only (no flock there)."""
  key = files.absolute(directory)
  path = os.path.join(directory, LOCK_FILE)
  with _URL_LOCKS_GUARD:
    if key in _URL_LOCKS:
      raise RunDirectoryError(
          f"{directory} is in use by another run of this process; wait for it to finish, or "
          "use another directory")
    created = not files.isdir(directory)
    files.makedirs(directory)
    atomic.write_text(path, f"{os.getpid()}@{socket.gethostname()}\n")
    _URL_LOCKS.add(key)
  logging.info("%s is on a filesystem without file locks: tfbert can keep two runs of this "
               "process apart there, not two processes", directory)
  return RunLock(directory, None, created)


def acquire_lock(directory: str) -> RunLock:
  """Locks `directory` (created if missing) for this process.

  On a URL filesystem (no `flock`) the lock holds within this process only; the lock file
  records `PID@host`.

  Raises:
    RunDirectoryError: another process holds it (its PID is named).
  """
  if files.is_url(directory):
    return _acquire_url_lock(directory)
  created = not os.path.isdir(directory)
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, LOCK_FILE)
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
    os.close(fd)
    raise RunDirectoryError(
        f"{directory} is in use by another run (PID {holder}); wait for it to finish, stop "
        "it, or use another directory") from None
  os.ftruncate(fd, 0)
  os.write(fd, f"{os.getpid()}\n".encode("ascii"))
  return RunLock(directory, fd, created)


def flatten(values: Any, prefix: str = "") -> dict[str, Any]:
  """Nested dicts as {dotted key: leaf}; lists and tuples are leaves (compared whole)."""
  if not isinstance(values, dict):
    return {prefix: values}
  flat = {}
  for key, value in values.items():
    flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
  return flat


def _comparable(value: Any) -> Any:
  """JSON's view of a value (tuples as lists), so a recorded value equals its source."""
  return json.loads(json.dumps(value, default=list))


def real_path(value: Any) -> Any:
  """A path as compared (`differences`): local ones absolute with links resolved, a URL
  as `files.absolute` gives it, each of a list so; anything else as it is."""
  if isinstance(value, list):
    return [real_path(v) for v in value]
  if not isinstance(value, str) or not value:
    return value
  return files.absolute(value) if files.is_url(value) else os.path.realpath(value)


def differences(recorded: dict, new: dict, may_change: Iterable[str] = (),
                path_keys: Iterable[str] = (),
                key_names: Mapping[str, str] = MappingProxyType({})) -> list[str]:
  """`key: recorded -> new` for every differing key outside `may_change`, sorted by key;
  the values of `path_keys` compared as real paths (`real_path`); a key of `key_names`
  named so (the flag that sets it, e.g. "--custom_header" for "custom.has_header")."""
  old, now = flatten(_comparable(recorded)), flatten(_comparable(new))
  allowed, paths = set(may_change), set(path_keys)
  missing = object()
  found = []
  for key in sorted(set(old) | set(now)):
    if key in allowed or any(key.startswith(a + ".") for a in allowed):
      continue
    a, b = old.get(key, missing), now.get(key, missing)
    if key in paths and a is not missing and b is not missing:
      a, b = real_path(a), real_path(b)
    if a != b:
      shown = ["(absent)" if v is missing else json.dumps(v) for v in (a, b)]
      found.append(f"{key_names.get(key, key)}: {shown[0]} -> {shown[1]}")
  return found


def _refuse_streams(data_files: Sequence[str]) -> None:
  """Raises ValueError for a data file that is a special file (a named pipe, a socket, a
  device; `paths.special_input_problems`, its one wording): its content is gone once read
  (the run read it already), so opening it again to hash it would wait forever."""
  problems = paths.special_input_problems({"data file": list(data_files)})
  if problems:
    raise ValueError("; ".join(problems))


def held_out_problem(train_files: Sequence[str], eval_files: Sequence[str]) -> Optional[str]:
  """A warning when the held-out files a run evaluates on are among the files it trains on
  (the same file by its real path: a link or another spelling too), else None: its
  evaluation then scores how well the model fits its training data, not how it generalizes,
  and its best model is chosen by that (sweep 18, p02: pretraining's --eval_text_files
  naming the training file, no word)."""
  trained = {real_path(path) for path in train_files}
  shared = [path for path in eval_files if real_path(path) in trained]
  if not shared:
    return None
  return (f"the held-out evaluation reads training data: {', '.join(shared)} "
          f"{'is' if len(shared) == 1 else 'are'} also trained on, so the evaluation (and the "
          "best model it picks) measures fitting the training data, not generalization: "
          "evaluate on files training does not read")


def data_identity(paths: Sequence[str], content: bool = True) -> list[dict[str, Any]]:
  """What identifies a run's data files: [{"file", "bytes", "sha256"}] per path.

  Args:
    paths: the files (local or URL), as the run reads them.
    content: also hash each file's content (a training file of a fine-tuning run: a read
      that costs less than its tokenization); False: name and size only (pretraining
      shards, which may be terabytes).

  Raises:
    ValueError: for a named pipe, socket or device (named), which could not be read again (the
      tools refuse one before any work: `tfbert_flags.common_flags.check_data_files`).
  """
  _refuse_streams(paths)
  identity = []
  for path in paths:
    entry = {"file": files.absolute(path), "bytes": files.size(path)}
    if content:
      digest = hashlib.sha256()
      with files.open_file(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
          digest.update(block)
      entry["sha256"] = digest.hexdigest()
    identity.append(entry)
  return identity


MOVED = "moved to"  # A `data_changes` entry of the same content under another path.


def data_changes(recorded: Sequence[dict], new: Sequence[dict]) -> list[str]:
  """How `new` data differs from `recorded` (`data_identity` lists), one entry per file:
  "<file>: 1234 -> 1300 bytes", "<file>: same size, other content (sha256 1a2b.. -> ..)",
  "<file>: not read before", "<file>: no longer read", or "<file>: moved to <file> (same
  size and sha256)" (`MOVED`: the same content under another path, both hashed). Files are
  matched by their real paths (`real_path`): the same file named through a link or from
  another directory is the same file."""
  old = {real_path(entry.get("file")): entry for entry in recorded}
  now = {real_path(entry.get("file")): entry for entry in new}
  moved = {}  # Recorded file -> the new file of its size and hash (unmatched by path).
  for name in sorted(set(old) - set(now), key=str):
    a = old[name]
    moved[name] = next((other for other in sorted(set(now) - set(old), key=str)
                        if other not in moved.values() and a.get("sha256")
                        and now[other].get("sha256") == a["sha256"]
                        and now[other].get("bytes") == a.get("bytes")), None)
  found = []
  for name in sorted(set(old) | set(now), key=str):
    a, b = old.get(name), now.get(name)
    if moved.get(name) is not None:
      found.append(f"{name}: {MOVED} {moved[name]} (same size and sha256)")
    elif name in moved.values():
      continue  # Named by its move.
    elif a is None or b is None:
      found.append(f"{name}: {'not read before' if a is None else 'no longer read'}")
    elif a.get("bytes") != b.get("bytes"):
      found.append(f"{name}: {a.get('bytes')} -> {b.get('bytes')} bytes")
    elif a.get("sha256") and b.get("sha256") and a["sha256"] != b["sha256"]:
      found.append(f"{name}: same size, other content (sha256 {a['sha256'][:12]} -> "
                   f"{b['sha256'][:12]})")
  return found


BRIEF_CHARACTERS = 250  # What a refusal lists of its differences, its remedy said after.


def brief(differences: Sequence[str], limit: int = BRIEF_CHARACTERS) -> str:
  """`differences` joined by "; " within about `limit` characters: a refusal's remedy follows
  them, and a run on hundreds of shards differs in hundreds of files (every one listed, the
  remedy was cut off the tool's one-line error). What does not fit is counted by kind:
  "...; and 3 more (3 files no longer read)". The first difference of each kind is always
  shown, so every kind is seen by an example (a new shard beside the ones no longer read). A
  difference longer than `limit` (a long list of paths) keeps its head and tail."""
  firsts = {}
  for index, item in enumerate(differences):
    firsts.setdefault(_kind(item), index)
  order = sorted(firsts.values()) + [i for i in range(len(differences))
                                     if i not in firsts.values()]
  differences = [differences[i] for i in order]
  shown, used = [], 0
  for item in differences:
    if len(item) > limit:
      item = f"{item[:limit // 2 - 3]} ... {item[-(limit // 2 - 2):]}"
    if len(shown) >= len(firsts) and used + len(item) > limit:
      break
    shown.append(item)
    used += len(item) + 2
  rest = differences[len(shown):]
  if not rest:
    return "; ".join(shown)
  kinds = {}
  for item in rest:
    kinds[_kind(item)] = kinds.get(_kind(item), 0) + 1
  counts = ", ".join(f"{n} {'files ' if n > 1 else 'file '}{kind}" if kind != "other" else
                     f"{n} other difference{'s' * (n > 1)}" for kind, n in kinds.items())
  return f"{'; '.join(shown)}; and {len(rest)} more ({counts})"


def _kind(difference: str) -> str:
  """The kind of a difference: those of `data_changes`, else "other"."""
  return next((k for k in ("not read before", "no longer read") if difference.endswith(k)),
              "changed" if difference.endswith(" bytes")
              or ": same size, other content" in difference else
              "moved" if is_move(difference) else "other")


def is_move(difference: str) -> bool:
  """Whether a `data_changes` entry is a file moved (the same content under another path)."""
  return f": {MOVED} " in difference and difference.endswith(" (same size and sha256)")


# Keys that tfbert recorded under other names before every setting had one name from flag
# to config field (dotted, as `flatten` writes them). A run directory written then is
# compared, and so resumed, under today's names.
RENAMED_KEYS = {
    "checkpoint_every": "save_checkpoints_steps",
    "log_every": "log_steps",
    "distribution": "distribution_strategy",
    "optimizer.name": "optimizer.optimizer",
    "optimizer.warmup_steps": "optimizer.num_warmup_steps",
    "optimizer.total_steps": "optimizer.num_train_steps",
    "optimizer.schedule_mode": "optimizer.lr_schedule",
    "optimizer.accumulation_steps": "optimizer.gradient_accumulation_steps",
}


def with_current_names(values: dict) -> dict[str, Any]:
  """`values` flattened, with keys of `RENAMED_KEYS` under their current names."""
  return {RENAMED_KEYS.get(key, key): value for key, value in flatten(values).items()}


def _read_record(directory: str, name: str) -> Optional[dict]:
  path = os.path.join(directory, name)
  if not files.exists(path):
    return None
  try:
    return json_values.read(path)
  except (OSError, ValueError) as error:
    raise RunDirectoryError(f"{path}: unreadable run record ({error}); this directory's "
                            "run cannot be checked: use another directory") from None


def other_run(path: str, directory: str) -> Optional[str]:
  """The run directory other than `directory` that `path` lies in, or None.

  A run directory is one a run has claimed (it holds `LOCK_FILE`, which stays after the
  run). A path inside `directory` itself, or inside no run directory, gives None.
  """
  if files.is_url(path) != files.is_url(directory):
    own = None  # One is a URL, the other local: never the same directory.
  else:
    own = directory
  path = files.absolute(path)
  if own is not None and files.inside(path, own):
    return None
  parent = path
  while True:
    if files.isfile(os.path.join(parent, LOCK_FILE)):
      return parent
    up = os.path.dirname(parent)
    if up == parent or up.endswith(":/") or up.endswith(":"):  # "/" or a URL's root "gs:/".
      return None
    parent = up


def check_not_a_run(name: str, path: str, directory: str) -> None:
  """Refuses writing a model's files (`path`) into `directory` when a tool's run claimed
  it (it holds `LOCK_FILE`): they would overwrite the run's own (`vocab.txt`, its tokenizer
  files) and put a second model beside the run's, which `tfbert.load` of the directory
  would then have to choose between.

  Raises:
    RunDirectoryError: naming the setting (`name`), `path` and the run directory.
  """
  if files.isfile(os.path.join(directory, LOCK_FILE)):
    raise RunDirectoryError(
        f"{name} {path}: {directory} is a tfbert run directory (it holds {LOCK_FILE}); "
        "writing a model there would overwrite the run's vocab.txt and put a second model "
        "beside its own: write it to another directory (e.g. a new folder inside the run)")


def check_outputs(directory: str, outputs: Mapping[str, Optional[str]]) -> None:
  """Refuses output paths that lie inside another run's directory, or that another run wrote.

  A replay (`--flagfile=<old run>/flags.txt --output_dir=<new run>`) carries the old run's
  absolute `--export_dir`: inside the old run, or wherever it was, writing there would replace
  the old run's export with the new run's. An output whose `OUTPUT_MARKER` records the run
  that wrote it (`tfbert.runtime.atomic.OutputRecord.run`) is this run's only when that run
  is this directory (or the output lies inside it: a moved run's own).

  Args:
    directory: this run's directory.
    outputs: the run's output paths by setting name (None: not written).

  Raises:
    RunDirectoryError: naming the setting, its path and the run directory it lies in or
      that wrote it.
  """
  for name, path in outputs.items():
    owner = other_run(path, directory) if path else None
    if owner is not None:
      raise RunDirectoryError(_inside_another_run(name, path, owner, directory))
    record = atomic.read_marker(path) if path and files.isdir(path) else None
    if record is not None and atomic.by_another_run(record, path, directory):
      raise RunDirectoryError(another_runs_output(name, path, record, directory))


def another_runs_output(name: str, path: str, record: atomic.OutputRecord,
                        directory: str) -> str:
  """Why the output `path` (setting `name`) cannot be written by the run in `directory`: its
  marker `record` says another run wrote it. The command line's --{name} wins over a
  replayed --flagfile wherever it stands (`tfbert.runtime.cli.flagfiles_first`), so that is
  what to give. The one wording of every output a run checks (`check_outputs`, and a
  task's own outputs)."""
  return (f"{name} {path} is {record.describe()}, not by this run "
          f"{files.absolute(directory)} (a flags.txt replayed with a new output directory?): "
          f"this run would replace it with its own; give --{name} on the command line (a path "
          "inside the new run, say), or remove it if it is no longer needed")


def _inside_another_run(name: str, path: str, owner: str, directory: str) -> str:
  """Why the output `path` (the setting `name`) cannot be written: it is, or lies inside,
  the run directory `owner` of another run. A replayed flags.txt is named as a cause only
  for an absolute path (flags.txt records every path absolute): a relative one was typed."""
  where = ("is the directory of another run" if files.absolute(path) == owner
           else "lies inside another run's directory")
  replay = (f" (a flags.txt replayed with a new --output_dir carries the old run's paths: "
            f"give --{name} on the command line to override it)"
            if files.is_url(path) or os.path.isabs(path) else "")
  return (f"{name} {path} {where} {owner} (it holds {LOCK_FILE}), not this run's "
          f"{files.absolute(directory)}: writing there would replace that run's files; "
          f"choose a --{name} outside it, e.g. inside this run's directory{replay}")


def check_not_an_output(directory: str) -> None:
  """Refuses a run directory that is, or lies inside, an output tfbert wrote (an export,
  `best/`) or a SavedModel (`tfbert.runtime.atomic.enclosing_output`): the run's records,
  checkpoints and model would be written into it (`--output_dir=<export>` once did).

  Raises:
    RunDirectoryError: naming `directory` and what it is.
  """
  found = atomic.enclosing_output(directory)
  if found is None:
    return
  where, what = found
  place = "is" if where == atomic.real_path(directory) else f"lies inside {where},"
  raise RunDirectoryError(
      f"{directory} {place} {what}: a run directory is never an output tfbert wrote nor a "
      "SavedModel (the run's records, checkpoints and model would go into it); choose "
      "another directory, e.g. a new one")


def claim(directory: str, records: Sequence[RunRecord], *,
          allow_changes: bool = False,
          outputs: Mapping[str, Optional[str]] = MappingProxyType({})) -> RunLock:
  """Locks `directory` and checks that `records` continue the run recorded there.

  Args:
    directory: the run directory (created if missing; only the lock file is written).
    records: the run's configuration files with their new values.
    allow_changes: continue even when recorded values differ (they will be replaced).
    outputs: paths outside `directory` the run will write, by setting name (e.g.
      `export_dir`); each must not lie in another run's directory nor be an output another
      run wrote (`check_outputs`), checked before anything is written.

  Returns:
    The held `RunLock` (a context manager); release it when the run ends.

  Raises:
    RunDirectoryError: the directory is (or lies inside) an output tfbert wrote or a
      SavedModel (`check_not_an_output`), an output lies in another run's directory or
      another run wrote it (`check_outputs`), the directory is locked by another process,
      or a record differs (every difference listed, in one line).
  """
  check_not_an_output(directory)
  check_outputs(directory, outputs)
  lock = acquire_lock(directory)
  try:
    found, fixed, data = [], [], []
    lock.fresh = all(_read_record(directory, record.name) is None for record in records)
    lock.recorded = [record.name for record in records] + [FLAGS_FILE]
    checkpointed = has_checkpoint(directory)
    if checkpointed:
      check_records_kept(directory, records, allow_changes)
    for record in records:
      recorded = _read_record(directory, record.name)
      if recorded is not None:
        recorded = with_current_names(recorded)
        found += [f"{record.name} {d}" for d in differences(
            recorded, record.values, record.rerun_may_change | record.data_keys,
            record.path_keys, record.key_names)]
        changes = [change for key in sorted(record.data_keys) if key in recorded
                   for change in data_changes(recorded[key], record.values.get(key) or [])]
        data += [change for change in changes if not is_move(change)]
        # The same data elsewhere: its path setting changed (a configuration difference).
        found += [f"{record.name} {change}" for change in changes if is_move(change)]
        if checkpointed:
          fixed += [f"{record.name} {d}" for d in differences(
              {k: v for k, v in recorded.items() if k in record.fixed_by_checkpoint},
              {k: v for k, v in record.values.items() if k in record.fixed_by_checkpoint})]
    if fixed and allow_changes:
      raise RunDirectoryError(
          f"{directory} holds checkpoints of another model shape: {brief(fixed)}. "
          "--allow_config_change cannot continue them in a model of other shapes: use "
          "another directory")
    if data and not allow_changes:
      raise RunDirectoryError(
          f"{directory} holds a run trained on other data: {brief(data + found)}. Its "
          "checkpoints would continue on the new "
          f"data: {_way_out('to continue this run on it')}")
    if found and not allow_changes:
      raise RunDirectoryError(
          f"{directory} holds a run with another configuration: {brief(found)}. "
          f"{_capitalized(_way_out('to continue this run with the new values'))}")
  except BaseException:
    lock.release()
    raise
  for path in atomic.remove_stale_temporaries(directory):
    logging.info("removed a killed run's leftover %s", path)
  atomic.hold_run(directory)  # What this run writes records it (until `release`).
  return lock


FLAGS_FILE = "flags.txt"


def _capitalized(text: str) -> str:
  return text[:1].upper() + text[1:]


def check_records_kept(directory: str, records: Sequence[RunRecord],
                       allow_changes: bool = False) -> None:
  """A directory holding checkpoints holds every record of the run that wrote them.

  A record that is gone cannot be compared: a rerun with another learning rate resumed the
  checkpoints on the new schedule and recorded the new rate for the whole run. Such a
  directory is refused (`allow_changes` continues it deliberately, the new values recorded).

  Raises:
    RunDirectoryError: naming the missing records and what to do.
  """
  missing = [record.name for record in records
             if not files.exists(os.path.join(directory, record.name))]
  if not missing:
    return
  names = " and ".join(filter(None, [", ".join(missing[:-1]), missing[-1]]))
  if allow_changes:
    logging.warning("%s holds checkpoints but not the run's %s: continuing them with this "
                    "run's settings recorded (--allow_config_change)", directory, names)
    return
  out = _way_out("to continue the checkpoints with this command's settings recorded")
  raise RunDirectoryError(
      f"{directory} holds checkpoints but not the run's {names}: the run's settings cannot "
      "be compared with this command's (its checkpoints would continue on whatever this "
      f"command says, recorded as the whole run's). Restore {names} (a copy of the run; "
      f"{FLAGS_FILE} lists the flags it ran with), or {out}")


def write_records(directory: str, records: Sequence[RunRecord],
                  flagfile: Optional[str] = None) -> None:
  """Writes each record as `<directory>/<name>` (indented JSON, atomically).

  Args:
    directory: the claimed run directory.
    records: the run's configuration records.
    flagfile: the tool's resolved flags (absl flagfile text), written as `flags.txt`:
      `--flagfile=<directory>/flags.txt` replays the run.
  """
  for record in records:
    atomic.write_json(os.path.join(directory, record.name), _comparable(record.values))
  if flagfile is not None:
    atomic.write_text(os.path.join(directory, FLAGS_FILE), flagfile)


def check_outside_runs(outputs: Mapping[str, Optional[str]], tool: str) -> None:
  """Refuses, before any work, a tool's working directory (`align --workdir`, `demo
  --workdir`) that is, or lies inside, a tfbert run directory (one a run claimed: it holds
  `LOCK_FILE`): the tool's data, runs and exports would mix with that run's files (`demo
  --workdir=<a run_classifier run>` put minilm_export/ beside its model.keras). The tools'
  run directories themselves check the same (`check_outputs`).

  Args:
    outputs: {setting name, e.g. "--workdir": directory (None or "": not written)}.
    tool: the tool's name, for the message.

  Raises:
    ValueError: naming the setting, its path and the run directory.
  """
  for name, path in outputs.items():
    if not path:
      continue
    # The run directory `path` is or lies in: against a "own" directory nothing lies in.
    owner = other_run(path, os.path.join(path, LOCK_FILE))
    if owner is not None:
      where = ("is the directory of a tfbert run" if files.absolute(path) == owner
               else f"lies inside the tfbert run directory {owner}")
      raise ValueError(f"{name} {path} {where} (it holds {LOCK_FILE}): {tool} "
                       f"would write its own files among that run's; choose another {name}, "
                       "e.g. a new directory")
