"""A tfbert SavedModel export behind the raw-text calls of the model it was written from.

`tfbert.load(export_dir)` returns an `ExportedModel`: the SavedModel loaded, its raw-text
signature called batch by batch, and the outputs turned into Python values by the very
converters the Python models use (`tfbert.inference.raw_text`). The export's S, vocabulary,
casing and labels were fixed when it was written; what it can do is its signature's:

* `embed_text`: `encode(texts, normalize=False)`;
* `classify_text`: `classify(texts or pairs)`, as the signature reads (`text_b` or not),
  labels from the export's `labels.txt`;
* `tag_text`: `tag(texts)`;
* `answer_question`: `answer(questions, contexts)` in ONE window, as the signature answers:
  {"answer", "score"} (+ "null_score" in v2.0), without character offsets;
* `fill_mask`: `fill_mask(texts, top_k)` (a pretrainer's export).

Loading needs `tensorflow_text` (the tokenizer's ops), which tfbert imports.
"""

import os
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from tfbert.config import BertConfig
from tfbert.inference import raw_text
from tfbert.runtime import files, validation
from tfbert.serving import export

SIGNATURES = {"embed_text": "encode", "classify_text": "classify", "tag_text": "tag",
              "answer_question": "answer", "fill_mask": "fill_mask"}


class ExportedModel:
  """A loaded tfbert export (see the module docstring).

  Attributes:
    path: the export directory.
    config: its `BertConfig` (`bert_config.json`).
    labels: its label names (`labels.txt`), or None.
    signature: the name of its raw-text signature.
    is_pair: a classifier export's `classify_text` takes (text_a, text_b) pairs (its
      `text_b` input); False for single texts and for other exports.
  """

  def __init__(self, path: str):
    self.path = path
    self._loaded = tf.saved_model.load(path)
    names = [name for name in SIGNATURES if name in self._loaded.signatures]
    if not names:
      raise ValueError(f"{path}: a SavedModel without a tfbert raw-text signature (has "
                       f"{', '.join(sorted(self._loaded.signatures)) or 'none'}; expected one "
                       f"of {', '.join(SIGNATURES)})")
    self.signature = names[0]
    self._call = self._loaded.signatures[self.signature]
    self.config = BertConfig.from_json_file(os.path.join(path, export.CONFIG_FILE))
    labels_file = os.path.join(path, export.LABELS_FILE)
    self.labels = (tuple(files.read_lines(labels_file))
                   if files.isfile(labels_file) else None)
    self.is_pair = (self.signature == "classify_text"
                    and "text_b" in self._call.structured_input_signature[1])

  def __repr__(self) -> str:
    return f"ExportedModel({self.path!r}, signature={self.signature!r})"

  def _needs(self, signature: str) -> None:
    if self.signature != signature:
      raise TypeError(f"{self.path}: this export answers {SIGNATURES[self.signature]}() "
                      f"(its {self.signature} signature), not {SIGNATURES[signature]}()")

  def encode(self, texts, batch_size: int = 32, normalize: bool = False,
             verbose: Any = "auto") -> np.ndarray:
    """float32 [N, H] embeddings through `embed_text` (one text: [H])."""
    self._needs("embed_text")
    normalize = validation.plain_bool("normalize", normalize)
    items, one = raw_text.text_list(texts)
    rows = [self._call(text=tf.constant(items[s]))["embeddings"].numpy()
            for s in raw_text.batches(len(items), batch_size, verbose)]
    return raw_text.stacked_embeddings(rows, self.config.hidden_size, normalize, one)

  def classify(self, texts, batch_size: int = 32, verbose: Any = "auto"):
    """Class names with probabilities (regression: scores) through `classify_text`."""
    self._needs("classify_text")
    first, second, one = raw_text.classifier_texts(texts, self.is_pair,
                                                   whose=f"{self.path}: this export")
    rows = []
    for s in raw_text.batches(len(first), batch_size, verbose):
      kwargs = {"text_a": tf.constant(first[s])}
      if second is not None:
        kwargs["text_b"] = tf.constant(second[s])
      outputs = {k: v.numpy() for k, v in self._call(**kwargs).items()}
      rows.extend(raw_text.classifications(outputs, self.labels))
    return rows[0] if one else rows

  def tag(self, texts, batch_size: int = 32, verbose: Any = "auto"):
    """Each text's entities through `tag_text` (`raw_text.entities`)."""
    self._needs("tag_text")
    items, one = raw_text.text_list(texts)
    rows = []
    for s in raw_text.batches(len(items), batch_size, verbose):
      outputs = {k: v.numpy() for k, v in self._call(text=tf.constant(items[s])).items()}
      rows.extend(raw_text.entities(items[s], outputs))
    return rows[0] if one else rows

  def answer(self, questions, contexts: Optional[Any] = None, batch_size: int = 32,
             verbose: Any = "auto"):
    """Answers through `answer_question` (one window each): {"answer", "score"} (+
    "null_score" in v2.0) per question."""
    self._needs("answer_question")
    questions, contexts, one = raw_text.questions_and_contexts(questions, contexts)
    rows = []
    for s in raw_text.batches(len(questions), batch_size, verbose):
      outputs = self._call(question=tf.constant(questions[s]),
                           context=tf.constant(contexts[s]))
      for i in range(s.stop - s.start):
        row = {"answer": outputs["answer"][i].numpy().decode("utf-8"),
               "score": float(outputs["score"][i])}
        if "null_score" in outputs:
          row["null_score"] = float(outputs["null_score"][i])
        rows.append(row)
    return rows[0] if one else rows

  def fill_mask(self, texts, top_k: int = 5, batch_size: int = 32, verbose: Any = "auto"):
    """The top-k tokens of each `[MASK]` through `fill_mask` (`raw_text.fill_masks`)."""
    self._needs("fill_mask")
    return raw_text.fill_masks(self._call, texts, top_k, batch_size, verbose)
