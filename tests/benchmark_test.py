"""Tests for tfbert.benchmark (mechanics only: benchmarks are reported, never gated)."""

import dataclasses

import numpy as np
import pytest

from tfbert import benchmark

TINY = benchmark.PretrainingCase(hidden_size=16, num_layers=1, num_heads=2,
                                 intermediate_size=19, vocab_size=53, seq_length=11,
                                 max_predictions=3, micro_batch_size=3, accumulation_steps=2,
                                 applied_steps=2, warmup_steps=1)


def test_synthetic_batch_has_googles_features_and_shapes():
  batch = benchmark.synthetic_batch(TINY)
  assert batch["input_ids"].shape == (3, 11) and batch["masked_lm_ids"].shape == (3, 3)
  assert batch["input_ids"].max() < 53 and batch["masked_lm_positions"].min() >= 1
  assert batch["masked_lm_weights"].dtype == np.float32


def test_a_case_runs_and_counts_applied_steps():
  result = benchmark.run_pretraining_case(TINY)
  assert result["applied_steps"] == 3  # 1 warm-up + 2 measured, each of 2 micro-steps
  assert result["examples_per_second"] > 0 and result["peak_rss_mib"] > 0


def test_accumulation_overhead_compares_k_times_b_with_one_step_of_kb():
  seen = []

  def fake_runner(case):
    seen.append(case)
    rate = 100.0 if case.accumulation_steps == 1 else 90.0
    return {"case": dataclasses.asdict(case), "examples_per_second": rate,
            "peak_rss_mib": 1000.0 / case.accumulation_steps}

  result = benchmark.accumulation_overhead(dataclasses.replace(TINY, micro_batch_size=8), 4,
                                           runner=fake_runner)
  assert [(c.micro_batch_size, c.accumulation_steps) for c in seen] == [(32, 1), (8, 4)]
  assert result["throughput_ratio"] == pytest.approx(0.9)
  assert result["peak_rss_ratio"] == pytest.approx(0.25)
  assert "| accumulated | 8 x 4 | 90.0 | 250 |" in benchmark.format_accumulation(result)
