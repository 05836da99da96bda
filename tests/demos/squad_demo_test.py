"""Tests for tools.demos.squad_demo (the README main job's SQuAD part), shortened."""

import json
import os

import pytest

from tfbert import BertPretrainer
from tfbert.checkpoints.google_checkpoint import export_google_checkpoint
from tfbert.config import BertConfig
from tfbert_tools.demos import squad_demo


def test_make_data_writes_train_and_dev_sets(tmp_path):
  train, dev = squad_demo.make_data(str(tmp_path), train_paragraphs=5, dev_paragraphs=3)
  counts = [sum(len(p["qas"]) for p in json.load(open(path))["data"][0]["paragraphs"])
            for path in (train, dev)]
  assert counts == [20, 12]
  train_ids = {qa["id"] for p in json.load(open(train))["data"][0]["paragraphs"]
               for qa in p["qas"]}
  dev_ids = {qa["id"] for p in json.load(open(dev))["data"][0]["paragraphs"] for qa in p["qas"]}
  assert not train_ids & dev_ids  # Different seeds: no question shared.


@pytest.mark.slow  # ~40 s: a baseline prediction, 1 epoch of fine-tuning, export and serving.
def test_fine_tunes_a_pretrained_checkpoint_evaluates_exports_and_serves(tmp_path):
  config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=19,
                      max_position_embeddings=squad_demo.MAX_SEQ_LENGTH, type_vocab_size=2)
  pretrained = BertPretrainer(config)
  pretrained.build()
  checkpoint = str(tmp_path / "pretrained" / "bert_model.ckpt")
  export_google_checkpoint(pretrained, checkpoint)
  summary = squad_demo.run_squad_demo(str(tmp_path), checkpoint, epochs=1.0)
  assert (summary.train_questions, summary.dev_questions) == (1200, 160)
  assert summary.train["steps"] >= 1200 // 32
  assert set(summary.scores) == {"exact_match", "f1"} == set(summary.baseline)
  # The raw-text signature returned a span of the context (or "" when it finds none).
  assert summary.answer in summary.context
  for name in ("predictions.json", "nbest_predictions.json", "eval_results.json"):
    assert os.path.exists(os.path.join(summary.run_dir, name)), name
  assert os.path.exists(os.path.join(summary.export_dir, "saved_model.pb"))
  text = summary.format()
  assert "before fine-tuning" in text and "served from the SavedModel" in text
  # Evaluated during training (here only at the last step: fewer than EVAL_EVERY_STEPS),
  # the last evaluation being the final score; train and eval curves in TensorBoard.
  assert [e["step"] for e in summary.evals] == [summary.train["steps"]]
  assert summary.evals[-1]["f1"] == summary.scores["f1"]
  assert "tensorboard --logdir" in text and "rerun the same command to resume" in text
  for run in ("train", "eval"):
    assert os.path.isdir(os.path.join(summary.run_dir, run)), run
  # Rerun: the finished run resumes from its checkpoint and trains nothing more.
  again = squad_demo.run_squad_demo(str(tmp_path), checkpoint, epochs=1.0)
  assert again.scores == summary.scores and "resumed finished run" in again.format()
