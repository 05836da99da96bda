"""Tests for tfbert.text.inputs against google-research/bert's packing rules."""

import numpy as np
import pytest
import tensorflow as tf

from tfbert.text.inputs import pack_inputs

CLS, SEP = 101, 102


def _google_pack(a, b, seq_length):
  """google-research/bert convert_single_example, restated: _truncate_seq_pair + packing."""
  a, b = list(a), (list(b) if b is not None else None)
  if b is None:
    a = a[:seq_length - 2]
    tokens, segments = [CLS] + a + [SEP], [0] * (len(a) + 2)
  else:
    while len(a) + len(b) > seq_length - 3:
      (a if len(a) > len(b) else b).pop()
    tokens = [CLS] + a + [SEP] + b + [SEP]
    segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
  pad = seq_length - len(tokens)
  return tokens + [0] * pad, [1] * len(tokens) + [0] * pad, segments + [0] * pad


@pytest.mark.parametrize("pairs", [False, True])
def test_matches_googles_truncation_and_layout(pairs):
  rng = np.random.default_rng(0)
  seq_length = 11
  a = [list(rng.integers(1000, 2000, rng.integers(0, 15))) for _ in range(60)]
  b = [list(rng.integers(1000, 2000, rng.integers(0, 15))) for _ in range(60)] if pairs else None
  segments = [tf.ragged.constant(a, dtype=tf.int32, ragged_rank=1)]
  if pairs:
    segments.append(tf.ragged.constant(b, dtype=tf.int32, ragged_rank=1))
  got = pack_inputs(segments, seq_length, CLS, SEP)
  for i in range(60):
    ids, mask, seg = _google_pack(a[i], b[i] if pairs else None, seq_length)
    np.testing.assert_array_equal(got["input_ids"][i], ids)
    np.testing.assert_array_equal(got["input_mask"][i], mask)
    np.testing.assert_array_equal(got["segment_ids"][i], seg)
  assert got["input_ids"].dtype == tf.int32 and got["input_ids"].shape == (60, seq_length)


def test_rejects_bad_segment_counts_and_lengths():
  one = tf.ragged.constant([[5]])
  with pytest.raises(ValueError, match="one or two segments, got 3"):
    pack_inputs([one] * 3, 8, CLS, SEP)
  with pytest.raises(ValueError, match="seq_length 4 leaves no room for 2"):
    pack_inputs([one, one], 4, CLS, SEP)
