"""SQuAD fine-tuning and prediction: google-research/bert `run_squad.py` on Keras `fit`.

`run_squad(SquadRunConfig)` does what the tool's flags ask, in this order:

1. Builds a `BertSpanLabeler` (in the strategy's scope) and initializes its encoder from a
   Google checkpoint, a Hugging Face directory or a tfbert `.keras` file; the span head
   starts fresh unless the source has one (`cls/squad`).
2. Training: features are cached as TFRecords in `output_dir`, shuffled, and `fit` runs
   the compiled model with the `tfbert.optimization` stack (AdamW, linear warmup then linear
   decay to 0 after warmup, global-norm clipping after the all-reduce, mean accumulation,
   loss scaling for mixed_float16). The loss is google-research/bert's
   `(start_loss + end_loss) / 2`, each a mean sparse softmax cross-entropy over the batch.
   An epoch is one pass over the features (windows), as in Hugging Face's script; Google
   counts examples instead.
3. Prediction: the model's logits on the predict file's features go through
   `tfbert.squad_postprocess`; predictions.json, nbest_predictions.json (v2.0:
   null_odds.json) and eval_results.json (the official scores) are written.

The run directory explains itself:

  output_dir/
    bert_config.json, run_config.json   the model and the resolved run configuration
    train_features.{tf_record,json}     cached training features (reused when unchanged)
    predict_features.{tf_record,json}   cached prediction features
    train/                              TensorBoard events (loss every `log_every` micro-steps)
    model.keras                         the fine-tuned model, no optimizer state
                                        (`--init_tfbert` reads it)
    predictions.json, nbest_predictions.json, null_odds.json, eval_results.json

Rerunning a command reuses the feature caches and fine-tunes again from the initial
weights (a fine-tuning run is short; there is no mid-run resume).

Shape legend: B batch, S max_seq_length.
"""

import dataclasses
import json
import os
from typing import Any, Optional

import keras
import numpy as np
import tensorflow as tf

from tfbert import (export, fine_tuning, squad_data, squad_evaluation, squad_export,
                    squad_features, squad_postprocess)
from tfbert.models import BertSpanLabeler
from tfbert.tokenization import WordPieceTokenizer

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

  def checks(self, num_replicas: int) -> list[tuple[Any, str]]:
    return [
        (self.do_train or self.do_predict, "at least one of do_train, do_predict"),
        (not self.do_train or self.train_file, "do_train needs train_file"),
        (not self.do_predict or self.predict_file, "do_predict needs predict_file"),
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


def run_squad(config: SquadRunConfig) -> dict[str, Any]:
  """Trains and/or predicts as `config` says; see the module docstring.

  Returns:
    dict with "train" (steps, loss, examples_per_second) when training and "predictions"
    (file paths) and "scores" (official EM/F1) when predicting.
  """
  strategy = fine_tuning.start_run(config)
  tokenizer = WordPieceTokenizer(fine_tuning.resolve_vocab_file(config), config.do_lower_case)
  model = build_span_labeler(config, strategy)
  fine_tuning.check_vocab_fits(model, tokenizer.vocab_size)
  fine_tuning.write_run_files(model, config)
  result = {}
  if config.do_train:
    result["train"] = train(model, strategy, tokenizer, config)
    fine_tuning.save_without_optimizer(model, os.path.join(config.output_dir, "model.keras"))
  if config.do_predict:
    result.update(predict(model, tokenizer, config))
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
          tokenizer: WordPieceTokenizer, config: SquadRunConfig) -> dict[str, float]:
  """Fine-tunes `model` on the train file; returns the last logs and the throughput."""
  dataset, _ = read_squad_articles(config.train_file, config.train_articles, True)
  converted = squad_features.cached_features(
      os.path.join(config.output_dir, "train_features"), dataset.examples, tokenizer,
      config.features, is_training=True)
  num_features = len(converted.features)
  total_steps = max(1, int(num_features * config.num_train_epochs) // config.train_batch_size)
  steps = min(total_steps, config.max_train_steps or total_steps)
  k = config.gradient_accumulation_steps
  print(f"training on {len(dataset.examples)} questions ({len(dataset.skipped)} + "
        f"{len(converted.skipped)} skipped), {num_features} features: {steps} of "
        f"{total_steps} applied steps of {config.train_batch_size}", flush=True)
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
  (`tfbert.fine_tuning.epoch_shuffled`).

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


def predict(model: BertSpanLabeler, tokenizer: WordPieceTokenizer,
            config: SquadRunConfig) -> dict[str, Any]:
  """Answers the predict file, writes the prediction files and scores them."""
  dataset, selected = read_squad_articles(config.predict_file, config.predict_articles, False)
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
    with open(paths["eval_results.json"], "w", encoding="utf-8") as f:
      f.write(json.dumps(scores, indent=2) + "\n")
    print(json.dumps(scores), flush=True)
    result["scores"] = scores
  return result
