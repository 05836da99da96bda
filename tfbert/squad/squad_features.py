"""SQuAD examples -> BERT features, the google-research/bert `run_squad.py` way.

Semantics of Google's `convert_examples_to_features`: the question is cut to
`max_query_length` wordpieces; the context is cut into windows ("doc spans") of at most
`max_seq_length - len(query) - 3` wordpieces, each starting `doc_stride` after the last,
and each window becomes `[CLS] query [SEP] window [SEP]` (segment ids 0 then 1, zero
padding). A token in several windows counts only in its "max context" window (Google's
`_check_is_max_context`: the largest min(left, right) context, +0.01 * window length to
break ties, the earliest window on a full tie). Training labels are the answer's first and
last wordpiece in the sequence, or 0 ([CLS]) when the window does not hold the whole
answer or the question is unanswerable.

What differs: the context is tokenized in one piece with `WordPieceTokenizer.
tokenize_with_offsets` (same wordpieces as Google) instead of Google's whitespace
`doc_tokens` + `orig_to_tok_index`. Every context token keeps its exact character span in
the original context (`token_start_chars`, `token_end_chars`), so the answer's token span
is simply the tokens overlapping its character span (this subsumes Google's
`_improve_answer_span`), and postprocessing cuts the answer out of the original string.

Shape legend: S max_seq_length, T context wordpieces, F features.
"""

import dataclasses
import hashlib
import json
import logging
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from tfbert.runtime import atomic, files, validation
from tfbert.squad.squad_data import SkippedExample, SquadExample
from tfbert.text.tokenization import WordPieceTokenizer

# Google's first unique id (run_squad.py); kept so ids look the same in both pipelines.
FIRST_UNIQUE_ID = 1000000000
NO_CHAR = -1  # token_*_chars of positions that are not context tokens.
_BATCH = 4096  # Texts per tokenizer call: bounds memory; each eager call costs ~0.15 s.


@dataclasses.dataclass(frozen=True)
class FeatureConfig:
  """Windowing hyperparameters, with Google's defaults and names.

  A `doc_stride` longer than a window (`max_seq_length - len(query) - 3`) is cut to the
  window, as Google does: windows then abut without overlap, so an answer across their
  edge is in none. `tfbert.squad.squad_run` refuses a stride over `max_seq_length -
  max_query_length - 3`; here it is allowed, for windows meant not to overlap.
  """
  max_seq_length: int = 384
  doc_stride: int = 128
  max_query_length: int = 64

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    """The rules of a usable config (`tfbert.runtime.validation`)."""
    return [
        # Google's validate_flags_or_throw: a window must hold at least one context token.
        (self.max_seq_length > self.max_query_length + 3,
         # Named as the tools' flags and tfbert.load's keywords are (no "--": both read it).
         f"max_seq_length ({self.max_seq_length}) must be greater than max_query_length "
         f"({self.max_query_length}) + 3 (the [CLS] and two [SEP]), or no context fits a "
         "window: " + (f"lower max_query_length to at most {self.max_seq_length - 4} or "
                       if self.max_seq_length > 4 else "")
         + f"raise max_seq_length above {self.max_query_length + 3}"),
        (self.doc_stride >= 1 and self.max_query_length >= 1,
         f"doc_stride ({self.doc_stride}) and max_query_length ({self.max_query_length}) "
         "must be >= 1"),
    ]


@dataclasses.dataclass(eq=False)
class SquadFeature:
  """One window of one example, as fed to `BertSpanLabeler`.

  Attributes:
    unique_id: int, Google's `unique_ids` (from FIRST_UNIQUE_ID on, in order).
    example_index: int, index of the example in the list converted.
    doc_span_index: int, index of this window among the example's windows.
    input_ids, input_mask, segment_ids: int32 [S].
    token_start_chars, token_end_chars: int32 [S], character span `[start, end)` of each
      context token in `example.context_text`; NO_CHAR at [CLS], query, [SEP], padding.
    token_is_max_context: int32 [S], 1 where this window is the token's max-context one.
    start_position, end_position: int, training labels (0 = [CLS]); None when converted
      for prediction.
    is_impossible: bool, v2.0 unanswerable (training only; False otherwise).
  """
  unique_id: int
  example_index: int
  doc_span_index: int
  input_ids: np.ndarray
  input_mask: np.ndarray
  segment_ids: np.ndarray
  token_start_chars: np.ndarray
  token_end_chars: np.ndarray
  token_is_max_context: np.ndarray
  start_position: Optional[int] = None
  end_position: Optional[int] = None
  is_impossible: bool = False


@dataclasses.dataclass
class ConvertedFeatures:
  """Result of `convert_examples_to_features`.

  Attributes:
    features: all windows of all examples, in example order.
    skipped: training examples whose answer covers no wordpiece (they get no feature).
  """
  features: list[SquadFeature]
  skipped: list[SkippedExample]


@dataclasses.dataclass(frozen=True)
class ContextTokens:
  """A context's wordpieces: ids and character spans, int32 [T] each."""
  ids: np.ndarray
  start_chars: np.ndarray
  end_chars: np.ndarray


def tokenize_contexts(tokenizer: WordPieceTokenizer,
                      contexts: Sequence[str]) -> list[ContextTokens]:
  """Wordpieces of each context with character (not byte) spans into it."""
  result = []
  for i in range(0, len(contexts), _BATCH):
    batch = list(contexts[i:i + _BATCH])
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(batch))
    for text, *rows in zip(batch, ids.to_list(), starts.to_list(), ends.to_list()):
      to_char = _byte_to_char_index(text)
      result.append(ContextTokens(np.asarray(rows[0], np.int32),
                                  to_char[np.asarray(rows[1], np.int64)],
                                  to_char[np.asarray(rows[2], np.int64)]))
  return result


def _byte_to_char_index(text: str) -> np.ndarray:
  """int32 [len(utf8) + 1]: the character index at each character-starting byte."""
  data = np.frombuffer(text.encode("utf-8"), np.uint8)
  # UTF-8 continuation bytes are 0b10xxxxxx; every other byte starts a character.
  starts = np.append(np.flatnonzero((data & 0xC0) != 0x80), len(data))
  index = np.full(len(data) + 1, NO_CHAR, np.int32)
  index[starts] = np.arange(len(starts), dtype=np.int32)
  return index


def answer_token_span(tokens: ContextTokens, start_char: int,
                      end_char: int) -> Optional[tuple[int, int]]:
  """First and last wordpiece overlapping characters `[start_char, end_char)`.

  Returns:
    (first, last) indexes into the context tokens, or None if no token overlaps (an
    answer of whitespace or deleted characters only). An answer that starts or ends inside
    a wordpiece gets that whole wordpiece (as Google's when the word is not split).
  """
  first = int(np.searchsorted(tokens.end_chars, start_char, side="right"))
  last = int(np.searchsorted(tokens.start_chars, end_char, side="left")) - 1
  return (first, last) if first <= last else None


def doc_spans(num_tokens: int, max_tokens_for_doc: int,
              doc_stride: int) -> list[tuple[int, int]]:
  """Google's sliding windows: (start, length) pairs over `num_tokens` context tokens."""
  spans, start = [], 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def max_context_windows(spans: Sequence[tuple[int, int]], num_tokens: int) -> np.ndarray:
  """int [T]: for each context token, the window where it has max context.

  Same scores and tie-breaking as Google's `_check_is_max_context` (strict `>` keeps the
  earliest window), for all tokens at once.
  """
  best_score = np.full(num_tokens, -np.inf)
  best = np.full(num_tokens, -1)
  for index, (start, length) in enumerate(spans):
    position = np.arange(start, start + length)
    end = start + length - 1
    score = np.minimum(position - start, end - position) + 0.01 * length
    better = score > best_score[start:start + length]
    best_score[start:start + length][better] = score[better]
    best[start:start + length][better] = index
  return best


def convert_examples_to_features(examples: Sequence[SquadExample],
                                 tokenizer: WordPieceTokenizer,
                                 config: FeatureConfig = FeatureConfig(),
                                 is_training: bool = False,
                                 log_every: int = 1000) -> ConvertedFeatures:
  """All windows of all examples (Google's `convert_examples_to_features`).

  Args:
    examples: from `squad_data.read_squad_file`.
    tokenizer: the WordPieceTokenizer of the checkpoint's vocab and casing.
    config: windowing hyperparameters.
    is_training: if True, set `start_position` / `end_position` / `is_impossible`
      from each example's first answer.
    log_every: log progress every this many examples (0: never).

  Returns:
    ConvertedFeatures; `unique_id`s run from FIRST_UNIQUE_ID in order.
  """
  index_of = {text: i for i, text in enumerate(dict.fromkeys(
      e.context_text for e in examples))}  # Each paragraph is tokenized once.
  contexts = tokenize_contexts(tokenizer, list(index_of))
  queries = _tokenize_queries(tokenizer, [e.question_text for e in examples],
                              config.max_query_length)
  features, skipped = [], []
  for index, example in enumerate(examples):
    tokens = contexts[index_of[example.context_text]]
    answer = None
    if is_training and not example.is_impossible:
      gold = example.answers[0]
      answer = answer_token_span(tokens, gold.answer_start, gold.answer_end)
      if answer is None:
        skipped.append(SkippedExample(example.qas_id, "answers[0]",
                                      f"answer {gold.text!r} covers no wordpiece"))
        logging.warning("Skipping %s: %s", example.qas_id, skipped[-1].reason)
        continue
    labels = (answer, example.is_impossible) if is_training else None
    features.extend(_example_features(index, queries[index], tokens, labels, config,
                                      tokenizer, FIRST_UNIQUE_ID + len(features)))
    if log_every and (index + 1) % log_every == 0:
      logging.info("SQuAD features: %d of %d examples, %d features", index + 1,
                   len(examples), len(features))
  logging.info("SQuAD features: %d examples -> %d features (%d skipped)", len(examples),
               len(features), len(skipped))
  return ConvertedFeatures(features, skipped)


def _tokenize_queries(tokenizer, questions, max_query_length):
  result = []
  for i in range(0, len(questions), _BATCH):
    ids = tokenizer.tokenize(tf.constant(list(questions[i:i + _BATCH]))).to_list()
    result.extend(row[:max_query_length] for row in ids)
  return result


def _example_features(example_index, query_ids, tokens, labels, config, tokenizer,
                      first_unique_id):
  """The SquadFeatures of one example's windows; labels: None or (answer, impossible)."""
  num_tokens = len(tokens.ids)
  # The 3 is for [CLS], [SEP] and [SEP].
  spans = doc_spans(num_tokens, config.max_seq_length - len(query_ids) - 3,
                    config.doc_stride)
  best = max_context_windows(spans, num_tokens)
  prefix = [tokenizer.cls_id, *query_ids, tokenizer.sep_id]
  offset = len(prefix)  # Sequence position of the window's first context token.
  features = []
  for span_index, (start, length) in enumerate(spans):
    seq = _empty_window(config.max_seq_length)
    doc, ctx = slice(start, start + length), slice(offset, offset + length)
    seq["input_ids"][:offset] = prefix
    seq["input_ids"][ctx] = tokens.ids[doc]
    seq["input_ids"][offset + length] = tokenizer.sep_id
    seq["input_mask"][:offset + length + 1] = 1
    seq["segment_ids"][offset:offset + length + 1] = 1
    seq["token_start_chars"][ctx] = tokens.start_chars[doc]
    seq["token_end_chars"][ctx] = tokens.end_chars[doc]
    seq["token_is_max_context"][ctx] = best[doc] == span_index
    positions = {}
    if labels is not None:
      answer, impossible = labels
      start_position, end_position = _window_labels(answer, start, length, offset)
      positions = dict(start_position=start_position, end_position=end_position,
                       is_impossible=impossible)
    features.append(SquadFeature(first_unique_id + span_index, example_index, span_index,
                                 **seq, **positions))
  return features


def _empty_window(seq_length):
  zeros = {k: np.zeros(seq_length, np.int32)
           for k in ("input_ids", "input_mask", "segment_ids", "token_is_max_context")}
  return {**zeros, "token_start_chars": np.full(seq_length, NO_CHAR, np.int32),
          "token_end_chars": np.full(seq_length, NO_CHAR, np.int32)}


def _window_labels(answer, start, length, offset):
  """Google's labels: positions in the sequence, (0, 0) if unanswerable or not inside."""
  if answer is None:
    return 0, 0
  first, last = answer
  if first < start or last > start + length - 1:
    return 0, 0
  return first - start + offset, last - start + offset


# TFRecords. Google's names (run_squad.py FeatureWriter) for what the model and its loss
# read; the other fields are what postprocessing needs, kept in the same records.
_RECORD_NAMES = {"unique_id": "unique_ids", "start_position": "start_positions",
                 "end_position": "end_positions"}
_SEQUENCE_FIELDS = ("input_ids", "input_mask", "segment_ids", "token_start_chars",
                    "token_end_chars", "token_is_max_context")
_SCALAR_FIELDS = ("unique_id", "example_index", "doc_span_index")
_TRAINING_FIELDS = ("start_position", "end_position", "is_impossible")


def _fields(is_training):
  """(dataclass field, record name, length or None for a scalar) of each stored value."""
  scalars = _SCALAR_FIELDS + (_TRAINING_FIELDS if is_training else ())
  return ([(f, f, True) for f in _SEQUENCE_FIELDS] +
          [(f, _RECORD_NAMES.get(f, f), False) for f in scalars])


def record_spec(max_seq_length: int, is_training: bool) -> dict[str, tf.io.FixedLenFeature]:
  """`tf.io.parse_example` spec of the records: int64 [S] or [] under record names."""
  return {name: tf.io.FixedLenFeature([max_seq_length] if seq else [], tf.int64)
          for _, name, seq in _fields(is_training)}


def write_features(path: str, features: Sequence[SquadFeature], is_training: bool) -> None:
  """Writes one `tf.train.Example` per feature (int64 lists, Google's feature names)."""
  with tf.io.TFRecordWriter(path) as writer:
    for feature in features:
      values = {name: np.atleast_1d(getattr(feature, field)).astype(np.int64)
                for field, name, _ in _fields(is_training)}
      example = tf.train.Example(features=tf.train.Features(feature={
          name: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
          for name, v in values.items()}))
      writer.write(example.SerializeToString())


def read_features(path: str, max_seq_length: int, is_training: bool) -> list[SquadFeature]:
  """Reads what `write_features` wrote, in file order."""
  spec = record_spec(max_seq_length, is_training)
  dataset = tf.data.TFRecordDataset(path).batch(1024).map(
      lambda records: tf.io.parse_example(records, spec))
  features = []
  for batch in dataset.as_numpy_iterator():
    for row in range(len(batch["unique_ids"])):
      values = {}
      for field, name, seq in _fields(is_training):
        value = batch[name][row]
        values[field] = value.astype(np.int32) if seq else int(value)
      if is_training:
        values["is_impossible"] = bool(values["is_impossible"])
      features.append(SquadFeature(**values))
  return features


def cached_features(cache_prefix: str, examples: Sequence[SquadExample],
                    tokenizer: WordPieceTokenizer, config: FeatureConfig = FeatureConfig(),
                    is_training: bool = False, log_every: int = 1000) -> ConvertedFeatures:
  """`convert_examples_to_features`, cached in `<prefix>.tf_record` + `<prefix>.json`.

  The JSON holds a fingerprint of everything the features depend on (examples, vocab
  file contents, casing, config, is_training) and the skipped examples; the cache is
  used only when the fingerprint matches, and rebuilt otherwise.
  """
  record_path, meta_path = cache_prefix + ".tf_record", cache_prefix + ".json"
  key = _cache_key(examples, tokenizer, config, is_training)
  if files.exists(meta_path) and files.exists(record_path):
    with files.open_file(meta_path) as f:
      meta = json.load(f)
    if meta.get("key") == key:
      features = read_features(record_path, config.max_seq_length, is_training)
      if len(features) == meta["num_features"]:
        logging.info("Read %d cached SQuAD features from %s", len(features), record_path)
        return ConvertedFeatures(features, [SkippedExample(**s) for s in meta["skipped"]])
    files.remove(meta_path)  # Stale: gone before the records change, so never half-valid.
  converted = convert_examples_to_features(examples, tokenizer, config, is_training,
                                           log_every)
  atomic.write_with(record_path,
                    lambda path: write_features(path, converted.features, is_training))
  atomic.write_text(meta_path, json.dumps(  # Last: marks the records complete.
      {"key": key, "num_features": len(converted.features),
       "skipped": [dataclasses.asdict(s) for s in converted.skipped]}, indent=1))
  return converted


def _cache_key(examples, tokenizer, config, is_training):
  digest = hashlib.sha256()
  for e in examples:
    digest.update(json.dumps([e.qas_id, e.question_text, e.context_text, e.is_impossible,
                              [dataclasses.astuple(a) for a in e.answers]]).encode())
  with files.open_file(tokenizer.vocab_file, "rb") as f:
    vocab = hashlib.sha256(f.read()).hexdigest()
  return {"examples_sha256": digest.hexdigest(), "vocab_sha256": vocab,
          "do_lower_case": tokenizer.do_lower_case,
          "max_chars_per_word": tokenizer.max_chars_per_word,
          "config": dataclasses.asdict(config), "is_training": is_training}
