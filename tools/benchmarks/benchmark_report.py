"""Markdown rows for BENCHMARKS.md from the results of the `tfbert_tools.benchmarks.benchmark*`
modules.

Every table row is one measured run, so rows of several invocations (dtypes, XLA on and off)
can be pasted into one table; `machine_description` is the line that says where they ran.
"""

import datetime
import importlib.metadata
import os
import platform
from typing import Sequence

from tfbert.runtime import cpu
from tfbert_tools.benchmarks import benchmark, benchmark_floor, benchmark_mfu

# Distributions whose versions a benchmark depends on.
_STACK = ("tensorflow", "keras", "tf-keras", "tf-models-official")


def machine_description() -> str:
  """One line: date, CPU (model, the ISA flags that change BERT's kernels, oneDNN), cores, the
  stack's versions."""
  versions = []
  for package in _STACK:
    try:
      versions.append(f"{package} {importlib.metadata.version(package)}")
    except importlib.metadata.PackageNotFoundError:
      versions.append(f"{package} (not installed)")
  return (f"{datetime.date.today().isoformat()}; machine: {cpu.describe()}, "
          f"{os.cpu_count()} cores; "
          + ", ".join(versions) + f", Python {platform.python_version()}")


def ratio_summary(what: str, ratios: Sequence[float], median: float) -> str:
  """"<what>: r1, r2, ...; median **m**", ratios to three decimals."""
  return f"{what}: {', '.join(f'{r:.3f}' for r in ratios)}; median **{median:.3f}**"


def describe_case(case: dict) -> str:
  """A `StepCase` dict as "pretraining L4/H256/A4/I1024, V30522, S128, P20, B32"."""
  shape = f"S{case['seq_length']}"
  if case["task"] == "pretraining":
    shape += f", P{case['max_predictions']}"
  return (f"{case['task']} L{case['num_layers']}/H{case['hidden_size']}/A{case['num_heads']}/"
          f"I{case['intermediate_size']}, V{case['vocab_size']}, {shape}, "
          f"B{case['batch_size']}")


def format_comparison(result: dict, peak_gflops: float) -> str:
  """Rows of `benchmark.compare_with_peer`'s runs, MFU against `peak_gflops`, and ratios."""
  first = result["runs"][0]
  matmul = benchmark_mfu.matmul_dtype(first["case"]["dtype_policy"])
  rows = [f"{describe_case(first['case'])}: {first['flops_per_example'] / 1e9:.4g} GFLOP per "
          f"training example; measured {matmul} matmul peak {peak_gflops:.1f} GFLOP/s", "",
          "| case | dtype | XLA | repeat | implementation | examples/s (median) | windows "
          "(examples/s) | GFLOP/s | MFU | peak RSS (MiB) | loss at init |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
  for index, run in enumerate(result["runs"]):
    case = run["case"]
    achieved, mfu = benchmark_mfu.utilisation(run["examples_per_second"],
                                              run["flops_per_example"], peak_gflops)
    windows = ", ".join(f"{r:.1f}" for r in run["window_examples_per_second"])
    rows.append(f"| {describe_case(case)} | {case['dtype_policy']} | "
                f"{'on' if case['jit_compile'] else 'off'} | {index // 2 + 1} | "
                f"{case['implementation']} | {run['examples_per_second']:.2f} | {windows} | "
                f"{achieved:.3g} | {100 * mfu:.1f}% | {run['peak_rss_mib']:.0f} | "
                f"{run['first_loss']:.3f} |")
  rows.append("\n" + ratio_summary("examples/s ratio tfbert / Model Garden per repeat",
                                    result["ratios"], result["median_ratio"])
              + f". Peak RSS ratio tfbert / Model Garden, median: "
              f"{result['median_rss_ratio']:.3f}")
  return "\n".join(rows)


def format_interleaved(result: dict, peak_gflops: float) -> str:
  """Rounds of `benchmark_peer.run_interleaved`, MFU against `peak_gflops`, and ratios."""
  case = result["case"]
  flops = benchmark.StepCase(**case).flops_per_example()
  matmul = benchmark_mfu.matmul_dtype(case["dtype_policy"])
  rows = [f"{describe_case(case)}, {case['dtype_policy']}, XLA "
          f"{'on' if case['jit_compile'] else 'off'}: {flops / 1e9:.4g} GFLOP per training "
          f"example; measured {matmul} matmul peak {peak_gflops:.1f} GFLOP/s; both steps in "
          f"one process, {case['steps_per_window']} steps per window", "",
          "| round | first | tfbert examples/s | Model Garden examples/s | tfbert MFU | "
          "Model Garden MFU | ratio |", "|---|---|---|---|---|---|---|"]
  runs = result["runs"]
  for index, (a, b) in enumerate(zip(runs[0::2], runs[1::2])):
    rate = {run["case"]["implementation"]: run["examples_per_second"] for run in (a, b)}
    mfu = {name: benchmark_mfu.utilisation(r, flops, peak_gflops)[1] for name, r in rate.items()}
    rows.append(f"| {index + 1} | {a['case']['implementation']} | {rate['tfbert']:.2f} | "
                f"{rate['model_garden']:.2f} | {100 * mfu['tfbert']:.1f}% | "
                f"{100 * mfu['model_garden']:.1f}% | {result['ratios'][index]:.3f} |")
  losses = result["first_losses"]
  rows.append("\n" + ratio_summary("examples/s ratio tfbert / Model Garden per round",
                                    result["ratios"], result["median_ratio"])
              + f". Loss at init: tfbert "
              f"{losses['tfbert']:.3f}, Model Garden {losses['model_garden']:.3f}. Peak RSS "
              f"of the process (both models): {result['peak_rss_mib']:.0f} MiB")
  return "\n".join(rows)


def format_input_pipeline(pipeline: dict, training: dict) -> str:
  """The input pipeline's examples/s against the tfbert training step of the same config."""
  case = training["case"]
  ratio = pipeline["examples_per_second"] / training["examples_per_second"]
  return "\n".join([
      "| case | dtype | XLA | input pipeline examples/s | training examples/s | "
      "pipeline / training |", "|---|---|---|---|---|---|",
      f"| {describe_case(case)} | {case['dtype_policy']} | "
      f"{'on' if case['jit_compile'] else 'off'} | {pipeline['examples_per_second']:.0f} "
      f"({pipeline['batches']} batches in {pipeline['seconds']:.1f} s) | "
      f"{training['examples_per_second']:.2f} | **{ratio:.0f}x** (goal >= 20x) |"])


def format_postprocess(result: dict, squad_file: str) -> str:
  """Feature creation and postprocessing times of `benchmark_data.measure_postprocess`."""
  runs = ", ".join(f"{s:.2f}" for s in result["postprocess_runs"])
  return "\n".join([
      "| file | questions | features | feature creation (s) | questions/s | "
      "postprocessing (s, median of runs) | questions/s |", "|---|---|---|---|---|---|---|",
      f"| {os.path.basename(squad_file)} | {result['questions']} | {result['features']} | "
      f"{result['feature_seconds']:.2f} | {result['feature_questions_per_second']:.0f} | "
      f"{result['postprocess_seconds']:.2f} ({runs}) | {result['questions_per_second']:.0f} |"])


def format_matmul(peaks: dict[str, float], size: int) -> str:
  """The measured matmul peak of each dtype."""
  rows = ["| dtype | matmul | GFLOP/s (best of 20) |", "|---|---|---|"]
  rows += [f"| {dtype} | {size} x {size} x {size} | {gflops:.1f} |"
           for dtype, gflops in peaks.items()]
  return "\n".join(rows)


def format_floor(floor: dict, comparison: dict) -> str:
  """`benchmark_floor.measure_floor`'s GEMMs, and the ratio ceiling of each peer run.

  Args:
    floor: `measure_floor`'s dict.
    comparison: `benchmark.compare_with_peer`'s or `benchmark_peer.run_interleaved`'s dict
      of the same case (its `runs`).
  """
  rows = ["| GEMM | m x k x n | transposed | batch x count | ms per step | GFLOP/s |",
          "|---|---|---|---|---|---|"]
  for g in floor["gemms"]:
    flags = "".join(name for name, on in (("a", g["transpose_a"]), ("b", g["transpose_b"]))
                    if on) or "-"
    # A product of a few thousand FLOPs can time at 0 once the call overhead is taken off.
    rate = f"{g['flops'] / g['step_seconds'] / 1e9:.0f}" if g["step_seconds"] > 0 else "-"
    rows.append(f"| {g['name']} | {g['m']} x {g['k']} x {g['n']} | {flags} | "
                f"{g['batch']} x {g['count']} | {1e3 * g['step_seconds']:.2f} | {rate} |")
  first = comparison["runs"][0]["case"]
  batch, seconds = first["batch_size"], floor["floor_seconds"]
  peers = [run for run in comparison["runs"] if run["case"]["implementation"] != "tfbert"]
  ceilings = ", ".join(
      f"{benchmark_floor.ratio_ceiling(run['examples_per_second'], batch, seconds):.3f}"
      for run in peers)
  ours = [batch / run["examples_per_second"] for run in comparison["runs"]
          if run["case"]["implementation"] == "tfbert"]
  shares = ", ".join(f"{100 * seconds / step:.0f}%" for step in ours)
  rows.append(f"\nMatmul floor: **{1e3 * seconds:.1f} ms** per step "
              f"({floor['flops'] / 1e9:.4g} GFLOP, {floor['flops'] / seconds / 1e9:.0f} "
              f"GFLOP/s), each GEMM timed alone. Floor / tfbert step per run: {shares}. "
              f"Ratio ceiling (peer step / floor) per peer run: **{ceilings}**: no step "
              "with these GEMMs at these speeds can beat the peer by more.")
  return "\n".join(rows)
