"""Tests for tools.demos.demo: the real MiniLM reproduces sentence-transformers' published
numbers."""

import dataclasses
import logging

import numpy as np
import pytest

from tests.demos import output_noise
from tfbert_tools.demos import demo


def test_reproduces_the_sentence_transformers_quickstart_similarities():
  # sentence-transformers' README quick start prints, for all-MiniLM-L6-v2 in PyTorch:
  #   tensor([[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]])
  # Those are printed to 4 decimals, so agreement within 5e-5 (+ float32 noise) is exact.
  sentences = ["The weather is lovely today.", "It's so sunny outside!",
               "He drove to the stadium."]
  result = demo.run_demo(sentences)
  published = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
  np.testing.assert_allclose(result.similarity, published, atol=6e-5)
  assert result.embeddings.shape == (3, 384)
  np.testing.assert_allclose(np.linalg.norm(result.embeddings, axis=1), 1.0, atol=1e-6)
  assert result.tokens[1] == ["it", "'", "s", "so", "sunny", "outside", "!"]


@pytest.fixture(scope="module")
def default_run():
  """The demo's default run through the Keras model (its numbers and tokens, no live model):
  the report's test and the export's comparison read the same run."""
  return demo.run_demo()


def test_default_run_formats_a_report(default_run):
  result = default_run
  text = demo.format_result(demo.DEFAULT_SENTENCES, result)
  assert "cosine similarity:" in text and "wordpieces: a man is eating food ." in text
  # The two eating sentences are each other's nearest neighbour.
  sim = result.similarity - np.eye(len(demo.DEFAULT_SENTENCES)) * 2
  assert sim[0].argmax() == 1 and sim[1].argmax() == 0


def test_the_report_marks_the_wordpieces_cut_at_the_sequence_length():
  """Sweep 33, A81: at --seq_length=8 a sentence of 12 wordpieces listed all 12, though only
  6 were embedded, and two sentences alike up to the cut compared at 1.000 without a word."""
  tokens = [["a", "b", "c", "d", "e", "f", "g", "h"], ["a", "b", "c"],
            ["a", "b", "c", "d", "e", "f", "x"]]
  embeddings = np.eye(3, 4, dtype=np.float32)
  result = demo.DemoResult(tokens, embeddings, embeddings @ embeddings.T, seq_length=8)
  text = demo.format_result(["one", "two", "three"], result)
  assert "wordpieces: a b c d e f | cut, not embedded: g h (8 wordpieces, 6 embedded)\n" in text
  assert "wordpieces: a b c\n" in text
  assert "wordpieces: a b c d e f | cut, not embedded: x (7 wordpieces, 6 embedded)\n" in text
  assert text.endswith("warning: sentence(s) [0], [2] cut at seq_length 8: only their first 6 "
                       "wordpieces (beside [CLS] and [SEP]) are embedded and compared; raise "
                       "--seq_length to embed them whole")
  whole = demo.format_result(["one", "two", "three"], dataclasses.replace(result, seq_length=10))
  assert "cut" not in whole and "warning" not in whole


@pytest.mark.slow
def test_the_exported_embed_text_ranks_the_sentences_as_the_model_does(tmp_path, capfd,
                                                                       caplog, default_run):
  """The demo's path: MiniLM exported with `embed_text`, the sentences embedded through it
  (tokenized in the graph); the same embeddings as the Keras model within float32 noise of
  the frozen graph, and the report names each sentence's nearest other sentence. Freezing
  the model for the export printed nothing (tests.demos.output_noise)."""
  caplog.set_level(logging.WARNING, logger="tensorflow")
  exported = demo.run_demo(export_dir=str(tmp_path / "minilm_export"))
  printed = capfd.readouterr()
  assert output_noise.noise(printed.out + printed.err) == []
  assert output_noise.noise_records(caplog.records) == []
  direct = default_run
  np.testing.assert_allclose(exported.embeddings, direct.embeddings, atol=1e-5)
  text = demo.format_result(demo.DEFAULT_SENTENCES, exported)
  assert "  [0] -> [1] " in text and "  [1] -> [0] " in text  # The two eating sentences.
  assert f"embed_text: {tmp_path / 'minilm_export'}" in text


def test_minilm_stays_float32_under_a_mixed_global_policy():
  import keras
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  result = demo.run_demo(["The weather is lovely today.", "It's so sunny outside!"])
  np.testing.assert_allclose(np.diag(result.similarity), 1.0, atol=1e-5)
