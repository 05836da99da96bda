"""Tests for tfbert.tagging.tagging_export: the in-graph entity chunking equals the metric's
(seqeval's) on random tag sequences, and `tag_text` reports BERT's words with their
character offsets and the Keras model's tags. (tests/tagging/tagging_run_test.py loads an
export in a fresh process without tfbert.)"""

import random

import numpy as np
import pytest
import tensorflow as tf

from tfbert import BertClassifier, BertTokenClassifier
from tfbert.checkpoints import pretrained
from tfbert.config import BertConfig
from tfbert.tagging import tagging_export, tagging_metrics
from tfbert.text.tokenization import WordPieceTokenizer

TAGS = ("O", "B-x", "I-x", "B-y", "I-y")
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, initializer_range=0.5)


def test_entity_chunking_in_the_graph_equals_seqeval_on_random_tags():
  rng = random.Random(3)
  rows = [[rng.choice(TAGS) for _ in range(rng.randint(0, 11))] for _ in range(300)]
  width = max(len(r) for r in rows)
  tags = tf.constant([r + [""] * (width - len(r)) for r in rows])
  positions = tf.constant([list(range(width))] * len(rows), tf.int64)
  out = tagging_export._entities(tags, positions * 10, positions * 10 + 5)
  for index, row in enumerate(rows):
    n = int(out["num_entities"][index])
    found = {(index, kind.decode(), int(start) // 10, (int(end) - 5) // 10)
             for kind, start, end in zip(out["entity_types"][index, :n].numpy(),
                                         out["entity_starts"][index, :n].numpy(),
                                         out["entity_ends"][index, :n].numpy())}
    assert found == {e for e in tagging_metrics.entities(rows) if e[0] == index}, row


def test_tags_without_a_prefix_chunk_as_runs_of_their_type():
  """Sweep 27, B59: an IO-scheme tagger (tags PER, LOC) gave "Mary" for "Mary Ann": each
  word ended an entity, and starts and ends paired wrongly. By hand: a run of one type is
  one entity, joined by I- and split by B- (a tag starting with I but no hyphen is a type)."""
  rows = [["PER", "PER", "O", "LOC", "PER", "PER"], ["B-PER", "PER", "I-PER", "INFO", "INFO", ""],
          ["PER", "B-PER", "O", "", "", ""]]
  tags = tf.constant(rows)
  positions = tf.constant([list(range(6))] * 3, tf.int64)
  out = tagging_export._entities(tags, positions, positions + 1)
  found = [[(kind.decode(), int(start), int(end)) for kind, start, end in zip(
      *(out[k][i, :int(out["num_entities"][i])].numpy()
        for k in ("entity_types", "entity_starts", "entity_ends")))] for i in range(3)]
  assert found == [[("PER", 0, 2), ("LOC", 3, 4), ("PER", 4, 6)],
                   [("PER", 0, 3), ("INFO", 3, 5)], [("PER", 0, 1), ("PER", 1, 2)]]


@pytest.mark.slow
def test_tag_text_gives_bert_words_offsets_and_the_models_tags(tmp_path):
  model = BertTokenClassifier(BertConfig(**TINY), TAGS, dtype="float32")
  model.build()
  vocab = pretrained.minilm_vocab_file()
  export_dir = tagging_export.export_tagger_saved_model(model, str(tmp_path / "export"), vocab,
                                                        True, 13)
  assert (tmp_path / "export" / "labels.txt").read_text().split() == list(TAGS)
  tag_text = tf.saved_model.load(export_dir).signatures["tag_text"]
  texts = ["Zyxwar met Mira, in Oslo.", "", "née café " * 9]  # The last is cut at 11 pieces.
  out = tag_text(text=tf.constant(texts))
  tokenizer = WordPieceTokenizer(vocab, True)
  ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(texts))
  logits = model(_packed(tokenizer, ids, 13))["logits"].numpy()
  for b, text in enumerate(texts):
    pieces = ids[b].numpy()[:11]
    tokens = [_token(vocab, i) for i in pieces]
    first = [k for k, t in enumerate(tokens) if not t.startswith("##")]
    n = int(out["num_words"][b])
    assert n == len(first)
    as_chars = {len(text[:i].encode()): i for i in range(len(text) + 1)}  # Byte -> char.
    assert out["word_starts"][b, :n].numpy().tolist() == [
        as_chars[o] for o in starts[b].numpy()[first].tolist()]
    lasts = [k - 1 for k in first[1:]] + [len(pieces) - 1] * bool(first)
    assert out["word_ends"][b, :n].numpy().tolist() == [
        as_chars[o] for o in ends[b].numpy()[lasts].tolist()]
    expected = [TAGS[int(np.argmax(logits[b, 1 + k]))] for k in first]
    assert [t.decode() for t in out["tags"][b, :n].numpy()] == expected
  words = [texts[0][s:e] for s, e in zip(out["word_starts"][0, :6].numpy(),
                                          out["word_ends"][0, :6].numpy())]
  assert words == ["Zyxwar", "met", "Mira", ",", "in", "Oslo"]
  # Character offsets, not bytes: "née" is 3 characters (4 bytes).
  assert out["word_starts"][2, :3].numpy().tolist() == [0, 4, 9]


_VOCABS = {}  # vocab file -> its tokens.


def _token(vocab_file, index):
  """The vocabulary entry of an id."""
  if vocab_file not in _VOCABS:
    with open(vocab_file, encoding="utf-8") as f:
      _VOCABS[vocab_file] = [line.rstrip("\n") for line in f]
  return _VOCABS[vocab_file][index]


def _packed(tokenizer, ids, seq):
  """[CLS] pieces [SEP] of each text, cut to seq - 2 pieces, padded to seq."""
  rows = np.zeros((ids.shape[0], seq), np.int32)
  mask = np.zeros_like(rows)
  for b, row in enumerate(ids.to_list()):
    row = [tokenizer.cls_id] + row[:seq - 2] + [tokenizer.sep_id]
    rows[b, :len(row)], mask[b, :len(row)] = row, 1
  return {"input_ids": rows, "input_mask": mask, "segment_ids": np.zeros_like(rows)}


def test_export_refuses_another_model(tmp_path):
  with pytest.raises(TypeError, match="expected a BertTokenClassifier, got BertClassifier"):
    tagging_export.export_tagger_saved_model(BertClassifier(BertConfig(**TINY), 2),
                                             str(tmp_path / "e"), "v", True, 13)
