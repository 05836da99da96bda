"""Exports a fine-tuned `BertClassifier` as a SavedModel that classifies raw text.

The SavedModel holds a `ClassifierExport` module and two signatures:

* `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, S] ->
  float32 `logits` and `probabilities` (softmax) [B, C]; regression (STS-B): float32
  `score` [B].
* `classify_text`: tf.string `text_a` [B], and `text_b` [B] for a pair task -> the same
  outputs plus tf.string `label` [B] (the most probable label name; not for regression).
  The texts are tokenized and packed in the graph exactly as in training
  (`tfbert.classifier.classifier_features.pack_text`, google-research/bert's packing), S =
  `max_seq_length`.

Both signatures validate their inputs in the graph (`tfbert.serving.export.validate_texts` and
`validate_features`) before any tokenizer op or gather runs: text_a and text_b of different
batch sizes fail with `tf.errors.InvalidArgumentError` "classify_text: text_b has batch
size 1 but text_a has 2" (unchecked, tensorflow-text aborted the process or broadcast),
bad features with e.g. "serving_default: segment_ids holds 3 at [1, 2], outside the
token types [0, 3)"; see `tfbert.serving.export` for the full list.

Outputs are float32 whatever the model's dtype policy. As `tfbert.serving.export`'s exports, the
directory is relocatable and self-describing: `bert_config.json` beside `saved_model.pb`,
the vocab in `assets/`, `labels.txt` (one label name per line, in class-id order) for
classification, and `ids/` (`serving_default` alone, core TensorFlow ops only, with
`labels.txt`: `tfbert.serving.export.IdExport`). A client needs `tensorflow` and
`import tensorflow_text` (for the tokenizer's ops), not tfbert; `ids/` needs `tensorflow`
only.

Shape legend: B batch, S sequence, C classes.
"""

from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfbert.checkpoints import model_paths
from tfbert.classifier import classifier_features, glue_data, glue_metrics
from tfbert.models import BertClassifier
from tfbert.serving import export, serving_dtype, tflite_export

TEXT_SIGNATURE = "classify_text"
LABELS_FILE = model_paths.LABELS_FILE


class ClassifierExport(export.TaskExport):
  """What a classifier SavedModel holds: the model, its tokenizer and label names.

  Attributes (besides `export.TaskExport`'s):
    labels: tf.string constant [C] of label names, or None for regression.
    classify_text: `tf.function` behind the raw-text signature.
  """

  def __init__(self, model: BertClassifier, vocab_file: str, do_lower_case: bool,
               max_seq_length: int, labels: Optional[Sequence[str]], is_pair: bool,
               name: Optional[str] = None, frozen: bool = True):
    super().__init__(model, vocab_file, do_lower_case, max_seq_length, name=name,
                     frozen=frozen)
    self.is_pair = is_pair
    self.labels = None if labels is None else tf.constant(list(labels), tf.string)
    texts = [tf.TensorSpec([None], tf.string, name="text_a")]
    if is_pair:
      texts.append(tf.TensorSpec([None], tf.string, name="text_b"))
    self.classify_text = tf.function(self._classify_text, input_signature=texts,
                                     autograph=False)

  def signatures(self) -> dict[str, tf.types.experimental.PolymorphicFunction]:
    """The signatures to save, by name."""
    return {**export.id_signatures(self),
            TEXT_SIGNATURE: self.classify_text}

  def _classify_text(self, text_a, text_b=None):
    texts = {"text_a": text_a} if text_b is None else {"text_a": text_a, "text_b": text_b}
    texts = export.validate_texts(TEXT_SIGNATURE, texts)  # Before any tokenizer op.
    features = classifier_features.pack_text(self.tokenizer, texts["text_a"],
                                             texts.get("text_b"), self.max_seq_length)
    features = export.validate_features(TEXT_SIGNATURE, features, self.model.config,
                                        packed_from=", ".join(texts))
    outputs = self._text_outputs(features)
    if self.labels is not None:
      outputs["label"] = tf.gather(self.labels, tf.argmax(outputs["logits"], axis=1))
    return outputs


def export_classifier_saved_model(model: BertClassifier, export_dir: str, vocab_file: str,
                                  do_lower_case: bool, max_seq_length: int,
                                  labels: Optional[Sequence[str]], is_pair: bool,
                                  export_dtype: str = "model") -> str:
  """Writes a `BertClassifier` as a SavedModel, replacing `export_dir` atomically.

  Args:
    model: the fine-tuned `BertClassifier`.
    export_dir: local directory or URL (`gs://...`) to create or replace.
    vocab_file: its WordPiece vocab (copied into `assets/`).
    do_lower_case: the vocab's casing.
    max_seq_length: S of `classify_text`; at most `max_position_embeddings`.
    labels: label names in class-id order (C of them), or None for regression (C = 1).
    is_pair: `classify_text` takes `text_a` and `text_b` (else `text_a` only).
    export_dtype: "model" (its policy), "float32", "bfloat16" or "auto" (the faster on this
      CPU); see `tfbert.serving.serving_dtype`. Recorded in `serving.json`.

  Returns:
    `export_dir`.

  Raises:
    TypeError: if `model` is not a `BertClassifier`.
    ValueError: if S does not fit the model, or the labels do not match its C.
  """
  if not isinstance(model, BertClassifier):
    raise TypeError(f"expected a BertClassifier, got {type(model).__name__}")
  export.check_seq_length(model, max_seq_length)
  if labels is None and model.num_classes > 1:
    raise ValueError(f"this classifier has {model.num_classes} classes and no label names, "
                     "which its export serves by name: build it with labels=[...] "
                     f"({model.num_classes} names in class-id order), e.g. "
                     "BertClassifier(config, num_classes, labels=[...])")
  classes = 1 if labels is None else len(labels)
  if classes != model.num_classes or (labels is not None and classes < 2):
    raise ValueError(f"{classes} label(s) {list(labels or ['(regression)'])} for a model "
                     f"with {model.num_classes} output(s)")
  model, serving = serving_dtype.for_serving(model, export_dtype)
  module = ClassifierExport(model, vocab_file, do_lower_case, max_seq_length, labels, is_pair)

  def write(path):
    export.write_export(module, model.config, path, serving)
    if labels is not None:
      export.write_labels(path, labels)

  export.save_atomically(write, export_dir)
  return export_dir


def check_scorable(model, task: glue_data.Task) -> None:
  """Refuses to score a classifier on a task whose classes are not its own, by name: a
  model's class ids read as another task's labels score nonsense (or, with more classes,
  failed on a missing key).

  Raises:
    ValueError: naming the task and both label lists.
  """
  theirs = "regression" if task.is_regression else ", ".join(task.labels)
  ours = getattr(model, "labels", None)
  mine = ("regression" if model.num_classes == 1 else
          ", ".join(ours) if ours is not None else f"{model.num_classes} unnamed classes")
  if model.num_classes != task.num_classes or (ours is not None and tuple(ours) != task.labels):
    raise ValueError(f"task {task.name!r} ({theirs}) is not the model's ({mine}): score a "
                     "classifier on its own task's dev files (--task_name)")


def score_classifier(predict_batch: Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]],
                     features: Mapping[str, np.ndarray], labels: np.ndarray,
                     task: glue_data.Task, batch_size: int
                     ) -> tuple[dict[str, float], np.ndarray]:
  """The task's GLUE metrics of a classifier's predictions, as `tools/run_classifier.py`
  scores its dev set (argmax of `logits`, or regression's `score`).

  Args:
    predict_batch: features -> the id signature's outputs (`TfliteModel`, or Keras through
      `export.served_outputs`).
    features: int32 [N, S] arrays by feature name.
    labels: int class ids [N] or float scores [N] (`classifier_features.label_array`).
    task: the `glue_data.Task`.
    batch_size: rows per `predict_batch` call.

  Returns:
    ({metric: percent, "num_examples": N}, the per-example logits [N, C] or scores [N]).
  """
  outputs = tflite_export.predict(predict_batch, features, batch_size)
  if task.is_regression:
    values = predicted = outputs["score"]
  else:
    values = outputs["logits"]
    predicted = np.argmax(values, axis=1)
  return ({**glue_metrics.in_percent(glue_metrics.compute_metrics(task.metrics, predicted,
                                                                   labels)),
           "num_examples": len(labels)}, values)
