"""tfbert.embeddings: the shipped MiniLM (a sentence-transformers directory) read as a
sentence encoder, against float64 NumPy and sentence-transformers' published similarities;
written back; bad directories named."""

import json
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, numpy_reference
from tfbert import BertConfig
from tfbert.checkpoints import huggingface, pretrained
from tfbert.embeddings import sentence_transformers
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.text import inputs, tokenization


@pytest.fixture(scope="module")
def minilm():
  return sentence_transformers.load_sentence_encoder(pretrained.minilm_dir(), dtype="float32")


def test_the_shipped_minilm_is_read_with_its_pipeline(minilm):
  model, config = minilm
  assert (config.pooling_mode, config.normalize, config.max_seq_length,
          config.do_lower_case, config.embedding_dimension) == ("mean", True, 256, True, 384)
  assert (model.pooling_mode, model.normalize) == ("mean", True)


def test_embeddings_equal_the_float64_numpy_forward_pass_with_mean_pooling(minilm):
  """Real weights, 6 layers of width 384: float32 against float64 differ by ~3e-6 in the
  token vectors (tests/checkpoints/huggingface_test.py); after mean pooling and
  normalization to unit length, each component within 1e-5."""
  model, _ = minilm
  _, weights, _ = huggingface.load_hf_checkpoint(pretrained.minilm_dir())
  rng = np.random.default_rng(3)
  ids = rng.integers(1000, model.config.vocab_size, (3, 13)).astype(np.int32)
  ids[:, 0] = 101
  mask = np.array([[1] * 13, [1] * 7 + [0] * 6, [1] * 2 + [0] * 11], np.int32)
  seg = np.zeros_like(ids)
  got = model({"input_ids": ids, "input_mask": mask, "segment_ids": seg})["embeddings"]
  tokens = numpy_reference.bert_forward(weights, model.config.to_dict(), ids, mask,
                                        seg)["sequence_output"]
  pooled = (tokens * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
  want = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
  assert helpers.max_abs_diff(got, want) < 1e-5


def test_the_published_pytorch_similarities_are_reproduced(minilm):
  # sentence-transformers' all-MiniLM-L6-v2 model card prints, from PyTorch:
  #   [[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]]
  # to 4 decimals: agreement within 6e-5 (half a unit of the last digit + float32) is exact.
  model, config = minilm
  tokenizer = tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(),
                                              do_lower_case=config.do_lower_case)
  sentences = ["The weather is lovely today.", "It's so sunny outside!",
               "He drove to the stadium."]
  features = inputs.pack_inputs([tokenizer.tokenize(tf.constant(sentences))], 32,
                                tokenizer.cls_id, tokenizer.sep_id)
  embeddings = model(features)["embeddings"].numpy()
  published = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
  np.testing.assert_allclose(embeddings @ embeddings.T, published, atol=6e-5)


def test_a_written_directory_reads_back_bit_for_bit(minilm, tmp_path):
  model, config = minilm
  out = str(tmp_path / "st")
  sentence_transformers.save_sentence_transformers(
      model, out, pretrained.minilm_vocab_file(), config.do_lower_case, 128)
  with open(tmp_path / "st" / "modules.json", encoding="utf-8") as f:
    assert [m["type"].rsplit(".", 1)[1] for m in json.load(f)] == [
        "Transformer", "Pooling", "Normalize"]
  with open(tmp_path / "st" / "1_Pooling" / "config.json", encoding="utf-8") as f:
    pooling = json.load(f)
  assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_cls_token"]
  with open(tmp_path / "st" / "config.json", encoding="utf-8") as f:
    assert json.load(f)["architectures"] == ["BertModel"]
  again, read = sentence_transformers.load_sentence_encoder(out, dtype="float32")
  assert (read.pooling_mode, read.normalize, read.max_seq_length) == ("mean", True, 128)
  for a, b in zip(model.weights, again.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("mode", ["cls", "max"])
def test_other_pooling_modes_and_no_normalization_round_trip(tmp_path, mode):
  keras.utils.set_random_seed(1)
  config = BertConfig(vocab_size=37, hidden_size=10, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=13, max_position_embeddings=17)
  model = BertSentenceEncoder(config, mode, normalize=False)
  model.build()
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                             + [f"w{i}" for i in range(32)]) + "\n")
  sentence_transformers.save_sentence_transformers(model, str(tmp_path / "st"), str(vocab),
                                                   True, 17)
  again, read = sentence_transformers.load_sentence_encoder(str(tmp_path / "st"))
  assert (read.pooling_mode, read.normalize) == (mode, False)
  features = {"input_ids": np.array([[2, 7, 9, 3, 0]], np.int32),
              "input_mask": np.array([[1, 1, 1, 1, 0]], np.int32)}
  np.testing.assert_array_equal(model(features)["embeddings"], again(features)["embeddings"])
  with pytest.raises(ValueError, match=r"max_seq_length 18 must be in \[1, 17\]"):
    sentence_transformers.save_sentence_transformers(model, str(tmp_path / "x"), str(vocab),
                                                     True, 18)


def test_pipelines_tfbert_does_not_compute_exactly_are_refused_naming_the_field(tmp_path):
  directory = tmp_path / "st"
  shutil.copytree(pretrained.minilm_dir(), directory)
  pooling_file = directory / "1_Pooling" / "config.json"
  pooling = json.loads(pooling_file.read_text())
  pooling_file.write_text(json.dumps({**pooling, "pooling_mode_mean_sqrt_len_tokens": True}))
  with pytest.raises(ValueError, match=r"1_Pooling/config.json: exactly one of .* found "
                     r"pooling_mode_mean_tokens, pooling_mode_mean_sqrt_len_tokens"):
    sentence_transformers.read_config(str(directory))
  modules_file = directory / "modules.json"
  modules = json.loads(modules_file.read_text())
  modules.append({"idx": 3, "name": "3", "path": "3_Dense",
                  "type": "sentence_transformers.models.Dense"})
  modules_file.write_text(json.dumps(modules))
  with pytest.raises(ValueError, match=r"modules.json: the pipeline Transformer -> Pooling -> "
                     r"Normalize -> Dense is not one tfbert computes exactly"):
    sentence_transformers.read_config(str(directory))
  modules_file.unlink()
  with pytest.raises(FileNotFoundError, match=r"modules.json: not found"):
    sentence_transformers.read_config(str(directory))
