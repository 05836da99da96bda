"""Named-entity recognition fine-tuning: CoNLL in, entity F1 and CoNLL predictions out.

`run_ner(NerRunConfig)` runs `NerTask`, the hooks of this task, through the one runner
(`tfbert.tasks.runner.run_task`). It does what `tools/run_ner.py`'s flags ask, in this order:

0. Checks the configuration and reads every CoNLL file (`tfbert.tagging.conll`: a
   malformed line or an IOB2 violation is an error naming `file:line`, before anything is
   built or written). The label list is `O` then `B-X`, `I-X` for every type X of the train
   file (sorted), else the one of the model read with `--init_tfbert`, else the
   `id2label` of a Hugging Face `BertForTokenClassification` directory. A train file
   whose tags are a subset of those of the tagger it starts from (labels matched by name)
   keeps the tagger's labels (continued fine-tuning on data lacking a type; a log line
   names the tags the data lacks) unless `--reinit_head`.
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
   entity-level micro precision/recall/F1 in percent, per type, token accuracy). An entity
   type of the dev file outside the labels is valid: its gold entities are misses (as in
   conlleval and seqeval) and its words carry no loss; one log line names such types.
4. Prediction (`do_predict`): the predict file's words (its tag column, if any, is not
   read) are tagged.
Tagging is sharded over every replica of every worker (`fine_tuning.predict`); only the
chief writes.

The run directory (besides what every fine-tuning run writes: bert_config.json,
run_config.json, vocab.txt, checkpoints/, train/, eval/, metrics.jsonl, best/,
model.keras, train_results.json):

    eval_results.json        {"dev": {precision, recall, f1, accuracy, counts, per_type,
                             num_sentences, file: the dev file scored}}
    dev_predictions.conll    `word<TAB>tag` per line of the dev file's words, sentences
    test_predictions.conll   separated by empty lines: `tools/evaluate_ner.py GOLD FILE`
                             scores them against a gold file by line position
    predictions_source.json  {"dev_predictions.conll": the --eval_file tagged,
                              "test_predictions.conll": the --predict_file tagged}
    labels.txt               the tag of each label id

Shape legend: F windows, S max_seq_length, C labels.
"""

import dataclasses
import json
import os
from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.checkpoints import model_paths
from tfbert.models import BertTokenClassifier
from tfbert.runtime import files, validation
from tfbert.tagging import conll, tagging_export, tagging_features, tagging_metrics
from tfbert.tasks import fine_tuning, predictions_source, runner, task
from tfbert.text.tokenization import WordPieceTokenizer

LABELS_FILE = tagging_export.LABELS_FILE  # Also in the run directory.
# The per-type and count entries of the scores are not TensorBoard scalars.
EVAL_SCALARS = ("precision", "recall", "f1", "accuracy", "loss")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NerRunConfig(fine_tuning.FineTuningConfig):
  """Everything that defines a tagging run (see flags/run_ner_flags.py)."""
  RERUN_MAY_CHANGE = fine_tuning.FineTuningConfig.RERUN_MAY_CHANGE | frozenset(
      {"do_eval", "do_predict", "eval_file", "predict_file", "eval_batch_size"})
  INPUT_PATHS = fine_tuning.FineTuningConfig.INPUT_PATHS + (
      "train_file", "eval_file", "predict_file")
  READ_ONLY_WITH = {"do_eval": ("eval_file",), "do_predict": ("predict_file",)}
  RUN_DEFINES = frozenset({"tag_scheme"})  # What the labels mean.
  RUN_SETTINGS = fine_tuning.FineTuningConfig.RUN_SETTINGS | RUN_DEFINES | {
      "max_seq_length", "doc_stride"}
  DERIVED_DEFAULTS = {"doc_stride": ("max_seq_length // 2", lambda c: c.window_stride)}
  train_file: Optional[str] = None
  eval_file: Optional[str] = None
  predict_file: Optional[str] = None
  do_eval: bool = False
  do_predict: bool = False
  token_column: int = 0
  tag_column: int = -1
  tag_scheme: str = "iob2"
  max_seq_length: int = 128
  doc_stride: Optional[int] = None  # None: max_seq_length // 2 (`window_stride`).
  classifier_dropout: float = 0.1
  eval_batch_size: int = 64

  @property
  def window_stride(self) -> int:
    """`doc_stride`, or by default half of `max_seq_length`: the default follows the window
    length, so any `max_seq_length` works without setting it."""
    return self.max_seq_length // 2 if self.doc_stride is None else self.doc_stride

  @classmethod
  def from_json(cls, text: str) -> "NerRunConfig":
    """The inverse of `to_json`."""
    return cls(**cls.without_unread_settings(json.loads(text)))

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    return [
        (self.do_train or self.do_eval or self.do_predict,
         "at least one of do_train, do_eval, do_predict"),
        (not self.do_train or self.train_file, "do_train needs train_file"),
        (not self.do_eval or self.eval_file, "do_eval needs eval_file"),
        (not self.do_predict or self.predict_file, "do_predict needs predict_file"),
        (self.tag_scheme in ("iob2", "iob1"),
         f"tag_scheme must be iob2 or iob1, got {self.tag_scheme!r}"),
        # A file to predict has no tag column to clash with (sweep 19 P4).
        (not (self.do_train or self.do_eval) or self.token_column != self.tag_column,
         f"--token_column ({self.token_column}"
         f"{'' if self.given('token_column', self.token_column, 0) else ', its default'}) "
         f"and --tag_column ({self.tag_column}"
         f"{'' if self.given('tag_column', self.tag_column, -1) else ', its default: the last'}"
         ") are the same column: the word and its tag must be two columns; pass a "
         "--token_column or --tag_column that names the other"),
        (self.max_seq_length >= 3, f"max_seq_length ({self.max_seq_length}) must be >= 3"),
        (0.0 <= self.classifier_dropout < 1.0,
         f"classifier_dropout ({self.classifier_dropout}) must be in [0, 1)"),
        (self.doc_stride is None or 1 <= self.doc_stride <= self.max_seq_length - 2,
         f"doc_stride ({self.doc_stride}) must be in [1, max_seq_length - 2]"),
        (not self.eval_every_steps or self.do_eval,
         f"eval_every_steps ({self.eval_every_steps}) evaluates on the dev set: add do_eval"),
        (self.eval_batch_size >= 1, f"eval_batch_size ({self.eval_batch_size}) must be >= 1"),
        (self.eval_batch_size % num_replicas == 0,
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
  """The model's tags: the train file's (the source tagger's when the train file's are a
  subset of them: `source_tags`), else the source model's (see the module).

  A dev file may hold entity types the model lacks (`unseen_types`): valid data, scored as
  conlleval and seqeval do (each such gold entity is a miss); one log line names them.

  Raises:
    ValueError: none can be found.
  """
  if "train" in inputs:
    labels = conll.tag_set(inputs["train"])
    theirs = None if config.reinit_head else source_tags(config)
    if theirs and set(labels) < set(theirs):
      lacking = [tag for tag in theirs if tag not in labels]
      logging.info(f"{config.train_file} has no {', '.join(lacking)}: the head keeps the "
                   f"{len(theirs)} labels of {config.init_tfbert or config.init_hf_dir} "
                   f"({', '.join(theirs)}), matched by name; this training does not see those "
                   "tags (pass --reinit_head for a fresh head of the train file's labels)")
      labels = theirs
  elif config.init_tfbert:
    from tfbert.checkpoints import convert  # Only this branch reads the model file.
    model = convert.read_tfbert_model(config.init_tfbert)
    if not isinstance(model, BertTokenClassifier):
      raise ValueError(f"{config.init_tfbert} is a {type(model).__name__}, not a "
                       "BertTokenClassifier: train one first (--do_train)")
    labels = model.labels
  elif config.init_hf_dir and files.exists(os.path.join(config.init_hf_dir, "config.json")):
    from tfbert.checkpoints import huggingface  # Only this branch reads the directory.
    labels = huggingface.read_hf_task(config.init_hf_dir).labels or ()
    if not labels or any(conll.check_tag(t) for t in labels):
      raise ValueError(f"{config.init_hf_dir}/config.json has no id2label of IOB tags "
                       f"({list(labels)}); give --train_file to train a tagger")
  else:
    raise ValueError(_no_labels(config))
  unseen = unseen_types(inputs.get("dev", []), labels)
  if unseen:
    source = (f"the train file {config.train_file}" if "train" in inputs
              else config.init_tfbert or f"{config.init_hf_dir}/config.json")
    logging.warning(
        f"{config.eval_file}: entity type(s) the model has no labels for (its labels come "
        f"from {source}): " + ", ".join(f"{kind} (first at line {line})"
                                        for kind, line in unseen.items())
        + "; their gold entities are scored as misses (the model never predicts them)")
  return labels


def source_tags(config: NerRunConfig) -> Optional[tuple[str, ...]]:
  """The labels of the tagger the run starts from: a `BertTokenClassifier` read with
  `--init_tfbert`, or the IOB `id2label` of an `--init_hf_dir` `BertForTokenClassification`;
  None for any other source (its head is checked when it loads: `tfbert.tasks.source_heads`).
  """
  if config.init_tfbert:
    from tfbert.checkpoints import convert  # Only a run from a tfbert model reads it.
    model = convert.read_tfbert_model(config.init_tfbert)
    return tuple(model.labels) if isinstance(model, BertTokenClassifier) else None
  if config.init_hf_dir and files.exists(os.path.join(config.init_hf_dir, "config.json")):
    from tfbert.checkpoints import huggingface  # Only a run from a directory reads it.
    task = huggingface.read_hf_task(config.init_hf_dir)
    if (task.architecture == "BertForTokenClassification" and task.labels
        and not any(conll.check_tag(t) for t in task.labels)):
      return tuple(task.labels)
  return None


def unseen_types(sentences: Sequence[conll.Sentence], labels: Sequence[str]) -> dict[str, int]:
  """Entity type -> first line, of each type in `sentences`' tags with a tag outside
  `labels` (an evaluation file's types the model never learned)."""
  known, unseen = set(labels), {}
  for sentence in sentences:
    for tag, line in zip(sentence.tags, sentence.lines):
      if tag not in known:
        unseen.setdefault(conll.entity_type(tag), line)
  return unseen


def _no_labels(config: NerRunConfig) -> str:
  """Why a run has no labels: a run directory holding checkpoints of a run that stopped
  before writing `model.keras` and `labels.txt` (its labels are recorded nowhere else: its
  checkpoints hold weights only) says so and how to finish it; else what to pass."""
  own = (fine_tuning.trained_model(config.output_dir) if files.isdir(config.output_dir)
         else None)
  if own is not None and own.checkpoint and not own.model_file:
    return (f"no labels: {config.output_dir} holds the checkpoints of a tagging run (latest "
            f"{own.describe()}) that stopped before writing its {fine_tuning.MODEL_FILE} and "
            f"{LABELS_FILE}; its labels are recorded nowhere else (a checkpoint holds weights "
            "only). Finish the run first: rerun it with --do_train (it resumes from its "
            "checkpoint), then evaluate")
  return ("no labels: give train_file (with do_train), or a trained tagger (init_tfbert or a "
          "Hugging Face BertForTokenClassification directory)")


class NerTask(task.Task):
  """Named-entity tagging as `tfbert.tasks.runner.run_task`'s hooks (see the module)."""
  head = "classifier_head"
  uses_pooler = False  # Its outputs read the sequence output only.
  model_class = BertTokenClassifier
  config_class = NerRunConfig

  def default_best_metric(self, config: NerRunConfig) -> str:
    return "f1"

  def read_inputs(self, config: NerRunConfig) -> dict[str, list[conll.Sentence]]:
    return read_inputs(config)

  def evaluation_metrics(self, config: NerRunConfig, inputs) -> list[str]:
    """`evaluate`'s scalars, whatever the dev file holds: `EVAL_SCALARS`."""
    del config, inputs
    return list(EVAL_SCALARS)

  def eval_files(self, config: NerRunConfig, inputs) -> list[str]:
    """The dev file (`eval_file`) `evaluate` tags and scores."""
    return [config.eval_file] if "dev" in inputs else []

  def labels(self, config: NerRunConfig, inputs) -> tuple[str, ...]:
    return resolve_labels(config, inputs)

  def build_model(self, config: NerRunConfig, bert_config, labels) -> BertTokenClassifier:
    return BertTokenClassifier(bert_config, labels, config.classifier_dropout)

  def train_data(self, context: task.RunContext) -> task.TrainingData:
    c, sentences = context.config, context.inputs["train"]
    features = tagging_features.make_features(sentences, context.tokenizer,
                                              context.model.labels, c.max_seq_length,
                                              c.window_stride)
    fine_tuning.report_unk_share(c.train_file, features.inputs, context.tokenizer)
    return task.TrainingData(train_examples(features), len(features),
                             f"{len(features)} windows of {len(sentences)} sentences")

  def _dev(self, context: task.RunContext) -> tagging_features.TaggingFeatures:
    """The dev windows, made once for every evaluation."""
    if "dev" not in context.cache:
      c = context.config
      context.cache["dev"] = tagging_features.make_features(
          context.inputs["dev"], context.tokenizer, context.model.labels, c.max_seq_length,
          c.window_stride, unseen_tags_ignored=True)  # Scored as misses: resolve_labels.
      fine_tuning.report_unk_share(c.eval_file, context.cache["dev"].inputs, context.tokenizer)
    return context.cache["dev"]

  def evaluate(self, context: task.RunContext) -> dict[str, float]:
    scores = evaluate(context.model, context.strategy, context.config, context.inputs["dev"],
                      self._dev(context))[0]
    return {name: scores[name] for name in EVAL_SCALARS}

  def outputs(self, context: task.RunContext) -> task.Outputs:
    c, chief, inputs = context.config, context.chief, context.inputs
    out = task.Outputs(written=[LABELS_FILE])
    if chief:
      model_paths.write_labels_file(c.output_dir, context.model.labels)
    if c.do_eval:
      scores, tags = evaluate(context.model, context.strategy, c, inputs["dev"],
                              self._dev(context))
      out.result["eval"] = out.eval_results = {
          "dev": {**scores, "num_sentences": len(inputs["dev"]),
                  "file": files.absolute(c.eval_file)}}
      if chief:  # Recorded as the test file's (another dev file's are named with its
        # scores: `fine_tuning.merge_eval_results`).
        path = os.path.join(c.output_dir, "dev_predictions.conll")
        predictions_source.written(path, predictions_source.describe(c.eval_file),
                                   lambda: conll.write_conll(path, inputs["dev"], tags),
                                   say=False)
      out.written.append("dev_predictions.conll")
    if c.do_predict:
      path = os.path.join(c.output_dir, "test_predictions.conll")
      tags = tag_sentences(context.model, context.strategy, context.tokenizer, c,
                           inputs["test"])
      if chief:  # Which file they predict is recorded (a rerun on another says it replaces).
        predictions_source.written(path, predictions_source.describe(c.predict_file),
                                   lambda: conll.write_conll(path, inputs["test"], tags))
      out.result["predictions"] = {"test": path}
      out.written.append(path)
    if c.do_eval or c.do_predict:  # Which file each predictions file is of.
      out.written.append(predictions_source.SOURCE_FILE)
    return out

  def export(self, context: task.RunContext) -> None:
    c = context.config
    tagging_export.export_tagger_saved_model(
        context.model, c.export_dir, context.tokenizer.vocab_file, c.do_lower_case,
        c.max_seq_length, export_dtype=c.export_dtype)


def run_ner(config: NerRunConfig, flagfile: Optional[str] = None) -> dict[str, Any]:
  """Trains, evaluates and/or predicts as `config` says; see the module docstring.

  Returns:
    dict with "train" (train_results.json's values), "eval" ({"dev": scores}) and
    "predictions" ({split: path}), each when asked for, and "written".
  """
  return runner.run_task(NerTask(), config, flagfile)


def build_tagger(config: NerRunConfig, labels: Sequence[str],
                 strategy: tf.distribute.Strategy) -> BertTokenClassifier:
  """The model, built in `strategy`'s scope and initialized as `config` says.

  Every encoder weight but the pooler must be in the source (the pooler, unused by
  tagging, keeps its fresh values when absent); the head loads when the source has one
  of shape [C, H].
  """
  return runner.build_model(NerTask(), config, labels, strategy)


def train_examples(features: tagging_features.TaggingFeatures):
  """(inputs, {"logits": label ids}) arrays, int32 [F, S] each."""
  return features.inputs, {"logits": features.label_ids}


def predict_label_ids(model: BertTokenClassifier, strategy: tf.distribute.Strategy,
                      features: tagging_features.TaggingFeatures,
                      batch_size: int, length_bucket: int = 0) -> np.ndarray:
  """int [F, S]: the most probable label id at each position (sharded prediction; with
  `length_bucket`, positions past a window's bucket get label id 0 and no word)."""
  logits = fine_tuning.predict(model, strategy, features.inputs, batch_size,
                               length_bucket)["logits"]
  return np.argmax(logits, axis=-1)


def tag_sentences(model: BertTokenClassifier, strategy: tf.distribute.Strategy,
                  tokenizer: WordPieceTokenizer, config: NerRunConfig,
                  sentences: list[conll.Sentence],
                  features: Optional[tagging_features.TaggingFeatures] = None
                  ) -> list[list[str]]:
  """Each sentence's predicted word tags."""
  if features is None:
    features = tagging_features.make_features(sentences, tokenizer, model.labels,
                                              config.max_seq_length, config.window_stride,
                                              with_labels=False)
    fine_tuning.report_unk_share(config.predict_file, features.inputs, tokenizer)
  predicted = predict_label_ids(model, strategy, features, config.eval_batch_size,
                                config.length_bucket)
  return tagging_features.word_tags(features, predicted, sentences, model.labels)


def evaluate(model: BertTokenClassifier, strategy: tf.distribute.Strategy,
             config: NerRunConfig, sentences: list[conll.Sentence],
             features: tagging_features.TaggingFeatures) -> tuple[dict, list[list[str]]]:
  """(entity scores, predicted tags) of the dev sentences (their windows: `features`).

  The scores are `tagging_metrics.entity_scores`' (percent) and `loss`: the training loss's
  definition (`BertTokenClassifier.example_losses`) averaged over the dev windows.
  """
  logits = fine_tuning.predict(model, strategy, features.inputs,
                               config.eval_batch_size, config.length_bucket)["logits"]
  tags = tagging_features.word_tags(features, np.argmax(logits, axis=-1), sentences,
                                    model.labels)
  scores = tagging_metrics.entity_scores([s.tags for s in sentences], tags)
  scores["loss"] = fine_tuning.eval_loss(model, {"logits": logits}, features.label_ids)
  return scores, tags
