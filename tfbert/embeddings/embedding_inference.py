"""Embedding texts with a sentence encoder, and scoring scored pairs by cosine similarity.

Shape legend: N texts, H embedding width.
"""

import weakref
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfbert.embeddings import embedding_metrics
from tfbert.embeddings.embedding_data import TextExample
from tfbert.embeddings.sentence_encoder import OUTPUT_NAME, BertSentenceEncoder
from tfbert.text import inputs
from tfbert.text.tokenization import WordPieceTokenizer

# One traced inference function per model: `embed_texts` runs for every text column of every
# evaluation, and a new `tf.function` each time would trace the encoder again each time.
_INFERENCE: "weakref.WeakKeyDictionary[BertSentenceEncoder, Callable]" = (
    weakref.WeakKeyDictionary())


def _inference_function(model: BertSentenceEncoder) -> Callable:
  """The model's embeddings without dropout, as a `tf.function` made once per model."""
  if model not in _INFERENCE:
    # The function holds the model weakly: a value that referred to its own key would keep
    # the entry, and so the model, alive for the rest of the process.
    held = weakref.ref(model)
    _INFERENCE[model] = tf.function(
        lambda features: held()(features, training=False)[OUTPUT_NAME], autograph=False)
  return _INFERENCE[model]


def embed_texts(model: BertSentenceEncoder, tokenizer: WordPieceTokenizer,
                texts: Sequence[str], max_seq_length: int, batch_size: int = 64
                ) -> np.ndarray:
  """float32 [N, H]: each text's embedding (inference, no dropout).

  Each text is WordPiece-tokenized, truncated to `max_seq_length` with its [CLS] and [SEP]
  (as sentence-transformers truncates to its `max_seq_length`), padded, and embedded
  `batch_size` texts at a time.
  """
  if not texts:
    return np.zeros((0, model.config.hidden_size), np.float32)
  call = _inference_function(model)
  rows = []
  for start in range(0, len(texts), batch_size):
    ids = tokenizer.tokenize(tf.constant(list(texts[start:start + batch_size])))
    features = inputs.pack_inputs([ids], max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
    rows.append(call(features).numpy())
  return np.concatenate(rows).astype(np.float32)


def pair_similarities(model: BertSentenceEncoder, tokenizer: WordPieceTokenizer,
                      examples: Sequence[TextExample], max_seq_length: int,
                      batch_size: int = 64) -> np.ndarray:
  """float64 [N]: the cosine similarity of each example's two texts."""
  first = embed_texts(model, tokenizer, [e.texts[0] for e in examples], max_seq_length,
                      batch_size).astype(np.float64)
  second = embed_texts(model, tokenizer, [e.texts[1] for e in examples], max_seq_length,
                       batch_size).astype(np.float64)
  norms = np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1)
  return np.sum(first * second, axis=1) / np.maximum(norms, 1e-12)


def similarity_scores(model: BertSentenceEncoder, tokenizer: WordPieceTokenizer,
                      examples: Sequence[TextExample], max_seq_length: int,
                      batch_size: int = 64,
                      similarities: Optional[np.ndarray] = None) -> dict[str, float]:
  """{"pearson", "spearman"} of the pairs' cosine similarities against their gold scores,
  in percent (as runs report them)."""
  if similarities is None:
    similarities = pair_similarities(model, tokenizer, examples, max_seq_length, batch_size)
  gold = np.array([e.score for e in examples], np.float64)
  return {name: 100.0 * value for name, value in
          embedding_metrics.similarity_correlations(similarities, gold).items()}
