"""Tests for tools.benchmarks.benchmark_accumulation (mechanics only: benchmarks are never
gated)."""

import dataclasses
import statistics

import numpy as np
import pytest

from tests.benchmarks import forked_benchmark
from tfbert_tools.benchmarks import benchmark_accumulation as b

TINY = b.PretrainingCase(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=19,
                         vocab_size=53, seq_length=11, max_predictions=3, micro_batch_size=3,
                         gradient_accumulation_steps=2, applied_steps=2, warmup_steps=1)


def test_synthetic_batch_has_googles_features_and_shapes():
  batch = b.synthetic_batch(TINY)
  assert batch["input_ids"].shape == (3, 11) and batch["masked_lm_ids"].shape == (3, 3)
  assert batch["input_ids"].max() < 53 and batch["masked_lm_positions"].min() >= 1
  assert batch["masked_lm_weights"].dtype == np.float32


def test_a_case_without_a_warm_up_step_is_refused_before_any_work():
  """Sweep 26: --warmup_steps=0 measured from index -1 (a traceback), and interleaved it
  never ended."""
  with pytest.raises(ValueError, match=r"warmup_steps \(0\) must be >= 1"):
    dataclasses.replace(TINY, warmup_steps=0)


@pytest.mark.slow  # ~3.5 s: a pretraining run per loop.
@pytest.mark.parametrize("loop", b.PRETRAINING_LOOPS)
def test_a_case_runs_and_counts_applied_steps(loop):
  result = b.run_pretraining_case(dataclasses.replace(TINY, loop=loop))
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
    rate = 100.0 if case.gradient_accumulation_steps == 1 else 90.0
    return {"case": dataclasses.asdict(case), "examples_per_second": rate,
            "peak_rss_mib": 1000.0 / case.gradient_accumulation_steps}

  result = b.accumulation_overhead(dataclasses.replace(TINY, micro_batch_size=8), 4,
                                   runner=fake_runner)
  assert [(c.micro_batch_size, c.gradient_accumulation_steps) for c in seen] == [(32, 1), (8, 4)]
  assert result["throughput_ratio"] == pytest.approx(0.9)
  assert result["peak_rss_ratio"] == pytest.approx(0.25)
  assert "| 1 | accumulated | 8 x 4 | 90.0 | 250 |" in b.format_accumulation(result)


def test_accumulation_overhead_alternates_and_takes_the_median_pair_ratio():
  seen, rates = [], iter([100.0, 90.0, 50.0, 40.0, 80.0, 84.0])  # a load that drifts

  def fake_runner(case):
    seen.append(case.gradient_accumulation_steps)
    return {"case": dataclasses.asdict(case), "examples_per_second": next(rates),
            "peak_rss_mib": 1000.0 / case.gradient_accumulation_steps}

  result = b.accumulation_overhead(dataclasses.replace(TINY, micro_batch_size=8), 4,
                                   runner=fake_runner, repeats=3)
  assert seen == [1, 4, 1, 4, 1, 4]
  assert result["ratios"] == pytest.approx([0.9, 0.8, 1.05])
  assert result["throughput_ratio"] == pytest.approx(0.9)  # median of the pairs
  text = b.format_accumulation(result)
  assert "| 3 | accumulated | 8 x 4 | 84.0 | 250 |" in text
  assert "per pair: 0.900, 0.800, 1.050; median **0.900**; peak RSS ratio" in text
  with pytest.raises(ValueError, match="repeats must be >= 1"):
    b.accumulation_overhead(TINY, 2, runner=fake_runner, repeats=0)


def _check_interleaved(result, rounds):
  """Sides alternate first, each window's rates give the round's ratio, all steps ran."""
  runs = result["runs"]
  assert [r["side"] for r in runs] == (["big_batch", "accumulated", "accumulated",
                                        "big_batch"] * rounds)[:2 * rounds]
  sizes = {r["side"]: (r["case"]["micro_batch_size"], r["case"]["gradient_accumulation_steps"])
           for r in runs}
  assert sizes == {"big_batch": (6, 1), "accumulated": (3, 2)}
  rates = [{r["side"]: r["examples_per_second"] for r in pair}
           for pair in zip(runs[0::2], runs[1::2])]
  assert result["ratios"] == pytest.approx([r["accumulated"] / r["big_batch"] for r in rates])
  assert result["median_ratio"] == pytest.approx(statistics.median(result["ratios"]))
  # 1 warm-up applied step + `rounds` windows of 2, on each side.
  assert result["applied_steps"] == {"big_batch": 1 + 2 * rounds, "accumulated": 1 + 2 * rounds}
  assert all(r["examples_per_second"] > 0 for r in runs) and result["peak_rss_mib"] > 0


@pytest.mark.slow
def test_interleaved_alternates_the_sides_window_by_window():
  """The `fit` loop here; the `pretraining_run` loop's same check is the next test's, run
  in another process. Two rounds show the order swapped (benchmark_test.py proves
  `alternating_rounds` on 3)."""
  _check_interleaved(b.run_interleaved(dataclasses.replace(TINY, loop="fit"), 2, rounds=2), 2)


@pytest.mark.slow
def test_interleaved_in_a_subprocess_returns_the_same_record(monkeypatch):
  """Another process (forked: tests/benchmarks/forked_benchmark.py) runs the
  `pretraining_run` loop's interleaved rounds and returns their record, of the case it was
  given (a loop other than the default: the case crossed the process boundary)."""
  forked_benchmark.fork_benchmark_processes(monkeypatch)
  result = b.run_interleaved_in_subprocess(dataclasses.replace(TINY, loop="pretraining_run"), 2,
                                           rounds=2)
  _check_interleaved(result, 2)
  assert result["case"]["loop"] == "pretraining_run"


def test_interleaved_needs_a_round_and_two_applied_steps_per_window():
  with pytest.raises(ValueError, match="rounds >= 1"):
    b.run_interleaved(TINY, 2, rounds=0)
  with pytest.raises(ValueError, match="applied_steps >= 2"):
    b.run_interleaved(dataclasses.replace(TINY, applied_steps=1), 2, rounds=1)


def test_format_interleaved_lists_rounds_and_the_median():
  big = dataclasses.asdict(dataclasses.replace(TINY, micro_batch_size=8,
                                               gradient_accumulation_steps=1))
  small = dataclasses.asdict(dataclasses.replace(TINY, micro_batch_size=2,
                                                 gradient_accumulation_steps=4))
  result = {"case": small, "ratios": [0.9, 0.75], "median_ratio": 0.825, "peak_rss_mib": 2048.4,
            "runs": [{"side": "big_batch", "case": big, "examples_per_second": 40.0},
                     {"side": "accumulated", "case": small, "examples_per_second": 36.0},
                     {"side": "accumulated", "case": small, "examples_per_second": 30.0},
                     {"side": "big_batch", "case": big, "examples_per_second": 40.0}]}
  text = b.format_interleaved(result)
  assert "| round | first | big batch 8 x 1 examples/s | accumulated 2 x 4 examples/s |" in text
  assert "| 1 | big_batch | 40.0 | 36.0 | 0.900 |" in text
  assert "| 2 | accumulated | 40.0 | 30.0 | 0.750 |" in text
  assert "per round: 0.900, 0.750; median **0.825**" in text and "2048 MiB" in text
  assert text.startswith("loop fit, float32; both in one process, 2 applied steps per window")
