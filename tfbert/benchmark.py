"""Training-throughput benchmarks, measured as ratios against a peer in the same run.

A case trains for a number of applied steps on synthetic data of the right shapes and
reports examples/s as the median over applied steps after warm-up (one applied step =
`accumulation_steps` micro-steps), plus the process's peak RSS. Each case runs in its own
process (`run_case_in_subprocess`) so that peak memory belongs to that case alone.
"""

import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from tfbert import optimization
from tfbert.config import BertConfig
from tfbert.models import BertPretrainer


@dataclasses.dataclass(frozen=True)
class PretrainingCase:
  """One pretraining throughput measurement.

  Attributes:
    hidden_size, num_layers, num_heads, intermediate_size, vocab_size: the model (H/L/A/I/V).
    seq_length, max_predictions: input shape (S, P).
    micro_batch_size: sequences per micro-step (b).
    accumulation_steps: micro-steps per applied step (k); examples per applied step = k*b.
    applied_steps: measured applied steps (after `warmup_steps` applied steps).
    dtype_policy: "float32" or "mixed_bfloat16".
  """
  hidden_size: int = 256
  num_layers: int = 4
  num_heads: int = 4
  intermediate_size: int = 1024
  vocab_size: int = 30522
  seq_length: int = 128
  max_predictions: int = 20
  micro_batch_size: int = 32
  accumulation_steps: int = 1
  applied_steps: int = 8
  warmup_steps: int = 2
  dtype_policy: str = "float32"


def synthetic_batch(case: PretrainingCase, seed: int = 0) -> dict[str, np.ndarray]:
  """One micro-batch of random pretraining features with google-research/bert's names."""
  rng = np.random.default_rng(seed)
  b, s, p = case.micro_batch_size, case.seq_length, case.max_predictions
  return {
      "input_ids": rng.integers(0, case.vocab_size, (b, s)).astype(np.int32),
      "input_mask": np.ones((b, s), np.int32),
      "segment_ids": (np.arange(s)[None] >= s // 2).astype(np.int32).repeat(b, 0),
      "masked_lm_positions": rng.integers(1, s, (b, p)).astype(np.int32),
      "masked_lm_ids": rng.integers(0, case.vocab_size, (b, p)).astype(np.int32),
      "masked_lm_weights": np.ones((b, p), np.float32),
      "next_sentence_labels": rng.integers(0, 2, b).astype(np.int32),
  }


class _StepTimer(keras.callbacks.Callback):
  def __init__(self):
    super().__init__()
    self.times = []

  def on_train_batch_end(self, batch, logs=None):
    self.times.append(time.perf_counter())


def run_pretraining_case(case: PretrainingCase) -> dict:
  """Trains `case` in this process; returns examples/s, peak RSS and the case."""
  keras.mixed_precision.set_global_policy(case.dtype_policy)
  config = BertConfig(vocab_size=case.vocab_size, hidden_size=case.hidden_size,
                      num_hidden_layers=case.num_layers, num_attention_heads=case.num_heads,
                      intermediate_size=case.intermediate_size,
                      max_position_embeddings=max(512, case.seq_length))
  model = BertPretrainer(config)
  total = (case.applied_steps + case.warmup_steps) * case.accumulation_steps
  model.compile(optimizer=optimization.create_optimizer(optimization.OptimizerConfig(
      name="adamw", learning_rate=1e-4, warmup_steps=0, total_steps=total,
      accumulation_steps=case.accumulation_steps, accumulation_reduction="sum")))
  dataset = tf.data.Dataset.from_tensors(synthetic_batch(case)).repeat()
  timer = _StepTimer()
  start = time.perf_counter()
  model.fit(dataset, steps_per_epoch=total, epochs=1, verbose=0, callbacks=[timer])
  k = case.accumulation_steps
  ends = timer.times[k * case.warmup_steps - 1::k]  # end of each applied step from warm-up on
  rates = [k * case.micro_batch_size / (b - a) for a, b in zip(ends, ends[1:])]
  return {"case": dataclasses.asdict(case), "examples_per_second": statistics.median(rates),
          "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
          "wall_seconds": time.perf_counter() - start,
          "applied_steps": int(model.optimizer.iterations.numpy())}


def run_case_in_subprocess(case: PretrainingCase, timeout: float = 1800.0) -> dict:
  """Runs `run_pretraining_case` in a fresh process (own peak RSS); returns its result."""
  code = ("import json, sys; from tfbert import benchmark; "
          "case = benchmark.PretrainingCase(**json.loads(sys.argv[1])); "
          "print('RESULT ' + json.dumps(benchmark.run_pretraining_case(case)))")
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-c", code, json.dumps(dataclasses.asdict(case))],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=root)
  lines = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")]
  if result.returncode != 0 or not lines:
    raise RuntimeError(f"benchmark case failed:\n{result.stderr[-3000:]}")
  return json.loads(lines[-1][len("RESULT "):])


def accumulation_overhead(case: PretrainingCase, accumulation_steps: int,
                          runner=run_case_in_subprocess) -> dict:
  """k micro-steps of b against one step of k*b, same model, same run.

  Returns:
    dict with both results and `throughput_ratio` (accumulated / big batch examples/s) and
    `peak_rss_ratio`.
  """
  big = dataclasses.replace(case, micro_batch_size=case.micro_batch_size * accumulation_steps,
                            accumulation_steps=1)
  small = dataclasses.replace(case, accumulation_steps=accumulation_steps)
  big_result, small_result = runner(big), runner(small)
  return {"big_batch": big_result, "accumulated": small_result,
          "throughput_ratio": small_result["examples_per_second"]
          / big_result["examples_per_second"],
          "peak_rss_ratio": small_result["peak_rss_mib"] / big_result["peak_rss_mib"]}


def format_accumulation(result: dict) -> str:
  """A Markdown table row pair for BENCHMARKS.md."""
  rows = ["| run | micro-batch x k | examples/s | peak RSS (MiB) |", "|---|---|---|---|"]
  for name in ("big_batch", "accumulated"):
    r = result[name]
    c = r["case"]
    rows.append(f"| {name} | {c['micro_batch_size']} x {c['accumulation_steps']} | "
                f"{r['examples_per_second']:.1f} | {r['peak_rss_mib']:.0f} |")
  rows.append(f"\nthroughput ratio (accumulated / big batch): {result['throughput_ratio']:.3f}; "
              f"peak RSS ratio: {result['peak_rss_ratio']:.3f}")
  return "\n".join(rows)
