"""A resumable BERT pretraining run: strategy, data, exact train step, logs, checkpoints.

The run directory explains itself and resumes:

  model_dir/
    bert_config.json      the model
    run_config.json       the resolved run configuration
    data.json             the data's create_pretraining_data summaries, vocabulary, casing
    vocab.txt             that vocabulary (also beside the exported Google checkpoint)
    checkpoints/          model + optimizer (slots, accumulators, micro-step counter, loss
                          scale) + the metrics since the last log + this worker's data
                          position (its tf.data iterator), at every multiple of
                          `save_checkpoints_steps` applied steps and where the run stops; TF writes
                          each checkpoint under a temporary name (`ckpt-N_temp/`) and renames
                          it, so a crash never leaves a half-written checkpoint that looks
                          complete; a rerun removes such leftovers
    train/                TensorBoard events
    eval/                 TensorBoard events of the held-out evaluation, same tags
                          (with `eval_input_files`; `tfbert.pretraining.pretraining_eval`)
    metrics.jsonl         one JSON line per log step (the same scalars): at every multiple
                          of `log_steps` and at the last step; with `eval_input_files`, a
                          line {"step", "split": "eval", ...} at every multiple of
                          `eval_every_steps` and at the last step
    export/               SavedModel (encoder serving signature) + Google-format checkpoint,
                          written whole to a temporary sibling and renamed into place

Before anything is built, the data files are checked against the flags
(`tfbert.pretraining.data_checks`: sequence length, predictions per sequence, ids within the
vocabulary, TFRecord framing), and the directory is claimed (`tfbert.runtime.run_directory`): a
second concurrent run is refused, and a rerun must record the same model, schedule and data
(`RERUN_MAY_CHANGE` aside) unless `allow_config_change`.

Rerunning the same command restores the latest checkpoint. The data position is restored
too, from the worker's checkpointed tf.data iterator (`tfbert.training.distribution.
LocalBatches`): file offsets and the shuffle and prefetch buffers, so the resumed run reads
on from there, and resuming costs the same after ten steps or a million (BENCHMARKS.md). A
checkpoint written before tfbert kept the position resumes by reading past the micro-batches
its micro-step counter says were consumed (the pipeline is deterministic given the seed). Dropout
masks are a pure function of (layer seed, micro-step, global replica id) (`tfbert.layers.dropout`),
and the metrics of a log window cut by a checkpoint are restored per replica, so in float32
the resumed run's loss curve and metrics.jsonl equal the uninterrupted run's, with the default
dropout (tests/pretraining/pretraining_run_test.py). A rerun first drops metrics.jsonl lines written
after the restored checkpoint (all of them without one).

The loop is a plain `tf.function` over `strategy.run(model.train_step)`, not `model.fit`:
Keras 3's `fit` fails under `MultiWorkerMirroredStrategy` (keras-team/keras#20585;
tests/pretraining/pretraining_run_test.py tells when upstream no longer needs this).
`BertPretrainer` still trains with `compile` + `fit` on one device or `MirroredStrategy`.
"""

import dataclasses
import json
import math
import os
import re
import shutil
import time
from typing import Optional, Sequence

import keras
import tensorflow as tf
from absl import logging

from tfbert.checkpoints import google_checkpoint
from tfbert.config import BertConfig
from tfbert.models import BertPretrainer
from tfbert.pretraining import data_checks, input_pipeline, pretraining_eval
from tfbert.runtime import atomic, run_directory, validation
from tfbert.runtime.progress import StepProgress
from tfbert.serving import export
from tfbert.training import distribution, optimization
from tfbert.training.accumulation import find_accumulator

DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass(frozen=True)
class PretrainingRunConfig:
  """Everything that defines a pretraining run (see flags/run_pretraining_flags.py)."""
  bert_config: BertConfig
  input_files: Sequence[str]
  model_dir: str
  optimizer: optimization.OptimizerConfig
  train_batch_size: int = 32
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  init_checkpoint: Optional[str] = None
  dtype: str = "float32"
  distribution_strategy: str = "one_device"
  num_cpu_devices: int = 1
  jit_compile: bool = False
  run_eagerly: bool = False
  seed: int = 12345
  deterministic: bool = False
  save_checkpoints_steps: int = 100
  log_steps: int = 10
  eval_input_files: Sequence[str] = ()
  eval_every_steps: int = 0
  eval_batch_size: int = 8
  max_eval_steps: int = 100
  export_dir: Optional[str] = None
  stop_at_step: Optional[int] = None
  window_normalization: bool = True
  allow_config_change: bool = False

  @property
  def gradient_accumulation_steps(self) -> int:
    return self.optimizer.gradient_accumulation_steps

  @property
  def num_train_steps(self) -> int:
    return self.optimizer.num_train_steps

  def __post_init__(self):
    validation.validate(self)

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    """What a pretraining run needs (`tfbert.runtime.validation`).

    `num_replicas` is 1 at construction; the run checks again with its strategy's.
    """
    return [
        (self.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {self.dtype!r}"),
        validation.batch_splits(self.train_batch_size, self.gradient_accumulation_steps,
                                num_replicas),
        (self.log_steps >= 1 and self.save_checkpoints_steps >= 1,
         f"log_steps ({self.log_steps}) and save_checkpoints_steps "
         f"({self.save_checkpoints_steps}) must be >= 1"),
        (self.stop_at_step is None or 0 < self.stop_at_step <= self.num_train_steps,
         f"stop_at_step ({self.stop_at_step}) must be in [1, num_train_steps "
         f"({self.num_train_steps})]"),
        (not (self.run_eagerly and self.jit_compile), "run_eagerly and jit_compile exclude "
         "each other"),
        (self.eval_every_steps >= 0 and (not self.eval_every_steps or self.eval_input_files),
         f"eval_every_steps ({self.eval_every_steps}) must be >= 0, and > 0 only with "
         "eval_input_files"),
        (self.eval_batch_size >= 1 and self.eval_batch_size % num_replicas == 0
         and self.max_eval_steps >= 1,
         f"eval_batch_size ({self.eval_batch_size}) must be a multiple of the replicas "
         f"({num_replicas}) and max_eval_steps ({self.max_eval_steps}) >= 1"),
        (self.max_predictions_per_seq >= 1 and self.max_seq_length >= 2,
         f"max_seq_length ({self.max_seq_length}) must be >= 2 and max_predictions_per_seq "
         f"({self.max_predictions_per_seq}) >= 1"),
    ]

  def to_json(self) -> str:
    values = dataclasses.asdict(self)
    values["bert_config"] = self.bert_config.to_dict()
    return json.dumps(values, indent=2, sort_keys=True, default=list)

  @classmethod
  def from_json(cls, text: str) -> "PretrainingRunConfig":
    """The inverse of `to_json`."""
    values = json.loads(text)
    values["bert_config"] = BertConfig.from_dict(values["bert_config"], "run config")
    values["optimizer"] = optimization.OptimizerConfig(**values["optimizer"])
    return cls(**values)


@dataclasses.dataclass
class _Run:
  """The live objects of a run."""
  strategy: tf.distribute.Strategy
  model: BertPretrainer
  optimizer: keras.optimizers.Optimizer
  manager: tf.train.CheckpointManager
  writer: Optional[tf.summary.SummaryWriter]
  num_workers: int
  worker_index: int
  is_chief: bool
  metrics_window: tf.Module
  lock: run_directory.RunLock
  data: dict  # `data_record` of the input files.
  batches: distribution.LocalBatches  # Its iterator is checkpointed as "data_position".
  progress: Optional[StepProgress] = None
  evaluator: Optional[pretraining_eval.Evaluator] = None
  eval_writer: Optional[tf.summary.SummaryWriter] = None


def run_pretraining(config: PretrainingRunConfig, flagfile: Optional[str] = None) -> dict:
  """Trains (or resumes) until `config.num_train_steps` applied steps; returns the last log.

  With `stop_at_step`, stops there instead (after a checkpoint, without export; the metrics
  returned are then those since the last log, not written); the same config without it
  then resumes, on the same learning-rate schedule. `flagfile` (the tool's resolved flags)
  is recorded as `model_dir/flags.txt`, which `--flagfile=` replays.

  Returns:
    The last log's scalars and "step", plus "written" (what this run left where: name ->
    final path) and "summary" (those lines, for the tool to print last).
  """
  distribution.configure_cpu_devices(config.num_cpu_devices)
  if config.deterministic:
    tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(config.seed)
  previous_policy = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(config.dtype)
  run = None
  try:
    run = _start(config)
    _remove_leftovers(run, config)
    restored = _restore_or_initialize(run, config)
    _record(run, config, flagfile)
    last = _train(run, config, restored)
    step = int(run.optimizer.iterations.numpy())
    exported = _export(run, config) if step >= config.num_train_steps else {}
  finally:
    keras.mixed_precision.set_global_policy(previous_policy)
    if run is not None:
      run.lock.release()
  written = {**_written(run, config), **exported}
  return {**last, "written": written, "summary": _summary(step, last, config, written)}


def fast_forward(config: PretrainingRunConfig, applied_steps: int, *,
                 data_position: bool = True) -> int:
  """Writes the checkpoint the run in `config.model_dir` would have `applied_steps` later.

  Without training: the data is read (the position is real: the worker's iterator
  advanced past `applied_steps` windows of micro-batches) and the step counters set (the
  optimizer's applied steps, the accumulator's micro-steps); the weights, optimizer slots
  and metrics stay. A rerun resumes from it exactly as from a checkpoint written by
  training that far, so the cost of resuming far into a run can be measured without
  the run (`tools/benchmarks/benchmark_resume.py`). One device or mirrored.

  Args:
    config: the run's config (its directory must hold a checkpoint).
    applied_steps: how far to move it.
    data_position: False writes the checkpoint as tfbert did before it kept the data
      position (without the iterator; nothing is read).

  Returns:
    The new checkpoint's applied step.
  """
  run = _start(config)
  try:
    if not run.manager.latest_checkpoint:
      raise ValueError(f"{config.model_dir} holds no checkpoint to move forward")
    step = _restore_or_initialize(run, config) + applied_steps
    micro_steps = applied_steps * config.gradient_accumulation_steps
    if data_position:
      _read_past(run, config, micro_steps)
    else:
      del run.manager.checkpoint.data_position
    run.optimizer.iterations.assign(step)
    accumulator = find_accumulator(run.optimizer)
    accumulator.micro_step.assign(accumulator.micro_step + micro_steps)
    _save(run, step)
    return step
  finally:
    run.lock.release()


# Fields a rerun may change without --allow_config_change: they change where this run
# stops, how often it logs or saves, where it exports, and where the directory is (a run
# directory moved or copied elsewhere resumes there), not what is trained.
RERUN_MAY_CHANGE = frozenset({"stop_at_step", "log_steps", "save_checkpoints_steps", "export_dir",
                              "model_dir", "allow_config_change", "eval_input_files",
                              "eval_every_steps", "eval_batch_size", "max_eval_steps"})
VOCAB_FILE = "vocab.txt"


def _start(config: PretrainingRunConfig) -> _Run:
  """Checks the config and the data, claims the run directory, builds the model."""
  strategy = distribution.create_strategy(config.distribution_strategy, config.num_cpu_devices)
  validation.validate(config, num_replicas=strategy.num_replicas_in_sync)
  num_workers, index, is_chief = distribution.worker_info(strategy)
  check = data_checks.check_pretraining_files(
      list(config.input_files), config.max_seq_length, config.max_predictions_per_seq,
      config.bert_config.vocab_size)
  logging.info(check.summary())
  eval_check = None
  if config.eval_input_files:
    eval_check = data_checks.check_pretraining_files(
        list(config.eval_input_files), config.max_seq_length, config.max_predictions_per_seq,
        config.bert_config.vocab_size)
    logging.info(f"eval: {eval_check.summary()}")
  data = data_record(check.files)
  # Non-chief workers take part in every checkpoint save (it reads distributed variables)
  # but write their copy beside the chief's, never over it.
  directory = config.model_dir if is_chief else os.path.join(config.model_dir, f".worker{index}")
  records = run_records(config, data) if is_chief else []
  lock = run_directory.claim(directory, records, allow_changes=config.allow_config_change)
  try:
    run = _build(config, strategy, directory, lock, (num_workers, index, is_chief), data)
    if eval_check is not None:
      run.evaluator = pretraining_eval.Evaluator(
          run.model, strategy, eval_check.files, batch_size=config.eval_batch_size,
          steps=pretraining_eval.eval_steps(dict(zip(eval_check.files, eval_check.records)),
                                            num_workers, config.eval_batch_size,
                                            config.max_eval_steps),
          seq_length=config.max_seq_length, max_predictions=config.max_predictions_per_seq,
          num_workers=num_workers, worker_index=index)
      if is_chief:
        run.eval_writer = tf.summary.create_file_writer(os.path.join(directory, "eval"))
    return run
  except BaseException:
    lock.release()
    raise


def data_record(files: Sequence[str]) -> dict:
  """What the run's data says of itself: its summaries, vocabulary and casing.

  From the `create_pretraining_data` summaries beside the files (none for data made by
  google-research/bert's script: then vocab_file and do_lower_case are None).

  Raises:
    ValueError: the files come from data sets with different vocabularies or casings.
  """
  summaries = data_checks.data_summaries(files)
  vocabs = {(s.get("config", {}).get("vocab_file"), s.get("config", {}).get("do_lower_case"))
            for s in summaries.values()}
  if len(vocabs) > 1:
    raise ValueError(f"the input files mix data sets of different vocabularies or casings "
                     f"({sorted(vocabs, key=str)}; summaries {sorted(summaries)}): a model "
                     "learns one vocabulary; remake the data with one --vocab_file")
  vocab_file, do_lower_case = vocabs.pop() if vocabs else (None, None)
  return {"summaries": sorted(os.path.abspath(p) for p in summaries),
          "vocab_file": vocab_file, "do_lower_case": do_lower_case}


def run_records(config: PretrainingRunConfig, data: dict) -> list:
  """The records of a run directory (`tfbert.runtime.run_directory`): model, run, data."""
  return [run_directory.RunRecord("bert_config.json", config.bert_config.to_dict()),
          run_directory.RunRecord("run_config.json", json.loads(config.to_json()),
                                  RERUN_MAY_CHANGE),
          run_directory.RunRecord("data.json", data)]


def _record(run: _Run, config: PretrainingRunConfig, flagfile: Optional[str]) -> None:
  """Chief: writes the run's records and vocabulary, once the checkpoint has restored.

  Not earlier: a rerun that cannot continue (another model's checkpoint) must leave the
  records of the run the directory holds.
  """
  if run.is_chief:
    run_directory.write_records(config.model_dir, run_records(config, run.data), flagfile)
    _copy_vocab(run.data["vocab_file"], config.model_dir)


def _copy_vocab(vocab_file: Optional[str], directory: str) -> None:
  """Copies the data's vocabulary into the run directory (a note when there is none)."""
  if vocab_file and os.path.isfile(vocab_file):
    atomic.write_with(os.path.join(directory, VOCAB_FILE),
                      lambda path: shutil.copyfile(vocab_file, path))
  else:
    logging.info(f"note: no vocabulary recorded beside the data (vocab_file {vocab_file!r}); "
                 f"{directory} will not hold {VOCAB_FILE}")


def _build(config: PretrainingRunConfig, strategy: tf.distribute.Strategy, directory: str,
           lock: run_directory.RunLock, worker: tuple, data: dict) -> _Run:
  """Builds model, optimizer, checkpoint manager and (chief) TensorBoard writer."""
  num_workers, index, is_chief = worker
  with strategy.scope():
    model = BertPretrainer(config.bert_config)
    model.build()
    optimizer = optimization.create_optimizer(dataclasses.replace(
        config.optimizer, accumulation_reduction="sum",
        loss_scale=config.dtype == "mixed_float16"))
    model.compile(optimizer=optimizer)
    optimizer.build(model.trainable_variables)
  window = _metrics_window(strategy, model)
  batches = _local_batches(config, strategy, num_workers, index)
  checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, metrics_window=window,
                                   data_position=batches.iterator)
  manager = tf.train.CheckpointManager(checkpoint, os.path.join(directory, "checkpoints"), 3)
  writer = tf.summary.create_file_writer(os.path.join(directory, "train")) if is_chief else None
  return _Run(strategy, model, optimizer, manager, writer, num_workers, index, is_chief, window,
              lock, data, batches)


def _own_directory(run: _Run, config: PretrainingRunConfig) -> str:
  """model_dir for the chief; the directory beside it where another worker writes."""
  return config.model_dir if run.is_chief else \
      os.path.join(config.model_dir, f".worker{run.worker_index}")


def _export_directory(run: _Run, config: PretrainingRunConfig) -> str:
  if not run.is_chief:
    return os.path.join(_own_directory(run, config), "export")
  return os.path.abspath(config.export_dir or os.path.join(config.model_dir, "export"))


def _is_checkpoint_temporary(name: str) -> bool:
  """Whether a name under checkpoints/ is what TF leaves when killed while saving.

  `ckpt-N_temp/` (a sharded save's parts before the merge), `*.tempstate<digits>` (a
  tensor bundle before its rename), `checkpoint.tmp<hex>` (the state file before its rename).
  """
  return bool(re.fullmatch(r".+_temp|.+\.tempstate\d+|checkpoint\.tmp[0-9a-f]+", name))


def _remove_leftovers(run: _Run, config: PretrainingRunConfig) -> None:
  """Removes what a killed run of this directory left half-written (a rerun's first act).

  Checkpoint temporaries (`_is_checkpoint_temporary`) and tfbert temporaries whose process
  is gone (`tfbert.runtime.atomic`: a metrics rewrite, an export being written).
  """
  directory = _own_directory(run, config)
  removed = []  # The run directory's own temporaries went when it was claimed.
  export_parent = os.path.dirname(_export_directory(run, config))
  if os.path.abspath(export_parent) != os.path.abspath(directory):
    removed += atomic.remove_stale_temporaries(export_parent)
  checkpoints = os.path.join(directory, "checkpoints")
  for name in sorted(os.listdir(checkpoints)) if os.path.isdir(checkpoints) else []:
    if _is_checkpoint_temporary(name):
      atomic.remove_quietly(os.path.join(checkpoints, name))
      removed.append(os.path.join(checkpoints, name))
  if removed:
    logging.info(f"removed {len(removed)} leftover(s) of a killed run: {', '.join(removed)}")


def _restore_or_initialize(run: _Run, config: PretrainingRunConfig) -> int:
  """Restores the latest checkpoint; else loads `init_checkpoint`. Returns applied steps.

  The chief then drops the metrics.jsonl lines of steps after the restored one.
  """
  step = 0
  if run.manager.latest_checkpoint:
    restored_position = _restore(run, run.manager.latest_checkpoint)
    step = int(run.optimizer.iterations.numpy())
    logging.info(f"resumed from {run.manager.latest_checkpoint} at applied step {step}")
    if not restored_position:
      # Written before checkpoints held the data position: read past what was consumed
      # (the pipeline is deterministic given the seed); later checkpoints hold the position.
      logging.info(f"the checkpoint holds no data position: reading past the "
                   f"{_micro_steps(run)} micro-steps it consumed")
      _read_past(run, config, _micro_steps(run))
  elif config.init_checkpoint:
    report = google_checkpoint.load_google_checkpoint(run.model, config.init_checkpoint,
                                                      allow_missing=("nsp_head",))
    logging.info(report.summary())
  if run.is_chief:
    _truncate_metrics(config.model_dir, step)
  return step


def _metrics_window(strategy: tf.distribute.Strategy, model: BertPretrainer) -> tf.Module:
  """Checkpointable copies of the metrics' per-replica state (one [local replicas] each).

  Keras keeps metric variables out of a `tf.train.Checkpoint`, and restoring a sum over
  replicas would split it evenly among them (different float sums); so `_save` copies each
  replica's own values here and `_restore` puts them back, and a log window cut by a
  checkpoint logs the uninterrupted run's values after a resume.
  """
  window = tf.Module(name="metrics_window")
  window.values = [tf.Variable(tf.zeros([len(parts)], parts[0].dtype), trainable=False)
                   for parts in _metric_parts(strategy, model)]
  return window


def _metric_parts(strategy: tf.distribute.Strategy, model: BertPretrainer) -> list:
  """For each metric variable, its local per-replica variables."""
  return [strategy.experimental_local_results(variable.value)
          for tracker in model.metrics for variable in tracker.variables]


def _save(run: _Run, step: int) -> None:
  for copy, parts in zip(run.metrics_window.values, _metric_parts(run.strategy, run.model)):
    copy.assign(tf.stack([part.read_value() for part in parts]))
  run.manager.save(checkpoint_number=step)


def _restore(run: _Run, path: str) -> bool:
  """Restores checkpoint `path` into the run; returns whether it held the data position.

  Model and optimizer must match. The metrics window and the data position are restored
  when the checkpoint has them: one written before tfbert kept the log window resumes with
  a first log that lacks what was accumulated before the checkpoint; one written before it
  kept the data position resumes by reading past what was consumed (`_restore_or_initialize`).
  """
  saved = {name.split("/")[0] for name, _ in tf.train.list_variables(path)}
  objects = {"model": run.model, "optimizer": run.optimizer}
  if "metrics_window" in saved:
    objects["metrics_window"] = run.metrics_window
  if "data_position" in saved:
    objects["data_position"] = run.batches.iterator
  checkpoint = tf.train.Checkpoint(**objects)
  try:
    checkpoint.restore(path).assert_existing_objects_matched()
  except (ValueError, AssertionError) as error:
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    raise ValueError(f"{path} cannot be restored into this model ({first_line}): the run "
                     "in this directory trained another model; use another model_dir") from None
  if "metrics_window" in saved:
    for copy, parts in zip(run.metrics_window.values,
                           _metric_parts(run.strategy, run.model)):
      for part, value in zip(parts, tf.unstack(copy)):
        part.assign(value)
  return "data_position" in saved


def _micro_steps(run: _Run) -> int:
  return int(find_accumulator(run.optimizer).micro_step.numpy())


def _read_past(run: _Run, config: PretrainingRunConfig, micro_steps: int) -> None:
  """Reads the batches of `micro_steps` micro-steps from this worker's iterator.

  One batch per local replica and micro-step; the data position is then as if they had
  been trained on. A data error names its file and byte.
  """
  batches = micro_steps * (run.strategy.num_replicas_in_sync // run.num_workers)
  with data_checks.naming_data_errors(config.input_files):
    _advance(run.batches.iterator, tf.constant(batches, tf.int64))


@tf.function
def _advance(iterator, count: tf.Tensor) -> None:
  """Reads `count` elements of a tf.data iterator (its state is then as if they were used)."""
  for _ in tf.range(count):
    next(iterator)


def _local_batches(config: PretrainingRunConfig, strategy: tf.distribute.Strategy,
                   num_workers: int, worker_index: int) -> distribution.LocalBatches:
  """Per-replica micro-batches: each worker reads its own file shard (no re-sharding).

  The replicas of one worker take consecutive batches of the worker's pipeline, so a window
  (one applied step) spans `gradient_accumulation_steps * local replicas` of its batches.
  """
  replicas = strategy.num_replicas_in_sync
  per_replica = config.train_batch_size // config.gradient_accumulation_steps // replicas
  local_replicas = replicas // num_workers
  dataset = input_pipeline.pretraining_dataset(
      list(config.input_files), per_replica, seq_length=config.max_seq_length,
      max_predictions=config.max_predictions_per_seq, num_workers=num_workers,
      worker_index=worker_index, shuffle=not config.deterministic, seed=config.seed,
      repeat=True, gradient_accumulation_steps=config.gradient_accumulation_steps * local_replicas,
      deterministic=True)  # A fixed order: a checkpoint's position means the same batches.
  if not config.window_normalization:  # Each micro-batch normalized by its own counts.
    dataset = dataset.map(lambda f: {k: v for k, v in f.items() if not k.startswith("window_")})
  return distribution.LocalBatches(strategy, dataset)


def graph_micro_steps(strategy: tf.distribute.Strategy, train_step):
  """The training loop's unit: `micro_steps(iterator, count)`, one `tf.function`.

  It runs `count` (an int Tensor) micro-steps, `strategy.run(train_step)` on the
  iterator's next batch each, in a `tf.range` loop: one call per chunk of steps instead of
  one per micro-step. `tools.benchmarks.benchmark` times this same loop.
  """

  @tf.function
  def micro_steps(iterator, count):
    for _ in tf.range(count):
      strategy.run(train_step, args=(next(iterator),))

  return micro_steps


def _train(run: _Run, config: PretrainingRunConfig, step: int) -> dict:
  iterator = run.batches

  # XLA compiles the per-replica step; it works for one device, not for MirroredStrategy
  # over logical CPUs (docs/pitfalls.md, Distribution).
  train_step = tf.function(run.model.train_step, jit_compile=config.jit_compile)
  micro_steps = graph_micro_steps(run.strategy, train_step)

  def eager_micro_steps(iterator, count):
    for _ in range(int(count)):
      run.strategy.run(run.model.train_step, args=(next(iterator),))

  if config.run_eagerly:  # Also the optimizer's and accumulator's own tf.functions.
    tf.config.run_functions_eagerly(True)
  try:
    return _train_loop(run, config, step, iterator,
                       eager_micro_steps if config.run_eagerly else micro_steps)
  finally:
    tf.config.run_functions_eagerly(False)


def _train_loop(run: _Run, config: PretrainingRunConfig, step: int, iterator,
                micro_steps) -> dict:
  """Runs to `stop_at_step` or `num_train_steps` in chunks that end at every log or checkpoint.

  Logs at every multiple of `log_steps` and at `num_train_steps`; saves at every multiple of
  `save_checkpoints_steps` and where the run stops (after the log of the same step).
  """
  last = {}
  stop = config.stop_at_step or config.num_train_steps
  if run.is_chief:
    run.progress = StepProgress(config.num_train_steps, start_step=step)
  logged_step, seconds = step, 0.0  # The log window: since logged_step, in seconds.
  while step < stop:
    chunk = min(_to_multiple(step, config.log_steps),
                _to_multiple(step, config.save_checkpoints_steps), stop - step)
    if config.eval_every_steps:
      chunk = min(chunk, _to_multiple(step, config.eval_every_steps))
    start = time.perf_counter()
    with data_checks.naming_data_errors(config.input_files):  # Graph data errors name a file.
      micro_steps(iterator, tf.constant(chunk * config.gradient_accumulation_steps))
    seconds += time.perf_counter() - start
    step += chunk
    if step % config.log_steps == 0 or step == config.num_train_steps:
      examples_per_second = (step - logged_step) * config.train_batch_size / seconds
      last = _log(run, config, int(run.optimizer.iterations.numpy()), examples_per_second,
                  logged_step)
      logged_step, seconds = step, 0.0
    if run.evaluator is not None and (step == config.num_train_steps or (
        config.eval_every_steps and step % config.eval_every_steps == 0)):
      last = {**last, "eval": _evaluate(run, config, step)}  # Before the checkpoint of step.
    if step % config.save_checkpoints_steps == 0 or step == stop:
      _save(run, int(run.optimizer.iterations.numpy()))
  if logged_step != step:  # Stopped inside a log window: its metrics so far, not written.
    last = {"step": int(run.optimizer.iterations.numpy()), **_scalars(run, float("nan"))}
  return last


def _to_multiple(step: int, every: int) -> int:
  """Steps from `step` to the next multiple of `every`."""
  return every - step % every


def _scalars(run: _Run, examples_per_second: float) -> dict:
  result = {k: float(v) for k, v in run.model.get_metrics_result().items()}
  accumulator = find_accumulator(run.optimizer)
  result["learning_rate"] = float(run.optimizer.learning_rate)
  result["gradient_norm"] = float(accumulator.gradient_norm.numpy())
  result["skipped_windows"] = float(accumulator.skipped_windows.numpy())
  result["examples_per_second"] = examples_per_second
  if hasattr(run.optimizer, "dynamic_scale"):
    result["loss_scale"] = float(run.optimizer.dynamic_scale.numpy())
  return result


def _log(run: _Run, config: PretrainingRunConfig, step: int, examples_per_second: float,
         previous_step: int) -> dict:
  scalars = _scalars(run, examples_per_second)
  run.model.reset_metrics()
  if not math.isfinite(scalars["loss"]) and config.dtype != "mixed_float16":
    raise FloatingPointError(f"non-finite loss ({scalars['loss']}) in applied steps "
                             f"{previous_step + 1}..{step}")
  if run.is_chief:
    _write_scalars(run.writer, config.model_dir, {"step": step}, scalars)
    run.progress.update(step, scalars)
  return {"step": step, **scalars}


def _write_scalars(writer: tf.summary.SummaryWriter, model_dir: str, head: dict,
                   scalars: dict) -> None:
  """Chief: `scalars` to TensorBoard at head["step"] and as a metrics.jsonl line."""
  with writer.as_default(step=head["step"]):
    for name, value in scalars.items():
      tf.summary.scalar(name, value)
  writer.flush()
  with open(os.path.join(model_dir, "metrics.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps({**head, **scalars}) + "\n")  # A kill may cut it: `_truncate_metrics`.


def _evaluate(run: _Run, config: PretrainingRunConfig, step: int) -> dict:
  """Runs the held-out evaluation; the chief logs it (TensorBoard `eval/`, metrics.jsonl)."""
  start = time.perf_counter()
  scalars = run.evaluator()
  if run.is_chief:
    _write_scalars(run.eval_writer, config.model_dir, {"step": step, "split": "eval"}, scalars)
    logging.info(f"eval at applied step {step} ({run.evaluator.examples} sequences, "
                 f"{time.perf_counter() - start:.1f} s): " +
                 ", ".join(f"{name} {value:.4f}" for name, value in scalars.items()))
  return scalars


def _truncate_metrics(model_dir: str, step: int) -> None:
  """Keeps the log lines of steps <= `step` (the restored one; 0: none), whole lines only.

  Lines after the restored checkpoint will be logged again; a last line cut by a kill is
  not JSON and goes too.
  """
  path = os.path.join(model_dir, "metrics.jsonl")
  if not os.path.exists(path):
    return
  kept = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      try:
        row = json.loads(line)
      except json.JSONDecodeError:
        continue
      if line.endswith("\n") and row["step"] <= step:
        kept.append(line)
  atomic.write_text(path, "".join(kept))


def _export(run: _Run, config: PretrainingRunConfig) -> dict:
  """Chief: SavedModel + Google checkpoint. Other workers: their Google checkpoint beside.

  The whole export directory is written to a temporary sibling and renamed into place
  (`tfbert.runtime.atomic`): a failed export leaves the previous one, or none, never a part.

  Returns:
    name -> final path of what was written.
  """
  export_dir = _export_directory(run, config)
  written = {"google_checkpoint": os.path.join(export_dir, "google", "bert_model.ckpt")}
  if run.is_chief:
    written = {"saved_model": os.path.join(export_dir, "saved_model"), **written}

  def write(staging: str) -> None:
    os.makedirs(staging)
    if run.is_chief:
      export.export_encoder_saved_model(run.model, os.path.join(staging, "saved_model"))
    vocab = run.data["vocab_file"]
    vocab = vocab if vocab and os.path.isfile(vocab) else None
    google_checkpoint.export_google_checkpoint(
        run.model, os.path.join(staging, "google", "bert_model.ckpt"), vocab_file=vocab)

  os.makedirs(os.path.dirname(export_dir), exist_ok=True)
  atomic.write_with(export_dir, write, tag="export")
  return written


def _written(run: _Run, config: PretrainingRunConfig) -> dict:
  """name -> path of the run directory's files (the chief's; another worker's checkpoints)."""
  written = {"checkpoint": os.path.abspath(run.manager.latest_checkpoint or "")}
  if run.is_chief:
    written.update(metrics=os.path.abspath(os.path.join(config.model_dir, "metrics.jsonl")),
                   tensorboard=os.path.abspath(os.path.join(config.model_dir, "train")))
    if config.eval_input_files:
      written["tensorboard_eval"] = os.path.abspath(os.path.join(config.model_dir, "eval"))
  return written


def _summary(step: int, last: dict, config: PretrainingRunConfig, written: dict) -> str:
  """What the run did and where its files are: the lines a tool prints last."""
  if step < config.num_train_steps:
    head = f"stopped at applied step {step} of {config.num_train_steps}; rerun without " \
           "stop_at_step to resume"
  else:
    head = f"trained {step} applied steps; last logged loss {last.get('loss', float('nan')):.4f}"
    if "eval" in last:
      head += "; eval " + ", ".join(f"{k} {v:.4f}" for k, v in last["eval"].items())
  return "\n".join([head] + [f"  {name}: {path}" for name, path in written.items()])
