"""Tests for tfbert_tools.benchmarks.benchmark (mechanics only: benchmarks are reported, never
gated)."""

import ast
import dataclasses
import glob
import importlib.util
import math
import os
import resource
import sys
import tomllib

import numpy as np
import pytest

from tests import helpers
from tfbert_tools.benchmarks import benchmark

TINY_STEP = benchmark.StepCase(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=19,
                               vocab_size=53, seq_length=11, max_predictions=3, batch_size=3,
                               warmup_steps=1, windows=2, steps_per_window=1)


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
  with pytest.raises(ValueError, match=r"num_heads \(3\) must divide hidden_size \(16\)"):
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
@pytest.mark.slow  # ~3 s: a pretraining step traced.
def test_tfbert_pretraining_step_runs_from_a_near_uniform_loss():
  result = benchmark.run_step_case(TINY_STEP)
  assert result["first_loss"] == pytest.approx(math.log(53) + math.log(2), abs=0.1)
  assert result["flops_per_example"] == TINY_STEP.flops_per_example()
  assert result["examples_per_second"] > 0 and result["peak_rss_mib"] > 0


@pytest.mark.slow
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


def test_alternating_rounds_swap_the_order_every_round():
  calls = []

  def window(side):
    calls.append(side)
    return float(len(calls))

  rounds = benchmark.alternating_rounds(("a", "b"), window, 3)
  assert calls == ["a", "b", "b", "a", "a", "b"]
  assert rounds == [[("a", 1.0), ("b", 2.0)], [("b", 3.0), ("a", 4.0)],
                    [("a", 5.0), ("b", 6.0)]]
  assert benchmark.alternating_rounds(("a", "b"), window, 0) == []


def test_peak_rss_is_this_process_in_mib():
  expected = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
  assert expected <= benchmark.peak_rss_mib() < expected + 64  # ru_maxrss only grows.


def test_a_bad_shape_names_its_fields_and_values():
  """Sweep 11 P5: the message said only "num_heads must divide hidden_size"."""
  with pytest.raises(ValueError, match=r"^StepCase: num_heads \(4\) must divide hidden_size "
                     r"\(30\)$"):
    dataclasses.replace(TINY_STEP, hidden_size=30, num_heads=4)
  # SQuAD reads no P (and --max_predictions is refused for it): S below P is no problem.
  assert dataclasses.replace(TINY_STEP, task="squad", seq_length=3).seq_length == 3
  with pytest.raises(ValueError, match=r"max_predictions \(3\) must be below seq_length \(3\)"):
    dataclasses.replace(TINY_STEP, seq_length=3)


def _subprocess_module_names() -> set[str]:
  """The modules imported by the code strings the benchmarks run in a fresh Python
  (`run_in_subprocess` and its like), and the `STEP_RUNNERS` modules."""
  names = set(benchmark.STEP_RUNNERS.values())
  folder = os.path.dirname(benchmark.__file__)
  for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if not (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and "import " in node.value):
        continue
      for piece in node.value.split(";"):
        try:
          statements = ast.parse(piece.strip()).body
        except SyntaxError:  # Prose, or a piece of an f-string around a name.
          continue
        for statement in statements:
          if isinstance(statement, ast.Import):
            names.update(alias.name for alias in statement.names)
          elif isinstance(statement, ast.ImportFrom) and statement.module:
            names.add(statement.module)
  return names


def test_every_module_a_benchmark_subprocess_imports_is_installed():
  """Sweep 14 C1: STEP_RUNNERS named `tools.benchmarks.benchmark`, which exists in a checkout
  but not once installed (the package is `tfbert_tools`): every step benchmark crashed in
  its subprocess. Each name must be an installed package's module, found by the importer."""
  with open(os.path.join(helpers.ROOT, "pyproject.toml"), "rb") as f:
    packages = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
  names = _subprocess_module_names()
  assert "tfbert_tools.benchmarks.benchmark_peer" in names  # The scan sees the code strings.
  for name in sorted(names):
    if name.partition(".")[0] in sys.stdlib_module_names:
      continue
    assert name in packages or name.rpartition(".")[0] in packages, (
        f"{name} is not a module of an installed package ({sorted(packages)})")
    assert importlib.util.find_spec(name) is not None, name
