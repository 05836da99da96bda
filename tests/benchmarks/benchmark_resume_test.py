"""tfbert_tools.benchmarks.benchmark_resume: near, far and far-without-position resumes,
measured."""

import contextlib
import io
import json
import sys

import pytest
import tensorflow as tf

from tests.benchmarks import forked_benchmark
from tfbert_tools.benchmarks import benchmark, benchmark_resume

# Odd sizes; a few documents; far = 25 applied steps of 3 (the data set repeats).
TINY = benchmark_resume.ResumeCase(near_sequences=6, far_sequences=75, batch_size=3,
                                   seq_length=32, max_predictions=5, num_layers=1,
                                   hidden_size=14, intermediate_size=19, rounds=1,
                                   max_documents=8)


def _first_in_a_process_then_here(monkeypatch):
  """`benchmark.run_in_subprocess` as the benchmark calls it for its first resume (another
  process, forked from the test's server: `time_resume`'s code proven to run there); later
  ones run the same code in this process, another process being no part of their proof."""
  forked_benchmark.fork_benchmark_processes(monkeypatch)
  calls = []
  real = benchmark.run_in_subprocess

  def run(code, argument, timeout, env=None):
    calls.append(argument)
    if len(calls) == 1:
      return real(code, argument, timeout, env)
    out = io.StringIO()
    monkeypatch.setattr(sys, "argv", ["-c", json.dumps(argument)])
    with contextlib.redirect_stdout(out):
      exec(code, {"__name__": "__main__"})  # pylint: disable=exec-used
    lines = [line for line in out.getvalue().splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT "):])

  monkeypatch.setattr(benchmark, "run_in_subprocess", run)
  return calls


@pytest.mark.slow
def test_the_three_resumes_are_timed_and_the_position_is_what_the_far_checkpoint_adds(
    tmp_path, monkeypatch):
  calls = _first_in_a_process_then_here(monkeypatch)
  result = benchmark_resume.measure(TINY, str(tmp_path))
  assert len(calls) == 3  # near (another process), far, far without the position
  assert [len(result["seconds"][k]) for k in ("near", "far", "far_no_position")] == [1, 1, 1]
  assert all(s > 0 for values in result["seconds"].values() for s in values)
  # Each resume trained one step on from its checkpoint: near 2 -> 3, far 25 -> 26.
  assert benchmark_resume.latest_step(str(tmp_path / "near")) == 3
  assert benchmark_resume.latest_step(str(tmp_path / "far")) == 26
  far = tf.train.load_checkpoint(str(tmp_path / "far" / "checkpoints" / "ckpt-26"))
  assert "data_position" in {n.split("/")[0] for n in far.get_variable_to_shape_map()}
  assert result["iterator_state_bytes"] > 0
  assert result["ratio"] == result["medians"]["far"] / result["medians"]["near"]
  text = benchmark_resume.format_result(result)
  assert "| far | 75 |" in text and "| near | 6 |" in text and "far/near: **" in text
