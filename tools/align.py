"""Proves that training set-ups agree: per-step losses of variants from one initial checkpoint.

  bash bootstrap.sh python tools/align.py --variants=graph,eager,xla --steps=20
  bash bootstrap.sh python tools/align.py --variants=graph,accumulate4,mirrored,resume7
  bash bootstrap.sh python tools/align.py --task=squad --optimizer=adamw \
      --variants=graph,accumulate4,mirrored,workers,resume5 --steps=10

Writes WORKDIR/report.json, WORKDIR/alignment.png and one run directory per variant
(`tensorboard --logdir WORKDIR/runs`). Exits 0 only when every variant is within its
tolerance of the first (the reference); see tfbert/alignment/alignment.py.
"""

import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

import os
from typing import Optional

from absl import flags

from tfbert.alignment import alignment, alignment_run
from tfbert.checkpoints import model_paths
from tfbert.config import BertConfig
from tfbert.pretraining import input_pipeline
from tfbert.runtime import cli, paths, run_directory
from tfbert.training import optimization
from tfbert_flags import align_flags as f
from tfbert_flags import common_flags
from tfbert_tools.demos import pretraining_demo, squad_demo

# The flags that only some --task values read (every other flag is read by each task):
# one given for a task that does not read it is refused (`cli.check_flags_read`), not
# ignored. Fine-tuning trains without warmup (`alignment_run.fine_tuning_config`).
TASK_READS = {"pretraining": ("input_files", "max_predictions_per_seq", "num_warmup_steps"),
              "squad": ("train_file",),
              "classifier": ("train_file", "task_name")}


def default_input_files(workdir: str) -> list[str]:
  """Where the main job's pretraining records (pydoc_data.topics) go: WORKDIR/data, made
  by `make_default_data` once the whole configuration has been checked."""
  if (f.MAX_SEQ_LENGTH.value, f.MAX_PREDICTIONS_PER_SEQ.value) != (
      pretraining_demo.SEQ_LENGTH, pretraining_demo.MAX_PREDICTIONS):
    raise ValueError("--input_files is needed unless --max_seq_length="
                     f"{pretraining_demo.SEQ_LENGTH} and --max_predictions_per_seq="
                     f"{pretraining_demo.MAX_PREDICTIONS} (the embedded data's shape)")
  return [os.path.join(workdir, "data", "*.tfrecord")]


def default_train_file(workdir: str) -> str:
  """Where the main job's synthetic SQuAD training set goes: WORKDIR/squad_data/."""
  return squad_demo.data_files(os.path.join(workdir, "squad_data"))[0]


def make_default_data(config: alignment.AlignmentConfig, workdir: str) -> None:
  """Writes the embedded data the config reads, when it reads it (after every check)."""
  if not f.INPUT_FILES.value and config.task == "pretraining":
    pretraining_demo.make_data(os.path.join(workdir, "data"))
  if not f.TRAIN_FILE.value and config.task == "squad":
    squad_demo.make_data(os.path.join(workdir, "squad_data"))


# --variants when not given for a fine-tuning --task, which runs graph execution only (the
# flag's default compares eager and XLA: sweep 28, B125 refused it naming neither).
FINE_TUNING_VARIANTS = ("graph", "accumulate2", "mirrored")


def default_optimizer(optimizer: Optional[str], task: str) -> str:
  """--optimizer when given, else sgd for pretraining and adamw (the only optimizer
  fine-tuning trains) for --task=squad and --task=classifier."""
  return optimizer or ("sgd" if task == "pretraining" else "adamw")


def main(argv):
  del argv
  # --optimizer's default depends on --task; set before the check of the settings it reads.
  flags.FLAGS.optimizer = default_optimizer(f.OPTIMIZER.value, f.TASK.value)
  if f.TASK.value != "pretraining" and not flags.FLAGS["variants"].present:
    flags.FLAGS.variants = list(FINE_TUNING_VARIANTS)
  if f.TASK.value != "pretraining" and f.OPTIMIZER.value != "adamw":
    raise ValueError(f"--optimizer={f.OPTIMIZER.value}: --task={f.TASK.value} trains AdamW only: "
                     "pass --optimizer=adamw or leave it out (its default for this task)")
  common_flags.check_optimizer_flags(f, field_flags={"num_train_steps": "steps"})  # First.
  cli.check_flags_read(TASK_READS, "task", f.TASK.value,  # Before any work.
                       [name for names in TASK_READS.values() for name in names
                        if common_flags.given_otherwise(name)])
  paths.check_outputs({"--workdir": f.WORKDIR.value}, required=True)  # Before any work.
  run_directory.check_outside_runs({"--workdir": f.WORKDIR.value}, "align")
  model_paths.check_not_a_model_directory({"--workdir": f.WORKDIR.value}, "align")
  split = input_pipeline.split_list_problems({"--input_files": f.INPUT_FILES.value})
  if split:  # A comma in a path named, before any work.
    raise ValueError(split[0])
  task = f.TASK.value
  if task == "classifier" and not f.TRAIN_FILE.value:
    raise ValueError("--task=classifier needs --train_file (a GLUE-format TSV of "
                     "--task_name)")
  train_file = f.TRAIN_FILE.value or (default_train_file(f.WORKDIR.value)
                                      if task == "squad" else None)
  config = alignment.AlignmentConfig(
      bert_config=(BertConfig.from_json_file(f.BERT_CONFIG_FILE.value,
                                         "--bert_config_file")
                   if f.BERT_CONFIG_FILE.value else pretraining_demo.SMALL_BERT),
      input_files=(f.INPUT_FILES.value or default_input_files(f.WORKDIR.value)
                   if task == "pretraining" else ()),
      variants=[alignment.parse_variant(v) for v in f.VARIANTS.value], steps=f.STEPS.value,
      train_batch_size=f.TRAIN_BATCH_SIZE.value, max_seq_length=f.MAX_SEQ_LENGTH.value,
      max_predictions_per_seq=f.MAX_PREDICTIONS_PER_SEQ.value,
      optimizer=optimization.OptimizerConfig(
          optimizer=f.OPTIMIZER.value, learning_rate=f.LEARNING_RATE.value,
          momentum=f.MOMENTUM.value, num_warmup_steps=f.NUM_WARMUP_STEPS.value,
          num_train_steps=f.STEPS.value,
          weight_decay_rate=f.WEIGHT_DECAY_RATE.value, clip_norm=f.CLIP_NORM.value or None),
      seed=f.SEED.value, tolerances=alignment.parse_tolerances(f.TOLERANCES.value),
      compare_weights=f.COMPARE_WEIGHTS.value, task=task, train_file=train_file,
      task_name=f.TASK_NAME.value)
  alignment_run.check_minilm_vocab_fits(config, embedded_data=not f.INPUT_FILES.value)
  make_default_data(config, f.WORKDIR.value)  # Only now: every setting has been checked.
  report = alignment_run.run_alignment(config, f.WORKDIR.value)
  print(f"report: {os.path.join(f.WORKDIR.value, 'report.json')}; plot: "
        f"{os.path.join(f.WORKDIR.value, 'alignment.png')}; "
        f"tensorboard --logdir {os.path.join(f.WORKDIR.value, 'runs')}")
  print("ALIGNED" if report["passed"] else "NOT ALIGNED", flush=True)
  return 0 if report["passed"] else 1


def run():
  """Entry point: `python tools/align.py`, or the installed `tfbert-align`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
