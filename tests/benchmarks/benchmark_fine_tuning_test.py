"""Tests for tools.benchmarks.benchmark_fine_tuning: both paths train the same, and a report."""

import dataclasses
import json
import os

import numpy as np
import pytest

from tfbert_tools.benchmarks import benchmark_fine_tuning
from tfbert_tools.demos.squad_synthetic import synthetic_squad

TINY = dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=37, seq_length=64,
            batch_size=8, short_steps=2, long_steps=4, rounds=1, paragraphs=6)


@pytest.mark.slow
def test_the_loop_and_fit_paths_train_the_same_model(tmp_path):
  """The benchmark compares like with like: the same data, steps and optimizer give the same
  weights through either path (float32 rounding of two tf.functions aside, ~1e-7; another
  batch or step would move them by ~1e-3)."""
  case = benchmark_fine_tuning.FineTuningCase(**TINY)
  (tmp_path / "train.json").write_text(json.dumps(synthetic_squad(case.paragraphs, seed=1)))
  models = {path: benchmark_fine_tuning.train_once(case, path, 3, str(tmp_path), path)[1]
            for path in benchmark_fine_tuning.PATHS}
  deviation = max(float(np.abs(a - b).max()) for a, b in zip(
      models["loop"].get_weights(), models["fit"].get_weights()))
  assert deviation < 1e-5, deviation
  assert int(models["loop"].optimizer.iterations) == int(models["fit"].optimizer.iterations) == 3


@pytest.mark.slow
def test_a_path_is_timed_at_both_lengths_and_reported(tmp_path, monkeypatch):
  """`run_path` (what each benchmark process runs) times both run lengths (each `TIMINGS` times)
  after an untimed one; the report names both paths and their ratio.

  The runs are real; each measured time gets 1 s per step added, so the tiny case's 2 extra
  steps (a few ms, within the runs' noise) always make the longer run slower and the rate
  measurable (a noisy inversion is refused: the test below)."""
  case = benchmark_fine_tuning.FineTuningCase(**TINY)
  (tmp_path / "train.json").write_text(json.dumps(synthetic_squad(case.paragraphs, seed=1)))
  timed = benchmark_fine_tuning.time_training
  monkeypatch.setattr(benchmark_fine_tuning, "time_training",
                      lambda case_, path, steps, workdir, name: timed(
                          case_, path, steps, workdir, name) + steps)
  run = benchmark_fine_tuning.run_path({"case": dataclasses.asdict(case), "path": "loop",
                                        "workdir": str(tmp_path)})
  assert set(run["seconds"]) == {2, 4}
  assert [len(t) for t in run["seconds"].values()] == [benchmark_fine_tuning.TIMINGS] * 2
  assert run["seconds_per_step"] == pytest.approx(
      (min(run["seconds"][4]) - min(run["seconds"][2])) / 2)
  assert os.path.isdir(tmp_path / "warmup")  # The untimed run.
  result = {"case": dataclasses.asdict(case), "runs": {"loop": [run], "fit": [run]},
            "median_examples_per_second": {"loop": 10.0, "fit": 8.0}, "loop_over_fit": 1.25}
  text = benchmark_fine_tuning.format_result(result)
  assert "| loop | 10.0 |" in text and "| fit | 8.0 |" in text and "loop/fit: 1.250" in text


def test_a_long_run_not_slower_than_the_short_one_is_unmeasurable_not_a_negative_rate(
    monkeypatch, tmp_path):
  """Sweep 9 BM01: steps 2 vs 4 whose 4-step runs happened to be faster printed -294.1
  examples/s; a non-positive difference of timings is refused, naming what to do."""
  case = benchmark_fine_tuning.FineTuningCase(**TINY)
  timings = {case.short_steps: 3.0, case.long_steps: 2.5}
  monkeypatch.setattr(benchmark_fine_tuning, "time_training",
                      lambda case_, path, steps, workdir, name: timings[steps])
  with pytest.raises(ValueError, match=r"unmeasurable: the fastest 4-step run \(2.500 s\) was "
                     r"not slower than the fastest 2-step run \(3.000 s\).*further apart"):
    benchmark_fine_tuning.run_path({"case": dataclasses.asdict(case), "path": "fit",
                                    "workdir": str(tmp_path)})
  timings[case.long_steps] = 4.0  # 0.5 s per step: 8 examples / 0.5 s.
  run = benchmark_fine_tuning.run_path({"case": dataclasses.asdict(case), "path": "fit",
                                        "workdir": str(tmp_path)})
  assert run["examples_per_second"] == pytest.approx(16.0)
