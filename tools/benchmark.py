"""Benchmarks, each measured against a peer or a reference in the same run (BENCHMARKS.md).

  bash bootstrap.sh python tools/benchmark.py --benchmark=accumulation \
      --micro_batch_size=8 --gradient_accumulation_steps=4
  bash bootstrap.sh python tools/benchmark.py --benchmark=accumulation \
      --micro_batch_size=8 --gradient_accumulation_steps=4 --interleave --windows=12 \
      --applied_steps=3
  bash bootstrap.sh python tools/benchmark.py --benchmark=pretraining --dtype=float32 \
      --jit_compile=false --repeats=2
  bash bootstrap.sh python tools/benchmark.py --benchmark=squad --dtype=mixed_bfloat16
  bash bootstrap.sh python tools/benchmark.py --benchmark=pretraining --interleave --windows=12
  bash bootstrap.sh python tools/benchmark.py --benchmark=input_pipeline
  bash bootstrap.sh python tools/benchmark.py --benchmark=postprocess \
      --squad_dev_file=dev-v1.1.json
  bash bootstrap.sh python tools/benchmark.py --benchmark=matmul
  bash bootstrap.sh python tools/benchmark.py --benchmark=kernels --repeats=5
  bash bootstrap.sh python tools/benchmark.py --benchmark=resume --repeats=3
  bash bootstrap.sh python tools/benchmark.py --benchmark=fine_tuning --batch_size=16 --repeats=6
  bash bootstrap.sh python tools/benchmark.py --benchmark=inference --repeats=3
  bash bootstrap.sh python tools/benchmark.py --benchmark=buckets --bucket_task=stsb \
      --glue_dir=glue_data --repeats=2
  bash bootstrap.sh python tools/benchmark.py --benchmark=buckets --bucket_task=wnut \
      --wnut_dir=wnut17 --train_examples=3394 --bucket_epochs=3
  bash bootstrap.sh python tools/benchmark.py --benchmark=continued_pretraining \
      --batch_size=16 --continued_steps=200

Prints Markdown rows for BENCHMARKS.md, after a line naming the machine and the stack.
"""

import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

import dataclasses
import tempfile

from absl import flags

from tfbert.checkpoints import model_paths
from tfbert.runtime import cli, paths, run_directory
from tfbert.squad import squad_features
from tfbert_flags import benchmark_flags as f
from tfbert_flags import common_flags
from tfbert_tools.benchmarks import (
  benchmark,
  benchmark_accumulation,
  benchmark_buckets,
  benchmark_continued,
  benchmark_data,
  benchmark_fine_tuning,
  benchmark_floor,
  benchmark_inference,
  benchmark_kernels,
  benchmark_mfu,
  benchmark_peer,
  benchmark_report,
  benchmark_resume,
)


def _shape_overrides() -> dict:
  """The model/shape flags that were given, by `StepCase` / `PretrainingCase` field."""
  return {name: flag.value for name, flag in f.FLAGS_BY_FIELD.items() if flag.value is not None}


def _shape_defaults() -> dict[str, tuple[benchmark.ModelShape, bool]]:
  """{benchmark: (the model shape it starts from, whether it reads --max_predictions)} of
  the benchmarks that read the shape flags."""
  return {"accumulation": (benchmark_accumulation.PretrainingCase(), True),
          "pretraining": (benchmark.DEFAULT_CASES["pretraining"], True),
          "input_pipeline": (benchmark.DEFAULT_CASES["pretraining"], True),
          "squad": (benchmark.DEFAULT_CASES["squad"], False),
          "fine_tuning": (benchmark_fine_tuning.FineTuningCase(), False)}


def check_shape_flags() -> None:
  """Refuses, before any work, a model shape the chosen --benchmark cannot train (heads that
  do not divide the width, P not below S), naming the flags and their values, a value left
  at its default said to be the benchmark's default.

  Raises:
    ValueError: naming the flags, e.g. "--num_heads (4, the default of
      --benchmark=pretraining) must divide --hidden_size (30)".
  """
  chosen = f.BENCHMARK.value
  if chosen not in _shape_defaults():
    return
  default, masked_lm = _shape_defaults()[chosen]
  shape = benchmark.ModelShape(**{
      **{field.name: getattr(default, field.name)
         for field in dataclasses.fields(benchmark.ModelShape)}, **_shape_overrides()})
  def describe(name, value):
    given = f.FLAGS_BY_FIELD[name].value is not None
    return f"--{name} ({value}{'' if given else f', the default of --benchmark={chosen}'})"
  problems = [message for ok, message in shape.shape_checks(masked_lm, describe) if not ok]
  if problems:
    raise ValueError("; ".join(problems))


def _step_case(task: str) -> benchmark.StepCase:
  return dataclasses.replace(
      benchmark.DEFAULT_CASES[task], **_shape_overrides(), batch_size=f.BATCH_SIZE.value,
      dtype_policy=f.DTYPE.value, jit_compile=f.JIT_COMPILE.value,
      warmup_steps=f.WARMUP_STEPS.value, windows=f.WINDOWS.value,
      steps_per_window=f.STEPS_PER_WINDOW.value)


def accumulation() -> str:
  case = benchmark_accumulation.PretrainingCase(
      **_shape_overrides(), micro_batch_size=f.MICRO_BATCH_SIZE.value,
      applied_steps=f.APPLIED_STEPS.value, warmup_steps=f.WARMUP_STEPS.value,
      dtype_policy=f.DTYPE.value, loop=f.ACCUMULATION_LOOP.value)
  if f.INTERLEAVE.value:
    return benchmark_accumulation.format_interleaved(
        benchmark_accumulation.run_interleaved_in_subprocess(
            case, f.GRADIENT_ACCUMULATION_STEPS.value, rounds=f.WINDOWS.value))
  return benchmark_accumulation.format_accumulation(
      benchmark_accumulation.accumulation_overhead(case, f.GRADIENT_ACCUMULATION_STEPS.value,
                                                   repeats=f.REPEATS.value))


def training_step(task: str) -> str:
  case = _step_case(task)
  peak = benchmark_mfu.measure_matmul_peak(benchmark_mfu.matmul_dtype(case.dtype_policy),
                                           f.MATMUL_SIZE.value)
  if f.INTERLEAVE.value:
    result = benchmark.run_interleaved_in_subprocess(case)
    table = benchmark_report.format_interleaved(result, peak)
  else:
    result = benchmark.compare_with_peer(case, f.REPEATS.value)
    table = benchmark_report.format_comparison(result, peak)
  floor = benchmark_floor.measure_floor(case)
  return (f"peer: {benchmark_peer.DESCRIPTION}\n\n" + table + "\n\n"
          + benchmark_report.format_floor(floor, result))


def input_pipeline() -> str:
  case = _step_case("pretraining")
  with tempfile.TemporaryDirectory() as temp:
    pattern = benchmark_data.make_pretraining_records(
        f.PRETRAINING_DATA_DIR.value or temp, case.seq_length, case.max_predictions)
    pipeline = benchmark_data.measure_input_pipeline(
        pattern, batch_size=case.batch_size, seq_length=case.seq_length,
        max_predictions=case.max_predictions, seconds=f.PIPELINE_SECONDS.value)
  training = benchmark.run_step_case_in_subprocess(case)
  return benchmark_report.format_input_pipeline(pipeline, training)


def _postprocess_features() -> squad_features.FeatureConfig:
  """The postprocess benchmark's windowing at --seq_length (`benchmark_data`: named if short)."""
  return benchmark_data.postprocess_features(
      f.SEQ_LENGTH.value or benchmark.DEFAULT_CASES["squad"].seq_length)


def postprocess() -> str:
  """SQuAD feature creation and postprocessing on `--squad_dev_file` (checked by `main`)."""
  result = benchmark_data.measure_postprocess(
      f.SQUAD_DEV_FILE.value, features=_postprocess_features(), repeats=f.REPEATS.value)
  return benchmark_report.format_postprocess(result, f.SQUAD_DEV_FILE.value)


def matmul() -> str:
  peaks = {dtype: benchmark_mfu.measure_matmul_peak(dtype, f.MATMUL_SIZE.value)
           for dtype in ("float32", "bfloat16")}
  return benchmark_report.format_matmul(peaks, f.MATMUL_SIZE.value)


def kernels() -> str:
  results = [benchmark_kernels.measure(case, repeats=f.REPEATS.value)
             for case in benchmark_kernels.default_cases()]
  return benchmark_kernels.format_results(results)


def resume() -> str:
  case = benchmark_resume.ResumeCase(
      near_sequences=f.RESUME_NEAR_SEQUENCES.value, far_sequences=f.RESUME_FAR_SEQUENCES.value,
      batch_size=f.BATCH_SIZE.value, rounds=f.REPEATS.value)
  with tempfile.TemporaryDirectory() as temp:
    return benchmark_resume.format_result(benchmark_resume.measure(case, temp))


def fine_tuning() -> str:
  short, long = f.FINE_TUNING_STEPS.value  # Two whole numbers (the flag's parser).
  case = benchmark_fine_tuning.FineTuningCase(
      **_shape_overrides(), batch_size=f.BATCH_SIZE.value, short_steps=short, long_steps=long,
      rounds=f.REPEATS.value, dtype=f.DTYPE.value)
  return benchmark_fine_tuning.format_result(benchmark_fine_tuning.measure(case))


def inference() -> str:
  case = benchmark_inference.InferenceCase(
      batch_size=f.BATCH_SIZE.value, seq_length=f.SEQ_LENGTH.value or 128,
      rounds=f.REPEATS.value)
  return benchmark_inference.format_result(benchmark_inference.measure(case))


def buckets() -> str:
  case = benchmark_buckets.BucketCase(
      task=f.BUCKET_TASK.value, glue_dir=f.GLUE_DIR.value, wnut_dir=f.WNUT_DIR.value,
      epochs=f.BUCKET_EPOCHS.value,
      train_examples=f.TRAIN_EXAMPLES.value,
      rounds=f.REPEATS.value, batch_size=f.BATCH_SIZE.value, seq_length=f.SEQ_LENGTH.value or 0,
      dtype=f.DTYPE.value, multiple=f.BUCKET_MULTIPLE.value)
  with tempfile.TemporaryDirectory() as temp:
    return benchmark_buckets.format_result(case, benchmark_buckets.measure(case, temp))


def continued_pretraining() -> str:
  case = benchmark_continued.ContinuedCase(
      train_steps=f.CONTINUED_STEPS.value, batch_size=f.BATCH_SIZE.value,
      seq_length=f.SEQ_LENGTH.value or 128)
  with tempfile.TemporaryDirectory() as temp:
    return benchmark_continued.format_result(case, benchmark_continued.measure(case, temp))


def main(argv):
  del argv
  cli.check_flags_read(  # Before any work: a flag of another benchmark is not ignored.
      f.READS, "benchmark", f.BENCHMARK.value,
      [name for names in f.READS.values() for name in names if flags.FLAGS[name].present])
  check_shape_flags()  # Before any work, with the flags' names.
  if (f.BENCHMARK.value == "accumulation" and f.INTERLEAVE.value
      and f.APPLIED_STEPS.value < 2):
    raise ValueError(f"--applied_steps ({f.APPLIED_STEPS.value}) must be >= 2 with "
                     "--interleave: each window's examples/s spans its applied steps after "
                     "the first")
  if f.BENCHMARK.value == "postprocess" and not f.SQUAD_DEV_FILE.value:
    raise ValueError("--benchmark=postprocess times SQuAD feature creation and "
                     "postprocessing on --squad_dev_file, which is not set: give the SQuAD "
                     "v1.1 dev set (BENCHMARKS.md names the file it used)")
  if f.BENCHMARK.value == "postprocess":
    _postprocess_features()  # Before any work: a --seq_length too short for a question.
  # Its only output (the benchmarks' own files go to temporary directories).
  paths.check_outputs({"--pretraining_data_dir": f.PRETRAINING_DATA_DIR.value})
  run_directory.check_outside_runs({"--pretraining_data_dir": f.PRETRAINING_DATA_DIR.value},
                                   "benchmark")
  model_paths.check_not_a_model_directory(
      {"--pretraining_data_dir": f.PRETRAINING_DATA_DIR.value}, "benchmark")
  runs = {"accumulation": accumulation, "pretraining": lambda: training_step("pretraining"),
          "squad": lambda: training_step("squad"), "input_pipeline": input_pipeline,
          "postprocess": postprocess, "matmul": matmul, "kernels": kernels, "resume": resume,
          "fine_tuning": fine_tuning, "inference": inference, "buckets": buckets,
          "continued_pretraining": continued_pretraining}
  print(benchmark_report.machine_description() + "\n")
  print(runs[f.BENCHMARK.value]())


def run():
  """Entry point: `python tools/benchmark.py`, or the installed `tfbert-benchmark`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
