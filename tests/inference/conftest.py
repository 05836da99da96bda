"""The raw-text tests' shared artefacts: one tiny model per task and its SavedModel export
(loaded back through `tfbert.load`), built once per test run (~18 s for the five exports)."""

import keras
import pytest

import tfbert
from tests.inference import tiny_models
from tfbert import BertClassifier, BertSpanLabeler, BertTokenClassifier
from tfbert.config import BertConfig
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder


@pytest.fixture(scope="session")
def models():
  """{task: tiny model with text settings}; never trained (the tests only read them)."""
  keras.utils.set_random_seed(5)
  config = BertConfig(**tiny_models.TINY)
  with_text = tiny_models.with_text
  return {
      "classifier": with_text(BertClassifier(config, 3, labels=tiny_models.LABELS), 17),
      # A pair regression of known arity (`is_pair` in its text settings), exported without
      # `is_pair`: its export reads pairs by default (raw_text_test.py).
      "regression": with_text(BertClassifier(config, 1), 17, is_pair=True),
      "tagger": with_text(BertTokenClassifier(config, tiny_models.TAGS), 11),
      # S 20: every position is among the 20 best, so the tool's n-best search and the
      # signature's search over all spans see the same spans.
      "span_labeler": with_text(BertSpanLabeler(config), 20, max_query_length=5),
      "sentence_encoder": with_text(BertSentenceEncoder(config), 9),
  }


@pytest.fixture(scope="session")
def exports(models, tmp_path_factory):
  """{task: its model's SavedModel export, loaded back with `tfbert.load`}."""
  root = tmp_path_factory.mktemp("exports")
  loaded = {}
  for name, model in models.items():
    path = str(root / name)
    # The classifier is of unknown arity: its export is told it reads pairs. The regression
    # knows it reads pairs: its export takes the model's arity.
    arity = {"is_pair": True} if name == "classifier" else {}
    tfbert.save(model, path, "export", **arity)
    loaded[name] = tfbert.load(path)
  return loaded
