"""Tests for tfbert.task_registry: a run's settings read through its model's task."""

import json

import pytest

from tfbert import BertClassifier, BertConfig, BertPretrainer, BertSpanLabeler, task_registry
from tfbert.classifier.classifier_run import ClassifierRunConfig
from tfbert.embeddings.embedding_run import EmbeddingRunConfig
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.models import BertTokenClassifier
from tfbert.squad import squad_features
from tfbert.squad.squad_run import SquadRunConfig
from tfbert.tagging.tagging_run import NerRunConfig

CONFIG = BertConfig(vocab_size=41, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=19, max_position_embeddings=401)


def _record(config) -> dict:
  return json.loads(config.to_json())


def test_each_task_model_finds_its_task_and_others_none():
  found = {type(model).__name__: task_registry.task_of(model) for model in (
      BertSpanLabeler(CONFIG), BertClassifier(CONFIG, 3),
      BertTokenClassifier(CONFIG, ["O", "B-X", "I-X"]), BertSentenceEncoder(CONFIG),
      BertPretrainer(CONFIG))}
  assert {name: type(task).__name__ if task else None for name, task in found.items()} == {
      "BertSpanLabeler": "SquadTask", "BertClassifier": "ClassifierTask",
      "BertTokenClassifier": "NerTask", "BertSentenceEncoder": "EmbeddingTask",
      "BertPretrainer": None}


@pytest.mark.parametrize("model, config, want", [
    (BertSpanLabeler(CONFIG), SquadRunConfig(
        output_dir="o", do_predict=True, predict_file="dev.json",
        features=squad_features.FeatureConfig(max_seq_length=384, doc_stride=128)), 384),
    (BertClassifier(CONFIG, 2), ClassifierRunConfig(
        output_dir="o", task_name="mrpc", do_eval=True, data_dir="d", max_seq_length=24), 24),
    (BertTokenClassifier(CONFIG, ["O", "B-X", "I-X"]), NerRunConfig(
        output_dir="o", do_eval=True, eval_file="dev.conll", max_seq_length=57,
        doc_stride=20), 57),
    (BertSentenceEncoder(CONFIG), EmbeddingRunConfig(
        output_dir="o", do_eval=True, dev_file="dev.tsv", max_seq_length=33), 33),
])
def test_the_sequence_length_is_the_tasks_own_setting(model, config, want):
  assert task_registry.run_seq_length(model, _record(config)) == want


def test_no_record_or_no_task_gives_none_and_a_foreign_record_is_named():
  classifier = BertClassifier(CONFIG, 2)
  assert task_registry.run_seq_length(classifier, None) is None
  assert task_registry.run_seq_length(BertPretrainer(CONFIG), {"max_seq_length": 24}) is None
  squad = _record(SquadRunConfig(output_dir="o", do_predict=True, predict_file="dev.json"))
  with pytest.raises(ValueError, match=r"runs/x/run_config.json: not a ClassifierRunConfig"):
    task_registry.run_seq_length(classifier, squad, "runs/x/run_config.json")
