"""SQuAD fine-tuning and prediction: google-research/bert `run_squad.py` in tfbert's loop.

`run_squad(SquadRunConfig)` runs `SquadTask`, the hooks of this task, through the one runner
(`tfbert.tasks.runner.run_task`). It does what the tool's flags ask, in this order:

0. Checks the configuration and reads the train and predict files (`read_inputs`): a
   malformed or empty file, or SQuAD 2.0 data without `version_2_with_negative`, is a
   ValueError naming the file and the JSON field before anything is built or written.
1. Builds a `BertSpanLabeler` (in the strategy's scope) and initializes its encoder from a
   Google checkpoint, a Hugging Face directory or a tfbert `.keras` file; the span head
   starts fresh unless the source has one (`cls/squad`). Then the output directory is
   claimed (`fine_tuning.claim_run_directory`: a lock, and a rerun must match the recorded
   run).
2. Training: features are cached as TFRecords in `output_dir`, shuffled
   (`fine_tuning.shuffled_batches`), and the model's `train_step` runs in the training loop
   (`fine_tuning.train`: one device, mirrored or multi-worker; checkpoints every
   `save_checkpoints_steps`, exact resume, SIGTERM saves and exits 75) with the
   `tfbert.training.optimization` stack (AdamW, linear warmup then linear decay to 0 after
   warmup, global-norm clipping after the all-reduce, mean accumulation, loss scaling for
   mixed_float16). The loss is google-research/bert's `(start_loss + end_loss) / 2`, each a
   mean sparse softmax cross-entropy over the batch. An epoch is one pass over the features
   (windows), as in Hugging Face's script; Google counts examples instead. With
   `eval_every_steps` (and `do_predict`) the predict file is answered and scored during
   training and the model of the best `best_metric` (default F1) kept in `best/`;
   `early_stopping_patience` may end the run early.
3. Prediction: the model's logits on the predict file's features (sharded over every
   replica of every worker, each feature scored once: `fine_tuning.predict`) go through
   `tfbert.squad.squad_postprocess`; predictions.json, nbest_predictions.json (v2.0:
   null_odds.json), predictions_source.json (the predict file they answer: a rerun on another
   file says whose predictions it replaces) and eval_results.json (the official scores, keyed
   by the predict file's name, beside other predict files' earlier scores; each records its
   file, so another file of that name says whose scores it replaces) are written. A
   v2.0 predict file also gets null_score_diff_threshold.json: the threshold of the best
   official F1
   (searched over every threshold, `null_threshold_report`), the applied one's score and the
   flag that applies the best (logged too). The run applies `null_score_diff_threshold` as
   given, to the predictions and to the export (`export_dir`, whose answer_question.json
   records it): the best value is applied by a rerun, never silently.

The run directory explains itself:

  output_dir/
    bert_config.json, run_config.json   the model and the resolved run configuration
    vocab.txt                           the vocabulary (casing: run_config's do_lower_case)
    train_features.{tf_record,json}     cached training features (reused when unchanged)
    predict_features.{tf_record,json}   cached prediction features
    checkpoints/                        the training loop's (`tfbert.training.training_loop`)
    train/, eval/                       TensorBoard: loss every `log_steps` applied steps;
                                        EM/F1 of the evaluations during training
    metrics.jsonl                       the same, one JSON line each
    best/                               model.keras + eval_results.json of the best evaluation
    model.keras                         the fine-tuned model, no optimizer state
                                        (`--init_tfbert` reads it)
    predictions.json, nbest_predictions.json, null_odds.json
    predictions_source.json             {"predictions.json": the file they answer}
    eval_results.json                   {predict file's name without extension: official
                                        scores, "step", "file" (its absolute path)}, one
                                        entry per predict file name scored
    null_score_diff_threshold.json      v2.0: the best null-score threshold, how to apply it

Only the chief (worker 0) writes these; another worker keeps its checkpoints and feature
caches in `.worker<i>/`. Every file appears under its final name only when complete
(`tfbert.runtime.atomic`). Rerunning a command reuses the feature caches and resumes from
the latest checkpoint (a finished run trains no more and predicts again); a rerun with
another model or schedule is refused (`--allow_config_change` to continue deliberately).

Shape legend: B batch, S max_seq_length.
"""

import dataclasses
import json
import os
from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.models import BertSpanLabeler
from tfbert.runtime import atomic, files, validation
from tfbert.serving import export
from tfbert.squad import (
  squad_data,
  squad_evaluation,
  squad_export,
  squad_features,
  squad_postprocess,
)
from tfbert.tasks import fine_tuning, predictions_source, runner
from tfbert.tasks.task import Outputs, RunContext, Task, TrainingData
from tfbert.text.tokenization import WordPieceTokenizer

INPUT_NAMES = export.FEATURE_NAMES  # input_ids, input_mask, segment_ids
# v2.0 predictions: the best null-score threshold and how to apply it (`null_threshold_report`).
NULL_THRESHOLD_FILE = "null_score_diff_threshold.json"
# Which predict file predictions.json (nbest_predictions.json, null_odds.json) answers.
PREDICTIONS_SOURCE_FILE = predictions_source.SOURCE_FILE
# What evaluation during training keeps the best model by: the official F1 (SQuAD's ranking).
DEFAULT_BEST_METRIC = "f1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SquadRunConfig(fine_tuning.FineTuningConfig):
  """Everything that defines a SQuAD run (see flags/run_squad_flags.py for each field)."""
  RERUN_MAY_CHANGE = fine_tuning.FineTuningConfig.RERUN_MAY_CHANGE | frozenset(
      {"do_predict", "predict_file", "predict_articles", "predict_batch_size",
       "postprocess"})
  INPUT_PATHS = fine_tuning.FineTuningConfig.INPUT_PATHS + ("train_file", "predict_file")
  READ_ONLY_WITH = {"do_predict": ("predict_file", "predict_articles")}
  # The windows and the postprocessing: both change the predictions and scores a predict-only
  # rerun would write over the run's (`fine_tuning.run_settings`). A new postprocessing (e.g.
  # a null_score_diff_threshold's how_to_apply) is applied by rerunning with --do_train: a
  # finished run trains no more, predicts again and records it.
  RUN_SETTINGS = fine_tuning.FineTuningConfig.RUN_SETTINGS | {"features", "postprocess"}
  do_predict: bool = False
  train_file: Optional[str] = None
  predict_file: Optional[str] = None
  train_articles: Optional[str] = None
  predict_articles: Optional[str] = None
  features: squad_features.FeatureConfig = squad_features.FeatureConfig()
  postprocess: squad_postprocess.PostprocessConfig = squad_postprocess.PostprocessConfig()
  predict_batch_size: int = 64
  # Off: the span softmax runs over every position, padding included, as in
  # google-research/bert; a cut batch would change it (`tfbert.tasks.length_buckets`).
  length_bucket: int = 0

  @classmethod
  def from_json(cls, text: str) -> "SquadRunConfig":
    """The inverse of `to_json`."""
    values = cls.without_unread_settings(json.loads(text))
    values["features"] = squad_features.FeatureConfig(**values["features"])
    values["postprocess"] = squad_postprocess.PostprocessConfig(**values["postprocess"])
    return cls(**values)

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    f = self.features
    window = f.max_seq_length - f.max_query_length - 3  # [CLS] query [SEP] window [SEP]
    return [
        (self.do_train or self.do_predict, "at least one of do_train, do_predict"),
        (not self.do_train or self.train_file, "do_train needs train_file"),
        (not self.do_predict or self.predict_file, "do_predict needs predict_file"),
        # squad_features cuts a longer stride to the window: no overlap, edge answers lost.
        (f.doc_stride <= window,
         f"doc_stride ({f.doc_stride}) is longer than the context window max_seq_length - "
         f"max_query_length - 3 = {f.max_seq_length} - {f.max_query_length} - 3 = {window}: "
         f"windows would not overlap and an answer across their edge would be in none; "
         f"use doc_stride <= {window}"),
        (self.predict_batch_size >= 1 and self.predict_batch_size % num_replicas == 0,
         f"predict_batch_size ({self.predict_batch_size}) must be >= 1 and a multiple of the "
         f"replicas ({num_replicas})"),
        (not self.eval_every_steps or self.do_predict,
         f"eval_every_steps ({self.eval_every_steps}) scores the predict file: add do_predict"),
        # 0 leaves no candidate span, so every answer is "" (the library allows it).
        (min(self.postprocess.n_best_size, self.postprocess.max_answer_length) >= 1,
         f"n_best_size ({self.postprocess.n_best_size}) and max_answer_length "
         f"({self.postprocess.max_answer_length}) must be >= 1"),
    ] + super().checks(num_replicas)


def article_slice(spec: Optional[str]) -> slice:
  """Parses "START:END" (Python slice semantics: "0:38", "-10:", ":5") into a slice.

  Raises:
    ValueError: if `spec` is not two optional integers around one colon.
  """
  if not spec:
    return slice(None)
  parts = spec.split(":")
  try:
    if len(parts) != 2:
      raise ValueError
    start, end = (int(p) if p.strip() else None for p in parts)
  except ValueError:
    raise ValueError(f"article slice must be START:END (e.g. 0:38 or -10:), got {spec!r}") from None
  return slice(start, end)


def read_squad_articles(path: str, articles: Optional[str],
                        is_training: bool) -> tuple[squad_data.SquadDataset, dict[str, Any]]:
  """Reads a SQuAD file, keeping only the articles `articles` ("START:END") selects.

  Returns:
    (the parsed dataset, the selected JSON, which is what the evaluation scores against).

  Raises:
    ValueError: for a malformed file or a slice that selects no article.
  """
  data = squad_data.load_json(path)
  source = path
  if articles and isinstance(data, dict) and isinstance(data.get("data"), list):
    total = len(data["data"])
    data = {**data, "data": data["data"][article_slice(articles)]}
    if not data["data"]:
      raise ValueError(f"{path}: articles {articles!r} select none of its {total} articles")
    source = f"{path} (articles {articles} of {total})"
  return squad_data.parse_squad(data, source, is_training), data


def read_inputs(config: SquadRunConfig) -> dict[str, tuple[squad_data.SquadDataset, Any]]:
  """Reads and checks the files the run will use; nothing is built or written.

  Returns:
    {"train": ..., "predict": ...} for the files asked for, each as `read_squad_articles`
    returns it.

  Raises:
    FileNotFoundError, ValueError: naming the file (and JSON field) that does not fit.
  """
  post = config.postprocess
  ignored = squad_postprocess.ignored_threshold(post.version_2_with_negative,
                                               post.null_score_diff_threshold, "--")
  if ignored:
    logging.warning(ignored)
  inputs = {}
  if config.do_train:
    inputs["train"] = read_squad_articles(config.train_file, config.train_articles, True)
  if config.do_predict:
    inputs["predict"] = read_squad_articles(config.predict_file, config.predict_articles,
                                            False)
  # Evaluating a trained run without training: its recorded settings stay (`run_settings`).
  evaluated_run = (config.output_dir if not config.do_train
                   and fine_tuning.recorded_settings(config.output_dir) is not None else None)
  for dataset, _ in inputs.values():
    check_version(dataset, config.postprocess.version_2_with_negative, evaluated_run)
  if "predict" in inputs:  # It is scored as its "version" says.
    squad_evaluation.check_scorable(inputs["predict"][0])
  return inputs


def check_version(dataset: squad_data.SquadDataset, version_2_with_negative: bool,
                  evaluated_run: Optional[str] = None) -> None:
  """SQuAD 2.0 data needs the flag; SQuAD 1.1 data with it gets a note.

  `evaluated_run`: the output directory of a trained run this run evaluates without
  training, whose recorded settings (version_2_with_negative among them) cannot change in
  place: the way to predict 2.0 data with its model is a new --output_dir starting from its
  model.keras, which the message names (passing the flag there is refused).

  Without the flag, unanswerable questions would train the model to answer "" while the
  postprocessing never may, and a v2.0 predict file could not be scored. A 1.1 file with
  the flag is allowed: the flag only lets predictions be "" (which v1.1 scoring counts as
  wrong), and training a 2.0 model on 1.1 data, or seeing how often it abstains on 1.1
  questions, are real uses (google-research/bert's reader raises a KeyError: no
  is_impossible field).
  """
  is_v2 = dataset.is_v2 or dataset.unanswerable
  if version_2_with_negative and not is_v2:
    logging.info(f"note: {dataset.path} is SQuAD 1.1 (every question has an answer); with "
                 "--version_2_with_negative predictions may still be \"\" (no answer)")
  elif is_v2 and not version_2_with_negative:
    why = ("version: 2.0, SQuAD 2.0 data" if dataset.is_v2 else
           f"{dataset.unanswerable}: true, an unanswerable (SQuAD 2.0) question")
    if evaluated_run is None:
      raise ValueError(f"{dataset.path}: {why}: pass --version_2_with_negative")
    record = os.path.join(evaluated_run, fine_tuning.RUN_CONFIG_FILE)
    model_file = os.path.join(evaluated_run, fine_tuning.MODEL_FILE)
    raise ValueError(
        f"{dataset.path}: {why}, and {record} records the trained run this run evaluates "
        "with version_2_with_negative: false (SQuAD 1.1; a recorded setting, not changed in "
        f"place): to predict it as SQuAD 2.0, pass another --output_dir with "
        f"--init_tfbert={model_file} --version_2_with_negative"
        + ("" if files.isfile(model_file) else " (written when the run finishes training)")
        + ", or a SQuAD 1.1 --predict_file")


class SquadTask(Task):
  """SQuAD span labelling as `tfbert.tasks.runner.run_task`'s hooks (see the module)."""
  head = "span_head"
  uses_pooler = False  # Its outputs read the sequence output only.
  model_class = BertSpanLabeler
  config_class = SquadRunConfig

  def default_best_metric(self, config: SquadRunConfig) -> str:
    return DEFAULT_BEST_METRIC

  def read_inputs(self, config: SquadRunConfig) -> dict[str, tuple[squad_data.SquadDataset, Any]]:
    return read_inputs(config)

  def evaluation_metrics(self, config: SquadRunConfig, inputs) -> list[str]:
    """`evaluate`'s scalars on the predict file read (`eval_scalar_names`).

    Raises:
      ValueError: the predict file has no answers (it is predicted, not scored), so an
        evaluation during training would have nothing to score.
    """
    del config
    dataset, selected = inputs["predict"]
    if not dataset.has_answers:
      raise ValueError(f"{dataset.path}: no question has answers, so evaluation during "
                       "training (--eval_every_steps) has nothing to score: give a predict "
                       "file with answers, or drop --eval_every_steps")
    return eval_scalar_names(dataset, selected)

  def eval_files(self, config: SquadRunConfig, inputs) -> list[str]:
    """The predict file, which `evaluate` answers and scores."""
    return [config.predict_file] if "predict" in inputs else []

  def max_seq_length(self, config: SquadRunConfig) -> int:
    return config.features.max_seq_length

  def segments(self, config: SquadRunConfig) -> int:
    del config
    return 2  # [CLS] question [SEP] context [SEP].

  def build_model(self, config: SquadRunConfig, bert_config, labels) -> BertSpanLabeler:
    return BertSpanLabeler(bert_config)

  def head_is_trained(self, config: SquadRunConfig) -> bool:
    return config.do_train or not config.do_predict

  def train_data(self, context: RunContext) -> TrainingData:
    """The train file's features, cached as TFRecords in this process's directory."""
    dataset = context.inputs["train"][0]
    converted = squad_features.cached_features(
        os.path.join(context.work_dir, "train_features"), dataset.examples, context.tokenizer,
        context.config.features, is_training=True)
    report_unk_share(dataset.path, converted.features, context.tokenizer)
    n = len(converted.features)
    return TrainingData(
        train_examples(converted.features), n,
        f"{len(dataset.examples)} questions ({len(dataset.skipped)} + "
        f"{len(converted.skipped)} skipped), {n} features")

  def _predict_features(self, context: RunContext) -> list[squad_features.SquadFeature]:
    """The predict file's features, made (and cached) once for every evaluation."""
    if "predict" not in context.cache:
      context.cache["predict"] = predict_features(context.tokenizer, context.config,
                                                  context.inputs["predict"][0],
                                                  context.work_dir)
    return context.cache["predict"]

  def _eval_positions(self, context: RunContext) -> dict[tuple[int, int], tuple[int, int]]:
    """The predict windows' training positions (`eval_positions`), made (and cached) once."""
    if "eval_positions" not in context.cache:
      context.cache["eval_positions"] = eval_positions(context.tokenizer, context.config,
                                                       context.inputs["predict"][0],
                                                       context.work_dir)
    return context.cache["eval_positions"]

  def evaluate(self, context: RunContext) -> dict[str, float]:
    dataset, selected = context.inputs["predict"]
    answered = answer(context.model, context.strategy, context.config, dataset,
                      self._predict_features(context), selected,
                      positions=self._eval_positions(context))
    return eval_scalars(answered["scores"], answered["loss"])

  def outputs(self, context: RunContext) -> Outputs:
    out = Outputs()
    if context.config.do_predict:
      out.result = predict(context.model, context.strategy, context.tokenizer, context.config,
                           *context.inputs["predict"], context.work_dir, write=context.chief,
                           features=self._predict_features(context))
      out.written += list(out.result["predictions"].values())
      if context.chief:
        out.written.append(PREDICTIONS_SOURCE_FILE)
      if out.result.get("scores") is not None:  # Keyed by the file scored (the runner's rule).
        # It records that file: scoring another of that name says whose scores it replaces.
        articles = getattr(context.config, "predict_articles", None)
        out.eval_results = {scores_key(context.config.predict_file, articles): {
            **out.result["scores"], "file": files.absolute(context.config.predict_file),
            **({"articles": articles} if articles else {})}}
    return out

  def export(self, context: RunContext) -> None:
    c = context.config
    squad_export.export_squad_saved_model(
        context.model, c.export_dir, context.tokenizer.vocab_file, c.do_lower_case,
        c.features.max_seq_length, c.features.max_query_length,
        c.postprocess.max_answer_length,
        # The flag's value, as the predictions applied: null_score_diff_threshold.json
        # proposes a better one for a rerun, never silently replaces it.
        version_2_with_negative=c.postprocess.version_2_with_negative,
        null_score_diff_threshold=c.postprocess.null_score_diff_threshold,
        export_dtype=c.export_dtype, doc_stride=c.features.doc_stride)


def run_squad(config: SquadRunConfig, flagfile: Optional[str] = None) -> dict[str, Any]:
  """Trains and/or predicts as `config` says; see the module docstring.

  `flagfile` (the tool's resolved flags) is recorded as `output_dir/flags.txt` by a training
  run; `--flagfile=` replays it.

  Returns:
    dict with "train" (steps, loss, examples_per_second) when training and "predictions"
    (file paths) and "scores" (official EM/F1) when predicting; for a v2.0 predict file,
    "null_score_diff_threshold" (`null_threshold_report`).
  """
  return runner.run_task(SquadTask(), config, flagfile)


def build_span_labeler(config: SquadRunConfig,
                       strategy: tf.distribute.Strategy) -> BertSpanLabeler:
  """The model, built in `strategy`'s scope and initialized as `config` says.

  The source's encoder weights must all be there and fit exactly; tensors the model has no
  weight for (pretraining heads, the pooler's absence) are reported as unused, and the span
  head keeps its fresh initialization when the source has no `cls/squad`.
  """
  return runner.build_model(SquadTask(), config, None, strategy)


def train_examples(features: list[squad_features.SquadFeature]):
  """(inputs, labels) arrays of training features: int32 [N, S] inputs by name and
  {"start_logits", "end_logits"}: int32 [N] positions."""
  inputs = {name: np.stack([getattr(f, name) for f in features]).astype(np.int32)
            for name in INPUT_NAMES}
  labels = {"start_logits": np.array([f.start_position for f in features], np.int32),
            "end_logits": np.array([f.end_position for f in features], np.int32)}
  return inputs, labels


def train_dataset(features: list[squad_features.SquadFeature], batch_size: int,
                  seed: int) -> tf.data.Dataset:
  """Endless (inputs, labels) batches of training features for Keras `fit`.

  Each epoch is a permutation of the features fixed by (`seed`, epoch), the stream the
  training loop reads (`tfbert.tasks.fine_tuning.shuffled_batches`).

  Returns:
    tf.data.Dataset of ({input_ids, input_mask, segment_ids}: int32 [B, S],
    {start_logits, end_logits}: int32 [B] positions).
  """
  return fine_tuning.shuffled_batches(train_examples(features), len(features), batch_size, seed)


def predict_features(tokenizer: WordPieceTokenizer, config: SquadRunConfig,
                     dataset: squad_data.SquadDataset,
                     work_dir: str) -> list[squad_features.SquadFeature]:
  """The predict file's features, cached in `work_dir`."""
  features = squad_features.cached_features(
      os.path.join(work_dir, "predict_features"), dataset.examples, tokenizer,
      config.features, is_training=False).features
  report_unk_share(dataset.path, features, tokenizer)
  return features


def report_unk_share(path: str, features: list[squad_features.SquadFeature],
                     tokenizer: WordPieceTokenizer) -> None:
  """`fine_tuning.report_unk_share` of a SQuAD file's windows (their question and context
  word pieces)."""
  if features:
    fine_tuning.report_unk_share(
        path, {"input_ids": np.stack([f.input_ids for f in features]),
               "input_mask": np.stack([f.input_mask for f in features])}, tokenizer)


def eval_positions(tokenizer: WordPieceTokenizer, config: SquadRunConfig,
                   dataset: squad_data.SquadDataset,
                   work_dir: str) -> dict[tuple[int, int], tuple[int, int]]:
  """The training labels of the predict file's windows, for its held-out loss.

  The windows are the predict features' (the same windowing), labelled as training labels
  them (`is_training=True`: the first gold answer's token span, (0, 0) in a window without
  it or for an unanswerable question). An answer covering no wordpiece gets no labels.

  Returns:
    {(example_index, doc_span_index): (start_position, end_position)}.
  """
  converted = squad_features.cached_features(
      os.path.join(work_dir, "eval_label_features"), dataset.examples, tokenizer,
      config.features, is_training=True)
  return {(f.example_index, f.doc_span_index): (f.start_position, f.end_position)
          for f in converted.features}


def answer(model: BertSpanLabeler, strategy: tf.distribute.Strategy, config: SquadRunConfig,
           dataset: squad_data.SquadDataset, features: list[squad_features.SquadFeature],
           selected: dict[str, Any],
           positions: Optional[dict[tuple[int, int], tuple[int, int]]] = None
           ) -> dict[str, Any]:
  """Predictions of the predict file's questions and, when it has answers, their official
  scores: {"predictions": [...], "scores": {...} or None, "loss": float or None}. Every
  worker computes them (prediction is sharded over every replica: `fine_tuning.predict`).

  `positions` (`eval_positions`) gives "loss": the training loss's definition
  (`BertSpanLabeler.example_losses`) averaged over the labelled windows.
  """
  inputs = {name: np.stack([getattr(f, name) for f in features]) for name in INPUT_NAMES}
  outputs = fine_tuning.predict(model, strategy, inputs, config.predict_batch_size,
                               config.length_bucket)
  loss = None
  if positions is not None:
    keep = [i for i, f in enumerate(features) if (f.example_index, f.doc_span_index) in positions]
    labels = np.array([positions[(features[i].example_index, features[i].doc_span_index)]
                       for i in keep], np.int32).reshape(-1, 2)
    loss = fine_tuning.eval_loss(
        model, {name: outputs[name][keep] for name in ("start_logits", "end_logits")},
        {"start_logits": labels[:, 0], "end_logits": labels[:, 1]})
  predictions = squad_postprocess.postprocess_predictions(
      dataset.examples, features, outputs["start_logits"], outputs["end_logits"],
      config.postprocess)
  scores = official_scores(dataset, selected, {p.qas_id: p.text for p in predictions},
                           {p.qas_id: p.null_score_diff for p in predictions})
  return {"predictions": predictions, "scores": scores, "loss": loss}


def no_span_warning(predictions: Sequence[Any],
                    postprocess: squad_postprocess.PostprocessConfig) -> Optional[str]:
  """What a SQuAD 1.1 prediction says when some questions got "" because no span of the
  best starts and ends was valid (v2.0's "" is a no-answer prediction, said otherwise);
  None when every question has an answer."""
  if postprocess.version_2_with_negative:
    return None
  empty = sum(1 for p in predictions if not p.text)
  if not empty:
    return None
  return (f"{empty} of {len(predictions)} questions have no valid answer span among the "
          f"{postprocess.n_best_size} best starts and ends (--n_best_size) of at most "
          f"{postprocess.max_answer_length} word pieces (--max_answer_length): their answer "
          "is \"\"; a larger --n_best_size or --max_answer_length gives them one")


def scores_key(predict_file: str, articles: Optional[str] = None) -> str:
  """The key of `predict_file`'s scores in eval_results.json: its name without extension
  ("dev-v1.1"), as run_classifier keys its dev files; with `--predict_articles`, the range
  too ("dev-v1.1[1:2]"), so a part's scores never stand in for the whole file's."""
  name = os.path.splitext(os.path.basename(predict_file))[0]
  return f"{name}[{articles}]" if articles else name


def replace_predictions_source(output_dir: str, predict_file: str,
                               articles: Optional[str] = None) -> None:
  """Before the run writes predictions of `predict_file` (its `articles` range, if any) in
  `output_dir`: says in the log when they replace another file's or another range's
  (`predictions_source.replacing`), whose record is dropped until
  `record_predictions_source` writes the new one."""
  predictions_source.replacing(
      output_dir, "predictions.json", predictions_source.describe(predict_file, articles or ""),
      also=["nbest_predictions.json"],
      note="; eval_results.json keeps each file's scores under its name without extension")


def record_predictions_source(output_dir: str, predict_file: str,
                              articles: Optional[str] = None) -> str:
  """Records `predict_file` (and its `articles` range, if any) as the source of the
  predictions.json just written in `output_dir` (`predictions_source.record`); returns the
  record's path."""
  return predictions_source.record(output_dir, "predictions.json",
                                   predictions_source.describe(predict_file, articles or ""))


def official_scores(dataset: squad_data.SquadDataset, selected: dict[str, Any],
                    texts: dict[str, str], null_odds: dict[str, float]
                    ) -> Optional[dict[str, Any]]:
  """The official scores of the answers `texts` ({question id: text}) to `dataset`, whose
  JSON is `selected`: v2.0 with the null odds (so with best_*), v1.1 without; None when
  no question has an answer to score against."""
  if not any(e.answers or e.is_impossible for e in dataset.examples):
    return None
  return squad_evaluation.evaluate(selected, texts, dataset.version,
                                   null_odds if dataset.is_v2 else None)


def eval_scalars(scores: dict[str, Any], loss: Optional[float]) -> dict[str, Any]:
  """The scalars of one evaluation during training: the official `scores` and the
  held-out "loss"."""
  return {**scores, "loss": loss}


def eval_scalar_names(dataset: squad_data.SquadDataset, selected: dict[str, Any]) -> list[str]:
  """The scalars an evaluation during training returns on the predict file (`dataset`, its
  JSON `selected`), known before any work: v1.1 exact_match, f1; v2.0 the official keys,
  HasAns_* only when the file has answerable questions and NoAns_* when it has
  unanswerable ones, best_* (the null odds); and "loss". Found by scoring one question of
  each kind in the file (the official script tells them apart by their answers) with the
  evaluation's own code (`official_scores`, `eval_scalars`): the names cannot drift from
  it. (`squad_data.parse_squad` gives every question answers or is_impossible.)"""
  kinds = {}  # Answered or not -> (its paragraph's context, the question).
  for article in selected["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        kinds.setdefault(bool(qa["answers"]), (paragraph["context"], qa))
  sample = {"data": [{"paragraphs": [{"context": context, "qas": [qa]}]}
                     for context, qa in kinds.values()]}
  ids = [qa["id"] for _, qa in kinds.values()]
  scores = official_scores(dataset, sample, dict.fromkeys(ids, ""), dict.fromkeys(ids, 0.0))
  return list(eval_scalars(scores, 0.0))


def predict(model: BertSpanLabeler, strategy: tf.distribute.Strategy,
            tokenizer: WordPieceTokenizer, config: SquadRunConfig,
            dataset: squad_data.SquadDataset, selected: dict[str, Any], work_dir: str,
            write: bool = True, features: Optional[list] = None) -> dict[str, Any]:
  """Answers the predict file's `dataset` and scores the answers against `selected` (its
  JSON, as `read_squad_articles` returns it); with `write`, writes the prediction files and
  (v2.0) null_score_diff_threshold.json (the runner writes the scores as eval_results.json).
  `features`: the dataset's, when already made."""
  if features is None:
    features = predict_features(tokenizer, config, dataset, work_dir)
  answered = answer(model, strategy, config, dataset, features, selected)
  unanswered = no_span_warning(answered["predictions"], config.postprocess)
  if unanswered:
    logging.warning("%s: %s", config.predict_file, unanswered)
  if write:
    replace_predictions_source(config.output_dir, config.predict_file, config.predict_articles)
    paths = squad_postprocess.write_predictions(answered["predictions"], config.output_dir)
    record_predictions_source(config.output_dir, config.predict_file, config.predict_articles)
  else:
    paths = {}
  result = {"predictions": paths}
  if answered["scores"] is not None:
    result["scores"] = answered["scores"]
    if write and dataset.is_v2:  # Scored as v2.0, with the null odds.
      report = null_threshold_report(selected, answered["predictions"], dataset.version,
                                     config.postprocess.null_score_diff_threshold)
      paths[NULL_THRESHOLD_FILE] = atomic.write_json(
          os.path.join(config.output_dir, NULL_THRESHOLD_FILE), report)
      logging.info(
          f"SQuAD v2.0: best F1 {report['best_f1']:.2f} at null_score_diff_threshold "
          f"{report['best_f1_thresh']!r}; these predictions applied "
          f"{report['applied_threshold']!r} (F1 {report['f1_at_applied_threshold']:.2f}). "
          f"To apply the best, rerun the prediction with {report['how_to_apply']} "
          f"(see {paths[NULL_THRESHOLD_FILE]}; in a trained run, with --do_train: a finished "
          "run trains no more)")
      result["null_score_diff_threshold"] = report
  return result


def null_threshold_report(selected: dict[str, Any],
                          predictions: list[squad_postprocess.SquadPrediction],
                          version: str, applied: float) -> dict[str, Any]:
  """The best SQuAD v2.0 null-score threshold for `predictions`, and the applied one's score.

  A question is answered "" when its null score - best span score (null_odds.json) exceeds
  the threshold. The official search (`best_f1_thresh`) scores each candidate threshold T
  with the questions whose null odds exceed T as "" and the others as their prediction. On
  predictions already thresholded at `applied` (those eval_results.json scores), a question
  above `applied` has no span left to score, so no T above `applied` can look better: the
  search is blind there. It is run here on every question's best non-null answer (the
  n-best's first non-empty text, which `applied` chose between), so every T is seen; it
  agrees with eval_results.json's when the best T is at most `applied`.

  The official search starts from "every question \"\"" and calls that threshold 0.0;
  when that start stays best, no threshold 0.0 gives it, so the largest float below every
  null odds is reported instead (it makes every answer "").

  Args:
    selected: the scored dataset JSON (`read_squad_articles`).
    predictions: v2.0 predictions (`null_score_diff` set) of its questions.
    version: the dataset's SQuAD version ("2.0").
    applied: the `null_score_diff_threshold` the predictions were made with.

  Returns:
    the contents of null_score_diff_threshold.json: "best_f1", "best_f1_thresh",
    "best_exact", "best_exact_thresh" (official search over every threshold),
    "applied_threshold", "f1_at_applied_threshold", "exact_at_applied_threshold" (the
    official scores of the predictions as written, without the script's rescoring of null
    odds above 1.0), "how_to_apply" (the flag) and "what" (this explained).
  """
  null_odds = {p.qas_id: p.null_score_diff for p in predictions}
  answer_all = {p.qas_id: next((e.text for e in p.nbest if e.text), "") for p in predictions}
  search = squad_evaluation.evaluate(selected, answer_all, version, null_odds)
  # Without null odds: the official script would score a question whose odds exceed 1.0
  # as "", which is not what predictions.json says when `applied` > 1.0.
  as_written = squad_evaluation.evaluate(selected, {p.qas_id: p.text for p in predictions},
                                         version)
  report = {
      "what": "SQuAD v2.0 no-answer threshold (--null_score_diff_threshold): a question is "
              "answered \"\" when its null score - best span score (null_odds.json) exceeds "
              "it. best_f1_thresh maximizes the official F1 on this predict file (best_f1); "
              "applied_threshold is the one these predictions (and an export of this run) "
              "used, scoring f1_at_applied_threshold. To apply the best, rerun the "
              "prediction or export with how_to_apply (in a trained run, with --do_train: "
              "a finished run trains no more, and records it).",
      "applied_threshold": applied,
      "f1_at_applied_threshold": as_written["f1"],
      "exact_at_applied_threshold": as_written["exact"]}
  for metric in ("f1", "exact"):  # (The all-"" start's threshold: `squad_evaluation`.)
    report[f"best_{metric}"] = search[f"best_{metric}"]
    report[f"best_{metric}_thresh"] = search[f"best_{metric}_thresh"]
  report["how_to_apply"] = f"--null_score_diff_threshold={report['best_f1_thresh']!r}"
  return report
