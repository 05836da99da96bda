"""Named-entity recognition fine-tuning: CoNLL in, entity F1 and CoNLL predictions out.

`run_ner(NerRunConfig)` does what `tools/run_ner.py`'s flags ask, in this order:

0. Checks the configuration and reads every CoNLL file (`tfbert.tagging.conll`: a
   malformed line or an IOB2 violation is an error naming `file:line`, before anything is
   built or written). The label list is `O` then `B-X`, `I-X` for every type X of the train
   file (sorted), else the one of the model read with `--init_tfbert`, else the
   `id2label` of a Hugging Face `BertForTokenClassification` directory.
1. Builds a `BertTokenClassifier` in the strategy's scope and initializes it from a Google
   checkpoint, a Hugging Face directory (a token-classification head loads too; a source
   without a pooler, as `BertForTokenClassification` saves, keeps the fresh pooler, which
   tagging never reads) or a tfbert `.keras` file. Then claims the output directory
   (`fine_tuning.claim_run_directory`).
2. Training (`do_train`): windows of the train sentences (`tfbert.tagging.tagging_features`:
   each word's first WordPiece carries its label) train in the training loop
   (`fine_tuning.train`: one device, mirrored or multi-worker; accumulation; mixed
   precision; checkpoints and exact resume; SIGTERM saves and exits 75), with the
   fine-tuning optimizer stack. With `eval_every_steps` (and `do_eval`) the dev file is
   scored during training and the best model by `best_metric` (default entity `f1`) kept
   in `best/`; `early_stopping_patience` may end the run.
3. Evaluation (`do_eval`): the dev file is tagged and scored (`tfbert.tagging.tagging_metrics`:
   entity-level micro precision/recall/F1 in percent, per type, token accuracy).
4. Prediction (`do_predict`): the predict file's words (its tag column, if any, is not
   read) are tagged.
Tagging is sharded over every replica of every worker (`fine_tuning.predict`); only the
chief writes.

The run directory (besides what every fine-tuning run writes: bert_config.json,
run_config.json, vocab.txt, checkpoints/, train/, eval/, metrics.jsonl, best/,
model.keras, train_results.json):

    eval_results.json        {"dev": {precision, recall, f1, accuracy, counts, per_type,
                             num_sentences}}
    dev_predictions.conll    `word<TAB>tag` per line of the dev file's words, sentences
    test_predictions.conll   separated by empty lines: `tools/evaluate_ner.py GOLD FILE`
                             scores them against a gold file by line position
    labels.txt               the tag of each label id

Shape legend: F windows, S max_seq_length, C labels.
"""

import dataclasses
import json
import os
import time
from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.models import BertTokenClassifier
from tfbert.runtime import atomic, validation
from tfbert.serving import export
from tfbert.tagging import conll, tagging_export, tagging_features, tagging_metrics
from tfbert.tasks import fine_tuning
from tfbert.text.tokenization import WordPieceTokenizer

LABELS_FILE = tagging_export.LABELS_FILE  # Also in the run directory.
# The per-type and count entries of the scores are not TensorBoard scalars.
EVAL_SCALARS = ("precision", "recall", "f1", "accuracy")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NerRunConfig(fine_tuning.FineTuningConfig):
  """Everything that defines a tagging run (see flags/run_ner_flags.py)."""
  RERUN_MAY_CHANGE = fine_tuning.FineTuningConfig.RERUN_MAY_CHANGE | frozenset(
      {"do_eval", "do_predict", "eval_file", "predict_file", "eval_batch_size"})
  train_file: Optional[str] = None
  eval_file: Optional[str] = None
  predict_file: Optional[str] = None
  do_eval: bool = False
  do_predict: bool = False
  token_column: int = 0
  tag_column: int = -1
  tag_scheme: str = "iob2"
  max_seq_length: int = 128
  doc_stride: int = 64
  classifier_dropout: float = 0.1
  eval_batch_size: int = 64

  @classmethod
  def from_json(cls, text: str) -> "NerRunConfig":
    """The inverse of `to_json`."""
    return cls(**json.loads(text))

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    return [
        (self.do_train or self.do_eval or self.do_predict,
         "at least one of do_train, do_eval, do_predict"),
        (not self.do_train or self.train_file, "do_train needs train_file"),
        (not self.do_eval or self.eval_file, "do_eval needs eval_file"),
        (not self.do_predict or self.predict_file, "do_predict needs predict_file"),
        (self.tag_scheme in ("iob2", "iob1"),
         f"tag_scheme must be iob2 or iob1, got {self.tag_scheme!r}"),
        (self.token_column != self.tag_column, "token_column and tag_column must differ"),
        (self.max_seq_length >= 3, f"max_seq_length ({self.max_seq_length}) must be >= 3"),
        (1 <= self.doc_stride <= self.max_seq_length - 2,
         f"doc_stride ({self.doc_stride}) must be in [1, max_seq_length - 2]"),
        (not self.eval_every_steps or self.do_eval,
         f"eval_every_steps ({self.eval_every_steps}) evaluates on the dev set: add do_eval"),
        (self.eval_batch_size >= 1 and self.eval_batch_size % num_replicas == 0,
         f"eval_batch_size ({self.eval_batch_size}) must be a multiple of the replicas "
         f"({num_replicas})"),
    ] + super().checks(num_replicas)


def read_inputs(config: NerRunConfig) -> dict[str, list[conll.Sentence]]:
  """Reads every file the run uses ("train", "dev", "test" as asked); nothing is built.

  Raises:
    FileNotFoundError, ValueError: a missing, malformed (`file:line`) or empty file.
  """
  inputs = {}
  for split, asked, path, tagged in (("train", config.do_train, config.train_file, True),
                                     ("dev", config.do_eval, config.eval_file, True),
                                     ("test", config.do_predict, config.predict_file, False)):
    if not asked:
      continue
    sentences = conll.read_conll(path, token_column=config.token_column,
                                 tag_column=config.tag_column if tagged else None,
                                 scheme=config.tag_scheme)
    if not sentences:
      raise ValueError(f"{path}: no sentences")
    logging.info(f"{path}: {len(sentences)} sentences, "
                 f"{sum(len(s.words) for s in sentences)} words")
    inputs[split] = sentences
  return inputs


def resolve_labels(config: NerRunConfig, inputs: dict[str, list[conll.Sentence]]
                   ) -> tuple[str, ...]:
  """The model's tags: the train file's, else the source model's (see the module).

  Raises:
    ValueError: none can be found, or the dev file has a tag the model lacks.
  """
  if "train" in inputs:
    labels = conll.tag_set(inputs["train"])
  elif config.init_tfbert:
    from tfbert.checkpoints import convert  # Only this branch reads the model file.
    model = convert.read_tfbert_model(config.init_tfbert)
    if not isinstance(model, BertTokenClassifier):
      raise ValueError(f"{config.init_tfbert} is a {type(model).__name__}, not a "
                       "BertTokenClassifier: train one first (--do_train)")
    labels = model.labels
  elif config.init_hf_dir and os.path.exists(os.path.join(config.init_hf_dir, "config.json")):
    with open(os.path.join(config.init_hf_dir, "config.json"), encoding="utf-8") as f:
      id2label = json.load(f).get("id2label") or {}
    labels = tuple(id2label[str(i)] for i in range(len(id2label)))
    if not labels or any(conll.check_tag(t) for t in labels):
      raise ValueError(f"{config.init_hf_dir}/config.json has no id2label of IOB tags "
                       f"({list(labels)}); give --train_file to train a tagger")
  else:
    raise ValueError("no labels: give train_file (with do_train), or a trained tagger "
                     "(init_tfbert or a Hugging Face BertForTokenClassification directory)")
  for sentence in inputs.get("dev", []):
    for tag, line in zip(sentence.tags, sentence.lines):
      if tag not in labels:
        raise ValueError(f"{config.eval_file}:{line}: tag {tag!r} is not one of the model's "
                         f"labels {list(labels)}")
  return labels


def run_ner(config: NerRunConfig, flagfile: Optional[str] = None) -> dict[str, Any]:
  """Trains, evaluates and/or predicts as `config` says; see the module docstring.

  Returns:
    dict with "train" (train_results.json's values), "eval" ({"dev": scores}) and
    "predictions" ({split: path}), each when asked for, and "written".
  """
  if config.eval_every_steps and not config.best_metric:
    config = dataclasses.replace(config, best_metric="f1")
  config = fine_tuning.resolve_casing(config)  # Before any work.
  inputs = read_inputs(config)  # Before anything is built or written.
  labels = resolve_labels(config, inputs)
  strategy = fine_tuning.start_run(config)
  tokenizer = WordPieceTokenizer(fine_tuning.resolve_vocab_file(config), config.do_lower_case)
  model = build_tagger(config, labels, strategy)
  fine_tuning.check_vocab_fits(model, tokenizer.vocab_size)
  export.check_seq_length(model, config.max_seq_length)
  with fine_tuning.claim_run_directory(model, config, tokenizer.vocab_file, flagfile, strategy):
    result = _run(model, strategy, tokenizer, config, inputs)
  result["written"] = fine_tuning.written_paths(config.output_dir, result["written"])
  return result


def _run(model: BertTokenClassifier, strategy: tf.distribute.Strategy,
         tokenizer: WordPieceTokenizer, config: NerRunConfig,
         inputs: dict[str, list[conll.Sentence]]) -> dict[str, Any]:
  """The work of `run_ner` in the claimed output directory (every worker; the chief writes)."""
  result, written = {}, []
  chief = fine_tuning.is_chief(strategy)
  dev = None
  if "dev" in inputs:
    dev = tagging_features.make_features(inputs["dev"], tokenizer, model.labels,
                                         config.max_seq_length, config.doc_stride)
  if config.do_train:
    evaluate_dev = None
    if config.eval_every_steps:
      def evaluate_dev():
        scores = evaluate(model, strategy, config, inputs["dev"], dev)[0]
        return {name: scores[name] for name in EVAL_SCALARS}
    result["train"] = train(model, strategy, tokenizer, config, inputs["train"], evaluate_dev)
    if not result["train"]["finished"]:  # stop_at_step: rerun without it to resume.
      result["written"] = ["checkpoints"]
      return result
    written += fine_tuning.save_trained(model, config, result["train"], chief)
  if chief:
    export.write_labels_file(config.output_dir, model.labels)
  written.append(LABELS_FILE)
  if config.do_eval:
    scores, tags = evaluate(model, strategy, config, inputs["dev"], dev)
    result["eval"] = {"dev": {**scores, "num_sentences": len(inputs["dev"])}}
    if chief:
      atomic.write_json(os.path.join(config.output_dir, "eval_results.json"), result["eval"])
      conll.write_conll(os.path.join(config.output_dir, "dev_predictions.conll"),
                        inputs["dev"], tags)
    written += ["eval_results.json", "dev_predictions.conll"]
  if config.do_predict:
    path = os.path.join(config.output_dir, "test_predictions.conll")
    tags = tag_sentences(model, strategy, tokenizer, config, inputs["test"])
    if chief:
      conll.write_conll(path, inputs["test"], tags)
    result["predictions"] = {"test": path}
    written.append(path)
  if not chief:  # Another worker: its checkpoints only.
    result["written"] = []
    return result
  if config.export_dir:
    tagging_export.export_tagger_saved_model(model, config.export_dir, tokenizer.vocab_file,
                                             config.do_lower_case, config.max_seq_length,
                                             export_dtype=config.export_dtype)
    written.append(config.export_dir)
  result["written"] = written
  return result


def build_tagger(config: NerRunConfig, labels: Sequence[str],
                 strategy: tf.distribute.Strategy) -> BertTokenClassifier:
  """The model, built in `strategy`'s scope and initialized as `config` says.

  Every encoder weight but the pooler must be in the source (the pooler, unused by
  tagging, keeps its fresh values when absent); the head loads when the source has one
  of shape [C, H].
  """
  bert_config, weights, source = fine_tuning.initial_weights(config)
  with strategy.scope():
    model = BertTokenClassifier(bert_config, labels, config.classifier_dropout)
    model.build()
  if weights is not None and not any(n.startswith("bert/pooler/") for n in weights):
    weights = {**weights, **{f"bert/pooler/dense/{n}": v.numpy() for n, v in
                             zip(("kernel", "bias"), model.encoder.pooler.weights)}}
    logging.info(f"{source} has no pooler (unused by tagging): it keeps its fresh values")
  fine_tuning.assign_initial_weights(model, weights, source, "classifier_head",
                                     head_is_trained=config.do_train)
  return model


def train(model: BertTokenClassifier, strategy: tf.distribute.Strategy,
          tokenizer: WordPieceTokenizer, config: NerRunConfig,
          sentences: list[conll.Sentence], evaluate_dev=None) -> dict[str, Any]:
  """Fine-tunes (or resumes) `model` on the windows of `sentences` in the training loop;
  returns the last logs, throughput and time."""
  features = tagging_features.make_features(sentences, tokenizer, model.labels,
                                            config.max_seq_length, config.doc_stride)
  n = len(features)
  total_steps = max(1, int(n * config.num_train_epochs) // config.train_batch_size)
  steps = min(total_steps, config.max_train_steps or total_steps)
  logging.info(f"training on {n} windows of {len(sentences)} sentences: {steps} of "
               f"{total_steps} applied steps of {config.train_batch_size}")
  start = time.perf_counter()
  summary = fine_tuning.train(model, strategy, config, train_examples(features), n, steps=steps,
                              total_steps=total_steps, evaluate=evaluate_dev)
  return {**summary, "examples": n, "seconds": time.perf_counter() - start}


def train_examples(features: tagging_features.TaggingFeatures):
  """(inputs, {"logits": label ids}) arrays, int32 [F, S] each."""
  return features.inputs, {"logits": features.label_ids}


def predict_label_ids(model: BertTokenClassifier, strategy: tf.distribute.Strategy,
                      features: tagging_features.TaggingFeatures,
                      batch_size: int) -> np.ndarray:
  """int [F, S]: the most probable label id at each position (sharded prediction)."""
  logits = fine_tuning.predict(model, strategy, features.inputs, batch_size)["logits"]
  return np.argmax(logits, axis=-1)


def tag_sentences(model: BertTokenClassifier, strategy: tf.distribute.Strategy,
                  tokenizer: WordPieceTokenizer, config: NerRunConfig,
                  sentences: list[conll.Sentence],
                  features: Optional[tagging_features.TaggingFeatures] = None
                  ) -> list[list[str]]:
  """Each sentence's predicted word tags."""
  if features is None:
    features = tagging_features.make_features(sentences, tokenizer, model.labels,
                                              config.max_seq_length, config.doc_stride,
                                              with_labels=False)
  predicted = predict_label_ids(model, strategy, features, config.eval_batch_size)
  return tagging_features.word_tags(features, predicted, sentences, model.labels)


def evaluate(model: BertTokenClassifier, strategy: tf.distribute.Strategy,
             config: NerRunConfig, sentences: list[conll.Sentence],
             features: tagging_features.TaggingFeatures) -> tuple[dict, list[list[str]]]:
  """(entity scores, predicted tags) of the dev sentences (their windows: `features`)."""
  predicted = predict_label_ids(model, strategy, features, config.eval_batch_size)
  tags = tagging_features.word_tags(features, predicted, sentences, model.labels)
  return tagging_metrics.entity_scores([s.tags for s in sentences], tags), tags
