"""A resumable BERT pretraining run: strategy, data, exact train step, logs, checkpoints.

The run directory explains itself and resumes:

  model_dir/
    bert_config.json      the model
    run_config.json       the resolved run configuration
    checkpoints/          model + optimizer (slots, accumulators, micro-step counter, loss
                          scale) every `checkpoint_every` applied steps; TF writes each
                          checkpoint under a temporary name and renames it, so a crash never
                          leaves a half-written checkpoint that looks complete
    train/                TensorBoard events
    metrics.jsonl         one JSON line per log step (the same scalars)
    export/               SavedModel (encoder serving signature) + Google-format checkpoint

Rerunning the same command restores the latest checkpoint. The data position is restored
too: the pipeline is deterministic given the seed, and the optimizer's micro-step counter
says how many micro-batches were consumed, so the resumed run skips exactly those; in
float32 the resumed loss curve equals the uninterrupted one (tests/pretraining_run_test.py).

The loop is a plain `tf.function` over `strategy.run(model.train_step)`, not `model.fit`:
Keras 3's `fit` fails under `MultiWorkerMirroredStrategy` (keras-team/keras#20585;
tests/pretraining_run_test.py tells when upstream no longer needs this). `BertPretrainer`
still trains with `compile` + `fit` on one device or `MirroredStrategy`.
"""

import dataclasses
import json
import math
import os
import time
from typing import Optional, Sequence

import keras
import tensorflow as tf

from tfbert import distribution, export, google_checkpoint, input_pipeline, optimization
from tfbert.accumulation import find_accumulator
from tfbert.config import BertConfig
from tfbert.models import BertPretrainer

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
  distribution: str = "one_device"
  num_cpu_devices: int = 1
  jit_compile: bool = False
  run_eagerly: bool = False
  seed: int = 12345
  deterministic: bool = False
  checkpoint_every: int = 100
  log_every: int = 10
  export_dir: Optional[str] = None
  stop_at_step: Optional[int] = None
  window_normalization: bool = True

  @property
  def accumulation_steps(self) -> int:
    return self.optimizer.accumulation_steps

  @property
  def total_steps(self) -> int:
    return self.optimizer.total_steps

  def validate(self, num_replicas: int) -> None:
    """Raises ValueError naming the field when the batch cannot be split evenly."""
    if self.dtype not in DTYPES:
      raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
    micro = self.train_batch_size // self.accumulation_steps
    if micro * self.accumulation_steps != self.train_batch_size or micro % num_replicas:
      raise ValueError(
          f"train_batch_size {self.train_batch_size} must be a multiple of "
          f"gradient_accumulation_steps ({self.accumulation_steps}) x replicas ({num_replicas})")
    if self.log_every < 1 or self.checkpoint_every < 1:
      raise ValueError("log_every and checkpoint_every must be >= 1")
    if self.stop_at_step is not None and not 0 < self.stop_at_step <= self.total_steps:
      raise ValueError(f"stop_at_step ({self.stop_at_step}) must be in [1, total_steps "
                       f"({self.total_steps})]")
    if self.run_eagerly and self.jit_compile:
      raise ValueError("run_eagerly and jit_compile exclude each other")

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
  progress: Optional[keras.utils.Progbar] = None


def run_pretraining(config: PretrainingRunConfig) -> dict:
  """Trains (or resumes) until `config.total_steps` applied steps; returns the last log.

  With `stop_at_step`, stops there instead (after a checkpoint, without export); the same
  config without it then resumes, on the same learning-rate schedule.
  """
  distribution.configure_cpu_devices(config.num_cpu_devices)
  if config.deterministic:
    tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(config.seed)
  previous_policy = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(config.dtype)
  try:
    run = _start(config)
    restored = _restore_or_initialize(run, config)
    last = _train(run, config, restored)
    if int(run.optimizer.iterations.numpy()) >= config.total_steps:
      _export(run, config)
  finally:
    keras.mixed_precision.set_global_policy(previous_policy)
  return last


def _start(config: PretrainingRunConfig) -> _Run:
  strategy = distribution.create_strategy(config.distribution, config.num_cpu_devices)
  config.validate(strategy.num_replicas_in_sync)
  num_workers, index, is_chief = distribution.worker_info(strategy)
  # Non-chief workers take part in every checkpoint save (it reads distributed variables)
  # but write their copy beside the chief's, never over it.
  directory = config.model_dir if is_chief else os.path.join(config.model_dir, f".worker{index}")
  os.makedirs(directory, exist_ok=True)
  if is_chief:
    config.bert_config.to_json_file(os.path.join(directory, "bert_config.json"))
    _write_atomically(os.path.join(directory, "run_config.json"), config.to_json())
  with strategy.scope():
    model = BertPretrainer(config.bert_config)
    model.build()
    optimizer = optimization.create_optimizer(dataclasses.replace(
        config.optimizer, accumulation_reduction="sum",
        loss_scale=config.dtype == "mixed_float16"))
    model.compile(optimizer=optimizer)
    optimizer.build(model.trainable_variables)
  checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
  manager = tf.train.CheckpointManager(checkpoint, os.path.join(directory, "checkpoints"), 3)
  writer = tf.summary.create_file_writer(os.path.join(directory, "train")) if is_chief else None
  return _Run(strategy, model, optimizer, manager, writer, num_workers, index, is_chief)


def _restore_or_initialize(run: _Run, config: PretrainingRunConfig) -> int:
  """Restores the latest checkpoint; else loads `init_checkpoint`. Returns applied steps."""
  if run.manager.latest_checkpoint:
    run.manager.checkpoint.restore(run.manager.latest_checkpoint).assert_existing_objects_matched()
    step = int(run.optimizer.iterations.numpy())
    _truncate_metrics(config.model_dir, step) if run.is_chief else None
    print(f"resumed from {run.manager.latest_checkpoint} at applied step {step}", flush=True)
    return step
  if config.init_checkpoint:
    report = google_checkpoint.load_google_checkpoint(run.model, config.init_checkpoint,
                                                      allow_missing=("nsp_head",))
    print(report.summary(), flush=True)
  return 0


def _micro_steps(run: _Run) -> int:
  return int(find_accumulator(run.optimizer).micro_step.numpy())


def _dataset(run: _Run, config: PretrainingRunConfig):
  """Per-replica micro-batches: each worker reads its own file shard (no re-sharding).

  The replicas of one worker take consecutive batches of the worker's pipeline, so a window
  (one applied step) spans `accumulation_steps * local replicas` of its batches.
  """
  replicas = run.strategy.num_replicas_in_sync
  per_replica = config.train_batch_size // config.accumulation_steps // replicas
  local_replicas = replicas // run.num_workers
  consumed = _micro_steps(run) * local_replicas  # The data position of a resumed run.

  def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
    dataset = input_pipeline.pretraining_dataset(
        list(config.input_files), per_replica, seq_length=config.max_seq_length,
        max_predictions=config.max_predictions_per_seq,
        num_workers=context.num_input_pipelines, worker_index=context.input_pipeline_id,
        shuffle=not config.deterministic, seed=config.seed, repeat=True,
        accumulation_steps=config.accumulation_steps * local_replicas,
        deterministic=True)  # a fixed order, so that a resumed run can skip what it consumed
    if not config.window_normalization:  # Each micro-batch normalized by its own counts.
      dataset = dataset.map(lambda f: {k: v for k, v in f.items() if not k.startswith("window_")})
    return dataset.skip(consumed)

  return run.strategy.distribute_datasets_from_function(dataset_fn)


def graph_micro_steps(strategy: tf.distribute.Strategy, train_step):
  """The training loop's unit: `micro_steps(iterator, count)`, one `tf.function`.

  It runs `count` (an int Tensor) micro-steps, `strategy.run(train_step)` on the
  iterator's next batch each, in a `tf.range` loop: one call per chunk of steps instead of
  one per micro-step. `tfbert.benchmark` times this same loop.
  """

  @tf.function
  def micro_steps(iterator, count):
    for _ in tf.range(count):
      strategy.run(train_step, args=(next(iterator),))

  return micro_steps


def _train(run: _Run, config: PretrainingRunConfig, step: int) -> dict:
  iterator = iter(_dataset(run, config))

  # XLA compiles the per-replica step; it works for one device, not for MirroredStrategy
  # over logical CPUs (PITFALLS.md, Distribution).
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
  last = {}
  stop = config.stop_at_step or config.total_steps
  while step < stop:
    chunk = min(config.log_every - step % config.log_every, stop - step)
    start = time.perf_counter()
    micro_steps(iterator, tf.constant(chunk * config.accumulation_steps))
    seconds = time.perf_counter() - start
    new_step = int(run.optimizer.iterations.numpy())
    last = _log(run, config, new_step, chunk * config.train_batch_size / seconds, step)
    if new_step // config.checkpoint_every > step // config.checkpoint_every or \
        step + chunk >= stop:
      run.manager.save(checkpoint_number=new_step)
    step = step + chunk
  return last


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
    with run.writer.as_default(step=step):
      for name, value in scalars.items():
        tf.summary.scalar(name, value)
    run.writer.flush()
    with open(os.path.join(config.model_dir, "metrics.jsonl"), "a") as f:
      f.write(json.dumps({"step": step, **scalars}) + "\n")
    if run.progress is None:
      run.progress = keras.utils.Progbar(config.total_steps, stateful_metrics=list(scalars),
                                         unit_name="step")
    run.progress.update(step, list(scalars.items()))
  return {"step": step, **scalars}


def _truncate_metrics(model_dir: str, step: int) -> None:
  """Drops log lines written after the restored checkpoint (they will be logged again)."""
  path = os.path.join(model_dir, "metrics.jsonl")
  if os.path.exists(path):
    with open(path) as f:
      kept = [line for line in f if json.loads(line)["step"] <= step]
    _write_atomically(path, "".join(kept))


def _export(run: _Run, config: PretrainingRunConfig) -> None:
  """Chief: SavedModel + Google checkpoint. Other workers: their Google checkpoint beside."""
  export_dir = config.export_dir or os.path.join(config.model_dir, "export")
  if not run.is_chief:
    export_dir = os.path.join(config.model_dir, f".worker{run.worker_index}", "export")
  else:
    export.export_encoder_saved_model(run.model, os.path.join(export_dir, "saved_model"))
  google_checkpoint.export_google_checkpoint(
      run.model, os.path.join(export_dir, "google", "bert_model.ckpt"))


def _write_atomically(path: str, text: str) -> None:
  temporary = path + ".tmp"
  with open(temporary, "w") as f:
    f.write(text)
  os.replace(temporary, path)
