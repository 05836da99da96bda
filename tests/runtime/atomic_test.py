"""tfbert.runtime.atomic: a file appears under its final name only when complete."""

import glob
import os
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
  assert (final / atomic.OUTPUT_MARKER).read_text() == "export\n"
  assert os.listdir(tmp_path) == ["export"]


def _tree(root):
  return sorted((os.path.relpath(os.path.join(d, n), root), os.path.getsize(os.path.join(d, n)))
                for d, _, names in os.walk(root) for n in names)


@pytest.mark.parametrize("existing, message", [
    ("run", "a directory tfbert did not write (no .tfbert_output)"),
    ("best", "is a best model tfbert wrote, not a export"),
    ("file", "is a file, not a directory tfbert wrote as a export"),
])
def test_only_a_directory_of_the_same_kind_is_ever_replaced(tmp_path, existing, message):
  """Replacing `export_dir == output_dir` deleted the whole run (model.keras, checkpoints):
  a directory is replaced only when tfbert wrote it as the same kind of output."""
  final = tmp_path / "target"
  if existing == "run":
    (final / "checkpoints").mkdir(parents=True)
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


def test_on_a_url_filesystem_every_other_processes_temporary_is_stale(ram_root):
  # Process IDs of other machines sharing a bucket mean nothing here: only this process's
  # own temporaries are kept.
  other = f"{ram_root}/{atomic.TEMP_PREFIX}{os.getpid() + 1}-{'0' * 32}"
  atomic.write_text(other, "partial shard")
  mine = atomic.temporary_sibling(f"{ram_root}/x")
  atomic.write_text(mine, "being written")
  assert atomic.remove_stale_temporaries(ram_root) == [other]
  assert files.listdir(ram_root) == [os.path.basename(mine)]
