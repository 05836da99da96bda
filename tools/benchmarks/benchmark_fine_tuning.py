"""Fine-tuning step rate: tfbert's training loop against the Keras `fit` path it replaced.

The same SQuAD fine-tuning (a `BertSpanLabeler`, the recipe's optimizer stack, the same
features, data stream and steps) is trained by `tfbert.tasks.runner.train` (what every
fine-tuning tool runs: the task's training data, then the loop of
`tfbert.tasks.fine_tuning.train`, `strategy.run(model.train_step)` per step, checkpoints,
logs) and by
`fine_tuning.compile_and_fit` (Keras `fit` with the same `train_step`, what the tools ran
before). Each path runs in a fresh process that, after one untimed run, times the training
call alone (features are made before it), `TIMINGS` times each for `short_steps` and for
`long_steps` applied steps: the difference of their minima cancels what does not grow with the steps
(building, tracing, the final checkpoint), so seconds per step = (T_long - T_short) /
(long_steps - short_steps). The
two paths alternate (loop, fit, fit, loop, ...) over `rounds`; reported: each path's
median examples/s and the loop/fit ratio of the medians (the goal: >= 1, not slower).
"""

import dataclasses
import json
import os
import statistics
import tempfile
import time

import keras

from tfbert.checkpoints import pretrained
from tfbert.runtime import validation
from tfbert.squad import squad_features, squad_postprocess, squad_run
from tfbert.tasks import fine_tuning, runner
from tfbert.tasks.task import RunContext
from tfbert.text.tokenization import WordPieceTokenizer
from tfbert_tools.benchmarks import benchmark
from tfbert_tools.demos.squad_synthetic import synthetic_squad

PATHS = ("loop", "fit")
TIMINGS = 2  # Timings of each run length per process (their minimum counts).


@dataclasses.dataclass(frozen=True)
class FineTuningCase(benchmark.ModelShape):
  """One step-rate measurement of both paths (the small benchmark BERT by default).

  Attributes (besides `benchmark.ModelShape`'s):
    batch_size: windows per applied step.
    short_steps, long_steps: the two run lengths whose time difference is measured.
    rounds: measurements of each path.
    dtype: the precision policy.
    paragraphs: synthetic SQuAD paragraphs to train on (`tfbert_tools.demos.squad_synthetic`).
  """
  batch_size: int = 16
  short_steps: int = 5
  long_steps: int = 25
  rounds: int = 3
  dtype: str = "float32"
  paragraphs: int = 60

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    return [
        (0 < self.short_steps < self.long_steps,
         f"need 0 < short_steps ({self.short_steps}) < long_steps ({self.long_steps})"),
        (min(self.batch_size, self.rounds, self.paragraphs) >= 1,
         f"batch_size ({self.batch_size}), rounds ({self.rounds}) and paragraphs "
         f"({self.paragraphs}) must be >= 1"),
        *self.shape_checks(masked_lm=False),
    ]


def run_config(case: FineTuningCase, workdir: str, steps: int,
               name: str) -> squad_run.SquadRunConfig:
  """The fine-tuning run both paths train (output in `workdir/name`)."""
  config_file = os.path.join(workdir, "bert_config.json")
  if not os.path.exists(config_file):
    case.bert_config().to_json_file(config_file)
  return squad_run.SquadRunConfig(
      output_dir=os.path.join(workdir, name), do_train=True,
      train_file=os.path.join(workdir, "train.json"), vocab_file=pretrained.minilm_vocab_file(),
      bert_config_file=config_file,
      features=squad_features.FeatureConfig(case.seq_length, doc_stride=case.seq_length // 2,
                                            max_query_length=min(64, case.seq_length // 4)),
      postprocess=squad_postprocess.PostprocessConfig(), train_batch_size=case.batch_size,
      learning_rate=1e-4, num_train_epochs=1000.0, max_train_steps=steps,
      save_checkpoints_steps=10**9, log_steps=10**9, dtype=case.dtype, verbose=0)


def time_training(case: FineTuningCase, path: str, steps: int, workdir: str,
                  name: str) -> float:
  """Seconds of the training call of one run of `steps` applied steps (this process)."""
  return train_once(case, path, steps, workdir, name)[0]


def train_once(case: FineTuningCase, path: str, steps: int, workdir: str,
               name: str) -> tuple[float, keras.Model]:
  """(seconds of the training call, the trained model) of one run by `path`."""
  config = fine_tuning.resolve_casing(run_config(case, workdir, steps, name))
  inputs = squad_run.read_inputs(config)
  strategy = fine_tuning.start_run(config)
  tokenizer = WordPieceTokenizer(config.vocab_file, config.do_lower_case)
  model = squad_run.build_span_labeler(config, strategy)
  features = squad_features.cached_features(
      os.path.join(workdir, "train_features"), inputs["train"][0].examples, tokenizer,
      config.features, is_training=True).features
  total = max(1, int(len(features) * config.num_train_epochs) // config.train_batch_size)
  start = time.perf_counter()
  if path == "loop":  # The runner re-reads the features cached above: a constant cost.
    runner.train(squad_run.SquadTask(), RunContext(
        config, strategy, tokenizer, model, inputs, work_dir=workdir, chief=True))
  else:
    fine_tuning.compile_and_fit(
        model, strategy, squad_run.train_dataset(features, config.train_batch_size,
                                                 config.seed),
        config, steps=steps, total_steps=total, num_examples=len(features))
  return time.perf_counter() - start, model


def run_path(argument: dict) -> dict:
  """In a fresh process: both run lengths of one path; {"seconds_per_step", ...}.

  Each length is timed `TIMINGS` times (short, long, short, long, ...) and its minimum
  kept: what else the machine does only ever adds time, so the minimum is the least
  disturbed measurement of each length, and their difference the steps alone.
  """
  case = FineTuningCase(**argument["case"])
  keras.mixed_precision.set_global_policy(case.dtype)
  workdir = argument["workdir"]
  # A first run pays the process's one-time costs (TensorFlow's and Keras' first use); the
  # timed ones then differ only in their steps.
  time_training(case, argument["path"], case.short_steps, workdir, "warmup")
  seconds = {case.short_steps: [], case.long_steps: []}
  for timing in range(TIMINGS):
    for steps in seconds:
      seconds[steps].append(time_training(case, argument["path"], steps, workdir,
                                          f"run-{steps}-{timing}"))
  per_step = seconds_per_step(seconds, case.short_steps, case.long_steps)
  return {"path": argument["path"], "seconds": seconds, "seconds_per_step": per_step,
          "examples_per_second": case.batch_size / per_step}


def seconds_per_step(seconds: dict, short_steps: int, long_steps: int) -> float:
  """(fastest long run - fastest short run) / (long_steps - short_steps): the steps alone.

  Raises:
    ValueError: when that difference is not positive (the long runs were not slower: the
      extra steps take less time than the runs' noise), naming the timings and what to do;
      it is never turned into a negative or infinite rate.
  """
  difference = min(seconds[long_steps]) - min(seconds[short_steps])
  if difference <= 0:
    raise ValueError(
        f"unmeasurable: the fastest {long_steps}-step run ({min(seconds[long_steps]):.3f} s) "
        f"was not slower than the fastest {short_steps}-step run "
        f"({min(seconds[short_steps]):.3f} s), so the {long_steps - short_steps} extra steps "
        "take less time than the runs' noise: give --fine_tuning_steps two step counts "
        "further apart (more steps in the long run)")
  return difference / (long_steps - short_steps)


def measure(case: FineTuningCase) -> dict:
  """Alternates the two paths over `case.rounds` (each in fresh processes); see the module."""
  results = {path: [] for path in PATHS}
  with tempfile.TemporaryDirectory() as workdir:
    with open(os.path.join(workdir, "train.json"), "w", encoding="utf-8") as f:
      json.dump(synthetic_squad(case.paragraphs, seed=1), f)
    for index in range(case.rounds):
      for path in PATHS[::1 if index % 2 == 0 else -1]:
        run_dir = tempfile.mkdtemp(dir=workdir)
        os.symlink(os.path.join(workdir, "train.json"), os.path.join(run_dir, "train.json"))
        code = ("import json, sys; from tfbert_tools.benchmarks import benchmark_fine_tuning as b; "
                "print('RESULT ' + json.dumps(b.run_path(json.loads(sys.argv[1]))))")
        results[path].append(benchmark.run_in_subprocess(
            code, {"case": dataclasses.asdict(case), "path": path, "workdir": run_dir},
            timeout=3600))
  medians = {path: statistics.median(r["examples_per_second"] for r in runs)
             for path, runs in results.items()}
  return {"case": dataclasses.asdict(case), "runs": results, "median_examples_per_second": medians,
          "loop_over_fit": medians["loop"] / medians["fit"]}


def format_result(result: dict) -> str:
  """Markdown rows for BENCHMARKS.md."""
  case = result["case"]
  shape = (f"H{case['hidden_size']} L{case['num_layers']} S{case['seq_length']} "
           f"B{case['batch_size']} {case['dtype']}")
  rows = ["| path | examples/s (median) | per run |", "|---|---|---|"]
  for path in PATHS:
    runs = ", ".join(f"{r['examples_per_second']:.1f}" for r in result["runs"][path])
    rows.append(f"| {path} | {result['median_examples_per_second'][path]:.1f} | {runs} |")
  return "\n".join([f"SQuAD fine-tuning step rate, {shape}, steps {case['short_steps']} vs "
                    f"{case['long_steps']}, {case['rounds']} rounds:", *rows,
                    f"loop/fit: {result['loop_over_fit']:.3f} (goal >= 1: not slower)"])
