"""Tests for tools/benchmark.py, the command line: its arguments are checked before any
benchmark runs (the benchmarks themselves: BENCHMARKS.md)."""

import re

import pytest
from absl import flags

from tests import tool_process


def _error(*args) -> str:
  run = tool_process.run_tool("benchmark", *args)
  assert run.returncode == 1, run.stdout + run.stderr
  lines = [line for line in run.stderr.splitlines() if line.startswith("benchmark: error: ")]
  assert len(lines) == 1, run.stderr
  assert "machine:" not in run.stdout  # Refused before the first benchmark line.
  return lines[0]


def test_a_flag_of_another_benchmark_is_refused_naming_it_and_its_benchmark():
  """--bucket_task with continued_pretraining was ignored, the run made as if not given.
  Checked first: before the case's own checks (S 4 is out of its range too)."""
  line = _error("--benchmark=continued_pretraining", "--bucket_task=wnut", "--batch_size=2",
                "--matmul_size=8", "--seq_length=4")
  assert line == ("benchmark: error: --bucket_task (buckets), --matmul_size (pretraining, "
                  "squad, matmul): not read by --benchmark=continued_pretraining (the "
                  "benchmarks that read them in brackets): leave them out or choose a "
                  "benchmark they belong to")
  line = _error("--benchmark=matmul", "--windows=3")
  assert line == ("benchmark: error: --windows (accumulation, pretraining, squad, "
                  "input_pipeline): not read by --benchmark=matmul (the benchmarks that read "
                  "it in brackets): leave it out or choose a benchmark it belongs to")


def test_every_benchmark_declares_the_flags_it_reads():
  with tool_process.tool_modules():
    from tfbert_flags import benchmark_flags  # pylint: disable=import-outside-toplevel
    defined = {flag.name for flag in flags.FLAGS.get_flags_for_module(benchmark_flags)}
    assert set(benchmark_flags.READS) == set(flags.FLAGS["benchmark"].parser.enum_values)
    declared = {name for names in benchmark_flags.READS.values() for name in names}
    assert declared == defined - {"benchmark"}


@pytest.mark.parametrize("steps", ["1", "0"])
def test_continued_pretraining_needs_a_step_after_the_traced_one(steps):
  """One step gave a row of nan sequences/s (the traced first step is left out)."""
  run = tool_process.run_tool("benchmark", "--benchmark=continued_pretraining",
                              f"--continued_steps={steps}")
  assert run.returncode == 1
  assert f"flag --continued_steps={steps}: " in run.stderr and ">= 2" in run.stderr
  assert "machine:" not in run.stdout


def test_the_postprocess_benchmark_without_its_dev_file_is_refused():
  """It exited 0 having measured nothing ("postprocess skipped", sweep 6, B02)."""
  assert _error("--benchmark=postprocess") == (
      "benchmark: error: --benchmark=postprocess times SQuAD feature creation and "
      "postprocessing on --squad_dev_file, which is not set: give the SQuAD v1.1 dev set "
      "(BENCHMARKS.md names the file it used)")


def test_a_list_flag_item_that_is_no_number_is_named_with_the_flag():
  """--fine_tuning_steps=a,b said only "invalid literal for int() with base 10: 'a'" (sweep
  8, BM04), after the machine line."""
  run = tool_process.run_tool("benchmark", "--benchmark=fine_tuning", "--fine_tuning_steps=a,b")
  assert run.returncode == 1
  assert ("flag --fine_tuning_steps=a,b: item 'a' is not a whole number: give "
          "comma-separated whole numbers (e.g. 5,65)") in run.stderr
  assert "invalid literal" not in run.stderr and "machine:" not in run.stdout


@pytest.mark.parametrize("value, message", [
    ("5,x", "item 'x' is not a whole number"),
    ("5,2.5", "item '2.5' is not a whole number"),
    ("5,65,100", "takes 2 comma-separated whole numbers (e.g. 5,65), got 3"),
    ("5", "takes 2 comma-separated whole numbers (e.g. 5,65), got 1"),
])
def test_every_integer_list_flag_names_its_bad_item(value, message):
  with tool_process.tool_modules():
    from tfbert_flags import benchmark_flags  # pylint: disable=import-outside-toplevel
    lists = [flag for flag in flags.FLAGS.get_flags_for_module(benchmark_flags)
             if isinstance(flag.parser, flags.ListParser)]
    # The benchmark's list flags are all lists of numbers, parsed as such (none by int()).
    assert lists and all(isinstance(flag.parser, benchmark_flags.IntegerListParser)
                         for flag in lists)
    flag = flags.FLAGS["fine_tuning_steps"]
    assert flag.parser.parse(" 5, 65") == [5, 65] and flag.default == [5, 65]
    with pytest.raises(ValueError, match=re.escape(message)):
      flag.parser.parse(value)
