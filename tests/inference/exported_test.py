"""Tests for tfbert.inference.exported: `tfbert.load` of an export gives an `ExportedModel`
of its raw-text signature, with its labels; a call its signature does not answer is named.
(The calls' results equal the Python models': tests/inference/raw_text_test.py.)"""

import pytest

from tests.inference import tiny_models
from tfbert.inference import exported


@pytest.mark.slow  # The five exports (~18 s, built once: conftest.py).
def test_the_loaded_exports_are_exported_models_of_their_signature(exports):
  assert {name: (type(m), m.signature) for name, m in exports.items()} == {
      "classifier": (exported.ExportedModel, "classify_text"),
      "regression": (exported.ExportedModel, "classify_text"),
      "tagger": (exported.ExportedModel, "tag_text"),
      "span_labeler": (exported.ExportedModel, "answer_question"),
      "sentence_encoder": (exported.ExportedModel, "embed_text")}
  assert exports["classifier"].labels == tiny_models.LABELS
  assert exports["tagger"].labels == tiny_models.TAGS and exports["regression"].labels is None


@pytest.mark.slow  # The five exports (~18 s, built once: conftest.py).
def test_a_call_the_export_does_not_answer_is_named(exports):
  with pytest.raises(TypeError, match=r"this export answers tag\(\) \(its tag_text signature\), "
                                      r"not classify\(\)"):
    exports["tagger"].classify(["a"])
  with pytest.raises(ValueError, match=r"classifier: this export reads sentence pairs: pass "
                                       r"texts as a \(text_a, text_b\) pair .*got single texts"):
    exports["classifier"].classify(["a single text"])
  answer = exports["span_labeler"].answer("Who met?", "Mira met Zyxwar.")
  assert sorted(answer) == ["answer", "score"]  # One window: no character offsets.
