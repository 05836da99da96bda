"""Tests for tfbert.inference.saving: each format round-trips through `tfbert.load` (a
sentence-transformers directory here; the other formats in tests/inference/loading_test.py
and raw_text_test.py), and a format a model has no form in is refused before writing."""

import os

import numpy as np
import pytest

import tfbert
from tests.inference import tiny_models
from tfbert import BertClassifier
from tfbert.config import BertConfig
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.inference import text_settings


def test_a_sentence_transformers_directory_round_trips_with_its_length(tmp_path):
  model = tiny_models.with_text(BertSentenceEncoder(BertConfig(**tiny_models.TINY)), 21)
  tfbert.save(model, str(tmp_path / "st"), "sentence-transformers")
  back = tfbert.load(str(tmp_path / "st"))
  assert type(back) is BertSentenceEncoder
  assert text_settings.settings_of(back).max_seq_length == 21
  np.testing.assert_allclose(back.encode(["a b c"]), model.encode(["a b c"]), atol=1e-6)


@pytest.mark.parametrize("path, fmt, message", [
    ("out", None, "format= is needed for .* \\(a .keras path is saved as keras\\)"),
    ("out", "onnx", "unknown format 'onnx'; use one of keras, hf, sentence-transformers"),
    ("st", "sentence-transformers", "a BertClassifier has no sentence-transformers form"),
])
def test_a_format_the_model_has_no_form_in_is_refused_before_writing(tmp_path, path, fmt,
                                                                     message):
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  with pytest.raises(ValueError, match=message):
    tfbert.save(model, str(tmp_path / path), fmt)
  assert not os.listdir(tmp_path)
