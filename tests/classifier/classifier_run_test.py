"""Tests for tfbert.classifier.classifier_run: a tiny model learns a GLUE-format pair task; the tool
runs.

The learning data is tests/glue_synthetic.py's MRPC-format `fruit_pairs` (label "1" iff
the two counts add up to more than 10): the trivial baseline is 50% accuracy, and reading
one sentence only can reach 77.8%. Measured (this machine, 2 CPU cores, seeds 1, 2, 3, 7):
120 applied steps of 16 reach 97-100% dev accuracy; the test runs 160.
"""

import csv
import dataclasses
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests import forked, glue_synthetic, helpers, multi_worker, tool_process
from tfbert import BertClassifier, BertEncoder, BertPretrainer
from tfbert.checkpoints import google_checkpoint, huggingface, pretrained
from tfbert.classifier import classifier_run, glue_data
from tfbert.config import BertConfig
from tfbert.runtime import cpu, run_directory
from tfbert.serving import serving_dtype
from tfbert.tasks import fine_tuning, runner
from tfbert.training import training_loop, workers

ROOT = helpers.ROOT
TOOL = os.path.join(ROOT, "tools", "run_classifier.py")
SEQ = 25
# Tiny, odd-sized, uncased vocab of the MiniLM wheel (30,522 entries); the values of
# tests/squad/squad_run_test.py's TINY (not imported: a test module is no library).
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, max_position_embeddings=128, type_vocab_size=2,
            initializer_range=0.1)


def _tiny_config_file(tmp_path):
  path = str(tmp_path / "bert_config.json")
  BertConfig(**TINY).to_json_file(path)
  return path


def _glue(tmp_path):
  """The test's data folder, `tmp_path/glue`: outputs go beside it, never inside an input."""
  (tmp_path / "glue").mkdir(exist_ok=True)
  return tmp_path / "glue"


def _run_config(tmp_path, output, **overrides):
  values = dict(
      output_dir=str(tmp_path / output), task_name="mrpc", data_dir=str(_glue(tmp_path)),
      vocab_file=pretrained.minilm_vocab_file(), bert_config_file=_tiny_config_file(tmp_path),
      max_seq_length=SEQ, classifier_dropout=0.0, train_batch_size=16, eval_batch_size=64,
      learning_rate=1e-3, num_train_epochs=1.0, seed=7, verbose=0)
  return classifier_run.ClassifierRunConfig(**{**values, **overrides})


def _untrained(directory):
  """`helpers.untrained_tfbert` of a TINY encoder."""
  return helpers.untrained_tfbert(directory, BertEncoder, BertConfig(**TINY))


def _read_tsv(path):
  with open(path, encoding="utf-8-sig", newline="") as f:
    return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _read_json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


@pytest.fixture
def mrpc_dir(tmp_path):
  glue_synthetic.write_mrpc(_glue(tmp_path) / "train.tsv", glue_synthetic.fruit_pairs(640, seed=1))
  glue_synthetic.write_mrpc(_glue(tmp_path) / "dev.tsv", glue_synthetic.fruit_pairs(200, seed=2))
  return tmp_path


@pytest.mark.parametrize("overrides, message", [
    (dict(do_train=False), "at least one of"),
    (dict(data_dir=None), "do_train needs data_dir or train_file"),
    (dict(task_name="mnli-mm"), "unknown task"),
    (dict(task_name="custom"), "needs its columns and labels"),
    (dict(init_hf_dir="a", init_tfbert="b"), "at most one of"),
    (dict(train_batch_size=6, gradient_accumulation_steps=4), "multiple of"),
    (dict(max_train_examples=0), "max_train_examples"),
    (dict(dtype="float16"), "dtype must be one of"),
    (dict(export_dtype="float16"), "export_dtype must be one of"),
    (dict(distribution_strategy="multi_worker"), "multi_worker needs TF_CONFIG"),
    (dict(max_seq_length=129), "exceeds max_position_embeddings 128"),
])
def test_config_names_what_does_not_fit(tmp_path, overrides, message):
  glue_synthetic.write_mrpc(_glue(tmp_path) / "train.tsv", glue_synthetic.fruit_pairs(8, seed=1))
  with pytest.raises(ValueError, match=message):  # At construction or at the run's start.
    classifier_run.run_classifier(_run_config(tmp_path, "out", **{"do_train": True, **overrides}))
  assert not (tmp_path / "out").exists()  # Refused before anything is written.


def test_google_checkpoint_init_loads_encoder_and_pooler_and_a_fresh_head(tmp_path):
  source = BertPretrainer(BertConfig(**TINY))
  source.build()
  prefix = str(tmp_path / "google" / "bert_model.ckpt")
  google_checkpoint.export_google_checkpoint(source, prefix)  # bert_config.json beside it.
  config = _run_config(tmp_path, "out", do_eval=True, bert_config_file=None,
                       init_checkpoint=prefix)
  model = classifier_run.build_classifier(config, glue_data.TASKS["mnli"],
                                          tf.distribute.get_strategy())
  want, got = google_checkpoint.google_weights(source), google_checkpoint.google_weights(model)
  encoder = [name for name in got if name.startswith("bert/")]
  assert "bert/pooler/dense/kernel" in encoder
  assert len(encoder) == len([name for name in want if name.startswith("bert/")])
  for name in encoder:
    np.testing.assert_array_equal(got[name], want[name])
  assert got["output_weights"].shape == (3, TINY["hidden_size"])  # MNLI: 3 classes.
  assert float(np.abs(got["output_bias"]).max()) == 0.0  # Fresh: zeros.


def test_a_source_without_the_pooler_is_refused(tmp_path):
  # The head's Google scope is "" (a prefix of every name), so allowing the head to be
  # missing must not let a missing pooler through: it would stay random.
  source = BertPretrainer(BertConfig(**TINY))
  source.build()
  weights = {k: v for k, v in google_checkpoint.google_weights(source).items()
             if not k.startswith("bert/pooler/")}
  prefix = str(tmp_path / "google" / "bert_model.ckpt")
  google_checkpoint.write_google_checkpoint(weights, prefix)
  config = _run_config(tmp_path, "out", do_eval=True, init_checkpoint=prefix)
  with pytest.raises(ValueError, match=r"missing from the source:\n  bert/pooler/dense/bias"):
    classifier_run.build_classifier(config, glue_data.TASKS["mrpc"],
                                    tf.distribute.get_strategy())


def _hf_classifier_dir(path, num_labels, pooler=True):
  """A Hugging Face classifier directory of `num_labels` classes (without the pooler: as
  BertForTokenClassification saves its encoder)."""
  source = BertClassifier(BertConfig(**TINY), num_labels,
                          labels=[f"l{i}" for i in range(num_labels)])
  source.build()
  weights = {k: v for k, v in google_checkpoint.google_weights(source).items()
             if pooler or not k.startswith("bert/pooler/")}
  huggingface.save_hf_checkpoint(source.config, weights, str(path))
  return source


def test_a_head_of_another_label_count_is_refused_unless_reinit_head(tmp_path, caplog):
  source = _hf_classifier_dir(tmp_path / "hf3", 3)  # A 3-label head, for MRPC's 2.
  config = _run_config(tmp_path, "out", do_train=True, do_eval=True, bert_config_file=None,
                       init_hf_dir=str(tmp_path / "hf3"))
  strategy = tf.distribute.get_strategy()
  with pytest.raises(ValueError, match=r"hf3: its task head does not fit this model's "
                     r"classifier_head \(output_bias: source \(3,\) vs model \(2,\); "
                     r"output_weights: .*\): pass --reinit_head"):
    classifier_run.build_classifier(config, glue_data.TASKS["mrpc"], strategy)
  with caplog.at_level("WARNING"):
    model = classifier_run.build_classifier(dataclasses.replace(config, reinit_head=True),
                                            glue_data.TASKS["mrpc"], strategy)
  assert "skipped from " in caplog.text and "output_bias, output_weights" in caplog.text
  want, got = google_checkpoint.google_weights(source), google_checkpoint.google_weights(model)
  for name in want:
    if name.startswith("bert/"):  # The encoder, pooler included, is the source's.
      np.testing.assert_array_equal(got[name], want[name])
  assert got["output_weights"].shape == (2, TINY["hidden_size"])
  assert float(np.abs(got["output_bias"]).max()) == 0.0  # Fresh: zeros.
  # A head that fits is loaded, unless reinit_head is asked for.
  fitting = _hf_classifier_dir(tmp_path / "hf2", 2).classifier_head.output_weights.numpy()
  for reinit, loaded in ((False, True), (True, False)):
    model = classifier_run.build_classifier(
        dataclasses.replace(config, init_hf_dir=str(tmp_path / "hf2"), reinit_head=reinit),
        glue_data.TASKS["mrpc"], strategy)
    assert np.array_equal(model.classifier_head.output_weights.numpy(), fitting) == loaded


def test_reinit_head_starts_a_classifier_from_a_source_without_pooler(tmp_path, caplog):
  # As a BertForTokenClassification directory: no pooler. Strict, it is refused (above).
  source = _hf_classifier_dir(tmp_path / "tagger", 4, pooler=False)
  config = _run_config(tmp_path, "out", do_train=True, do_eval=True, bert_config_file=None,
                       init_hf_dir=str(tmp_path / "tagger"), reinit_head=True)
  with caplog.at_level("WARNING"):
    model = classifier_run.build_classifier(config, glue_data.TASKS["mrpc"],
                                            tf.distribute.get_strategy())
  assert "the pooler starts fresh too (not in the source): bert/pooler/dense" in caplog.text
  name = "bert/encoder/layer_0/attention/self/query/kernel"
  np.testing.assert_array_equal(google_checkpoint.google_weights(model)[name],
                                google_checkpoint.google_weights(source)[name])


def test_hugging_face_init_reads_minilm_with_its_pooler(tmp_path):
  config = _run_config(tmp_path, "out", do_eval=True, bert_config_file=None, vocab_file=None,
                       init_hf_dir=pretrained.minilm_dir())
  model = classifier_run.build_classifier(config, glue_data.TASKS["sts-b"],
                                          tf.distribute.get_strategy())
  assert (model.config.hidden_size, model.config.num_hidden_layers) == (384, 6)
  assert model.num_classes == 1  # STS-B: one score.
  _, weights, _ = huggingface.load_hf_checkpoint(pretrained.minilm_dir())
  name = "bert/pooler/dense/kernel"
  np.testing.assert_array_equal(google_checkpoint.google_weights(model)[name], weights[name])


@pytest.mark.slow  # ~20 s: a 160-step training run, then an eval-only run of its model.
def test_tiny_model_learns_the_pair_task_far_above_the_baselines(mrpc_dir):
  trained = classifier_run.run_classifier(_run_config(
      mrpc_dir, "trained", do_train=True, do_eval=True, num_train_epochs=4.0))
  dev_labels = [row[0] for row in _read_tsv(_glue(mrpc_dir) / "dev.tsv")[1:]]
  majority = max(dev_labels.count("0"), dev_labels.count("1")) / len(dev_labels)
  scores = trained["eval"]["dev"]
  assert majority <= 0.56 and glue_synthetic.ONE_SENTENCE_CEILING < 0.78
  assert scores["accuracy"] > 95 and scores["f1"] > 95, scores  # Percent.
  assert scores["num_examples"] == 200
  assert trained["train"]["steps"] == 640 * 4 // 16 and trained["train"]["loss"] < 0.2
  out = mrpc_dir / "trained"
  # Each file's scores with the applied step they were computed at.
  assert _read_json(out / "eval_results.json") == {
      name: {**values, "step": 160} for name, values in trained["eval"].items()}
  assert _read_json(out / "train_results.json")["steps"] == 160
  predictions = _read_tsv(out / "dev_predictions.tsv")
  assert predictions[0] == ["index", "prediction"]
  assert [int(row[0]) for row in predictions[1:]] == list(range(200))
  # The reported accuracy is that of the written predictions against the file's labels.
  right = sum(row[1] == label for row, label in zip(predictions[1:], dev_labels))
  assert scores["accuracy"] == 100.0 * (right / 200)
  assert os.listdir(out / "train")  # TensorBoard events.
  plain = BertClassifier(BertConfig(**TINY), 2)
  plain.build()
  assert os.path.getsize(out / "model.keras") < 1.1 * 4 * plain.count_params()  # No slots.
  reloaded = classifier_run.run_classifier(_run_config(
      mrpc_dir, "reloaded", do_eval=True, bert_config_file=None,
      init_tfbert=str(out / "model.keras")))
  assert reloaded["eval"] == trained["eval"]
  assert _read_tsv(mrpc_dir / "reloaded" / "dev_predictions.tsv") == predictions


def _write_lines(path, lines):
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write("\n".join(lines) + "\n")
  return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "mixed_float16"])
def test_sts_b_regression_trains_in_mixed_precision_and_reports_correlations(tmp_path, dtype):
  header = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\t"
            "score")
  rows = [f"{i}\tg\tf\t2012\t{i:04d}\tnone\tnone\tA man plays {i}.\tA man sings {i % 3}.\t"
          f"{i % 6 * 0.8:.3f}" for i in range(24)]
  _write_lines(_glue(tmp_path) / "train.tsv", [header] + rows)
  _write_lines(_glue(tmp_path) / "dev.tsv", [header] + rows[:11])
  result = classifier_run.run_classifier(_run_config(
      tmp_path, dtype, task_name="sts-b", do_train=True, do_eval=True, dtype=dtype,
      max_train_steps=2, train_batch_size=4, gradient_accumulation_steps=2))
  assert result["train"]["steps"] == 2 and np.isfinite(result["train"]["loss"])
  # mixed_float16 alone scales the loss (2**15 at first; halved on each skipped step).
  assert ("loss_scale" in result["train"]) == (dtype == "mixed_float16")
  assert sorted(result["eval"]["dev"]) == ["file", "loss", "num_examples", "pearson",
                                           "spearman"]
  scores = [float(row[1]) for row in _read_tsv(tmp_path / dtype / "dev_predictions.tsv")[1:]]
  assert len(scores) == 11 and len(set(scores)) > 1


MNLI_LABELS = ("contradiction", "entailment", "neutral")


def _write_mnli(tmp_path):
  """MNLI-format train (9 rows), dev_matched (7), dev_mismatched (5), test_matched (4) and
  test_mismatched (3) files in the test's data folder."""
  header = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
            "sentence1_parse\tsentence2_parse\tsentence1\tsentence2")

  def rows(count, extra):
    return [f"{i}\t{i}\t{i}e\tfiction\t(a)\t(b)\t(A)\t(B)\tThe cat sat {i}.\tA dog ran {i}."
            + extra(i) for i in range(count)]

  dev_header = header + "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label"
  def dev(i):
    return "\tneutral" * 5 + f"\t{MNLI_LABELS[i % 3]}"
  _write_lines(_glue(tmp_path) / "train.tsv",
               [header + "\tlabel1\tgold_label"] + rows(9, lambda i: f"\t{MNLI_LABELS[i % 3]}" * 2))
  _write_lines(_glue(tmp_path) / "dev_matched.tsv", [dev_header] + rows(7, dev))
  _write_lines(_glue(tmp_path) / "dev_mismatched.tsv", [dev_header] + rows(5, dev))
  _write_lines(_glue(tmp_path) / "test_matched.tsv", [header] + rows(4, lambda i: ""))
  _write_lines(_glue(tmp_path) / "test_mismatched.tsv", [header] + rows(3, lambda i: ""))


@pytest.mark.slow  # ~3 s: two evaluations of an untrained tiny model.
def test_an_evaluation_of_another_dev_file_says_whose_scores_it_replaces(tmp_path, caplog):
  """Sweep 19 S1: eval_results.json records the file each split's scores are of; scoring
  another file of the same name in the run says whose scores and predictions it replaces
  (as run_squad does)."""
  _write_mnli(tmp_path)
  first = str(_glue(tmp_path) / "dev_matched.tsv")
  other = tmp_path / "other" / "dev_matched.tsv"
  other.parent.mkdir()
  other.write_text("".join(open(first, encoding="utf-8").readlines()[:4]), encoding="utf-8")
  untrained = _untrained(tmp_path)
  caplog.set_level("INFO", logger="absl")
  for path in (first, first, str(other)):
    if path == str(other):
      assert "replacing" not in caplog.text, caplog.text  # The same file: nothing said.
    classifier_run.run_classifier(_run_config(tmp_path, "out", task_name="mnli", do_eval=True,
                                              eval_file=path, **untrained))
  scores = _read_json(tmp_path / "out" / "eval_results.json")["dev_matched"]
  assert (scores["file"], scores["num_examples"]) == (str(other), 3)
  assert (f"replacing the scores of dev_matched of {first} and dev_matched_predictions.tsv "
          f"with those of {other}") in caplog.text, caplog.text


@pytest.mark.slow  # ~3 s: one evaluation and prediction of an untrained tiny model.
def test_one_file_evaluated_and_predicted_is_recorded_once_and_nothing_is_said_replaced(
    tmp_path, caplog):
  """Sweep 32, A19: the dev predictions' source was not recorded, so predicting the same file
  in the same run said it replaced predictions "whose source was not recorded"."""
  _write_mnli(tmp_path)
  dev = str(_glue(tmp_path) / "dev_matched.tsv")
  caplog.set_level("INFO", logger="absl")
  classifier_run.run_classifier(_run_config(
      tmp_path, "out", task_name="mnli", do_eval=True, eval_file=dev, do_predict=True,
      predict_file=dev, **_untrained(tmp_path)))
  assert "replacing" not in caplog.text, caplog.text
  assert _read_json(tmp_path / "out" / "predictions_source.json") == {
      "dev_matched_predictions.tsv": dev}
  assert len(_read_tsv(tmp_path / "out" / "dev_matched_predictions.tsv")) == 1 + 7


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_mnli_evaluates_matched_and_mismatched_and_predicts_both_test_files(tmp_path):
  labels = MNLI_LABELS
  _write_mnli(tmp_path)
  config = _run_config(tmp_path, "mnli", task_name="mnli", do_eval=True, do_predict=True,
                       **_untrained(tmp_path))
  result = classifier_run.run_classifier(config)
  # What the evaluation during training returns is known before any work, from the files.
  task = classifier_run.ClassifierTask()
  inputs = task.read_inputs(config)
  assert task.evaluation_metrics(config, inputs) == list(
      classifier_run.eval_scalars(result["eval"])) == [
          "accuracy", "loss", "dev_mismatched_accuracy", "dev_mismatched_loss"]
  assert task.eval_files(config, inputs) == [
      str(_glue(tmp_path) / name) for name in ("dev_matched.tsv", "dev_mismatched.tsv")]
  assert {k: v["num_examples"] for k, v in result["eval"].items()} == {
      "dev_matched": 7, "dev_mismatched": 5}
  for split, count in (("test_matched", 4), ("test_mismatched", 3), ("dev_matched", 7)):
    written = _read_tsv(tmp_path / "mnli" / f"{split}_predictions.tsv")
    assert [int(r[0]) for r in written[1:]] == list(range(count))
    assert {r[1] for r in written[1:]} <= set(labels)
  gold = [labels[i % 3] for i in range(7)]
  written = _read_tsv(tmp_path / "mnli" / "dev_matched_predictions.tsv")[1:]
  right = sum(r[1] == g for r, g in zip(written, gold))
  assert result["eval"]["dev_matched"]["accuracy"] == 100.0 * (right / 7)


def _never_build(*args, **kwargs):
  raise AssertionError("the model was built: the best_metric should have been refused first")


def test_a_best_metric_the_evaluation_does_not_return_is_refused_before_any_write(
    tmp_path, monkeypatch):
  """The scalars come from the dev files read (MNLI's second one prefixed by its split).
  `best_metric` was checked at the first evaluation only: after the run directory was
  claimed and a step had trained (a half-written run left behind)."""
  _write_mnli(tmp_path)
  monkeypatch.setattr(runner, "build_model", _never_build)
  with pytest.raises(ValueError, match=re.escape(
      "best_metric 'dev_matched_accuracy' is not among the evaluation's scalars (accuracy, "
      "dev_mismatched_accuracy, dev_mismatched_loss, loss): pass --best_metric=")):
    classifier_run.run_classifier(_run_config(
        tmp_path, "out", task_name="mnli", do_train=True, do_eval=True, eval_every_steps=2,
        best_metric="dev_matched_accuracy"))
  assert not (tmp_path / "out").exists()


STS_HEADER = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
              "sentence2\tscore")


def _sts_rows(count, score):
  return [f"{i}\tg\tf\t2012\t{i:04d}\tnone\tnone\tA man plays {i}.\tA man sings {i % 3}.\t"
          f"{score(i):.3f}" for i in range(count)]


@pytest.mark.slow  # ~10 s alone (25 s on busy cores): 2 steps and an evaluation, then 4 and 2.
def test_a_resume_on_an_edited_dev_file_starts_the_best_over(tmp_path, caplog):
  """The dev file is recorded with the best value (`task.eval_files`). Edited between the
  stop and the resume, the best held-out loss of the old file (scores near the untrained
  model's output, 0) is not compared with the new file's (scores near 5, a far larger
  loss): the resume's first evaluation is the best. It was compared: patience 1 ended the
  run at that evaluation, and best/ kept the old file's model."""
  _write_lines(_glue(tmp_path) / "train.tsv", [STS_HEADER] + _sts_rows(24, lambda i: i % 6 * 0.8))
  dev = _glue(tmp_path) / "dev.tsv"
  _write_lines(dev, [STS_HEADER] + _sts_rows(11, lambda i: i % 2 * 0.4))
  config = _run_config(tmp_path, "run", task_name="sts-b", do_train=True, do_eval=True,
                       train_batch_size=4, eval_every_steps=2, best_metric="loss",
                       early_stopping_patience=1)  # 24 / 4 = 6 steps.
  stopped = classifier_run.run_classifier(dataclasses.replace(config, stop_at_step=2))
  assert stopped["train"]["steps"] == 2
  old_best = _read_json(tmp_path / "run" / "best" / "eval_results.json")
  assert old_best["step"] == 2
  _write_lines(dev, [STS_HEADER] + _sts_rows(11, lambda i: 4.6 + i % 2 * 0.4))
  caplog.set_level(logging.INFO, logger="absl")  # Parsed absl flags may raise its level.
  resumed = classifier_run.run_classifier(config)
  assert any(f"data: {dev}: " in m and "start over" in m for m in caplog.messages)
  assert resumed["train"]["steps"] == 6 and not resumed["train"].get("stopped_early")
  best = _read_json(tmp_path / "run" / "best" / "eval_results.json")
  # Measured on the edited file: worse than the old file's best (0.75 -> 9.9), yet kept.
  assert best["step"] >= 4 and best["loss"] > 5 * old_best["loss"]


@pytest.mark.slow  # 3.5 s or more in the suite's profile (tracing, a run).
def test_custom_csv_task_trains_and_evaluates(tmp_path):
  lines = ["id,review,verdict"] + [f'{i},"Nice, {i} times",{("bad", "ok", "great")[i % 3]}'
                                   for i in range(12)]
  _write_lines(_glue(tmp_path) / "train.csv", lines)
  _write_lines(_glue(tmp_path) / "dev.csv", lines[:6])
  custom = glue_data.CustomFormat(text_a_column=1, label_column=2, has_header=True,
                                  delimiter=",", labels=("bad", "ok", "great"))
  result = classifier_run.run_classifier(_run_config(
      tmp_path, "custom", task_name="custom", custom=custom, do_train=True, do_eval=True,
      max_train_steps=1, train_batch_size=4))
  assert result["train"]["steps"] == 1
  assert sorted(result["eval"]["dev"]) == ["accuracy", "file", "loss", "num_examples"]
  assert result["eval"]["dev"]["num_examples"] == 5
  assert _read_json(tmp_path / "custom" / "run_config.json")["custom"]["labels"] == [
      "bad", "ok", "great"]


def test_a_correlation_best_metric_on_constant_dev_targets_is_refused_before_any_work(
    tmp_path):
  """Sweep 14 S2: Pearson of dev targets that are all equal is NaN at every evaluation; with
  it as the best metric no best model was kept. Refused naming the dev file, as the
  embedding task does; a classification task has no correlation to refuse."""
  task = classifier_run.ClassifierTask()
  dev = [glue_data.InputExample(f"dev-{i}", i, i + 2, f"text {i}", None, "2.5")
         for i in range(3)]
  regression = glue_data.CustomFormat(text_a_column=0, label_column=1, regression=True)
  config = _run_config(tmp_path, "x", task_name="custom", custom=regression, do_eval=True,
                       eval_every_steps=2, best_metric="pearson")
  with pytest.raises(ValueError, match=re.escape(
      "dev.tsv: all 3 dev targets are 2.5, so best_metric 'pearson' (a correlation with "
      "them) is undefined at every evaluation: give a dev file whose targets vary, or pass "
      "--best_metric=<one of loss>")):
    task.evaluation_metrics(config, {"dev": [("dev.tsv", dev)]})
  varied = [dataclasses.replace(e, label=str(i)) for i, e in enumerate(dev)]
  assert "pearson" in task.evaluation_metrics(config, {"dev": [("dev.tsv", varied)]})


def test_a_run_without_training_takes_the_task_its_run_recorded(tmp_path, caplog):
  """Sweep 14 R1: a predict-only rerun of a custom-task run asked for --task_name (and then
  --custom_labels), which its run_config.json records like its other settings."""
  run = tmp_path / "run"
  custom = glue_synthetic.trained_custom_run(run)
  caplog.set_level("INFO", logger="absl")
  config, _ = fine_tuning.evaluated_model(classifier_run.ClassifierRunConfig(
      output_dir=str(run), task_name=None, do_predict=True, predict_file="p.tsv",
      given_settings=frozenset({"output_dir", "do_predict", "predict_file"})))
  assert (config.task_name, config.custom) == ("custom", custom)
  assert config.task().labels == ("neg", "pos")
  assert "its setting task_name=custom (run_config.json)" in caplog.text
  # Training names its task: there is no run to take it from.
  with pytest.raises(ValueError, match="^a task name is needed"):
    classifier_run.ClassifierRunConfig(output_dir=str(tmp_path / "new"), task_name=None,
                                       do_train=True, data_dir="d")


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_malformed_rows_stop_the_run_unless_skipped(tmp_path, caplog):
  rows = glue_synthetic.fruit_pairs(8, seed=3)
  path = glue_synthetic.write_mrpc(_glue(tmp_path) / "train.tsv", rows)
  with open(path, "a", encoding="utf-8") as f:
    f.write("2\t1\t2\tA.\tB.\n")  # Line 10: an MRPC label that does not exist.
  config = _run_config(tmp_path, "out", do_train=True, max_train_steps=1, train_batch_size=4)
  with pytest.raises(ValueError, match=r"train.tsv:10: column 0 \(label\) is '2'"):
    classifier_run.run_classifier(config)
  result = classifier_run.run_classifier(dataclasses.replace(config, skip_malformed_rows=True))
  assert result["train"]["steps"] == 1
  assert any(m.startswith("skipped malformed row: " + path + ":10: column 0 (label)")
             for m in caplog.messages)


def test_max_seq_length_is_bounded_by_the_tasks_arity_before_any_work(tmp_path):
  """Sweep 16 P2: MRPC at S 3 passed the ">= 3 ([CLS] text [SEP])" check and failed after
  tokenizing with "seq_length 3 leaves no room for 2 segment(s)". A pair needs 5."""
  with pytest.raises(ValueError, match=re.escape(
      "--max_seq_length (4) is too short for task mrpc (sentence pairs, [CLS] a [SEP] b "
      "[SEP]): pass --max_seq_length >= 5")):
    _run_config(tmp_path, "x", do_train=True, max_seq_length=4)
  with pytest.raises(ValueError, match=r"--max_seq_length \(2\) is too short for task sst-2 "
                     r"\(\[CLS\] text \[SEP\]\): pass --max_seq_length >= 3"):
    _run_config(tmp_path, "x", task_name="sst-2", do_train=True, max_seq_length=2)
  assert _run_config(tmp_path, "x", do_train=True, max_seq_length=5).max_seq_length == 5
  assert _run_config(tmp_path, "x", task_name="sst-2", do_train=True,
                     max_seq_length=3).max_seq_length == 3
  assert not (tmp_path / "x").exists()


def test_two_files_whose_predictions_share_a_name_are_refused_before_any_read(tmp_path):
  """Sweep 16 S2: --eval_file a/dev.tsv with --predict_file b/dev.tsv both wrote
  dev_predictions.tsv: the test predictions replaced the dev ones, with no word."""
  custom = glue_data.CustomFormat(labels=("neg", "pos"))
  glue = _glue(tmp_path)
  other = tmp_path / "other"
  other.mkdir()
  for folder in (glue, other):
    _write_lines(folder / "dev.tsv", ["good\tpos", "bad\tneg"])
  config = _run_config(tmp_path, "out", task_name="custom", custom=custom, do_eval=True,
                       eval_file=str(glue / "dev.tsv"), do_predict=True,
                       predict_file=str(other / "dev.tsv"))
  with pytest.raises(ValueError, match=re.escape(
      f"--eval_file {glue / 'dev.tsv'} and --predict_file {other / 'dev.tsv'} would both "
      f"write {tmp_path / 'out' / 'dev_predictions.tsv'}")):
    classifier_run.read_inputs(config.task(), config)
  # The task's dev file in --data_dir against a test file of that name: the same rule.
  config = dataclasses.replace(config, eval_file=None)
  with pytest.raises(ValueError, match=r"the dev file \(--data_dir\) .* and --predict_file"):
    classifier_run.read_inputs(config.task(), config)
  # One file given for both writes the same predictions under its one name.
  config = dataclasses.replace(config, predict_file=str(glue / "dev.tsv"))
  inputs = classifier_run.read_inputs(config.task(), config)
  assert [len(inputs[split][0][1]) for split in ("dev", "test")] == [2, 2]
  assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def exported_run(tmp_path_factory):
  """One 1-step run exporting with --export_dtype=auto into its own directory (out/export),
  and its config: the export-dtype test reruns it, the replay test replays it (each takes
  its own before and after)."""
  tmp_path = tmp_path_factory.mktemp("exported_run")
  glue_synthetic.write_mrpc(_glue(tmp_path) / "train.tsv", glue_synthetic.fruit_pairs(8, seed=3))
  config = _run_config(tmp_path, "out", do_train=True, max_train_steps=1, train_batch_size=4,
                       export_dir=str(tmp_path / "out" / "export"), export_dtype="auto")
  classifier_run.run_classifier(config)
  return tmp_path, config


@pytest.mark.slow
def test_the_export_computes_in_the_dtype_chosen_for_this_cpu_and_records_it(exported_run):
  """--export_dtype=auto: the run's export records what it measured on this CPU and chose;
  a rerun may change only the export's dtype."""
  tmp_path, config = exported_run
  record = _read_json(tmp_path / "out" / "export" / serving_dtype.RECORD_FILE)
  assert record["chosen_by"] == "measured on this CPU" and record["cpu"] == cpu.describe()
  seconds = record["matmul_seconds"]
  faster = seconds["bfloat16"] <= serving_dtype.BFLOAT16_SPEEDUP * seconds["float32"]
  assert record["compute_dtype"] == ("bfloat16" if faster else "float32")
  classifier_run.run_classifier(dataclasses.replace(config, export_dtype="bfloat16"))
  record = _read_json(tmp_path / "out" / "export" / "ids" / serving_dtype.RECORD_FILE)
  assert (record["compute_dtype"], record["chosen_by"]) == ("bfloat16", "the caller")


def _files(directory):
  return {n: (directory / n).read_bytes() for n in sorted(os.listdir(directory))
          if (directory / n).is_file()}


@pytest.fixture(scope="module")
def two_step_run(tmp_path_factory):
  """A 2-step run with its evaluation on `mrpc_dir`'s data, in `run`: its folder, config and
  results. Its tests rerun it only as refused or evaluation-only runs."""
  tmp_path = tmp_path_factory.mktemp("two_step_run")
  glue_synthetic.write_mrpc(_glue(tmp_path) / "train.tsv", glue_synthetic.fruit_pairs(640, seed=1))
  glue_synthetic.write_mrpc(_glue(tmp_path) / "dev.tsv", glue_synthetic.fruit_pairs(200, seed=2))
  config = _run_config(tmp_path, "run", do_train=True, do_eval=True, max_train_steps=2)
  return tmp_path, config, classifier_run.run_classifier(config)


@pytest.mark.slow  # The shared 2-step run, then 4 reruns (two refused, two evaluations).
def test_the_output_directory_belongs_to_one_run_and_is_self_contained(tmp_path, two_step_run):
  mrpc_dir, config, first = two_step_run
  out = mrpc_dir / "run"
  # Vocabulary and casing beside the model.
  with open(pretrained.minilm_vocab_file(), "rb") as f:
    assert (out / "vocab.txt").read_bytes() == f.read()
  assert _read_json(out / "run_config.json")["do_lower_case"] is True
  before = _files(out)
  # Another schedule or model is refused before anything is written, naming each change.
  with pytest.raises(run_directory.RunDirectoryError,
                     match=r"run_config.json learning_rate: 0.001 -> 0.002"):
    classifier_run.run_classifier(dataclasses.replace(config, learning_rate=2e-3))
  with pytest.raises(run_directory.RunDirectoryError,
                     match=r"bert_config.json num_hidden_layers: 2 -> 1"):
    classifier_run.run_classifier(dataclasses.replace(
        config, bert_config_file=None,
        init_checkpoint=_google_checkpoint(tmp_path, num_hidden_layers=1)))
  assert _files(out) == before
  # Evaluating with the directory's own model needs no vocab, config or casing flag.
  again = classifier_run.run_classifier(_run_config(
      mrpc_dir, "run", do_eval=True, vocab_file=None, bert_config_file=None,
      init_tfbert=str(out / "model.keras")))
  assert again["eval"] == first["eval"]
  assert _read_json(out / "run_config.json") == json.loads(before["run_config.json"])
  # Without it too: the run's latest checkpoint, not random weights (sweep 8 RE12).
  alone = classifier_run.run_classifier(_run_config(
      mrpc_dir, "run", do_eval=True, vocab_file=None, bert_config_file=None))
  assert alone["eval"] == first["eval"]


def _google_checkpoint(directory, **overrides):
  """A Google-format checkpoint (with bert_config.json beside) of a TINY-like encoder."""
  config = BertConfig(**{**TINY, **overrides})
  model = BertPretrainer(config)
  model.build()
  prefix = str(directory / "google" / "bert_model.ckpt")
  google_checkpoint.export_google_checkpoint(model, prefix)  # bert_config.json beside it.
  return prefix


# Runs in a fresh process: argv = export dir, then text_a/text_b pairs; prints labels.
CLASSIFY_SCRIPT = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  Registers the tokenizer's ops.

export_dir, *texts = sys.argv[1:]
classify = tf.saved_model.load(export_dir).signatures["classify_text"]
out = classify(text_a=tf.constant(texts[0::2]), text_b=tf.constant(texts[1::2]))
print(json.dumps({"label": [x.decode() for x in out["label"].numpy()],
                  "probabilities": out["probabilities"].numpy().tolist(),
                  "tfbert_imported": "tfbert" in sys.modules}))
"""


def test_a_run_that_fails_before_its_first_step_leaves_no_run_behind(tmp_path, monkeypatch):
  """The first step failing (here made to) must not leave run_config.json behind: the
  corrected rerun, with other settings, would be refused as another configuration."""
  glue_synthetic.write_mrpc(_glue(tmp_path) / "train.tsv", glue_synthetic.fruit_pairs(16, seed=1))

  def first_step_fails(*args, **kwargs):
    raise ValueError("the first step failed")

  monkeypatch.setattr(runner, "train", first_step_fails)  # Every task trains through it.
  for learning_rate in (1e-3, 2e-3):  # The second is not refused as another configuration.
    with pytest.raises(ValueError, match="the first step failed"):
      classifier_run.run_classifier(_run_config(tmp_path, "out", do_train=True,
                                                learning_rate=learning_rate))
    assert not (tmp_path / "out").exists()


# 37 examples in batches of 12, so epochs start mid-batch; 7 of the schedule's 9 steps.
SEVEN_STEPS = dict(do_train=True, train_batch_size=12, max_train_steps=7, num_train_epochs=3.0,
                   clip_norm=0.5)


def _write_37_pairs(tmp_path):
  glue_synthetic.write_mrpc(_glue(tmp_path) / "train.tsv", glue_synthetic.fruit_pairs(37, seed=3))


@pytest.fixture(scope="module")
def straight_seven(tmp_path_factory):
  """An uninterrupted SEVEN_STEPS run on `_write_37_pairs`' data (one device, one batch per
  step): its directory `k1` and its results (tests only read them). The rerun test's
  straight run and the micro-batch test's one-batch run."""
  tmp_path = tmp_path_factory.mktemp("straight_seven")
  _write_37_pairs(tmp_path)
  result = classifier_run.run_classifier(_run_config(tmp_path, "k1", **SEVEN_STEPS))
  return tmp_path / "k1", result


@pytest.mark.slow
def test_a_rerun_may_move_where_training_stops(tmp_path, straight_seven):
  """`max_train_steps` says where to stop, not what is trained (the schedule spans the
  epochs): a rerun with a larger one continues the run instead of being refused as another
  configuration, and ends where the straight run does."""
  straight_dir, straight = straight_seven
  _write_37_pairs(tmp_path)
  short = classifier_run.run_classifier(_run_config(tmp_path, "out",
                                                    **{**SEVEN_STEPS, "max_train_steps": 2}))
  graphs = helpers.live_instances(tf.Graph)
  longer = classifier_run.run_classifier(_run_config(tmp_path, "out", **SEVEN_STEPS))
  assert (short["train"]["steps"], longer["train"]["steps"], straight["train"]["steps"]) == \
      (2, 7, 7)
  # The run's traces died with it (tfbert.runtime.traces): each run leaves one graph in
  # the process, its input pipeline's scan function in TF's global graph (measured: 1 per
  # run with `released`, 7-8 per run without).
  assert helpers.live_instances(tf.Graph) - graphs <= 1
  # Bit for bit (deterministic float32, the data position resumed with the checkpoint).
  assert helpers.saved_weight_deviation(straight_dir, tmp_path / "out") == 0.0


@pytest.mark.slow
def test_a_replayed_run_never_writes_into_the_original_runs_export(exported_run):
  tmp_path, config = exported_run  # Its export_dir is inside its output_dir.
  before = sorted(os.listdir(tmp_path / "out" / "export"))
  saved = (tmp_path / "out" / "export" / "saved_model.pb").stat().st_mtime_ns
  # What --flagfile=out/flags.txt --output_dir=new gives: the old run's absolute export_dir.
  replay = dataclasses.replace(config, output_dir=str(tmp_path / "new"))
  with pytest.raises(run_directory.RunDirectoryError,
                     match=r"export_dir .*/out/export lies inside another run's directory"):
    classifier_run.run_classifier(replay)
  assert not (tmp_path / "new").exists()
  assert sorted(os.listdir(tmp_path / "out" / "export")) == before
  assert (tmp_path / "out" / "export" / "saved_model.pb").stat().st_mtime_ns == saved


@pytest.mark.slow
def test_tool_trains_mirrored_with_accumulation_and_its_export_serves_raw_text(mrpc_dir):
  rows = glue_synthetic.fruit_pairs(5, seed=4)
  _write_lines(_glue(mrpc_dir) / "test.tsv",
               [glue_synthetic.MRPC_HEADER.replace("Quality", "index")]
               + [f"{i}\t1\t2\t{a}\t{b}" for i, (_, a, b) in enumerate(rows)])
  out, export_dir = mrpc_dir / "out", mrpc_dir / "export"
  # The tool runs in this process (tests/tool_process.py: its 2 logical CPU devices are
  # conftest's); the export is served from a fresh one below.
  run = tool_process.run_tool(
      "run_classifier", "--task_name=MRPC", f"--data_dir={_glue(mrpc_dir)}", "--do_train",
      "--do_eval",
      "--do_predict", f"--vocab_file={pretrained.minilm_vocab_file()}",
      f"--bert_config_file={_tiny_config_file(mrpc_dir)}", f"--max_seq_length={SEQ}",
      "--train_batch_size=8", "--gradient_accumulation_steps=2",
      "--distribution_strategy=mirrored", "--num_cpu_devices=2", "--max_train_steps=3",
      f"--output_dir={out}", f"--export_dir={export_dir}", "--verbose=2")
  assert run.returncode == 0, run.stderr[-3000:]
  scores = _read_json(out / "eval_results.json")
  assert helpers.printed_scores(scores) in run.stdout  # Also printed.
  assert sorted(scores["dev"]) == ["accuracy", "f1", "file", "loss", "num_examples", "step"]
  assert scores["dev"]["step"] == 3
  assert "steps=3 " in run.stdout  # 3 applied steps = 6 micro-steps of 8 on 2 replicas.
  assert _read_json(out / "run_config.json")["gradient_accumulation_steps"] == 2
  recorded = (out / "flags.txt").read_text().splitlines()  # Replays with --flagfile.
  assert f"--output_dir={out}" in recorded and "--gradient_accumulation_steps=2" in recorded
  predicted = _read_tsv(out / "test_predictions.tsv")[1:]
  # Which file they predict (sweep 26, A92: a rerun on another replaced them silently).
  assert _read_json(out / "predictions_source.json") == {
      "dev_predictions.tsv": os.path.join(_glue(mrpc_dir), "dev.tsv"),
      "test_predictions.tsv": os.path.join(_glue(mrpc_dir), "test.tsv")}
  texts = [text for _, a, b in rows for text in (a, b)]
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  served = subprocess.run([sys.executable, "-c", CLASSIFY_SCRIPT, str(export_dir), *texts],
                          cwd=mrpc_dir, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
  assert served.returncode == 0, served.stderr[-3000:]
  report = json.loads(served.stdout.strip().splitlines()[-1])
  assert not report["tfbert_imported"]
  # The export's raw-text path gives the labels the tool predicted through Keras.
  assert report["label"] == [row[1] for row in predicted]
  np.testing.assert_allclose(np.sum(report["probabilities"], axis=1), 1.0, atol=1e-6)


@pytest.mark.slow
def test_four_micro_batches_train_exactly_as_one_batch_of_their_examples(
    tmp_path, straight_seven):
  # One_device strategy as in the benchmark; 37 examples, so epochs start mid-batch. The
  # one-batch run is the shared `straight_seven`.
  k1_dir, k1 = straight_seven
  _write_37_pairs(tmp_path)
  runs = {1: k1, 4: classifier_run.run_classifier(_run_config(
      tmp_path, "k4", **SEVEN_STEPS, gradient_accumulation_steps=4))}
  assert runs[1]["train"]["steps"] == runs[4]["train"]["steps"] == 7
  deviation = helpers.saved_weight_deviation(k1_dir, tmp_path / "k4")
  # As in squad_run_test: float32 summation order, lifted by Adam, measured ~1e-6; other
  # examples in other windows move weights by ~1e-2.
  assert deviation < 2e-5, deviation
  assert runs[1]["train"]["loss"] == pytest.approx(runs[4]["train"]["loss"], rel=1e-5)


def _multi_worker_args(mrpc_dir, out, *more):
  # One layer: its attention, hidden and pooled-output dropout falsify a wrong resume or
  # replica mask as two do, and each of the test's 7 processes builds and traces it.
  config = str(mrpc_dir / "dropout_config.json")
  BertConfig(**{**TINY, "num_hidden_layers": 1, "hidden_dropout_prob": 0.1,
                "attention_probs_dropout_prob": 0.1}).to_json_file(config)
  return [sys.executable, TOOL, "--task_name=MRPC", f"--data_dir={_glue(mrpc_dir)}", "--do_train",
          "--do_eval", f"--vocab_file={pretrained.minilm_vocab_file()}",
          f"--bert_config_file={config}", f"--max_seq_length={SEQ}", "--train_batch_size=8",
          "--gradient_accumulation_steps=2", "--max_train_steps=6", "--eval_every_steps=2",
          "--log_steps=1", "--save_checkpoints_steps=2", "--eval_batch_size=6",
          f"--output_dir={out}", *more]


def _wait_for_checkpoint(run_dir, step, procs, seconds=300):
  """Until the run's checkpoint of `step` is saved whole (`helpers.checkpoint_saved`)."""
  deadline = time.monotonic() + seconds
  while not helpers.checkpoint_saved(run_dir / "checkpoints", step):
    assert time.monotonic() < deadline, f"{run_dir}: no checkpoint of step {step}"
    assert all(p.poll() is None for p in procs), [p.poll() for p in procs]
    time.sleep(0.05)


def _rows(out):
  with open(out / "metrics.jsonl", encoding="utf-8") as f:
    return [{k: v for k, v in json.loads(line).items() if k != "examples_per_second"}
            for line in f]


@pytest.mark.slow  # ~45 s: 1 process straight, killed and rerun; 2 workers preempted, rerun.
def test_workers_and_interrupted_runs_end_equal_to_the_uninterrupted_run(mrpc_dir):
  """Dropout on (0.1 attention, hidden and pooled output), 2 replicas, evaluation every 2 of
  6 applied steps, a 1-layer model, 50 dev examples (8 batches of 6 and one of 2).

  * SIGKILL of a run in its own process, then the same command: its model and every log
    line equal the uninterrupted run's bit for bit (deterministic float32 on the same
    replicas).
  * 2 worker processes, SIGTERM to worker 1 alone: both save at the same step and exit 75;
    rerun, they end equal (<= 1e-5) to 1 process with 2 replicas (a replica's masks depend
    on its global replica id, not its process), holding identical weights and optimizer
    state. Only the chief writes outputs; evaluation is sharded (the same dev predictions,
    every example once); the other worker keeps its checkpoints in .worker1/.

  Every run is a child forked from a process that imported TensorFlow and ran nothing
  (tests/forked.py), which computes bit for bit what a fresh interpreter computes
  (tests/forked_test.py): not the tool in this process, whose earlier tests once left its
  weights 1.5e-8 away from a fresh process's (docs/testing.md, "What is left")."""
  glue_synthetic.write_mrpc(_glue(mrpc_dir) / "dev.tsv", glue_synthetic.fruit_pairs(50, seed=2))
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  mirrored = ("--distribution_strategy=mirrored", "--num_cpu_devices=2")
  straight = mrpc_dir / "straight"
  run = forked.run(_multi_worker_args(mrpc_dir, straight, *mirrored), env=env,
                   capture_output=True, text=True, timeout=600)
  assert run.returncode == 0, run.stderr[-3000:]
  # SIGKILL once the checkpoint of step 2 is saved whole (its .index alone appears before
  # the state file lists it: a kill between the two once left nothing to resume from), then
  # the same command again.
  killed = mrpc_dir / "killed"
  command = _multi_worker_args(mrpc_dir, killed, *mirrored)
  proc = forked.popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    _wait_for_checkpoint(killed, 2, [proc])
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
  finally:
    proc.kill()
    proc.wait(timeout=60)
  assert not os.path.exists(killed / "model.keras")  # It really was interrupted.
  again = forked.run(command, env=env, capture_output=True, text=True, timeout=600)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "resumed from" in again.stdout
  assert helpers.saved_weight_deviation(straight, killed) == 0.0
  assert _rows(killed) == _rows(straight)
  # Preemption of one worker of two.
  mw = mrpc_dir / "mw"
  command = _multi_worker_args(mrpc_dir, mw, "--distribution_strategy=multi_worker")
  ports = multi_worker.free_ports(2)
  procs = [forked.popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        env={**env, "TF_CONFIG": workers.tf_config(ports, index)})
           for index in range(2)]
  try:
    _wait_for_checkpoint(mw, 2, procs)
    procs[1].send_signal(signal.SIGTERM)
    codes = [p.wait(timeout=120) for p in procs]
  finally:
    for p in procs:
      p.kill()
      p.wait(timeout=60)
  assert codes == [training_loop.EXIT_PREEMPTED] * 2
  chief = tf.train.latest_checkpoint(str(mw / "checkpoints"))
  step = int(chief.rsplit("-", 1)[1])
  assert 2 <= step < 6  # Both stopped at the same step:
  assert tf.train.latest_checkpoint(str(mw / ".worker1" / "checkpoints")).endswith(
      f"ckpt-{step}")
  for worker in multi_worker.launch_workers(command, cwd=ROOT, timeout=600, env=env):
    assert worker.returncode == 0, worker.stdout[-3000:]
  # Same examples and masks per replica, reduced in another order: float32 rounding
  # (~1e-7 relative, lifted by Adam to ~1e-6); another replica layout moves weights ~1e-2.
  assert helpers.saved_weight_deviation(mw, straight) < 1e-5
  assert _read_tsv(mw / "dev_predictions.tsv") == _read_tsv(straight / "dev_predictions.tsv")
  assert len(_read_tsv(mw / "dev_predictions.tsv")) == 1 + 50
  assert _read_json(mw / "eval_results.json") == _read_json(straight / "eval_results.json")
  rows_mw, rows_mi = _rows(mw), _rows(straight)
  assert all("loss" in r for r in rows_mw + rows_mi)  # Eval rows too: the held-out loss.
  assert [(r["step"], r.get("split")) for r in rows_mw] == [
      (r["step"], r.get("split")) for r in rows_mi]
  assert [r.get("loss", r.get("accuracy")) for r in rows_mw] == pytest.approx(
      [r.get("loss", r.get("accuracy")) for r in rows_mi], rel=1e-5)
  # The other worker's directory: its lock and checkpoints, nothing else.
  assert sorted(os.listdir(mw / ".worker1")) == sorted([run_directory.LOCK_FILE, "checkpoints"])
  assert os.path.isfile(mw / "best" / "model.keras")
  # The workers hold identical weights and optimizer state: their checkpoints of the last
  # step agree exactly (the metrics window aside: each worker keeps its own replicas' sums).
  chief, other = (tf.train.load_checkpoint(str(directory / "checkpoints" / "ckpt-6"))
                  for directory in (mw, mw / ".worker1"))
  names = [name for name, _ in tf.train.list_variables(str(mw / "checkpoints" / "ckpt-6"))
           if not name.startswith(("metrics_window", "_CHECKPOINTABLE"))]
  assert len(names) > 3 * 25  # The 1-layer model's 25 weights, Adam's two slots, counters.
  for name in names:
    np.testing.assert_array_equal(chief.get_tensor(name), other.get_tensor(name))


def _strict_json(text):
  """json.loads refusing the non-JSON tokens NaN and Infinity that Python writes."""
  def refuse(token):
    raise ValueError(f"not JSON: {token}")
  return json.loads(text, parse_constant=refuse)


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_a_score_that_is_not_a_number_is_written_as_null_and_best_is_named_only_when_written(
    tmp_path):
  """Every dev score equal: Pearson and Spearman are NaN at every evaluation. The results
  are JSON every parser reads (null, not the bare NaN Python writes), and best/ is named
  among the outputs exactly when written. With evaluations during training, whose best metric
  would be Pearson (sts-b's default), the run is refused before any work (sweep 14 S2: it
  stopped early and kept no best model)."""
  header = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\t"
            "score")
  rows = [f"{i}\tg\tf\t2012\t{i:04d}\tnone\tnone\tA man plays {i}.\tA man sings {i % 3}.\t"
          f"{i % 6 * 0.8:.3f}" for i in range(12)]
  _write_lines(_glue(tmp_path) / "train.tsv", [header] + rows)
  _write_lines(_glue(tmp_path) / "dev.tsv", [header] + [r.rsplit("\t", 1)[0] + "\t2.500"
                                                       for r in rows[:7]])
  with pytest.raises(ValueError, match="so best_metric 'pearson' .* is undefined"):
    classifier_run.run_classifier(_run_config(
        tmp_path, "during", task_name="sts-b", do_train=True, do_eval=True,
        max_train_steps=2, train_batch_size=4, eval_every_steps=1))
  assert not (tmp_path / "during").exists()
  result = classifier_run.run_classifier(_run_config(
      tmp_path, "out", task_name="sts-b", do_train=True, do_eval=True, max_train_steps=2,
      train_batch_size=4, eval_every_steps=1, best_metric="loss"))
  out = tmp_path / "out"
  assert math.isnan(result["eval"]["dev"]["pearson"])
  written = _strict_json((out / "eval_results.json").read_text(encoding="utf-8"))
  assert written["dev"]["pearson"] is None and written["dev"]["spearman"] is None
  assert written["dev"]["loss"] > 0  # Finite scores stay numbers.
  lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
  evaluations = [row for row in map(_strict_json, lines) if row.get("split")]
  assert len(evaluations) == 2 and all(row["pearson"] is None for row in evaluations)
  # best/ (kept by the loss here) is named among the outputs exactly when it was written.
  assert (out / "best").exists() == any("best" in str(path) for path in result["written"])


@pytest.mark.slow  # Alone, it makes the shared 2-step run (3.5 s or more).
def test_a_deliberate_rerun_of_another_shape_is_refused_before_rewriting_the_records(
    tmp_path, two_step_run):
  """--allow_config_change may continue a run with new values, but not in a model whose
  shapes its checkpoints cannot fill: refused before the old run's records are rewritten
  (they were, and the restore failed after)."""
  mrpc_dir, config, _ = two_step_run
  out = mrpc_dir / "run"
  before = {name: (out / name).read_bytes() for name in ("bert_config.json", "run_config.json")}
  wider = str(tmp_path / "wider.json")
  BertConfig(**{**TINY, "hidden_size": 36}).to_json_file(wider)
  with pytest.raises(run_directory.RunDirectoryError, match=re.escape(
      "holds checkpoints of another model shape: bert_config.json hidden_size: 32 -> 36")):
    classifier_run.run_classifier(dataclasses.replace(
        config, max_train_steps=3, bert_config_file=wider, allow_config_change=True))
  assert {name: (out / name).read_bytes() for name in before} == before


@pytest.mark.slow
def test_a_runs_flags_txt_replays_it_from_anywhere_and_its_settings_hold_without_training(
    tmp_path, monkeypatch):
  """Sweep 10 c52/c58/c49: flags.txt recorded every --custom_* flag at its default (a
  replay of any GLUE-task run was refused as stray custom flags) and relative paths (a
  replay from another directory found no data, or other data); an evaluation of the run's
  model with another --max_seq_length rewrote its results under its records' S."""
  glue_synthetic.write_mrpc(_glue(tmp_path) / "train.tsv", glue_synthetic.fruit_pairs(16, seed=1))
  glue_synthetic.write_mrpc(_glue(tmp_path) / "dev.tsv", glue_synthetic.fruit_pairs(8, seed=2))
  _tiny_config_file(tmp_path)
  monkeypatch.chdir(tmp_path)
  run = tool_process.run_tool(
      "run_classifier", "--task_name=mrpc", "--data_dir=glue", "--do_train",
      f"--vocab_file={pretrained.minilm_vocab_file()}", "--bert_config_file=bert_config.json",
      f"--max_seq_length={SEQ}", "--train_batch_size=16", "--max_train_steps=1",
      "--output_dir=out", "--verbose=0")
  assert run.returncode == 0, run.stderr[-3000:]
  recorded = (tmp_path / "out" / "flags.txt").read_text()
  assert f"--data_dir={tmp_path / 'glue'}\n" in recorded and "--custom_" not in recorded
  for given in ("--max_seq_length=16", "--max_seq_length=128"):  # 128: the default, given.
    evaluation = tool_process.run_tool(
        "run_classifier", "--task_name=mrpc", "--data_dir=glue", "--do_eval",
        "--output_dir=out", given)
    assert evaluation.returncode == 1, evaluation.stderr[-3000:]
    assert f"max_seq_length: {SEQ} -> {given.split('=')[1]}" in evaluation.stderr
    assert "Leave the flag out" in evaluation.stderr
    assert not (tmp_path / "out" / "eval_results.json").exists()
  (tmp_path / "elsewhere").mkdir()
  monkeypatch.chdir(tmp_path / "elsewhere")
  replay = tool_process.run_tool("run_classifier", "--flagfile=../out/flags.txt",
                                 "--output_dir=../new")
  assert replay.returncode == 0, replay.stderr[-3000:]
  assert (tmp_path / "new" / "model.keras").exists()


def test_a_custom_header_not_given_without_training_is_the_records_header(tmp_path):
  """Sweep 23 S1: the files of a predict/eval-only rerun are read with the recorded
  --custom_header checked against the recorded train file's line 1 (`recorded_header`);
  not when the header is given here, or when training."""
  train = tmp_path / "train.csv"
  _write_lines(train, ["text,label", "Bad.,neg"])
  run = tmp_path / "run"
  run.mkdir()
  (run / "run_config.json").write_text(json.dumps({"train_file": str(train)}))
  custom = glue_data.CustomFormat(has_header=True, delimiter=",", labels=("neg", "pos"))
  config = _run_config(tmp_path, "run", task_name="custom", custom=custom, data_dir=None,
                       do_predict=True, predict_file="x.csv", given_settings=frozenset())
  recorded = classifier_run.recorded_header(config.task(), config)
  assert recorded == glue_data.RecordedHeader(
      str(run / "run_config.json"), (str(train), ("text", "label")),
      "--custom_delimiter=comma --custom_labels=neg,pos")
  given = dataclasses.replace(config, given_settings=frozenset({"custom_header"}))
  assert classifier_run.recorded_header(given.task(), given) is None
  training = dataclasses.replace(config, do_train=True, train_file=str(train))
  assert classifier_run.recorded_header(training.task(), training) is None
