"""Sentence-embedding fine-tuning as the runner's task hooks (`run_embeddings`).

`EmbeddingTask` runs through `tfbert.tasks.runner.run_task` like every task (checks before
any work, the run directory, initial weights, the training loop with its strategies,
checkpoints, exact resume, evaluation during training, the best model, the export):

0. Reads the train file (pairs, triplets or scored pairs: `embedding_data`, columns by
   name or index) and the dev file (scored pairs, e.g. STS-B's `dev.tsv` with
   `--anchor_column=sentence1 --positive_column=sentence2 --score_column=score`).
1. Builds a `BertSentenceEncoder`; its pooling and normalization are the
   sentence-transformers directory's (`init_hf_dir`) when it has `modules.json`, else
   `pooling_mode` / `normalize`. The loss (`loss`, `scale`, `symmetric`) is the model's.
2. Trains (`do_train`): in-batch negatives on pairs / triplets (every replica's negatives),
   CoSENT or cosine MSE on scored pairs (scores divided by `score_scale`). Gradient
   accumulation is refused for in-batch negatives and CoSENT, before anything is built.
3. Evaluates (`do_eval`; during training with `eval_every_steps`): Spearman and Pearson of
   the dev pairs' cosine similarities against their scores, in percent; for CoSENT and
   cosine MSE, the held-out `loss` over the whole dev set as one batch; and with a
   retrieval set (`ir_queries_file`, `ir_corpus_file`, `ir_qrels_file`), MRR@10, nDCG@10
   and recall@1/5/10 of the queries ranking the corpus (percent).
4. Exports (`export_dir`): `embed_text` (`tfbert.embeddings.embedding_export`); and, with
   `sentence_transformers_dir`, writes the model as a sentence-transformers directory
   (`tfbert.embeddings.sentence_transformers`) that `SentenceTransformer(dir)` loads; it
   records the run that wrote it, and another run's is refused before any work
   (`check_outputs`: a replayed flags.txt).

Shape legend: N examples, S max_seq_length.
"""

import dataclasses
import json
from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.classifier import glue_metrics
from tfbert.embeddings import (
  embedding_data,
  embedding_export,
  embedding_inference,
  embedding_metrics,
  sentence_transformers,
)
from tfbert.embeddings.sentence_encoder import BATCH_LOSSES, LOSSES, BertSentenceEncoder
from tfbert.layers import pooling
from tfbert.losses import embedding_losses
from tfbert.runtime import atomic, files, run_directory, validation
from tfbert.tasks import fine_tuning, runner
from tfbert.tasks.task import Outputs, RunContext, Task, TrainingData
from tfbert.text import inputs as text_inputs

PARTS = ("anchor", "positive", "negative")
# What a run's `sentence_transformers_dir` is (`tfbert.runtime.atomic.RUN_RECORD`).
SENTENCE_TRANSFORMERS_KIND = "sentence-transformers directory"


@dataclasses.dataclass(frozen=True, kw_only=True)
class EmbeddingRunConfig(fine_tuning.FineTuningConfig):
  """Everything that defines a sentence-embedding run."""
  RERUN_MAY_CHANGE = fine_tuning.FineTuningConfig.RERUN_MAY_CHANGE | frozenset(
      {"do_eval", "dev_file", "ir_queries_file", "ir_corpus_file", "ir_qrels_file",
       "eval_batch_size", "sentence_transformers_dir"})
  READ_ONLY_WITH = {"do_eval": ("dev_file", "ir_queries_file", "ir_corpus_file",
                                "ir_qrels_file")}
  INPUT_PATHS = fine_tuning.FineTuningConfig.INPUT_PATHS + (
      "train_file", "dev_file", "ir_queries_file", "ir_corpus_file", "ir_qrels_file")
  OUTPUT_PATHS = fine_tuning.FineTuningConfig.OUTPUT_PATHS + ("sentence_transformers_dir",)
  # What the model and its training data mean (the loss, its scores and their scale, the
  # train file's columns): an evaluation-only rerun takes them from the run's record.
  RUN_DEFINES = frozenset({"pooling_mode", "normalize", "loss", "score_column",
                           "score_scale", "anchor_column", "positive_column",
                           "negative_column"})
  RUN_SETTINGS = fine_tuning.FineTuningConfig.RUN_SETTINGS | RUN_DEFINES | {
      "max_seq_length", "scale", "symmetric"}
  train_file: Optional[str] = None
  dev_file: Optional[str] = None
  do_eval: bool = False
  anchor_column: str = "anchor"
  positive_column: str = "positive"
  negative_column: Optional[str] = None
  score_column: Optional[str] = None
  dev_anchor_column: str = "sentence1"
  dev_positive_column: str = "sentence2"
  dev_score_column: str = "score"
  ir_queries_file: Optional[str] = None
  ir_corpus_file: Optional[str] = None
  ir_qrels_file: Optional[str] = None
  score_scale: float = 1.0
  loss: str = "in_batch_negatives"
  scale: float = embedding_losses.DEFAULT_SCALE
  symmetric: bool = False
  pooling_mode: str = "mean"
  normalize: bool = True
  max_train_examples: Optional[int] = None
  max_seq_length: int = 128
  eval_batch_size: int = 64
  sentence_transformers_dir: Optional[str] = None

  @classmethod
  def from_json(cls, text: str) -> "EmbeddingRunConfig":
    """The inverse of `to_json`."""
    return cls(**cls.without_unread_settings(json.loads(text)))

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    return [
        (self.do_train or self.do_eval, "at least one of do_train, do_eval"),
        (not self.do_train or self.train_file, "do_train needs train_file"),
        (not self.do_eval or self.dev_file or self.ir_queries_file,
         "do_eval needs dev_file or the ir_*_file retrieval set"),
        (len({bool(self.ir_queries_file), bool(self.ir_corpus_file),
              bool(self.ir_qrels_file)}) == 1,
         "give all of ir_queries_file, ir_corpus_file, ir_qrels_file, or none"),
        (not self.eval_every_steps or self.do_eval,
         f"eval_every_steps ({self.eval_every_steps}) evaluates on the dev file: add do_eval"),
        (self.loss in LOSSES, f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}"),
        (self.pooling_mode in pooling.MODES,
         f"pooling_mode must be one of {', '.join(pooling.MODES)}, got {self.pooling_mode!r}"),
        (self.loss == "in_batch_negatives" or self.score_column is not None,
         f"the {self.loss} loss trains on scored pairs: give score_column"),
        (self.loss != "in_batch_negatives" or self.score_column is None,
         "in_batch_negatives trains on pairs or triplets: drop score_column (or use cosent / "
         "cosine_mse)"),
        (self.loss not in BATCH_LOSSES or self.gradient_accumulation_steps == 1,
         f"gradient_accumulation_steps ({self.gradient_accumulation_steps}) with the "
         f"{self.loss} loss would train another objective (its value depends on the whole "
         "batch, and each micro-batch sees only its own): raise train_batch_size instead, or "
         "use cosine_mse"),
        (self.score_scale > 0, f"score_scale ({self.score_scale}) must be > 0"),
        (not self.do_train or self.loss not in BATCH_LOSSES
         or self.train_batch_size // num_replicas >= 2,
         f"the {self.loss} loss compares the examples of a batch: with train_batch_size "
         f"{self.train_batch_size} over {num_replicas} replica(s) each batch holds 1, and its "
         "loss and gradient are 0 (nothing trains): raise train_batch_size, or use "
         "cosine_mse"),
        (self.negative_column is None or self.loss == "in_batch_negatives",
         f"negative_column {self.negative_column!r} is read by in_batch_negatives only: the "
         f"{self.loss} loss would ignore it; drop it or use in_batch_negatives"),
        (not self.symmetric or self.loss == "in_batch_negatives",
         f"symmetric is read by in_batch_negatives only: the {self.loss} loss would ignore "
         "it; drop it or use in_batch_negatives"),
        (not embedding_losses.scale_problem(self.scale),
         embedding_losses.scale_problem(self.scale) or ""),
        (self.max_seq_length >= 3, f"max_seq_length ({self.max_seq_length}) must be >= 3"),
        (self.max_train_examples is None or self.max_train_examples >= 1,
         "max_train_examples must be >= 1"),
        (self.eval_batch_size >= 1, f"eval_batch_size ({self.eval_batch_size}) must be >= 1"),
    ] + super().checks(num_replicas)

  def columns(self) -> embedding_data.Columns:
    """The train file's columns."""
    column = embedding_data.column  # "0": the first column of a headerless TSV.
    return embedding_data.Columns(column(self.anchor_column), column(self.positive_column),
                                  column(self.negative_column), column(self.score_column))

  def dev_columns(self) -> embedding_data.Columns:
    """The dev file's columns (scored pairs)."""
    column = embedding_data.column
    return embedding_data.Columns(column(self.dev_anchor_column),
                                  column(self.dev_positive_column),
                                  score=column(self.dev_score_column))


# What a --dev_file holds, said when it lacks a field.
DEV_FILE_NOTE = ("a --dev_file holds scored pairs, a score for each pair: the evaluation is "
                 "the Pearson/Spearman correlation of their similarities with the scores "
                 "(retrieval is evaluated on --ir_queries_file, --ir_corpus_file, "
                 "--ir_qrels_file)")


def check_trainable(examples: Sequence[embedding_data.TextExample],
                    config: EmbeddingRunConfig) -> None:
  """Refuses training data on which `config.loss` trains nothing or another objective.

  - cosine_mse regresses the cosine similarity, in [-1, 1], onto score / score_scale: a
    target outside that range (STS's 0-5 scores with the default scale 1) cannot be met,
    and the loss pushes every pair to the same similarity.
  - cosent orders pairs by score: when every score is equal there is no order to learn.
  - Pairs whose texts are all identical embed identically: every loss is constant.

  Raises:
    ValueError: naming the train file, what was found and the flag to change.
  """
  path = config.train_file
  if config.loss in BATCH_LOSSES and len({e.texts for e in examples}) == 1:
    raise ValueError(f"{path}: one distinct example (line {examples[0].line}): the "
                     f"{config.loss} loss compares a batch's examples with each other, and "
                     "every batch would hold copies of it; give at least two, or use "
                     "cosine_mse")
  if examples and all(len(set(e.texts)) == 1 for e in examples):
    raise ValueError(f"{path}: every example's texts are identical (e.g. line "
                     f"{examples[0].line}): they embed identically and nothing trains")
  scores = [e.score for e in examples if e.score is not None]
  if config.loss == "cosine_mse" and scores:
    worst = max(scores, key=abs)
    if abs(worst) / config.score_scale > 1.0:
      raise ValueError(
          f"{path}: cosine_mse regresses the cosine similarity, in [-1, 1], onto score / "
          f"score_scale, and a score of {worst:g} with --score_scale={config.score_scale:g} "
          f"gives {worst / config.score_scale:g}: pass --score_scale={abs(worst):g} (e.g. 5 "
          "for STS-B's 0-5 scores)")
  if config.loss == "cosent" and scores and min(scores) == max(scores):
    raise ValueError(f"{path}: every score is {scores[0]:g}: cosent learns the order of the "
                     "pairs' scores, and there is none; give scored pairs that differ")


def check_outputs(config: EmbeddingRunConfig) -> None:
  """Refuses a `sentence_transformers_dir` that another run wrote, as the runner refuses
  such an `export_dir` (`tfbert.runtime.run_directory.check_outputs`): a flags.txt replayed
  with a new output directory carries the old run's path, and the new run would replace
  the old run's model with its own. The run that wrote it is recorded in it
  (`tfbert.runtime.atomic.RUN_RECORD`); one written outside a run (`tfbert.save`) or by
  this run (or lying inside this run's directory) is rewritten as before.

  Raises:
    tfbert.runtime.run_directory.RunDirectoryError: naming the flag, its path and the run
      that wrote it.
  """
  path = config.sentence_transformers_dir
  if not path:
    return
  run_directory.check_outputs(config.output_dir, {"sentence_transformers_dir": path})
  record = atomic.read_run_record(path) if files.isdir(path) else None
  if record is not None and atomic.by_another_run(record, path, config.output_dir):
    raise run_directory.RunDirectoryError(run_directory.another_runs_output(
        "sentence_transformers_dir", path, record, config.output_dir))


def pack(tokenizer, texts, seq_length: int) -> dict[str, np.ndarray]:
  """int32 [N, S] `input_ids`, `input_mask`, `segment_ids` of one text per row."""
  ids = tokenizer.tokenize(tf.constant(list(texts)))
  return {name: value.numpy() for name, value in text_inputs.pack_inputs(
      [ids], seq_length, tokenizer.cls_id, tokenizer.sep_id).items()}


class EmbeddingTask(Task):
  """Sentence embeddings as `tfbert.tasks.runner.run_task`'s hooks (module docstring)."""
  head = ""
  uses_pooler = False  # Its outputs read the sequence output only.
  model_class = BertSentenceEncoder
  config_class = EmbeddingRunConfig

  def default_best_metric(self, config: EmbeddingRunConfig) -> str:
    return "spearman" if config.dev_file else "ndcg@10"

  def evaluation_metrics(self, config: EmbeddingRunConfig, inputs) -> list[str]:
    """`evaluate`'s scalars: the dev pairs' correlations (and held-out loss), the
    retrieval set's metrics, for the parts `read_inputs` read."""
    names = []
    if "dev" in inputs:
      names += ["spearman", "pearson"]
      if config.loss in ("cosent", "cosine_mse"):  # `evaluate`'s held-out loss.
        names.append("loss")
    if "retrieval" in inputs:
      names += embedding_metrics.retrieval_metric_names()
    if "dev" in inputs:  # Constant dev scores: a correlation best_metric is always NaN.
      glue_metrics.check_correlation_defined(
          config.best_metric, [e.score for e in inputs["dev"]], config.dev_file, names)
    return names

  def eval_files(self, config: EmbeddingRunConfig, inputs) -> list[str]:
    """The dev file and the retrieval set's three files, as `evaluate` scores them."""
    paths = [config.dev_file] if "dev" in inputs else []
    if "retrieval" in inputs:
      paths += [config.ir_queries_file, config.ir_corpus_file, config.ir_qrels_file]
    return paths

  def read_inputs(self, config: EmbeddingRunConfig) -> dict[str, Any]:
    check_outputs(config)  # Before anything is built or written, as the export's check.
    read = {}
    if config.do_train:
      read["train"] = embedding_data.read_examples(
          config.train_file, config.columns(), config.max_train_examples,
          {name: f"{name}_column" for name in ("anchor", "positive", "negative", "score")})
      for name in embedding_data.unread_roles(config.train_file, config.columns()):
        how = ("--score_column=score with --loss=cosent or cosine_mse (scored pairs)"
               if name == "score" else "--negative_column=negative (triplets)")
        logging.warning("%s has a column %r that this run does not read (no --%s_column): "
                        "it trains on the anchor and positive columns alone; to read it, "
                        "pass %s", config.train_file, name, name, how)
      check_trainable(read["train"], config)
    if config.do_eval and config.dev_file:
      read["dev"] = embedding_data.read_examples(
          config.dev_file, config.dev_columns(), None,
          {name: f"dev_{name}_column" for name in ("anchor", "positive", "score")},
          DEV_FILE_NOTE)
    if config.do_eval and config.ir_queries_file:
      read["retrieval"] = embedding_data.read_retrieval_set(
          config.ir_queries_file, config.ir_corpus_file, config.ir_qrels_file)
    return read

  def build_model(self, config: EmbeddingRunConfig, bert_config,
                  labels) -> BertSentenceEncoder:
    """The config's pooling and normalization (a sentence-transformers source's, set by
    `source_pooling` before the run records them)."""
    del labels
    return BertSentenceEncoder(bert_config, config.pooling_mode, config.normalize,
                               loss=config.loss, scale=config.scale, symmetric=config.symmetric)

  def head_is_trained(self, config) -> bool:
    del config
    return True  # No head: nothing predicts from fresh weights.

  def train_data(self, context: RunContext) -> TrainingData:
    c, examples = context.config, context.inputs["train"]
    parts = PARTS[:len(examples[0].texts)]
    features = {part: pack(context.tokenizer, [e.texts[i] for e in examples],
                           c.max_seq_length) for i, part in enumerate(parts)}
    scores = np.array([(e.score or 0.0) / c.score_scale for e in examples], np.float32)
    kind = {2: "pairs", 3: "triplets"}[len(parts)]
    return TrainingData((features, scores), len(examples),
                        f"{len(examples)} {'scored pairs' if c.score_column else kind}")

  def evaluate(self, context: RunContext) -> dict[str, float]:
    scores = {}
    if "dev" in context.inputs:
      scores.update(evaluate(context.model, context.tokenizer, context.config,
                             context.inputs["dev"]))
    if "retrieval" in context.inputs:
      scores.update(evaluate_retrieval(context.model, context.tokenizer, context.config,
                                       context.inputs["retrieval"]))
      del scores["queries"]  # A count, not a score: eval_results.json keeps it.
    return scores

  def outputs(self, context: RunContext) -> Outputs:
    out = Outputs()
    if context.config.do_eval:
      results = {}
      if "dev" in context.inputs:
        results["dev"] = {**evaluate(context.model, context.tokenizer, context.config,
                                     context.inputs["dev"]),
                          "num_examples": len(context.inputs["dev"]),
                          "file": files.absolute(context.config.dev_file)}
      if "retrieval" in context.inputs:
        c = context.config
        results["retrieval"] = {
            **evaluate_retrieval(context.model, context.tokenizer, c,
                                 context.inputs["retrieval"]),
            "file": [files.absolute(path) for path in (c.ir_queries_file, c.ir_corpus_file,
                                                        c.ir_qrels_file)]}
      out.result["eval"] = out.eval_results = results
    c = context.config
    if c.sentence_transformers_dir:
      if context.chief:
        sentence_transformers.save_sentence_transformers(
            context.model, c.sentence_transformers_dir, context.tokenizer.vocab_file,
            c.do_lower_case, c.max_seq_length)
        atomic.write_run_record(c.sentence_transformers_dir, SENTENCE_TRANSFORMERS_KIND,
                                files.absolute(c.output_dir))
      out.written.append(files.absolute(c.sentence_transformers_dir))  # Not in output_dir.
    return out

  def export(self, context: RunContext) -> None:
    c = context.config
    embedding_export.export_sentence_encoder_saved_model(
        context.model, c.export_dir, context.tokenizer.vocab_file, c.do_lower_case,
        c.max_seq_length, export_dtype=c.export_dtype)


def evaluate(model: BertSentenceEncoder, tokenizer, config: EmbeddingRunConfig,
             examples: list[embedding_data.TextExample]) -> dict[str, float]:
  """Spearman and Pearson (percent) of the dev pairs and, for CoSENT / cosine MSE, the
  held-out `loss`: the training loss over the whole dev set as one batch."""
  similarities = embedding_inference.pair_similarities(model, tokenizer, examples,
                                                       config.max_seq_length,
                                                       config.eval_batch_size)
  gold_scores = np.array([e.score for e in examples], np.float64)
  scores = {name: 100.0 * value for name, value in embedding_metrics.similarity_correlations(
      similarities, gold_scores, config.dev_file).items()}  # A NaN one is explained.
  gold = tf.constant([e.score / config.score_scale for e in examples], tf.float32)
  cosines = tf.constant(similarities, tf.float32)
  if config.loss == "cosent":
    scores["loss"] = float(embedding_losses.cosent_loss(cosines, gold, config.scale))
  elif config.loss == "cosine_mse":
    scores["loss"] = float(tf.reduce_mean(embedding_losses.cosine_mse_losses(cosines, gold)))
  return scores


def evaluate_retrieval(model: BertSentenceEncoder, tokenizer, config: EmbeddingRunConfig,
                       retrieval: embedding_data.RetrievalSet) -> dict[str, float]:
  """MRR@10, nDCG@10, recall@1/5/10 (percent) of the queries ranking the corpus by cosine
  similarity, and "queries": how many were scored."""
  queries = embedding_inference.embed_texts(model, tokenizer, retrieval.queries,
                                            config.max_seq_length, config.eval_batch_size)
  corpus = embedding_inference.embed_texts(model, tokenizer, retrieval.corpus,
                                           config.max_seq_length, config.eval_batch_size)
  unit = [x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
          for x in (queries.astype(np.float64), corpus.astype(np.float64))]
  metrics = embedding_metrics.retrieval_metrics(unit[0] @ unit[1].T, retrieval.query_ids,
                                                retrieval.corpus_ids, retrieval.qrels)
  return {name: value if name == "queries" else 100.0 * value
          for name, value in metrics.items()}


def source_pooling(config: EmbeddingRunConfig) -> EmbeddingRunConfig:
  """`config` with the pooling and normalization of a sentence-transformers `init_hf_dir`
  (its model was trained with them), said when they differ from the config's. Resolved
  before the run records its config: the run recorded the pooling it was given, not the one
  it trained with, and an eval-only rerun then scored with the other (sweep 27, A147)."""
  if not (config.init_hf_dir and files.exists(
      f"{config.init_hf_dir}/{sentence_transformers.MODULES_FILE}")):
    return config
  found = sentence_transformers.read_config(config.init_hf_dir)
  if (found.pooling_mode, found.normalize) == (config.pooling_mode, config.normalize):
    return config
  logging.warning(
      "%s is a sentence-transformers directory: its pooling (%s, normalize=%s) is used and "
      "recorded, not --pooling_mode=%s --normalize=%s", config.init_hf_dir,
      found.pooling_mode, found.normalize, config.pooling_mode, config.normalize)
  return dataclasses.replace(config, pooling_mode=found.pooling_mode,
                             normalize=found.normalize)


def run_embeddings(config: EmbeddingRunConfig, flagfile: Optional[str] = None
                   ) -> dict[str, Any]:
  """Trains and/or evaluates as `config` says (module docstring); the runner's result."""
  return runner.run_task(EmbeddingTask(), source_pooling(config), flagfile)
