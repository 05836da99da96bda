"""tfbert.runtime.atomic: a file appears under its final name only when complete."""

import glob
import os
import re
import stat
import subprocess
import sys
import time

import pytest

from tfbert.runtime import atomic, files


def test_write_text_replaces_the_file_and_leaves_no_temporary(tmp_path):
  path = tmp_path / "results.json"
  path.write_text("old")
  atomic.write_json(str(path), {"f1": 90.5, "em": 84})
  assert path.read_text() == '{\n  "em": 84,\n  "f1": 90.5\n}\n'
  assert os.listdir(tmp_path) == ["results.json"]


def test_final_files_are_readable_by_others(tmp_path):
  old = os.umask(0o022)
  try:
    atomic.write_text(str(tmp_path / "a.txt"), "x")
  finally:
    os.umask(old)
  assert stat.S_IMODE(os.stat(tmp_path / "a.txt").st_mode) == 0o644


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
  path = tmp_path / "model.keras"
  path.write_text("complete old model")

  def write(temporary):
    with open(temporary, "w") as f:
      f.write("half")
    raise OSError(28, "No space left on device")

  with pytest.raises(OSError, match="No space"):
    atomic.write_with(str(path), write)
  assert path.read_text() == "complete old model"
  assert os.listdir(tmp_path) == ["model.keras"]


def _writer(name):
  def write(temporary):
    files.mkdir(temporary)
    atomic.write_text(f"{temporary}/{name}", name)
  return write


def test_a_directory_is_replaced_as_a_whole(tmp_path):
  final = tmp_path / "export"
  atomic.write_with(str(final), _writer("old.txt"), kind="export")
  atomic.write_with(str(final), _writer("new.txt"), kind="export")
  assert sorted(os.listdir(final)) == [atomic.OUTPUT_MARKER, "new.txt"]
  assert atomic.read_marker(str(final)) == atomic.OutputRecord("export")
  assert os.listdir(tmp_path) == ["export"]


def _tree(root):
  return sorted((os.path.relpath(os.path.join(d, n), root), os.path.getsize(os.path.join(d, n)))
                for d, _, names in os.walk(root) for n in names)


@pytest.mark.parametrize("existing, message", [
    ("run", "a directory tfbert did not write (no .tfbert_output)"),
    # Sweep 27, A112: another run's directory was called one tfbert did not write.
    ("locked run", "is another tfbert run's directory (it holds .tfbert-run.lock), not a "
                   "export"),
    ("best", "is a best model tfbert wrote, not a export"),
    ("file", "is a file, not a directory tfbert wrote as a export"),
])
def test_only_a_directory_of_the_same_kind_is_ever_replaced(tmp_path, existing, message):
  """Replacing `export_dir == output_dir` deleted the whole run (model.keras, checkpoints):
  a directory is replaced only when tfbert wrote it as the same kind of output."""
  final = tmp_path / "target"
  if existing.endswith("run"):
    (final / "checkpoints").mkdir(parents=True)
    if existing == "locked run":
      (final / ".tfbert-run.lock").write_text("1")
    (final / "model.keras").write_text("weights")
    (final / "checkpoints" / "ckpt-1.index").write_text("index")
  elif existing == "best":
    atomic.write_with(str(final), _writer("model.keras"), kind="best model")
  else:
    final.write_text("a file")
  before = _tree(tmp_path)
  with pytest.raises(FileExistsError, match=message.replace("(", r"\(").replace(")", r"\)")):
    atomic.write_with(str(final), _writer("saved_model.pb"), kind="export")
  assert _tree(tmp_path) == before  # Nothing changed, no temporary left.
  with pytest.raises(FileExistsError, match=str(final)):
    atomic.check_replaceable(str(final), "export")  # What a tool asks before any work.


EXPORT = "SavedModel export"


@pytest.fixture
def no_held_run():
  """No run directory held by this process before or after the test (`atomic.current_run`)."""
  assert atomic.current_run() is None
  yield
  assert atomic.current_run() is None


def _write_as(final, task=None, run=None, name="saved_model.pb"):
  """Writes `final` as a SavedModel export of `task` by the run `run` (held meanwhile)."""
  if run is not None:
    atomic.hold_run(str(run))
  try:
    atomic.write_with(str(final), _writer(name), kind=EXPORT, task=task)
  finally:
    if run is not None:
      atomic.release_run(str(run))


@pytest.mark.parametrize("first, second, refusal", [
    # --export_dir=<a classifier export> of run_squad replaced the classifier's export.
    (("BertClassifier", None), ("BertSpanLabeler", None),
     "is a SavedModel export of a BertClassifier tfbert wrote; this would replace it with a "
     "SavedModel export of a BertSpanLabeler"),
    # A replayed flags.txt with a new --output_dir replaced the old run's export.
    (("BertClassifier", "runs/old"), ("BertClassifier", "runs/new"),
     "is a SavedModel export of a BertClassifier written by the run {root}/runs/old; this "
     "would replace it with a SavedModel export of a BertClassifier of the run {root}/runs/new"),
    (("BertClassifier", "runs/old"), ("BertClassifier (id signatures only)", None),
     "written by the run {root}/runs/old; this would replace it with a SavedModel export of "
     "a BertClassifier (id signatures only)"),
])
def test_an_export_is_replaced_only_by_one_of_the_same_task_and_run(tmp_path, no_held_run,
                                                                     first, second, refusal):
  """Every export once recorded one kind, "SavedModel export": any export replaced any other,
  whatever it served and whichever run wrote it."""
  final = tmp_path / "export"
  runs = [None if run is None else tmp_path / run for _, run in (first, second)]
  _write_as(final, first[0], runs[0])
  before = _tree(tmp_path)
  message = refusal.format(root=tmp_path)
  with pytest.raises(FileExistsError, match=re.escape(message)) as refused:
    _write_as(final, second[0], runs[1], "other.pb")
  assert str(final) in str(refused.value) and "remove it or choose another path" in str(
      refused.value)
  assert _tree(tmp_path) == before
  if runs[1] is not None:  # A tool's check before any work gives the same answer.
    with pytest.raises(FileExistsError, match=re.escape(message)):
      atomic.check_replaceable(str(final), EXPORT, second[0], str(runs[1]))
  _write_as(final, first[0], runs[0], "again.pb")  # The same output is replaced.
  assert sorted(os.listdir(final)) == [atomic.OUTPUT_MARKER, "again.pb"]
  assert atomic.read_marker(str(final)) == atomic.OutputRecord(
      EXPORT, first[0], None if runs[0] is None else str(runs[0]))


def test_a_runs_own_output_inside_its_directory_stays_its_own_when_the_run_moves(
    tmp_path, no_held_run):
  (tmp_path / "old").mkdir()
  _write_as(tmp_path / "old" / "export", "BertEncoder", tmp_path / "old")
  os.rename(tmp_path / "old", tmp_path / "moved")  # A run directory resumes where it is.
  _write_as(tmp_path / "moved" / "export", "BertEncoder", tmp_path / "moved", "new.pb")
  assert atomic.read_marker(str(tmp_path / "moved" / "export")).run == str(tmp_path / "moved")
  _write_as(tmp_path / "mine", "BertEncoder")  # Written outside a run: no run to compare.
  _write_as(tmp_path / "mine", "BertEncoder", tmp_path / "moved")
  assert "new.pb" in os.listdir(tmp_path / "moved" / "export")


def test_an_earlier_marker_is_read_as_its_kind_of_unknown_task(tmp_path, no_held_run):
  """A marker holding the kind alone (tfbert before tasks were recorded): an export of some
  model, perhaps another task's, is kept; a kind without tasks is replaced as before."""
  old_export, old_best = tmp_path / "export", tmp_path / "best"
  for folder, kind in ((old_export, EXPORT), (old_best, "best model")):
    folder.mkdir()
    (folder / "saved_model.pb").write_text("old")
    (folder / atomic.OUTPUT_MARKER).write_text(kind + "\n")
  assert atomic.read_marker(str(old_export)) == atomic.OutputRecord(EXPORT, legacy=True)
  with pytest.raises(FileExistsError, match=re.escape(
      f"{old_export} exists and is a SavedModel export an earlier tfbert wrote (its "
      f"{atomic.OUTPUT_MARKER} records the kind alone, not the model it holds nor the run that "
      "wrote it): it may hold another model than a SavedModel export of a BertClassifier")):
    _write_as(old_export, "BertClassifier", name="new.pb")
  assert sorted(os.listdir(old_export)) == [atomic.OUTPUT_MARKER, "saved_model.pb"]
  atomic.check_replaceable(str(old_export), EXPORT)  # The task not known yet: the kind only.
  atomic.write_with(str(old_best), _writer("model.keras"), kind="best model")
  assert sorted(os.listdir(old_best)) == [atomic.OUTPUT_MARKER, "model.keras"]


def test_the_run_a_process_holds_is_recorded_by_what_it_writes(tmp_path, no_held_run):
  atomic.hold_run(str(tmp_path / "a"))
  atomic.hold_run(str(tmp_path / "b"))
  assert atomic.current_run() == str(tmp_path / "b")
  atomic.release_run(str(tmp_path / "b"))
  atomic.write_with(str(tmp_path / "out"), _writer("x"), kind=EXPORT, task="BertEncoder")
  atomic.release_run(str(tmp_path / "a"))
  atomic.release_run(str(tmp_path / "a"))  # Once more: nothing to undo.
  assert atomic.read_marker(str(tmp_path / "out")) == atomic.OutputRecord(
      EXPORT, "BertEncoder", str(tmp_path / "a"))


def test_the_enclosing_output_of_a_path_is_found_at_or_above_it(tmp_path):
  saved = tmp_path / "plain_saved_model"
  (saved / "variables").mkdir(parents=True)
  (saved / "saved_model.pb").write_text("")
  atomic.write_with(str(tmp_path / "best"), _writer("model.keras"), kind="best model")
  (tmp_path / "run").mkdir()
  (tmp_path / "link").symlink_to(saved)
  assert atomic.enclosing_output(str(saved / "variables" / "variables")) == (
      str(saved), "a SavedModel (it holds saved_model.pb)")
  assert atomic.enclosing_output(str(tmp_path / "link" / "variables")) == (
      str(saved), "a SavedModel (it holds saved_model.pb)")
  assert atomic.enclosing_output(str(tmp_path / "best")) == (
      str(tmp_path / "best"), "a best model tfbert wrote")
  assert atomic.enclosing_output(str(tmp_path / "best"), include_self=False) is None
  assert atomic.enclosing_output(str(tmp_path / "run" / "new")) is None


def test_an_empty_directory_is_filled(tmp_path):
  final = tmp_path / "export"
  final.mkdir()
  atomic.write_with(str(final), _writer("new.txt"), kind="export")
  assert sorted(os.listdir(final)) == [atomic.OUTPUT_MARKER, "new.txt"]


def test_temporaries_match_no_glob_of_the_final_names(tmp_path):
  temporary = atomic.temporary_sibling(str(tmp_path / "data-00000-of-00004.tfrecord"))
  open(temporary, "w").close()
  assert atomic.is_temporary(temporary)
  for pattern in ("*tfrecord*", "*.tfrecord", "data-*", "*.json"):
    assert not glob.glob(str(tmp_path / pattern)), pattern


def test_stale_temporaries_of_dead_processes_are_removed_live_ones_kept(tmp_path):
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True)
  dead_pid = int(dead.stdout)
  live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
  try:
    stale = tmp_path / f"{atomic.TEMP_PREFIX}{dead_pid}-{'0' * 32}"
    stale.write_text("partial shard")
    busy = tmp_path / f"{atomic.TEMP_PREFIX}{live.pid}-{'1' * 32}"
    busy.mkdir()
    mine = atomic.temporary_sibling(str(tmp_path / "x"))
    open(mine, "w").close()
    other = tmp_path / "keep.txt"
    other.write_text("user file")
    removed = atomic.remove_stale_temporaries(str(tmp_path))
    assert removed == [str(stale)]
    assert sorted(os.listdir(tmp_path)) == sorted([busy.name, os.path.basename(mine),
                                                   "keep.txt"])
  finally:
    live.kill()
    live.wait()


@pytest.mark.slow
def test_a_full_disk_leaves_nothing_under_the_final_name(small_disk):
  code = (
      "import os, sys\n"
      "from tfbert.runtime import atomic\n"
      "try:\n"
      "  atomic.write_text(os.path.join(sys.argv[1], 'big.json'), 'x' * 200000)\n"
      "except OSError as e:\n"
      "  print('failed', e.errno)\n")
  start = time.perf_counter()
  result = small_disk.run(code, small_disk.path)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.startswith("failed"), (small_disk.kind, result.stdout)
  assert small_disk.files() == []
  assert time.perf_counter() - start < 60



def test_on_a_url_filesystem_a_failing_writer_leaves_the_old_file_and_no_temporary(ram_root):
  path = f"{ram_root}/results.json"
  atomic.write_json(path, {"f1": 1})

  def write(temporary):
    with files.open_file(temporary, "w") as f:
      f.write("half")
    raise OSError(28, "No space left on device")

  with pytest.raises(OSError, match="No space"):
    atomic.write_with(path, write)
  assert files.read_text(path) == '{\n  "f1": 1\n}\n'
  assert files.listdir(ram_root) == ["results.json"]


def test_on_a_url_filesystem_a_directory_is_replaced_as_a_whole(ram_root):
  final = f"{ram_root}/export"
  atomic.write_with(final, _writer("old.txt"), kind="export")
  atomic.write_with(final, _writer("new.txt"), kind="export")
  assert sorted(files.listdir(final)) == [atomic.OUTPUT_MARKER, "new.txt"]
  assert files.listdir(ram_root) == ["export"]
  files.makedirs(f"{ram_root}/run")
  atomic.write_text(f"{ram_root}/run/model.keras", "weights")
  with pytest.raises(FileExistsError, match="tfbert did not write"):
    atomic.write_with(f"{ram_root}/run", _writer("new.txt"), kind="export")
  assert files.listdir(f"{ram_root}/run") == ["model.keras"]


def test_on_a_url_filesystem_a_file_set_moves_its_marker_last(ram_root):
  atomic.write_text(f"{ram_root}/user.txt", "not ours")
  with atomic.file_set(ram_root, "config.json") as staging:
    atomic.write_text(f"{staging}/model.safetensors", "weights")
    atomic.write_text(f"{staging}/config.json", "{}")
  assert sorted(files.listdir(ram_root)) == ["config.json", "model.safetensors", "user.txt"]
  with pytest.raises(FileNotFoundError, match="config.json was not written"):
    with atomic.file_set(ram_root, "config.json") as staging:
      atomic.write_text(f"{staging}/model.safetensors", "other weights")
  assert files.read_text(f"{ram_root}/model.safetensors") == "weights"
  assert sorted(files.listdir(ram_root)) == ["config.json", "model.safetensors", "user.txt"]


def test_a_file_set_with_a_directory_in_a_files_place_moves_nothing(tmp_path):
  """A `vocab.txt` directory beside a model: the set used to stop after its first renames,
  the old marker removed and half the files new (sweep 6)."""
  (tmp_path / "config.json").write_text("old")
  (tmp_path / "vocab.txt").mkdir()
  with pytest.raises(IsADirectoryError, match=r"vocab.txt is a directory where this output "
                                              r"writes a file: nothing was written"):
    with atomic.file_set(str(tmp_path), "config.json") as staging:
      for name in ("model.safetensors", "vocab.txt", "config.json"):
        atomic.write_text(os.path.join(staging, name), "new")
  assert sorted(os.listdir(tmp_path)) == ["config.json", "vocab.txt"]
  assert (tmp_path / "config.json").read_text() == "old"


def test_on_a_url_filesystem_every_other_processes_temporary_is_stale(ram_root):
  # Process IDs of other machines sharing a bucket mean nothing here: only this process's
  # own temporaries are kept.
  other = f"{ram_root}/{atomic.TEMP_PREFIX}{os.getpid() + 1}-{'0' * 32}"
  atomic.write_text(other, "partial shard")
  mine = atomic.temporary_sibling(f"{ram_root}/x")
  atomic.write_text(mine, "being written")
  assert atomic.remove_stale_temporaries(ram_root) == [other]
  assert files.listdir(ram_root) == [os.path.basename(mine)]


def test_a_dangling_link_in_an_outputs_place_is_named_as_one(tmp_path):
  """It was "a file, not a directory tfbert wrote" (sweep 7): there is no file."""
  os.symlink(tmp_path / "gone", tmp_path / "export")
  with pytest.raises(FileExistsError, match=(
      f"^{tmp_path}/export is a symbolic link to {tmp_path}/gone, which does not exist, not a "
      "directory tfbert wrote as a export: refusing to replace it")):
    atomic.check_replaceable(str(tmp_path / "export"), "export")
  assert files.dangling_link(str(tmp_path / "export")) == str(tmp_path / "gone")
  assert files.dangling_link(str(tmp_path)) is None


def test_a_temporary_name_is_short_whatever_the_final_name(tmp_path):
  """Any output whose own name fits its file system can be staged: a temporary's name holds
  none of the final name (a guard, not a fix: it never did)."""
  final = tmp_path / ("p" * 255)
  for tag in ("", "shard"):
    name = os.path.basename(atomic.temporary_sibling(str(final), tag))
    assert atomic.is_temporary(name) and len(name) <= 64, name
  atomic.write_text(str(final), "x")
  assert final.read_text() == "x"


def test_a_directory_where_a_single_file_goes_is_named_before_anything_is_written(tmp_path):
  """`eval_results.json` as a directory gave "<run>/.tfbert-tmp-...: a directory, where a
  file is expected", naming the staging file, not the output (sweep 8, DF02)."""
  (tmp_path / "eval_results.json").mkdir()
  path = str(tmp_path / "eval_results.json")
  message = rf"^{re.escape(path)} is a directory where this output writes a file: nothing was "
  for write in (lambda: atomic.write_json(path, {"a": 1}), lambda: atomic.write_text(path, "x"),
                lambda: atomic.write_with(path, lambda t: open(t, "w").close())):
    with pytest.raises(IsADirectoryError, match=message) as raised:
      write()
    assert not atomic.is_temporary(str(raised.value.filename or ""))
    assert os.listdir(tmp_path) == ["eval_results.json"]  # No temporary left.


def test_an_error_replacing_an_output_names_the_output_not_the_staging_path(
    tmp_path, monkeypatch):
  def refuse(source, target, overwrite=True):
    del overwrite
    raise OSError(18, "Invalid cross-device link", source, None, target)

  path = str(tmp_path / "out.json")
  with monkeypatch.context() as patch:
    patch.setattr(files, "rename", refuse)
    with pytest.raises(OSError) as raised:
      atomic.write_text(path, "x")
  assert raised.value.filename == path and raised.value.errno == 18
  with pytest.raises(OSError) as raised:
    with atomic.file_set(str(tmp_path), "config.json") as staging:
      atomic.write_text(os.path.join(staging, "config.json"), "x")
      monkeypatch.setattr(files, "rename", refuse)  # The set's own moves fail.
  assert raised.value.filename == str(tmp_path / "config.json")
  assert os.listdir(tmp_path) == []


def test_a_marker_nested_too_deeply_reads_as_an_earlier_tfberts(tmp_path):
  (tmp_path / atomic.OUTPUT_MARKER).write_text("[" * 100_000)
  assert atomic.read_marker(str(tmp_path)).legacy  # It raised a RecursionError.


def test_a_run_record_names_the_run_that_wrote_a_shared_directory(tmp_path):
  """A directory written file by file beside the user's files (a sentence-transformers
  directory) carries no OUTPUT_MARKER: `RUN_RECORD` says which run wrote it, so a replay
  of that run's flags.txt into a new run can be refused (sweep 10 c119)."""
  directory = str(tmp_path / "st")
  os.makedirs(directory)
  assert atomic.read_run_record(directory) is None
  atomic.write_run_record(directory, "sentence-transformers directory", str(tmp_path / "a"))
  record = atomic.read_run_record(directory)
  assert record == atomic.OutputRecord("sentence-transformers directory",
                                       run=str(tmp_path / "a"))
  assert atomic.by_another_run(record, directory, str(tmp_path / "b"))
  assert not atomic.by_another_run(record, directory, str(tmp_path / "a"))
  assert atomic.describe_output(directory) is None  # Not an output nothing may go into.
  atomic.write_run_record(directory, "sentence-transformers directory")  # Outside a run.
  assert atomic.read_run_record(directory) is None
  with open(os.path.join(directory, atomic.RUN_RECORD), "w") as f:
    f.write("not json")
  assert atomic.read_run_record(directory) is None


def test_a_missing_or_file_directory_is_named_never_the_temporary(tmp_path):
  # Sweep 34, B4b: every atomic write named its hidden '.tfbert-tmp-...' file instead.
  missing = tmp_path / "missing"
  writes = {
      "write_text": lambda d: atomic.write_text(str(d / "a.txt"), "x"),
      "write_with": lambda d: atomic.write_with(str(d / "a.bin"),
                                                lambda t: open(t, "wb").close()),
      "file_set": lambda d: atomic.file_set(str(d), "config.json").__enter__(),
  }
  for name, write in writes.items():
    with pytest.raises(FileNotFoundError, match="its directory does not exist") as e:
      write(missing)
    assert e.value.filename == str(missing), name
    assert "tfbert-tmp" not in str(e.value), name
  (tmp_path / "plain").write_text("a file, not a directory")
  with pytest.raises(NotADirectoryError, match="its directory is not a directory") as e:
    atomic.write_text(str(tmp_path / "plain" / "a.txt"), "x")
  assert e.value.filename == str(tmp_path / "plain")
  assert sorted(os.listdir(tmp_path)) == ["plain"]


def test_other_errors_inside_the_block_are_raised_as_they_are(tmp_path):
  def write(temporary):
    open(os.path.join(temporary, "missing", "x"), "w").close()  # The directory exists.

  with pytest.raises(FileNotFoundError, match="tfbert-tmp"):
    atomic.write_with(str(tmp_path / "out"), write)
  assert os.listdir(tmp_path) == []
