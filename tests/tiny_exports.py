"""Tiny SavedModel exports that several test files read, each built once per session.

A pytest plugin (registered in tests/conftest.py). Each export of an odd-sized model on the
real 30,522-entry uncased vocab costs seconds (a traced raw-text signature with the in-graph
tokenizer, frozen graphs, `ids/`); the serving, ONNX, SQuAD and classifier export tests read
the same four, so each is built once per pytest-xdist worker, and `tests/scheduling.py`
deals the files that share a session fixture to one worker.

Every fixture returns a `TinyExport`: the Keras model (random, seeded weights) and its export
directory. The directory is shared: a test reads it, and copies it first when it needs to
move, change or delete it (tests/serving/export_test.py serves a moved copy).

The sizes are the odd ones of tests/helpers.py (H 32, 3 layers, intermediate 37, 4 heads,
3 token types); which test asserts what of each export is said at its fixture.
"""

import dataclasses
import shutil

import keras
import pytest

from tests import helpers, numpy_reference
from tfbert import BertClassifier, BertPretrainer, BertTokenClassifier
from tfbert.checkpoints import pretrained
from tfbert.classifier import classifier_export
from tfbert.config import BertConfig
from tfbert.serving import export
from tfbert.squad import squad_export
from tfbert.tagging import tagging_export

VOCAB_SIZE = 30522  # MiniLM's uncased vocab: the text signatures tokenize real words.
TEXT_SEQ = 11  # S of the encoder's and the tagger's text signatures.
PAIR_SEQ = 15  # S of the pair classifier's.
SQUAD_SEQ, SQUAD_QUERY, SQUAD_ANSWER = 23, 5, 4
SQUAD_POSITIONS = 29  # The span labeler's max_position_embeddings (> SQUAD_SEQ).
MNLI = ("contradiction", "entailment", "neutral")
TAGS = ("O", "B-x", "I-x")


@dataclasses.dataclass(frozen=True)
class TinyExport:
  """A model and its export directory (read only: copy it to move or change it).

  Attributes:
    model: the exported Keras model.
    config: its `BertConfig`.
    export_dir: the export, as its exporter returned it.
    vocab_text: the bytes of the vocab the export was made with.
  """
  model: keras.Model
  config: BertConfig
  export_dir: str
  vocab_text: bytes


def _vocab_text() -> bytes:
  with open(pretrained.minilm_vocab_file(), "rb") as f:
    return f.read()


@pytest.fixture(scope="session")
def tiny_encoder_export(tmp_path_factory) -> TinyExport:
  """A `BertPretrainer` (dropout 0.1: a signature traced with training=True would fail, its
  dropout seed cannot be saved; random Google-name weights, seed 3), its encoder exported
  with `encode_text` at S = TEXT_SEQ from a copy of the vocab that is deleted right after
  the export, so whoever serves it proves the export needs no vocab outside itself."""
  config = helpers.odd_config(vocab_size=VOCAB_SIZE, hidden_dropout_prob=0.1,
                              attention_probs_dropout_prob=0.1)
  weights = numpy_reference.random_google_weights(config.to_dict(), seed=3)
  model = helpers.loaded(BertPretrainer(config, dtype="float32"), weights)
  root = tmp_path_factory.mktemp("tiny_encoder")
  vocab = root / "vocab_source" / "vocab.txt"
  vocab.parent.mkdir()
  vocab.write_bytes(_vocab_text())
  export_dir = export.export_encoder_saved_model(model, str(root / "encoder"),
                                                 vocab_file=str(vocab), seq_length=TEXT_SEQ)
  shutil.rmtree(vocab.parent)
  return TinyExport(model, config, export_dir, _vocab_text())


@pytest.fixture(scope="session")
def tiny_pair_classifier_export(tmp_path_factory) -> TinyExport:
  """A three-label (MNLI) pair classifier (hidden dropout 0.1, Keras' initializers after
  seed 1: its labels on tests/classifier_reference.PAIRS are not all the same), exported
  with `classify_text` of (text_a, text_b) at S = PAIR_SEQ."""
  keras.utils.set_random_seed(1)
  config = helpers.odd_config(vocab_size=VOCAB_SIZE, hidden_dropout_prob=0.1)
  model = BertClassifier(config, len(MNLI))
  model.build()
  export_dir = classifier_export.export_classifier_saved_model(
      model, str(tmp_path_factory.mktemp("tiny_pair_classifier") / "classifier"),
      pretrained.minilm_vocab_file(), True, PAIR_SEQ, MNLI, True)
  return TinyExport(model, config, export_dir, _vocab_text())


@pytest.fixture(scope="session")
def tiny_tagger_export(tmp_path_factory) -> TinyExport:
  """A token classifier of TAGS (Keras' initializers after seed 3), exported with
  `tag_text` at S = TEXT_SEQ."""
  keras.utils.set_random_seed(3)
  config = helpers.odd_config(vocab_size=VOCAB_SIZE)
  model = BertTokenClassifier(config, TAGS)
  model.build()
  export_dir = tagging_export.export_tagger_saved_model(
      model, str(tmp_path_factory.mktemp("tiny_tagger") / "tagger"),
      pretrained.minilm_vocab_file(), True, TEXT_SEQ)
  return TinyExport(model, config, export_dir, _vocab_text())


@pytest.fixture(scope="session")
def tiny_span_labeler_export(tmp_path_factory) -> TinyExport:
  """A SQuAD v1.1 span labeler (random Google-name weights and span head, seed 11;
  max_position_embeddings SQUAD_POSITIONS), exported with `answer_question` at
  SQUAD_SEQ / SQUAD_QUERY / SQUAD_ANSWER."""
  config = helpers.odd_config(vocab_size=VOCAB_SIZE, max_position_embeddings=SQUAD_POSITIONS)
  model = helpers.random_span_labeler(config, seed=11)
  export_dir = squad_export.export_squad_saved_model(
      model, str(tmp_path_factory.mktemp("tiny_span_labeler") / "squad"),
      pretrained.minilm_vocab_file(), True, max_seq_length=SQUAD_SEQ,
      max_query_length=SQUAD_QUERY, max_answer_length=SQUAD_ANSWER)
  return TinyExport(model, config, export_dir, _vocab_text())
