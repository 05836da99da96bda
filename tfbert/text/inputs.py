"""Packs tokenized segments into BERT's model inputs, in-graph, with core TensorFlow ops only.

`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, segment ids 0 then 1, zero padding to a fixed
length, as google-research/bert's `convert_single_example` does.

Core ops only, no tensorflow-text: this packing runs inside every exported raw-text
signature, and tensorflow-text's `RoundRobinTrimmer` adds its custom op
`TFText>RoundRobinTrim`, which TensorFlow Serving releases up to 2.19.1 lack (they link
tensorflow-text 2.12.1's ops: "Op type not registered"). The features equal those of
tensorflow-text's `WaterfallTrimmer` /
`RoundRobinTrimmer`, `combine_segments` and `pad_model_inputs`, which this module replaces
(tests/text/inputs_test.py compares them), so the tokenizer's op is the only non-core op
left in a raw-text SavedModel (`tfbert.serving.export.TEXT_OPS`).

Shape legend: B batch, S sequence length, (T) ragged token axis.
"""

from typing import Sequence

import tensorflow as tf

MASK = "input_mask"  # The feature whose ones mark a row's real tokens.


def pack_inputs(segments: Sequence[tf.RaggedTensor], seq_length: int, cls_id: int,
                sep_id: int) -> dict[str, tf.Tensor]:
  """Builds `input_ids`, `input_mask`, `segment_ids` from one or two ragged id batches.

  Longer inputs are truncated with google-research/bert's rules (`truncated_lengths`): one
  segment keeps its first S - 2 tokens, a pair loses the last token of its currently longer
  segment until it fits (`_truncate_seq_pair`).

  Args:
    segments: one or two int RaggedTensors [B, (T)] of WordPiece ids.
    seq_length: S, including the special tokens.
    cls_id, sep_id: ids of [CLS] and [SEP].

  Returns:
    dict of int32 Tensors [B, S].

  Raises:
    ValueError: for no or more than two segments, or an S without room for one token of
      each.
  """
  if not 1 <= len(segments) <= 2:
    raise ValueError(f"pack_inputs takes one or two segments, got {len(segments)}")
  budget = seq_length - 1 - len(segments)
  if budget < len(segments):
    raise ValueError(f"seq_length {seq_length} leaves no room for {len(segments)} segment(s)")
  counts = truncated_lengths([s.row_lengths() for s in segments], budget)
  return combine_and_pad(segments, counts, seq_length, cls_id, sep_id)


def truncated_lengths(lengths: Sequence[tf.Tensor], budget) -> list[tf.Tensor]:
  """How many leading tokens of each segment google-research/bert's truncation keeps.

  One segment keeps min(la, n) of its la tokens (n = `budget`). Two follow
  `_truncate_seq_pair`: while la + lb > n, drop the last token of the longer segment, of
  the second on a tie. That loop ends at

    ka = min(la, max(n - lb, ceil(n / 2))),  kb = min(lb, n - ka).

  Why: if la + lb <= n, nothing is dropped (n - lb >= la, so ka = la, kb = lb). Otherwise
  the longer segment shrinks alone until the total fits or both are equally long; from
  then on they shrink in turn, the second first, so the first keeps ceil(n / 2) and the
  second floor(n / 2). A second segment of lb <= floor(n / 2) is never cut: ka = n - lb.
  A first segment of la <= ceil(n / 2) is never cut either: ka = la, kb = n - la.
  tests/text/inputs_test.py checks this against the loop itself.

  Args:
    lengths: one or two int Tensors [B] (la, then lb).
    budget: n, a Python int or int64 scalar Tensor: the tokens the segments may keep in all.

  Returns:
    the kept lengths, int64 Tensors [B] (ka, then kb), each at most its length.
  """
  budget = tf.cast(budget, tf.int64)
  lengths = [tf.cast(n, tf.int64) for n in lengths]  # Row lengths are int32 or int64.
  if len(lengths) == 1:
    return [tf.minimum(lengths[0], budget)]
  la, lb = lengths
  ka = tf.minimum(la, tf.maximum(budget - lb, (budget + 1) // 2))
  return [ka, tf.minimum(lb, budget - ka)]


def combine_and_pad(segments: Sequence[tf.RaggedTensor], counts: Sequence[tf.Tensor],
                    seq_length: int, cls_id: int, sep_id: int) -> dict[str, tf.Tensor]:
  """`[CLS] s0 [SEP]` (`s1 [SEP]`) per row from the first `counts` tokens of each segment,
  zero-padded to S, with segment ids 0 then 1.

  Dense arithmetic on positions, no ragged concatenation or masking: it traces in ~0.1 s,
  where ragged `tf.concat` and `tf.ragged.boolean_mask` took ~1 s (measured), and every
  export traces it once per raw-text signature.

  Args:
    segments: int RaggedTensors [B, (T)] of ids, the same B.
    counts: int [B] per segment, the tokens kept from the start of each row: at most the
      row's length, and 1 + sum(counts + 1) <= S in every row (`truncated_lengths`).
    seq_length: S.
    cls_id, sep_id: ids of [CLS] and [SEP].

  Returns:
    dict of int32 `input_ids`, `input_mask`, `segment_ids` [B, S] (S static).
  """
  segments = [tf.cast(s, tf.int32) for s in segments]  # The features' dtype.
  position = tf.range(seq_length, dtype=tf.int64)[None, :]                    # [1, S]
  empty = tf.zeros(tf.stack([segments[0].nrows(), seq_length]), tf.int32)      # [B, S]
  ids = tf.where(position == 0, tf.constant(cls_id, tf.int32), empty)
  types = empty
  start = tf.ones_like(empty[:, :1], tf.int64)  # Where the next segment begins: [B, 1].
  for index, (segment, count) in enumerate(zip(segments, counts)):
    count = tf.cast(count, tf.int64)[:, None]                                 # [B, 1]
    offset = position - start                                                 # [B, S]
    # Rows cut to S columns: tokens past S are never kept (see Args).
    dense = segment.to_tensor(0, shape=[None, seq_length])                    # [B, S]
    tokens = tf.gather(dense, tf.clip_by_value(offset, 0, seq_length - 1), batch_dims=1)
    ids = tf.where((offset >= 0) & (offset < count), tokens, ids)
    ids = tf.where(offset == count, tf.constant(sep_id, tf.int32), ids)
    types = tf.where((offset >= 0) & (offset <= count), tf.constant(index, tf.int32), types)
    start += count + 1
  return {"input_ids": ids, "input_mask": tf.cast(position < start, tf.int32),
          "segment_ids": types}


# Length buckets: a batch cut to the smallest of a few lengths that holds its longest row
# (`tfbert.tasks.length_buckets` in fine-tuning, `cut_to_bucket` in raw-text signatures;
# docs/length_buckets.md on why the cut is exact).


def bucket_lengths(max_seq_length: int, multiple: int) -> tuple[int, ...]:
  """The lengths a batch may be cut to: the multiples of `multiple` below S, and S.

  Args:
    max_seq_length: S.
    multiple: the bucket step (> 0); `multiple` >= S leaves S alone.

  Returns:
    Increasing lengths, the last one S.
  """
  if multiple < 1:
    raise ValueError(f"length_bucket must be > 0 to form buckets, not {multiple}")
  return tuple(range(multiple, max_seq_length, multiple)) + (max_seq_length,)


def longest(mask: tf.Tensor) -> tf.Tensor:
  """int32 scalar: one past the last real position of any row of `mask` [B, S] (0 or 1)."""
  positions = tf.range(1, tf.shape(mask)[1] + 1)
  return tf.reduce_max(tf.cast(tf.not_equal(mask, 0), tf.int32) * positions[None])


def bucket_of(length: tf.Tensor, buckets: Sequence[int]) -> tf.Tensor:
  """int32 scalar: the smallest of `buckets` (increasing) that is >= `length`."""
  table = tf.constant(list(buckets), tf.int32)
  index = tf.searchsorted(table, tf.reshape(tf.cast(length, tf.int32), [1]), side="left")
  return tf.gather(table, tf.minimum(index[0], len(buckets) - 1))


def pad_outputs(outputs: dict, seq_length: int) -> dict:
  """Per-position outputs [B, L, ...] of a cut batch padded back to [B, S, ...] with zeros.

  An output is per-position when its second axis has no static size (it follows the cut
  inputs' L); a per-example output ([B, C], [B, H]) has a static one and is left as it is.
  The padded rows are positions of no example: every reader of these outputs reads real
  (labelled or context) positions only.
  """
  def pad(value):
    if value.shape.rank is None or value.shape.rank < 2 or value.shape[1] is not None:
      return value
    extra = seq_length - tf.shape(value)[1]
    paddings = [[0, 0], [0, extra]] + [[0, 0]] * (value.shape.rank - 2)
    return tf.pad(value, paddings)
  return {name: pad(value) for name, value in outputs.items()}


def cut_to_bucket(features: dict[str, tf.Tensor], seq_length: int,
                  multiple: int) -> dict[str, tf.Tensor]:
  """Packed features [B, S] cut to [B, L]: L the smallest of `bucket_lengths(S, multiple)`
  that holds the batch's longest row (`input_mask`).

  What a raw-text signature runs its model on, so a batch of short texts costs its tokens,
  not S: every real position's output is unchanged (docs/length_buckets.md);
  `pad_outputs` gives per-position outputs their S back.
  """
  length = bucket_of(longest(features[MASK]), bucket_lengths(seq_length, multiple))
  return {name: value[:, :length] for name, value in features.items()}
