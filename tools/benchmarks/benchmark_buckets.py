"""Length buckets: fine-tuning examples/s and the dev metric with batches padded to S, cut
to their length bucket, and cut after grouping by length (docs/length_buckets.md).

Three tasks on the shipped MiniLM-L6-H384 (`--init_hf_dir=minilm`) and real data: STS-B
sentence embeddings with CoSENT (`run_embeddings`, the first `train_examples` train pairs
of `--glue_dir`, the whole dev set), MRPC classification (`run_classifier`, likewise) and
WNUT 2017 tagging (`run_ner`, the first `train_examples` sentences of `--wnut_dir`'s train
file, the whole dev set, entity F1); batch 32, S 64 (STS-B) or 128 (MRPC, WNUT), AdamW 5e-5
(WNUT 1e-4, as its recipe), one epoch. Each setting runs as the tool in a fresh process, the
settings alternating over `rounds` (padded, buckets, grouped, grouped, buckets, padded,
...); examples/s is the tool's own `examples_per_second` (its first, tracing, step left
out), the median of the run's log windows, then the median over the rounds. The ratio to
"padded" is what a user gains in wall time at the same work and the same dev metric.
"""

import dataclasses
import json
import os
import statistics
import subprocess
import sys

from tfbert.runtime import validation

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUP_WINDOW = 8  # The grouped setting's --group_by_length (batches per sorted window).
DTYPES = ("float32", "mixed_bfloat16")
TASKS = ("stsb", "mrpc", "wnut")
WNUT_TRAIN, WNUT_DEV = "wnut17train.conll", "emerging.dev.conll"  # In `wnut_dir`.


@dataclasses.dataclass(frozen=True)
class BucketCase:
  """One comparison of the three settings on one task.

  Attributes:
    task: "stsb" (CoSENT embeddings), "mrpc" (classification) or "wnut" (tagging).
    glue_dir: the folder holding STS-B/ and MRPC/ (GLUE's files).
    train_examples: the first train pairs (WNUT: sentences) trained on (one epoch).
    rounds: runs of each setting.
    batch_size: pairs per applied step.
    seq_length: S (0: the task's default, 64 for STS-B and 128 for MRPC and WNUT).
    wnut_dir: the folder of WNUT 2017's train and dev files.
    epochs: passes over the train subset.
    dtype: the runs' `--dtype` (mixed_bfloat16: bfloat16 matmuls, float32 variables).
    multiple: the bucket multiple of the "buckets" and "grouped" settings
      (`--length_bucket`; 1: every batch cut to its longest example exactly).
  """
  task: str = "stsb"
  glue_dir: str = ""
  train_examples: int = 1600
  rounds: int = 1
  batch_size: int = 32
  seq_length: int = 0
  wnut_dir: str = ""
  epochs: int = 1
  dtype: str = "float32"
  multiple: int = 8

  def checks(self) -> list[validation.Check]:
    return [(self.task in TASKS, f"task must be one of {TASKS}, got {self.task!r}"),
            (self.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {self.dtype!r}"),
            (self.multiple >= 1, f"multiple ({self.multiple}) must be >= 1"),
            (self.task == "wnut" or bool(self.glue_dir),
             "glue_dir is needed (the folder of STS-B/ and MRPC/)"),
            (self.task != "wnut" or bool(self.wnut_dir),
             f"wnut_dir is needed (the folder of {WNUT_TRAIN} and {WNUT_DEV})"),
            (self.train_examples >= self.batch_size,
             f"train_examples ({self.train_examples}) must be >= batch_size "
             f"({self.batch_size})"),
            (self.rounds >= 1, f"rounds ({self.rounds}) must be >= 1"),
            (self.epochs >= 1, f"epochs ({self.epochs}) must be >= 1")]

  def __post_init__(self):
    validation.validate(self)

  @property
  def length(self) -> int:
    return self.seq_length or {"stsb": 64, "mrpc": 128, "wnut": 128}[self.task]

  @property
  def settings(self) -> tuple[tuple[str, int, int], ...]:
    """(name, --length_bucket, --group_by_length) of each setting compared."""
    return (("padded", 0, 0), ("buckets", self.multiple, 0),
            ("grouped", self.multiple, GROUP_WINDOW))


def _head(source: str, target: str, rows: int) -> None:
  """The header and the first `rows` rows of a GLUE TSV file."""
  with open(source, encoding="utf-8") as f, open(target, "w", encoding="utf-8") as out:
    for number, line in enumerate(f):
      if number > rows:
        break
      out.write(line)


def _sentences(source: str, target: str, count: int) -> None:
  """The first `count` blank-line-separated sentences of a CoNLL file."""
  with open(source, encoding="utf-8") as f:
    sentences = [s for s in f.read().split("\n\n") if s.strip()][:count]
  with open(target, "w", encoding="utf-8") as out:
    out.write("\n\n".join(s.strip("\n") for s in sentences) + "\n")


def input_files(case: BucketCase) -> dict[str, str]:
  """{path: what it is} of every file the runs of `case` read (`command`)."""
  if case.task == "wnut":
    return {os.path.join(case.wnut_dir, WNUT_TRAIN): "WNUT 2017's train file",
            os.path.join(case.wnut_dir, WNUT_DEV): "WNUT 2017's dev file"}
  folder = {"stsb": "STS-B", "mrpc": "MRPC"}[case.task]
  return {os.path.join(case.glue_dir, folder, f"{split}.tsv"): f"GLUE {folder}'s {split} file"
          for split in ("train", "dev")}


def check_inputs(case: BucketCase) -> None:
  """Refuses, before any run, a case whose input files are not all there (`input_files`).

  Raises:
    FileNotFoundError: naming each missing file and the folder flag that holds it.
  """
  inputs = input_files(case)
  missing = [f"{path} ({what}: {'not a file' if os.path.exists(path) else 'missing'})"
             for path, what in inputs.items() if not os.path.isfile(path)]
  if missing:
    folder = case.wnut_dir if case.task == "wnut" else case.glue_dir
    flag = "--wnut_dir" if case.task == "wnut" else "--glue_dir"
    names = " and ".join(os.path.relpath(path, folder) for path in inputs)
    raise FileNotFoundError(f"the {case.task} bucket benchmark reads {', '.join(missing)}: "
                            f"point {flag} at the folder that holds {names}")


def command(case: BucketCase, workdir: str, output_dir: str, length_bucket: int,
            group_by_length: int) -> list[str]:
  """The tool's argv for one run of one setting (the train subset written into `workdir`)."""
  common = ["--init_hf_dir=minilm", "--do_train", "--do_eval", f"--output_dir={output_dir}",
            f"--max_seq_length={case.length}", f"--train_batch_size={case.batch_size}",
            f"--learning_rate={1e-4 if case.task == 'wnut' else 5e-5}",
            f"--num_train_epochs={case.epochs}",
            "--log_steps=10", "--verbose=0", f"--length_bucket={length_bucket}",
            f"--group_by_length={group_by_length}", f"--dtype={case.dtype}"]
  if case.task == "wnut":
    train = os.path.join(workdir, "wnut_train.conll")
    if not os.path.exists(train):
      _sentences(os.path.join(case.wnut_dir, WNUT_TRAIN), train, case.train_examples)
    return [sys.executable, os.path.join(ROOT, "tools", "run_ner.py"), *common,
            f"--train_file={train}", f"--eval_file={os.path.join(case.wnut_dir, WNUT_DEV)}"]
  if case.task == "stsb":
    train = os.path.join(workdir, "stsb_train.tsv")
    if not os.path.exists(train):
      _head(os.path.join(case.glue_dir, "STS-B", "train.tsv"), train, case.train_examples)
    return [sys.executable, os.path.join(ROOT, "tools", "run_embeddings.py"), *common,
            f"--train_file={train}",
            f"--dev_file={os.path.join(case.glue_dir, 'STS-B', 'dev.tsv')}",
            "--anchor_column=sentence1", "--positive_column=sentence2", "--score_column=score",
            "--loss=cosent"]
  data = os.path.join(workdir, "mrpc")
  if not os.path.exists(data):
    os.makedirs(data)
    _head(os.path.join(case.glue_dir, "MRPC", "train.tsv"), os.path.join(data, "train.tsv"),
          case.train_examples)
    _head(os.path.join(case.glue_dir, "MRPC", "dev.tsv"), os.path.join(data, "dev.tsv"),
          10 ** 9)
  return [sys.executable, os.path.join(ROOT, "tools", "run_classifier.py"), *common,
          "--task_name=mrpc", f"--data_dir={data}"]


def read_run(output_dir: str, task: str) -> dict:
  """{"examples_per_second": median of the log windows, "metric": the dev metric}."""
  with open(os.path.join(output_dir, "metrics.jsonl"), encoding="utf-8") as f:
    speeds = [row["examples_per_second"] for row in map(json.loads, f)
              if "examples_per_second" in row and not row.get("split")]
  with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
    dev = json.load(f)["dev"]
  metric = {"stsb": "spearman", "mrpc": "accuracy", "wnut": "f1"}[task]
  metric = dev[metric]
  return {"examples_per_second": statistics.median(speeds), "metric": metric}


def measure(case: BucketCase, workdir: str) -> dict:
  """{setting: [per-round reads]}: each setting run `case.rounds` times, alternating; the
  input files checked first (`check_inputs`)."""
  check_inputs(case)
  results = {name: [] for name, _, _ in case.settings}
  for round_index in range(case.rounds):
    order = case.settings if round_index % 2 == 0 else case.settings[::-1]
    for name, bucket, group in order:
      out = os.path.join(workdir, f"{name}-{round_index}")
      env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
      run = subprocess.run(command(case, workdir, out, bucket, group), env=env,
                           capture_output=True, text=True, check=False)
      if run.returncode:
        raise RuntimeError(f"{name}: exit {run.returncode}: {run.stderr[-2000:]}")
      results[name].append(read_run(out, case.task))
  return results


def format_result(case: BucketCase, results: dict) -> str:
  """Markdown rows: setting, examples/s (median over rounds), ratio to padded, dev metric."""
  metric = {"stsb": "dev Spearman", "mrpc": "dev accuracy", "wnut": "dev entity F1"}[case.task]
  unit = {"stsb": "pairs/s", "mrpc": "examples/s", "wnut": "sentences/s"}[case.task]
  padded = statistics.median(r["examples_per_second"] for r in results["padded"])
  lines = [f"| {case.task} setting ({case.dtype}) | {unit} (median of {case.rounds}) "
           f"| / padded | {metric} |", "|---|---|---|---|"]
  for name, bucket, group in case.settings:
    rows = results[name]
    speed = statistics.median(r["examples_per_second"] for r in rows)
    metrics = ", ".join(f"{r['metric']:.2f}" for r in rows)
    lines.append(f"| {name} (length_bucket {bucket}, group_by_length {group}) | {speed:.1f} "
                 f"| {speed / padded:.2f}x | {metrics} |")
  return "\n".join(lines)
