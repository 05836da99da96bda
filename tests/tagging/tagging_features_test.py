"""Tests for tfbert.tagging.tagging_features: word -> WordPiece alignment by offsets, windows
with the max-context rule, words without pieces, and the round trip on WNUT 2017.

The round-trip tests read TFBERT_SHARED_DATA/wnut17 with the uncased (MiniLM wheel) and the
cased (shared data) vocabularies, and compare with what its SOURCES.md documents: the
longest sentences' pieces (73, 82, 189 uncased; 88, 82, 196 cased), the words without a
piece (4 dev and 3 test U+FE0F words uncased, none cased) and the 2 test sentences over
126 pieces (so more windows than sentences at S = 128).
"""

import os

import numpy as np
import pytest

from tfbert.checkpoints import pretrained
from tfbert.tagging import conll, tagging_features
from tfbert.tagging.tagging_features import IGNORE
from tfbert.text.tokenization import WordPieceTokenizer

LABELS = ("O", "B-x", "I-x", "B-y", "I-y")


@pytest.fixture(scope="module")
def uncased():
  return WordPieceTokenizer(pretrained.minilm_vocab_file(), True)


def _sentence(*pairs):
  words, tags = zip(*pairs)
  return conll.Sentence(words, tags, tuple(range(1, len(words) + 1)))


def test_pieces_map_to_words_by_offset(uncased):
  # "Zyxwar" splits into several pieces, "&amp;" into three BERT words (one CoNLL word),
  # U+FE0F has none, "watched\u200bwas" loses its zero-width space inside one word.
  sentence = _sentence(("Zyxwar", "B-x"), ("&amp;", "O"), ("\ufe0f", "O"),
                       ("watched\u200bwas", "O"), ("Mira", "B-y"))
  (pieces,) = tagging_features.sentence_pieces([sentence], uncased)
  per_word = [uncased.tokenize([w]).to_list()[0] for w in sentence.words]
  assert len(per_word[0]) > 1 and per_word[2] == [] and len(per_word[1]) == 3
  assert pieces.ids.tolist() == [i for ids in per_word for i in ids]
  assert pieces.word.tolist() == [w for w, ids in enumerate(per_word) for _ in ids]
  starts = np.cumsum([0] + [len(ids) for ids in per_word])[:-1]
  assert pieces.first_piece.tolist() == [s if ids else -1 for s, ids in zip(starts, per_word)]


def test_first_pieces_carry_the_labels_and_the_rest_is_ignored(uncased):
  sentence = _sentence(("Zyxwar", "B-x"), ("Brekka", "I-x"), ("met", "O"), ("\ufe0f", "O"))
  features = tagging_features.make_features([sentence], uncased, LABELS, 16, 4)
  (pieces,) = features.pieces
  n = len(pieces.ids)
  assert len(features) == 1
  assert features.inputs["input_ids"][0, :n + 2].tolist() == (
      [uncased.cls_id] + pieces.ids.tolist() + [uncased.sep_id])
  assert features.inputs["input_mask"][0].tolist() == [1] * (n + 2) + [0] * (14 - n)
  expected = np.full(16, IGNORE)
  for word, tag in enumerate(sentence.tags[:3]):
    expected[pieces.first_piece[word] + 1] = LABELS.index(tag)
  assert features.label_ids[0].tolist() == expected.tolist()
  assert features.word_index[0].tolist() == [
      w if label != IGNORE else -1 for w, label in zip(
          [-1] + pieces.word.tolist() + [-1] * (15 - n), expected)]


def test_windows_cover_every_piece_and_end_at_the_end():
  assert tagging_features.windows(0, 5, 2) == [(0, 0)]
  assert tagging_features.windows(5, 5, 2) == [(0, 5)]
  assert tagging_features.windows(9, 5, 2) == [(0, 5), (2, 5), (4, 5)]
  assert tagging_features.windows(7, 5, 3) == [(0, 5), (3, 4)]
  # Max context: piece 4 sits at the edge of window 0, 2 from the edges of window 1.
  spans = [(0, 5), (2, 5), (4, 5)]
  assert tagging_features.max_context_window(spans, 4) == 1
  assert tagging_features.max_context_window(spans, 0) == 0
  assert tagging_features.max_context_window(spans, 8) == 2
  assert tagging_features.max_context_window([(0, 5), (3, 4)], 4) == 1  # 0.05 vs 1.04.
  assert tagging_features.max_context_window([(0, 5), (2, 5)], 3) == 0  # A tie: the first.


def test_a_long_sentence_is_windowed_and_each_word_read_once(uncased):
  words = [(f"w{i}", "B-x" if i % 3 == 0 else "O") for i in range(23)]
  sentence = _sentence(*words)
  features = tagging_features.make_features([sentence], uncased, LABELS, 9, 3)
  assert len(features) > 1 and set(features.sentence.tolist()) == {0}
  read = features.word_index[features.word_index >= 0]
  assert sorted(read.tolist()) == list(range(23))  # Every word once: none dropped.
  assert (features.inputs["input_mask"].sum(axis=1) <= 9).all()
  back = tagging_features.word_tags(features, np.maximum(features.label_ids, 0), [sentence],
                                    LABELS)
  assert back == [list(sentence.tags)]


@pytest.mark.parametrize("tags, expected", [
    # A word without pieces inside an entity continues it; elsewhere it is O.
    (("B-x", None, "I-x"), ["B-x", "I-x", "I-x"]),
    (("B-x", None, None, "I-x"), ["B-x", "I-x", "I-x", "I-x"]),
    (("B-x", None, "B-x"), ["B-x", "O", "B-x"]),
    (("B-x", None, "I-y"), ["B-x", "O", "I-y"]),
    ((None, "B-x"), ["O", "B-x"]),
    (("I-y", None), ["I-y", "O"]),
])
def test_words_without_pieces_get_a_defined_tag(uncased, tags, expected):
  words = ["\ufe0f" if t is None else "Mira" for t in tags]
  sentence = _sentence(*zip(words, ["O"] * len(words)))
  features = tagging_features.make_features([sentence], uncased, LABELS, 16, 4)
  predicted = np.zeros_like(features.label_ids)
  for column, word in enumerate(features.word_index[0]):
    if word >= 0:
      predicted[0, column] = LABELS.index(tags[word])
  assert tagging_features.word_tags(features, predicted, [sentence], LABELS) == [expected]


def test_an_unknown_tag_is_named_with_its_line(uncased):
  with pytest.raises(ValueError, match="line 2: tag 'B-z' is not one of the model's labels"):
    tagging_features.make_features([_sentence(("a", "O"), ("b", "B-z"))], uncased, LABELS,
                                    16, 4)


def test_an_unseen_tag_of_evaluation_data_carries_no_label(uncased):
  """An entity type the model never learned is scored from the gold tags as a miss."""
  features = tagging_features.make_features([_sentence(("a", "O"), ("b", "B-z"))], uncased,
                                            LABELS, 16, 4, unseen_tags_ignored=True)
  assert features.label_ids[0, :4].tolist() == [tagging_features.IGNORE, 0,
                                                 tagging_features.IGNORE,
                                                 tagging_features.IGNORE]


# split -> (longest sentence in pieces, words without a piece, windows beyond one per
# sentence at S = 128 and stride 64), uncased and cased. Two test sentences exceed 126
# pieces: each takes 2 windows (0-126, 64-190), but 196 cased pieces take 3 (128-196).
EXPECTED = {"uncased": {"wnut17train.conll": (73, 0, 0), "emerging.dev.conll": (82, 4, 0),
                        "emerging.test.annotated": (189, 3, 2)},
            "cased": {"wnut17train.conll": (88, 0, 0), "emerging.dev.conll": (82, 0, 0),
                      "emerging.test.annotated": (196, 0, 3)}}


@pytest.mark.slow  # ~15 s: both casings, every split, two window sizes.
@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_round_trip_is_the_identity_on_every_wnut17_sentence(shared_data, casing):
  vocab = (pretrained.minilm_vocab_file() if casing == "uncased"
           else os.path.join(shared_data, "bert_cased_vocab.txt"))
  tokenizer = WordPieceTokenizer(vocab, casing == "uncased")
  for name, (longest, empty, extra) in EXPECTED[casing].items():
    sentences = conll.read_conll(os.path.join(shared_data, "wnut17", name))
    labels = conll.tag_set(sentences)
    for seq, stride in ((128, 64), (32, 7)):
      features = tagging_features.make_features(sentences, tokenizer, labels, seq, stride)
      back = tagging_features.word_tags(features, np.maximum(features.label_ids, 0), sentences,
                                        labels)
      assert back == [list(s.tags) for s in sentences], (name, seq)
    assert max(len(p.ids) for p in features.pieces) == longest, name
    assert sum(int((p.first_piece < 0).sum()) for p in features.pieces) == empty, name
    at_128 = tagging_features.make_features(sentences, tokenizer, labels, 128, 64)
    assert len(at_128) - len(sentences) == extra, name
