"""Word-labelled sentences -> BERT windows with WordPiece labels, and back to word tags.

Alignment. A sentence's words are joined by single spaces and tokenized once
(`WordPieceTokenizer.tokenize_with_offsets`); each piece belongs to the word whose byte
span holds the piece's start offset. A word's first piece carries the word's label; its
other pieces, [CLS], [SEP] and padding carry `IGNORE` (the loss skips them). A word may
have no piece at all: BERT's cleaning deletes it (U+FE0F, a variation selector, is
removed by uncased accent stripping; a lone U+200B by control-character removal).

Windows. A sentence of more than S - 2 pieces is cut into windows of at most S - 2
pieces, starting every `doc_stride` pieces (the last window ends at the sentence's end),
as google-research/bert's SQuAD features do, so no word is dropped. Each word is read from
one window only: the one where its first piece has the most context (the SQuAD
max-context rule: the largest min(pieces left of it, pieces right of it) in the window,
+ 0.01 x window length, the first window on a tie). `word_index` marks that position.

Prediction. `word_tags` reads each word's tag at its marked position. A word with no
piece gets a defined tag too: `I-X` when it lies inside an entity (the word before it is
tagged `B-X`/`I-X` and the next word with pieces `I-X`), so the entity stays whole, else
`O`. On valid IOB2 gold tags (where such a word is inside an entity exactly when it is
tagged `I-X`, and `O` otherwise, as every empty word in WNUT 2017 is) the round trip
gold -> piece labels -> `word_tags` is the identity.

Shape legend: F windows (features), S max_seq_length, T pieces of a sentence.
"""

import dataclasses
from typing import Sequence

import numpy as np
import tensorflow as tf

from tfbert.tagging.conll import Sentence, entity_type
from tfbert.text.tokenization import WordPieceTokenizer

IGNORE = -1  # The label id of positions the loss skips.
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
TOKENIZE_BATCH = 512  # Sentences per tokenizer call (bounds its memory).


@dataclasses.dataclass(frozen=True)
class SentencePieces:
  """One sentence's WordPieces.

  Attributes:
    ids: int32 [T] piece ids.
    word: int32 [T] the word of each piece.
    first_piece: int32 [num words] each word's first piece, -1 for a word with none.
  """
  ids: np.ndarray
  word: np.ndarray
  first_piece: np.ndarray


@dataclasses.dataclass(frozen=True)
class TaggingFeatures:
  """The windows of a list of sentences.

  Attributes:
    inputs: int32 [F, S] `input_ids`, `input_mask`, `segment_ids` by name.
    label_ids: int32 [F, S] label ids, `IGNORE` where the loss skips.
    sentence: int32 [F] the sentence of each window.
    word_index: int32 [F, S] the word read at each position (its max-context window's
      first piece), -1 elsewhere.
    pieces: the `SentencePieces` of each sentence.
  """
  inputs: dict[str, np.ndarray]
  label_ids: np.ndarray
  sentence: np.ndarray
  word_index: np.ndarray
  pieces: list[SentencePieces]

  def __len__(self) -> int:
    return len(self.sentence)


def sentence_pieces(sentences: Sequence[Sentence],
                    tokenizer: WordPieceTokenizer) -> list[SentencePieces]:
  """Tokenizes each sentence's words (joined by spaces) and maps pieces to words by offset."""
  result = []
  for begin in range(0, len(sentences), TOKENIZE_BATCH):
    batch = sentences[begin:begin + TOKENIZE_BATCH]
    texts = [" ".join(s.words) for s in batch]
    ids, starts, _ = tokenizer.tokenize_with_offsets(tf.constant(texts, tf.string))
    for sentence, row_ids, row_starts in zip(batch, ids.numpy(), starts.numpy()):
      lengths = np.array([len(w.encode("utf-8")) for w in sentence.words], np.int64)
      word_starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]])  # Byte offsets.
      word = (np.searchsorted(word_starts, np.asarray(row_starts), side="right") - 1)
      first = np.full(len(sentence.words), -1, np.int32)
      for piece in range(len(word) - 1, -1, -1):
        first[word[piece]] = piece
      result.append(SentencePieces(np.asarray(row_ids, np.int32), word.astype(np.int32), first))
  return result


def windows(num_pieces: int, max_pieces: int, doc_stride: int) -> list[tuple[int, int]]:
  """(first piece, length) of each window over `num_pieces` pieces (one, empty, for 0)."""
  spans, start = [], 0
  while True:
    length = min(num_pieces - start, max_pieces)
    spans.append((start, length))
    if start + length >= num_pieces:
      return spans
    start += min(length, doc_stride)


def max_context_window(spans: Sequence[tuple[int, int]], piece: int) -> int:
  """The index of the window in which `piece` has the most context (see the module)."""
  best, best_score = -1, None
  for index, (start, length) in enumerate(spans):
    if start <= piece < start + length:
      score = min(piece - start, start + length - 1 - piece) + 0.01 * length
      if best_score is None or score > best_score:
        best, best_score = index, score
  return best


def make_features(sentences: Sequence[Sentence], tokenizer: WordPieceTokenizer,
                  labels: Sequence[str], max_seq_length: int, doc_stride: int,
                  with_labels: bool = True, unseen_tags_ignored: bool = False
                  ) -> TaggingFeatures:
  """The windows of `sentences` (see the module docstring).

  Args:
    sentences: the sentences (their tags are used `with_labels`).
    tokenizer: the model's tokenizer.
    labels: the tag of each label id.
    max_seq_length: S (>= 3).
    doc_stride: pieces between window starts (>= 1).
    with_labels: False for sentences without tags (every label id is `IGNORE`).
    unseen_tags_ignored: True for evaluation data: a word whose tag is outside `labels` (an
      entity type the model never learned) gets `IGNORE` (no loss; the entity scores,
      computed from the gold tags, count its entity as a miss). False: refused.

  Raises:
    ValueError: a tag outside `labels` (naming it and its line) unless
      `unseen_tags_ignored`, or bad sizes.
  """
  if max_seq_length < 3 or doc_stride < 1:
    raise ValueError(f"need max_seq_length >= 3 and doc_stride >= 1, got {max_seq_length} "
                     f"and {doc_stride}")
  label_id = {label: index for index, label in enumerate(labels)}
  max_pieces = max_seq_length - 2
  rows = {name: [] for name in (*FEATURE_NAMES, "label_ids", "word_index", "sentence")}
  all_pieces = sentence_pieces(sentences, tokenizer)
  for index, (sentence, pieces) in enumerate(zip(sentences, all_pieces)):
    word_labels = np.full(len(sentence.words), IGNORE, np.int32)
    if with_labels:
      for word, (tag, line) in enumerate(zip(sentence.tags, sentence.lines)):
        if tag not in label_id:
          if unseen_tags_ignored:
            continue
          raise ValueError(f"line {line}: tag {tag!r} is not one of the model's labels "
                           f"{list(labels)}")
        word_labels[word] = label_id[tag]
    spans = windows(len(pieces.ids), max_pieces, doc_stride)
    read_in = {word: max_context_window(spans, piece)
               for word, piece in enumerate(pieces.first_piece) if piece >= 0}
    for window, (start, length) in enumerate(spans):
      ids = np.zeros(max_seq_length, np.int32)
      ids[0], ids[1:length + 1], ids[length + 1] = (
          tokenizer.cls_id, pieces.ids[start:start + length], tokenizer.sep_id)
      mask = np.zeros(max_seq_length, np.int32)
      mask[:length + 2] = 1
      label_ids = np.full(max_seq_length, IGNORE, np.int32)
      word_index = np.full(max_seq_length, -1, np.int32)
      for piece in range(start, start + length):
        word = pieces.word[piece]
        if pieces.first_piece[word] == piece:
          label_ids[piece - start + 1] = word_labels[word]
          if read_in[word] == window:
            word_index[piece - start + 1] = word
      for name, value in (("input_ids", ids), ("input_mask", mask),
                          ("segment_ids", np.zeros(max_seq_length, np.int32)),
                          ("label_ids", label_ids), ("word_index", word_index),
                          ("sentence", index)):
        rows[name].append(value)
  as_array = {name: np.array(values, np.int32).reshape(-1, max_seq_length)
              if name != "sentence" else np.array(values, np.int32)
              for name, values in rows.items()}
  return TaggingFeatures({name: as_array[name] for name in FEATURE_NAMES},
                         as_array["label_ids"], as_array["sentence"], as_array["word_index"],
                         all_pieces)


def word_tags(features: TaggingFeatures, predicted: np.ndarray, sentences: Sequence[Sentence],
              labels: Sequence[str]) -> list[list[str]]:
  """Each sentence's word tags from per-position label ids (see the module docstring).

  Args:
    features: the windows of `sentences`.
    predicted: int [F, S] label ids (e.g. the argmax of the logits).
    sentences: the sentences.
    labels: the tag of each label id.
  """
  tags = [[None] * len(s.words) for s in sentences]
  rows, columns = np.nonzero(features.word_index >= 0)
  for row, column in zip(rows, columns):
    tags[features.sentence[row]][features.word_index[row, column]] = labels[
        int(predicted[row, column])]
  for sentence_tags in tags:
    for word, tag in enumerate(sentence_tags):
      if tag is None:
        sentence_tags[word] = _empty_word_tag(sentence_tags, word)
  return tags


def _empty_word_tag(tags: list, word: int) -> str:
  """`I-X` inside an X entity (previous word B-X/I-X, next tagged word I-X), else `O`."""
  previous = tags[word - 1] if word > 0 else "O"
  following = next((t for t in tags[word + 1:] if t is not None), "O")
  kind = entity_type(previous)
  if kind is not None and following == f"I-{kind}":
    return f"I-{kind}"
  return "O"
