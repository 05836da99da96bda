"""Continued pretraining: the shipped MiniLM-L6-H384 adapted by masked-LM training on a domain
corpus that is available offline, CPython's documentation (`pydoc_data.topics`).

This follows transformers' `run_mlm.py` recipe on raw text: the topics (each distinct text
once: a few are one text under two names) are split into training text (9 of every 10) and
held-out text (every 10th, so no document is in both). The run is
`tfbert.pretraining.pretraining_run` with `init_hf_dir` set to MiniLM, `objective` "mlm",
and `train_text_files` plus `eval_text_files` (dynamic masking, blocks of S tokens). The
held-out masked-LM loss and perplexity are measured on the same masked sequences (the same
masks, drawn from each sequence's place in the files) before the first step, with the
loaded weights, and then by the run's own evaluation at its last step. examples/s is the
median of the run's log windows (`examples_per_second`, which leaves the first, tracing,
step out).
"""

import dataclasses
import json
import os
import statistics
import time
import types

import tensorflow as tf

from tfbert import BertPretrainer
from tfbert.checkpoints import pretrained
from tfbert.pretraining import pretraining_data, pretraining_eval, pretraining_init, raw_text_run
from tfbert.pretraining.pretraining_run import PretrainingRunConfig, run_pretraining
from tfbert.runtime import validation
from tfbert.training import optimization

HELD_OUT_EVERY = 10  # Every 10th topic is held out.
# The first applied step traces and is left out of sequences/s (its log window alone logs
# none): a speed needs one more.
MIN_TRAIN_STEPS = 2


@dataclasses.dataclass(frozen=True)
class ContinuedCase:
  """One continued-pretraining run.

  Attributes:
    train_steps: applied steps (>= `MIN_TRAIN_STEPS`).
    batch_size: sequences per applied step.
    seq_length: S, the length of a packed block.
    learning_rate: AdamW's peak learning rate (10% warmup, then linear decay).
    eval_batch_size, max_eval_steps: the held-out evaluation's batches.
  """
  train_steps: int = 200
  batch_size: int = 16
  seq_length: int = 128
  learning_rate: float = 5e-5
  eval_batch_size: int = 16
  max_eval_steps: int = 16

  def checks(self) -> list[validation.Check]:
    return [(self.train_steps >= MIN_TRAIN_STEPS,
             f"train_steps ({self.train_steps}) must be >= {MIN_TRAIN_STEPS}: the first "
             "step traces and is left out of sequences/s, which needs a timed step after it"),
            (self.batch_size >= 1, f"batch_size ({self.batch_size}) must be >= 1"),
            (8 <= self.seq_length <= 512, f"seq_length ({self.seq_length}) must be in [8, 512]")]

  def __post_init__(self):
    validation.validate(self)


def write_corpus(folder: str) -> tuple[str, str]:
  """The pydoc topics as `train.txt` and `held_out.txt` in `folder` (blank-line-separated
  documents); returns their paths."""
  corpus = pretraining_data.pydoc_corpus(os.path.join(folder, "all.txt"))
  with open(corpus, encoding="utf-8") as f:
    # Some topics are one text under two names: each text once, so none is in both parts.
    documents = list(dict.fromkeys(f.read().strip().split("\n\n")))
  os.remove(corpus)
  parts = {"train.txt": [d for i, d in enumerate(documents) if i % HELD_OUT_EVERY],
           "held_out.txt": documents[::HELD_OUT_EVERY]}
  for name, chosen in parts.items():
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
      f.write("\n\n".join(chosen) + "\n")
  return os.path.join(folder, "train.txt"), os.path.join(folder, "held_out.txt")


def run_config(case: ContinuedCase, folder: str) -> PretrainingRunConfig:
  """The run's config: MiniLM continued on the corpus of `write_corpus(folder)`."""
  train, held_out = write_corpus(folder)
  source = pretrained.minilm_dir()
  config = PretrainingRunConfig(
      bert_config=pretraining_init.source_config(types.SimpleNamespace(init_hf_dir=source)),
      input_files=[], train_text_files=[train], eval_text_files=[held_out], objective="mlm",
      init_hf_dir=source, model_dir=os.path.join(folder, "run"),
      optimizer=optimization.OptimizerConfig(
          optimizer="adamw", learning_rate=case.learning_rate,
          num_train_steps=case.train_steps, num_warmup_steps=max(1, case.train_steps // 10)),
      train_batch_size=case.batch_size, max_seq_length=case.seq_length,
      max_predictions_per_seq=max(1, round(case.seq_length * 0.15)),
      eval_batch_size=case.eval_batch_size, max_eval_steps=case.max_eval_steps,
      log_steps=max(1, case.train_steps // 10), save_checkpoints_steps=case.train_steps,
      export_saved_model=False)
  return raw_text_run.resolve(config)


def held_out_metrics(config: PretrainingRunConfig, steps: int) -> dict:
  """The held-out metrics of the source model as loaded, before any step: the evaluation
  the run makes at its last step (same sequences, same masks; `steps` batches)."""
  strategy = tf.distribute.get_strategy()
  model = BertPretrainer(config.bert_config, objective=config.objective)
  model.build()
  pretraining_init.load_source(model, pretraining_init.read_source(config))
  return pretraining_eval.Evaluator(
      model, strategy, raw_text_run.eval_dataset(config, strategy, config.eval_batch_size, 1, 0),
      batch_size=config.eval_batch_size, steps=steps)()


def measure(case: ContinuedCase, folder: str) -> dict:
  """Held-out metrics before and after `case.train_steps` steps, the run's time and speed."""
  config = run_config(case, folder)
  records = raw_text_run.eval_records(config)  # Counted once; the run counts them again.
  steps = pretraining_eval.eval_steps(records, 1, config.eval_batch_size, config.max_eval_steps)
  before = held_out_metrics(config, steps)
  start = time.perf_counter()
  result = run_pretraining(config)
  seconds = time.perf_counter() - start
  with open(os.path.join(config.model_dir, "metrics.jsonl"), encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  speeds = [r["examples_per_second"] for r in rows if "examples_per_second" in r]
  if not speeds:  # A row of nan sequences/s would read as a measurement.
    raise RuntimeError(f"{config.model_dir}/metrics.jsonl: no log window timed a step "
                       f"after the first (tracing) one in {case.train_steps} steps")
  train_sequences = sum(raw_text_run.eval_records(
      dataclasses.replace(config, eval_text_files=config.train_text_files)).values())
  return {"before": before, "after": result["eval"], "seconds": seconds,
          "examples_per_second": statistics.median(speeds),
          "held_out_sequences": sum(records.values()), "train_sequences": train_sequences,
          "eval_sequences": steps * config.eval_batch_size}


def format_result(case: ContinuedCase, result: dict) -> str:
  """Markdown rows for BENCHMARKS.md."""
  epochs = case.train_steps * case.batch_size / result["train_sequences"]
  lines = [
      f"MiniLM-L6-H384 continued on CPython's pydoc topics: {result['train_sequences']} "
      f"training blocks of {case.seq_length} tokens, held-out {result['held_out_sequences']} "
      f"blocks ({result['eval_sequences']} scored); batch {case.batch_size}, AdamW "
      f"{case.learning_rate:g}, {case.train_steps} steps ({epochs:.2f} epochs), masked-LM only, "
      "dynamic masking",
      "",
      "| | held-out MLM loss | perplexity | MLM accuracy |",
      "|---|---|---|---|"]
  for name in ("before", "after"):
    m = result[name]
    lines.append(f"| {name} | {m['mlm_loss']:.4f} | {m['mlm_perplexity']:.2f} | "
                 f"{m['mlm_accuracy']:.4f} |")
  lines += ["", f"training: {result['seconds']:.0f} s in all (loading, tracing, evaluation and "
            f"checkpoints included), {result['examples_per_second']:.1f} sequences/s (median "
            "of the log windows, the tracing first step left out)"]
  return "\n".join(lines)
