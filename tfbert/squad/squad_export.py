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
* SQuAD v2.0 (`version_2_with_negative`): `answer_question` also returns float32
  `null_score` [B], `start_logits[:, 0] + end_logits[:, 0]` (the [CLS] position), and
  answers "" when `null_score - score > null_score_diff_threshold`: the rule and the score
  definition of `tfbert.squad.squad_postprocess` (the null score of a question is its
  windows' smallest; here there is one window), evaluated as it does (float64, in its
  order of operations), so on the same logits both decide alike even at the threshold.
  `score` stays the best span's score, so a client sees how close the decision was. A v1.1
  export has no `null_score` output and never answers "": its [CLS] logits were not
  trained to mean "no answer", and its outputs are those of exports before v2.0 support.

Both signatures validate their inputs in the graph before any tokenizer op or gather
runs (`tfbert.serving.export.validate_texts`, `validate_features`): a `question` and `context` of
different batch sizes fail with `tf.errors.InvalidArgumentError` "answer_question:
context has batch size 1 but question has 2", bad features as `tfbert.serving.export` describes.

The directory is laid out as `tfbert.serving.export`'s (`bert_config.json`, `assets/<vocab>`,
nothing read at load time) and replaced atomically. Beside `bert_config.json`,
`answer_question.json` tells a deployer what `answer_question` does: its window sizes, the
version, the null-score threshold baked into the graph (null in v1.1) and the rule, e.g.
`{"do_lower_case": true, "doc_stride": 128, "max_answer_length": 30, "max_query_length": 64,
"max_seq_length": 384, "null_score_diff_threshold": -1.5, "rule": "...", "signature":
"answer_question", "version_2_with_negative": true}`. The graph does not read it: changing
the threshold means exporting again. `tfbert.load(export_dir).answer` reads it: with the
run's `doc_stride` (null when the exporter did not know it) it windows a long context
through the id signature as the run's model does (`tfbert.inference.exported`).

Shape legend: B batch, S sequence.
"""

import json
import math
import os
from typing import Any, Optional

import tensorflow as tf

from tfbert.models import BertSpanLabeler
from tfbert.runtime import files
from tfbert.serving import export, serving_dtype
from tfbert.text import inputs, tokenization

SQUAD_TEXT_SIGNATURE = "answer_question"
SPAN_OUTPUT_NAMES = export.SPAN_OUTPUT_NAMES
ANSWER_CONFIG_FILE = "answer_question.json"  # Beside bert_config.json: see the module doc.


class SquadExport(export.TaskExport):
  """What a SQuAD SavedModel holds: the span labeler, its tokenizer, two signatures.

  Attributes (besides `TaskExport`'s):
    do_lower_case: the vocabulary's casing (recorded for `answer_question.json`).
    doc_stride: the run's window stride over a long context (None: unknown); the signature
      reads one window, `tfbert.load(export).answer` windows with it.
    version_2_with_negative: whether `answer_question` may answer "" (SQuAD v2.0).
    null_score_diff_threshold: v2.0: "" when null score - best span score exceeds it.
    answer_question: `tf.function` behind the raw-text signature.
  """

  def __init__(self, model: BertSpanLabeler, vocab_file: str, do_lower_case: bool,
               max_seq_length: int, max_query_length: int, max_answer_length: int,
               version_2_with_negative: bool = False, null_score_diff_threshold: float = 0.0,
               name: Optional[str] = None, frozen: bool = True,
               doc_stride: Optional[int] = None):
    super().__init__(model, vocab_file, do_lower_case, max_seq_length, name=name,
                     frozen=frozen)
    self.do_lower_case = bool(do_lower_case)
    self.doc_stride = doc_stride
    self.max_query_length = max_query_length
    self.max_answer_length = max_answer_length
    self.version_2_with_negative = bool(version_2_with_negative)
    self.null_score_diff_threshold = float(null_score_diff_threshold)
    self.answer_question = tf.function(self._answer_question, autograph=False, input_signature=[
        tf.TensorSpec([None], tf.string, name="question"),
        tf.TensorSpec([None], tf.string, name="context")])

  def signatures(self) -> dict[str, tf.types.experimental.PolymorphicFunction]:
    """The signatures to save, by name."""
    return {**export.id_signatures(self),
            SQUAD_TEXT_SIGNATURE: self.answer_question}

  def _answer_question(self, question, context):
    texts = export.validate_texts(SQUAD_TEXT_SIGNATURE,  # Before any tokenizer op.
                                  {"question": question, "context": context})
    question, context = texts["question"], texts["context"]
    features, first, count, byte_starts, byte_ends = pack_question_context(
        self.tokenizer, question, context, self.max_seq_length, self.max_query_length)
    features = export.validate_features(SQUAD_TEXT_SIGNATURE, features, self.model.config,
                                        packed_from="question, context")
    logits = self._text_outputs(features, pad=False)  # [B, L]: spans within the bucket.
    start, end, score = best_spans(logits["start_logits"], logits["end_logits"], first,
                                   count, self.max_answer_length)
    found = count > 0  # Then a one-wordpiece span is valid.
    # Clipped: a row without context has start = end = 0 < first.
    begin = tf.gather(byte_starts, tf.maximum(start - first, 0), batch_dims=1)    # [B]
    length = tf.gather(byte_ends, tf.maximum(end - first, 0), batch_dims=1) - begin
    answer = tf.strings.substr(context, tf.where(found, begin, 0),
                               tf.where(found, length, 0), unit="BYTE")
    if not self.version_2_with_negative:
      return {"answer": answer, "score": score}
    # float64, as squad_postprocess's Python floats: (s0 + e0) - start_logit - end_logit in
    # its order, so a difference near the threshold is decided as the predictions decide it.
    start_logits, end_logits = (tf.cast(logits[k], tf.float64) for k in SPAN_OUTPUT_NAMES)
    null_score = start_logits[:, 0] + end_logits[:, 0]                              # [B]
    diff = (null_score - tf.gather(start_logits, start, batch_dims=1)
            - tf.gather(end_logits, end, batch_dims=1))                             # [B]
    # No span at all: "" (squad_postprocess's difference is then +inf).
    null_wins = ~found | (diff > self.null_score_diff_threshold)
    return {"answer": tf.where(null_wins, "", answer), "score": score,
            "null_score": tf.cast(null_score, tf.float32)}

  def answer_config(self) -> dict[str, Any]:
    """What `answer_question` does, as `answer_question.json` records it (module doc)."""
    if self.version_2_with_negative:
      rule = ("answer is \"\" when null_score - score > null_score_diff_threshold; "
              "null_score = start_logit + end_logit of [CLS] (position 0), score = "
              "start_logit + end_logit of the best span")
    else:
      rule = "answer is the best span (SQuAD v1.1: never \"\" unless the context is empty)"
    return {"signature": SQUAD_TEXT_SIGNATURE,
            "version_2_with_negative": self.version_2_with_negative,
            "null_score_diff_threshold": (self.null_score_diff_threshold
                                          if self.version_2_with_negative else None),
            "rule": rule, "max_seq_length": self.max_seq_length,
            "max_query_length": self.max_query_length,
            "max_answer_length": self.max_answer_length,
            # What tfbert.load(export).answer windows a long context with, as the run's
            # model does (`tfbert.inference.exported`); the signature reads one window.
            "doc_stride": self.doc_stride, "do_lower_case": self.do_lower_case}


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
  count = tf.minimum(ids.row_lengths(), budget)                       # [B] context kept
  # Core ops only, no tensorflow-text packing op: see `tfbert.text.inputs`.
  features = inputs.combine_and_pad([query, ids], [query.row_lengths(), count],
                                    max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
  kept = tf.range(max_seq_length - 3, dtype=count.dtype) < count[:, None]  # [B, S - 3]
  spans = [tf.where(kept, x.to_tensor(default_value=-1, shape=[None, max_seq_length - 3]), -1)
           for x in (starts, ends)]
  return (features, tf.cast(query.row_lengths(), tf.int32) + 2, tf.cast(count, tf.int32),
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
                             max_query_length: int = 64, max_answer_length: int = 30, *,
                             version_2_with_negative: bool = False,
                             null_score_diff_threshold: float = 0.0,
                             export_dtype: str = "model",
                             doc_stride: Optional[int] = None) -> str:
  """Writes a `BertSpanLabeler` as a SavedModel, replacing `export_dir` atomically.

  Args:
    model: the fine-tuned `BertSpanLabeler`.
    export_dir: local directory or URL (`gs://...`) to create or replace.
    vocab_file: its WordPiece vocab (copied into `assets/`).
    do_lower_case: the vocab's casing.
    max_seq_length: S of `answer_question`'s window; at most `max_position_embeddings`.
    max_query_length: question wordpieces kept.
    max_answer_length: longest answer in wordpieces.
    version_2_with_negative: SQuAD v2.0: `answer_question` also returns `null_score` and
      may answer "" (see the module docstring).
    null_score_diff_threshold: v2.0: answer "" when null score - best span score exceeds
      it (ignored in v1.1); recorded in `answer_question.json`.
    export_dtype: "model" (its policy), "float32", "bfloat16" or "auto" (the faster on this
      CPU); see `tfbert.serving.serving_dtype`. Recorded in `serving.json`.
    doc_stride: the window stride of the model's run (`squad_features`), recorded in
      `answer_question.json`: `tfbert.load(export_dir).answer` then windows a long context
      as the run's model does (the signature reads one window). None: not recorded, and
      that `answer` reads one window, warning when a context is cut.

  Returns:
    `export_dir`.

  Raises:
    TypeError: if `model` is not a `BertSpanLabeler`.
    ValueError: if the window does not fit the model or leaves no room for the context, or
      the threshold is NaN.
  """
  if not isinstance(model, BertSpanLabeler):
    raise TypeError(f"expected a BertSpanLabeler, got {type(model).__name__}")
  export.check_seq_length(model, max_seq_length)
  if max_seq_length <= max_query_length + 3:
    raise ValueError(f"max_seq_length ({max_seq_length}) must be greater than "
                     f"max_query_length ({max_query_length}) + 3")
  if math.isnan(null_score_diff_threshold):  # Every comparison with NaN is False: never "".
    raise ValueError("null_score_diff_threshold is NaN")
  # A longer stride than the window is cut to it (`squad_features`), as the model's does.
  if doc_stride is not None and not (isinstance(doc_stride, int) and doc_stride >= 1):
    raise ValueError(f"doc_stride ({doc_stride!r}) must be an int >= 1")
  model, serving = serving_dtype.for_serving(model, export_dtype)
  module = SquadExport(model, vocab_file, do_lower_case, max_seq_length, max_query_length,
                       max_answer_length, version_2_with_negative, null_score_diff_threshold,
                       doc_stride=doc_stride)

  def write(path):
    export.write_export(module, model.config, path, serving)
    with files.open_file(os.path.join(path, ANSWER_CONFIG_FILE), "w") as f:
      f.write(json.dumps(module.answer_config(), indent=2, sort_keys=True) + "\n")

  export.save_atomically(write, export_dir)  # The whole directory appears at once.
  return export_dir
