"""Exports a fine-tuned `BertTokenClassifier` as a SavedModel that tags raw text.

The SavedModel holds a `TaggerExport` module and two signatures:

* `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, S] -> float32
  `logits` and `probabilities` [B, S, C] per WordPiece position.
* `tag_text`: tf.string `text` [B] -> per word, `tags` tf.string [B, W] (padding ""),
  `word_starts`, `word_ends` int64 [B, W] (character offsets into the text, half-open:
  Unicode code points, so Python's `text[start:end]` is the word; padding -1) and
  `num_words` int32 [B]; per entity, `entity_types` tf.string [B, E], `entity_starts`,
  `entity_ends` int64 [B, E] (characters; padding "" and -1) and `num_entities` int32 [B].

Raw text has no word column: its words are BERT's own (the text split at whitespace and
around punctuation by the tokenizer, one word = a piece not starting with "##" and the
"##" pieces after it), the tokens the CoNLL corpora BERT taggers are trained on mostly
use. Each word gets the label of its first piece; entities are chunked as the metric does
(`tfbert.tagging.tagging_metrics`: an `I-X` that does not continue an X entity begins one).
A text of more than S - 2 pieces is tagged on its first S - 2 pieces only (`num_words`
counts the words tagged); split longer texts, e.g. by sentence, before sending them. The
tokenizer runs in the graph (`tfbert.text.tokenization.WordPieceTokenizer`): a client
needs `tensorflow` and `import tensorflow_text`, not tfbert. Inputs are validated as in
every tfbert export (`tfbert.serving.export`). The directory also holds `labels.txt`, and
`ids/`: `serving_default` alone in a SavedModel of core TensorFlow ops only (no tokenizer),
which loads without `tensorflow_text` (`tfbert.serving.export.IdExport`; `labels.txt` too).

Shape legend: B batch, S max_seq_length, C labels, W words, E entities.
"""

from typing import Optional

import tensorflow as tf

from tfbert.checkpoints import model_paths
from tfbert.models import BertTokenClassifier
from tfbert.serving import export, serving_dtype
from tfbert.text import inputs, tokenization

TEXT_SIGNATURE = "tag_text"
LABELS_FILE = model_paths.LABELS_FILE


class TaggerExport(export.TaskExport):
  """What a tagger SavedModel holds: the model, its tokenizer and tags.

  Attributes (besides `export.TaskExport`'s):
    labels: tf.string constant [C] of tags.
    continuation: bool constant [V]: whether each vocabulary entry starts with "##".
    tag_text: `tf.function` behind the raw-text signature.
  """

  def __init__(self, model: BertTokenClassifier, vocab_file: str, do_lower_case: bool,
               max_seq_length: int, name: Optional[str] = None, frozen: bool = True):
    super().__init__(model, vocab_file, do_lower_case, max_seq_length, name=name,
                     frozen=frozen)
    self.labels = tf.constant(list(model.labels), tf.string)
    vocab = tokenization.load_vocab(vocab_file)
    self.continuation = tf.constant([token.startswith("##") for token in vocab], tf.bool)
    self.tag_text = tf.function(self._tag_text, autograph=False, input_signature=[
        tf.TensorSpec([None], tf.string, name="text")])

  def signatures(self) -> dict[str, tf.types.experimental.PolymorphicFunction]:
    """The signatures to save, by name."""
    return {**export.id_signatures(self),
            TEXT_SIGNATURE: self.tag_text}

  def _tag_text(self, text):
    text = export.validate_texts(TEXT_SIGNATURE, {"text": text})["text"]  # Before any op.
    ids, starts, ends = self.tokenizer.tokenize_with_offsets(text)       # [B, (T)]
    budget = self.max_seq_length - 2
    ids, starts, ends = ids[:, :budget], starts[:, :budget], ends[:, :budget]
    features = inputs.pack_inputs([ids], self.max_seq_length, self.tokenizer.cls_id,
                                  self.tokenizer.sep_id)
    features = export.validate_features(TEXT_SIGNATURE, features, self.model.config,
                                        packed_from="text")
    logits = self._text_outputs(features)["logits"]                      # [B, S, C]
    lengths = ids.row_lengths()
    width = tf.shape(ids.to_tensor())[1]
    label_ids = tf.argmax(logits[:, 1:1 + budget], axis=-1)[:, :width]    # [B, T]
    valid = tf.sequence_mask(lengths, width)                             # [B, T]
    first = valid & ~tf.gather(self.continuation, ids.to_tensor())       # A word's first piece.
    following = tf.concat([first[:, 1:], tf.ones_like(first[:, :1])], axis=1)
    last = valid & (following | ~tf.concat([valid[:, 1:], tf.zeros_like(valid[:, :1])], 1))
    tags = tf.ragged.boolean_mask(tf.gather(self.labels, label_ids), first)      # [B, (W)]
    word_starts = tf.ragged.boolean_mask(starts.to_tensor(), first).to_tensor(-1)
    word_ends = tf.ragged.boolean_mask(ends.to_tensor(), last).to_tensor(-1)
    outputs = {"tags": tags.to_tensor(""),
               "word_starts": _characters_before(text, word_starts),
               "word_ends": _characters_before(text, word_ends),
               "num_words": tf.cast(tags.row_lengths(), tf.int32)}
    return {**outputs, **_entities(outputs["tags"], outputs["word_starts"],
                                   outputs["word_ends"])}


def _characters_before(text: tf.Tensor, byte_offsets: tf.Tensor) -> tf.Tensor:
  """Character (Unicode code point) offsets [B, W] of UTF-8 byte offsets [B, W] into each
  text [B] (the tokenizer's offsets fall on character boundaries); -1 stays -1."""
  known = tf.maximum(byte_offsets, 0)
  prefixes = tf.strings.substr(tf.broadcast_to(text[:, None], tf.shape(known)),
                               tf.zeros_like(known), known, unit="BYTE")
  counts = tf.cast(tf.strings.length(prefixes, unit="UTF8_CHAR"), tf.int64)
  return tf.where(byte_offsets < 0, tf.constant(-1, tf.int64), counts)


def _entities(tags: tf.Tensor, starts: tf.Tensor, ends: tf.Tensor) -> dict[str, tf.Tensor]:
  """Entity chunks of padded word tags [B, W] (conlleval's lenient chunking). A tag without
  a `B-`/`I-` prefix (an IO-scheme tagger's `PER`, from a Hugging Face directory) continues
  a run of its own type, as `I-` does: such a run is one entity (each of its words ended
  an entity of its own, whose starts and ends then paired wrongly: sweep 27, B59)."""
  kind = tf.strings.regex_replace(tags, "^[BI]-", "")
  prefix = tf.where(tf.strings.regex_full_match(tags, "[BI]-.*"),
                    tf.strings.substr(tags, 0, 1), "")                    # "B", "I" or "".
  inside = (tags != "O") & (tags != "")
  before = tf.concat([tf.fill(tf.shape(kind[:, :1]), "O"), kind[:, :-1]], axis=1)
  after_kind = tf.concat([kind[:, 1:], tf.fill(tf.shape(kind[:, :1]), "")], axis=1)
  after_prefix = tf.concat([prefix[:, 1:], tf.fill(tf.shape(prefix[:, :1]), "B")], axis=1)
  begins = inside & ((prefix == "B") | (before != kind))
  ends_here = inside & ~((after_prefix != "B") & (after_kind == kind))
  types = tf.ragged.boolean_mask(kind, begins)
  return {"entity_types": types.to_tensor(""),
          "entity_starts": tf.ragged.boolean_mask(starts, begins).to_tensor(-1),
          "entity_ends": tf.ragged.boolean_mask(ends, ends_here).to_tensor(-1),
          "num_entities": tf.cast(types.row_lengths(), tf.int32)}


def export_tagger_saved_model(model: BertTokenClassifier, export_dir: str, vocab_file: str,
                              do_lower_case: bool, max_seq_length: int,
                              export_dtype: str = "model") -> str:
  """Writes a `BertTokenClassifier` as a SavedModel, replacing `export_dir` atomically.

  Args:
    model: the fine-tuned tagger.
    export_dir: local directory or URL (`gs://...`) to create or replace.
    vocab_file: its WordPiece vocab (copied into `assets/`).
    do_lower_case: the vocab's casing.
    max_seq_length: S of `tag_text`; at most `max_position_embeddings`.
    export_dtype: "model" (its policy), "float32", "bfloat16" or "auto" (the faster on this
      CPU); see `tfbert.serving.serving_dtype`. Recorded in `serving.json`.

  Returns:
    `export_dir`.

  Raises:
    TypeError: `model` is not a `BertTokenClassifier`.
    ValueError: S does not fit the model.
  """
  if not isinstance(model, BertTokenClassifier):
    raise TypeError(f"expected a BertTokenClassifier, got {type(model).__name__}")
  export.check_seq_length(model, max_seq_length)
  model, serving = serving_dtype.for_serving(model, export_dtype)
  module = TaggerExport(model, vocab_file, do_lower_case, max_seq_length)

  def write(path):
    export.write_export(module, model.config, path, serving)
    export.write_labels(path, model.labels)

  export.save_atomically(write, export_dir)
  return export_dir
