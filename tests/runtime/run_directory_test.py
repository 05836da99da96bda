"""tfbert.runtime.run_directory: one run per directory, and a rerun must match the recorded run."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests import forked, helpers
from tfbert.runtime import atomic, files, run_directory
from tfbert.runtime.run_directory import RunDirectoryError, RunRecord

REPO = helpers.ROOT
_HOLD_LOCK = """
import os, sys, time
from tfbert.runtime import run_directory
lock = run_directory.acquire_lock(sys.argv[1])
os.rename(sys.argv[2] + ".tmp", sys.argv[2])  # Says "locked" at once and whole.
time.sleep(120)
"""


def _records(learning_rate=1e-4, layers=3, log_steps=10):
  return [RunRecord("bert_config.json", {"num_hidden_layers": layers, "hidden_size": 33}),
          RunRecord("run_config.json",
                    {"optimizer": {"learning_rate": learning_rate, "num_train_steps": 50},
                     "input_files": ("a.tfrecord", "b.tfrecord"), "log_steps": log_steps},
                    rerun_may_change=frozenset({"log_steps"}))]


def _holder(directory):
  """A process holding the directory's lock (started, lock taken), forked from the suite's
  server (tests/forked.py): another process is the point, not a fresh interpreter."""
  marker = os.path.join(os.path.dirname(directory), f"{os.path.basename(directory)}.locked")
  open(marker + ".tmp", "w").close()
  process = forked.popen([sys.executable, "-c", _HOLD_LOCK, str(directory), marker], cwd=REPO)
  deadline = time.monotonic() + 120
  while not os.path.exists(marker):
    assert process.poll() is None, f"the lock holder exited with {process.returncode}"
    assert time.monotonic() < deadline, "the lock holder did not take the lock"
    time.sleep(0.02)
  return process


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_a_second_concurrent_run_is_refused_naming_the_holders_pid(tmp_path):
  holder = _holder(tmp_path)
  try:
    with pytest.raises(RunDirectoryError, match=f"in use by another run \\(PID {holder.pid}\\)"):
      run_directory.claim(str(tmp_path), _records())
    assert not (tmp_path / "run_config.json").exists()
  finally:
    holder.kill()
    holder.wait()


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_a_killed_runs_lock_is_released(tmp_path):
  holder = _holder(tmp_path)
  os.kill(holder.pid, signal.SIGKILL)
  holder.wait()
  with run_directory.claim(str(tmp_path), _records()) as lock:
    assert lock.directory == str(tmp_path)


def test_the_lock_is_released_for_the_next_run_of_the_same_process(tmp_path):
  with run_directory.claim(str(tmp_path), _records()):
    with pytest.raises(RunDirectoryError, match=f"PID {os.getpid()}"):
      run_directory.claim(str(tmp_path), _records())
  run_directory.claim(str(tmp_path), _records()).release()


def test_a_rerun_with_the_same_configuration_continues(tmp_path):
  with run_directory.claim(str(tmp_path), _records()):
    run_directory.write_records(str(tmp_path), _records())
  # Tuples are recorded as JSON lists; log_steps may change on a rerun.
  run_directory.claim(str(tmp_path), _records(log_steps=3)).release()


def test_a_rerun_with_another_model_or_schedule_lists_every_difference(tmp_path):
  run_directory.write_records(str(tmp_path), _records())
  before = {n: (tmp_path / n).read_text() for n in ("bert_config.json", "run_config.json")}
  with pytest.raises(RunDirectoryError) as error:
    run_directory.claim(str(tmp_path), _records(learning_rate=2e-4, layers=5))
  message = str(error.value)
  assert "\n" not in message
  assert "bert_config.json num_hidden_layers: 3 -> 5" in message
  assert "run_config.json optimizer.learning_rate: 0.0001 -> 0.0002" in message
  assert "--allow_config_change" in message
  # Nothing of the old run was touched, and the lock was given back.
  assert {n: (tmp_path / n).read_text() for n in before} == before
  run_directory.claim(str(tmp_path), _records()).release()


def test_allow_changes_continues_and_records_the_new_values(tmp_path):
  run_directory.write_records(str(tmp_path), _records())
  with run_directory.claim(str(tmp_path), _records(layers=5), allow_changes=True):
    run_directory.write_records(str(tmp_path), _records(layers=5))
  recorded = json.loads((tmp_path / "bert_config.json").read_text())
  assert recorded["num_hidden_layers"] == 5


def test_a_checkpointed_run_refuses_another_shape_even_deliberately_before_any_write(tmp_path):
  """With checkpoints, `allow_changes` may change the schedule but not a shape the
  checkpoints hold: refused at the claim, records untouched (the restore would fail later,
  after the rerun had rewritten them)."""
  shaped = [RunRecord(r.name, r.values, r.rerun_may_change,
                      fixed_by_checkpoint=frozenset({"num_hidden_layers", "hidden_size"}))
            for r in _records()]
  run_directory.write_records(str(tmp_path), shaped)
  with run_directory.claim(str(tmp_path), shaped[:1] + _records(layers=5)[1:],
                           allow_changes=True):
    pass  # No checkpoint yet: a new shape may start over deliberately.
  (tmp_path / "checkpoints").mkdir()
  (tmp_path / "checkpoints" / "ckpt-2.index").write_bytes(b"")
  before = {n: (tmp_path / n).read_text() for n in ("bert_config.json", "run_config.json")}
  wider = [RunRecord(r.name, {**r.values, "num_hidden_layers": 5}, r.rerun_may_change,
                     r.fixed_by_checkpoint) if r.name == "bert_config.json" else r
           for r in shaped]
  with pytest.raises(run_directory.RunDirectoryError, match=re.escape(
      f"{tmp_path} holds checkpoints of another model shape: bert_config.json "
      "num_hidden_layers: 3 -> 5. --allow_config_change cannot continue them")):
    run_directory.claim(str(tmp_path), wider, allow_changes=True)
  assert {n: (tmp_path / n).read_text() for n in before} == before
  longer = _records(learning_rate=2e-4)
  run_directory.claim(str(tmp_path), shaped[:1] + longer[1:], allow_changes=True).release()


def test_differences_name_added_and_removed_keys():
  found = run_directory.differences({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"d": 2}})
  assert found == ["b.c: 2 -> (absent)", "b.d: (absent) -> 2"]


def test_an_unreadable_record_is_named(tmp_path):
  (tmp_path / "run_config.json").write_text("{ half")
  with pytest.raises(RunDirectoryError, match="run_config.json: unreadable run record"):
    run_directory.claim(str(tmp_path), _records())


def test_a_killed_runs_temporaries_are_removed_on_claim(tmp_path):
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True)
  stale = tmp_path / f"{atomic.TEMP_PREFIX}{int(dead.stdout)}-{'a' * 32}"
  stale.write_text("half of model.keras")
  run_directory.claim(str(tmp_path), _records()).release()
  assert not stale.exists()


def test_a_run_recorded_under_earlier_setting_names_continues_under_todays(tmp_path):
  # run_config.json as tfbert wrote it before each setting had one name (commit 2247a15).
  earlier = {"checkpoint_every": 100, "log_every": 10, "distribution": "mirrored",
             "optimizer": {"name": "adamw", "warmup_steps": 2, "total_steps": 50,
                           "schedule_mode": "google", "accumulation_steps": 4}}
  today = {"save_checkpoints_steps": 100, "log_steps": 10, "distribution_strategy": "mirrored",
           "optimizer": {"optimizer": "adamw", "num_warmup_steps": 2, "num_train_steps": 50,
                         "lr_schedule": "google", "gradient_accumulation_steps": 4}}
  atomic.write_json(str(tmp_path / "run_config.json"), earlier)
  run_directory.claim(str(tmp_path), [RunRecord("run_config.json", today)]).release()
  changed = {**today, "optimizer": {**today["optimizer"], "num_train_steps": 60}}
  with pytest.raises(RunDirectoryError, match=r"optimizer.num_train_steps: 50 -> 60$|"
                                              r"optimizer.num_train_steps: 50 -> 60\."):
    run_directory.claim(str(tmp_path), [RunRecord("run_config.json", changed)])


def _fail_after_recording(directory, records, extra=(), trained=lambda: None):
  with pytest.raises(RuntimeError, match="before the first step"):
    with run_directory.claim(directory, records) as lock:
      run_directory.write_records(directory, records, "--seed=1\n")
      for name in extra:
        lock.recorded.append(name)
        open(os.path.join(directory, name), "w", encoding="utf-8").close()
      trained()
      raise RuntimeError("before the first step")


def test_a_run_that_fails_before_its_first_checkpoint_does_not_own_its_directory(tmp_path):
  fresh = str(tmp_path / "fresh")
  _fail_after_recording(fresh, _records(), extra=["vocab.txt"])
  assert not os.path.exists(fresh)  # Created by the claim: everything in it is the run's.
  # Beside a user's own file the directory stays, without the run's records.
  os.makedirs(tmp_path / "kept")
  (tmp_path / "kept" / "notes.txt").write_text("mine")
  _fail_after_recording(str(tmp_path / "kept"), _records())
  assert sorted(os.listdir(tmp_path / "kept")) == [run_directory.LOCK_FILE, "notes.txt"]
  # The corrected rerun (another learning rate) is not refused as another configuration.
  run_directory.claim(str(tmp_path / "kept"), _records(learning_rate=2e-4)).release()


@pytest.mark.parametrize("earlier", ["records", "checkpoint"])
def test_a_failure_keeps_an_earlier_run_and_one_that_trained(tmp_path, earlier):
  directory = str(tmp_path / "run")
  os.makedirs(directory)
  if earlier == "records":  # An earlier run recorded there: its directory, not this one's.
    run_directory.write_records(directory, _records())
  def trained():  # This run trained to its first checkpoint, then failed.
    os.makedirs(os.path.join(directory, "checkpoints"))
    open(os.path.join(directory, "checkpoints", "ckpt-1.index"), "w").close()
  _fail_after_recording(directory, _records(),
                        trained=trained if earlier == "checkpoint" else lambda: None)
  assert json.loads((tmp_path / "run" / "run_config.json").read_text())[
      "optimizer"]["learning_rate"] == 1e-4
  assert run_directory.has_checkpoint(directory) == (earlier == "checkpoint")


@pytest.mark.parametrize("created", [True, False])
def test_a_run_that_logged_steps_but_no_checkpoint_keeps_its_log_not_its_records(
    tmp_path, created):
  directory = str(tmp_path / "run")
  if not created:
    os.makedirs(directory)
  def logged():  # It logged a step, then failed before its first checkpoint.
    with open(os.path.join(directory, run_directory.METRICS_FILE), "w") as f:
      f.write('{"step": 1, "loss": 2.5}\n')
  _fail_after_recording(directory, _records(), extra=["vocab.txt"], trained=logged)
  # The log says how far it got; nothing records the run, which nothing can continue.
  assert sorted(os.listdir(directory)) == [run_directory.LOCK_FILE, run_directory.METRICS_FILE]
  # The corrected rerun (another learning rate) is not refused.
  run_directory.claim(directory, _records(learning_rate=2e-4)).release()


def test_an_output_inside_another_run_is_refused_before_anything_is_written(tmp_path):
  old, new = tmp_path / "old", tmp_path / "new"
  run_directory.claim(str(old), [RunRecord("run_config.json", {"a": 1})]).release()
  replayed = str(old / "export")  # A flags.txt's --export_dir, replayed into `new`.
  with pytest.raises(RunDirectoryError, match=rf"export_dir {replayed} lies inside another "
                     rf"run's directory {old} \(it holds \.tfbert-run\.lock\), not this "
                     rf"run's {new}: .*"
                     r"choose a --export_dir outside it.*give --export_dir on the command "
                     r"line to override it"):
    run_directory.claim(str(new), [], outputs={"export_dir": replayed})
  assert not new.exists()
  # Inside its own run, outside any run, or unset: accepted.
  for path in (str(new / "export"), str(tmp_path / "exports" / "x"), None):
    run_directory.claim(str(new), [], outputs={"export_dir": path}).release()
  # The run directory itself counts, and a nested path is found from any depth.
  assert run_directory.other_run(str(old), str(new)) == str(old)
  assert run_directory.other_run(str(old / "a" / "b"), str(new)) == str(old)
  assert run_directory.other_run(str(old / "a"), str(old)) is None



def _export(folder, task="BertClassifier", run=None, kind="SavedModel export"):
  """A planted output `folder` as tfbert records it (`saved_model.pb` and its marker)."""
  folder.mkdir(parents=True)
  (folder / "saved_model.pb").write_text("graph")
  staging = str(folder)
  atomic.write_marker(staging, atomic.OutputRecord(kind, task, run))
  return folder


def test_an_export_another_run_wrote_is_refused_at_the_claim(tmp_path):
  """`--flagfile=<old run>/flags.txt --output_dir=<new>` replaced the old run's `--export_dir`
  (outside the old run) with the new run's model."""
  old, new = tmp_path / "old", tmp_path / "new"
  export = _export(tmp_path / "exports" / "mrpc", run=str(old))
  with pytest.raises(RunDirectoryError, match=re.escape(
      f"export_dir {export} is a SavedModel export of a BertClassifier written by the run "
      f"{old}, not by this run {new} (a flags.txt replayed with a new output directory?): "
      "this run would replace it with its own; give --export_dir on the command line (a path "
      "inside the new run, say), or remove it if it is no longer needed")):
    run_directory.claim(str(new), [], outputs={"export_dir": str(export)})
  assert not new.exists()
  # The run that wrote it, a moved run's own export inside it, or one written outside a run.
  run_directory.claim(str(old), [], outputs={"export_dir": str(export)}).release()
  inside = _export(new / "export", run=str(tmp_path / "before_the_move"))
  run_directory.claim(str(new), [], outputs={"export_dir": str(inside)}).release()
  loose = _export(tmp_path / "loose")
  run_directory.claim(str(new), [], outputs={"export_dir": str(loose)}).release()


@pytest.mark.parametrize("planted, what", [
    ("export", "is a SavedModel export of a BertClassifier written by the run {root}/old"),
    ("saved_model", "is a SavedModel (it holds saved_model.pb)"),
    ("best", "is a best model tfbert wrote"),
    ("inside", "lies inside {root}/export, a SavedModel export of a BertClassifier written by "
     "the run {root}/old"),
])
def test_an_output_tfbert_wrote_or_a_saved_model_is_never_a_run_directory(tmp_path, planted,
                                                                          what):
  """`--output_dir=<an export>` and `--model_dir=<an export>` wrote a run into the export."""
  export = _export(tmp_path / "export", run=str(tmp_path / "old"))
  directory = {"export": export, "inside": export / "run"}.get(planted)
  if planted == "saved_model":
    directory = tmp_path / "saved_model"
    directory.mkdir()
    (directory / "saved_model.pb").write_text("graph")
  elif planted == "best":
    directory = _export(tmp_path / "best", None, kind="best model")
  before = sorted(os.listdir(directory)) if directory.exists() else None
  with pytest.raises(RunDirectoryError, match=re.escape(
      f"{directory} {what.format(root=tmp_path)}: a run directory is never an output tfbert "
      "wrote nor a SavedModel")):
    run_directory.claim(str(directory), _records())
  assert (sorted(os.listdir(directory)) if directory.exists() else None) == before


def test_a_held_run_is_recorded_by_the_outputs_written_meanwhile(tmp_path):
  assert atomic.current_run() is None
  with run_directory.claim(str(tmp_path / "run"), _records()):
    assert atomic.current_run() == str(tmp_path / "run")
    atomic.write_with(str(tmp_path / "export"), lambda path: files.makedirs(path),
                      kind="SavedModel export", task="BertEncoder")
  assert atomic.current_run() is None
  assert atomic.read_marker(str(tmp_path / "export")).run == str(tmp_path / "run")


def test_a_url_run_directory_is_claimed_checked_and_locked_within_the_process(ram_root):
  run = f"{ram_root}/run"
  with run_directory.claim(run, _records()) as lock:
    assert lock.created
    assert files.read_text(f"{run}/{run_directory.LOCK_FILE}").startswith(f"{os.getpid()}@")
    # No flock on such a filesystem: a second claim of this process is still refused.
    with pytest.raises(RunDirectoryError, match="in use by another run of this process"):
      run_directory.claim(run, _records())
    run_directory.write_records(run, _records(), flagfile="--learning_rate=0.0001\n")
  with pytest.raises(RunDirectoryError, match=r"learning_rate: 0\.0001 -> 0\.0002"):
    run_directory.claim(run, _records(learning_rate=2e-4))
  run_directory.claim(run, _records(log_steps=3)).release()  # Released after the refusal.
  assert sorted(files.listdir(run)) == sorted(
      [run_directory.LOCK_FILE, "bert_config.json", "run_config.json", "flags.txt"])


def test_a_url_run_that_fails_before_its_first_step_does_not_own_its_directory(ram_root):
  fresh = f"{ram_root}/fresh"
  with pytest.raises(RuntimeError, match="before the first step"):
    with run_directory.claim(fresh, _records()):
      run_directory.write_records(fresh, _records())
      raise RuntimeError("before the first step")
  assert not files.exists(fresh)
  files.makedirs(f"{fresh}/checkpoints")  # One that got to a checkpoint keeps it.
  atomic.write_text(f"{fresh}/checkpoints/ckpt-1.index", "")
  assert run_directory.has_checkpoint(fresh) and run_directory.has_trained(fresh)


def test_a_url_output_inside_another_url_run_is_refused(ram_root):
  old, new = f"{ram_root}/old", f"{ram_root}/new"
  run_directory.claim(old, [RunRecord("run_config.json", {"a": 1})]).release()
  with pytest.raises(RunDirectoryError, match=rf"export_dir {old}/export lies inside another "
                     rf"run's directory {old} \(it holds \.tfbert-run\.lock\), not this "
                     rf"run's {new}: "):
    run_directory.claim(new, [], outputs={"export_dir": f"{old}/export"})
  assert not files.exists(new)
  assert run_directory.other_run(f"{old}/a/b", new) == old
  assert run_directory.other_run(f"{new}/export", new) is None
  assert run_directory.other_run(f"{ram_root}/elsewhere/x", new) is None


def _data_record(paths, content=True):
  return RunRecord("data.json", {"train": run_directory.data_identity(paths, content)},
                   data_keys=frozenset({"train"}))


def _run_on(tmp_path, paths, content=True) -> tuple[str, list[RunRecord]]:
  """tmp_path/run as a run trained on `paths` leaves it, and its records (`_records` and
  `_data_record`), written there."""
  run = str(tmp_path / "run")
  records = _records() + [_data_record(paths, content)]
  with run_directory.claim(run, records):
    run_directory.write_records(run, records)
  return run, records


def test_a_rerun_on_other_training_data_is_refused_naming_the_file_and_the_change(tmp_path):
  train = tmp_path / "train.tsv"
  train.write_text("a\t1\nb\t0\n")
  run, _ = _run_on(tmp_path, [str(train)])
  recorded = (tmp_path / "run" / "data.json").read_text()
  train.write_text("a\t1\nb\t0\nc\t1\n")  # Grown.
  with pytest.raises(RunDirectoryError, match=rf"other data: {re.escape(str(train))}: 8 -> 12 "
                                              "bytes.*--allow_config_change"):
    run_directory.claim(run, _records() + [_data_record([str(train)])])
  train.write_text("a\t0\nb\t1\n")  # Same size, labels swapped.
  with pytest.raises(RunDirectoryError, match=r"train.tsv: same size, other content \(sha256"):
    run_directory.claim(run, _records() + [_data_record([str(train)])])
  other = tmp_path / "other.tsv"
  other.write_text("a\t1\nb\t1\n")  # Not the recorded train.tsv's content (that is a move).
  with pytest.raises(RunDirectoryError, match=r"other data: .*other.tsv: not read before; "
                                              ".*train.tsv: no longer read"):
    run_directory.claim(run, _records() + [_data_record([str(other)])])
  assert (tmp_path / "run" / "data.json").read_text() == recorded  # Nothing rewritten.

  run_directory.claim(run, _records() + [_data_record([str(train)])],
                      allow_changes=True).release()  # Deliberately, on the new data.


def _moved_run_records(train, tmp_path):
  """A fine-tuning run's records (`fine_tuning.claim_run_directory`'s) reading `train`."""
  values = {"train_file": str(train), "output_dir": str(tmp_path / "run")}
  return [RunRecord("run_config.json", values, frozenset({"output_dir"}),
                    path_keys=frozenset(values)), _data_record([str(train)])]


def test_a_resume_on_its_data_moved_elsewhere_is_refused_naming_the_setting_and_the_move(
    tmp_path):
  """A resume whose train file moved to another folder (same content, the
  new path given) was refused as "a run trained on other data" ("no longer read", "not read
  before"), with the --allow_config_change that continues it "on the new data": the data is
  the run's, only its path setting changed. It is refused as another configuration naming
  the setting, both paths and the move; --allow_config_change continues it."""
  (tmp_path / "a").mkdir()
  (tmp_path / "b").mkdir()
  old, new = tmp_path / "a" / "train.tsv", tmp_path / "b" / "train.tsv"
  old.write_text("a\t1\nb\t0\n")
  run = str(tmp_path / "run")
  with run_directory.claim(run, _moved_run_records(old, tmp_path)):
    run_directory.write_records(run, _moved_run_records(old, tmp_path))
  os.replace(old, new)
  with pytest.raises(RunDirectoryError) as error:
    run_directory.claim(run, _moved_run_records(new, tmp_path))
  assert str(error.value) == (
      f"{run} holds a run with another configuration: run_config.json train_file: "
      f"\"{old}\" -> \"{new}\"; data.json {old}: moved to {new} (same size and sha256). Use "
      "another directory, or rerun with --allow_config_change to continue this run with the "
      "new values")
  run_directory.claim(run, _moved_run_records(new, tmp_path), allow_changes=True).release()
  # Moved means the same size and sha256: other content under the new path is other data.
  recorded = run_directory.data_identity([str(new)])
  new.write_text("a\t1\nb\t1\n")
  assert run_directory.data_changes([{**recorded[0], "file": str(old)}],
                                    run_directory.data_identity([str(new)])) == [
      f"{old}: no longer read", f"{new}: not read before"]


def test_a_rerun_on_other_shards_keeps_the_remedy_within_the_one_line_error(tmp_path):
  """Every shard was listed (a corpus has hundreds), so the tool's one-line error (600
  characters) cut the remedy off: the list is now a few examples and counts by kind."""
  shards = []
  for i in range(40):
    shards.append(tmp_path / f"a-long-corpus-shard-name-{i:05d}-of-00040.tfrecord")
    shards[-1].write_bytes(b"x" * (i + 1))
  run, _ = _run_on(tmp_path, [str(p) for p in shards[:30]], content=False)
  with pytest.raises(RunDirectoryError) as error:
    run_directory.claim(run, _records() + [_data_record([str(p) for p in shards[10:]],
                                                         content=False)])
  message = str(error.value)
  assert len(message) < 560 + 2 * len(run) and message.endswith(
      "use another directory, or rerun with --allow_config_change to continue this run on it")
  # An example of each kind (whatever the paths' length), then the counts of the rest.
  assert re.search(r"00000-of-00040.tfrecord: no longer read; \S*00030-of-00040.tfrecord: not "
                   r"read before; and 18 more \(9 files no longer read, 9 files not read "
                   r"before\)", message), message


def test_a_run_recorded_before_its_data_was_continues_and_sizes_alone_compare(tmp_path):
  shard = tmp_path / "a.tfrecord"
  shard.write_bytes(b"0123")
  atomic.write_json(str(tmp_path / "data.json"), {})  # No "train" key: an earlier tfbert's.
  run_directory.claim(str(tmp_path), [_data_record([str(shard)], content=False)]).release()
  atomic.write_json(str(tmp_path / "data.json"),
                    {"train": run_directory.data_identity([str(shard)], content=False)})
  shard.write_bytes(b"3210")  # Same size: without a hash, the same data.
  run_directory.claim(str(tmp_path), [_data_record([str(shard)], content=False)]).release()
  shard.write_bytes(b"32100")
  with pytest.raises(RunDirectoryError, match="a.tfrecord: 4 -> 5 bytes"):
    run_directory.claim(str(tmp_path), [_data_record([str(shard)], content=False)])


@pytest.mark.parametrize("deleted", [("run_config.json",),
                                     ("bert_config.json", "run_config.json")])
def test_a_checkpointed_run_missing_a_record_is_refused_before_any_write(tmp_path, deleted):
  """Sweep 8 RE11/PR02: a stopped run whose run_config.json was deleted, rerun with another
  learning rate, resumed its checkpoint on the new schedule and recorded the new rate for
  the whole run (only the records that exist were compared). Now the missing records are
  named, nothing is written, and --allow_config_change continues deliberately."""
  records = _records()
  run_directory.write_records(str(tmp_path), records, flagfile="--learning_rate=0.0001\n")
  (tmp_path / "checkpoints").mkdir()
  (tmp_path / "checkpoints" / "ckpt-2.index").write_bytes(b"")
  for name in deleted:
    (tmp_path / name).unlink()
  before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
  changed = _records(learning_rate=2e-4)
  with pytest.raises(RunDirectoryError, match=re.escape(
      f"{tmp_path} holds checkpoints but not the run's {' and '.join(deleted)}")) as error:
    run_directory.claim(str(tmp_path), changed)
  assert "Restore" in str(error.value) and "--allow_config_change" in str(error.value)
  assert {p.name: p.read_bytes() for p in tmp_path.iterdir()
          if p.is_file() and p.name != run_directory.LOCK_FILE} == before
  with run_directory.claim(str(tmp_path), changed, allow_changes=True):
    run_directory.write_records(str(tmp_path), changed)
  assert json.loads((tmp_path / "run_config.json").read_text())["optimizer"][
      "learning_rate"] == 2e-4
  # Without checkpoints a missing record is a fresh start (nothing to continue).
  (tmp_path / "checkpoints" / "ckpt-2.index").unlink()
  (tmp_path / "run_config.json").unlink()
  run_directory.claim(str(tmp_path), records).release()


def test_data_identity_refuses_a_pipe_instead_of_waiting_forever(tmp_path):
  """Sweep 9 PT05b: the run had read the pipe to its end; opening it again to hash it
  blocked forever. Refused, named (the old code: the thread below never finished)."""
  fifo = str(tmp_path / "train.conll")
  os.mkfifo(fifo)
  outcome = []

  def identify():
    try:
      outcome.append(run_directory.data_identity([fifo]))
    except ValueError as error:
      outcome.append(error)

  thread = threading.Thread(target=identify, daemon=True)
  thread.start()
  thread.join(timeout=5)
  if thread.is_alive():  # (The old code: release it, then fail.)
    with open(fifo, "wb"):
      pass
    thread.join(timeout=5)
    pytest.fail("data_identity waited forever on a pipe")
  assert isinstance(outcome[0], ValueError), outcome
  assert str(outcome[0]) == (
      f"data file {fifo} is a named pipe: a run reads each input more than once (its checks "
      "and records before any work, then the run itself), which a stream cannot serve; write "
      "it to a regular file first"), outcome


def test_a_relative_path_to_the_recorded_folder_is_the_same_setting(tmp_path, monkeypatch):
  """Sweep 10 c185: a resume from the data's parent with --data_dir=sst was refused as
  another configuration (run_config.json data_dir: "/.../sst" -> "sst"): path-valued
  settings are compared as real absolute paths; another folder still differs."""
  (tmp_path / "base" / "sst").mkdir(parents=True)
  (tmp_path / "link").symlink_to(tmp_path / "base")
  run = str(tmp_path / "run")
  def record(data_dir):
    return [RunRecord("run_config.json", {"data_dir": data_dir, "seed": 1},
                      path_keys=frozenset({"data_dir"}))]
  with run_directory.claim(run, record(str(tmp_path / "base" / "sst"))) as lock:
    run_directory.write_records(run, record(str(tmp_path / "base" / "sst")))
    assert lock.fresh
  monkeypatch.chdir(tmp_path / "base")
  for same in ("sst", "./sst/", str(tmp_path / "link" / "sst")):
    run_directory.claim(run, record(same)).release()
  with pytest.raises(RunDirectoryError, match=r'data_dir: ".*/base/sst" -> ".*/base/other"'):
    run_directory.claim(run, record("other"))


def test_an_output_that_is_another_runs_directory_is_named_so(tmp_path, monkeypatch):
  """Sweep 11 P6: `--sentence_transformers_dir=m1`, m1 another run's directory, said "lies
  inside another run's directory ... (a flags.txt replayed ...?): pass
  --sentence_transformers_dir explicitly", the flag the user had passed. The directory is
  named as the run's own; a replay is named only for an absolute path (what flags.txt
  records), with what to do."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "m1").mkdir()
  (tmp_path / "m1" / run_directory.LOCK_FILE).write_text("")
  with pytest.raises(RunDirectoryError) as error:
    run_directory.check_outputs("m5", {"sentence_transformers_dir": "m1"})
  message = str(error.value)
  assert message.startswith(
      f"sentence_transformers_dir m1 is the directory of another run {tmp_path / 'm1'} (it "
      f"holds {run_directory.LOCK_FILE}), not this run's {tmp_path / 'm5'}"), message
  assert "choose a --sentence_transformers_dir outside it" in message
  assert "flags.txt" not in message and "explicitly" not in message
  inside = str(tmp_path / "m1" / "st")
  with pytest.raises(RunDirectoryError, match=re.escape(
      f"sentence_transformers_dir {inside} lies inside another run's directory "
      f"{tmp_path / 'm1'}")) as error:
    run_directory.check_outputs("m5", {"sentence_transformers_dir": inside})
  assert "give --sentence_transformers_dir on the command line to override it" in str(
      error.value)


def test_a_working_directory_in_a_run_directory_is_refused(tmp_path):
  """Sweep 13 S4: demo --workdir=<a run_classifier run> wrote minilm_export/ into it."""
  run = tmp_path / "run"
  run.mkdir()
  (run / ".tfbert-run.lock").write_text("")
  run_directory.check_outside_runs({"--workdir": str(tmp_path / "new"), "--other": None}, "demo")
  with pytest.raises(ValueError) as raised:
    run_directory.check_outside_runs({"--workdir": str(run)}, "demo")
  assert str(raised.value) == (
      f"--workdir {run} is the directory of a tfbert run (it holds .tfbert-run.lock): demo "
      "would write its own files among that run's; choose another --workdir, e.g. a new "
      "directory")
  with pytest.raises(ValueError, match=f"^--workdir {run / 'a' / 'b'} lies inside the tfbert "
                                       f"run directory {run} "):
    run_directory.check_outside_runs({"--workdir": str(run / "a" / "b")}, "align")


def test_held_out_files_among_the_training_files_are_named_by_their_real_path(tmp_path):
  """Sweep 18, p02: the same file given for training and evaluation, under one name or two
  (a link), is named; other files, and the same name of a URL, as given."""
  train, dev = tmp_path / "train.txt", tmp_path / "dev.txt"
  train.write_text("a\n")
  dev.write_text("b\n")
  (tmp_path / "again.txt").symlink_to(train)
  assert run_directory.held_out_problem([str(train)], [str(dev)]) is None
  for held_out in (str(train), str(tmp_path / "again.txt"), "gs://b/t.txt"):
    trained = [str(train), "gs://b/t.txt"]
    problem = run_directory.held_out_problem(trained, [str(dev), held_out])
    assert problem.startswith(f"the held-out evaluation reads training data: {held_out} is "
                              "also trained on"), problem


def test_differences_name_a_key_by_its_flag():
  """Sweep 20 R1: a resumed custom run's refusal named "custom.has_header", not the
  --custom_header the user typed."""
  found = run_directory.differences(
      {"custom": {"has_header": True, "delimiter": "\t"}},
      {"custom": {"has_header": False, "delimiter": ","}},
      key_names={"custom.has_header": "--custom_header", "custom.delimiter": "--custom_delimiter"})
  assert found == ['--custom_delimiter: "\\t" -> ","', "--custom_header: true -> false"]


def test_a_tool_without_allow_config_change_gives_its_own_way_out(tmp_path):
  """Sweep 24 P1 (g12): align reruns into a workdir with another --learning_rate were told to
  "rerun with --allow_config_change", a flag align does not have ("Unknown command line
  flag"). Within `way_out`, every refusal that named that flag (another configuration,
  other data, missing records) says the running tool's way out instead."""
  text = "choose another --workdir, or remove w/runs (its old runs) to start over there"
  data = tmp_path / "data.txt"
  data.write_text("a")
  run, records = _run_on(tmp_path, [str(data)])
  with run_directory.way_out(text):
    messages = []
    for change in ("configuration", "data", "records"):
      if change == "data":
        data.write_text("b")
      if change == "records":
        (tmp_path / "run" / "checkpoints").mkdir()
        (tmp_path / "run" / "checkpoints" / "ckpt-2.index").write_bytes(b"")
        (tmp_path / "run" / "run_config.json").unlink()
      new = (_records(learning_rate=2e-4) + records[-1:] if change == "configuration"
             else _records() + [_data_record([str(data)])])
      with pytest.raises(RunDirectoryError) as error:
        run_directory.claim(run, new)
      messages.append(str(error.value))
  assert "another configuration" in messages[0] and "other data" in messages[1]
  assert "holds checkpoints but not the run's run_config.json" in messages[2]
  assert [m.lower().endswith(text.lower()) for m in messages] == [True] * 3, messages
  assert not any("allow_config_change" in m for m in messages), messages
  with pytest.raises(RunDirectoryError, match="--allow_config_change"):  # Outside: the flag.
    run_directory.claim(run, records)
