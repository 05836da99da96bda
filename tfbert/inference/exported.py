"""A tfbert SavedModel export behind the raw-text calls of the model it was written from.

`tfbert.load(export_dir)` returns an `ExportedModel`: the SavedModel loaded, its raw-text
signature called batch by batch, and the outputs turned into Python values by the very
converters the Python models use (`tfbert.inference.raw_text`). The export's S, vocabulary,
casing and labels were fixed when it was written; what it can do is its signature's:

* `embed_text`: `encode(texts, normalize=False)`;
* `classify_text`: `classify(texts or pairs)`, as the signature reads (`text_b` or not),
  labels from the export's `labels.txt`;
* `tag_text`: `tag(texts)`;
* `answer_question`: `answer(questions, contexts)`. An export that records its run's window
  settings (`answer_question.json`'s `doc_stride` and `do_lower_case`, written since
  tfbert records them) answers as the run's model does (`raw_text.answer`): every context
  cut into windows `doc_stride` apart, each scored by the id signature (`serving_default`),
  the answer chosen over the windows (`squad_postprocess`): {"answer", "score", "start",
  "end"} (+ "null_score_diff" in v2.0). An older export answers through the signature, in
  ONE window: {"answer", "score"} (+ "null_score" in v2.0), without character offsets, and
  warns naming each context cut to that window (wordpieces read of its total);
* `fill_mask`: `fill_mask(texts, top_k)` (a pretrainer's export);
* `encode_text` (an encoder's export): `predict(texts)`, the encoder's outputs
  {"sequence_output" [N, S, H], "pooled_output" [N, H]}, as the encoder's raw-text `predict`.

Loading needs `tensorflow_text` (the tokenizer's ops), which tfbert imports.
"""

import json
import os
from typing import Any, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.checkpoints import model_paths
from tfbert.config import BertConfig
from tfbert.inference import raw_text
from tfbert.runtime import files, validation
from tfbert.serving import export
from tfbert.squad import squad_data, squad_export, squad_features, squad_postprocess
from tfbert.text import casing, tokenization

SIGNATURES = {"embed_text": "encode", "classify_text": "classify", "tag_text": "tag",
              "answer_question": "answer", "fill_mask": "fill_mask",
              export.TEXT_SIGNATURE: "predict"}


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
    labels_file = os.path.join(path, model_paths.LABELS_FILE)
    self.labels = (model_paths.read_labels_file(labels_file)
                   if files.isfile(labels_file) else None)
    self.is_pair = (self.signature == "classify_text"
                    and "text_b" in self._call.structured_input_signature[1])
    answer_file = os.path.join(path, squad_export.ANSWER_CONFIG_FILE)
    # A span labeler's window settings (`squad_export.SquadExport.answer_config`).
    self.answer_config = (json.loads(files.read_text(answer_file))
                          if self.signature == "answer_question" and files.isfile(answer_file)
                          else None)
    self._tokenizer = None

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

  def predict(self, texts, batch_size: int = 32, verbose: Any = "auto") -> dict:
    """An encoder export's outputs through `encode_text`: {"sequence_output": float32
    [N, S, H], "pooled_output": float32 [N, H]} (sweep 33, B172: `tfbert.save` wrote the
    export, `tfbert.load` refused it)."""
    self._needs(export.TEXT_SIGNATURE)
    items, _ = raw_text.text_list(texts)
    names = ("sequence_output", "pooled_output")
    rows = {name: [] for name in names}
    for s in raw_text.batches(len(items), batch_size, verbose):
      outputs = self._call(text=tf.constant(items[s]))
      for name in names:
        rows[name].append(outputs[name].numpy())
    if not items:  # Shaped as one text's outputs, as the encoder's own predict.
      length = int(self._call.structured_outputs["sequence_output"].shape[1] or 0)
      width = self.config.hidden_size
      return {"sequence_output": np.zeros((0, length, width), np.float32),
              "pooled_output": np.zeros((0, width), np.float32)}
    return {name: np.concatenate(rows[name]) for name in names}

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
    """Answers per question, windowed as the run's model answers when the export records
    its `doc_stride`, else through `answer_question` in one window (module docstring)."""
    self._needs("answer_question")
    questions, contexts, one = raw_text.questions_and_contexts(questions, contexts)
    if self._windows() is not None:
      rows = self._answer_in_windows(questions, contexts, batch_size, verbose)
      return rows[0] if one else rows
    self._warn_cut_contexts(questions, contexts)
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

  def _windows(self) -> Optional[squad_features.FeatureConfig]:
    """The run's windows, when the export records them and has its id signature."""
    config = self.answer_config or {}
    if (config.get("doc_stride") is None or config.get("do_lower_case") is None
        or export.SERVING_SIGNATURE not in self._loaded.signatures):
      return None
    return squad_features.FeatureConfig(config["max_seq_length"], config["doc_stride"],
                                        config["max_query_length"])

  def _text_tokenizer(self) -> tokenization.WordPieceTokenizer:
    """The export's tokenizer in Python: its vocabulary asset, its recorded casing (an older
    export's: the vocabulary's content, else google-research/bert's default)."""
    if self._tokenizer is None:
      vocab = self._loaded.vocab.asset_path.numpy().decode("utf-8")
      lower = (self.answer_config or {}).get("do_lower_case")
      if lower is None:
        evidence = casing.vocab_casing(vocab)
        lower = evidence.do_lower_case if evidence else casing.DEFAULT_DO_LOWER_CASE
      self._tokenizer = tokenization.WordPieceTokenizer(vocab, lower)
    return self._tokenizer

  def _answer_in_windows(self, questions, contexts, batch_size, verbose) -> list[dict]:
    """`raw_text.answer`'s windows and postprocessing, the id signature scoring them."""
    config = self.answer_config
    examples = [squad_data.SquadExample(str(i), q, c, ()) for i, (q, c) in
                enumerate(zip(questions, contexts))]
    features = squad_features.convert_examples_to_features(
        examples, self._text_tokenizer(), self._windows(), log_every=0).features
    call = self._loaded.signatures[export.SERVING_SIGNATURE]
    width = config["max_seq_length"]
    start_logits, end_logits = [np.zeros((0, width), np.float32)], [
        np.zeros((0, width), np.float32)]
    for s in raw_text.batches(len(features), batch_size, verbose):
      outputs = call(**{name: tf.constant(np.stack([getattr(f, name) for f in features[s]]))
                        for name in export.FEATURE_NAMES})
      start_logits.append(outputs["start_logits"].numpy())
      end_logits.append(outputs["end_logits"].numpy())
    v2 = bool(config["version_2_with_negative"])
    predictions = squad_postprocess.postprocess_predictions(
        examples, features, np.concatenate(start_logits), np.concatenate(end_logits),
        squad_postprocess.PostprocessConfig(
            max_answer_length=config["max_answer_length"], version_2_with_negative=v2,
            null_score_diff_threshold=config["null_score_diff_threshold"] or 0.0))
    return [raw_text.answer_row(p, v2) for p in predictions]

  def _warn_cut_contexts(self, questions, contexts) -> None:
    """Warns naming each context `answer_question`'s one window cuts: an export that does
    not record its run's `doc_stride` cannot window it."""
    config = self.answer_config
    if not config or not contexts:
      return
    tokenizer = self._text_tokenizer()
    queries = [min(len(q), config["max_query_length"])
               for q in tokenizer.tokenize(tf.constant(questions)).to_list()]
    cut = []
    for i, (query, tokens) in enumerate(zip(
        queries, tokenizer.tokenize(tf.constant(contexts)).to_list())):
      room = config["max_seq_length"] - query - 3
      if len(tokens) > room:
        cut.append(f"context {i}: {room} of {len(tokens)} wordpieces read")
    if cut:
      logging.warning(
          f"{self.path}: answer_question reads one window of max_seq_length "
          f"{config['max_seq_length']}, and {len(cut)} of {len(contexts)} contexts are longer "
          f"({'; '.join(cut[:5])}{'; ...' if len(cut) > 5 else ''}): the rest is not read. "
          f"Its {squad_export.ANSWER_CONFIG_FILE} does not record the run's doc_stride to "
          "window them: export again with this tfbert (tfbert.save(model, path, \"export\") "
          "or the run's --export_dir), or answer with the run's model (tfbert.load(<run>))")

  def fill_mask(self, texts, top_k: int = 5, batch_size: int = 32, verbose: Any = "auto"):
    """The top-k tokens of each `[MASK]` through `fill_mask` (`raw_text.fill_masks`)."""
    self._needs("fill_mask")
    return raw_text.fill_masks(self._call, texts, top_k, batch_size, verbose)
