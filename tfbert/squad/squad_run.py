"""SQuAD fine-tuning and prediction: google-research/bert `run_squad.py` on Keras `fit`.

`run_squad(SquadRunConfig)` does what the tool's flags ask, in this order:

0. Checks the configuration and reads the train and predict files (`read_inputs`): a
   malformed or empty file, or SQuAD 2.0 data without `version_2_with_negative`, is a
   ValueError naming the file and the JSON field before anything is built or written.
1. Builds a `BertSpanLabeler` (in the strategy's scope) and initializes its encoder from a
   Google checkpoint, a Hugging Face directory or a tfbert `.keras` file; the span head
   starts fresh unless the source has one (`cls/squad`). Then the output directory is
   claimed (`fine_tuning.claim_run_directory`: a lock, and a rerun must match the recorded
   run).
2. Training: features are cached as TFRecords in `output_dir`, shuffled, and `fit` runs
   the compiled model with the `tfbert.training.optimization` stack (AdamW, linear warmup then
   linear decay to 0 after warmup, global-norm clipping after the all-reduce, mean accumulation,
   loss scaling for mixed_float16). The loss is google-research/bert's
   `(start_loss + end_loss) / 2`, each a mean sparse softmax cross-entropy over the batch.
   An epoch is one pass over the features (windows), as in Hugging Face's script; Google
   counts examples instead.
3. Prediction: the model's logits on the predict file's features go through
   `tfbert.squad.squad_postprocess`; predictions.json, nbest_predictions.json (v2.0:
   null_odds.json) and eval_results.json (the official scores) are written.

The run directory explains itself:

  output_dir/
    bert_config.json, run_config.json   the model and the resolved run configuration
    vocab.txt                           the vocabulary (casing: run_config's do_lower_case)
    train_features.{tf_record,json}     cached training features (reused when unchanged)
    predict_features.{tf_record,json}   cached prediction features
    train/                              TensorBoard events (loss every `log_steps` applied steps)
    model.keras                         the fine-tuned model, no optimizer state
                                        (`--init_tfbert` reads it)
    predictions.json, nbest_predictions.json, null_odds.json, eval_results.json

Every file appears under its final name only when complete (`tfbert.runtime.atomic`). Rerunning a
command reuses the feature caches and fine-tunes again from the initial weights (a
fine-tuning run is short; there is no mid-run resume); a rerun with another model or
schedule is refused (`--allow_config_change` to continue deliberately).

Shape legend: B batch, S max_seq_length.
"""

import dataclasses
import os
from typing import Any, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.models import BertSpanLabeler
from tfbert.runtime import atomic, validation
from tfbert.serving import export
from tfbert.squad import (
  squad_data,
  squad_evaluation,
  squad_export,
  squad_features,
  squad_postprocess,
)
from tfbert.text.tokenization import WordPieceTokenizer
from tfbert.training import fine_tuning

INPUT_NAMES = export.FEATURE_NAMES  # input_ids, input_mask, segment_ids
OUTPUT_NAMES = ("start_logits", "end_logits")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SquadRunConfig(fine_tuning.FineTuningConfig):
  """Everything that defines a SQuAD run (see flags/run_squad_flags.py for each field)."""
  do_predict: bool = False
  train_file: Optional[str] = None
  predict_file: Optional[str] = None
  train_articles: Optional[str] = None
  predict_articles: Optional[str] = None
  features: squad_features.FeatureConfig = squad_features.FeatureConfig()
  postprocess: squad_postprocess.PostprocessConfig = squad_postprocess.PostprocessConfig()
  predict_batch_size: int = 64

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
        (self.predict_batch_size >= 1, "predict_batch_size must be >= 1"),
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
  inputs = {}
  if config.do_train:
    inputs["train"] = read_squad_articles(config.train_file, config.train_articles, True)
  if config.do_predict:
    inputs["predict"] = read_squad_articles(config.predict_file, config.predict_articles,
                                            False)
  for dataset, _ in inputs.values():
    check_version(dataset, config.postprocess.version_2_with_negative)
  if "predict" in inputs:  # It is scored as its "version" says.
    squad_evaluation.check_scorable(inputs["predict"][0])
  return inputs


def check_version(dataset: squad_data.SquadDataset, version_2_with_negative: bool) -> None:
  """SQuAD 2.0 data needs the flag; SQuAD 1.1 data with it gets a note.

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
    raise ValueError(f"{dataset.path}: {why}: pass --version_2_with_negative")


def run_squad(config: SquadRunConfig, flagfile: Optional[str] = None) -> dict[str, Any]:
  """Trains and/or predicts as `config` says; see the module docstring.

  `flagfile` (the tool's resolved flags) is recorded as `output_dir/flags.txt` by a training
  run; `--flagfile=` replays it.

  Returns:
    dict with "train" (steps, loss, examples_per_second) when training and "predictions"
    (file paths) and "scores" (official EM/F1) when predicting.
  """
  inputs = read_inputs(config)  # Before anything is built or written.
  strategy = fine_tuning.start_run(config)
  tokenizer = WordPieceTokenizer(fine_tuning.resolve_vocab_file(config), config.do_lower_case)
  model = build_span_labeler(config, strategy)
  fine_tuning.check_vocab_fits(model, tokenizer.vocab_size)
  with fine_tuning.claim_run_directory(model, config, tokenizer.vocab_file, flagfile):
    result = _run(model, strategy, tokenizer, config, inputs)
  written = ["model.keras"] if config.do_train else []
  written += list(result.get("predictions", {}).values())
  if config.export_dir:
    written.append(config.export_dir)
  result["written"] = fine_tuning.written_paths(config.output_dir, written)
  return result


def _run(model: BertSpanLabeler, strategy: tf.distribute.Strategy,
         tokenizer: WordPieceTokenizer, config: SquadRunConfig,
         inputs: dict[str, tuple[squad_data.SquadDataset, Any]]) -> dict[str, Any]:
  """The work of `run_squad` in the claimed output directory."""
  result = {}
  if config.do_train:
    result["train"] = train(model, strategy, tokenizer, config, inputs["train"][0])
    fine_tuning.save_without_optimizer(model, os.path.join(config.output_dir, "model.keras"))
  if config.do_predict:
    result.update(predict(model, tokenizer, config, *inputs["predict"]))
  if config.export_dir:
    squad_export.export_squad_saved_model(
        model, config.export_dir, tokenizer.vocab_file, config.do_lower_case,
        config.features.max_seq_length, config.features.max_query_length,
        config.postprocess.max_answer_length)
  return result


def build_span_labeler(config: SquadRunConfig,
                       strategy: tf.distribute.Strategy) -> BertSpanLabeler:
  """The model, built in `strategy`'s scope and initialized as `config` says.

  The source's encoder weights must all be there and fit exactly; tensors the model has no
  weight for (pretraining heads, the pooler's absence) are reported as unused, and the span
  head keeps its fresh initialization when the source has no `cls/squad`.
  """
  bert_config, weights, source = fine_tuning.initial_weights(config)
  with strategy.scope():
    model = BertSpanLabeler(bert_config)
    model.build()
  fine_tuning.assign_initial_weights(model, weights, source, "span_head",
                                     head_is_trained=config.do_train or not config.do_predict)
  return model


def train(model: BertSpanLabeler, strategy: tf.distribute.Strategy,
          tokenizer: WordPieceTokenizer, config: SquadRunConfig,
          dataset: squad_data.SquadDataset) -> dict[str, float]:
  """Fine-tunes `model` on the train file's `dataset`; returns the last logs and the
  throughput."""
  converted = squad_features.cached_features(
      os.path.join(config.output_dir, "train_features"), dataset.examples, tokenizer,
      config.features, is_training=True)
  num_features = len(converted.features)
  total_steps = max(1, int(num_features * config.num_train_epochs) // config.train_batch_size)
  steps = min(total_steps, config.max_train_steps or total_steps)
  k = config.gradient_accumulation_steps
  logging.info(f"training on {len(dataset.examples)} questions ({len(dataset.skipped)} + "
               f"{len(converted.skipped)} skipped), {num_features} features: {steps} of "
               f"{total_steps} applied steps of {config.train_batch_size}")
  dataset = train_dataset(os.path.join(config.output_dir, "train_features.tf_record"),
                          config.features.max_seq_length, config.train_batch_size // k,
                          num_features, config.seed)
  return fine_tuning.compile_and_fit(
      model, strategy, dataset, config, steps=steps, total_steps=total_steps,
      num_examples=num_features,
      loss={name: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            for name in OUTPUT_NAMES},
      loss_weights={name: 0.5 for name in OUTPUT_NAMES})


def train_dataset(record_path: str, max_seq_length: int, batch_size: int,
                  num_features: int, seed: int) -> tf.data.Dataset:
  """Endless (inputs, labels) batches of the training feature TFRecords.

  Each epoch is a permutation of the features fixed by (`seed`, epoch)
  (`tfbert.training.fine_tuning.epoch_shuffled`).

  Returns:
    tf.data.Dataset of ({input_ids, input_mask, segment_ids}: int32 [B, S],
    {start_logits, end_logits}: int32 [B] positions).
  """
  full = squad_features.record_spec(max_seq_length, is_training=True)
  spec = {name: full[name] for name in INPUT_NAMES + ("start_positions", "end_positions")}

  def parse(records):
    values = {k: tf.cast(v, tf.int32) for k, v in tf.io.parse_example(records, spec).items()}
    return ({name: values[name] for name in INPUT_NAMES},
            {"start_logits": values["start_positions"], "end_logits": values["end_positions"]})

  records = fine_tuning.epoch_shuffled(tf.data.TFRecordDataset(record_path), num_features, seed)
  return (records.batch(batch_size, drop_remainder=True)
          .map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE))


def predict(model: BertSpanLabeler, tokenizer: WordPieceTokenizer, config: SquadRunConfig,
            dataset: squad_data.SquadDataset, selected: dict[str, Any]) -> dict[str, Any]:
  """Answers the predict file's `dataset`, writes the prediction files and scores them
  against `selected` (its JSON, as `read_squad_articles` returns it)."""
  features = squad_features.cached_features(
      os.path.join(config.output_dir, "predict_features"), dataset.examples, tokenizer,
      config.features, is_training=False).features
  inputs = {name: np.stack([getattr(f, name) for f in features]) for name in INPUT_NAMES}
  outputs = model.predict(inputs, batch_size=config.predict_batch_size, verbose=0)
  predictions = squad_postprocess.postprocess_predictions(
      dataset.examples, features, outputs["start_logits"], outputs["end_logits"],
      config.postprocess)
  paths = squad_postprocess.write_predictions(predictions, config.output_dir)
  result = {"predictions": paths}
  if any(e.answers or e.is_impossible for e in dataset.examples):
    null_odds = ({p.qas_id: p.null_score_diff for p in predictions}
                 if dataset.is_v2 else None)
    scores = squad_evaluation.evaluate(selected, {p.qas_id: p.text for p in predictions},
                                       dataset.version, null_odds)
    paths["eval_results.json"] = os.path.join(config.output_dir, "eval_results.json")
    atomic.write_json(paths["eval_results.json"], scores)
    result["scores"] = scores
  return result
