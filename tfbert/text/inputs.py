"""Packs tokenized segments into BERT's model inputs, in-graph (tensorflow-text).

`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, segment ids 0 then 1, zero padding to a fixed
length, as google-research/bert's `convert_single_example` does.

Shape legend: B batch, S sequence length, (T) ragged token axis.
"""

from typing import Sequence

import tensorflow as tf
import tensorflow_text as tf_text


def pack_inputs(segments: Sequence[tf.RaggedTensor], seq_length: int, cls_id: int,
                sep_id: int) -> dict[str, tf.Tensor]:
  """Builds `input_ids`, `input_mask`, `segment_ids` from one or two ragged id batches.

  Longer inputs are truncated with google-research/bert's rule for pairs (drop the last
  token of the currently longer segment, `_truncate_seq_pair`), implemented by
  tensorflow-text's `WaterfallTrimmer` for one segment and `RoundRobinTrimmer` for two.

  Args:
    segments: one or two int RaggedTensors [B, (T)] of WordPiece ids.
    seq_length: S, including the special tokens.
    cls_id, sep_id: ids of [CLS] and [SEP].

  Returns:
    dict of int32 Tensors [B, S].
  """
  if not 1 <= len(segments) <= 2:
    raise ValueError(f"pack_inputs takes one or two segments, got {len(segments)}")
  budget = seq_length - 1 - len(segments)
  if budget < len(segments):
    raise ValueError(f"seq_length {seq_length} leaves no room for {len(segments)} segment(s)")
  segments = [tf.cast(s, tf.int32) for s in segments]
  trimmer = (tf_text.WaterfallTrimmer(budget) if len(segments) == 1
             else tf_text.RoundRobinTrimmer(budget))
  trimmed = trimmer.trim(segments)
  ids, segment_ids = tf_text.combine_segments(trimmed, start_of_sequence_id=cls_id,
                                              end_of_segment_id=sep_id)
  input_ids, input_mask = tf_text.pad_model_inputs(ids, max_seq_length=seq_length)
  segment_ids, _ = tf_text.pad_model_inputs(segment_ids, max_seq_length=seq_length)
  return {"input_ids": tf.cast(input_ids, tf.int32), "input_mask": tf.cast(input_mask, tf.int32),
          "segment_ids": tf.cast(segment_ids, tf.int32)}
