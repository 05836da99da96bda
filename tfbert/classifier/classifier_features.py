"""Text (pairs) -> classifier inputs, in the graph: google-research/bert's packing.

`pack_text` is what training (`examples_to_features`) and the exported `classify_text`
signature both run, so a served model sees exactly the features it was trained on.
It reproduces google-research/bert `run_classifier.convert_single_example` (and Model
Garden's `classifier_data_lib` copy of it):

* `[CLS] a [SEP]` for one text, `[CLS] a [SEP] b [SEP]` for a pair, segment ids 0 then 1,
  zero padding to S;
* a pair is truncated by dropping the last wordpiece of the currently longer text until
  it fits (`_truncate_seq_pair`, see `tfbert.text.inputs.pack_inputs`);
* a row whose text_b gives NO wordpiece (empty, only whitespace or control characters) is
  packed as a single text (`if tokens_b:` in Google's code), without the second [SEP] and
  with the single-text length budget. `pack_inputs` alone would write `[CLS] a [SEP] [SEP]`.

Shape legend: B batch, S max_seq_length, N examples.
"""

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from tfbert.classifier import glue_data
from tfbert.text import inputs
from tfbert.text.tokenization import WordPieceTokenizer

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


def pack_text(tokenizer: WordPieceTokenizer, text_a: tf.Tensor, text_b: Optional[tf.Tensor],
              seq_length: int) -> dict[str, tf.Tensor]:
  """Tokenizes and packs one text, or a pair, per row (see the module docstring).

  Args:
    tokenizer: the `WordPieceTokenizer`.
    text_a: tf.string [B].
    text_b: tf.string [B], or None for single-text tasks.
    seq_length: S, including [CLS] and [SEP]s.

  Returns:
    dict of int32 `input_ids`, `input_mask`, `segment_ids` [B, S].
  """
  a = tokenizer.tokenize(text_a)                                   # [B, (T)]
  single = inputs.pack_inputs([a], seq_length, tokenizer.cls_id, tokenizer.sep_id)
  if text_b is None:
    return single
  b = tokenizer.tokenize(text_b)                                   # [B, (T)]
  pair = inputs.pack_inputs([a, b], seq_length, tokenizer.cls_id, tokenizer.sep_id)
  has_b = b.row_lengths() > 0                                      # [B]
  return {name: tf.where(has_b[:, None], pair[name], single[name]) for name in FEATURE_NAMES}


def examples_to_features(examples: Sequence[glue_data.InputExample],
                         tokenizer: WordPieceTokenizer, seq_length: int, is_pair: bool,
                         batch_size: int = 1024) -> dict[str, np.ndarray]:
  """Packs examples in batches of `batch_size` texts.

  Args:
    examples: the examples (text_b is read only when `is_pair`; None counts as "").
    tokenizer: the `WordPieceTokenizer`.
    seq_length: S.
    is_pair: pack text_b too.
    batch_size: texts per `pack_text` call.

  Returns:
    dict of int32 numpy arrays [N, S] (`FEATURE_NAMES`).
  """
  parts = {name: [] for name in FEATURE_NAMES}
  for start in range(0, len(examples), batch_size):
    chunk = examples[start:start + batch_size]
    text_b = tf.constant([e.text_b or "" for e in chunk], tf.string) if is_pair else None
    # Eagerly: ~3x faster than a tf.function here, whose tracing costs more than it saves.
    packed = pack_text(tokenizer, tf.constant([e.text_a for e in chunk], tf.string), text_b,
                       seq_length)
    for name, value in packed.items():
      parts[name].append(value.numpy())
  if not examples:
    return {name: np.zeros([0, seq_length], np.int32) for name in FEATURE_NAMES}
  return {name: np.concatenate(values) for name, values in parts.items()}


def label_array(examples: Sequence[glue_data.InputExample],
                task: glue_data.Task) -> np.ndarray:
  """int32 class ids [N] (the index in `task.labels`) or float32 scores [N] (regression).

  Raises:
    ValueError: for an example without a label, or with a label the task does not have.
  """
  unlabelled = [e.guid for e in examples if e.label is None]
  if unlabelled:
    raise ValueError(f"{len(unlabelled)} examples have no label (first: {unlabelled[0]})")
  if task.is_regression:
    return np.array([float(e.label) for e in examples], np.float32)
  ids = {label: i for i, label in enumerate(task.labels)}
  unknown = sorted({e.label for e in examples} - set(ids))
  if unknown:
    raise ValueError(f"labels {unknown} are not among the task's {list(task.labels)}")
  return np.array([ids[e.label] for e in examples], np.int32)
