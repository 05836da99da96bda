"""Tests for tfbert.benchmark (mechanics only: benchmarks are reported, never gated)."""

import dataclasses
import math

import numpy as np
import pytest

from tfbert import benchmark

TINY = benchmark.PretrainingCase(hidden_size=16, num_layers=1, num_heads=2,
                                 intermediate_size=19, vocab_size=53, seq_length=11,
                                 max_predictions=3, micro_batch_size=3, accumulation_steps=2,
                                 applied_steps=2, warmup_steps=1)
TINY_STEP = benchmark.StepCase(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=19,
                               vocab_size=53, seq_length=11, max_predictions=3, batch_size=3,
                               warmup_steps=1, windows=2, steps_per_window=1)


def test_synthetic_batch_has_googles_features_and_shapes():
  batch = benchmark.synthetic_batch(TINY)
  assert batch["input_ids"].shape == (3, 11) and batch["masked_lm_ids"].shape == (3, 3)
  assert batch["input_ids"].max() < 53 and batch["masked_lm_positions"].min() >= 1
  assert batch["masked_lm_weights"].dtype == np.float32


def test_squad_step_batch_shares_the_inputs_and_has_ordered_spans():
  pretraining = benchmark.synthetic_step_batch(TINY_STEP)
  squad = benchmark.synthetic_step_batch(dataclasses.replace(TINY_STEP, task="squad"))
  assert sorted(squad) == ["end_positions", "input_ids", "input_mask", "segment_ids",
                           "start_positions"]
  np.testing.assert_array_equal(squad["input_ids"], pretraining["input_ids"])
  assert squad["start_positions"].shape == (3,) and squad["start_positions"].dtype == np.int32
  assert np.all(squad["start_positions"] <= squad["end_positions"])
  assert squad["end_positions"].max() < 11


def test_step_case_rejects_fields_that_do_not_fit():
  with pytest.raises(ValueError, match="implementation"):
    dataclasses.replace(TINY_STEP, implementation="pytorch")
  with pytest.raises(ValueError, match="num_heads must divide"):
    dataclasses.replace(TINY_STEP, num_heads=3)
  with pytest.raises(ValueError, match="warmup_steps"):
    dataclasses.replace(TINY_STEP, warmup_steps=0)


def test_time_steps_warms_up_then_times_each_window():
  losses = iter(np.linspace(5.0, 4.0, 7))
  calls = []

  def step():
    calls.append(1)
    return float(next(losses))

  case = dataclasses.replace(TINY_STEP, warmup_steps=3, windows=2, steps_per_window=2)
  result = benchmark.time_steps(step, case)
  assert len(calls) == 3 + 2 * 2
  assert len(result["window_examples_per_second"]) == 2
  assert result["first_loss"] == 5.0 and result["last_loss"] == 4.0
  assert result["examples_per_second"] > 0


def test_time_steps_fails_on_a_non_finite_loss():
  with pytest.raises(FloatingPointError, match="non-finite"):
    benchmark.time_steps(lambda: float("nan"), TINY_STEP)


# tfbert initializes its heads as google-research/bert (truncated normal, stddev 0.02), so
# at init the logits are nearly 0: MLM logits are a unit-variance LayerNorm output times a
# [V, H] table, std <= sqrt(H) * 0.02 = 0.08; NSP and span logits are smaller or alike. The
# cross-entropy then exceeds ln(classes) by ~std^2 / 2 = 0.003, and its mean over the
# batch's B * P = 9 masked tokens varies by ~0.08 / 3 = 0.027: 0.1 is > 3 standard
# deviations.
def test_tfbert_pretraining_step_runs_from_a_near_uniform_loss():
  result = benchmark.run_step_case(TINY_STEP)
  assert result["first_loss"] == pytest.approx(math.log(53) + math.log(2), abs=0.1)
  assert result["flops_per_example"] == TINY_STEP.flops_per_example()
  assert result["examples_per_second"] > 0 and result["peak_rss_mib"] > 0


def test_tfbert_squad_step_runs_with_xla_from_a_near_uniform_loss():
  case = dataclasses.replace(TINY_STEP, task="squad", jit_compile=True)
  result = benchmark.run_step_case(case)
  assert result["first_loss"] == pytest.approx(math.log(11), abs=0.1)
  assert np.isfinite(result["last_loss"]) and result["case"]["jit_compile"]


def test_compare_with_peer_alternates_the_two_and_takes_the_median_ratio():
  seen = []
  rates = iter([10.0, 8.0, 12.0, 12.0, 9.0, 10.0])  # tfbert, peer, tfbert, peer, ...

  def fake_runner(case):
    seen.append(case.implementation)
    return {"case": dataclasses.asdict(case), "examples_per_second": next(rates),
            "peak_rss_mib": 900.0 if case.implementation == "tfbert" else 1000.0}

  result = benchmark.compare_with_peer(TINY_STEP, 3, runner=fake_runner)
  assert seen == ["tfbert", "model_garden"] * 3
  assert result["ratios"] == pytest.approx([1.25, 1.0, 0.9])
  assert result["median_ratio"] == pytest.approx(1.0)
  assert result["median_rss_ratio"] == pytest.approx(0.9)
  with pytest.raises(ValueError, match="repeats"):
    benchmark.compare_with_peer(TINY_STEP, 0, runner=fake_runner)


@pytest.mark.parametrize("loop", benchmark.PRETRAINING_LOOPS)
def test_a_case_runs_and_counts_applied_steps(loop):
  result = benchmark.run_pretraining_case(dataclasses.replace(TINY, loop=loop))
  assert result["applied_steps"] == 3  # 1 warm-up + 2 measured, each of 2 micro-steps
  assert result["examples_per_second"] > 0 and result["peak_rss_mib"] > 0
  assert result["case"]["loop"] == loop


def test_an_unknown_loop_is_rejected_naming_the_choices():
  with pytest.raises(ValueError, match="pretraining_run"):
    dataclasses.replace(TINY, loop="keras")


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
  assert "| 1 | accumulated | 8 x 4 | 90.0 | 250 |" in benchmark.format_accumulation(result)


def test_accumulation_overhead_alternates_and_takes_the_median_pair_ratio():
  seen, rates = [], iter([100.0, 90.0, 50.0, 40.0, 80.0, 84.0])  # a load that drifts

  def fake_runner(case):
    seen.append(case.accumulation_steps)
    return {"case": dataclasses.asdict(case), "examples_per_second": next(rates),
            "peak_rss_mib": 1000.0 / case.accumulation_steps}

  result = benchmark.accumulation_overhead(dataclasses.replace(TINY, micro_batch_size=8), 4,
                                           runner=fake_runner, repeats=3)
  assert seen == [1, 4, 1, 4, 1, 4]
  assert result["ratios"] == pytest.approx([0.9, 0.8, 1.05])
  assert result["throughput_ratio"] == pytest.approx(0.9)  # median of the pairs
  text = benchmark.format_accumulation(result)
  assert "| 3 | accumulated | 8 x 4 | 84.0 | 250 |" in text
  assert "per pair: 0.900, 0.800, 1.050; median 0.900" in text
  with pytest.raises(ValueError, match="repeats must be >= 1"):
    benchmark.accumulation_overhead(TINY, 2, runner=fake_runner, repeats=0)
