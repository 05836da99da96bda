"""Tests for tfbert.tasks.source_heads: a source head's labels matched by name, never by
position, and a head of another task refused unless the run asks for a fresh head.

Sources are Hugging Face directories as transformers writes them (`id2label`, the head's
`architectures`), made from tiny tfbert models; the run's model is built as the runner builds
it (`runner.build_model`), so what is checked is what a run would train from.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from tfbert import BertClassifier, BertConfig, BertSpanLabeler, BertTokenClassifier
from tfbert.checkpoints import google_checkpoint, huggingface, pretrained
from tfbert.classifier import classifier_run
from tfbert.squad import squad_run
from tfbert.tagging import tagging_run
from tfbert.tasks import fine_tuning, runner, source_heads

CONFIG = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=19, max_position_embeddings=32, type_vocab_size=2)
TAGS = ("O", "B-x", "I-x")


def _hf_dir(path, model, labels=None, architecture=None, id2label=None):
  """`model` saved as transformers would: its head's class and `id2label` in config.json."""
  model.build()
  huggingface.save_hf_checkpoint(model.config, google_checkpoint.google_weights(model),
                                 str(path))
  config = json.loads((path / "config.json").read_text())
  config["architectures"] = [architecture or model.hf_task()["architectures"][0]]
  if labels is not None or id2label is not None:
    config["id2label"] = id2label or {str(i): name for i, name in enumerate(labels)}
  (path / "config.json").write_text(json.dumps(config))
  return str(path)


def _head_rows(model):
  return model.classifier_head.output_weights.numpy()


def _tagger_from(tmp_path, hf_dir, tags=TAGS, **overrides):
  """What `run_ner --do_train --init_hf_dir=...` builds when its labels resolve to `tags` (the
  train file's, or the source tagger's when the file's are a subset of them:
  `tagging_run.resolve_labels`)."""
  config = tagging_run.NerRunConfig(
      output_dir=str(tmp_path / "out"), do_train=True, train_file=str(tmp_path / "x.conll"),
      init_hf_dir=hf_dir, vocab_file=pretrained.minilm_vocab_file(), max_seq_length=16,
      **overrides)
  return runner.build_model(tagging_run.NerTask(), config, tags, tf.distribute.get_strategy())


def test_the_same_tags_in_another_order_reorder_the_heads_rows(tmp_path, caplog):
  source = BertTokenClassifier(CONFIG, ("I-x", "O", "B-x"))
  hf_dir = _hf_dir(tmp_path / "hf", source, source.labels)
  model = _tagger_from(tmp_path, hf_dir)
  rows = _head_rows(source)
  # Model row i is the source row of the same tag: O is source row 1, B-x 2, I-x 0.
  np.testing.assert_array_equal(_head_rows(model), rows[[1, 2, 0]])
  np.testing.assert_array_equal(model.classifier_head.output_bias.numpy(),
                                source.classifier_head.output_bias.numpy()[[1, 2, 0]])
  assert "reordered to match by name" in caplog.text


@pytest.mark.parametrize("labels, id2label", [
    (("O", "B-y", "I-y"), None),  # Other names.
    (("O", "B-x"), None),  # Fewer of them (the shapes differ too).
    (("O", "B-x", "I-x", "B-z"), None),  # More.
])
def test_other_tags_are_refused_naming_both_lists_and_reinit_head(tmp_path, labels, id2label):
  source = BertTokenClassifier(CONFIG, labels)
  hf_dir = _hf_dir(tmp_path / "hf", source, labels, id2label=id2label)
  with pytest.raises(ValueError) as error:
    _tagger_from(tmp_path, hf_dir)
  message = str(error.value)
  assert f"its head's labels {list(labels)} are not this task's {list(TAGS)}" in message
  assert hf_dir in message and "--reinit_head" in message
  model = _tagger_from(tmp_path, hf_dir, reinit_head=True)  # What the message offers.
  assert model.labels == TAGS


def test_gapped_label_ids_are_refused_naming_the_file(tmp_path):
  source = BertTokenClassifier(CONFIG, TAGS)
  hf_dir = _hf_dir(tmp_path / "hf", source, id2label={"0": "O", "1": "B-x", "3": "I-x"})
  with pytest.raises(ValueError, match="config.json: id2label must map the ids 0..C-1"):
    _tagger_from(tmp_path, hf_dir)


def _classifier_from(tmp_path, hf_dir, **overrides):
  """What `run_classifier --task_name=mrpc --init_hf_dir=...` builds (labels "0", "1")."""
  config = classifier_run.ClassifierRunConfig(
      output_dir=str(tmp_path / "out"), task_name="mrpc", do_predict=True,
      predict_file=str(tmp_path / "test.tsv"), init_hf_dir=hf_dir,
      vocab_file=pretrained.minilm_vocab_file(), max_seq_length=16, **overrides)
  task = classifier_run.ClassifierTask()
  return runner.build_model(task, config, ("0", "1"), tf.distribute.get_strategy())


def test_swapped_classes_are_matched_by_name_and_unnamed_ones_taken_in_order(tmp_path, caplog):
  caplog.set_level("INFO", logger="absl")  # Whatever an earlier test set.
  swapped = BertClassifier(CONFIG, 2, labels=("1", "0"))
  model = _classifier_from(tmp_path, _hf_dir(tmp_path / "swapped", swapped, swapped.labels))
  np.testing.assert_array_equal(_head_rows(model), _head_rows(swapped)[[1, 0]])
  # transformers' default names carry no meaning: rows in order, and the log says so.
  unnamed = BertClassifier(CONFIG, 2)
  model = _classifier_from(tmp_path, _hf_dir(tmp_path / "unnamed", unnamed,
                                             ("LABEL_0", "LABEL_1")))
  np.testing.assert_array_equal(_head_rows(model), _head_rows(unnamed))
  assert "names no labels (LABEL_0, LABEL_1)" in caplog.text


def test_a_head_of_another_task_is_refused_unless_reinit_head(tmp_path):
  """A sequence classifier's directory starting SQuAD (and a question-answering one starting
  a tagger) trained a fresh head with only an info line."""
  classifier_dir = _hf_dir(tmp_path / "classifier", BertClassifier(CONFIG, 2), ("a", "b"))
  squad = dict(output_dir=str(tmp_path / "squad"), do_train=True,
               train_file=str(tmp_path / "train.json"), init_hf_dir=classifier_dir,
               vocab_file=pretrained.minilm_vocab_file())
  task = squad_run.SquadTask()
  strategy = tf.distribute.get_strategy()
  with pytest.raises(ValueError) as error:
    runner.build_model(task, squad_run.SquadRunConfig(**squad), None, strategy)
  assert (f"{classifier_dir} holds a BertForSequenceClassification head and this task's "
          "model is a BertForQuestionAnswering") in str(error.value)
  assert "--reinit_head" in str(error.value)
  runner.build_model(task, squad_run.SquadRunConfig(**squad, reinit_head=True), None, strategy)
  qa_dir = _hf_dir(tmp_path / "qa", BertSpanLabeler(CONFIG))
  with pytest.raises(ValueError, match="holds a BertForQuestionAnswering head and this task's "
                                       "model is a BertForTokenClassification"):
    _tagger_from(tmp_path, qa_dir)


def test_a_tfbert_source_names_its_labels_too(tmp_path):
  source = BertTokenClassifier(CONFIG, ("B-x", "I-x", "O"))
  source.build()
  path = str(tmp_path / "tagger.keras")
  source.save(path)
  config = tagging_run.NerRunConfig(
      output_dir=str(tmp_path / "out"), do_train=True, train_file=str(tmp_path / "x.conll"),
      init_tfbert=path, vocab_file=pretrained.minilm_vocab_file())
  _, _, found = fine_tuning.initial_source(config)
  assert (found.architecture, found.labels) == ("BertForTokenClassification", source.labels)


def test_squad_starts_from_a_question_answering_directory_without_a_pooler(tmp_path, caplog):
  """transformers' BertForQuestionAnswering directories hold no pooler; SQuAD reads none,
  so its pooler starts fresh with a log line instead of refusing the directory."""
  caplog.set_level("INFO", logger="absl")  # Whatever an earlier test set.
  source = BertSpanLabeler(CONFIG)
  source.build()
  weights = {n: w for n, w in google_checkpoint.google_weights(source).items()
             if not n.startswith("bert/pooler/")}
  huggingface.save_hf_checkpoint(CONFIG, weights, str(tmp_path / "qa"))
  config = squad_run.SquadRunConfig(
      output_dir=str(tmp_path / "out"), do_train=True, train_file=str(tmp_path / "t.json"),
      init_hf_dir=str(tmp_path / "qa"), vocab_file=pretrained.minilm_vocab_file())
  model = runner.build_model(squad_run.SquadTask(), config, None, tf.distribute.get_strategy())
  np.testing.assert_array_equal(model.span_head.output_weights.numpy(),
                                source.span_head.output_weights.numpy())
  assert "has no pooler (unused by SquadTask)" in caplog.text


def test_a_head_of_another_glue_task_is_refused_though_its_labels_share_names(tmp_path):
  """An SST-2 run's model starting MRPC (sweep 19 c22): both name their labels '0','1', but
  sentiment is not paraphrase; the source's run_config.json records its task."""
  source = BertClassifier(CONFIG, 2, labels=("0", "1"))
  source.build()
  for folder in ("run", "run/best"):
    (tmp_path / folder).mkdir()
    source.save(str(tmp_path / folder / "model.keras"))
  (tmp_path / "run" / "run_config.json").write_text(json.dumps({"task_name": "sst-2"}))
  weights = google_checkpoint.google_weights(source)
  model = BertClassifier(CONFIG, 2, labels=("0", "1"))
  model.build()
  for path in (str(tmp_path / "run" / "model.keras"), str(tmp_path / "run/best/model.keras")):
    found = source_heads.of_model(path, source)
    assert found.task == "sst-2"
    with pytest.raises(ValueError) as error:
      source_heads.match_source_head(model, weights, found, "classifier_head", False, "MRPC")
    assert str(error.value).startswith(
        f"{path} holds a sst-2 head (its run's task_name) and this run's task is MRPC: its "
        "labels ['0', '1'] are sst-2's, not MRPC's, whatever their names; pass --reinit_head")
    for task_name, reinit in (("SST-2", False), ("custom", False), (None, False),
                              ("mrpc", True)):
      assert source_heads.match_source_head(model, weights, found, "classifier_head", reinit,
                                            task_name, frozenset({"custom"})) is weights
  assert source_heads.of_model(str(tmp_path / "x.keras"), source).task is None
