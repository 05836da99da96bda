"""Tests for tfbert.pretraining.pretraining_run and tools/run_pretraining.py: run directory,
TensorBoard, resume after SIGKILL, export, non-finite loss, and MultiWorkerMirroredStrategy."""

import dataclasses
import glob
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests import forked, helpers, multi_worker, tool_process
from tfbert import BertConfig
from tfbert.checkpoints import google_checkpoint, pretrained
from tfbert.checkpoints.google_checkpoint import export_google_checkpoint, read_google_checkpoint
from tfbert.models import BertPretrainer
from tfbert.pretraining import pretraining_eval, pretraining_run
from tfbert.pretraining.pretraining_run import PretrainingRunConfig, run_pretraining
from tfbert.runtime import atomic, run_directory, validation
from tfbert.training import optimization, training_loop

ROOT = helpers.ROOT
SEQ, PRED = 32, 5
TINY = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=19, max_position_embeddings=SEQ, type_vocab_size=2,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
# Real BERT configs' dropout (google-research/bert's bert_config.json files: 0.1 and 0.1).
DROPOUT = dataclasses.replace(TINY, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
TIMING = ("examples_per_second",)  # Fields of metrics.jsonl that differ between equal runs.


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  """Pretraining records made from CPython's pydoc topics (the embedded English corpus)."""
  return helpers.pydoc_records(tmp_path_factory.mktemp("pretraining_data"), SEQ, PRED,
                               max_documents=20, num_shards=2)


@pytest.fixture(scope="module")
def text_dir(tmp_path_factory):
  """The same 20 pydoc topics as raw text, dealt into 2 files (`--train_text_files`)."""
  return helpers.pydoc_text_files(tmp_path_factory.mktemp("text"), max_documents=20,
                                  num_files=2)


def run_config(data_dir, model_dir, **overrides):
  optimizer = optimization.OptimizerConfig(
      optimizer="adamw", learning_rate=1e-3, num_warmup_steps=2,
      num_train_steps=overrides.pop("num_train_steps", 6),
      gradient_accumulation_steps=overrides.pop("accumulation", 2))
  values = dict(bert_config=TINY, input_files=[os.path.join(data_dir, "*.tfrecord")],
                model_dir=str(model_dir), optimizer=optimizer, train_batch_size=8,
                max_seq_length=SEQ, max_predictions_per_seq=PRED, distribution_strategy="mirrored",
                num_cpu_devices=2, save_checkpoints_steps=2, log_steps=2, seed=3,
                export_saved_model=False)  # ~1 s a run; the two tests of the export turn it on.
  values.update(overrides)
  return PretrainingRunConfig(**values)


def test_a_data_flag_naming_a_pipe_or_a_broken_link_is_refused_with_the_flag(tmp_path):
  """Refused before any work (sweep 8: a pipe ended in TensorFlow's "Illegal seek", PS04; a
  symbolic link loop read as "No pretraining data file matches", RP02)."""
  os.mkfifo(tmp_path / "fifo.txt")
  os.symlink("loop.txt", tmp_path / "loop.txt")
  with pytest.raises(ValueError) as e:
    run_config(tmp_path, tmp_path / "run", input_files=(), objective="mlm",
               train_text_files=[str(tmp_path / "fifo.txt")],
               eval_text_files=[str(tmp_path / "loop.txt")])
  assert f"--train_text_files {tmp_path / 'fifo.txt'} is a named pipe: a run reads each " \
      "input more than once" in str(e.value)
  assert f"--eval_text_files {tmp_path / 'loop.txt'} is a symbolic link loop" in str(e.value)


def test_held_out_records_that_are_trained_on_are_warned_of_before_any_write(
    data_dir, tmp_path, monkeypatch, caplog):
  """Sweep 18, p02: --eval_input_files (or --eval_text_files) naming the training data
  itself was evaluated without a word: its "held-out" loss measured fitting, not
  generalization (`run_directory.held_out_problem`, as the fine-tuning runs warn)."""
  class Checked(Exception):
    pass

  def stop(*args):
    raise Checked  # Right after the data checks, before anything is built or written.

  monkeypatch.setattr(pretraining_run.pretraining_init, "check_vocabulary", stop)
  shard = sorted(glob.glob(os.path.join(data_dir, "*.tfrecord")))[0]
  with caplog.at_level(logging.WARNING), pytest.raises(Checked):
    run_pretraining(run_config(data_dir, tmp_path / "run", eval_input_files=[shard],
                               eval_every_steps=2))
  assert (f"the held-out evaluation reads training data: {shard} is also trained on"
          in "\n".join(caplog.messages)), caplog.messages
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("field", ["vocab_file", "init_checkpoint", "init_hf_dir",
                                   "init_tfbert"])
def test_a_named_pipe_as_the_vocabulary_or_the_source_is_refused_at_config_time(tmp_path,
                                                                                  field):
  """Rule: every input of a run config, not only its data files, is refused as a special
  file (`tfbert.runtime.paths.special_input_problems`, by `os.stat`: the pipe is never
  opened), naming the flag and the path, before any write (the config took them)."""
  fifo = tmp_path / "fifo"
  os.mkfifo(fifo)
  with pytest.raises(ValueError) as e:
    run_config(tmp_path, tmp_path / "run", **{field: str(fifo)})
  assert (f"--{field} {fifo} is a named pipe: a run reads each input more than once (its "
          "checks and records before any work, then the run itself), which a stream cannot "
          "serve; write it to a regular file first") in str(e.value)
  assert not (tmp_path / "run").exists()


def read_metrics(model_dir):
  with open(os.path.join(model_dir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]


def untimed(rows):
  return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def leftovers(model_dir):
  """Temporaries of tfbert or of TF's checkpoint writer anywhere under `model_dir`."""
  found = []
  for folder, dirs, files in os.walk(model_dir):
    found += [os.path.join(folder, n) for n in dirs + files
              if atomic.is_temporary(n) or "_temp" in n or "tempstate" in n or ".tmp" in n]
  return found


def _export_files(export_dir):
  """{path: bytes} of every file under `export_dir`."""
  return {p: open(p, "rb").read() for p in glob.glob(str(export_dir / "**"), recursive=True)
          if os.path.isfile(p)}


def _full_disk(*args, **kwargs):  # The Google export fails after the SavedModel.
  raise OSError(28, "No space left on device")


@pytest.fixture(scope="module")
def exported_run(data_dir, tmp_path_factory):
  """A mirrored 6-step run with its export, whose first export fails after its SavedModel
  (the Google checkpoint's disk full); rerun, it exports only; then a re-export fails the
  same way. What each step left, and the live models before and after the two runs that
  end (the export and the memory-release tests read them)."""
  run = tmp_path_factory.mktemp("exported") / "run"
  export_dir, found = run / "export", {}
  config = run_config(data_dir, run, export_saved_model=True)
  models = helpers.live_instances(BertPretrainer)
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(google_checkpoint, "export_google_checkpoint", _full_disk)
    with pytest.raises(OSError, match="No space"):
      run_pretraining(config)  # Trains all 6 steps, then fails in the export.
  found["failed"] = dict(export=export_dir.exists(), leftovers=leftovers(run),
                         models=(models, helpers.live_instances(BertPretrainer)))
  last = run_pretraining(config)  # Resumes at the last step: exports only.
  found["exported"] = dict(last=last, files=_export_files(export_dir),
                           present={name: glob.glob(path + "*")
                                    for name, path in last["written"].items()},
                           models=(models, helpers.live_instances(BertPretrainer)))
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(google_checkpoint, "export_google_checkpoint", _full_disk)
    # A rerun of the finished run finds its export whole: not written again (it was, and
    # this export would fail).
    found["rerun"] = dict(last=run_pretraining(config), files=_export_files(export_dir))
    # A part gone (deleted by hand): the rerun exports again, and that failing keeps the
    # previous export as it was.
    index = export_dir / "google" / "bert_model.ckpt.index"
    kept = index.read_bytes()
    index.unlink()
    with pytest.raises(OSError, match="No space"):
      run_pretraining(config)
  found["failed_again"] = dict(files=_export_files(export_dir), leftovers=leftovers(run),
                               removed=str(index))
  index.write_bytes(kept)  # Whole again, for the tests that read the export.
  return run, found


@pytest.mark.slow
def test_run_directory_explains_itself(data_dir, exported_run):
  run, found = exported_run
  # The run's model died with it (tfbert.runtime.traces: TF's caches would keep it), after
  # training and failing (its first run) and after exporting (its rerun).
  before, after = found["failed"]["models"]
  assert after == before
  before, after = found["exported"]["models"]
  assert after == before
  last = found["exported"]["last"]
  assert last["step"] == 6 and np.isfinite(last["loss"])
  assert BertConfig.from_json_file(str(run / "bert_config.json")) == TINY
  resolved = json.loads((run / "run_config.json").read_text())
  assert resolved["optimizer"]["gradient_accumulation_steps"] == 2
  assert resolved["train_batch_size"] == 8
  assert sorted(os.listdir(run / "checkpoints"))[0] == "checkpoint"
  rows = read_metrics(run)
  assert [r["step"] for r in rows] == [2, 4, 6]
  # TensorBoard events hold the same scalars.
  tags = _event_scalars(str(run / "train"))  # Every events file (the rerun's too).
  for name in ("loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy",
               "learning_rate", "gradient_norm", "skipped_windows", "examples_per_second"):
    assert [s for s, _ in tags[name]] == [2, 4, 6], name
  assert tags["loss"][-1][1] == pytest.approx(rows[-1]["loss"], rel=1e-6)
  # Google's schedule (warmup 2, total 6): LR at applied step 6 is 1e-3 * (1 - 6/6) = 0.
  assert tags["learning_rate"][-1][1] == pytest.approx(0.0, abs=1e-9)
  assert os.path.exists(run / "export" / "saved_model" / "saved_model.pb")
  # With the data's vocabulary it fills masks (tests/pretraining/pretraining_export_test.py).
  assert {"serving_default", "fill_mask"} <= _signature_names(run / "export" / "saved_model")
  # 5 embedding + 16 (one layer) + 2 pooler + 5 MLM + 2 NSP tensors.
  assert len(read_google_checkpoint(str(run / "export" / "google" / "bert_model.ckpt"))) == 30
  # Like Google's releases, the config sits beside the checkpoint; and the data's vocabulary
  # beside it and in the run directory, with the casing recorded.
  assert BertConfig.from_json_file(str(run / "export" / "google" / "bert_config.json")) == TINY
  with open(pretrained.minilm_vocab_file(), "rb") as f:
    vocab = f.read()
  assert (run / "vocab.txt").read_bytes() == vocab
  assert (run / "export" / "google" / "vocab.txt").read_bytes() == vocab
  data = json.loads((run / "data.json").read_text())
  assert data["do_lower_case"] is True and data["vocab_file"] == pretrained.minilm_vocab_file()
  assert data["summaries"] == [os.path.join(data_dir, "pretraining-summary.json")]


def test_a_run_that_fails_before_its_first_step_leaves_no_run_behind(data_dir, tmp_path,
                                                                      monkeypatch):
  """A failure in the first step (here made to happen) must not leave the run's records
  behind: the corrected rerun, with other settings, would be refused as another
  configuration."""
  def first_step_fails(self, batches):
    raise ValueError("the first step failed")

  monkeypatch.setattr(training_loop.TrainingLoop, "train", first_step_fails)
  for seed in (1, 2):  # The second is not refused as another configuration.
    with pytest.raises(ValueError, match="the first step failed"):
      run_pretraining(dataclasses.replace(run_config(data_dir, tmp_path / "run"), seed=seed))
    assert not (tmp_path / "run").exists()


def _snapshot(directory):
  """{relative path: bytes} of every file under `directory`."""
  found = {}
  for folder, _, files in os.walk(directory):
    for name in files:
      with open(os.path.join(folder, name), "rb") as f:
        found[os.path.relpath(os.path.join(folder, name), directory)] = f.read()
  return found


@pytest.mark.slow
def test_a_rerun_with_another_model_or_schedule_is_refused_and_touches_nothing(
    data_dir, tmp_path):
  config = run_config(data_dir, tmp_path / "run", num_train_steps=2,
                      distribution_strategy="one_device", num_cpu_devices=1)
  run_pretraining(config)
  before = _snapshot(tmp_path / "run")
  wider = dataclasses.replace(TINY, intermediate_size=23)
  with pytest.raises(run_directory.RunDirectoryError) as error:
    run_pretraining(dataclasses.replace(
        config, bert_config=wider, optimizer=dataclasses.replace(config.optimizer,
                                                                 learning_rate=2e-3)))
  assert "bert_config.json intermediate_size: 19 -> 23" in str(error.value)
  assert "run_config.json optimizer.learning_rate: 0.001 -> 0.002" in str(error.value)
  assert _snapshot(tmp_path / "run") == before
  # Another shape cannot continue even deliberately; the records stay the old run's.
  with pytest.raises(run_directory.RunDirectoryError, match=r"holds checkpoints of another "
                     r"model shape: bert_config.json intermediate_size: 19 -> 23\. "
                     r"--allow_config_change cannot continue them.*use another directory"):
    run_pretraining(dataclasses.replace(config, bert_config=wider, allow_config_change=True))
  after = _snapshot(tmp_path / "run")
  assert {k: after[k] for k in before} == before
  # How often to log may change; a longer schedule only deliberately, then it is recorded.
  run_pretraining(dataclasses.replace(config, log_steps=1))
  longer = dataclasses.replace(config.optimizer, num_train_steps=3)
  with pytest.raises(run_directory.RunDirectoryError, match="num_train_steps: 2 -> 3"):
    run_pretraining(dataclasses.replace(config, optimizer=longer))
  assert run_pretraining(dataclasses.replace(config, optimizer=longer,
                                             allow_config_change=True))["step"] == 3
  assert json.loads((tmp_path / "run" / "run_config.json").read_text())[
      "optimizer"]["num_train_steps"] == 3


@pytest.mark.parametrize("overrides, message", [
    (dict(max_seq_length=16), r"00000-of-00002.tfrecord: input_ids has 32 values per record "
     r"\(pretraining-summary.json\) but --max_seq_length=16"),
    (dict(max_predictions_per_seq=7), r"00000-of-00002.tfrecord: masked_lm_ids has 5 "
     r"values per record \(pretraining-summary.json\) but --max_predictions_per_seq=7"),
    (dict(bert_config=dataclasses.replace(TINY, vocab_size=1000)),
     r"00000-of-00002.tfrecord: .*vocab"),
])
def test_data_that_does_not_fit_the_flags_is_named_before_anything_is_written(
    data_dir, tmp_path, overrides, message):
  with pytest.raises(ValueError, match=message):
    run_pretraining(run_config(data_dir, tmp_path / "run", **overrides))
  assert not (tmp_path / "run").exists()


def test_non_finite_loss_fails_fast_naming_the_steps(data_dir, tmp_path):
  config = run_config(data_dir, tmp_path / "nan", num_train_steps=4, accumulation=1,
                      distribution_strategy="one_device", num_cpu_devices=1, log_steps=1)
  config = PretrainingRunConfig(**{**config.__dict__, "optimizer": optimization.OptimizerConfig(
      optimizer="sgd", learning_rate=1e8, num_train_steps=4, clip_norm=None, momentum=0.0)})
  # Logged every step: the first non-finite loss is named with its step, whose update was
  # skipped (no applied-step range to name).
  with pytest.raises(FloatingPointError,
                     match=r"non-finite loss \(\w+\) (in applied steps \d+\.\.\d+|at step \d+ "
                           r"\(its update was skipped\))"):
    run_pretraining(config)


def test_batch_that_does_not_split_is_named(data_dir, tmp_path):
  with pytest.raises(ValueError, match="train_batch_size 6 must be a multiple of"):
    run_pretraining(run_config(data_dir, tmp_path / "bad", train_batch_size=6))


def tool_flags(data_dir, model_dir, steps=8, strategy="one_device", devices=1, bert=TINY,
               text=None):
  """The flags of tools/run_pretraining.py for a run in `model_dir` (its bert_config.json
  written beside it); with `text` (a glob), on that raw text instead (objective mlm). No
  SavedModel export (~1 s a run): its tests turn it on; the Google checkpoint is written."""
  bert.to_json_file(os.path.join(os.path.dirname(model_dir), "bert_config.json"))
  data = [f"--input_files={os.path.join(data_dir, '*.tfrecord')}"] if text is None else [
      f"--train_text_files={text}", f"--vocab_file={pretrained.minilm_vocab_file()}",
      "--objective=mlm"]
  return [f"--bert_config_file={os.path.join(os.path.dirname(model_dir), 'bert_config.json')}",
          *data, f"--model_dir={model_dir}",
          "--train_batch_size=8", "--gradient_accumulation_steps=2", f"--max_seq_length={SEQ}",
          f"--max_predictions_per_seq={PRED}", f"--num_train_steps={steps}",
          "--num_warmup_steps=2", "--learning_rate=1e-3", "--save_checkpoints_steps=2",
          "--log_steps=1", "--deterministic", f"--distribution_strategy={strategy}",
          f"--num_cpu_devices={devices}", "--seed=7", "--noexport_saved_model"]


def tool_command(flags):
  """`python tools/run_pretraining.py FLAGS`: for a process the test kills or a worker."""
  return [sys.executable, os.path.join(ROOT, "tools", "run_pretraining.py"), *flags]


def run_tool(*flags):
  """tools/run_pretraining.py in this process (tests/tool_process.py); it must succeed."""
  run = tool_process.run_tool("run_pretraining", *flags)
  assert run.returncode == 0, run.stderr[-3000:]
  return run


@pytest.mark.slow  # ~10 s: three short tool runs, in this process (the replay is argv).
def test_a_run_replays_from_its_own_flags_file(data_dir, tmp_path):
  first = tmp_path / "a" / "run"
  os.makedirs(first.parent)
  given_flags = tool_flags(data_dir, str(first), steps=2)
  run_tool(*given_flags)
  flags_txt = (first / "flags.txt").read_text()
  recorded_flags = dict(line.partition("=")[::2] for line in flags_txt.splitlines())
  for given in given_flags:  # Every flag given, with its value ("1e-3" is written "0.001").
    name, _, value = given.partition("=")
    assert name in recorded_flags, name
    try:
      assert float(recorded_flags[name]) == float(value), given
    except ValueError:
      assert recorded_flags[name] == value, given
  assert "--traceback" not in flags_txt and "--allow_config_change" not in flags_txt
  recorded = json.loads((first / "run_config.json").read_text())
  # The same directory: the flags file alone continues the run, which it equals.
  again = run_tool(f"--flagfile={first / 'flags.txt'}")
  assert "resumed from" in again.stdout
  assert json.loads((first / "run_config.json").read_text()) == recorded
  # Another directory: the same run, model_dir aside.
  second = tmp_path / "b" / "run"
  run_tool(f"--flagfile={first / 'flags.txt'}", f"--model_dir={second}")
  replayed = json.loads((second / "run_config.json").read_text())
  assert {**replayed, "model_dir": None} == {**recorded, "model_dir": None}
  assert untimed(read_metrics(second)) == untimed(read_metrics(first))


@pytest.mark.slow
@pytest.mark.parametrize("strategy, devices, kill, raw_text", [
    pytest.param("one_device", 1, signal.SIGKILL, True, id="one_device_raw_text"),
    pytest.param("mirrored", 2, signal.SIGTERM, False, id="mirrored")])
def test_sigkill_then_rerun_resumes_with_the_uninterrupted_loss_curve(
    data_dir, text_dir, tmp_path, strategy, devices, kill, raw_text):
  """With the default dropout (0.1): its masks must not depend on the process's history.

  Killed by PID with SIGKILL (nothing runs after it), or preempted by SIGTERM: the run
  saves a checkpoint at the step it reached and exits with status 75 (`EXIT_PREEMPTED`).
  On raw text, the MLM masks too are drawn as batches are formed: they must depend on the
  example's place in the data alone, and the packing remainder must resume with the rest.
  """
  straight = str(tmp_path / "a" / "run")
  os.makedirs(os.path.dirname(straight))
  args = dict(strategy=strategy, devices=devices, bert=DROPOUT,
              text=text_dir if raw_text else None)
  # The uninterrupted run and the rerun in this process; only the killed run is a process.
  run_tool(*tool_flags(data_dir, straight, **args))
  killed = str(tmp_path / "b" / "run")
  os.makedirs(os.path.dirname(killed))
  flags = tool_flags(data_dir, killed, **args)
  proc = forked.popen(tool_command(flags), env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    deadline = time.monotonic() + 300
    while not helpers.checkpoint_saved(os.path.join(killed, "checkpoints"), 4):
      assert time.monotonic() < deadline and proc.poll() is None, "no checkpoint appeared"
      time.sleep(0.05)
    proc.send_signal(kill)
    proc.wait(timeout=60)
    preempted = kill == signal.SIGTERM
    assert proc.returncode == (training_loop.EXIT_PREEMPTED if preempted else -kill)
  finally:
    proc.kill()
    proc.wait(timeout=60)
  interrupted_at = max(r["step"] for r in read_metrics(killed))
  assert interrupted_at < 8  # It really was interrupted.
  if preempted:  # Saved where it stopped (log_steps=1: the last line's step), not at 4 only.
    assert tf.train.latest_checkpoint(os.path.join(killed, "checkpoints")).endswith(
        f"ckpt-{interrupted_at}")
  # Rerun the same command, this time from a --flagfile.
  flagfile = tmp_path / "b" / "flags.txt"
  flagfile.write_text("\n".join(flags) + "\n")
  result = run_tool(f"--flagfile={flagfile}")
  assert "resumed from" in result.stdout
  a, b = read_metrics(straight), read_metrics(killed)
  assert [r["step"] for r in b] == [r["step"] for r in a] == list(range(1, 9))
  for ra, rb in zip(a, b):
    # Deterministic float32: the same ops on the same data and masks, bit for bit.
    assert ra["loss"] == rb["loss"], (ra["step"], ra["loss"], rb["loss"])
  assert untimed(b) == untimed(a)
  assert not leftovers(killed)
  wa = read_google_checkpoint(os.path.join(straight, "export", "google", "bert_model.ckpt"))
  wb = read_google_checkpoint(os.path.join(killed, "export", "google", "bert_model.ckpt"))
  for name in wa:
    np.testing.assert_array_equal(wa[name], wb[name])


def _exported(run_dir):
  return read_google_checkpoint(os.path.join(run_dir, "export", "google", "bert_model.ckpt"))


@pytest.mark.slow
def test_two_worker_processes_end_equal_to_one_process_with_two_replicas(data_dir, text_dir,
                                                                         tmp_path):
  """On raw text: each worker packs and masks its own file, the one process both files in
  turn; the same sequences per step with the same masks (drawn by their place in the data,
  not by the process or its stream position), so the same loss."""
  # Both set-ups start from the same Google-format checkpoint.
  init = BertPretrainer(TINY)
  init.build()
  init_prefix = str(tmp_path / "init" / "bert_model.ckpt")
  export_google_checkpoint(init, init_prefix)
  model_dir = str(tmp_path / "mw" / "run")
  os.makedirs(os.path.dirname(model_dir))
  # SGD: Adam's m / sqrt(v) turns float-rounding-level gradient differences on rows of the
  # tied 30522-row decoder into O(learning rate) weight differences, hiding real ones.
  # Held-out evaluation too: each worker scores its own shard, the 1-process run both shards
  # record by record in turn; 2 batches of 4 are the same 8 sequences either way.
  same = [f"--init_checkpoint={init_prefix}", "--optimizer=sgd", "--learning_rate=0.5",
          f"--eval_input_files={os.path.join(data_dir, '*.tfrecord')}", "--eval_every_steps=2",
          "--eval_batch_size=4", "--max_eval_steps=2"]
  command = tool_command(tool_flags(data_dir, model_dir, steps=4, strategy="multi_worker",
                                    text=text_dir) + same)
  results = multi_worker.launch_workers(command, cwd=ROOT, timeout=600)
  for r in results:
    assert r.returncode == 0, r.stdout[-3000:]
  # The reference: one process (this one) with two replicas.
  mirrored_dir = str(tmp_path / "mi" / "run")
  os.makedirs(os.path.dirname(mirrored_dir))
  run_tool(*tool_flags(data_dir, mirrored_dir, steps=4, strategy="mirrored", devices=2,
                       text=text_dir), *same)
  chief, other = _exported(model_dir), _exported(os.path.join(model_dir, ".worker1"))
  mirrored = _exported(mirrored_dir)
  assert [(r["step"], r.get("split")) for r in read_metrics(model_dir) if "split" in r] == [
      (2, "eval"), (4, "eval")]
  assert [r["loss"] for r in read_metrics(model_dir)] == pytest.approx(
      [r["loss"] for r in read_metrics(mirrored_dir)], rel=1e-6)
  assert chief.keys() == other.keys() == mirrored.keys() and len(chief) >= 26
  for name in chief:
    np.testing.assert_array_equal(chief[name], other[name])  # workers agree exactly
    # Each worker reads its own file (2 files, 2 workers) while the 1-process run
    # splits each batch of both shards: same examples per step, summed in another order.
    assert np.max(np.abs(chief[name] - mirrored[name])) < 1e-5, name


def text_run_config(text_dir, model_dir, accumulation, **overrides):
  """A one-device SGD run on raw text (objective mlm), `accumulation` micro-batches of
  8 / accumulation sequences per applied step."""
  optimizer = optimization.OptimizerConfig(
      optimizer="sgd", learning_rate=0.5, num_train_steps=3, clip_norm=None, momentum=0.0,
      gradient_accumulation_steps=accumulation)
  return run_config(os.path.dirname(text_dir), model_dir, **{
      "input_files": [], "train_text_files": [text_dir], "objective": "mlm",
      "vocab_file": pretrained.minilm_vocab_file(), "optimizer": optimizer,
      "distribution_strategy": "one_device", "num_cpu_devices": 1, "deterministic": True,
      "log_steps": 1, **overrides})


@pytest.mark.slow  # ~8 s: two runs, each tracing the in-graph tokenizer.
def test_accumulating_micro_batches_of_raw_text_equals_one_batch_k_times_larger(text_dir,
                                                                                 tmp_path):
  """2 micro-batches of 4 per applied step against one batch of 8: the same sequences with
  the same masks (a window's masks are its examples', wherever the micro-batch boundary
  falls) and the loss normalized by the window's masked-token count, so the same steps.
  SGD: see the two-worker test on why not Adam."""
  held_out = dict(eval_text_files=[text_dir], eval_batch_size=4, max_eval_steps=2)
  run_pretraining(text_run_config(text_dir, tmp_path / "big", 1, **held_out))
  result = run_pretraining(text_run_config(text_dir, tmp_path / "accumulated", 2, **held_out))
  big, accumulated = read_metrics(tmp_path / "big"), read_metrics(tmp_path / "accumulated")
  # The held-out text (eval_text_files) is scored at the last step: MLM metrics alone.
  evals = [r for r in accumulated if r.get("split") == "eval"]
  assert [r["step"] for r in evals] == [3] and result["eval"]["loss"] == evals[0]["loss"]
  assert set(result["eval"]) == {"loss", "mlm_loss", "mlm_accuracy", "mlm_perplexity"}
  assert evals[0]["mlm_perplexity"] == pytest.approx(math.exp(evals[0]["mlm_loss"]), rel=1e-6)
  assert os.path.isdir(result["written"]["best"])  # The best held-out loss is kept.
  assert [r["loss"] for r in big if "split" in r] == pytest.approx(
      [r["loss"] for r in evals], rel=1e-5)  # Weights within 1e-5 (below): the same score.
  big, accumulated = ([r for r in rows if "split" not in r] for rows in (big, accumulated))
  assert [r["step"] for r in accumulated] == [1, 2, 3]
  # float32 sums of the same terms in another order: equal to rounding.
  assert [r["loss"] for r in accumulated] == pytest.approx([r["loss"] for r in big], rel=1e-6)
  wa, wb = _exported(tmp_path / "big"), _exported(tmp_path / "accumulated")
  for name in wa:
    assert np.max(np.abs(wa[name] - wb[name])) < 1e-5, name


@pytest.mark.slow  # ~4 s: a one-step run and its refused rerun.
def test_a_raw_text_run_resumed_on_text_of_the_same_size_but_other_words_is_refused(tmp_path):
  """Raw text is identified by content, not only size: a stopped run's text edited in
  place (" the " -> " THE ", the same bytes count) is refused on rerun, naming the file
  (it resumed and trained on the new text, before)."""
  folder = tmp_path / "text"
  folder.mkdir()
  text = helpers.pydoc_text_files(folder, max_documents=2, num_files=1)
  config = text_run_config(text, tmp_path / "run", 1, stop_at_step=1)
  run_pretraining(config)
  path = glob.glob(text)[0]
  before = open(path, encoding="utf-8").read()
  after = before.replace(" the ", " THE ")
  assert after != before and len(after.encode()) == len(before.encode())
  with open(path, "w", encoding="utf-8") as f:
    f.write(after)
  with pytest.raises(run_directory.RunDirectoryError,
                     match=re.escape(f"{path}: same size, other content")):
    run_pretraining(dataclasses.replace(config, stop_at_step=None))


@pytest.mark.slow
def test_keras_fit_still_fails_under_multi_worker_mirrored_strategy():
  # keras-team/keras#20585. When this fails, upstream fixed `fit` under MWMS and
  # tfbert.pretraining.pretraining_run could use `fit` there too.
  results = multi_worker.launch_workers(multi_worker.worker_command("keras_fit"), cwd=ROOT,
                                        timeout=300)
  assert any("KERAS_FIT_FAILED" in r.stdout for r in results), [r.stdout[-500:] for r in results]


# An uninterrupted deterministic one-device run of 4 steps (2 micro-batches each), a line per
# step: the graph reference of the XLA, fast-forward and read-on tests (built once).
STRAIGHT_FOUR = dict(deterministic=True, distribution_strategy="one_device", num_cpu_devices=1,
                     num_train_steps=4, log_steps=1, save_checkpoints_steps=100)


@pytest.fixture(scope="module")
def straight_four(data_dir, tmp_path_factory):
  """The model_dir of an uninterrupted STRAIGHT_FOUR run (tests only read it)."""
  model_dir = tmp_path_factory.mktemp("straight_four")
  run_pretraining(run_config(data_dir, model_dir, **STRAIGHT_FOUR))
  return model_dir


@pytest.mark.slow
def test_xla_on_one_device_gives_the_graph_loss_curve(data_dir, tmp_path, straight_four):
  xla = run_pretraining(run_config(data_dir, tmp_path / "xla", jit_compile=True,
                                   **STRAIGHT_FOUR))
  a, b = read_metrics(straight_four), read_metrics(tmp_path / "xla")
  # XLA fuses and reorders float32 arithmetic: the curves agree to float32 rounding.
  assert [r["loss"] for r in b] == pytest.approx([r["loss"] for r in a], rel=1e-5)
  assert xla["step"] == a[-1]["step"] == 4


# An uninterrupted deterministic mirrored run of 5 steps, a line per step: the reference of
# the eager, stop/resume and data-position tests below (`held_out_runs`' straight run, which
# also evaluates every 2 steps: its training lines are those of the run without evaluation).
STRAIGHT_FIVE = dict(deterministic=True, num_train_steps=5, log_steps=1,
                     save_checkpoints_steps=100)


@pytest.mark.slow
def test_eager_gives_the_graph_loss_curve(data_dir, tmp_path, held_out_runs):
  # The first 3 steps of the same 5-step schedule: no graph run of its own.
  run_pretraining(run_config(data_dir, tmp_path / "eager", run_eagerly=True, stop_at_step=3,
                             **STRAIGHT_FIVE))
  a = [r for r in held_out_runs["straight_rows"] if "split" not in r][:3]
  b = read_metrics(tmp_path / "eager")
  assert [r["step"] for r in b] == [r["step"] for r in a] == [1, 2, 3]
  # Same kernels, same order of the same float32 operations: equal to float32 rounding.
  assert [r["loss"] for r in b] == pytest.approx([r["loss"] for r in a], rel=1e-6)
  assert not tf.config.functions_run_eagerly()  # Restored after the run.


@pytest.mark.slow
def test_stop_at_step_then_resume_equals_the_uninterrupted_run(held_out_runs):
  """The stop at 3 and resume of the held-out test's run (mirrored; evaluations between the
  steps change no training number). The checkpoint at 3 holds the data position (the run
  stopped there had resumed from one without it: see the data-position test)."""
  rows, split = held_out_runs["straight_rows"], held_out_runs["split_rows"]
  assert held_out_runs["stopped"]["step"] == 3
  assert not held_out_runs["exported_at_stop"]  # Not finished: not exported.
  assert [(r["step"], r.get("split")) for r in held_out_runs["rows_at_stop"]] == [
      (1, None), (2, None), (2, "eval"), (3, None)]
  a, b = ([r for r in x if "split" not in r] for x in (rows, split))
  assert [r["step"] for r in b] == [1, 2, 3, 4, 5]
  # Same schedule (num_train_steps), same data position: the float32 curve is the same.
  assert [r["loss"] for r in b] == pytest.approx([r["loss"] for r in a], rel=1e-6)
  assert [r["learning_rate"] for r in b] == pytest.approx([r["learning_rate"] for r in a])


@pytest.mark.parametrize("overrides, message", [
    (dict(stop_at_step=7), r"stop_at_step \(7\) must be in \[1, num_train_steps \(6\)\]"),
    (dict(stop_at_step=0), r"stop_at_step \(0\)"),
    (dict(run_eagerly=True, jit_compile=True), "run_eagerly and jit_compile"),
])
def test_run_options_that_do_not_fit_are_named(data_dir, tmp_path, overrides, message):
  with pytest.raises(ValueError, match=message):
    run_pretraining(run_config(data_dir, tmp_path / "bad", **overrides))


CADENCE = dict(bert_config=DROPOUT, deterministic=True, num_train_steps=7, log_steps=3,
               save_checkpoints_steps=2)


@pytest.fixture(scope="module")
def cadence_run(data_dir, tmp_path_factory):
  """An uninterrupted one-device CADENCE run: (model_dir, [(checkpoint number, applied
  steps it holds) of every save])."""
  model_dir, saves = tmp_path_factory.mktemp("cadence"), []
  real = tf.train.CheckpointManager.save

  def save(self, checkpoint_number=None, **kwargs):
    saves.append((checkpoint_number, int(self.checkpoint.optimizer.iterations.numpy())))
    return real(self, checkpoint_number=checkpoint_number, **kwargs)

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(tf.train.CheckpointManager, "save", save)
    run_pretraining(run_config(data_dir, model_dir, distribution_strategy="one_device",
                               num_cpu_devices=1, **CADENCE))
  return model_dir, saves


def test_checkpoints_land_at_every_multiple_of_save_checkpoints_steps(cadence_run):
  model_dir, saves = cadence_run
  # Independent of log_steps (3): every multiple of 2, and the last step.
  assert saves == [(2, 2), (4, 4), (6, 6), (7, 7)]
  assert [r["step"] for r in read_metrics(model_dir)] == [3, 6, 7]


@pytest.mark.parametrize("strategy, devices", [
    ("one_device", 1), pytest.param("mirrored", 2, marks=pytest.mark.slow)])
@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_resume_with_default_dropout_inside_a_log_window_is_bit_identical(
    data_dir, tmp_path, cadence_run, strategy, devices):
  """Stopped at step 5 (log window 4..6, checkpoint at 4 and 5): every line, bit for bit."""
  common = dict(distribution_strategy=strategy, num_cpu_devices=devices, **CADENCE)
  if strategy == "one_device":
    os.symlink(cadence_run[0], tmp_path / "straight")
  else:
    run_pretraining(run_config(data_dir, tmp_path / "straight", **common))
  stopped = run_pretraining(run_config(data_dir, tmp_path / "split", stop_at_step=5, **common))
  assert stopped["step"] == 5 and stopped["summary"].startswith("stopped at applied step 5")
  assert [r["step"] for r in read_metrics(tmp_path / "split")] == [3]  # No line at the stop.
  run_pretraining(run_config(data_dir, tmp_path / "split", **common))
  a, b = read_metrics(tmp_path / "straight"), read_metrics(tmp_path / "split")
  assert untimed(b) == untimed(a) and [r["step"] for r in a] == [3, 6, 7]
  wa, wb = _exported(tmp_path / "straight"), _exported(tmp_path / "split")
  for name in wa:
    np.testing.assert_array_equal(wa[name], wb[name])


class Killed(BaseException):
  """Stands for SIGKILL in-process: no `except Exception` handles it."""


def kill_at_save(monkeypatch, number):
  """The `number`-th checkpoint save dies half-way, leaving TF's temporary directory."""
  real, calls = tf.train.CheckpointManager.save, []

  def save(self, checkpoint_number=None, **kwargs):
    calls.append(checkpoint_number)
    if len(calls) < number:
      return real(self, checkpoint_number=checkpoint_number, **kwargs)
    temporary = os.path.join(self.directory, f"ckpt-{checkpoint_number}_temp")
    os.makedirs(temporary)
    open(os.path.join(temporary, "part-00000-of-00001.index"), "w").close()
    raise Killed()

  monkeypatch.setattr(tf.train.CheckpointManager, "save", save)


def dead_process_temporary(directory):
  """A tfbert temporary whose writer is gone, as a killed export leaves it."""
  proc = subprocess.Popen([sys.executable, "-c", ""])
  proc.wait()
  path = os.path.join(directory, f"{atomic.TEMP_PREFIX}{proc.pid}-{'0' * 32}-export")
  os.makedirs(os.path.join(path, "saved_model"))
  return path


KILL = dict(bert_config=DROPOUT, deterministic=True, distribution_strategy="one_device",
            num_cpu_devices=1, num_train_steps=5, log_steps=1, save_checkpoints_steps=3)


@pytest.fixture(scope="module")
def uninterrupted_kill_run(data_dir, tmp_path_factory):
  model_dir = tmp_path_factory.mktemp("uninterrupted")
  run_pretraining(run_config(data_dir, model_dir, **KILL))
  return read_metrics(model_dir)


@pytest.mark.slow
@pytest.mark.parametrize("killed_at_save", [1, 2])  # Before / after the first checkpoint.
def test_rerun_after_a_kill_leaves_one_metrics_line_per_step_and_no_leftovers(
    data_dir, tmp_path, monkeypatch, uninterrupted_kill_run, killed_at_save):
  config = run_config(data_dir, tmp_path / "run", **KILL)
  kill_at_save(monkeypatch, killed_at_save)
  with pytest.raises(Killed):
    run_pretraining(config)
  monkeypatch.undo()
  written = [r["step"] for r in read_metrics(tmp_path / "run")]
  assert written == {1: [1, 2, 3], 2: [1, 2, 3, 4, 5]}[killed_at_save]
  with open(tmp_path / "run" / "metrics.jsonl", "a") as f:
    f.write('{"step": 6, "lo')  # A line the kill cut.
  stale = dead_process_temporary(str(tmp_path / "run"))
  assert leftovers(tmp_path / "run")
  run_pretraining(config)
  assert untimed(read_metrics(tmp_path / "run")) == untimed(uninterrupted_kill_run)
  assert not leftovers(tmp_path / "run") and not os.path.exists(stale)


@pytest.mark.slow
def test_export_is_written_whole_or_not_at_all(exported_run):
  run, found = exported_run
  assert not found["failed"]["export"] and not found["failed"]["leftovers"]  # No SavedModel alone.
  last, files = found["exported"]["last"], found["exported"]["files"]
  assert any(p.endswith("saved_model.pb") for p in files)
  assert any(p.endswith("bert_model.ckpt.index") for p in files)
  # The summary names the final paths, each there.
  assert set(last["written"]) == {"checkpoint", "metrics", "tensorboard", "saved_model",
                                  "google_checkpoint"}
  for name, path in last["written"].items():
    assert path in last["summary"] and found["exported"]["present"][name], name
    assert not any(atomic.is_temporary(part) for part in path.split(os.sep)), name
  # A rerun of the finished run leaves its export as it is, and says where it is.
  assert found["rerun"]["files"] == files
  assert found["rerun"]["last"]["written"] == last["written"]
  # A failed re-export keeps the previous export as it was.
  kept = {p: b for p, b in files.items() if p != found["failed_again"]["removed"]}
  assert found["failed_again"]["files"] == kept and len(kept) == len(files) - 1
  assert not found["failed_again"]["leftovers"]


@pytest.mark.slow
def test_checkpoint_without_the_metrics_window_still_resumes(data_dir, tmp_path, monkeypatch):
  """A run directory written before checkpoints held the log window resumes (model and
  optimizer restored strictly)."""
  config = run_config(data_dir, tmp_path / "run", distribution_strategy="one_device",
                      num_cpu_devices=1, num_train_steps=3, accumulation=1, log_steps=1,
                      save_checkpoints_steps=1)
  real = tf.train.Checkpoint
  monkeypatch.setattr(tf.train, "Checkpoint", lambda metrics_window, **objects: real(**objects))
  run_pretraining(dataclasses.replace(config, stop_at_step=2))
  monkeypatch.undo()
  last = run_pretraining(config)
  assert last["step"] == 3 and [r["step"] for r in read_metrics(tmp_path / "run")] == [1, 2, 3]


def _damage_record(path, index):
  """Flips a byte in the data of record `index` of a TFRecord file (its framing stays valid,
  so the pre-run check passes; TensorFlow's reader fails on the data CRC when it reads it)."""
  with open(path, "rb") as f:
    data = bytearray(f.read())
  offset = 0
  for _ in range(index):
    offset += 16 + int.from_bytes(data[offset:offset + 8], "little")
  data[offset + 12 + 3] ^= 0x10
  with open(path, "wb") as f:
    f.write(bytes(data))
  return offset


def _without_data_position(monkeypatch):
  """Checkpoints as tfbert wrote them before they held the data position."""
  real = tf.train.Checkpoint
  monkeypatch.setattr(tf.train, "Checkpoint",
                      lambda data_position=None, **objects: real(**objects))


@pytest.mark.slow  # Two tiny runs of 2 steps.
def test_a_resume_naming_the_same_data_another_way_continues(data_dir, tmp_path, monkeypatch):
  """The records named relative to another working directory, through a symbolic link, are
  the files the run recorded (sweep 10, C185): compared as real paths, not refused as
  another configuration; other data still is."""
  run = tmp_path / "run"
  common = dict(num_train_steps=2, accumulation=1, save_checkpoints_steps=1, log_steps=1,
                distribution_strategy="one_device", num_cpu_devices=1)
  run_pretraining(run_config(data_dir, run, stop_at_step=1, **common))
  os.symlink(data_dir, tmp_path / "linked")
  monkeypatch.chdir(tmp_path)
  last = run_pretraining(run_config("linked", "run", **common))
  assert last["step"] == 2
  shutil.copytree(data_dir, tmp_path / "other")  # The same records in other files.
  with pytest.raises(ValueError, match="trained on other data: .*other/pretraining-00000"):
    run_pretraining(run_config("other", "run", **common))


@pytest.mark.slow  # Two tiny runs of 1 step each.
def test_a_run_begun_with_relative_paths_resumes_from_another_working_directory(
    data_dir, tmp_path, monkeypatch):
  """Sweep 34, A1/A75/A76: run_config.json recorded the relative glob as given and the
  checkpointed data iterator the relative file names, so a resume from another directory,
  naming the same folder relatively (or a flags.txt replay), was refused as another
  configuration, or failed to read its checkpoint ("remove it to start over")."""
  shutil.copytree(data_dir, tmp_path / "data")
  common = dict(num_train_steps=2, accumulation=1, save_checkpoints_steps=1, log_steps=1,
                distribution_strategy="one_device", num_cpu_devices=1)
  monkeypatch.chdir(tmp_path)
  run_pretraining(run_config("data", "run", stop_at_step=1, **common))
  recorded = json.loads((tmp_path / "run" / "run_config.json").read_text())
  assert recorded["input_files"] == [str(tmp_path / "data" / "*.tfrecord")]
  (tmp_path / "sub").mkdir()
  monkeypatch.chdir(tmp_path / "sub")
  last = run_pretraining(run_config(os.path.join("..", "data"), os.path.join("..", "run"),
                                    **common))
  assert last["step"] == 2


@pytest.mark.slow
def test_a_resumed_run_reads_on_from_its_checkpoint_and_never_rereads(data_dir, tmp_path,
                                                                     monkeypatch,
                                                                     straight_four):
  """A record consumed before the checkpoint, damaged after it, does not stop the resumed
  run (its data position is restored, not re-read), which equals the uninterrupted run;
  resuming by reading past the consumed records, as from a checkpoint without the position,
  reads it and fails."""
  data = tmp_path / "data"
  shutil.copytree(data_dir, data)
  common = STRAIGHT_FOUR  # Its uninterrupted run is straight_four's, on the same records.
  run_pretraining(run_config(str(data), tmp_path / "split", stop_at_step=2, **common))
  _without_data_position(monkeypatch)
  run_pretraining(run_config(str(data), tmp_path / "skip", stop_at_step=2, **common))
  monkeypatch.undo()
  # Deterministic order reads the 2 shards record by record in turn: 2 steps of 8 took
  # records 0-7 of each. Record 5 is past the 4 that the pre-run check parses.
  shard = sorted(glob.glob(str(data / "*.tfrecord")))[0]
  byte = _damage_record(shard, 5)
  run_pretraining(run_config(str(data), tmp_path / "split", **common))
  assert untimed(read_metrics(tmp_path / "split")) == untimed(read_metrics(straight_four))
  with pytest.raises(ValueError, match=rf"{re.escape(shard)}: bad TFRecord at byte {byte} "
                                       r"\(record 5\)"):
    run_pretraining(run_config(str(data), tmp_path / "skip", **common))


@pytest.mark.slow
def test_a_checkpoint_without_the_data_position_resumes_by_reading_past(held_out_runs):
  """Run directories from before checkpoints held the data position resume exactly, and
  their next checkpoints hold it: stopped at 2 (no position), at 3 (position), then 5
  (`held_out_runs`' split run; the evaluation at 2 lies between the first two)."""
  assert held_out_runs["positions"] == {2: False, 3: True}
  a, b = held_out_runs["straight_rows"], held_out_runs["split_rows"]
  assert [r["step"] for r in b if "split" not in r] == [1, 2, 3, 4, 5]
  assert untimed(b) == untimed(a)  # float32, deterministic: bit for bit.


@pytest.mark.slow
def test_fast_forward_moves_counters_and_data_as_training_would(data_dir, tmp_path,
                                                                 straight_four):
  """A run moved 2 steps on by reading (its iterator) and one moved by its counters alone
  (no position: the rerun reads past what they say was consumed) resume onto the same
  batch with the same schedule: two mechanisms, one position."""
  straight = read_metrics(straight_four)[-1]
  # One run stopped at 1, copied: both mechanisms move the same directory (a copied run
  # directory resumes where it lies).
  run_pretraining(run_config(data_dir, tmp_path / "read", stop_at_step=1, **STRAIGHT_FOUR))
  shutil.copytree(tmp_path / "read", tmp_path / "counted")
  for name, position in (("read", True), ("counted", False)):
    config = run_config(data_dir, tmp_path / name, **STRAIGHT_FOUR)
    assert pretraining_run.fast_forward(config, 2, data_position=position) == 3
    reader = tf.train.load_checkpoint(str(tmp_path / name / "checkpoints" / "ckpt-3"))
    names = {n.split("/")[0] for n in reader.get_variable_to_shape_map()}
    assert ("data_position" in names) == position
    run_pretraining(config)
  read, counted = read_metrics(tmp_path / "read"), read_metrics(tmp_path / "counted")
  assert [r["step"] for r in read] == [1, 4]
  assert untimed(read) == untimed(counted)
  assert read[-1]["learning_rate"] == straight["learning_rate"]  # The schedule's step 4.
  assert read[-1]["loss"] != straight["loss"]  # The weights of step 1, not of step 3.


def _event_scalars(folder):
  """{tag: [(step, value)]} of the TensorBoard events in `folder`."""
  tags = {}
  for path in glob.glob(os.path.join(folder, "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
  return tags


@pytest.fixture(scope="module")
def held_out_runs(data_dir, tmp_path_factory):
  """A deterministic mirrored STRAIGHT_FIVE run evaluated every 2 steps, straight, and split:
  stopped at 2 with a checkpoint as tfbert wrote them before they held the data position,
  resumed and stopped at 3 (its checkpoint holds it), then resumed to the end. Their results
  and records (the held-out, stop/resume, data-position and eager tests read them)."""
  root = tmp_path_factory.mktemp("held_out")
  common = dict(STRAIGHT_FIVE, eval_input_files=[os.path.join(data_dir, "*.tfrecord")],
                eval_every_steps=2, eval_batch_size=4, max_eval_steps=3)
  result = run_pretraining(run_config(data_dir, root / "straight", **common))
  with pytest.MonkeyPatch.context() as patch:
    _without_data_position(patch)
    run_pretraining(run_config(data_dir, root / "split", stop_at_step=2, **common))
  stopped = run_pretraining(run_config(data_dir, root / "split", stop_at_step=3, **common))
  positions = {step: "data_position" in {name.split("/")[0] for name, _ in tf.train.list_variables(
      str(root / "split" / "checkpoints" / f"ckpt-{step}"))} for step in (2, 3)}
  exported_at_stop = os.path.exists(root / "split" / "export")
  rows_at_stop = read_metrics(root / "split")
  run_pretraining(run_config(data_dir, root / "split", **common))
  return dict(root=root, result=result, straight_rows=read_metrics(root / "straight"),
              stopped=stopped, exported_at_stop=exported_at_stop, rows_at_stop=rows_at_stop,
              positions=positions, split_rows=read_metrics(root / "split"))


@pytest.mark.slow
def test_held_out_evaluation_during_training_scores_the_model_of_that_step(data_dir,
                                                                           held_out_runs):
  files = os.path.join(data_dir, "*.tfrecord")
  root, result, rows = (held_out_runs[k] for k in ("root", "result", "straight_rows"))
  evals = [r for r in rows if r.get("split") == "eval"]
  assert [r["step"] for r in evals] == [2, 4, 5]  # Every 2 applied steps and the last.
  assert [r["step"] for r in rows if "split" not in r] == [1, 2, 3, 4, 5]
  assert result["eval"] == {k: v for k, v in evals[-1].items() if k not in ("step", "split")}
  assert evals[0]["mlm_loss"] > evals[-1]["mlm_loss"]  # It trains (lr 1e-3, same data).
  # The last evaluation scored the trained model: its export, evaluated again on one device.
  model = BertPretrainer(TINY)
  model.build()
  google_checkpoint.load_google_checkpoint(
      model, str(root / "straight" / "export" / "google" / "bert_model.ckpt"))
  strategy = tf.distribute.get_strategy()
  again = pretraining_eval.Evaluator(model, strategy, pretraining_eval.record_dataset(
      sorted(glob.glob(files)), strategy, batch_size=4, seq_length=SEQ, max_predictions=PRED,
      objective="mlm_nsp"), batch_size=4, steps=3)()
  # 2 replicas' float32 sums against one device's: the order of additions differs.
  assert again == pytest.approx(result["eval"], rel=1e-5)
  tags = _event_scalars(str(root / "straight" / "eval"))
  for name in ("loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy"):
    assert [s for s, _ in tags[name]] == [2, 4, 5], name  # Same tags as train/: one plot.
  assert tags["mlm_loss"][-1][1] == pytest.approx(evals[-1]["mlm_loss"], rel=1e-6)
  # The best held-out loss (the default best_metric) is kept apart: its model and scores.
  best = json.loads((root / "straight" / "best" / "eval_results.json").read_text())
  lowest = min(evals, key=lambda r: r["loss"])
  assert (best["step"], best["best_metric"], best["loss"]) == (lowest["step"], "loss",
                                                               lowest["loss"])
  assert os.path.exists(root / "straight" / "best" / "google" / "bert_model.ckpt.index")
  assert result["written"]["best"] == str(root / "straight" / "best")
  # Stopped at 3 and resumed: the evaluation of step 2 stays, those of 4 and 5 are the same.
  split = held_out_runs["split_rows"]
  assert [(r["step"], r.get("split")) for r in split] == [
      (r["step"], r.get("split")) for r in rows]
  numbers = [{k: v for k, v in row.items() if k != "split"} for row in untimed(rows)]
  for row, expected in zip(untimed(split), numbers):
    assert {k: v for k, v in row.items() if k != "split"} == pytest.approx(expected, rel=1e-6)


def test_eval_settings_that_do_not_fit_are_named(data_dir, tmp_path):
  with pytest.raises(ValueError, match=r"eval_every_steps \(2\) > 0 evaluates: it needs "
                                       "eval_input_files"):
    run_config(data_dir, tmp_path / "run", eval_every_steps=2)
  with pytest.raises(ValueError, match=r"early_stopping_patience \(2\) > 0 needs "
                                       "eval_input_files"):
    run_config(data_dir, tmp_path / "run", early_stopping_patience=2)
  with pytest.raises(ValueError, match=r"early_stopping_patience \(-1\) must be >= 0"):
    run_config(data_dir, tmp_path / "run", early_stopping_patience=-1)
  with pytest.raises(ValueError, match=r"eval_batch_size \(5\) must be a multiple of the "
                                       r"replicas \(2\)"):
    run_pretraining(run_config(data_dir, tmp_path / "run", eval_batch_size=5,
                               eval_input_files=[os.path.join(data_dir, "*.tfrecord")]))
  assert not os.path.exists(tmp_path / "run" / "run_config.json")


@pytest.mark.parametrize("overrides, num_replicas, message", [
    (dict(max_seq_length=1), 1, "max_seq_length (1) must be >= 2 ([CLS] and [SEP])"),
    (dict(max_predictions_per_seq=0), 1, "max_predictions_per_seq (0) must be >= 1"),
    (dict(max_eval_steps=0), 1, "max_eval_steps (0) must be >= 1"),
    (dict(eval_batch_size=5), 2, "eval_batch_size (5) must be a multiple of the replicas (2)"),
], ids=["max_seq_length", "max_predictions_per_seq", "max_eval_steps", "eval_batch_size"])
def test_each_sequence_and_eval_setting_at_fault_is_named_alone(
    data_dir, tmp_path, overrides, num_replicas, message):
  """Issue 47: one message named two settings where one was at fault ("max_seq_length (128)
  must be >= 2 and max_predictions_per_seq (0) >= 1")."""
  config = run_config(data_dir, tmp_path / "run")
  bad = dataclasses.replace(config, **overrides) if num_replicas > 1 else None
  if bad is None:
    with pytest.raises(ValueError) as error:
      dataclasses.replace(config, **overrides)
    found = str(error.value).removeprefix("PretrainingRunConfig: ").split("; ")
  else:
    found = validation.failures(bad.checks(num_replicas=num_replicas))
  assert found == [message]


ALL_EVAL_SCALARS = "loss, mlm_accuracy, mlm_loss, mlm_perplexity, nsp_accuracy, nsp_loss"


@pytest.mark.parametrize("objective, metric, names", [
    ("mlm_nsp", "perplexity", ALL_EVAL_SCALARS),
    ("mlm_nsp", "f1", ALL_EVAL_SCALARS),
    ("mlm", "nsp_loss", "loss, mlm_accuracy, mlm_loss, mlm_perplexity"),
], ids=["perplexity", "f1", "mlm-nsp_loss"])
def test_a_best_metric_the_evaluation_never_reports_is_refused_before_any_work(
    data_dir, tmp_path, objective, metric, names):
  """The held-out scalars follow from the objective: a best_metric outside them was refused
  only at the first evaluation, after a step had trained and the directory been written."""
  held_out = dict(objective=objective, eval_input_files=[os.path.join(data_dir, "*.tfrecord")])
  with pytest.raises(ValueError, match=re.escape(
      f"best_metric {metric!r} is not among the held-out evaluation's scalars for the "
      f"objective {objective} ({names})")):
    run_config(data_dir, tmp_path / "run", best_metric=metric, **held_out)
  for name in names.split(", "):
    run_config(data_dir, tmp_path / "run", best_metric=name, **held_out)
  assert pretraining_eval.metric_names(objective) == names.split(", ")


def test_a_best_metric_without_held_out_data_is_refused_as_patience_is(data_dir, tmp_path):
  """It was ignored without a word (early_stopping_patience was refused)."""
  with pytest.raises(ValueError, match=re.escape(
      "best_metric ('mlm_accuracy') picks the best held-out evaluation: it needs "
      "eval_input_files or eval_text_files")):
    run_config(data_dir, tmp_path / "run", best_metric="mlm_accuracy")


def test_the_tool_refuses_a_best_metric_before_it_writes(data_dir, tmp_path):
  """The sweep's commands (E07, E09): refused in one line, and no model_dir."""
  model_dir = tmp_path / "a" / "run"
  os.makedirs(model_dir.parent)
  flags = tool_flags(data_dir, str(model_dir), steps=2)
  held_out = f"--eval_input_files={os.path.join(data_dir, '*.tfrecord')}"
  for extra, message in (
      ([held_out, "--best_metric=perplexity"], "best_metric 'perplexity' is not among"),
      (["--best_metric=accuracy"], "it needs --eval_input_files or --eval_text_files")):
    run = tool_process.run_tool("run_pretraining", *flags, *extra)
    assert run.returncode != 0 and message in run.stderr, run.stderr[-2000:]
    assert not model_dir.exists()


@pytest.mark.slow  # ~5 s: a one-step run with evaluation and its resume.
def test_a_resume_on_other_held_out_data_starts_the_best_over(data_dir, tmp_path, caplog):
  """eval_input_files may change on a rerun; the best held-out loss of the first files was
  compared with the loss on the new ones without a word (best/ and early stopping judged on
  incomparable numbers). The best is recorded with the files (and their sha256): the resume
  names what changed and the old best, and starts over."""
  first, second = sorted(glob.glob(os.path.join(data_dir, "*.tfrecord")))
  config = run_config(data_dir, tmp_path / "run", num_train_steps=2, accumulation=1,
                      log_steps=1, save_checkpoints_steps=1, distribution_strategy="one_device",
                      num_cpu_devices=1, eval_input_files=[first], eval_every_steps=1,
                      eval_batch_size=4, max_eval_steps=1)
  run_pretraining(dataclasses.replace(config, stop_at_step=1))
  old_best = json.loads((tmp_path / "run" / "best" / "eval_results.json").read_text())
  assert old_best["step"] == 1
  with caplog.at_level("INFO", logger="absl"):
    run_pretraining(dataclasses.replace(config, eval_input_files=[second]))
  assert (f"the evaluation differs from the one the checkpoint's best loss was measured on "
          f"(data: {first}: no longer read; data: {second}: not read before): that best "
          f"({old_best['loss']:.4f} at applied step 1, 0 evaluation(s) since) is not compared "
          "with this run's; the best value and the patience count start over") in caplog.text
  assert json.loads((tmp_path / "run" / "best" / "eval_results.json").read_text())["step"] == 2
  reader = tf.train.load_checkpoint(str(tmp_path / "run" / "checkpoints" / "ckpt-2"))
  recorded = json.loads(reader.get_tensor("eval_state/evaluation/.ATTRIBUTES/VARIABLE_VALUE"))
  assert recorded == {"best_metric": "loss", "sequences": 4,
                      "data": run_directory.data_identity([second])}


@pytest.fixture(scope="module")
def mlm_only_data(data_dir, tmp_path_factory):
  """`data_dir`'s records without `next_sentence_labels` (its summary beside them)."""
  root = tmp_path_factory.mktemp("mlm_only_data")
  for path in glob.glob(os.path.join(data_dir, "*.tfrecord")):
    with tf.io.TFRecordWriter(str(root / os.path.basename(path))) as writer:
      for record in tf.data.TFRecordDataset(path):
        example = tf.train.Example.FromString(record.numpy())
        del example.features.feature["next_sentence_labels"]
        writer.write(example.SerializeToString())
  shutil.copy(os.path.join(data_dir, "pretraining-summary.json"), root)
  return str(root)


def _signature_names(saved_model_dir):
  """The signatures of a SavedModel, from its saved_model.pb alone (nothing loaded)."""
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
    proto.ParseFromString(f.read())
  return set(proto.meta_graphs[0].signature_def)


@pytest.mark.slow  # A 2-step run with evaluation.
def test_an_mlm_only_run_records_logs_evaluates_and_exports_no_nsp(mlm_only_data, tmp_path):
  files = [os.path.join(mlm_only_data, "*.tfrecord")]
  config = run_config(mlm_only_data, tmp_path / "run", objective="mlm", num_train_steps=2,
                      accumulation=1, log_steps=1, distribution_strategy="one_device",
                      num_cpu_devices=1, eval_input_files=files, eval_batch_size=4,
                      max_eval_steps=2)
  run_pretraining(config)
  run = tmp_path / "run"
  assert json.loads((run / "run_config.json").read_text())["objective"] == "mlm"
  rows = read_metrics(run)
  train = [r for r in rows if "split" not in r]
  evals = [r for r in rows if r.get("split") == "eval"]
  assert [r["step"] for r in train] == [1, 2] and [r["step"] for r in evals] == [2]
  for row in train + evals:
    assert {"loss", "mlm_loss", "mlm_accuracy"} <= set(row)
    assert not [k for k in row if k.startswith("nsp")]
    assert row["loss"] == pytest.approx(row["mlm_loss"], rel=1e-6)
  tags = {**helpers.tensorboard_scalars(run / "train"), **helpers.tensorboard_scalars(run / "eval")}
  assert "mlm_loss" in tags and not [t for t in tags if "nsp" in t]
  best = json.loads((run / "best" / "eval_results.json").read_text())
  assert "mlm_loss" in best and not [k for k in best if k.startswith("nsp")]
  google = read_google_checkpoint(str(run / "export" / "google" / "bert_model.ckpt"))
  # 5 embedding + 16 (one layer) + 2 pooler (untrained) + 5 MLM tensors, no NSP head.
  assert len(google) == 28 and not [n for n in google if n.startswith("cls/seq_relationship")]
  # The other objective needs labels the data lacks: named in one line, before any write.
  with pytest.raises(ValueError, match=r"00000-of-00002.tfrecord: record 0 has no feature "
                                       r"'next_sentence_labels', which the objective mlm_nsp"):
    run_pretraining(dataclasses.replace(config, objective="mlm_nsp"))
  # On data that has them, the directory refuses the other objective as any config change.
  other = dataclasses.replace(config, objective="mlm_nsp")
  with pytest.raises(run_directory.RunDirectoryError,
                     match='run_config.json objective: "mlm" -> "mlm_nsp"'):
    run_directory.claim(str(run), pretraining_run.run_records(other, pretraining_run.data_record(
        sorted(glob.glob(files[0])))))


def test_raw_text_with_a_next_sentence_objective_is_refused_in_flags():
  """Sweep 17 p04: the tool said "PretrainingRunConfig: ... pass objective mlm"."""
  problem = pretraining_run.text_objective_problem(["c.txt"], "mlm_nsp", objective_given=False)
  assert problem == (
      "--train_text_files trains masked LM alone (documents packed into blocks, no sentence "
      "pairs for a next-sentence head), but --objective=mlm_nsp (the default): pass "
      "--objective=mlm, or train mlm_nsp on create_pretraining_data's TFRecords with "
      "--input_files")
  assert "(the default)" not in pretraining_run.text_objective_problem(["c.txt"], "mlm_nsp",
                                                                       True)
  assert pretraining_run.text_objective_problem(["c.txt"], "mlm", False) is None
  assert pretraining_run.text_objective_problem([], "mlm_nsp", False) is None
