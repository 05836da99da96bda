"""Exports a tfbert encoder as a self-describing, relocatable TF SavedModel.

The SavedModel holds an `EncoderExport` module (the encoder, plus an optional
`TextPreprocessor`) and these signatures:

* `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, S] ->
  float32 `sequence_output` [B, S, H] and `pooled_output` [B, H].
* `encode_text` (only with a vocab): tf.string `text` [B] -> the same two
  outputs plus the int32 `input_mask` [B, S] of the packed `[CLS] text [SEP]`
  inputs (S = `seq_length`), tokenized in the graph by `WordPieceTokenizer`.

Outputs are float32 whatever the model's dtype policy: a `mixed_bfloat16`
encoder computes in bfloat16 and the signature casts its results, so clients
never see bfloat16.

The export directory explains itself: `bert_config.json` beside
`saved_model.pb`, and with a vocab, `assets/<vocab file name>`. Nothing in the
graph reads a file at load time (the tokenizer's tables are constants), so the
directory can be moved or copied anywhere; the vocab asset is for people and
for tools that want the id -> token table.

Task SavedModels (SQuAD here, the classifier in `tfbert.classifier_export`)
subclass `TaskExport`, which holds the model, the vocab asset, the tokenizer and
`serving_default`, and add their raw-text signature; `_save_atomically` and
`_write_export` are shared.

`export_squad_saved_model` exports a `BertSpanLabeler` (module `SquadExport`):

* `serving_default`: the same int32 features -> float32 `start_logits`,
  `end_logits` [B, S].
* `answer_question`: tf.string `question`, `context` [B] -> tf.string `answer`
  and float32 `score` [B]. In one window, as the first window of
  `tfbert.squad_features`: `[CLS] question [SEP] context [SEP]`, the question
  cut to `max_query_length` wordpieces and the context to what fits in
  `max_seq_length`. The answer is the best span over ALL valid spans (start
  and end in the context, end >= start, at most `max_answer_length`
  wordpieces), scored `start_logit + end_logit` as in google-research/bert,
  and cut out of the original context with the tokenizer's byte offsets. A
  context without tokens gives "" with score -inf.

Shape legend: B batch, S sequence, H hidden.
"""

import os
import shutil
import uuid
from typing import Callable, Optional

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from tfbert import inputs, tokenization
from tfbert.encoder import BertEncoder
from tfbert.models import BertSpanLabeler

SERVING_SIGNATURE = "serving_default"
TEXT_SIGNATURE = "encode_text"
SQUAD_TEXT_SIGNATURE = "answer_question"
CONFIG_FILE = "bert_config.json"
# google-research/bert's feature names; also the signature's input names.
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
OUTPUT_NAMES = ("sequence_output", "pooled_output")
SPAN_OUTPUT_NAMES = ("start_logits", "end_logits")


class TextPreprocessor(tf.Module):
  """Raw text -> BERT input features, in the graph; the vocab travels as an asset.

  Attributes:
    vocab: `tf.saved_model.Asset` of the vocab file (copied into `assets/`).
    tokenizer: the `tokenization.WordPieceTokenizer`.
    seq_length: S of the packed features.
  """

  def __init__(self, vocab_file: str, do_lower_case: bool, seq_length: int,
               name: Optional[str] = None):
    """Builds the tokenizer (a few seconds the first time per casing).

    Args:
      vocab_file: path of the WordPiece vocab.
      do_lower_case: True for uncased vocabs.
      seq_length: S, including [CLS] and [SEP]; longer texts are truncated.
      name: optional `tf.Module` name.
    """
    super().__init__(name=name)
    self.vocab = tf.saved_model.Asset(vocab_file)
    self.tokenizer = tokenization.WordPieceTokenizer(vocab_file, do_lower_case)
    self.seq_length = seq_length

  def __call__(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
    """Tokenizes and packs one segment per text.

    Args:
      text: tf.string Tensor [B].

    Returns:
      dict of int32 `input_ids`, `input_mask`, `segment_ids` [B, S].
    """
    ids = self.tokenizer.tokenize(text)  # [B, (T)]
    return inputs.pack_inputs([ids], self.seq_length, self.tokenizer.cls_id,
                              self.tokenizer.sep_id)


class EncoderExport(tf.Module):
  """What the SavedModel holds: the encoder and, optionally, a preprocessor.

  Attributes:
    encoder: the `BertEncoder` (its variables are the SavedModel's).
    preprocessor: a `TextPreprocessor` or None.
    serve: `tf.function` behind `serving_default`.
    encode_text: `tf.function` behind `encode_text` (only with a preprocessor).
  """

  def __init__(self, encoder: BertEncoder,
               preprocessor: Optional[TextPreprocessor] = None,
               name: Optional[str] = None):
    super().__init__(name=name)
    self.encoder = encoder
    self.preprocessor = preprocessor
    self.serve = tf.function(self._serve, input_signature=[
        tf.TensorSpec([None, None], tf.int32, name=n) for n in FEATURE_NAMES])
    if preprocessor is not None:
      self.encode_text = tf.function(self._encode_text, input_signature=[
          tf.TensorSpec([None], tf.string, name="text")])

  def signatures(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """The signatures to save, by name."""
    signatures = {SERVING_SIGNATURE: self.serve.get_concrete_function()}
    if self.preprocessor is not None:
      signatures[TEXT_SIGNATURE] = self.encode_text.get_concrete_function()
    return signatures

  def _serve(self, input_ids, input_mask, segment_ids):
    return self._encode({"input_ids": input_ids, "input_mask": input_mask,
                         "segment_ids": segment_ids})

  def _encode_text(self, text):
    features = self.preprocessor(text)
    return {**self._encode(features), "input_mask": features["input_mask"]}

  def _encode(self, features):
    """float32 `sequence_output` [B, S, H] and `pooled_output` [B, H]."""
    outputs = self.encoder(features, training=False)
    return {k: tf.cast(outputs[k], tf.float32) for k in OUTPUT_NAMES}


def encoder_of(encoder_or_model) -> BertEncoder:
  """The `BertEncoder` itself, or the `.encoder` of a tfbert model.

  Raises:
    TypeError: for anything else, naming its type.
  """
  encoder = getattr(encoder_or_model, "encoder", encoder_or_model)
  if not isinstance(encoder, BertEncoder):
    raise TypeError("expected a BertEncoder or a tfbert model with .encoder, got "
                    f"{type(encoder_or_model).__name__}")
  return encoder


def export_encoder_saved_model(encoder_or_model, export_dir: str, *,
                               vocab_file: Optional[str] = None,
                               do_lower_case: bool = True,
                               seq_length: int = 128) -> str:
  """Writes the encoder as a SavedModel, replacing `export_dir` atomically.

  Args:
    encoder_or_model: a `BertEncoder` or a tfbert model with `.encoder` (only
      the encoder is exported; heads are not).
    export_dir: local directory to create or replace.
    vocab_file: WordPiece vocab; when given, adds the `encode_text` signature
      and copies the vocab into `assets/`.
    do_lower_case: the vocab's casing (True for uncased vocabs).
    seq_length: S of `encode_text`'s packed inputs; at most
      `max_position_embeddings`.

  Returns:
    `export_dir`.

  Raises:
    TypeError: see `encoder_of`.
    ValueError: if `seq_length` exceeds `max_position_embeddings`, or
      `export_dir` is a URL (see `_save_atomically`).
  """
  encoder = encoder_of(encoder_or_model)
  preprocessor = None
  if vocab_file is not None:
    limit = encoder.config.max_position_embeddings
    if seq_length > limit:
      raise ValueError(f"seq_length {seq_length} exceeds max_position_embeddings {limit}")
    preprocessor = TextPreprocessor(vocab_file, do_lower_case, seq_length)
  module = EncoderExport(encoder, preprocessor)
  _save_atomically(lambda path: _write_export(module, encoder.config, path), export_dir)
  return export_dir


class TaskExport(tf.Module):
  """The part every task SavedModel shares: model, vocab asset, tokenizer, `serving_default`.

  Subclasses define `_outputs(features)` (float32 outputs of the int32 features) and
  `signatures()`, adding their raw-text signature.

  Attributes:
    model: the Keras model (its variables are the SavedModel's).
    vocab: `tf.saved_model.Asset` of the vocab file (copied into `assets/`).
    tokenizer: the `tokenization.WordPieceTokenizer`.
    max_seq_length: S of the raw-text signature.
    serve: `tf.function` behind `serving_default` (int32 [B, S] features).
  """

  def __init__(self, model: keras.Model, vocab_file: str, do_lower_case: bool,
               max_seq_length: int, name: Optional[str] = None):
    super().__init__(name=name)
    self.model = model
    self.vocab = tf.saved_model.Asset(vocab_file)
    self.tokenizer = tokenization.WordPieceTokenizer(vocab_file, do_lower_case)
    self.max_seq_length = max_seq_length
    self.serve = tf.function(self._serve, input_signature=[
        tf.TensorSpec([None, None], tf.int32, name=n) for n in FEATURE_NAMES])

  def _serve(self, input_ids, input_mask, segment_ids):
    return self._outputs({"input_ids": input_ids, "input_mask": input_mask,
                          "segment_ids": segment_ids})

  def _outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    raise NotImplementedError


def check_seq_length(model: keras.Model, max_seq_length: int) -> None:
  """Raises ValueError when S exceeds the model's `max_position_embeddings`."""
  limit = model.config.max_position_embeddings
  if max_seq_length > limit:
    raise ValueError(f"max_seq_length {max_seq_length} exceeds max_position_embeddings {limit}")


class SquadExport(TaskExport):
  """What a SQuAD SavedModel holds: the span labeler, its tokenizer, two signatures.

  Attributes (besides `TaskExport`'s):
    answer_question: `tf.function` behind the raw-text signature.
  """

  def __init__(self, model: BertSpanLabeler, vocab_file: str, do_lower_case: bool,
               max_seq_length: int, max_query_length: int, max_answer_length: int,
               name: Optional[str] = None):
    super().__init__(model, vocab_file, do_lower_case, max_seq_length, name=name)
    self.max_query_length = max_query_length
    self.max_answer_length = max_answer_length
    self.answer_question = tf.function(self._answer_question, input_signature=[
        tf.TensorSpec([None], tf.string, name="question"),
        tf.TensorSpec([None], tf.string, name="context")])

  def signatures(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """The signatures to save, by name."""
    return {SERVING_SIGNATURE: self.serve.get_concrete_function(),
            SQUAD_TEXT_SIGNATURE: self.answer_question.get_concrete_function()}

  def _outputs(self, features):
    """float32 `start_logits`, `end_logits` [B, S]."""
    outputs = self.model(features, training=False)
    return {k: tf.cast(outputs[k], tf.float32) for k in SPAN_OUTPUT_NAMES}

  def _answer_question(self, question, context):
    features, first, count, byte_starts, byte_ends = pack_question_context(
        self.tokenizer, question, context, self.max_seq_length, self.max_query_length)
    logits = self._outputs(features)
    start, end, score = best_spans(logits["start_logits"], logits["end_logits"], first,
                                   count, self.max_answer_length)
    found = count > 0  # Then a one-wordpiece span is valid.
    # Clipped: a row without context has start = end = 0 < first.
    begin = tf.gather(byte_starts, tf.maximum(start - first, 0), batch_dims=1)    # [B]
    length = tf.gather(byte_ends, tf.maximum(end - first, 0), batch_dims=1) - begin
    answer = tf.strings.substr(context, tf.where(found, begin, 0),
                               tf.where(found, length, 0), unit="BYTE")
    return {"answer": answer, "score": score}


def pack_question_context(tokenizer: tokenization.WordPieceTokenizer, question: tf.Tensor,
                          context: tf.Tensor, max_seq_length: int, max_query_length: int):
  """`[CLS] question [SEP] context [SEP]` in one window, with the context's byte spans.

  The question keeps its first `max_query_length` wordpieces and the context what then
  fits (the first window of `tfbert.squad_features`).

  Args:
    tokenizer: the `WordPieceTokenizer`.
    question, context: tf.string [B].
    max_seq_length: S.
    max_query_length: wordpieces kept of the question.

  Returns:
    (features, first, count, byte_starts, byte_ends): dict of int32 features [B, S];
    int32 `first` [B], the position of the first context token, and `count` [B], the
    context tokens kept; int64 `byte_starts`, `byte_ends` [B, S - 3], the byte span in
    `context` of context token t (-1 past `count`).
  """
  query = tokenizer.tokenize(question)[:, :max_query_length]          # [B, (Q)]
  ids, starts, ends = tokenizer.tokenize_with_offsets(context)        # [B, (T)]
  budget = max_seq_length - 3 - query.row_lengths()                   # [B]
  keep = tf.ragged.range(ids.row_lengths()) < tf.expand_dims(budget, 1)
  ids, starts, ends = (tf.ragged.boolean_mask(x, keep) for x in (ids, starts, ends))
  sequence, segments = tf_text.combine_segments(
      [query, ids], start_of_sequence_id=tokenizer.cls_id, end_of_segment_id=tokenizer.sep_id)
  input_ids, input_mask = tf_text.pad_model_inputs(sequence, max_seq_length)
  segment_ids, _ = tf_text.pad_model_inputs(segments, max_seq_length)
  features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
  spans = [x.to_tensor(default_value=-1, shape=[None, max_seq_length - 3])
           for x in (starts, ends)]
  return ({k: tf.cast(v, tf.int32) for k, v in features.items()},
          tf.cast(query.row_lengths(), tf.int32) + 2, tf.cast(ids.row_lengths(), tf.int32),
          *spans)


def best_spans(start_logits: tf.Tensor, end_logits: tf.Tensor, first: tf.Tensor,
               count: tf.Tensor, max_answer_length: int):
  """The best valid span of each row, over all spans (not only n-best starts and ends).

  Args:
    start_logits, end_logits: float32 [B, S].
    first, count: int32 [B]; the context is at positions `first .. first + count - 1`.
    max_answer_length: longest answer in wordpieces.

  Returns:
    (start, end, score): int32 [B] positions and float32 [B] `start_logit + end_logit`;
    ties go to the earliest start, then end; a row without valid span has score -inf.
  """
  seq_length = tf.shape(start_logits)[1]
  position = tf.range(seq_length)                                      # [S]
  in_context = ((position >= first[:, None]) &
                (position < (first + count)[:, None]))                 # [B, S]
  length = position[None, :] - position[:, None] + 1                   # [S, S] end - start + 1
  valid = (in_context[:, :, None] & in_context[:, None, :] &
           ((length >= 1) & (length <= max_answer_length))[None])      # [B, S, S]
  scores = tf.where(valid, start_logits[:, :, None] + end_logits[:, None, :],
                    float("-inf"))
  flat = tf.reshape(scores, [-1, seq_length * seq_length])             # [B, S * S]
  best = tf.argmax(flat, axis=1, output_type=tf.int32)
  return best // seq_length, best % seq_length, tf.reduce_max(flat, axis=1)


def export_squad_saved_model(model: BertSpanLabeler, export_dir: str, vocab_file: str,
                             do_lower_case: bool, max_seq_length: int = 384,
                             max_query_length: int = 64, max_answer_length: int = 30) -> str:
  """Writes a `BertSpanLabeler` as a SavedModel, replacing `export_dir` atomically.

  Args:
    model: the fine-tuned `BertSpanLabeler`.
    export_dir: local directory to create or replace.
    vocab_file: its WordPiece vocab (copied into `assets/`).
    do_lower_case: the vocab's casing.
    max_seq_length: S of `answer_question`'s window; at most `max_position_embeddings`.
    max_query_length: question wordpieces kept.
    max_answer_length: longest answer in wordpieces.

  Returns:
    `export_dir`.

  Raises:
    TypeError: if `model` is not a `BertSpanLabeler`.
    ValueError: if the window does not fit the model or leaves no room for the context.
  """
  if not isinstance(model, BertSpanLabeler):
    raise TypeError(f"expected a BertSpanLabeler, got {type(model).__name__}")
  check_seq_length(model, max_seq_length)
  if max_seq_length <= max_query_length + 3:
    raise ValueError(f"max_seq_length ({max_seq_length}) must be greater than "
                     f"max_query_length ({max_query_length}) + 3")
  module = SquadExport(model, vocab_file, do_lower_case, max_seq_length, max_query_length,
                       max_answer_length)
  _save_atomically(lambda path: _write_export(module, model.config, path), export_dir)
  return export_dir


def _write_export(module: tf.Module, config, path: str) -> None:
  """Saves `module` with its signatures and `bert_config.json` into `path`."""
  tf.saved_model.save(module, path, signatures=module.signatures())
  config.to_json_file(os.path.join(path, CONFIG_FILE))


def _save_atomically(write: Callable[[str], None], export_dir: str) -> None:
  """Runs `write(tmp)` into a fresh sibling directory, then renames it into place.

  Readers see either the old export or the complete new one, never a partial
  one: `write` fills a temporary sibling (same filesystem, so renames are
  atomic), and only then does the old directory move aside and the new one
  move in. POSIX cannot rename a directory onto a non-empty one, so there is
  a window of two renames in which `export_dir` is absent; if the second
  rename fails, the old export is moved back. On any error the temporary
  directory is removed and the old export is left as it was.

  Args:
    write: fills the directory it is given.
    export_dir: local directory to create or replace.

  Raises:
    ValueError: for a URL such as `gs://...`, where renames are copies.
  """
  if "://" in export_dir:
    raise ValueError(f"export_dir must be a local directory (atomic rename), got {export_dir}")
  export_dir = os.path.abspath(export_dir)
  os.makedirs(os.path.dirname(export_dir), exist_ok=True)
  staging = _new_sibling(export_dir, "tmp")
  try:
    write(staging)
    _swap_into_place(staging, export_dir)
  finally:
    shutil.rmtree(staging, ignore_errors=True)  # Gone already after a swap.


def _swap_into_place(staging: str, export_dir: str) -> None:
  """Renames `staging` to `export_dir`, replacing (then deleting) any old one."""
  if not os.path.exists(export_dir):
    os.rename(staging, export_dir)
    return
  base = os.path.basename(export_dir)
  old = _new_sibling(export_dir, "old")
  os.rename(export_dir, os.path.join(old, base))
  try:
    os.rename(staging, export_dir)
  except BaseException:
    os.rename(os.path.join(old, base), export_dir)
    shutil.rmtree(old, ignore_errors=True)
    raise
  shutil.rmtree(old, ignore_errors=True)


def _new_sibling(export_dir: str, kind: str) -> str:
  """Creates an empty hidden directory beside `export_dir` and returns its path.

  `os.mkdir` honours the umask; `tempfile.mkdtemp` would make it (and thus the
  export) 0700, unreadable to a model server running as another user.
  """
  parent, base = os.path.split(export_dir)
  path = os.path.join(parent, f".{base}.{kind}-{uuid.uuid4().hex}")
  os.mkdir(path)
  return path
