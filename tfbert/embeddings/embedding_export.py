"""Exports a `BertSentenceEncoder` as a SavedModel that embeds raw text.

Signatures:

* `embed_text`: tf.string `text` [B] -> float32 `embeddings` [B, H] (normalized when the
  model normalizes). Each text is tokenized and packed in the graph as in training
  (WordPiece, [CLS] text [SEP], truncated to S = `max_seq_length`) after its input is
  validated (`tfbert.serving.export.validate_texts` / `validate_features`).
* `serving_default` and the other id signatures (`tfbert.serving.export.ID_SIGNATURES`:
  Google's and Hugging Face's input names, int32 and int64) -> the same `embeddings`.

Like every task export, the directory is self-describing (`bert_config.json`, the vocab in
`assets/`, `serving.json`) and holds `ids/`, the id signatures alone with core ops only,
which `tools/export_onnx.py` and `tools/export_tflite.py` convert.

Shape legend: B texts, S sequence, H embedding width.
"""

import tensorflow as tf

from tfbert.classifier import classifier_features
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.serving import export, serving_dtype

TEXT_SIGNATURE = "embed_text"


class EmbeddingExport(export.TaskExport):
  """What a sentence-encoder SavedModel holds: the model and its tokenizer.

  Attributes (besides `export.TaskExport`'s):
    embed_text: `tf.function` behind the raw-text signature.
  """

  def __init__(self, model: BertSentenceEncoder, vocab_file: str, do_lower_case: bool,
               max_seq_length: int, frozen: bool = True):
    super().__init__(model, vocab_file, do_lower_case, max_seq_length, frozen=frozen)
    self.embed_text = tf.function(self._embed_text, autograph=False,
                                  input_signature=[tf.TensorSpec([None], tf.string, name="text")])

  def signatures(self) -> dict[str, tf.types.experimental.PolymorphicFunction]:
    """The signatures to save, by name."""
    return {**export.id_signatures(self),
            TEXT_SIGNATURE: self.embed_text}

  def _embed_text(self, text):
    texts = export.validate_texts(TEXT_SIGNATURE, {"text": text})  # Before any tokenizer op.
    features = classifier_features.pack_text(self.tokenizer, texts["text"], None,
                                             self.max_seq_length)
    features = export.validate_features(TEXT_SIGNATURE, features, self.model.config,
                                        packed_from="text")
    return self._text_outputs(features)


def export_sentence_encoder_saved_model(model: BertSentenceEncoder, export_dir: str,
                                        vocab_file: str, do_lower_case: bool,
                                        max_seq_length: int,
                                        export_dtype: str = "model") -> str:
  """Writes a `BertSentenceEncoder` as a SavedModel, replacing `export_dir` atomically.

  Args:
    model: the sentence encoder.
    export_dir: local directory or URL (`gs://...`) to create or replace.
    vocab_file: its WordPiece vocab (copied into `assets/`).
    do_lower_case: the vocab's casing.
    max_seq_length: S of `embed_text`; at most `max_position_embeddings`.
    export_dtype: "model", "float32", "bfloat16" or "auto"; see
      `tfbert.serving.serving_dtype`. Recorded in `serving.json`.

  Returns:
    `export_dir`.

  Raises:
    TypeError: if `model` is not a `BertSentenceEncoder`.
    ValueError: if S does not fit the model.
  """
  if not isinstance(model, BertSentenceEncoder):
    raise TypeError(f"expected a BertSentenceEncoder, got {type(model).__name__}")
  export.check_seq_length(model, max_seq_length)
  model, serving = serving_dtype.for_serving(model, export_dtype)
  module = EmbeddingExport(model, vocab_file, do_lower_case, max_seq_length)
  export.save_atomically(
      lambda path: export.write_export(module, model.config, path, serving), export_dir)
  return export_dir
