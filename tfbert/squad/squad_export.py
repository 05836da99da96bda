"""Exports a fine-tuned `BertSpanLabeler` as a self-describing SQuAD SavedModel.

`export_squad_saved_model` exports a `BertSpanLabeler` (module `SquadExport`):

* `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, S] ->
  float32 `start_logits`, `end_logits` [B, S].
* `answer_question`: tf.string `question`, `context` [B] -> tf.string `answer`
  and float32 `score` [B]. In one window, as the first window of
  `tfbert.squad.squad_features`: `[CLS] question [SEP] context [SEP]`, the question
  cut to `max_query_length` wordpieces and the context to what fits in
  `max_seq_length`. The answer is the best span over ALL valid spans (start
  and end in the context, end >= start, at most `max_answer_length`
  wordpieces), scored `start_logit + end_logit` as in google-research/bert,
  and cut out of the original context with the tokenizer's byte offsets. A
  context without tokens gives "" with score -inf.

Both signatures validate their inputs in the graph before any tokenizer op or gather
runs (`tfbert.serving.export.validate_texts`, `validate_features`): a `question` and `context` of
different batch sizes fail with `tf.errors.InvalidArgumentError` "answer_question:
context has batch size 1 but question has 2", bad features as `tfbert.serving.export` describes.

The directory is laid out as `tfbert.serving.export`'s (`bert_config.json`, `assets/<vocab>`,
nothing read at load time) and replaced atomically.

Shape legend: B batch, S sequence.
"""

from typing import Optional

import tensorflow as tf
import tensorflow_text as tf_text

from tfbert.models import BertSpanLabeler
from tfbert.serving import export
from tfbert.text import tokenization

SQUAD_TEXT_SIGNATURE = "answer_question"
SPAN_OUTPUT_NAMES = ("start_logits", "end_logits")


class SquadExport(export.TaskExport):
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
    return {export.SERVING_SIGNATURE: self.serve.get_concrete_function(),
            SQUAD_TEXT_SIGNATURE: self.answer_question.get_concrete_function()}

  def _outputs(self, features):
    """float32 `start_logits`, `end_logits` [B, S]."""
    outputs = self.model(features, training=False)
    return {k: tf.cast(outputs[k], tf.float32) for k in SPAN_OUTPUT_NAMES}

  def _answer_question(self, question, context):
    texts = export.validate_texts(SQUAD_TEXT_SIGNATURE,  # Before any tokenizer op.
                                  {"question": question, "context": context})
    question, context = texts["question"], texts["context"]
    features, first, count, byte_starts, byte_ends = pack_question_context(
        self.tokenizer, question, context, self.max_seq_length, self.max_query_length)
    features = export.validate_features(SQUAD_TEXT_SIGNATURE, features, self.model.config,
                                        packed_from="question, context")
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
  fits (the first window of `tfbert.squad.squad_features`).

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
  export.check_seq_length(model, max_seq_length)
  if max_seq_length <= max_query_length + 3:
    raise ValueError(f"max_seq_length ({max_seq_length}) must be greater than "
                     f"max_query_length ({max_query_length}) + 3")
  module = SquadExport(model, vocab_file, do_lower_case, max_seq_length, max_query_length,
                       max_answer_length)
  export.save_atomically(lambda path: export.write_export(module, model.config, path), export_dir)
  return export_dir
