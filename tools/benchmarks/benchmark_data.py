"""Host-side benchmarks: the pretraining input pipeline and SQuAD postprocessing.

Input pipeline: `tfbert.pretraining.input_pipeline.pretraining_dataset` (seeded shuffles, as
training reads) over real google-research/bert records, made once from the embedded corpus
(CPython's `pydoc_data.topics`, the default of `tools/create_pretraining_data.py`) with the
standard uncased vocab. After `warmup_batches`, batches are drawn for `seconds`;
examples/s = batch size x batches / seconds. The pipeline has to stay well ahead of the
training step of the same config (the goal: >= 20x its examples/s), because on a
CPU-only machine it competes with the step for the same cores.

SQuAD postprocessing: what `tfbert.squad.squad_run.predict` does around the model: read the file
(`squad_data`), make features (`squad_features.convert_examples_to_features`, timed
separately), then `squad_postprocess.postprocess_predictions` on seeded random logits.
The logits' values hardly matter for the time: each feature's n_best_size^2 start/end
pairs are checked whatever they are.

Shape legend: F features, S max_seq_length.
"""

import json
import os
import statistics
import time
from typing import Optional

import numpy as np

from tfbert.checkpoints import pretrained
from tfbert.pretraining import input_pipeline, pretraining_data
from tfbert.squad import squad_data, squad_features, squad_postprocess
from tfbert.text.tokenization import WordPieceTokenizer

RECORDS_PREFIX = "pretraining"


def make_pretraining_records(data_dir: str, seq_length: int, max_predictions: int, *,
                             dupe_factor: int = 2, max_documents: Optional[int] = None,
                             num_shards: int = 4, vocab_file: Optional[str] = None) -> str:
  """Writes pydoc-corpus pretraining records into `data_dir` once; returns their glob.

  A complete data set (its summary JSON exists) is reused, and must have been made for the
  same `seq_length` and `max_predictions`.

  Args:
    data_dir: where the corpus, the shards and the summary go.
    seq_length, max_predictions: S and P of the records.
    dupe_factor: passes over the corpus (google-research/bert's option).
    max_documents: keep only the first this many corpus documents (default all).
    num_shards: TFRecord files (the pipeline interleaves up to 4).
    vocab_file: WordPiece vocab (default: MiniLM's, the standard uncased one).

  Returns:
    str, the shards' glob pattern.

  Raises:
    ValueError: `data_dir` holds records of another S or P.
  """
  summary_file = pretraining_data.summary_path(data_dir, RECORDS_PREFIX)
  if os.path.exists(summary_file):
    with open(summary_file, encoding="utf-8") as f:
      config = json.load(f)["config"]
    found = (config["max_seq_length"], config["max_predictions_per_seq"])
    if found != (seq_length, max_predictions):
      raise ValueError(f"{data_dir} holds records of (seq_length, max_predictions) {found}, "
                       f"not {(seq_length, max_predictions)}; use another directory")
  else:
    os.makedirs(data_dir, exist_ok=True)
    corpus = pretraining_data.pydoc_corpus(os.path.join(data_dir, "pydoc_corpus.txt"),
                                           max_documents)
    pretraining_data.create_pretraining_data(
        [corpus], data_dir, pretraining_data.PretrainingDataConfig(
            vocab_file=vocab_file or pretrained.minilm_vocab_file(), max_seq_length=seq_length,
            max_predictions_per_seq=max_predictions, dupe_factor=dupe_factor,
            num_shards=num_shards), output_prefix=RECORDS_PREFIX, log_every_seconds=60.0)
  return os.path.join(data_dir, f"{RECORDS_PREFIX}-*.tfrecord")


def measure_input_pipeline(file_pattern: str, *, batch_size: int, seq_length: int,
                           max_predictions: int, seconds: float, warmup_batches: int = 5,
                           seed: int = 0) -> dict:
  """Examples/s of `input_pipeline.pretraining_dataset` over `file_pattern`.

  Returns:
    dict with `examples_per_second`, `batches` (timed), `seconds` (timed), `batch_size`.
  """
  dataset = input_pipeline.pretraining_dataset(
      file_pattern, batch_size, seq_length=seq_length, max_predictions=max_predictions,
      shuffle=True, seed=seed, repeat=True)
  iterator = iter(dataset)
  for _ in range(warmup_batches):  # Fills the shuffle buffer and starts the readers.
    next(iterator)
  batches, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    next(iterator)
    batches += 1
  elapsed = time.perf_counter() - start
  return {"examples_per_second": batch_size * batches / elapsed, "batches": batches,
          "seconds": elapsed, "batch_size": batch_size}


def postprocess_features(seq_length: int) -> squad_features.FeatureConfig:
  """The windowing of the postprocess benchmark at S `seq_length` (its `--seq_length`), the
  rest Google's defaults (stride 128, questions of up to 64 pieces).

  Raises:
    ValueError: naming `--seq_length` and the least S whose windows hold a whole question,
      before any work (not `FeatureConfig`'s check, which names a field the tool has no flag
      for).
  """
  query = squad_features.FeatureConfig().max_query_length
  if seq_length < query + 4:  # [CLS] query [SEP] at least one context piece [SEP].
    raise ValueError(f"--seq_length={seq_length}: postprocess needs at least {query + 4} "
                     f"(its questions take up to {query} pieces)")
  return squad_features.FeatureConfig(max_seq_length=seq_length)


def measure_postprocess(squad_file: str, *, vocab_file: Optional[str] = None,
                        do_lower_case: bool = True,
                        features: squad_features.FeatureConfig = squad_features.FeatureConfig(),
                        postprocess: squad_postprocess.PostprocessConfig = (
                            squad_postprocess.PostprocessConfig()),
                        repeats: int = 1, seed: int = 0) -> dict:
  """Times feature creation and postprocessing of every question of `squad_file`.

  Args:
    squad_file: a SQuAD JSON file (gzip or not), read as for prediction.
    vocab_file, do_lower_case: the tokenizer (default: MiniLM's uncased vocab).
    features: windowing (Google's defaults: S 384, stride 128, query 64).
    postprocess: n-best size and answer length (Google's defaults).
    repeats: postprocessing runs; the median time is reported.
    seed: of the random logits, float32 [F, S] standard normal.

  Returns:
    dict with `questions`, `features`, `read_seconds`, `feature_seconds`,
    `feature_questions_per_second`, `postprocess_seconds` (median), `postprocess_runs`
    (each run's seconds) and `questions_per_second` (postprocessing).
  """
  start = time.perf_counter()
  examples = squad_data.read_squad_file(squad_file, is_training=False).examples
  read_seconds = time.perf_counter() - start
  tokenizer = WordPieceTokenizer(vocab_file or pretrained.minilm_vocab_file(), do_lower_case)
  start = time.perf_counter()
  windows = squad_features.convert_examples_to_features(examples, tokenizer, features,
                                                        is_training=False).features
  feature_seconds = time.perf_counter() - start
  rng = np.random.default_rng(seed)
  shape = (len(windows), features.max_seq_length)
  start_logits = rng.standard_normal(shape, dtype=np.float32)                # [F, S]
  end_logits = rng.standard_normal(shape, dtype=np.float32)                  # [F, S]
  runs = []
  for _ in range(repeats):
    start = time.perf_counter()
    squad_postprocess.postprocess_predictions(examples, windows, start_logits, end_logits,
                                              postprocess)
    runs.append(time.perf_counter() - start)
  seconds = statistics.median(runs)
  return {"questions": len(examples), "features": len(windows), "read_seconds": read_seconds,
          "feature_seconds": feature_seconds,
          "feature_questions_per_second": len(examples) / feature_seconds,
          "postprocess_seconds": seconds, "postprocess_runs": runs,
          "questions_per_second": len(examples) / seconds}
