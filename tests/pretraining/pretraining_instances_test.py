"""Tests for tfbert.pretraining.pretraining_instances: google-research/bert's instances, exactly.

Small hand-made documents over an odd toy vocab (29 ids; [CLS] 2, [SEP] 3, [MASK] 4, "##"
pieces 11 and 12) and a scripted random source pin each draw and its effect against values
worked out by hand from Google's code; `truncate_seq_pair` is also compared with
tf-models-official's copy of Google's. The whole algorithm is compared with that copy on a
real corpus in pretraining_data_test.py, which has the corpus reader.
"""

import random

import pytest
import tensorflow as tf

from tfbert.pretraining.pretraining_instances import (
  PretrainingDataConfig,
  TrainingInstance,
  VocabInfo,
  create_instances_from_document,
  create_masked_lm_predictions,
  create_training_instances,
  instance_to_example,
  truncate_seq_pair,
)

CLS, SEP, MASK = 2, 3, 4
VOCAB = VocabInfo(size=29, cls_id=CLS, sep_id=SEP, mask_id=MASK, subword_ids=frozenset({11, 12}))


class _ScriptedRandom:
  """Replays the given draws in order; a draw too many or a wrong randint range fails."""

  def __init__(self, randoms, randints=()):
    self.randoms, self.randints = list(randoms), list(randints)

  def random(self):
    return self.randoms.pop(0)

  def randint(self, a, b):
    expected_range, value = self.randints.pop(0)
    assert (a, b) == expected_range
    return value

  def shuffle(self, values):
    del values  # Keeps the order.


def _config(**overrides):
  """A `PretrainingDataConfig` (its vocab file is never read here)."""
  values = dict(vocab_file="unused_vocab.txt", max_seq_length=13, max_predictions_per_seq=5,
                dupe_factor=1)
  return PretrainingDataConfig(**{**values, **overrides})


def test_truncate_seq_pair_cuts_the_longer_side_b_on_ties_front_or_back_by_draw():
  tokens_a, tokens_b = [1, 2, 3, 4, 5], [6, 7, 8, 9]
  rng = _ScriptedRandom([0.1, 0.9, 0.7, 0.2])  # < 0.5 cuts the front.
  truncate_seq_pair(tokens_a, tokens_b, 5, rng)
  # a (5 > 4) front; b (4 = 4) back; a (4 > 3) back; b (3 = 3) front.
  assert (tokens_a, tokens_b) == ([2, 3, 4], [7, 8])
  assert not rng.randoms


def test_truncate_seq_pair_draws_nothing_when_the_pair_fits():
  rng = random.Random(3)
  state = rng.getstate()
  tokens_a, tokens_b = [1, 2], [3]
  truncate_seq_pair(tokens_a, tokens_b, 3, rng)
  assert (tokens_a, tokens_b, rng.getstate()) == ([1, 2], [3], state)


def test_truncate_seq_pair_matches_googles_on_random_pairs():
  # Imported here: the module defines absl flags at import.
  # pylint: disable-next=import-outside-toplevel
  from official.nlp.data.create_pretraining_data import truncate_seq_pair as googles
  lengths = random.Random(0)
  for seed in range(50):
    a_length, b_length = lengths.randint(0, 23), lengths.randint(0, 23)
    pairs = [(list(range(a_length)), list(range(100, 100 + b_length))) for _ in range(2)]
    rngs = [random.Random(seed), random.Random(seed)]
    truncate_seq_pair(*pairs[0], 17, rngs[0])
    googles(*pairs[1], 17, rngs[1])
    assert pairs[0] == pairs[1] and rngs[0].getstate() == rngs[1].getstate()


def test_masks_at_most_max_predictions_and_never_cls_or_sep():
  ids = [CLS, *range(13, 23), SEP, *range(5, 15), SEP]  # 23 ids; specials at 0, 11, 22.
  config = _config(max_seq_length=23, masked_lm_prob=1.0)  # round(23 * 1.0) = 23 > P = 5.
  for seed in range(20):
    output, positions, labels = create_masked_lm_predictions(
        ids, config, VOCAB, random.Random(seed))
    assert len(positions) == 5 and positions == sorted(set(positions))
    assert not set(positions) & {0, 11, 22}
    assert labels == [ids[p] for p in positions]
    assert len(output) == 23
    assert [t for i, t in enumerate(output) if i not in positions] == [
        t for i, t in enumerate(ids) if i not in positions]


@pytest.mark.parametrize("length,masked_lm_prob,expected", [
    (13, 0.15, 2),   # 1.95 rounds to 2.
    (7, 0.15, 1),    # 1.05 rounds to 1.
    (5, 0.05, 1),    # 0.25 rounds to 0; at least 1.
    (10, 0.25, 2),   # 2.5 rounds half to even (Python 3, as Google's script runs).
    (31, 0.5, 5)])   # 15.5 rounds to 16; at most P = 5.
def test_number_of_predictions_is_rounded_length_times_prob_within_1_and_p(
    length, masked_lm_prob, expected):
  ids = [CLS, *range(13, 13 + length - 2), SEP]
  _, positions, _ = create_masked_lm_predictions(
      ids, _config(masked_lm_prob=masked_lm_prob), VOCAB, random.Random(length))
  assert len(positions) == expected


def test_chosen_pieces_become_mask_keep_or_random_by_googles_draws():
  ids = [CLS, 5, 6, 7, 8, SEP]  # round(6 * 1.0) = 6, capped at P = 3.
  # Piece 1: 0.3 < 0.8 -> [MASK]; piece 2: 0.85, then 0.2 < 0.5 -> kept; piece 3: 0.9,
  # then 0.7 >= 0.5 -> randint(0, 28) = 17.
  rng = _ScriptedRandom([0.3, 0.85, 0.2, 0.9, 0.7], [((0, 28), 17)])
  output, positions, labels = create_masked_lm_predictions(
      ids, _config(max_predictions_per_seq=3, masked_lm_prob=1.0), VOCAB, rng)
  assert (output, positions, labels) == ([CLS, MASK, 6, 17, 8, SEP], [1, 2, 3], [5, 6, 7])
  assert not rng.randoms and not rng.randints


def test_whole_word_masking_skips_a_word_that_would_overshoot():
  ids = [CLS, 10, 11, 12, 13, SEP]  # Words [1, 2, 3] and [4]; round(6 * 0.34) = 2.
  for seed in range(10):
    _, positions, labels = create_masked_lm_predictions(
        ids, _config(do_whole_word_mask=True, masked_lm_prob=0.34), VOCAB, random.Random(seed))
    assert (positions, labels) == ([4], [13])


def test_whole_word_masking_joins_a_subword_to_the_previous_word_across_sep():
  ids = [CLS, 10, SEP, 11, 13, SEP]  # Google's quirk: words [1, 3] and [4]; 6 * 0.34 -> 2.
  config = _config(do_whole_word_mask=True, masked_lm_prob=0.34)
  chosen = [create_masked_lm_predictions(ids, config, VOCAB, random.Random(seed))[1]
            for seed in range(20)]
  assert [1, 3] in chosen and [4] in chosen  # [4] alone: [1, 3] would overshoot.
  assert all(positions in ([1, 3], [4]) for positions in chosen), chosen


def test_instances_of_a_document_follow_googles_draws_and_put_back_unused_sentences():
  documents = [[[10, 11], [12], [13]], [[20, 21], [22], [23, 24]]]
  rng = _ScriptedRandom(
      # short_seq_prob; random next; [MASK]; actual next; not [MASK], kept.
      [0.5, 0.2, 0.1, 0.9, 0.95, 0.3],
      # a_end of 3 sentences; the other document; its start; a_end of 2 sentences.
      [((1, 2), 1), ((0, 1), 1), ((0, 2), 1), ((1, 1), 1)])
  config = _config(max_seq_length=8, max_predictions_per_seq=3, short_seq_prob=0.0)
  instances = create_instances_from_document(documents, 0, config, VOCAB, rng)
  # Target 8 - 3 = 5 tokens: a = [10, 11], b = [22] + [23, 24] from document 1, and
  # [12], [13] go back to make the second pair. round(8 * 0.15) = round(5 * 0.15) = 1.
  assert instances == [
      TrainingInstance([CLS, MASK, 11, SEP, 22, 23, 24, SEP], [0, 0, 0, 0, 1, 1, 1, 1],
                       [1], [10], True),
      TrainingInstance([CLS, 12, SEP, 13, SEP], [0, 0, 0, 1, 1], [1], [12], False)]
  assert not rng.randoms and not rng.randints


def test_a_one_document_corpus_takes_its_random_segments_from_itself():
  document = [[10, 11], [12, 13, 14], [15], [16, 17], [18, 19, 20]]  # Ids 10..20 in order.
  instances = create_training_instances(
      [document], _config(max_seq_length=9, dupe_factor=5), VOCAB, random.Random(5))
  assert any(i.is_random_next for i in instances)
  for instance in instances:
    original = list(instance.input_ids)
    for position, label in zip(instance.masked_lm_positions, instance.masked_lm_ids):
      original[position] = label
    first_b = instance.segment_ids.index(1)
    for segment in (original[1:first_b - 1], original[first_b:-1]):
      assert segment == list(range(segment[0], segment[0] + len(segment)))


def test_instance_to_example_zero_pads_into_googles_features():
  instance = TrainingInstance([CLS, 10, MASK, SEP, 22, SEP], [0, 0, 0, 0, 1, 1], [2], [13],
                              True)
  s, p = 11, 5
  record = instance_to_example(instance, s, p).SerializeToString()
  # google-research/bert run_pretraining.py's `name_to_features`.
  spec = {name: tf.io.FixedLenFeature([length], dtype) for name, length, dtype in [
      ("input_ids", s, tf.int64), ("input_mask", s, tf.int64), ("segment_ids", s, tf.int64),
      ("masked_lm_positions", p, tf.int64), ("masked_lm_ids", p, tf.int64),
      ("masked_lm_weights", p, tf.float32), ("next_sentence_labels", 1, tf.int64)]}
  features = {k: v.numpy().tolist() for k, v in tf.io.parse_single_example(record, spec).items()}
  assert features == {
      "input_ids": [2, 10, 4, 3, 22, 3, 0, 0, 0, 0, 0],
      "input_mask": [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
      "segment_ids": [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0],
      "masked_lm_positions": [2, 0, 0, 0, 0], "masked_lm_ids": [13, 0, 0, 0, 0],
      "masked_lm_weights": [1.0, 0.0, 0.0, 0.0, 0.0], "next_sentence_labels": [1]}
  assert set(tf.train.Example.FromString(record).features.feature) == set(spec)


def test_instance_to_example_refuses_more_than_s_tokens_or_p_predictions():
  instance = TrainingInstance([CLS, 10, SEP, 13, SEP], [0, 0, 0, 1, 1], [1, 3], [10, 13], False)
  with pytest.raises(ValueError, match="5 values do not fit length 4"):
    instance_to_example(instance, 4, 3)
  with pytest.raises(ValueError, match="2 values do not fit length 1"):
    instance_to_example(instance, 7, 1)
