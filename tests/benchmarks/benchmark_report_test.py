"""Tests for tools.benchmarks.benchmark_report: Markdown rows from fake results."""

import dataclasses
import os

import tensorflow as tf

from tfbert.runtime import cpu
from tfbert_tools.benchmarks import benchmark, benchmark_report

CASE = benchmark.StepCase(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=19,
                          vocab_size=53, seq_length=11, max_predictions=3, batch_size=3)


def _run(implementation, rate, rss):
  return {"case": dataclasses.asdict(dataclasses.replace(CASE, implementation=implementation)),
          "examples_per_second": rate, "window_examples_per_second": [rate, rate],
          "peak_rss_mib": rss, "flops_per_example": 2e9, "first_loss": 4.66}


def test_comparison_rows_give_mfu_and_the_median_ratio():
  result = {"runs": [_run("tfbert", 10.0, 900.0), _run("model_garden", 8.0, 1000.0)],
            "ratios": [1.25], "median_ratio": 1.25, "rss_ratios": [0.9],
            "median_rss_ratio": 0.9}
  text = benchmark_report.format_comparison(result, peak_gflops=80.0)
  # 10 examples/s x 2 GFLOP = 20 GFLOP/s = 25% of 80; 8 x 2 = 16 = 20%.
  assert ("| pretraining L1/H16/A2/I19, V53, S11, P3, B3 | float32 | off | 1 | tfbert | "
          "10.00 | 10.0, 10.0 | 20 | 25.0% | 900 | 4.660 |") in text
  assert "| model_garden | 8.00 | 8.0, 8.0 | 16 | 20.0% | 1000 |" in text
  assert "median **1.250**" in text and "float32 matmul peak 80.0 GFLOP/s" in text


def test_input_pipeline_row_gives_the_ratio_to_training():
  pipeline = {"examples_per_second": 4000.0, "batches": 1250, "seconds": 10.0}
  text = benchmark_report.format_input_pipeline(pipeline, _run("tfbert", 20.0, 900.0))
  assert "| 4000 (1250 batches in 10.0 s) | 20.00 | **200x** (goal >= 20x) |" in text


def test_postprocess_row_gives_both_rates():
  result = {"questions": 100, "features": 120, "feature_seconds": 2.0,
            "feature_questions_per_second": 50.0, "postprocess_seconds": 0.5,
            "postprocess_runs": [0.5, 0.6], "questions_per_second": 200.0}
  text = benchmark_report.format_postprocess(result, "/data/dev.json.gz")
  assert "| dev.json.gz | 100 | 120 | 2.00 | 50 | 0.50 (0.50, 0.60) | 200 |" in text


def test_machine_description_names_cores_and_versions():
  line = benchmark_report.machine_description()
  assert f"{os.cpu_count()} cores" in line and f"tensorflow {tf.__version__}" in line
  assert "tf-models-official" in line
  assert cpu.cpu_name() in line and "oneDNN " in line  # The CPU, so rows of two kinds differ.


def test_floor_rows_give_each_gemm_and_the_ratio_ceiling():
  gemm = {"name": "MLM logits: forward", "m": 960, "k": 160, "n": 530, "transpose_a": False,
          "transpose_b": True, "batch": 1, "count": 2, "flops": 2 * 2 * 960 * 160 * 530,
          "seconds": 0.001, "step_seconds": 0.002}
  untimed = {**gemm, "name": "NSP classifier: forward", "seconds": 0.0, "step_seconds": 0.0}
  floor = {"gemms": [gemm, untimed], "floor_seconds": 0.1, "flops": 10 ** 9}
  result = {"runs": [_run("tfbert", 20.0, 900.0), _run("model_garden", 10.0, 1000.0)]}
  text = benchmark_report.format_floor(floor, result)
  # 2 * 2 * 960 * 160 * 530 = 325,632,000 FLOPs in 2 ms: 163 GFLOP/s.
  assert "| MLM logits: forward | 960 x 160 x 530 | b | 1 x 2 | 2.00 | 163 |" in text
  assert "| NSP classifier: forward | 960 x 160 x 530 | b | 1 x 2 | 0.00 | - |" in text
  # Batch 3: the tfbert step is 3 / 20 = 0.15 s, the floor 0.1 s of it (67%); the peer's
  # 0.3 s step over the 0.1 s floor allows at most 3.0.
  assert "**100.0 ms** per step (1 GFLOP, 10 GFLOP/s)" in text
  assert "Floor / tfbert step per run: 67%" in text and "per peer run: **3.000**" in text


def test_interleaved_rows_give_each_round_and_the_median_ratio():
  case = dataclasses.asdict(dataclasses.replace(CASE, windows=2))
  def run(name, rate):
    return {"case": {**case, "implementation": name},
                              "examples_per_second": rate}
  result = {"case": case, "ratios": [1.25, 1.5], "median_ratio": 1.375,
            "runs": [run("tfbert", 10.0), run("model_garden", 8.0),
                     run("model_garden", 6.0), run("tfbert", 9.0)],
            "first_losses": {"tfbert": 4.66, "model_garden": 4.7}, "peak_rss_mib": 1500.0}
  text = benchmark_report.format_interleaved(result, peak_gflops=0.01)
  # 152,544 training FLOPs per example (benchmark_mfu_test's hand count for these shapes):
  # 10 examples/s = 1.525 MFLOP/s, 15.3% of a 0.01 GFLOP/s peak; 8 -> 12.2%, 9 -> 13.7%,
  # 6 -> 9.2%.
  assert "| 1 | tfbert | 10.00 | 8.00 | 15.3% | 12.2% | 1.250 |" in text
  assert "| 2 | model_garden | 9.00 | 6.00 | 13.7% | 9.2% | 1.500 |" in text
  assert "median **1.375**" in text and "(both models): 1500 MiB" in text


def test_ratio_summary_lists_each_ratio_and_bolds_the_median():
  assert (benchmark_report.ratio_summary("ratio per pair", [1.25, 0.8996, 1.0], 1.0)
          == "ratio per pair: 1.250, 0.900, 1.000; median **1.000**")
