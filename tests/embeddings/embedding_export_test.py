"""tfbert.embeddings.embedding_export: `embed_text` serves the model's embeddings of raw text,
the id signatures the same embeddings, and bad input is refused naming it."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbert import BertConfig
from tfbert.embeddings import embedding_export, embedding_inference
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.text import inputs
from tfbert.text.tokenization import WordPieceTokenizer

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "park", "red", "big"]


@pytest.mark.slow  # ~3.5 s: a SavedModel export.
def test_embed_text_serves_the_models_embeddings(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
  keras.utils.set_random_seed(9)
  config = BertConfig(vocab_size=5 + len(WORDS), hidden_size=10, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=13, max_position_embeddings=11)
  model = BertSentenceEncoder(config, "mean")
  model.build()
  export_dir = embedding_export.export_sentence_encoder_saved_model(
      model, str(tmp_path / "export"), str(vocab), True, 9)
  loaded = tf.saved_model.load(export_dir)
  texts = ["The cat sat on a mat", "a big red dog ran in the park today", "dog"]
  served = loaded.signatures["embed_text"](text=tf.constant(texts))["embeddings"].numpy()
  tokenizer = WordPieceTokenizer(str(vocab), do_lower_case=True)
  want = embedding_inference.embed_texts(model, tokenizer, texts, 9)
  # The export freezes the same float32 weights: graph rewrites only (1e-6).
  np.testing.assert_allclose(served, want, atol=1e-6)
  np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-6)
  ids = tokenizer.tokenize(tf.constant(texts))
  features = inputs.pack_inputs([ids], 9, tokenizer.cls_id, tokenizer.sep_id)
  by_ids = loaded.signatures["serving_default"](**features)["embeddings"].numpy()
  np.testing.assert_array_equal(by_ids, served)
  hf = tf.saved_model.load(f"{export_dir}/ids").signatures["serving_hf"](
      input_ids=tf.cast(features["input_ids"], tf.int64),
      attention_mask=tf.cast(features["input_mask"], tf.int64),
      token_type_ids=tf.cast(features["segment_ids"], tf.int64))["embeddings"].numpy()
  np.testing.assert_array_equal(hf, served)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"tensor text \[1,1\]"):
    loaded.signatures["embed_text"](text=tf.constant([["nested"]]))
  with pytest.raises(TypeError, match="expected a BertSentenceEncoder"):
    embedding_export.export_sentence_encoder_saved_model(
        keras.Sequential(), str(tmp_path / "x"), str(vocab), True, 9)


@pytest.mark.slow
def test_the_ids_export_converts_to_tflite_and_onnx_with_the_same_embeddings(tmp_path):
  """Like every task: the model's TFLite file and the export's ONNX file serve its
  embeddings (float32 kernels of other runtimes: within 2e-5, tflite_export_test's bound)."""
  from tfbert.serving import onnx_export, tflite_export  # pylint: disable=import-outside-toplevel
  pytest.importorskip("onnxruntime")
  pytest.importorskip("ai_edge_litert")
  keras.utils.set_random_seed(4)
  config = BertConfig(vocab_size=5 + len(WORDS), hidden_size=10, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=13, max_position_embeddings=11)
  model = BertSentenceEncoder(config, "cls")
  model.build()
  rng = np.random.default_rng(2)
  mask = (np.arange(9)[None] < np.array([[9], [4]])).astype(np.int32)
  features = {"input_ids": rng.integers(5, config.vocab_size, (2, 9)).astype(np.int32) * mask,
              "input_mask": mask, "segment_ids": np.zeros((2, 9), np.int32)}
  want = model(features)["embeddings"].numpy()
  lite_file = tflite_export.export_tflite(model, str(tmp_path / "lite" / "model.tflite"),
                                          seq_length=9)
  lite = tflite_export.TfliteModel(lite_file, config=config)
  np.testing.assert_allclose(lite(features)["embeddings"], want, atol=2e-5)
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
  export_dir = embedding_export.export_sentence_encoder_saved_model(
      model, str(tmp_path / "export"), str(vocab), True, 9)
  onnx_file = onnx_export.export_onnx(export_dir, str(tmp_path / "model.onnx"))
  session = onnx_export.onnx_session(onnx_file)
  got = session.run(["embeddings"], features)[0]
  np.testing.assert_allclose(got, want, atol=2e-5)
