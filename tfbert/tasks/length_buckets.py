"""Batches padded to their length bucket, not to S: pay only for the tokens there are.

Every fine-tuning example is packed to S = `max_seq_length` (`[CLS] ... [SEP]`, then zeros
with `input_mask` 0). Most texts are far shorter than S (STS-B pairs and WNUT sentences are
10-30 tokens; S is 64-128), and a batch padded to S spends most of its attention and
feed-forward work on padding. Hugging Face's Trainer and sentence-transformers pad each
batch to its longest text instead. tfbert keeps a few fixed lengths, so a compiled (XLA)
step sees a few shapes rather than one per batch: a batch is cut to the smallest *bucket*
(a multiple of `multiple`, or S) that holds its longest example.

Why cutting is exact: a position past every example's last real token is a key no query
attends to (`input_mask` 0 adds -10000 to its score, whose exp underflows to exactly 0 in
float32, `tfbert.layers.attention`), and each real position's layers (LayerNorm, the
feed-forward network, the heads) read only its own row. So every real position's output is
the same function of the same inputs with or without the cut; only the order in which a
longer or shorter row is summed may change a last bit. Losses and metrics that read only
labelled positions (classification of [CLS], tagging's labelled words, pooled sentence
embeddings) are therefore unchanged. A loss that reads the padding is not: SQuAD's span
softmax runs over all S positions in google-research/bert, padding included, so a cut
changes its value; `run_squad` keeps buckets off unless asked (its `length_bucket` 0).

The cut is a pure function of a batch's rows, and the rows of a batch a pure function of
its position in the seeded stream (`fine_tuning.shuffled_batches`): a resumed run, another
worker or another replica layout cuts the same batch to the same length, so the exact
resume and replica/worker equalities need no state beyond the data position already
checkpointed.

Shape legend: B batch rows, S max_seq_length, L the batch's bucket length (<= S).
"""

from typing import Any, Sequence

import numpy as np
import tensorflow as tf

from tfbert.text.inputs import bucket_lengths, bucket_of, longest, pad_outputs

__all__ = ["bucket_lengths", "bucket_of", "longest", "pad_outputs", "cut_batch",
           "example_lengths", "sequence_length", "texts"]

MASK = "input_mask"  # The feature whose ones mark a row's real tokens.


def _is_text(value: Any) -> bool:
  """Whether `value` is one text's features (a dict holding its `input_mask`)."""
  return isinstance(value, dict) and MASK in value


def texts(inputs: dict) -> list[dict]:
  """The feature dicts of `inputs` that each hold one text: `inputs` itself, or its parts
  (a sentence pair's or triplet's texts, by name)."""
  return [inputs] if MASK in inputs else [group for group in inputs.values() if _is_text(group)]


def _inputs(examples) -> dict:
  """The inputs of `examples` ((inputs, labels), or inputs alone)."""
  return examples[0] if isinstance(examples, tuple) else examples


def sequence_length(examples) -> int:
  """S: the length of the first text's `input_mask` in `examples` (arrays or tensors)."""
  return int(np.shape(texts(_inputs(examples))[0][MASK])[1])


def example_lengths(examples) -> np.ndarray:
  """int32 [N]: each example's length, one past its last real token (of its longest text),
  from arrays [N, S]; `longest` is the same for a batch, in the graph."""
  masks = [np.asarray(text[MASK]) != 0 for text in texts(_inputs(examples))]
  positions = np.arange(1, masks[0].shape[1] + 1)
  return np.max([(mask * positions).max(axis=1) for mask in masks], axis=0).astype(np.int32)


def _cut(value: tf.Tensor, length: tf.Tensor, seq_length: int) -> tf.Tensor:
  """`value`[:, :length] when its second axis is S (a per-position feature or label)."""
  if value.shape.rank is not None and value.shape.rank >= 2 and value.shape[1] == seq_length:
    return value[:, :length]
  return value


def _cut_group(group: dict, length: tf.Tensor, seq_length: int) -> dict:
  """`group` with every per-position tensor cut to `length`."""
  return {name: _cut(value, length, seq_length) for name, value in group.items()}


def cut_batch(batch: Any, seq_length: int, buckets: Sequence[int]) -> Any:
  """A batch with its per-position tensors cut to the bucket of its longest row.

  Args:
    batch: (inputs, labels) as the tasks' `train_step` reads them, or inputs alone. inputs
      is a dict of [B, S] features with `input_mask` (classifier, tagger, span labeler;
      per-position labels such as tags [B, S] are cut with them), or a dict of such dicts,
      one per text of a pair or triplet (sentence embeddings: every text is cut to the
      bucket of the longest of them, since the encoder reads them as one batch).
    seq_length: S.
    buckets: `bucket_lengths(S, multiple)`.

  Returns:
    The same structure; [B, S, ...] tensors become [B, L, ...].
  """
  inputs, labels = batch if isinstance(batch, tuple) else (batch, None)
  length = bucket_of(tf.reduce_max(tf.stack([longest(text[MASK]) for text in texts(inputs)])),
                     buckets)
  if MASK in inputs:
    inputs = _cut_group(inputs, length, seq_length)
    if labels is not None:
      labels = tf.nest.map_structure(lambda t: _cut(t, length, seq_length), labels)
  else:
    inputs = {name: _cut_group(group, length, seq_length) if _is_text(group) else group
              for name, group in inputs.items()}
  return (inputs, labels) if isinstance(batch, tuple) else inputs
