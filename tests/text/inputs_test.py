"""Tests for tfbert.text.inputs against google-research/bert's packing rules and against
tensorflow-text's packing, which it replaced with core ops."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from tfbert.text import inputs
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


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
  """google-research/bert run_classifier.py's `_truncate_seq_pair`, verbatim but for style."""
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_length:
      break
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def _kept_by_google(la, lb, budget):
  a, b = list(range(la)), list(range(lb))
  _truncate_seq_pair(a, b, budget)
  return len(a), len(b)


def test_truncated_lengths_closed_form_equals_googles_loop():
  # Every (la, lb, n) with lengths 0..24 and budgets 0..50: zeros, ties (la == lb), odd and
  # even budgets, totals just under, at and over the budget; then long random ones.
  grid = [(la, lb, n) for la in range(25) for lb in range(25) for n in range(51)]
  rng = np.random.default_rng(1)
  wide = [(int(la), int(lb), int(n)) for la, lb, n in zip(
      rng.integers(0, 700, 3000), rng.integers(0, 700, 3000), rng.integers(1, 512, 3000))]
  cases = np.array(grid + wide + [(600, 600, 509), (0, 0, 1), (1, 1, 1)], np.int64)
  for budget in sorted(set(cases[:, 2])):
    rows = cases[cases[:, 2] == budget]
    ka, kb = inputs.truncated_lengths([tf.constant(rows[:, 0]), tf.constant(rows[:, 1])],
                                      int(budget))
    (single,) = inputs.truncated_lengths([tf.constant(rows[:, 0])], int(budget))
    want = np.array([_kept_by_google(la, lb, n) for la, lb, n in rows])
    np.testing.assert_array_equal(np.stack([ka, kb], axis=1), want, err_msg=f"n = {budget}")
    np.testing.assert_array_equal(single, np.minimum(rows[:, 0], budget))
  # Ties pop from the second segment first: the first keeps the extra token.
  assert _kept_by_google(5, 5, 7) == (4, 3)


def _tensorflow_text_pack(segments, seq_length):
  """The packing `pack_inputs` replaces: tensorflow-text's trimmers, `combine_segments` and
  `pad_model_inputs` (tensorflow-text 2.20)."""
  budget = seq_length - 1 - len(segments)
  trimmer = (tf_text.WaterfallTrimmer(budget) if len(segments) == 1
             else tf_text.RoundRobinTrimmer(budget))
  ids, segment_ids = tf_text.combine_segments(trimmer.trim(segments), start_of_sequence_id=CLS,
                                              end_of_segment_id=SEP)
  input_ids, input_mask = tf_text.pad_model_inputs(ids, max_seq_length=seq_length)
  segment_ids, _ = tf_text.pad_model_inputs(segment_ids, max_seq_length=seq_length)
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


@pytest.mark.parametrize("count", [1, 2])
def test_packing_equals_tensorflow_texts_on_random_ragged_batches(count):
  rng = np.random.default_rng(count)
  # A signature's graph: unknown batch and row lengths, int64 row splits as the tokenizer's.
  spec = tf.RaggedTensorSpec([None, None], tf.int32, row_splits_dtype=tf.int64)
  for seq_length in (2 * count + 1, 6, 11, 64):  # The smallest S, odd and even budgets.
    pack = tf.function(lambda *s, n=seq_length: pack_inputs(s, n, CLS, SEP),
                       input_signature=[spec] * count)
    for output in pack.get_concrete_function().structured_outputs.values():
      assert output.shape.as_list() == [None, seq_length]  # S static, as signatures show.
    for _ in range(5):
      batch = int(rng.integers(1, 60))
      # Row lengths 0 .. 2 S: empty rows, rows that fit, rows that must be cut.
      lengths = [rng.integers(0, 2 * seq_length, batch) for _ in range(count)]
      segments = [tf.RaggedTensor.from_row_lengths(
          rng.integers(1000, 2000, int(n.sum())).astype(np.int32), n) for n in lengths]
      want = _tensorflow_text_pack(segments, seq_length)
      got = pack(*segments)
      for name in ("input_ids", "input_mask", "segment_ids"):
        assert got[name].dtype == tf.int32 and got[name].shape == (batch, seq_length)
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{seq_length} {name}")
    # An empty request (batch 0) still gives [0, S].
    empty = tf.ragged.constant([[1]], dtype=tf.int32, ragged_rank=1)[:0]
    assert pack(*[empty] * count)["input_ids"].shape == (0, seq_length)


def _ops(function, *specs):
  """Op types of `function` traced on `specs`: its graph's nodes and its functions'."""
  graph = tf.function(function).get_concrete_function(*specs).graph.as_graph_def()
  return {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}


def test_packing_graph_holds_only_core_tensorflow_ops():
  """What the raw-text SavedModels rely on: no tensorflow-text op (e.g. the trimmer's
  `TFText>RoundRobinTrim`, which TF Serving up to 2.19.1 lacks) in the packing."""
  spec = tf.RaggedTensorSpec([None, None], tf.int32, row_splits_dtype=tf.int64)
  core = set(dir(tf.raw_ops))
  ops = (_ops(lambda a, b: pack_inputs([a, b], 9, CLS, SEP), spec, spec)
         | _ops(lambda a: pack_inputs([a], 9, CLS, SEP), spec))
  assert {"RaggedTensorToTensor", "Minimum"} <= ops  # The listing sees the packing's ops.
  assert ops <= core, sorted(ops - core)
  # The check can fail: tensorflow-text's trimmer is not core.
  assert _ops(lambda a, b: tf_text.RoundRobinTrimmer(7).trim([a, b]), spec, spec) - core
