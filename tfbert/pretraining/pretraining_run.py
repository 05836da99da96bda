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
                          (with `eval_input_files` or `eval_text_files`;
                          `tfbert.pretraining.pretraining_eval`)
    metrics.jsonl         one JSON line per log step (the same scalars): at every multiple
                          of `log_steps` and at the last step; with held-out data, a
                          line {"step", "split": "eval", ...} at every multiple of
                          `eval_every_steps` and at the last step
    best/                 with held-out data: the model of the best held-out
                          `best_metric` (default: loss) as a Google checkpoint, and its
                          eval_results.json (`early_stopping_patience` may end the run);
                          a resume on other held-out data or with another `best_metric`
                          starts the best over (logged), never compares the two
    export/               SavedModel (the encoder's id signatures and `fill_mask` over
                          the data's vocabulary; not with `export_saved_model` off) +
                          Google-format checkpoint, written
                          whole to a temporary sibling and renamed into place

Before anything is built, the data files are checked against the flags
(`tfbert.pretraining.data_checks`: sequence length, predictions per sequence, ids within the
vocabulary, TFRecord framing), and the directory is claimed (`tfbert.runtime.run_directory`): a
second concurrent run is refused, and a rerun must record the same model, schedule and data
(`RERUN_MAY_CHANGE` aside) unless `allow_config_change`.

Every path (`input_files`, `eval_input_files`, `model_dir`, `export_dir`, the source
(`init_checkpoint`, `init_hf_dir`, `init_tfbert`: `tfbert.pretraining.pretraining_init`),
the data's vocabulary) may be a URL (`gs://bucket/run`, any `tf.io.gfile` filesystem;
`tfbert.runtime.files`): the run, its resume and its exports work there as on a local disk,
with what such a filesystem gives (`tfbert.runtime.run_directory` on the lock; renames on
object stores are a copy and a delete).

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
import os
from typing import Optional, Sequence

import keras
import tensorflow as tf
from absl import logging
from tensorflow.python.framework import config as tf_framework_config

from tfbert.checkpoints import google_checkpoint, pretrained
from tfbert.config import SHAPE_FIELDS, BertConfig
from tfbert.losses.pretraining_loss import OBJECTIVES, uses_nsp
from tfbert.models import BertPretrainer
from tfbert.pretraining import (
  data_checks,
  input_pipeline,
  pretraining_eval,
  pretraining_export,
  pretraining_init,
  raw_text_run,
)
from tfbert.runtime import atomic, files, paths, run_directory, traces, validation
from tfbert.serving import export, serving_dtype
from tfbert.tasks import precision
from tfbert.training import distribution, optimization, training_loop
from tfbert.training.accumulation import find_accumulator
from tfbert.training.distribution import DTYPES

# The data the run reads (each file more than once: `input_pipeline.input_problems`).
INPUT_FLAGS = ("input_files", "eval_input_files", "train_text_files", "eval_text_files")
# The run's other inputs: its vocabulary and the model it starts from (`pretraining_init`).
OTHER_INPUTS = ("vocab_file", *pretraining_init.SOURCE_FLAGS)


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
  objective: str = "mlm_nsp"  # Or "mlm": no NSP head (`pretraining_loss.OBJECTIVES`).
  init_checkpoint: Optional[str] = None
  init_hf_dir: Optional[str] = None  # Hugging Face or sentence-transformers directory.
  init_tfbert: Optional[str] = None  # A tfbert .keras model (`pretraining_init`).
  dtype: str = "float32"
  distribution_strategy: str = "one_device"
  num_cpu_devices: int = 1
  jit_compile: bool = False
  run_eagerly: bool = False
  seed: int = 12345
  deterministic: bool = False
  save_checkpoints_steps: int = 100
  keep_checkpoint_max: int = 5
  log_steps: int = 10
  eval_input_files: Sequence[str] = ()
  eval_text_files: Sequence[str] = ()  # Held-out raw text of a raw-text run (`raw_text_run`).
  eval_every_steps: int = 0
  eval_batch_size: int = 8
  max_eval_steps: int = 100
  best_metric: str = ""
  early_stopping_patience: int = 0
  export_dir: Optional[str] = None
  export_dtype: str = "model"
  export_saved_model: bool = True  # False: the export is the Google checkpoint alone.
  stop_at_step: Optional[int] = None
  window_normalization: bool = True
  allow_config_change: bool = False
  # Raw text instead of TFRecords (`tfbert.pretraining.raw_text_run`): tokenized, packed and
  # masked as batches are formed; vocab_file / do_lower_case default to the source's.
  train_text_files: Sequence[str] = ()
  text_mode: str = "blocks"  # A document per blank-line-separated block, or per line.
  vocab_file: Optional[str] = None
  do_lower_case: Optional[bool] = None
  allow_casing_mismatch: bool = False
  masked_lm_prob: float = 0.15
  do_whole_word_mask: bool = False

  @property
  def gradient_accumulation_steps(self) -> int:
    return self.optimizer.gradient_accumulation_steps

  @property
  def num_train_steps(self) -> int:
    return self.optimizer.num_train_steps

  @property
  def evaluates(self) -> bool:
    """Whether the run has held-out data (`eval_input_files` or `eval_text_files`)."""
    return bool(self.eval_input_files or self.eval_text_files)

  def __post_init__(self):
    validation.validate(self)

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    """What a pretraining run needs (`tfbert.runtime.validation`).

    `num_replicas` is 1 at construction; the run checks again with its strategy's.
    """
    return [
        (self.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {self.dtype!r}"),
        (self.objective in OBJECTIVES, f"objective must be one of {', '.join(OBJECTIVES)}, "
         f"got {self.objective!r}"),
        serving_dtype.export_dtype_check(self.export_dtype),
        validation.batch_splits(self.train_batch_size, self.gradient_accumulation_steps,
                                num_replicas),
        *training_loop.schedule_checks(self),
        *raw_text_run.checks(self),
        *[(False, problem) for problem in paths.overlap_problems(
            paths.fields(self, (*INPUT_FLAGS, *OTHER_INPUTS)),
            paths.fields(self, ("model_dir", "export_dir")), container="--model_dir")],
        *[(False, problem) for problem in paths.output_problems(
            paths.fields(self, ("model_dir", "export_dir")))],
        # Every input is read more than once (checked, recorded, read): no named pipe, socket
        # or device (`paths.special_input_problems`, the one wording; data files through
        # `input_problems`, which names each file a pattern matches); a broken link of a data
        # file named as one, not unmatched.
        *[(False, problem) for problem in input_pipeline.input_problems(
            paths.fields(self, INPUT_FLAGS))],
        *[(False, problem) for problem in paths.special_input_problems(
            paths.fields(self, OTHER_INPUTS))],
        (sum(bool(getattr(self, flag)) for flag in pretraining_init.SOURCE_FLAGS) <= 1,
         "give at most one of init_checkpoint, init_hf_dir and init_tfbert"),
        (self.num_cpu_devices >= 1, f"num_cpu_devices ({self.num_cpu_devices}) must be >= 1"),
        validation.seed_check("seed", self.seed),
        (self.max_seq_length <= self.bert_config.max_position_embeddings,
         f"max_seq_length {self.max_seq_length} exceeds max_position_embeddings "
         f"{self.bert_config.max_position_embeddings}"),
        (self.stop_at_step is None or self.stop_at_step <= self.num_train_steps,
         f"stop_at_step ({self.stop_at_step}) must be in [1, num_train_steps "
         f"({self.num_train_steps})]"),
        (not (self.run_eagerly and self.jit_compile), "run_eagerly and jit_compile exclude "
         "each other"),
        (not self.eval_every_steps or self.evaluates,
         f"eval_every_steps ({self.eval_every_steps}) > 0 evaluates: it needs "
         "eval_input_files or eval_text_files"),
        (not self.early_stopping_patience or self.evaluates,
         f"early_stopping_patience ({self.early_stopping_patience}) > 0 needs "
         "eval_input_files or eval_text_files"),
        *self._best_metric_checks(),
        (self.eval_batch_size >= 1, f"eval_batch_size ({self.eval_batch_size}) must be >= 1"),
        # One check per setting: a message names only the setting at fault.
        (self.eval_batch_size < 1 or self.eval_batch_size % num_replicas == 0,
         f"eval_batch_size ({self.eval_batch_size}) must be a multiple of the replicas "
         f"({num_replicas})"),
        (self.max_eval_steps >= 1, f"max_eval_steps ({self.max_eval_steps}) must be >= 1"),
        (self.max_seq_length >= 2, f"max_seq_length ({self.max_seq_length}) must be >= 2 "
         "([CLS] and [SEP])"),
        (self.max_predictions_per_seq >= 1,
         f"max_predictions_per_seq ({self.max_predictions_per_seq}) must be >= 1"),
    ]

  def _best_metric_checks(self) -> list[validation.Check]:
    """`best_metric` needs held-out data and must name one of its evaluation's scalars,
    which the objective fixes (`pretraining_eval.metric_names`): refused before any work,
    not at the first evaluation, after a step has trained and the directory been written."""
    if not self.best_metric or self.objective not in OBJECTIVES:  # (The objective's own check.)
      return []
    names = pretraining_eval.metric_names(self.objective)
    return [
        (self.evaluates, f"best_metric ({self.best_metric!r}) picks the best held-out "
         "evaluation: it needs eval_input_files or eval_text_files"),
        (self.best_metric in names, f"best_metric {self.best_metric!r} is not among the "
         f"held-out evaluation's scalars for the objective {self.objective} "
         f"({', '.join(names)}); losses and perplexity are minimized, the others maximized"),
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
  loop: training_loop.TrainingLoop  # Checkpoints, logs, evaluation.
  num_workers: int
  worker_index: int
  is_chief: bool
  lock: run_directory.RunLock
  data: dict  # `data_record` of the input files.
  batches: distribution.LocalBatches  # Its iterator is checkpointed as "data_position".
  evaluator: Optional[pretraining_eval.Evaluator] = None


def text_objective_problem(train_text_files: Sequence[str], objective: str,
                           objective_given: bool) -> Optional[str]:
  """The tool's refusal, in flags, of raw text with a next-sentence objective (the config's
  own check, `raw_text_run.checks`, names fields), or None; `objective_given`: whether
  --objective was on the command line (else `objective` is its default)."""
  if not train_text_files or objective == "mlm":
    return None
  return (f"--train_text_files trains masked LM alone (documents packed into blocks, no "
          f"sentence pairs for a next-sentence head), but --objective={objective}"
          f"{'' if objective_given else ' (the default)'}: pass --objective=mlm, or train "
          f"{objective} on create_pretraining_data's TFRecords with --input_files")


@traces.released()  # The run's traces die with it (tfbert.runtime.traces).
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
  config = absolute_paths(config)
  config = raw_text_run.resolve(config)  # The vocabulary and casing raw text is read with.
  distribution.configure_cpu_devices(config.num_cpu_devices)
  # TensorFlow's op determinism is process-wide: left on, every later run of the process
  # (a notebook's fine-tuning, the next test) ran other kernels, a last bit away from the
  # same run in a fresh process. On for this run only; TF exports no public switch-off.
  determinism_was_on = tf_framework_config.is_op_determinism_enabled()
  if config.deterministic:
    tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(config.seed)
  previous_policy = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(config.dtype)
  run = None
  try:
    run = _start(config)
    _remove_leftovers(run, config)
    _restore_or_initialize(run, config)
    _record(run, config, flagfile)
    last = run.loop.train(run.batches)
    step = int(run.optimizer.iterations.numpy())
    finished = run.loop.finished  # All steps, or stopped early.
    exported = _export(run, config, rerun=bool(last.get("resumed_finished"))) if finished else {}
  except BaseException:
    if run is not None:
      run.lock.forget_if_untrained()
    raise
  finally:
    keras.mixed_precision.set_global_policy(previous_policy)
    if not determinism_was_on:
      tf_framework_config.disable_op_determinism()
    if run is not None:
      run.lock.release()
  written = {**_written(run, config), **exported}
  return {**last, "written": written,
          "summary": _summary(step, last, config, written, finished)}


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
  config = raw_text_run.resolve(config)
  run = _start(config)
  try:
    if not run.loop.manager.latest_checkpoint:
      raise ValueError(f"{config.model_dir} holds no checkpoint to move forward")
    step = _restore_or_initialize(run, config) + applied_steps
    micro_steps = applied_steps * config.gradient_accumulation_steps
    if data_position:
      _read_past(run, config, micro_steps)
    else:
      del run.loop.manager.checkpoint.data_position
    run.optimizer.iterations.assign(step)
    accumulator = find_accumulator(run.optimizer)
    accumulator.micro_step.assign(accumulator.micro_step + micro_steps)
    run.loop.save()
    return step
  finally:
    run.lock.release()


# Fields a rerun may change without --allow_config_change: they change where this run
# stops, how often it logs or saves, where it exports, and where the directory is (a run
# directory moved or copied elsewhere resumes there), not what is trained.
# Settings that name files: a rerun naming the same files another way (relative to another
# working directory, through a symbolic link) is the same run (`run_directory.real_path`).
PATH_SETTINGS = frozenset({"input_files", "train_text_files", "vocab_file", "init_checkpoint",
                           "init_hf_dir", "init_tfbert"})
RERUN_MAY_CHANGE = frozenset({"stop_at_step", "log_steps", "save_checkpoints_steps", "export_dir",
                              "export_dtype", "export_saved_model", "model_dir",
                              "allow_config_change",
                              "eval_input_files", "eval_text_files", "eval_every_steps",
                              "eval_batch_size",
                              "max_eval_steps", "keep_checkpoint_max", "best_metric",
                              "early_stopping_patience"})
VOCAB_FILE = "vocab.txt"
# The end of the message on a plain-text file given as TFRecords (--input_files or
# --eval_input_files): the raw-text flag that reads it.
_TEXT_HINT = ("pass raw text with --{flag} --objective=mlm (masked anew as batches are "
              "formed), or make TFRecords of it with create_pretraining_data.py")
# What a pretraining export directory is (`tfbert.runtime.atomic.OUTPUT_MARKER`).
EXPORT_KIND = "pretraining export"


def _start(config: PretrainingRunConfig) -> _Run:
  """Checks the config and the data, claims the run directory, builds the model."""
  strategy = distribution.create_strategy(config.distribution_strategy, config.num_cpu_devices)
  validation.validate(config, num_replicas=strategy.num_replicas_in_sync)
  # After the strategy (a multi-worker one must come before any op runs), before any work.
  precision.check_policy(config.dtype)
  pretraining_init.check_config(config)
  num_workers, index, is_chief = distribution.worker_info(strategy)
  if config.train_text_files:
    check = raw_text_run.check_files(config, num_workers)
  else:
    check = data_checks.check_pretraining_files(
        list(config.input_files), config.max_seq_length, config.max_predictions_per_seq,
        config.bert_config.vocab_size, next_sentence_labels=uses_nsp(config.objective),
        text_hint=_TEXT_HINT.format(flag="train_text_files"))
  logging.info(check.summary())
  eval_records = None  # {eval file: sequences}
  if config.eval_input_files:
    eval_check = data_checks.check_pretraining_files(
        list(config.eval_input_files), config.max_seq_length, config.max_predictions_per_seq,
        config.bert_config.vocab_size, next_sentence_labels=uses_nsp(config.objective),
        text_hint=_TEXT_HINT.format(flag="eval_text_files"))
    logging.info(f"eval: {eval_check.summary()}")
    eval_records = dict(zip(eval_check.files, eval_check.records))
  elif config.eval_text_files:
    eval_records = raw_text_run.eval_records(config)
    logging.info(f"eval: {len(eval_records)} text file(s), {sum(eval_records.values())} "
                 f"sequences of {config.max_seq_length} tokens")
  evaluation = None  # (the eval files, batches per evaluation, what it scores)
  if eval_records is not None:  # Before any write: too little held-out data is refused.
    eval_files = sorted(eval_records)
    held_out = run_directory.held_out_problem(check.files, eval_files)
    if held_out:
      logging.warning(held_out)
    eval_steps = pretraining_eval.eval_steps(eval_records, num_workers, config.eval_batch_size,
                                             config.max_eval_steps)
    evaluation = (eval_files, eval_steps, evaluation_identity(eval_files, eval_steps, config))
  # Raw text is read whole before the run (its check): its content identifies it too.
  data = data_record(check.files, content=bool(config.train_text_files))
  if config.train_text_files:  # Tokenized by the run, with its vocabulary and casing.
    data.update(vocab_file=config.vocab_file, do_lower_case=config.do_lower_case)
  pretraining_init.check_vocabulary(config, data)  # A source's vocabulary is the data's.
  if is_chief:  # Before any write: the export may replace only an export.
    atomic.check_replaceable(_chief_export_directory(config), EXPORT_KIND)
  # Non-chief workers take part in every checkpoint save (it reads distributed variables)
  # but write their copy beside the chief's, never over it.
  directory = config.model_dir if is_chief else os.path.join(config.model_dir, f".worker{index}")
  records = run_records(config, data) if is_chief else []
  lock = run_directory.claim(directory, records, allow_changes=config.allow_config_change,
                             outputs={"export_dir": config.export_dir} if is_chief else {})
  try:
    return _build(config, strategy, lock, (num_workers, index, is_chief), data, evaluation)
  except BaseException:
    lock.forget_if_untrained()
    lock.release()
    raise


def evaluation_identity(eval_files: Sequence[str], eval_steps: int,
                        config: PretrainingRunConfig) -> dict:
  """What the held-out evaluation scores, recorded with its best value
  (`training_loop.TrainingLoop`'s `evaluation`): the files by name, size and content
  (sha256: the held-out data is read whole at every evaluation or, as text, before the
  run) and the sequences each evaluation takes. A resume on other held-out data (its
  files may change on a rerun, `RERUN_MAY_CHANGE`) starts the best value over."""
  return {"data": run_directory.data_identity(eval_files, content=True),
          "sequences": eval_steps * config.eval_batch_size}


def data_record(paths: Sequence[str], content: bool = False) -> dict:
  """What the run's data says of itself: its summaries, vocabulary and casing, and its
  files by name and size ("input_files": a rerun on other files is refused), and by
  content (sha256) with `content` (raw text, read whole before the run anyway; TFRecord
  shards may be terabytes).

  From the `create_pretraining_data` summaries beside the files (none for data made by
  google-research/bert's script: then vocab_file and do_lower_case are None).

  Raises:
    ValueError: the files come from data sets with different vocabularies or casings.
  """
  summaries = data_checks.data_summaries(paths)
  vocabs = {(s.get("config", {}).get("vocab_file"), s.get("config", {}).get("do_lower_case"))
            for s in summaries.values()}
  if len(vocabs) > 1:
    raise ValueError(f"the input files mix data sets of different vocabularies or casings "
                     f"({sorted(vocabs, key=str)}; summaries {sorted(summaries)}): a model "
                     "learns one vocabulary; remake the data with one --vocab_file")
  vocab_file, do_lower_case = vocabs.pop() if vocabs else (None, None)
  return {"summaries": sorted(files.absolute(p) for p in summaries),
          "vocab_file": vocab_file, "do_lower_case": do_lower_case,
          "input_files": run_directory.data_identity(paths, content=content)}


# The settings naming files to read, made absolute before the run (`absolute_paths`).
READ_PATHS = ("input_files", "eval_input_files", "train_text_files", "eval_text_files",
              "vocab_file", "init_checkpoint", "init_hf_dir", "init_tfbert")


def absolute_paths(config: PretrainingRunConfig) -> PretrainingRunConfig:
  """`config` with the files it reads named by absolute paths (`READ_PATHS`; URLs and the
  shipped model's alias as they are): run_config.json records them so, and so do the
  checkpointed data iterators, so that a resume or a flags.txt replay from another working
  directory reads the same files (sweep 34, A1, A75, A76: a relative glob was recorded as
  given and resolved against the new directory)."""
  changes = {}
  for name in READ_PATHS:
    value = getattr(config, name)
    changes[name] = (pretrained.recorded_path(value) if isinstance(value, str) or not value
                     else type(value)(map(pretrained.recorded_path, value)))
  return dataclasses.replace(config, **changes)


def run_records(config: PretrainingRunConfig, data: dict) -> list:
  """The records of a run directory (`tfbert.runtime.run_directory`): model, run, data."""
  return [run_directory.RunRecord("bert_config.json", config.bert_config.to_dict(),
                                  fixed_by_checkpoint=SHAPE_FIELDS),
          run_directory.RunRecord("run_config.json", json.loads(config.to_json()),
                                  RERUN_MAY_CHANGE, path_keys=PATH_SETTINGS),
          run_directory.RunRecord("data.json", data, data_keys=frozenset({"input_files"}),
                                  path_keys=frozenset({"summaries", "vocab_file"}))]


def _record(run: _Run, config: PretrainingRunConfig, flagfile: Optional[str]) -> None:
  """Chief: writes the run's records and vocabulary, once the checkpoint has restored.

  Not earlier: a rerun that cannot continue (another model's checkpoint) must leave the
  records of the run the directory holds.
  """
  if run.is_chief:
    run_directory.write_records(config.model_dir, run_records(config, run.data), flagfile)
    run.lock.recorded.append(VOCAB_FILE)
    _copy_vocab(run.data["vocab_file"], config.model_dir)


def _copy_vocab(vocab_file: Optional[str], directory: str) -> None:
  """Copies the data's vocabulary into the run directory (a note when there is none)."""
  if vocab_file and files.isfile(vocab_file):
    atomic.write_with(os.path.join(directory, VOCAB_FILE),
                      lambda path: files.copy(vocab_file, path))
  else:
    logging.info(f"note: no vocabulary recorded beside the data (vocab_file {vocab_file!r}); "
                 f"{directory} will not hold {VOCAB_FILE}")


def loop_config(config: PretrainingRunConfig) -> training_loop.LoopConfig:
  """The training loop's part of `config`."""
  return training_loop.LoopConfig(
      num_train_steps=config.num_train_steps, train_batch_size=config.train_batch_size,
      gradient_accumulation_steps=config.gradient_accumulation_steps,
      log_steps=config.log_steps, save_checkpoints_steps=config.save_checkpoints_steps,
      keep_checkpoint_max=config.keep_checkpoint_max,
      eval_every_steps=config.eval_every_steps if config.evaluates else 0,
      best_metric=(config.best_metric or DEFAULT_BEST_METRIC) if config.evaluates else "",
      early_stopping_patience=config.early_stopping_patience if config.evaluates else 0,
      stop_at_step=config.stop_at_step, jit_compile=config.jit_compile,
      run_eagerly=config.run_eagerly, check_finite=config.dtype != "mixed_float16",
      run_end="--num_train_steps")


def _build(config: PretrainingRunConfig, strategy: tf.distribute.Strategy,
           lock: run_directory.RunLock, worker: tuple, data: dict,
           evaluation: Optional[tuple]) -> _Run:
  """Builds model, optimizer, data, evaluation ((eval files, batches per evaluation, what it
  scores: `evaluation_identity`), or None) and the training loop."""
  num_workers, index, is_chief = worker
  with strategy.scope():
    model = BertPretrainer(config.bert_config, objective=config.objective)
    model.build()
    optimizer = optimization.create_optimizer(dataclasses.replace(
        config.optimizer, accumulation_reduction="sum",
        loss_scale=config.dtype == "mixed_float16"))
    model.compile(optimizer=optimizer)
    optimizer.build(model.trainable_variables)
  batches = _local_batches(config, strategy, num_workers, index)
  evaluator, identity = None, None
  if evaluation is not None:
    eval_files, eval_steps, identity = evaluation
    if config.eval_text_files:
      eval_data = raw_text_run.eval_dataset(config, strategy, config.eval_batch_size,
                                            num_workers, index)
    else:
      eval_data = pretraining_eval.record_dataset(
          eval_files, strategy,
          batch_size=config.eval_batch_size, seq_length=config.max_seq_length,
          max_predictions=config.max_predictions_per_seq, objective=config.objective,
          num_workers=num_workers, worker_index=index)
    evaluator = pretraining_eval.Evaluator(model, strategy, eval_data,
                                           batch_size=config.eval_batch_size, steps=eval_steps)
  loop = training_loop.TrainingLoop(
      strategy, model, loop_config(config), config.model_dir, num_workers=num_workers,
      worker_index=index, is_chief=is_chief, data_position=batches.iterator,
      evaluate=evaluator, on_best=lambda step, scores: _keep_best(model, config, data, step,
                                                                  scores),
      data_errors=lambda: data_checks.naming_data_errors(config.input_files),
      evaluation=identity)
  return _Run(strategy, model, optimizer, loop, num_workers, index, is_chief, lock, data,
              batches, evaluator)


# What held-out evaluation keeps the best model by: the MLM (+ NSP) loss (minimized).
DEFAULT_BEST_METRIC = "loss"
BEST_DIR = training_loop.BEST_DIR


def _keep_best(model: BertPretrainer, config: PretrainingRunConfig, data: dict, step: int,
               scores: dict) -> None:
  """Chief: `model_dir/best/`: the model as a Google checkpoint (`google/bert_model.ckpt`,
  vocab beside) and `eval_results.json` (`training_loop.keep_best`)."""
  vocab = data["vocab_file"] if data["vocab_file"] and files.isfile(data["vocab_file"]) else None
  training_loop.keep_best(
      config.model_dir, lambda staging: google_checkpoint.export_google_checkpoint(
          model, os.path.join(staging, "google", "bert_model.ckpt"), vocab_file=vocab),
      config.best_metric or DEFAULT_BEST_METRIC, step, scores)


def _own_directory(run: _Run, config: PretrainingRunConfig) -> str:
  """model_dir for the chief; the directory beside it where another worker writes."""
  return training_loop.own_directory(config.model_dir, run.is_chief, run.worker_index)


def _export_directory(run: _Run, config: PretrainingRunConfig) -> str:
  if not run.is_chief:
    return os.path.join(_own_directory(run, config), "export")
  return _chief_export_directory(config)


def _chief_export_directory(config: PretrainingRunConfig) -> str:
  """Where the chief exports: `export_dir`, else `<model_dir>/export`."""
  return files.absolute(config.export_dir or os.path.join(config.model_dir, "export"))


def _remove_leftovers(run: _Run, config: PretrainingRunConfig) -> None:
  """Removes what a killed run of this directory left half-written (a rerun's first act).

  Checkpoint temporaries (`TrainingLoop.remove_leftovers`) and tfbert temporaries whose
  process is gone (`tfbert.runtime.atomic`: a metrics rewrite, an export being written).
  """
  removed = []  # The run directory's own temporaries went when it was claimed.
  export_parent = os.path.dirname(_export_directory(run, config))
  if files.absolute(export_parent) != files.absolute(_own_directory(run, config)):
    removed += atomic.remove_stale_temporaries(export_parent)
  run.loop.remove_leftovers(also=removed)


def _restore_or_initialize(run: _Run, config: PretrainingRunConfig) -> int:
  """Restores the latest checkpoint; else loads the run's source (`init_checkpoint`,
  `init_hf_dir` or `init_tfbert`: `tfbert.pretraining.pretraining_init`). Returns applied
  steps.

  The chief then drops the metrics.jsonl lines of steps after the restored one.
  """
  step, restored_position = run.loop.restore()
  if step and not restored_position:
    # Written before checkpoints held the data position: read past what was consumed
    # (the pipeline is deterministic given the seed); later checkpoints hold the position.
    logging.info(f"the checkpoint holds no data position: reading past the "
                 f"{run.loop.micro_step} micro-steps it consumed")
    _read_past(run, config, run.loop.micro_step)
  elif not run.loop.manager.latest_checkpoint and pretraining_init.given(config):
    pretraining_init.load_source(run.model, pretraining_init.read_source(config))
  return step


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
  if config.train_text_files:  # Tokenized, packed and masked in the pipeline.
    dataset = raw_text_run.dataset(config, per_replica, num_workers, worker_index,
                                   config.gradient_accumulation_steps * local_replicas)
  else:
    dataset = input_pipeline.pretraining_dataset(
        list(config.input_files), per_replica, seq_length=config.max_seq_length,
        max_predictions=config.max_predictions_per_seq, num_workers=num_workers,
        worker_index=worker_index, shuffle=not config.deterministic, seed=config.seed,
        repeat=True,
        gradient_accumulation_steps=config.gradient_accumulation_steps * local_replicas,
        deterministic=True,  # A fixed order: a checkpoint's position means the same batches.
        next_sentence_labels=uses_nsp(config.objective))
  if not config.window_normalization:  # Each micro-batch normalized by its own counts.
    dataset = dataset.map(lambda f: {k: v for k, v in f.items() if not k.startswith("window_")})
  return distribution.LocalBatches(strategy, dataset)


def _export(run: _Run, config: PretrainingRunConfig, rerun: bool = False) -> dict:
  """Chief: SavedModel (unless `export_saved_model` is off) + Google checkpoint. Other
  workers: their Google checkpoint beside.

  The whole export directory is written to a temporary sibling and renamed into place
  (`tfbert.runtime.atomic`): a failed export leaves the previous one, or none, never a part.
  So a rerun of a finished run (`rerun`) whose export holds every part is not exported
  again (the same weights; it said "nothing more to train" and rewrote it, unannounced);
  one cut short before or during its export writes it.

  Returns:
    name -> final path of what was written (or of what is there, on such a rerun).
  """
  export_dir = _export_directory(run, config)
  written = {"google_checkpoint": os.path.join(export_dir, "google", "bert_model.ckpt")}
  saved_model = run.is_chief and config.export_saved_model
  if saved_model:
    written = {"saved_model": os.path.join(export_dir, "saved_model"), **written}
  if rerun and files.exists(written["google_checkpoint"] + ".index") and (
      not saved_model or files.exists(os.path.join(written["saved_model"], "saved_model.pb"))):
    logging.info("the export of the finished run is in place, not written again: %s",
                 export_dir)
    return written

  def write(staging: str) -> None:
    files.makedirs(staging)
    vocab = run.data["vocab_file"]
    vocab = vocab if vocab and files.isfile(vocab) else None
    if saved_model:
      _export_saved_model(run, config, os.path.join(staging, "saved_model"), vocab)
    google_checkpoint.export_google_checkpoint(
        run.model, os.path.join(staging, "google", "bert_model.ckpt"), vocab_file=vocab)

  files.makedirs(os.path.dirname(export_dir))
  atomic.write_with(export_dir, write, tag="export", kind=EXPORT_KIND)
  return written


def _export_saved_model(run: _Run, config: PretrainingRunConfig, path: str,
                        vocab: Optional[str]) -> None:
  """The SavedModel: the encoder's id signatures and, when the data's vocabulary and casing
  are known, `fill_mask` (`tfbert.pretraining.pretraining_export`) at `max_seq_length`."""
  if vocab and run.data["do_lower_case"] is not None:
    pretraining_export.export_pretrainer_saved_model(
        run.model, path, vocab, run.data["do_lower_case"], config.max_seq_length,
        export_dtype=config.export_dtype)
    return
  logging.info("note: no vocabulary and casing recorded beside the data: the SavedModel "
               "serves the encoder's ids alone, without fill_mask")
  export.export_encoder_saved_model(run.model, path, export_dtype=config.export_dtype)


def _written(run: _Run, config: PretrainingRunConfig) -> dict:
  """name -> path of the run directory's files (the chief's; another worker's checkpoints)."""
  written = {"checkpoint": files.absolute(run.loop.manager.latest_checkpoint or "")}
  if run.is_chief:
    written.update(metrics=files.absolute(os.path.join(config.model_dir, "metrics.jsonl")),
                   tensorboard=files.absolute(os.path.join(config.model_dir, "train")))
    if config.evaluates:
      written["tensorboard_eval"] = files.absolute(os.path.join(config.model_dir, "eval"))
      if files.isdir(os.path.join(config.model_dir, BEST_DIR)):
        written["best"] = files.absolute(os.path.join(config.model_dir, BEST_DIR))
  return written


def _summary(step: int, last: dict, config: PretrainingRunConfig, written: dict,
             finished: bool) -> str:
  """What the run did and where its files are: the lines a tool prints last."""
  if step < config.num_train_steps and finished:
    head = f"stopped early at applied step {step} of {config.num_train_steps} " \
           "(early_stopping_patience)"
    if "best" in written:  # Absent when no evaluation scored a number.
      head += f"; best model in {written['best']}"
  elif step < config.num_train_steps:
    head = f"stopped at applied step {step} of {config.num_train_steps}; rerun without " \
           "stop_at_step to resume"
  else:
    head = f"trained {step} applied steps; last logged loss {last.get('loss', float('nan')):.4f}"
    if "eval" in last:
      head += "; eval " + ", ".join(f"{k} {v:.4f}" for k, v in last["eval"].items())
  return "\n".join([head] + [f"  {name}: {path}" for name, path in written.items()])
