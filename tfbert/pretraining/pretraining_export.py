"""Exports a `BertPretrainer` as a SavedModel that fills the masks of raw text.

The SavedModel holds a `FillMaskExport` module and these signatures:

* the id signatures (`serving_default` and its variants, `tfbert.serving.export`): int32
  `input_ids`, `input_mask`, `segment_ids` [B, S] -> float32 `sequence_output` [B, S, H]
  and `pooled_output` [B, H], the encoder's outputs, as `export_encoder_saved_model` serves.
* `fill_mask`: tf.string `text` [B] and int32 `top_k` [] -> per `[MASK]` of each text, its
  `top_k` most probable wordpieces under the MLM head: `token_ids` int32 [B, M, K],
  `tokens` tf.string [B, M, K], `scores` float32 [B, M, K] (softmax probabilities, best
  first; equal ones in id order) and `num_masks` int32 [B]; M is the most masks of a text
  in the request (padding: id -1, token "", score 0).

`[MASK]` is the literal mask token as typed, whatever the casing: the text between the masks
is tokenized and the mask id put between the pieces, as Hugging Face's fill-mask pipeline
reads `[MASK]` in a BERT tokenizer's input. A text without a `[MASK]`, or whose last
`[MASK]` lies beyond S - 2 wordpieces, fails the request naming it ("fill_mask: text[1] has
no [MASK]"); `top_k` must lie in [1, V]. The same `tf.function` answers
`BertPretrainer.fill_mask` in Python (`tfbert.inference.raw_text.fill_mask`, on the model's
live variables). Inputs are validated as in every tfbert export (`tfbert.serving.export`);
the directory's `ids/` holds the id signatures alone (core TensorFlow ops only).

Shape legend: B texts, S max_seq_length, N pieces of text between masks, T wordpieces, M
masks, K top_k, V vocabulary, H hidden.
"""

from typing import Optional

import tensorflow as tf

from tfbert.models import BertPretrainer
from tfbert.serving import export, serving_dtype
from tfbert.text import inputs, tokenization

TEXT_SIGNATURE = "fill_mask"
MASK = "[MASK]"
# What `served_outputs` reads beyond the id features: the positions to score.
POSITIONS = {"masked_lm_positions": tf.TensorSpec([None, None], tf.int32,
                                                  "masked_lm_positions")}
OUTPUT_NAMES = ("token_ids", "tokens", "scores", "num_masks")


class FillMaskExport(export.TaskExport):
  """What a pretrainer SavedModel holds: the model (encoder and MLM head), its tokenizer and
  its vocabulary's tokens.

  Attributes (besides `export.TaskExport`'s):
    tokens: tf.string constant [V]: each id's vocabulary entry ("" past the file's end).
    fill_mask: `tf.function` behind the raw-text signature.
  """

  def __init__(self, model: BertPretrainer, vocab_file: str, do_lower_case: bool,
               max_seq_length: int, name: Optional[str] = None, frozen: bool = True):
    super().__init__(model, vocab_file, do_lower_case, max_seq_length, name=name,
                     frozen=frozen, extra_inputs=POSITIONS)
    vocab = tokenization.load_vocab(vocab_file)[:model.config.vocab_size]
    self.tokens = tf.constant(vocab + [""] * (model.config.vocab_size - len(vocab)), tf.string)
    self.fill_mask = tf.function(self._fill_mask, autograph=False, input_signature=[
        tf.TensorSpec([None], tf.string, name="text"),
        tf.TensorSpec([], tf.int32, name="top_k")])

  def signatures(self) -> dict[str, tf.types.experimental.PolymorphicFunction]:
    """The signatures to save, by name."""
    return {**export.id_signatures(self),
            TEXT_SIGNATURE: self.fill_mask}

  def _outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The id signatures' outputs: the encoder's (no position to score: P = 0)."""
    none = tf.zeros([tf.shape(features["input_ids"])[0], 0], tf.int32)       # [B, 0]
    outputs = self._outputs_of({**features, "masked_lm_positions": none})
    return {name: outputs[name] for name in export.OUTPUT_NAMES}

  def _fill_mask(self, text, top_k):
    text = export.validate_texts(TEXT_SIGNATURE, {"text": text})["text"]  # Before any op.
    ids, is_mask = self._pieces_and_masks(text)                         # [B, (T)]
    budget = self.max_seq_length - 2
    counts = tf.reduce_sum(tf.cast(is_mask, tf.int32), axis=1)          # [B]
    kept = tf.reduce_sum(tf.cast(is_mask[:, :budget], tf.int32), axis=1)
    top_k = self._checked(text, counts, kept, top_k)
    positions = tf.ragged.boolean_mask(                                 # [B, (M)], + [CLS]
        tf.ragged.range(tf.minimum(ids.row_lengths(), budget)) + 1, is_mask[:, :budget])
    features = inputs.pack_inputs([ids[:, :budget]], self.max_seq_length,
                                  self.tokenizer.cls_id, self.tokenizer.sep_id)
    features = export.validate_features(TEXT_SIGNATURE, features, self.model.config,
                                        packed_from="text")
    features = inputs.cut_to_bucket(features, self.max_seq_length,  # Masks are real tokens.
                                     export.TEXT_LENGTH_BUCKET)
    logits = self._outputs_of({**features, "masked_lm_positions": tf.cast(
        positions.to_tensor(0), tf.int32)})["mlm_logits"]             # [B, M, V]
    scores, token_ids = tf.math.top_k(tf.nn.softmax(logits, axis=-1), k=top_k)  # [B, M, K]
    valid = tf.sequence_mask(counts, tf.shape(logits)[1])[:, :, tf.newaxis]     # [B, M, 1]
    return {"token_ids": tf.where(valid, token_ids, -1),
            "tokens": tf.where(valid, tf.gather(self.tokens, token_ids), ""),
            "scores": tf.where(valid, scores, 0.0),
            "num_masks": counts}

  def _pieces_and_masks(self, text: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """The wordpieces of each text with the mask id at each `[MASK]` ([B, (T)] int32), and
    where the masks are ([B, (T)] bool)."""
    pieces = tf.strings.split(text, MASK)                               # [B, (N)]
    piece_ids = self.tokenizer.tokenize(pieces.flat_values)             # [N, (T)]
    row = pieces.value_rowids()                                         # [N]
    last = tf.range(tf.size(row, out_type=tf.int64)) == tf.gather(pieces.row_limits(), row) - 1
    follows = tf.cast(~last, tf.int64)  # A mask after every piece but a text's last.
    masks = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(follows)], tf.constant(self.tokenizer.mask_id, tf.int32)),
        follows)                                                        # [N, (0 or 1)]
    joined = tf.concat([piece_ids, masks], axis=1)                      # [N, (T + 1)]
    flags = tf.concat([piece_ids.with_flat_values(tf.zeros_like(piece_ids.flat_values, tf.bool)),
                       masks.with_flat_values(tf.ones_like(masks.flat_values, tf.bool))],
                      axis=1)

    def by_text(pieces_of_text):  # [N, (T)] -> [B, (T)], the pieces of a text in turn.
      return tf.RaggedTensor.from_row_splits(pieces_of_text, pieces.row_splits).merge_dims(1, 2)

    return by_text(joined), by_text(flags)

  def _checked(self, text, counts, kept, top_k) -> tf.Tensor:
    """`top_k`, once every text has a `[MASK]` within S - 2 wordpieces and it fits V."""
    budget, vocab_size = self.max_seq_length - 2, self.model.config.vocab_size
    without = tf.concat([tf.where(tf.equal(counts, 0))[:, 0], [-1]], 0)[0]
    beyond = tf.concat([tf.where(kept < counts)[:, 0], [-1]], 0)[0]
    checks = [  # In turn: the first failing one is the one reported.
        lambda: tf.debugging.Assert(tf.equal(without, -1), [tf.strings.format(
            TEXT_SIGNATURE + ": text[{}] has no " + MASK, [without])]),
        lambda: tf.debugging.Assert(tf.equal(beyond, -1), [tf.strings.format(
            TEXT_SIGNATURE + ": text[{}] has a " + MASK + " beyond max_seq_length - 2 = "
            f"{budget} wordpieces", [beyond])]),
        lambda: tf.debugging.Assert((top_k >= 1) & (top_k <= vocab_size), [tf.strings.format(
            TEXT_SIGNATURE + ": top_k is {}, outside [1, " + str(vocab_size) + "]", [top_k])]),
    ]
    done = []
    for check in checks:
      with tf.control_dependencies(done[-1:]):
        done.append(check())
    with tf.control_dependencies(done[-1:]):
      return tf.identity(top_k)


def export_pretrainer_saved_model(model: BertPretrainer, export_dir: str, vocab_file: str,
                                  do_lower_case: bool, max_seq_length: int,
                                  export_dtype: str = "model") -> str:
  """Writes a `BertPretrainer` as a SavedModel with `fill_mask`, replacing `export_dir`
  atomically.

  Args:
    model: the pretrainer (either objective: only the MLM head and the encoder are served).
    export_dir: local directory or URL (`gs://...`) to create or replace.
    vocab_file: its WordPiece vocab (copied into `assets/`).
    do_lower_case: the vocab's casing.
    max_seq_length: S of `fill_mask`; at most `max_position_embeddings`.
    export_dtype: "model" (its policy), "float32", "bfloat16" or "auto"; see
      `tfbert.serving.serving_dtype`. Recorded in `serving.json`.

  Returns:
    `export_dir`.

  Raises:
    TypeError: `model` is not a `BertPretrainer`.
    ValueError: S does not fit the model.
  """
  if not isinstance(model, BertPretrainer):
    raise TypeError(f"expected a BertPretrainer, got {type(model).__name__}")
  export.check_seq_length(model, max_seq_length)
  model, serving = serving_dtype.for_serving(model, export_dtype)
  module = FillMaskExport(model, vocab_file, do_lower_case, max_seq_length)
  export.save_atomically(lambda path: export.write_export(module, model.config, path, serving),
                         export_dir)
  return export_dir
