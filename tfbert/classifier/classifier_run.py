"""Sentence(-pair) classification fine-tuning: google-research/bert `run_classifier.py`.

`run_classifier(ClassifierRunConfig)` runs `ClassifierTask`, the hooks of this task, through the
one runner (`tfbert.tasks.runner.run_task`). It does what the tool's flags ask, in this order:

0. Checks the configuration and reads every input file (`read_inputs`): a missing,
   malformed (`file:line`) or empty file is an error before anything is built or written,
   as are a `max_seq_length` below the task's packing (3, or 5 for pairs) and two dev/test
   files whose predictions would share a name (`check_distinct_outputs`).
1. Builds a `BertClassifier` (C = the task's label count, 1 for STS-B regression) in the
   strategy's scope and initializes its encoder (pooler included) from a Google
   checkpoint, a Hugging Face directory or a tfbert `.keras` file (`tfbert.tasks.fine_tuning`);
   the classifier head (`output_weights`, `output_bias`, unscoped as in Google's code)
   starts fresh unless the source has one. Then the output directory is claimed
   (`fine_tuning.claim_run_directory`: a lock, and a rerun must match the recorded run).
2. Training (`do_train`): the train examples (`tfbert.classifier.glue_data`) are packed in the graph
   (`tfbert.classifier.classifier_features`), shuffled (`fine_tuning.shuffled_batches`), and
   the model's `train_step` runs in the training loop (`fine_tuning.train`:
   one device, mirrored or multi-worker; checkpoints every `save_checkpoints_steps`, exact
   resume, SIGTERM saves and exits 75) with the `tfbert.training.optimization` stack (AdamW,
   linear warmup then linear decay to 0 after warmup, global-norm clipping after the
   all-reduce, mean accumulation, loss scaling for mixed_float16). The loss is the mean
   softmax cross-entropy of the logits (regression: the mean squared error of the single
   output), as in google-research/bert (Hugging Face for regression). Steps:
   int(examples x epochs) // train_batch_size, as Google counts. With `eval_every_steps`
   (and `do_eval`) the dev set is scored during training and the best model by
   `best_metric` (default: the task's first metric) kept in `best/`;
   `early_stopping_patience` may end the run early.
3. Evaluation (`do_eval`): every dev file of the task (MNLI: matched and mismatched) is
   predicted and scored with the task's GLUE metrics (`tfbert.classifier.glue_metrics`) in
   percent, as GLUE's leaderboard (and every tfbert task) reports them, and with `loss`: the
   training loss's definition (`BertClassifier.example_losses`) averaged over the dev set.
4. Prediction (`do_predict`): every test file is predicted.
Prediction is sharded over every replica of every worker (`fine_tuning.predict`: each
example scored once); only the chief (worker 0) writes.
Predictions are written in GLUE's submission format (`index<TAB>prediction`, the label
name or the score).

The run directory explains itself:

  output_dir/
    bert_config.json, run_config.json   the model and the resolved run configuration
    vocab.txt                           the vocabulary (casing: run_config's do_lower_case)
    checkpoints/                        the training loop's (`tfbert.training.training_loop`);
                                        another worker keeps its own in .worker<i>/
    train/, eval/                       TensorBoard: loss every `log_steps` applied steps;
                                        the evaluations during training
    metrics.jsonl                       the same, one JSON line each
    best/                               model.keras + eval_results.json of the best evaluation
    model.keras                         the fine-tuned model, no optimizer state
                                        (`--init_tfbert` reads it)
    train_results.json                  last logs, steps, examples/s, seconds
    eval_results.json                   {dev split: {metric: value, "num_examples": N,
                                          "file": the dev file scored}}
    <split>_predictions.tsv             per dev/test file ("dev", "dev_matched", "test", ...)
    predictions_source.json             {"<split>_predictions.tsv": the file predicted}
                                        (`tfbert.tasks.predictions_source`)

Every file appears under its final name only when complete (`tfbert.runtime.atomic`);
`train_results.json` is written after `model.keras`. Rerunning a command resumes from the
latest checkpoint (a finished run trains no more and evaluates and predicts again); a rerun
with another model or schedule is refused (`--allow_config_change` to continue
deliberately), and a run that only evaluates or predicts with
`--init_tfbert=<output_dir>/model.keras` needs no other model flag.

Shape legend: B batch, S max_seq_length, N examples, C classes.
"""

import dataclasses
import json
import os
from typing import Any, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.classifier import classifier_export, classifier_features, glue_data, glue_metrics
from tfbert.models import BertClassifier
from tfbert.runtime import atomic, files, validation
from tfbert.tasks import fine_tuning, predictions_source, runner
from tfbert.tasks.task import Outputs, RunContext, Task, TrainingData
from tfbert.text.tokenization import WordPieceTokenizer


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierRunConfig(fine_tuning.FineTuningConfig):
  """Everything that defines a classifier run (see flags/run_classifier_flags.py)."""
  RERUN_MAY_CHANGE = fine_tuning.FineTuningConfig.RERUN_MAY_CHANGE | frozenset(
      {"do_eval", "do_predict", "eval_file", "predict_file", "eval_batch_size",
       "skip_malformed_rows"})
  INPUT_PATHS = fine_tuning.FineTuningConfig.INPUT_PATHS + (
      "data_dir", "train_file", "eval_file", "predict_file")
  READ_ONLY_WITH = {"do_eval": ("eval_file",), "do_predict": ("predict_file",)}
  RUN_DEFINES = frozenset({"task_name", "custom"})  # The labels and pair arity.
  RUN_SETTINGS = fine_tuning.FineTuningConfig.RUN_SETTINGS | RUN_DEFINES | {"max_seq_length"}
  task_name: Optional[str]  # None: the run's own (run_config.json) without do_train.
  data_dir: Optional[str] = None
  train_file: Optional[str] = None
  eval_file: Optional[str] = None
  predict_file: Optional[str] = None
  custom: Optional[glue_data.CustomFormat] = None
  do_eval: bool = False
  do_predict: bool = False
  max_train_examples: Optional[int] = None
  skip_malformed_rows: bool = False
  max_seq_length: int = 128
  classifier_dropout: float = 0.1
  eval_batch_size: int = 64

  @classmethod
  def from_json(cls, text: str) -> "ClassifierRunConfig":
    """The inverse of `to_json`."""
    values = cls.without_unread_settings(json.loads(text))
    if values.get("custom") is not None:
      custom = values["custom"]
      values["custom"] = glue_data.CustomFormat(**{
          **custom, "labels": tuple(custom["labels"] or ())})
    return cls(**values)

  def task(self) -> glue_data.Task:
    """The `glue_data.Task` of `task_name` (and `custom` for "custom")."""
    return glue_data.get_task(self.task_name, self.custom)

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    # Without training and without a task name (or "custom" without its format), the run's
    # own run_config.json may name the task (`fine_tuning.run_settings` takes it, with
    # `custom`); `read_inputs` asks for it if nothing did, before any work.
    task = None
    if self.do_train or (self.task_name and not (
        self.task_name.lower() == glue_data.CUSTOM_TASK and self.custom is None)):
      task = self.task()
    return [
        (self.do_train or self.do_eval or self.do_predict,
         "at least one of do_train, do_eval, do_predict"),
        (not self.do_train or self.train_file or self.data_dir,
         "do_train needs data_dir or train_file"),
        (not self.do_eval or self.eval_file or self.data_dir,
         "do_eval needs data_dir or eval_file"),
        (not self.do_predict or self.predict_file or self.data_dir,
         "do_predict needs data_dir or predict_file"),
        (self.max_train_examples is None or self.max_train_examples >= 1,
         "max_train_examples must be >= 1"),
        min_seq_length_check(self.max_seq_length, self.task_name, task),
        (0.0 <= self.classifier_dropout < 1.0,
         f"classifier_dropout ({self.classifier_dropout}) must be in [0, 1)"),
        (not self.eval_every_steps or self.do_eval,
         f"eval_every_steps ({self.eval_every_steps}) evaluates on the dev set: add do_eval"),
        (self.eval_batch_size >= 1, f"eval_batch_size ({self.eval_batch_size}) must be >= 1"),
        (self.eval_batch_size % num_replicas == 0,
         f"eval_batch_size ({self.eval_batch_size}) must be a multiple of the replicas "
         f"({num_replicas})"),
    ] + super().checks(num_replicas)


def min_seq_length_check(max_seq_length: int, task_name: Optional[str],
                         task: Optional[glue_data.Task]) -> validation.Check:
  """The rule of `max_seq_length` against the task's arity: >= 3 for one text
  (`[CLS] a [SEP]`), >= 5 for pairs (`[CLS] a [SEP] b [SEP]`); without a task known yet,
  the single-text bound (the run's recorded task is checked when it is taken)."""
  if task is not None and task.is_pair:
    minimum, layout = 5, "sentence pairs, [CLS] a [SEP] b [SEP]"
  else:
    minimum, layout = 3, "[CLS] text [SEP]"
  named = f" for task {task_name}" if task is not None else ""
  return (max_seq_length >= minimum,
          f"--max_seq_length ({max_seq_length}) is too short{named} ({layout}): pass "
          f"--max_seq_length >= {minimum}")


def check_distinct_outputs(config: ClassifierRunConfig,
                           paths: dict[str, list[str]]) -> None:
  """Two different dev/test files never write one `<split>_predictions.tsv` (the name is
  the file's, `glue_data.split_name`): the second would replace the first silently.

  Args:
    config: the run's config (its flags name the files).
    paths: {"dev": [paths], "test": [paths]} the run reads.

  Raises:
    ValueError: naming both files and the output they would share.
  """
  flags = {"dev": "--eval_file" if config.eval_file else "the dev file (--data_dir)",
           "test": "--predict_file" if config.predict_file else "the test file (--data_dir)"}
  seen = {}
  for split in ("dev", "test"):
    for path in paths.get(split, ()):
      name = f"{glue_data.split_name(path)}_predictions.tsv"
      if name not in seen:
        seen[name] = (split, path)
        continue
      first_split, first = seen[name]
      if _same_file(first, path):
        continue  # One file asked for twice: the same predictions under its name.
      raise ValueError(
          f"{flags[first_split]} {first} and {flags[split]} {path} would both write "
          f"{os.path.join(config.output_dir, name)} (predictions are named after their "
          "file): rename one of the files")


def _same_file(a: str, b: str) -> bool:
  """Whether two paths name one file (a local one through its links; a URL as written)."""
  if files.is_url(a) or files.is_url(b):
    return files.absolute(a) == files.absolute(b)
  return os.path.realpath(a) == os.path.realpath(b)


class ClassifierTask(Task):
  """GLUE-style classification (and regression) as `tfbert.tasks.runner.run_task`'s hooks.

  Args:
    glue_task: the `glue_data.Task` whose model is built (default: the config's).
  """
  head = "classifier_head"
  model_class = BertClassifier
  config_class = ClassifierRunConfig
  generic_task_names = frozenset({glue_data.CUSTOM_TASK})

  def __init__(self, glue_task: Optional[glue_data.Task] = None):
    self.glue_task = glue_task

  def default_best_metric(self, config: ClassifierRunConfig) -> str:
    return default_best_metric(config.task())

  def read_inputs(self, config: ClassifierRunConfig) -> dict[str, list]:
    return read_inputs(config.task(), config)

  def evaluation_metrics(self, config: ClassifierRunConfig, inputs) -> list[str]:
    """`evaluate`'s scalars over the dev files read (`eval_scalars`): the task's metrics
    and "loss" of the first, "<split>_<name>" of the others (MNLI's dev_mismatched)."""
    names = list(eval_scalars({glue_data.split_name(path): dict.fromkeys(
        file_score_names(config.task()), 0.0) for path, _ in inputs["dev"]}))
    task = config.task()
    if task.is_regression and inputs["dev"]:  # Constant targets: a correlation is always NaN.
      path, examples = inputs["dev"][0]  # The best metric is the first file's.
      glue_metrics.check_correlation_defined(
          config.best_metric, classifier_features.label_array(examples, task), path, names)
    return names

  def eval_files(self, config: ClassifierRunConfig, inputs) -> list[str]:
    """The dev files `evaluate` scores (`--eval_file`, or the task's in `--data_dir`)."""
    del config
    return [path for path, _ in inputs["dev"]]

  def labels(self, config: ClassifierRunConfig, inputs) -> Optional[tuple[str, ...]]:
    """The task's class names (None for regression)."""
    del inputs
    return (self.glue_task or config.task()).labels

  def segments(self, config: ClassifierRunConfig) -> int:
    return 2 if (self.glue_task or config.task()).is_pair else 1

  def train_files(self, config: ClassifierRunConfig, inputs) -> list[str]:
    """The train file `read_inputs` read (`--train_file`, or the task's in `--data_dir`)."""
    del config
    return [path for path, _ in inputs["train"]]

  def build_model(self, config: ClassifierRunConfig, bert_config, labels) -> BertClassifier:
    """C = the task's label count (1 for regression), its class names (`labels`, the hook
    above) kept in the model; the pooler must be in the source (unless `reinit_head`)."""
    return BertClassifier(bert_config, (self.glue_task or config.task()).num_classes,
                          config.classifier_dropout, labels=labels)

  def train_data(self, context: RunContext) -> TrainingData:
    c, task = context.config, context.config.task()
    examples = context.inputs["train"][0][1]
    features = classifier_features.examples_to_features(examples, context.tokenizer,
                                                        c.max_seq_length, task.is_pair)
    fine_tuning.report_unk_share(context.inputs["train"][0][0], features, context.tokenizer)
    labels = classifier_features.label_array(examples, task)
    return TrainingData(train_examples(features, labels), len(examples),
                        f"{len(examples)} examples")

  def evaluate(self, context: RunContext) -> dict[str, float]:
    c = context.config
    return eval_scalars(evaluate(context.model, context.strategy, context.tokenizer, c.task(),
                                 c, context.inputs["dev"], write=False))

  def outputs(self, context: RunContext) -> Outputs:
    c, chief = context.config, context.chief
    out = Outputs()
    if c.do_eval:
      scores = evaluate(context.model, context.strategy, context.tokenizer, c.task(), c,
                        context.inputs["dev"], write=chief)
      scored = {glue_data.split_name(path): files.absolute(path)
                for path, _ in context.inputs["dev"]}
      # Each split records its file: evaluating another one says whose it replaces.
      out.result["eval"] = out.eval_results = {
          split: {**values, "file": scored[split]} for split, values in scores.items()}
      out.written += [f"{split}_predictions.tsv" for split in out.eval_results]
    if c.do_predict:
      out.result["predictions"] = predict_test_files(
          context.model, context.strategy, context.tokenizer, c.task(), c,
          context.inputs["test"], write=chief)
      # One file given as both dev and test file (`check_distinct_outputs`) is listed once.
      out.written += [path for path in out.result["predictions"].values()
                      if os.path.basename(path) not in out.written]
    if c.do_eval or c.do_predict:  # Which file each predictions file is of.
      out.written.append(predictions_source.SOURCE_FILE)
    return out

  def export(self, context: RunContext) -> None:
    c, task = context.config, context.config.task()
    classifier_export.export_classifier_saved_model(
        context.model, c.export_dir, context.tokenizer.vocab_file, c.do_lower_case,
        c.max_seq_length, task.labels, task.is_pair, export_dtype=c.export_dtype)


def run_classifier(config: ClassifierRunConfig, flagfile: Optional[str] = None) -> dict[str, Any]:
  """Trains, evaluates and/or predicts as `config` says; see the module docstring.

  `flagfile` (the tool's resolved flags) is recorded as `output_dir/flags.txt` by a training
  run; `--flagfile=` replays it.

  Returns:
    dict with "train" (train_results.json's values), "eval" ({split: metrics}) and
    "predictions" ({split: path of the TSV}), each when asked for.
  """
  return runner.run_task(ClassifierTask(), config, flagfile)


def build_classifier(config: ClassifierRunConfig, task: glue_data.Task,
                     strategy: tf.distribute.Strategy) -> BertClassifier:
  """The model, built in `strategy`'s scope and initialized as `config` says.

  Every encoder weight, the pooler included (the head reads `pooled_output`), must be in
  the source; tensors the model has no weight for are reported as unused. The head is
  loaded when the source has one (then its shape must be [C, H]), else starts fresh;
  `config.reinit_head` starts it fresh whatever the source has (and the pooler, when the
  source has none).

  Raises:
    ValueError: when the source lacks an encoder weight, or shapes differ (a head of
      another C names `--reinit_head`).
  """
  hooks = ClassifierTask(task)
  return runner.build_model(hooks, config, hooks.labels(config, None), strategy)


def read_task_file(task: glue_data.Task, path: str, split: str, config: ClassifierRunConfig,
                   limit: Optional[int] = None,
                   recorded_header: Optional[glue_data.RecordedHeader] = None
                   ) -> list[glue_data.InputExample]:
  """The examples of one file; prints skipped rows; raises ValueError if there are none."""
  read = glue_data.read_examples(task, path, split, skip_malformed=config.skip_malformed_rows,
                                 limit=limit, recorded_header=recorded_header)
  for message in read.skipped:
    logging.warning("skipped malformed row: %s", message)
  if not read.examples:
    raise ValueError(f"{path}: no examples")
  logging.info(f"{path}: {len(read.examples)} examples, {len(read.skipped)} malformed rows skipped")
  return read.examples


def read_inputs(task: glue_data.Task, config: ClassifierRunConfig
                ) -> dict[str, list[tuple[str, list[glue_data.InputExample]]]]:
  """Reads every file the run will use (train, dev, test as asked); nothing is built.

  Returns:
    {"train", "dev", "test"}: [(path, examples)] per file of each split asked for.

  Raises:
    FileNotFoundError, ValueError: a missing, malformed or empty file (named, with its
      line for a malformed row); two dev/test files whose predictions would share a name
      (`check_distinct_outputs`), before any file is read.
  """
  split_files = {split: glue_data.task_files(task, config.data_dir, split, file)
                 for split, asked, file in (("dev", config.do_eval, config.eval_file),
                                            ("test", config.do_predict, config.predict_file))
                 if asked}
  check_distinct_outputs(config, split_files)  # Before any file is read.
  inputs = {"train": [], "dev": [], "test": []}
  if config.do_train:
    path = glue_data.task_files(task, config.data_dir, "train", config.train_file)[0]
    inputs["train"].append(
        (path, read_task_file(task, path, "train", config, config.max_train_examples)))
  recorded = recorded_header(task, config) if split_files else None
  for split, paths in split_files.items():
    inputs[split] = [(path, read_task_file(task, path, split, config, None, recorded))
                     for path in paths]
  return inputs


def recorded_header(task: glue_data.Task, config: ClassifierRunConfig
                    ) -> Optional[glue_data.RecordedHeader]:
  """A custom task's --custom_header taken from the run's record (`fine_tuning.run_settings`),
  not given on this command line, for the files it did not train on: with the recorded
  train file's line 1 when that file still reads (`glue_data.read_examples`). None when
  training, without a header, or when the header was given here (or how this command was
  spelled is unknown: `given_settings` None)."""
  if (config.do_train or task.name != glue_data.CUSTOM_TASK or not task.layout.has_header
      or config.given_settings is None
      or glue_data.CustomFormat.FLAGS["has_header"].lstrip("-") in config.given_settings):
    return None
  source = os.path.join(config.output_dir, fine_tuning.RUN_CONFIG_FILE)
  train_header = None
  try:
    record = fine_tuning.recorded_settings(config.output_dir) or {}
  except ValueError:
    record = {}
  train_file = record.get("train_file")
  if not train_file and record.get("data_dir"):
    train_file = glue_data.task_files(task, record["data_dir"], "train")[0]
  if train_file:
    row = glue_data.first_row(train_file, task)
    if row is not None:
      train_header = (train_file, row)
  fmt = config.custom
  # The custom flags are read as a whole when one is given: the run's others, spelled out.
  others = [fmt.describe_part(name, getattr(fmt, name)) for name in fmt.FLAGS
            if name != "has_header" and getattr(fmt, name) != _field_default(fmt, name)]
  return glue_data.RecordedHeader(source, train_header, " ".join(others))


def _field_default(value: Any, name: str) -> Any:
  """The default of dataclass `value`'s field `name`."""
  field = next(f for f in dataclasses.fields(value) if f.name == name)
  return field.default


def default_best_metric(task: glue_data.Task) -> str:
  """The task's first GLUE metric (MRPC: accuracy; CoLA: matthews_corrcoef; STS-B: pearson)."""
  return task.metrics[0]


def file_score_names(task: glue_data.Task) -> tuple[str, ...]:
  """The scores `evaluate` gives each dev file (besides "num_examples"): the task's GLUE
  metrics (`glue_metrics.compute_metrics` returns one per name) and "loss"."""
  return (*task.metrics, "loss")


def eval_scalars(results: dict[str, dict[str, float]]) -> dict[str, float]:
  """`evaluate`'s {split: metrics} as one dict of scalars: the first dev file's metrics
  under their names, another file's as "<split>_<metric>" (MNLI's dev_mismatched); not
  the count nor the scored "file" (`ClassifierTask.outputs`)."""
  scalars = {}
  for position, (split, metrics) in enumerate(results.items()):
    for name, value in metrics.items():
      if name not in ("num_examples", "file"):
        scalars[name if position == 0 else f"{split}_{name}"] = float(value)
  return scalars


def train_examples(features: dict[str, np.ndarray], labels: np.ndarray):
  """(inputs, {"logits": targets}) arrays: class ids [N], or float32 scores as [N, 1]."""
  return features, {"logits": labels[:, None] if labels.dtype == np.float32 else labels}


def train_dataset(features: dict[str, np.ndarray], labels: np.ndarray, batch_size: int,
                  seed: int) -> tf.data.Dataset:
  """Endless (inputs, labels) batches, each epoch a permutation fixed by (`seed`, epoch).

  Args:
    features: int32 [N, S] arrays by feature name.
    labels: int32 class ids [N] or float32 scores [N].
    batch_size: examples per micro-batch (all replicas).
    seed: the shuffling seed.

  Returns:
    tf.data.Dataset of ({input_ids, input_mask, segment_ids}: int32 [B, S],
    {"logits": int32 [B] class ids, or float32 [B, 1] scores to match the [B, 1] output}).
  """
  return fine_tuning.shuffled_batches(train_examples(features, labels), len(labels), batch_size,
                                      seed)


def predict_logits(model: BertClassifier, strategy: tf.distribute.Strategy,
                   examples: list[glue_data.InputExample], tokenizer: WordPieceTokenizer,
                   task: glue_data.Task, config: ClassifierRunConfig,
                   path: Optional[str] = None) -> np.ndarray:
  """float32 logits [N, C] of the examples, sharded over the replicas (`fine_tuning.predict`);
  the [UNK] share of their word pieces is reported as `path`'s (`report_unk_share`)."""
  features = classifier_features.examples_to_features(examples, tokenizer,
                                                      config.max_seq_length, task.is_pair)
  if path is not None:
    fine_tuning.report_unk_share(path, features, tokenizer)
  return fine_tuning.predict(model, strategy, features, config.eval_batch_size,
                             config.length_bucket)["logits"]


def decisions(logits: np.ndarray, task: glue_data.Task) -> np.ndarray:
  """int class ids [N] (argmax) or float scores [N] (regression) of logits [N, C]."""
  return logits[:, 0] if task.is_regression else np.argmax(logits, axis=1)


def evaluate(model: BertClassifier, strategy: tf.distribute.Strategy,
             tokenizer: WordPieceTokenizer, task: glue_data.Task, config: ClassifierRunConfig,
             files: list[tuple[str, list[glue_data.InputExample]]], write: bool = True
             ) -> dict[str, dict[str, float]]:
  """Scores every dev file's examples (`files`: [(path, examples)]); writes
  `<split>_predictions.tsv` (with `write`); returns {split: {metric (percent): value,
  "loss": the mean training loss, "num_examples": N}}."""
  results = {}
  for path, examples in files:
    logits = predict_logits(model, strategy, examples, tokenizer, task, config, path)
    predicted = decisions(logits, task)
    labels = classifier_features.label_array(examples, task)
    split = glue_data.split_name(path)
    results[split] = {
        **glue_metrics.in_percent(glue_metrics.compute_metrics(task.metrics, predicted, labels,
                                                               source=path)),
        "loss": fine_tuning.eval_loss(model, {"logits": logits},
                                      train_examples({}, labels)[1]),
        "num_examples": len(examples)}
    if write:  # Recorded as the test files' are: a predict run of the same split says whose
      # predictions it replaces (and of the same file, nothing: sweep 32, A19). Another dev
      # file's are named with its scores (`fine_tuning.merge_eval_results`).
      out = os.path.join(config.output_dir, f"{split}_predictions.tsv")
      predictions_source.written(out, predictions_source.describe(path),
                                 lambda: write_predictions(out, examples, predicted, task),
                                 say=False)
  return results


def predict_test_files(model: BertClassifier, strategy: tf.distribute.Strategy,
                       tokenizer: WordPieceTokenizer, task: glue_data.Task,
                       config: ClassifierRunConfig,
                       files: list[tuple[str, list[glue_data.InputExample]]],
                       write: bool = True) -> dict[str, str]:
  """Predicts every test file's examples (`files`: [(path, examples)]) into
  `<split>_predictions.tsv` (with `write`); returns {split: path}."""
  paths = {}
  for path, examples in files:
    predicted = decisions(predict_logits(model, strategy, examples, tokenizer, task, config,
                                         path), task)
    split = glue_data.split_name(path)
    paths[split] = os.path.join(config.output_dir, f"{split}_predictions.tsv")
    if write:  # Which file they predict is recorded (a rerun on another says it replaces).
      predictions_source.written(
          paths[split], predictions_source.describe(path),
          lambda: write_predictions(paths[split], examples, predicted, task))
  return paths


def write_predictions(path: str, examples: list[glue_data.InputExample],
                      predicted: np.ndarray, task: glue_data.Task) -> str:
  """GLUE's submission format: `index<TAB>prediction` (label name or score); returns path."""
  lines = ["index\tprediction\n"]
  for example, value in zip(examples, predicted):
    shown = f"{float(value):.6g}" if task.is_regression else task.labels[int(value)]
    lines.append(f"{example.index}\t{shown}\n")
  return atomic.write_text(path, "".join(lines))
