"""Tests for tfbert.inference.exported: `tfbert.load` of an export gives an `ExportedModel`
of its raw-text signature, with its labels; a call its signature does not answer is named.
(The calls' results equal the Python models': tests/inference/raw_text_test.py.)"""

import json
import logging
import shutil

import numpy as np
import pytest

import tfbert
from tests.inference import tiny_models
from tfbert.inference import exported, raw_text
from tfbert.squad import squad_export


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
  # Windowed as the model answers (its export records doc_stride): with character offsets.
  assert sorted(answer) == ["answer", "end", "score", "start"]


@pytest.mark.slow  # The five exports (~18 s, built once: conftest.py).
def test_an_export_answers_a_long_context_over_its_windows_as_its_model_does(
    models, exports, tmp_path, caplog):
  """An export records its model's window settings (answer_question.json): its answer()
  windows a long context as the model's does; an export without them (written before)
  answers in one window and names each cut context."""
  context = " ".join(f"word{i} is here." for i in range(40))  # Many windows of S 20.
  model = models["span_labeler"]
  mine = model.answer("Who?", context)
  theirs = exports["span_labeler"].answer("Who?", context)
  assert (theirs["answer"], theirs["start"], theirs["end"]) == (
      mine["answer"], mine["start"], mine["end"])
  np.testing.assert_allclose(theirs["score"], mine["score"], rtol=1e-5)
  old = tmp_path / "old_export"
  shutil.copytree(exports["span_labeler"].path, old)
  config = json.loads((old / squad_export.ANSWER_CONFIG_FILE).read_text())
  del config["doc_stride"], config["do_lower_case"]
  (old / squad_export.ANSWER_CONFIG_FILE).write_text(json.dumps(config))
  caplog.set_level(logging.WARNING, logger="absl")
  one_window = tfbert.load(str(old)).answer(["Who?", "Who?"], [context, "Mira met."])
  assert [sorted(row) for row in one_window] == [["answer", "score"]] * 2
  total = len(raw_text.tokenizer_of(model).tokenize([context]).to_list()[0])
  room = 20 - 2 - 3  # S - "who ?" - [CLS] [SEP] [SEP]
  [warning] = [m for m in caplog.messages if "answer_question reads one window" in m]
  assert warning.startswith(
      f"{old}: answer_question reads one window of max_seq_length 20, and 1 of 2 contexts "
      f"are longer (context 0: {room} of {total} wordpieces read): the rest is not read.")


@pytest.mark.slow  # ~3 s: one encoder export.
def test_an_encoder_export_loads_and_predicts_as_the_encoder_does(tmp_path):
  """Sweep 33, B172: tfbert.save wrote an encoder's export (its encode_text signature) that
  tfbert.load refused ("a SavedModel without a tfbert raw-text signature")."""
  config = tfbert.BertConfig(**tiny_models.TINY)
  encoder = tiny_models.with_text(tfbert.BertEncoder(config), 11)
  path = str(tmp_path / "export")
  tfbert.save(encoder, path, "export")
  loaded = tfbert.load(path)
  assert (type(loaded), loaded.signature) == (exported.ExportedModel, "encode_text")
  mine = encoder.predict(tiny_models.TEXTS, verbose=0)
  theirs = loaded.predict(tiny_models.TEXTS, batch_size=3, verbose=0)
  assert sorted(theirs) == ["pooled_output", "sequence_output"]
  for name in theirs:
    assert theirs[name].shape == mine[name].shape, name
    np.testing.assert_allclose(theirs[name], mine[name], atol=1e-5, err_msg=name)
  empty = loaded.predict([], verbose=0)
  assert empty["sequence_output"].shape == (0, 11, 32) and empty["pooled_output"].shape == (0, 32)
  with pytest.raises(TypeError, match=r"this export answers predict\(\) \(its encode_text "
                                      r"signature\), not encode\(\)"):
    loaded.encode(["a"])
