"""Tests for tfbert.tasks.runner: a fourth task made of hooks only, run by `run_task`.

The task below is not part of tfbert: a toy sentence regression ("how much more `up` than
`down`", a count difference) on random sentences, written the way `docs/adding_a_task.md`
says. Nothing in tfbert knows it; the runner gives it the run directory, the training loop
with 2 replicas, exact resume, evaluation during training with the best model, and the
result files.
"""

import dataclasses
import json
import logging
import os
import re
from typing import ClassVar

import numpy as np
import pytest

from tfbert import BertClassifier, BertConfig
from tfbert.runtime import run_directory, validation
from tfbert.tasks import fine_tuning, runner
from tfbert.tasks.task import Outputs, RunContext, Task, TrainingData

WORDS = ["up", "down", "left", "right", "north", "south", "east", "west", "in", "out", "on"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
CONFIG = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                    num_attention_heads=2, intermediate_size=19, max_position_embeddings=13,
                    type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
SEQ = 11


@dataclasses.dataclass(frozen=True, kw_only=True)
class TiltConfig(fine_tuning.FineTuningConfig):
  """The toy task's own settings on top of every fine-tuning run's."""
  RERUN_MAY_CHANGE: ClassVar[frozenset] = (
      fine_tuning.FineTuningConfig.RERUN_MAY_CHANGE | frozenset({"do_eval", "eval_file"}))
  train_file: str = ""
  eval_file: str = ""
  do_eval: bool = False
  max_seq_length: int = SEQ
  eval_batch_size: int = 8

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    return [(not self.do_train or self.train_file, "do_train needs train_file")
            ] + super().checks(num_replicas)


def read_tilt_file(path: str) -> tuple[list[str], np.ndarray]:
  """`sentence<TAB>score` lines; a bad line is named by `file:line`."""
  sentences, scores = [], []
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      parts = line.rstrip("\n").split("\t")
      if len(parts) != 2:
        raise ValueError(f"{path}:{number}: want sentence<TAB>score, got {line!r}")
      sentences.append(parts[0])
      scores.append(float(parts[1]))
  return sentences, np.array(scores, np.float32)


class TiltTask(Task):
  """The fourth task: hooks only."""
  head = "classifier_head"

  def default_best_metric(self, config):
    return "neg_mse"

  def evaluation_metrics(self, config, inputs):
    return ["neg_mse"] if "dev" in inputs else []

  def eval_files(self, config, inputs):
    return [config.eval_file] if "dev" in inputs else []

  def read_inputs(self, config):
    inputs = {}
    if config.do_train:
      inputs["train"] = read_tilt_file(config.train_file)
    if config.do_eval:
      inputs["dev"] = read_tilt_file(config.eval_file)
    return inputs

  def build_model(self, config, bert_config, labels):
    return BertClassifier(bert_config, 1, 0.0)  # One score.

  def _features(self, context, sentences):
    tokenizer, seq = context.tokenizer, context.config.max_seq_length
    ids = np.zeros((len(sentences), seq), np.int32)
    for row, pieces in enumerate(tokenizer.tokenize(sentences).to_list()):
      tokens = [tokenizer.cls_id] + pieces[:seq - 2] + [tokenizer.sep_id]
      ids[row, :len(tokens)] = tokens
    return {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "segment_ids": np.zeros_like(ids)}

  def train_data(self, context):
    sentences, scores = context.inputs["train"]
    return TrainingData((self._features(context, sentences), {"logits": scores[:, None]}),
                        len(sentences), f"{len(sentences)} sentences")

  def evaluate(self, context):
    sentences, scores = context.inputs["dev"]
    logits = fine_tuning.predict(context.model, context.strategy,
                                 self._features(context, sentences),
                                 context.config.eval_batch_size)["logits"]
    return {"neg_mse": -float(np.mean((logits[:, 0] - scores) ** 2))}

  def outputs(self, context):
    if not context.config.do_eval:
      return Outputs()
    scores = self.evaluate(context)
    return Outputs(result={"eval": scores}, eval_results={"dev": scores})


def _write_data(path, seed, count):
  rng = np.random.default_rng(seed)
  lines = []
  for _ in range(count):
    words = rng.choice(WORDS, size=rng.integers(3, SEQ - 1))
    score = float(np.sum(words == "up") - np.sum(words == "down"))
    lines.append(f"{' '.join(words)}\t{score:.6f}\n")
  path.write_text("".join(lines))
  return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  root = tmp_path_factory.mktemp("tilt")
  (root / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCAB))
  CONFIG.to_json_file(str(root / "bert_config.json"))
  return {"train": _write_data(root / "train.tsv", 1, 45),  # 45: odd, not a batch multiple.
          "dev": _write_data(root / "dev.tsv", 2, 13),
          "vocab": str(root / "vocab.txt"), "bert_config": str(root / "bert_config.json")}


def _config(files, output_dir, **overrides):
  values = dict(output_dir=str(output_dir), do_train=True, do_eval=True,
                train_file=files["train"], eval_file=files["dev"], vocab_file=files["vocab"],
                do_lower_case=True, bert_config_file=files["bert_config"],
                train_batch_size=8, learning_rate=1e-2, num_train_epochs=2.0, warmup_proportion=0.1,
                distribution_strategy="mirrored", num_cpu_devices=2, seed=5, log_steps=1,
                save_checkpoints_steps=3, eval_every_steps=5, verbose=0)
  return TiltConfig(**{**values, **overrides})


def _metrics(run_dir):
  with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def _curve(run_dir):
  return [{k: v for k, v in row.items() if k != "examples_per_second"}
          for row in _metrics(run_dir)]


@pytest.mark.slow  # ~40 s: two 11-step runs on 2 replicas, one of them in two parts.
def test_a_task_of_hooks_only_trains_resumes_and_evaluates_on_two_replicas(files, tmp_path):
  straight = runner.run_task(TiltTask(), _config(files, tmp_path / "straight"))
  steps = 45 * 2 // 8
  assert straight["train"]["steps"] == steps and straight["train"]["finished"]
  assert straight["train"]["examples"] == 45
  rows = [r for r in _metrics(tmp_path / "straight") if "split" not in r]
  assert [r["step"] for r in rows] == list(range(1, steps + 1))
  assert all(np.isfinite(r["loss"]) for r in rows)
  names = {os.path.relpath(p, tmp_path / "straight") for p in straight["written"]}
  assert {"model.keras", "train_results.json", "eval_results.json", "best"} <= names
  for name in ("run_config.json", "bert_config.json", "vocab.txt", "best/model.keras"):
    assert os.path.exists(tmp_path / "straight" / name), name
  with open(tmp_path / "straight" / "eval_results.json", encoding="utf-8") as f:
    assert json.load(f) == {"dev": {**straight["eval"], "step": steps}}
  evals = [r for r in _metrics(tmp_path / "straight") if r.get("split") == "eval"]
  assert [r["step"] for r in evals] == [5, 10, steps]
  with open(tmp_path / "straight" / "best" / "eval_results.json", encoding="utf-8") as f:
    best = json.load(f)  # The best evaluation's model is kept, by the task's metric.
  assert best["neg_mse"] == max(r["neg_mse"] for r in evals)

  # Stopped at step 4 (a checkpoint at 3: the rerun repeats step 4), then resumed.
  parted = tmp_path / "parted"
  first = runner.run_task(TiltTask(), _config(files, parted, stop_at_step=4))
  assert not first["train"]["finished"] and first["written"] == [str(parted / "checkpoints")]
  resumed = runner.run_task(TiltTask(), _config(files, parted))
  assert resumed["train"]["finished"]
  # Deterministic float32 on CPU: the resumed run is the straight run, bit for bit (every
  # logged value but the wall-clock throughput).
  assert _curve(parted) == _curve(tmp_path / "straight")
  assert resumed["eval"] == straight["eval"]


def test_a_task_run_checks_before_it_claims(files, tmp_path):
  """A bad line is named, and the directory was never claimed."""
  bad = tmp_path / "bad.tsv"
  bad.write_text("up up\t1.0\nno score here\n")
  with pytest.raises(ValueError, match=r"bad.tsv:2: want sentence<TAB>score"):
    runner.run_task(TiltTask(), _config(files, tmp_path / "run", train_file=str(bad)))
  assert not os.path.exists(tmp_path / "run")
  # S beyond the model's positions: refused before the claim too.
  with pytest.raises(ValueError, match="max_position_embeddings"):
    runner.run_task(TiltTask(), _config(files, tmp_path / "run", max_seq_length=14))
  assert not run_directory.has_trained(str(tmp_path / "run"))
  assert not os.path.exists(tmp_path / "run")


def test_a_held_out_file_that_is_trained_on_is_warned_of_before_the_claim(
    files, tmp_path, monkeypatch, caplog):
  """Sweep 18, p02: a run that evaluated on its own training file (here through a link)
  chose its best model by how it fits its training data, without a word."""
  class Claimed(Exception):
    pass

  def claim(*args, **kwargs):
    raise Claimed

  monkeypatch.setattr(fine_tuning, "claim_run_directory", claim)
  link = tmp_path / "dev_link.tsv"
  link.symlink_to(files["train"])
  for eval_file, warned in ((str(link), True), (files["dev"], False)):
    caplog.clear()
    with caplog.at_level(logging.WARNING), pytest.raises(Claimed):
      runner.run_task(TiltTask(), _config(files, tmp_path / "run", eval_file=eval_file))
    expected = (f"the held-out evaluation reads training data: {link} is also trained on, so "
                "the evaluation (and the best model it picks) measures fitting the training "
                "data, not generalization: evaluate on files training does not read")
    assert (expected in caplog.messages) is warned, caplog.messages


def test_a_resume_on_a_changed_train_file_is_refused_before_any_write(files, tmp_path):
  """The run records its train file's identity (`data.json`); a rerun after the file
  changed is refused at the claim, naming the file, and rewrites nothing."""
  train = tmp_path / "train.tsv"
  train.write_text(open(files["train"], encoding="utf-8").read())
  config = _config(files, tmp_path / "run", train_file=str(train), do_eval=False,
                   eval_every_steps=0, distribution_strategy="one_device", num_cpu_devices=1)
  model = TiltTask().build_model(config, CONFIG, None)
  model.build()
  fine_tuning.claim_run_directory(model, config, files["vocab"],
                                  train_files=TiltTask().train_files(config, None)).release()
  before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
  assert "data.json" in before
  train.write_text(train.read_text() + "up up\t2.000000\n")
  with pytest.raises(run_directory.RunDirectoryError,
                     match=rf"other data: {train}: \d+ -> \d+ bytes"):
    runner.run_task(TiltTask(), config)
  assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()
          if p.is_file()} == before


class PairTiltTask(TiltTask):
  """The toy task as if its inputs were text pairs (segment ids 0 and 1)."""

  def segments(self, config):
    return 2


def test_a_pair_task_on_a_model_of_one_token_type_is_refused_before_the_claim(files, tmp_path):
  """It failed at the first step with a gather error ("indices[0,5] = 1 is not in [0, 1)")."""
  one_type = tmp_path / "bert_config.json"
  dataclasses.replace(CONFIG, type_vocab_size=1).to_json_file(str(one_type))
  with pytest.raises(ValueError, match=r"text pairs \(segment ids 0..1\) but the model's "
                                       r"type_vocab_size is 1"):
    runner.run_task(PairTiltTask(), _config(files, tmp_path / "run", bert_config_file=str(
        one_type), do_eval=False, eval_every_steps=0, distribution_strategy="one_device",
        num_cpu_devices=1))
  assert not os.path.exists(tmp_path / "run")


def test_a_best_metric_the_evaluation_does_not_return_is_refused_before_any_write(
    files, tmp_path, monkeypatch):
  """`task.evaluation_metrics` sees the inputs read (names may depend on the data) and
  `best_metric` is checked against them before the model is built or the directory
  claimed. Only the first evaluation found it, with a step trained and the run written."""
  seen = []

  class Named(TiltTask):
    def evaluation_metrics(self, config, inputs):
      seen.append(sorted(inputs))
      return super().evaluation_metrics(config, inputs)

  monkeypatch.setattr(runner, "build_model", _never_build)
  with pytest.raises(ValueError, match=re.escape(
      "best_metric 'mse' is not among the evaluation's scalars (neg_mse): pass "
      "--best_metric=<one of them>")):
    runner.run_task(Named(), _config(files, tmp_path / "run", best_metric="mse"))
  assert seen == [["dev", "train"]] and not os.path.exists(tmp_path / "run")


def _never_build(*args, **kwargs):
  raise AssertionError("the model was built before the check")


def test_the_files_the_evaluation_scores_go_to_the_training_loop(files, tmp_path, monkeypatch):
  """`task.eval_files` is what `fine_tuning.train` records with the best value (a resume on
  an edited dev file starts the best over); nothing was recorded, so the resume compared
  scores of the new file with the best of the old."""
  calls = []

  class Trains(TiltTask):
    def train_data(self, context):
      return TrainingData(({}, {}), 8, "8 rows")

  def train(*args, **kwargs):
    calls.append(kwargs)
    return {"steps": 1, "finished": True}

  monkeypatch.setattr(fine_tuning, "train", train)
  context = RunContext(config=_config(files, tmp_path / "run"), strategy=None, tokenizer=None,
                       model=None, inputs={"dev": ([], None)}, work_dir=str(tmp_path),
                       chief=True)
  runner.train(Trains(), context, evaluate=dict)
  runner.train(Trains(), context)  # No evaluation: no files.
  assert [list(call["eval_files"]) for call in calls] == [[files["dev"]], []]


def _evaluation_only(files, output_dir, **overrides):
  return _config(files, output_dir, **{
      "do_train": False, "distribution_strategy": "one_device", "num_cpu_devices": 1,
      "eval_every_steps": 0, **overrides})


@pytest.mark.slow  # ~5 s: a 2-step run, then three evaluations.
def test_an_evaluation_without_training_evaluates_the_runs_own_model(files, tmp_path, caplog):
  """Sweep 8 RE12/RE08/IR07: `--do_eval` without `--do_train` in a finished run directory
  evaluated random weights ("starting from random weights") and wrote their scores over the
  run's eval_results.json. Now it evaluates the run's latest checkpoint (naming its step),
  or its model.keras without checkpoints: the training run's own final scores, exactly."""
  run = tmp_path / "run"
  trained = runner.run_task(TiltTask(), _evaluation_only(files, run, do_train=True,
                                                         max_train_steps=2))
  recorded = json.loads((run / "eval_results.json").read_text())
  assert recorded == {"dev": {**trained["eval"], "step": 2}}
  config = (run / "run_config.json").read_text()
  caplog.set_level(logging.INFO, logger="absl")  # Parsed absl flags may raise its level.
  again = runner.run_task(TiltTask(), _evaluation_only(files, run))
  assert again["eval"] == trained["eval"]
  assert json.loads((run / "eval_results.json").read_text()) == recorded
  assert f"{run / 'checkpoints' / 'ckpt-2'} (applied step 2)" in caplog.text
  assert "random weights" not in caplog.text
  assert (run / "run_config.json").read_text() == config  # The training run's, kept.
  # model.keras deleted: the checkpoint still holds the run's model (RE08).
  (run / "model.keras").rename(tmp_path / "model.keras")
  assert runner.run_task(TiltTask(), _evaluation_only(files, run))["eval"] == trained["eval"]
  # No checkpoint: the run's model.keras.
  (tmp_path / "model.keras").rename(run / "model.keras")
  for path in (run / "checkpoints").iterdir():
    path.unlink()
  caplog.clear()
  assert runner.run_task(TiltTask(), _evaluation_only(files, run))["eval"] == trained["eval"]
  assert f"evaluating the run's model: {run / 'model.keras'}" in caplog.text


def test_an_evaluation_without_training_or_a_source_is_refused_before_any_work(
    files, tmp_path, monkeypatch):
  """No trained model in the directory, no --init_*: the evaluation of random weights was
  written as the run's results."""
  monkeypatch.setattr(runner, "build_model", _never_build)
  with pytest.raises(ValueError, match=re.escape(
      f"nothing to evaluate: {tmp_path / 'run'} holds no trained model (no checkpoints/, no "
      "model.keras); pass --init_tfbert/--init_hf_dir/--init_checkpoint, or --do_train")):
    runner.run_task(TiltTask(), _evaluation_only(files, tmp_path / "run"))
  assert not os.path.exists(tmp_path / "run")


def test_another_source_in_a_trained_run_directory_is_refused_as_ambiguous(
    files, tmp_path, monkeypatch):
  """An --init_* source outside a directory that holds a trained run: which model does the
  evaluation score, and whose results does it write over the run's? Refused, naming both.
  A source inside the run (its model.keras, best/model.keras) is the run's own: used."""
  run = tmp_path / "run"
  (run / "checkpoints").mkdir(parents=True)
  (run / "checkpoints" / "ckpt-3.index").write_bytes(b"")
  (run / "best").mkdir()
  (run / "best" / "model.keras").write_bytes(b"")
  other = tmp_path / "other.keras"
  other.write_bytes(b"")
  monkeypatch.setattr(runner, "build_model", _never_build)
  with pytest.raises(ValueError, match=re.escape(
      f"--init_tfbert {other}: {run} holds a trained run (its model: "
      f"{run / 'checkpoints' / 'ckpt-3'}, applied step 3)")) as error:
    runner.run_task(TiltTask(), _evaluation_only(files, run, init_tfbert=str(other)))
  assert "drop --init_tfbert" in str(error.value) and "another --output_dir" in str(error.value)
  best = str(run / "best" / "model.keras")
  config, own = fine_tuning.evaluated_model(_evaluation_only(files, run, init_tfbert=best))
  assert own is None and config.init_tfbert == best
  config, own = fine_tuning.evaluated_model(_evaluation_only(files, run))
  assert own.checkpoint == str(run / "checkpoints" / "ckpt-3") and own.step == 3
  assert config.init_tfbert is None  # No model.keras: the run's bert_config.json builds it.


def test_a_resume_missing_its_run_config_is_refused_before_any_write(files, tmp_path):
  """Sweep 8 RE11: a stopped run whose run_config.json was deleted, rerun with another
  learning rate, resumed on the new schedule and recorded the new rate as the whole run's."""
  config = _config(files, tmp_path / "run", do_eval=False, eval_every_steps=0,
                   distribution_strategy="one_device", num_cpu_devices=1)
  model = TiltTask().build_model(config, CONFIG, None)
  model.build()
  fine_tuning.claim_run_directory(model, config, files["vocab"],
                                  train_files=TiltTask().train_files(config, None)).release()
  (tmp_path / "run" / "checkpoints").mkdir()
  (tmp_path / "run" / "checkpoints" / "ckpt-2.index").write_bytes(b"")
  (tmp_path / "run" / "run_config.json").unlink()
  before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
  with pytest.raises(run_directory.RunDirectoryError,
                     match="holds checkpoints but not the run's run_config.json"):
    runner.run_task(TiltTask(), dataclasses.replace(config, learning_rate=1e-3))
  assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()
          if p.is_file()} == before


class _ExportOnly(Task):
  """Outputs nothing of its own; its export writes nothing (the paths are what is checked)."""

  def outputs(self, context):
    return Outputs(written=["labels.txt"])

  def export(self, context):
    del context


def test_a_relative_export_dir_without_a_slash_is_reported_where_it_was_written(
    tmp_path, monkeypatch):
  """Sweep 11 S1: `--output_dir=n1 --export_dir=n1x` wrote ./n1x but listed "wrote:
  .../n1/n1x": a bare name was taken for a file in the output directory. Every path
  reported is absolute, where the writer put it."""
  monkeypatch.chdir(tmp_path)
  config = TiltConfig(output_dir="n1", export_dir="n1x")
  context = RunContext(config=config, strategy=None, tokenizer=None, model=None, inputs={},
                       work_dir="n1", chief=True)
  written = fine_tuning.written_paths(config.output_dir,
                                      runner._run(_ExportOnly(), context)["written"])
  assert written == [str(tmp_path / "n1" / "labels.txt"), str(tmp_path / "n1x")]


class _ScoresTask(Task):
  """Outputs only: the scores of the files given, as a task evaluating them would."""

  def __init__(self, scores):
    self.scores = scores

  def outputs(self, context):
    return Outputs(result={"eval": self.scores}, eval_results=self.scores)


def test_an_evaluation_of_another_file_keeps_the_other_files_scores(tmp_path, caplog):
  """Sweep 15 S2: an eval-only rerun on another --eval_file rewrote eval_results.json with
  that file's scores alone; the dev scores of the training run were gone. Now each entry
  records the applied step it was computed at, the files evaluated now are replaced and the
  others kept, in the log."""
  (tmp_path / "eval_results.json").write_text(json.dumps(
      {"dev": {"accuracy": 50.0, "step": 4}, "train": {"accuracy": 10.0, "step": 4}}))
  config = TiltConfig(output_dir=str(tmp_path), do_eval=True, eval_file="x.tsv",
                      vocab_file="v.txt")
  context = RunContext(config=config, strategy=None, tokenizer=None, model=None, inputs={},
                       work_dir=str(tmp_path), chief=True)
  caplog.set_level(logging.INFO, logger="absl")
  result = runner._run(_ScoresTask({"train": {"accuracy": 90.0}}), context, step=6)
  assert json.loads((tmp_path / "eval_results.json").read_text()) == {
      "dev": {"accuracy": 50.0, "step": 4}, "train": {"accuracy": 90.0, "step": 6}}
  assert result["eval"] == {"train": {"accuracy": 90.0}}  # The task's scores, as they were.
  assert "kept from earlier evaluations: dev (applied step 4)" in caplog.text


class _Built(Exception):
  """What `build_model`, replaced, raises once it has seen the config."""


def test_a_new_run_from_a_runs_model_uses_its_recorded_sequence_length(
    files, tmp_path, monkeypatch):
  """Sweep 22 S1: --init_tfbert=<run>/model.keras into a new --output_dir took the casing
  from the run's run_config.json but max_seq_length from the defaults. The runner takes
  both before any work (`fine_tuning.source_run_settings`); nothing is written."""
  run = tmp_path / "run"
  run.mkdir()
  (run / "run_config.json").write_text(json.dumps({"max_seq_length": 7,
                                                   "do_lower_case": True}))
  (run / "model.keras").write_bytes(b"")  # Never read: the build stops first.
  seen = []

  def capture(task, config, *args, **kwargs):
    seen.append(config)
    raise _Built

  monkeypatch.setattr(runner, "build_model", capture)
  with pytest.raises(_Built):
    runner.run_task(TiltTask(), _evaluation_only(files, tmp_path / "new",
                                                 init_tfbert=str(run / "model.keras"),
                                                 do_lower_case=None,
                                                 given_settings=frozenset()))
  assert seen[0].max_seq_length == 7 and seen[0].do_lower_case is True
  assert not (tmp_path / "new").exists()
