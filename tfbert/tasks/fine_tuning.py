"""What every fine-tuning task shares: configuration, initialization, training.

`FineTuningConfig` holds the fields (and checks) every fine-tuning run has; `start_run`
sets up devices, seed, precision policy and strategy; `initial_weights` and
`assign_initial_weights` read and load a Google checkpoint, a Hugging Face directory or a
tfbert `.keras` file.

`train` is how the tools train: the model's own `train_step` in
`tfbert.training.training_loop` (one device, mirrored or multi-worker; checkpoints under
`<output_dir>/checkpoints/`, exact resume, evaluation during training, the best model kept,
early stopping, preemption). `predict` scores examples sharded over every replica of every
worker, each example exactly once. `compile_and_fit` trains the same model with Keras
`fit` instead (one device or mirrored; what users of `compile` + `fit` get, and the
benchmark's peer).

Both read `shuffled_batches`, whose order is a pure function of the seed and the epoch,
so k micro-batches of b examples see exactly the examples of one batch of k*b
(accumulation is an exact replacement for the big batch: tests/tasks/fine_tuning_test.py
and each task's k=1 against k=4 test), R replicas
see together the examples one replica would, and a resumed run continues the stream.
"""

import dataclasses
import json
import math
import os
import re
import time
import weakref
from typing import Any, Callable, ClassVar, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import trackable_object_graph_pb2

from tfbert.checkpoints import convert, google_checkpoint, google_names, huggingface, pretrained
from tfbert.config import SHAPE_FIELDS, BertConfig
from tfbert.runtime import atomic, cli, files, paths, run_directory, validation
from tfbert.serving import serving_dtype
from tfbert.tasks import length_buckets, precision, source_heads
from tfbert.text import casing, tokenization
from tfbert.training import data_options, distribution, optimization, training_loop
from tfbert.training.distribution import DTYPES

# Upper bounds of the settings that size a buffer or a window (`FineTuningConfig.checks`):
# a batch is indexed in int32 by TensorFlow's ops; a `group_by_length` window's row indices
# are held and sorted in memory (2**24 rows: 128 MiB of indices, ~1000 steps of 16k rows).
MAX_BATCH_ROWS = 2**31 - 1
MAX_WINDOW_ROWS = 2**24


@dataclasses.dataclass(frozen=True, kw_only=True)
class FineTuningConfig:
  """The fields every fine-tuning run shares (flags/fine_tuning_flags.py documents each).

  `RERUN_MAY_CHANGE` names the fields a rerun into the same output directory may change:
  what to do with the trained model this time and how to report it, where the directory is
  (moved or copied) and where training stops (`max_train_steps`, like `stop_at_step`: the
  learning-rate schedule spans `num_train_epochs` either way), not what is trained. A task's
  config adds its own fields to it.
  """
  RERUN_MAY_CHANGE: ClassVar[frozenset] = frozenset({
      "export_dir", "export_dtype", "verbose", "log_steps", "output_dir", "allow_config_change",
      "save_checkpoints_steps", "keep_checkpoint_max", "eval_every_steps", "best_metric",
      "early_stopping_patience", "stop_at_step", "allow_casing_mismatch", "max_train_steps"})
  # The fields naming what a run reads and what it writes (`tfbert.runtime.paths`: outputs
  # never destroy inputs); a task's config adds its own.
  INPUT_PATHS: ClassVar[tuple[str, ...]] = (
      "vocab_file", "bert_config_file", "init_checkpoint", "init_hf_dir", "init_tfbert")
  OUTPUT_PATHS: ClassVar[tuple[str, ...]] = ("output_dir", "export_dir")
  # An evaluation of a run's own model (`run_settings`): the fields it takes from the run's
  # run_config.json when not given, refused when given otherwise (they change the scores);
  # of them those that define what the model means (task, pooling, labels).
  RUN_SETTINGS: ClassVar[frozenset] = frozenset({"do_lower_case", "dtype"})
  RUN_DEFINES: ClassVar[frozenset] = frozenset()
  # A setting whose None stands for a value derived from others (`describe_setting`):
  # name -> (the rule as its flag's help says it, the value it gives for a config).
  DERIVED_DEFAULTS: ClassVar[dict[str, tuple[str, Callable[[Any], Any]]]] = {}
  # The settings (files mostly) read only by a step a `do_` switch turns on: switch -> them.
  # One given without its switch is refused (`checks`); it was ignored without a word (a
  # dev file named, no evaluation, no eval_results.json). A task's config sets its own.
  READ_ONLY_WITH: ClassVar[dict[str, tuple[str, ...]]] = {}
  output_dir: str
  do_train: bool = False
  vocab_file: Optional[str] = None
  do_lower_case: Optional[bool] = None  # None: the checkpoint's (`resolve_casing`).
  allow_casing_mismatch: bool = False
  bert_config_file: Optional[str] = None
  init_checkpoint: Optional[str] = None
  init_hf_dir: Optional[str] = None
  init_tfbert: Optional[str] = None
  reinit_head: bool = False
  train_batch_size: int = 32
  learning_rate: float = 5e-5
  num_train_epochs: float = 3.0
  max_train_steps: Optional[int] = None
  warmup_proportion: float = 0.1
  weight_decay_rate: float = 0.01
  clip_norm: Optional[float] = 1.0
  gradient_accumulation_steps: int = 1
  dtype: str = "float32"
  distribution_strategy: str = "one_device"
  num_cpu_devices: int = 1
  jit_compile: bool = False
  length_bucket: int = 8
  group_by_length: int = 0
  seed: int = 12345
  log_steps: int = 10
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  eval_every_steps: int = 0
  best_metric: str = ""
  early_stopping_patience: int = 0
  stop_at_step: Optional[int] = None
  verbose: int = 1
  export_dir: Optional[str] = None
  export_dtype: str = "model"
  allow_config_change: bool = False
  # The settings given (a tool's flags given on its command line or in a flag file), by
  # name; None: not known, a setting at its default counts as not given. Not a setting of
  # the run: never recorded (`to_json`).
  given_settings: Optional[frozenset] = dataclasses.field(default=None, compare=False)

  def __post_init__(self):
    validation.validate(self)

  def describe_setting(self, name: str, value: Any) -> str:
    """`value` of this config's setting `name` for a message, as a flag would spell it; a
    None that stands for a default derived from other settings (`DERIVED_DEFAULTS`) as the
    value this config uses and its rule, e.g. `16 (the default, max_seq_length // 2)`."""
    if value is None and name in self.DERIVED_DEFAULTS:
      rule, derive = self.DERIVED_DEFAULTS[name]
      return f"{_flag_value(derive(self))} (the default, {rule})"
    if value is None:
      return "unset (the default)"
    return _flag_value(value)

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    """What every fine-tuning run needs (`tfbert.runtime.validation`); tasks add theirs.

    `num_replicas` is 1 at construction; `start_run` checks again with its strategy's.
    """
    return [
        (bool(self.output_dir), "output_dir is empty: name the run's directory"),
        (self.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {self.dtype!r}"),
        serving_dtype.export_dtype_check(self.export_dtype),
        (0.0 <= self.warmup_proportion <= 1.0, "warmup_proportion must be in [0, 1]"),
        (0 < self.num_train_epochs < math.inf,
         f"num_train_epochs ({self.num_train_epochs}) must be a finite number > 0"),
        (self.max_train_steps is None or self.max_train_steps >= 1,
         f"max_train_steps ({self.max_train_steps}) must be >= 1"),
        (self.learning_rate >= 0, f"learning_rate ({self.learning_rate}) must be >= 0"),
        (self.weight_decay_rate >= 0,
         f"weight_decay_rate ({self.weight_decay_rate}) must be >= 0 (0: no weight decay)"),
        optimization.clip_norm_check(self.clip_norm),
        (self.num_cpu_devices >= 1, f"num_cpu_devices ({self.num_cpu_devices}) must be >= 1"),
        (self.length_bucket >= 0,
         f"length_bucket ({self.length_bucket}) must be >= 0 (0: every batch padded to "
         "max_seq_length)"),
        (self.group_by_length >= 0,
         f"group_by_length ({self.group_by_length}) must be >= 0 (0: no grouping)"),
        # Upper bounds of the settings that size a buffer or a window: TensorFlow indexes
        # them in int32 (a window of 4e9 rows failed deep in tf.argsort with a negative size).
        (self.train_batch_size <= MAX_BATCH_ROWS,
         f"train_batch_size ({self.train_batch_size}) must be <= {MAX_BATCH_ROWS}"),
        (self.group_by_length * max(self.train_batch_size, 1) <= MAX_WINDOW_ROWS,
         f"group_by_length ({self.group_by_length}) x train_batch_size "
         f"({self.train_batch_size}) is a grouping window of "
         f"{self.group_by_length * self.train_batch_size} rows, more than {MAX_WINDOW_ROWS}: "
         f"group_by_length must be <= {MAX_WINDOW_ROWS // max(self.train_batch_size, 1)} at "
         "this batch size"),
        validation.seed_check("seed", self.seed),
        (self.verbose >= 0, f"verbose ({self.verbose}) must be >= 0 (0: silent)"),
        (sum(map(bool, (self.init_checkpoint, self.init_hf_dir, self.init_tfbert))) <= 1,
         "give at most one of init_checkpoint, init_hf_dir, init_tfbert"),
        validation.batch_splits(self.train_batch_size, self.gradient_accumulation_steps,
                                num_replicas),
        (not self.best_metric or self.eval_every_steps,
         f"best_metric ({self.best_metric!r}) picks the best of the evaluations during "
         "training: it needs eval_every_steps > 0"),
        # A fresh head of random weights, evaluated or predicting as a trained one (sweep
        # 31, A6, A83: eval_results.json of an untrained head, exit 0).
        (self.do_train or not self.reinit_head,
         "reinit_head starts a fresh task head of random weights, and this run does not "
         "train it (no do_train): its evaluation and predictions would be random; add "
         "do_train, or leave reinit_head out"),
        (not self.early_stopping_patience or self.eval_every_steps,
         f"early_stopping_patience ({self.early_stopping_patience}) > 0 counts evaluations "
         "during training: it needs eval_every_steps > 0"),
    ] + self.unread_setting_checks() + training_loop.schedule_checks(self) + [
        # A named pipe, socket or device as a data file, vocabulary or config: read once, it
        # was then read again (hashed for the records, tokenized) and hung or read nothing.
        (False, problem) for problem in paths.special_input_problems(
            paths.fields(self, self.INPUT_PATHS))] + [
        (False, problem) for problem in paths.overlap_problems(
            paths.fields(self, self.INPUT_PATHS), paths.fields(self, self.OUTPUT_PATHS),
            container="--output_dir",
            # Evaluating the run's own model writes no model.keras; training does.
            read_from_container=() if self.do_train else ("--init_tfbert",))]

  def unread_setting_checks(self) -> list[validation.Check]:
    """One failing check per `do_` switch that is off while a setting only it reads is
    given (`READ_ONLY_WITH`), naming them and what to add or drop."""
    checks = []
    for switch, names in self.READ_ONLY_WITH.items():
      given = [name for name in names if getattr(self, name)]
      if given and not getattr(self, switch):
        settings = ", ".join(f"{name} {_flag_value(getattr(self, name))}" for name in given)
        checks.append((False, f"{settings} {'is' if len(given) == 1 else 'are'} read only "
                              f"with {switch}: add {switch}, or drop {', '.join(given)} "
                              f"(a flags.txt replayed: {' '.join(f'--{n}=' for n in given)} "
                              "clears it)"))
    return checks

  @classmethod
  def without_unread_settings(cls, values: dict[str, Any]) -> dict[str, Any]:
    """`values` (a recorded run_config.json's) without the settings their `do_` switch,
    off, never read (`READ_ONLY_WITH`): a run recorded before they were refused may name
    them, and its record still reads (`from_json`)."""
    values = dict(values)
    for switch, names in cls.READ_ONLY_WITH.items():
      if not values.get(switch):
        for name in names:
          values.pop(name, None)
    return values

  def to_json(self) -> str:
    values = dataclasses.asdict(self)
    del values["given_settings"]  # How this invocation was spelled, not the run's.
    return json.dumps(values, indent=2, sort_keys=True)

  def given(self, name: str, value: Any, default: Any) -> bool:
    """Whether the setting `name` (its `value`, its field's `default`) was given:
    `given_settings` names it, or without that record, it is not at its default."""
    if self.given_settings is not None:
      return name in self.given_settings
    return value != default

  def optimizer_config(self, num_train_steps: int) -> optimization.OptimizerConfig:
    """AdamW, linear warmup then linear decay to 0, clipping, mean accumulation."""
    return optimization.OptimizerConfig(
        optimizer="adamw", learning_rate=self.learning_rate,
        num_warmup_steps=int(num_train_steps * self.warmup_proportion),
        num_train_steps=num_train_steps,
        lr_schedule="decay_after_warmup", weight_decay_rate=self.weight_decay_rate,
        clip_norm=self.clip_norm, gradient_accumulation_steps=self.gradient_accumulation_steps,
        accumulation_reduction="mean", loss_scale=self.dtype == "mixed_float16")


def start_run(config: FineTuningConfig) -> tf.distribute.Strategy:
  """Sets devices, seed and precision policy; checks `config` against the replicas; returns
  the strategy.

  Nothing is written: the output directory is claimed later (`claim_run_directory`), once
  the model and its inputs have been checked.
  """
  distribution.configure_cpu_devices(config.num_cpu_devices)
  keras.utils.set_random_seed(config.seed)
  keras.mixed_precision.set_global_policy(config.dtype)
  strategy = distribution.create_strategy(config.distribution_strategy, config.num_cpu_devices)
  # After the strategy (a multi-worker one must come before any op runs), before any work.
  precision.check_policy(config.dtype)
  validation.validate(config, num_replicas=strategy.num_replicas_in_sync)
  return strategy


# How a fine-tuning tool's flag values become `FineTuningConfig` values where they differ
# (`cli.config_from_values`): `--init_hf_dir=minilm` names the shipped MiniLM, and
# `--clip_norm=0` turns clipping off.
FLAG_CONVERTERS = {"init_hf_dir": pretrained.hf_dir, "clip_norm": cli.zero_is_none}

VOCAB_FILE = "vocab.txt"


DATA_FILE = "data.json"  # The identity of a training run's data, in its output directory.


def claim_run_directory(model: keras.Model, config: FineTuningConfig, vocab_file: str,
                        flagfile: Optional[str] = None,
                        strategy: Optional[tf.distribute.Strategy] = None, *,
                        train_files: Sequence[str] = ()) -> run_directory.RunLock:
  """Locks `output_dir` for this run and records the run there (`tfbert.runtime.run_directory`).

  A multi-worker run's other workers (`strategy`'s) claim their own directory,
  `<output_dir>/.worker<i>`, and record nothing: they keep checkpoints and caches there.

  A training run records `bert_config.json`, `run_config.json` and the vocabulary
  (`vocab.txt`; the casing is `run_config.json`'s `do_lower_case`), so that the directory's
  `model.keras` can be reused with `--init_tfbert` alone. A rerun must match the recorded
  model and schedule (the config's `RERUN_MAY_CHANGE` aside) unless `allow_config_change`;
  its paths (`INPUT_PATHS`, `OUTPUT_PATHS`) are recorded absolute and compared as real paths.
  A run that does not train (evaluate or predict with a trained model) must match the
  recorded model only, and keeps the training run's records. A training run also records the tool's
  resolved flags (`flagfile`) as `flags.txt`, which `--flagfile=` replays, and the identity
  of its `train_files` (name, size, sha256) as `data.json`: a rerun on files of other
  content is refused, naming each file and what changed (`run_directory.data_changes`).

  Returns:
    The held lock; release it when the run ends.

  Raises:
    tfbert.runtime.run_directory.RunDirectoryError: another run holds the directory, or it
      records another model or schedule (every difference listed), or `export_dir` lies in
      another run's directory (a replayed flags.txt's).
  """
  directory = work_directory(config, strategy)
  if directory != config.output_dir:
    return run_directory.claim(directory, [], allow_changes=config.allow_config_change)
  path_keys = frozenset(type(config).INPUT_PATHS + type(config).OUTPUT_PATHS)
  values = json.loads(config.to_json())
  for name in path_keys:  # Absolute: the same files, whatever the working directory.
    if name in values:
      values[name] = pretrained.recorded_path(values[name])
  records = [run_directory.RunRecord("bert_config.json", model.config.to_dict(),
                                     fixed_by_checkpoint=SHAPE_FIELDS)]
  if config.do_train or not files.exists(os.path.join(config.output_dir, "run_config.json")):
    records.append(run_directory.RunRecord("run_config.json", values,
                                           type(config).RERUN_MAY_CHANGE,
                                           path_keys=path_keys,
                                           key_names=record_key_names(config)))
  if config.do_train:  # run_config.json stays the config's own (`from_json` reads it).
    records.append(run_directory.RunRecord(
        DATA_FILE, {"train": run_directory.data_identity(train_files)},
        data_keys=frozenset({"train"})))
  lock = run_directory.claim(config.output_dir, records,
                             allow_changes=config.allow_config_change,
                             outputs={"export_dir": config.export_dir})
  try:
    run_directory.write_records(config.output_dir, records,
                                flagfile if len(records) > 1 else None)
    target = os.path.join(config.output_dir, VOCAB_FILE)
    if files.absolute(vocab_file) != files.absolute(target):
      lock.recorded.append(VOCAB_FILE)
      atomic.write_with(target, lambda path: files.copy(vocab_file, path))
  except BaseException:
    lock.release()
    raise
  return lock


def record_key_names(config: FineTuningConfig) -> dict[str, str]:
  """The flags of `config`'s dataclass-valued settings' fields that name them (their class's
  `FLAGS`), by their dotted key in run_config.json: "custom.has_header" reads
  "--custom_header" in a refusal (`run_directory.differences`)."""
  names = {}
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if dataclasses.is_dataclass(value):
      names.update({f"{field.name}.{part}": flag
                    for part, flag in getattr(value, "FLAGS", {}).items()})
  return names


def work_directory(config: FineTuningConfig,
                   strategy: Optional[tf.distribute.Strategy] = None) -> str:
  """Where this process writes: `output_dir`, or `<output_dir>/.worker<i>` for a worker
  other than the chief."""
  if strategy is None:
    return config.output_dir
  _, index, is_chief = distribution.worker_info(strategy)
  return training_loop.own_directory(config.output_dir, is_chief, index)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """Whether this process writes the run's outputs (worker 0, or the only process)."""
  return distribution.worker_info(strategy)[2]


def written_paths(output_dir: str, written: Sequence[str]) -> list[str]:
  """Paths of a run's outputs, each absolute (`files.absolute`, as the writers resolve
  them): a bare name (no directory part) is a file in `output_dir`; anything else is a path
  kept as it is. An output outside `output_dir` (`export_dir`, `sentence_transformers_dir`)
  must therefore be appended absolute: a relative `--export_dir=x` is `./x`, not
  `output_dir/x`."""
  return [files.absolute(p if os.path.isabs(p) or files.is_url(p) or os.path.dirname(p)
                         else os.path.join(output_dir, p))
          for p in written]


MODEL_FILE = "model.keras"  # A finished training run's model, in its output directory.
_CHECKPOINT_INDEX = re.compile(r"ckpt-([0-9]+)\.index")


@dataclasses.dataclass(frozen=True)
class RunModel:
  """The model a training run left in its output directory (`trained_model`).

  Attributes:
    checkpoint: the prefix of its latest training checkpoint (`checkpoints/ckpt-<step>`),
      or None.
    step: that checkpoint's applied step (None without one).
    model_file: its `model.keras` (written when training finished), or None.
  """
  checkpoint: Optional[str] = None
  step: Optional[int] = None
  model_file: Optional[str] = None

  def describe(self) -> str:
    """The model evaluated: "<checkpoint prefix>, applied step <n>", or the model file."""
    if self.checkpoint:
      return f"{self.checkpoint}, applied step {self.step}"
    return str(self.model_file)


def trained_model(output_dir: str) -> Optional[RunModel]:
  """The model a training run left in `output_dir`: its latest checkpoint (the highest
  step of `checkpoints/ckpt-<step>.index`) and its `model.keras`; None when it holds
  neither."""
  folder = os.path.join(output_dir, run_directory.CHECKPOINTS_DIR)
  steps = [int(m.group(1)) for m in map(_CHECKPOINT_INDEX.fullmatch, files.listdir(folder))
           if m] if files.isdir(folder) else []
  model_file = os.path.join(output_dir, MODEL_FILE)
  model_file = model_file if files.isfile(model_file) else None
  if not steps and model_file is None:
    return None
  step = max(steps) if steps else None
  return RunModel(checkpoint=os.path.join(folder, f"ckpt-{step}") if steps else None,
                  step=step, model_file=model_file)


RUN_CONFIG_FILE = "run_config.json"  # A run's settings, in its output directory.
# The kinds of run a run_config.json records, each told by a field only its config has:
# (field, tool, what it trains).
RUN_KINDS = (("model_dir", "run_pretraining", "pretraining"),
             ("task_name", "run_classifier", "sequence classification"),
             ("tag_scheme", "run_ner", "token classification"),
             ("features", "run_squad", "question answering"),
             ("pooling_mode", "run_embeddings", "sentence embeddings"))


def run_kind(fields) -> Optional[tuple[str, str]]:
  """(tool, what it trains) of a run whose config has `fields` (`RUN_KINDS`), or None."""
  return next(((tool, what) for field, tool, what in RUN_KINDS if field in fields), None)


def recorded_settings(output_dir: str) -> Optional[dict[str, Any]]:
  """The settings `output_dir`'s run recorded (its run_config.json), or None without one.

  Raises:
    ValueError: the file is not a JSON object; naming it and what to do.
  """
  path = os.path.join(output_dir, RUN_CONFIG_FILE)
  if not files.isfile(path):
    return None
  try:
    values = json.loads(files.read_text(path))
  except (OSError, ValueError) as error:
    values = error
  if not isinstance(values, dict):
    raise ValueError(f"{path} cannot be read as the run's settings ({values}): restore it, "
                     "or pass another --output_dir")
  return values


def _other_kind_advice(output_dir: str, mine: tuple[str, str], theirs: tuple[str, str]
                       ) -> str:
  """How to go on from another kind of run's directory (`check_run_kind`)."""
  model_file = os.path.join(output_dir, MODEL_FILE)
  if files.isfile(model_file):
    head = mine[0] != "run_embeddings" and theirs[0] != "run_embeddings"
    return (f", or --init_tfbert={model_file} --do_train to start a {mine[1]} model from "
            f"its encoder" + (" with --reinit_head" if head else ""))
  if theirs[0] == "run_pretraining":
    return (": to fine-tune its encoder, export it (run_pretraining --export_dir) and pass "
            "--init_checkpoint=<export_dir>/google/bert_model.ckpt --do_train")
  return ""


def check_run_kind(config: FineTuningConfig, recorded: Optional[dict[str, Any]]) -> None:
  """Refuses an output directory holding another kind of run (`RUN_KINDS`: its
  run_config.json's fields say which) to a run that does not train: it would take that
  run's model as this task's and write its results into that run.

  Raises:
    ValueError: naming the directory, both kinds and what to pass.
  """
  if recorded is None:
    return
  theirs = run_kind(recorded)
  mine = run_kind({f.name for f in dataclasses.fields(config)})
  if theirs is None or mine is None or theirs == mine:
    return
  raise ValueError(
      f"{config.output_dir} holds a {theirs[0]} run ({theirs[1]}), not {mine[0]}'s: pass "
      f"another --output_dir{_other_kind_advice(config.output_dir, mine, theirs)}")


def _default(field: dataclasses.Field) -> Any:
  """A dataclass field's default value (`dataclasses.MISSING` for a required field)."""
  if field.default_factory is not dataclasses.MISSING:
    return field.default_factory()
  return field.default


def _another_run(output_dir: str) -> str:
  """The way to evaluate a trained run's model with other recorded settings: a new run from
  it (another output directory alone holds no model: sweep 18, s08)."""
  return (f"or pass another --output_dir with --init_tfbert="
          f"{os.path.join(output_dir, MODEL_FILE)} to evaluate its model with the settings "
          "given here")


def _unfit_settings(config: FineTuningConfig, recorded: dict[str, Any],
                    values: dict[str, Any], build: Callable[[dict[str, Any]], Any],
                    error: Exception) -> str:
  """Why `config`'s settings with the run's recorded `RUN_SETTINGS` (`values`) make no
  valid config (`run_settings`): the setting given here that conflicts with them (the one
  whose default would fit), with its recorded and given values."""
  path = os.path.join(config.output_dir, RUN_CONFIG_FILE)
  mine = json.loads(config.to_json())
  defaults = {field.name: _default(field) for field in dataclasses.fields(config)}
  refused = [f"{name}: {recorded[name]!r} -> {mine[name]!r}"
             for name in sorted(type(config).RUN_SETTINGS)
             if name in recorded and name in mine and recorded[name] != mine[name]
             and config.given(name, getattr(config, name), defaults[name])]
  if refused:
    return (f"{path} records the trained run this run evaluates without training, with "
            f"other settings ({'; '.join(refused)}): leave the flag out to evaluate the run "
            f"as it was recorded, {_another_run(config.output_dir)}")
  for field in dataclasses.fields(config):
    name, default = field.name, _default(field)
    if (name in type(config).RUN_SETTINGS or name not in values
        or default is dataclasses.MISSING or getattr(config, name) == default
        or not config.given(name, getattr(config, name), default)):
      continue
    try:
      build(values | {name: default})
    except (TypeError, ValueError):
      continue
    return (f"{path} records the trained run this run evaluates without training, and "
            f"{name}={getattr(config, name)!r} given here (the run recorded "
            f"{recorded.get(name, default)!r}) does not fit its settings ({error}): leave "
            f"{name} out to evaluate the run as it was recorded, "
            f"{_another_run(config.output_dir)}")
  recorded_here = "; ".join(
      f"{name}: {recorded[name]!r} recorded -> {mine[name]!r} here"
      for name in sorted(type(config).RUN_SETTINGS)
      if name in recorded and name in mine and recorded[name] != mine[name])
  return (f"{path}: the run's recorded settings ({recorded_here or 'as recorded'}) do not "
          f"fit the settings given here ({error}): leave out the flags that differ from "
          f"the record, {_another_run(config.output_dir)}")


def run_settings(config: FineTuningConfig, recorded: Optional[dict[str, Any]]
                 ) -> FineTuningConfig:
  """`config` with the settings of the run whose own model it evaluates (`recorded`, its
  run_config.json): those that define the model and its task or change its scores
  (`RUN_SETTINGS`: task, pooling, labels, casing, sequence length, windows, ...; a
  dataclass-valued one, e.g. SQuAD's `features`, field by field).

  A setting not given (`FineTuningConfig.given`) is taken from the record, and logged; one
  given otherwise than the record is refused before any work: the results would be written
  over the run's while its run_config.json keeps the recorded value. Evaluation-only
  settings (batch sizes, files, ...) are this run's.

  Raises:
    ValueError: a `RUN_SETTINGS` setting given otherwise; naming it and both values.
  """
  if recorded is None:
    return config
  values = json.loads(config.to_json()) | {
      name: value for name, value in recorded.items() if name in type(config).RUN_SETTINGS}
  from_json = getattr(type(config), "from_json", None)

  def build(settings: dict[str, Any]) -> FineTuningConfig:
    """This run's config with the run's settings: read as the config reads its fields."""
    return from_json(json.dumps(settings)) if from_json else type(config)(**settings)

  try:
    theirs = build(values)
  except (TypeError, ValueError) as error:
    raise ValueError(_unfit_settings(config, recorded, values, build, error)) from None
  adopted, refused = {}, []
  for field in dataclasses.fields(config):
    name = field.name
    if name not in type(config).RUN_SETTINGS or name not in recorded:
      continue
    mine, record = getattr(config, name), getattr(theirs, name)
    if mine == record:
      continue
    if dataclasses.is_dataclass(mine) and dataclasses.is_dataclass(record):
      # Field by field (each its own flag): those not given are the run's.
      # A part that only describes the file read (`reads_file_otherwise`: a column, a
      # header) is this run's when one such part's flag was given (the flags describe the
      # file as a whole, their defaults included), else the run's: the same model scores a
      # file laid out otherwise. Parts are named as their flags spell them
      # (`describe_part`) where the class says.
      parts, read_otherwise = {}, []
      reads_otherwise = getattr(mine, "reads_file_otherwise", None)
      describe = getattr(mine, "describe_part", None)
      flags = getattr(mine, "FLAGS", {})
      layout_given = config.given_settings is None or any(
          flags.get(part, "").lstrip("-") in config.given_settings
          for part in getattr(mine, "FILE_LAYOUT", ()))
      for part in dataclasses.fields(mine):
        given, kept = getattr(mine, part.name), getattr(record, part.name)
        if given == kept:
          continue
        whole = config.given_settings is not None and name in config.given_settings
        layout = reads_otherwise is not None and reads_otherwise(part.name, kept)
        if layout and not layout_given:
          parts[part.name] = kept
        elif whole or config.given(part.name, given, _default(part)):
          if layout:
            read_otherwise.append(f"{describe(part.name, given)} (the run recorded "
                                  f"{describe(part.name, kept)})" if describe else
                                  f"{part.name}={given!r} (the run recorded {kept!r})")
          elif describe is not None:
            refused.append(f"{describe(part.name, kept)} -> {describe(part.name, given)}")
          else:
            refused.append(f"{part.name}: {theirs.describe_setting(part.name, kept)} -> "
                           f"{config.describe_setting(part.name, given)}")
        else:
          parts[part.name] = kept
      if read_otherwise:
        logging.info("evaluating the run's model on files read with %s: these describe the "
                     "files, not the model", "; ".join(dict.fromkeys(read_otherwise)))
      if parts:
        adopted[name] = dataclasses.replace(mine, **parts)
      continue
    if config.given(name, mine, _default(field)):
      refused.append(f"{name}: {theirs.describe_setting(name, record)} -> "
                     f"{config.describe_setting(name, mine)}")
    else:
      adopted[name] = record
  if refused:
    raise ValueError(
        f"{os.path.join(config.output_dir, RUN_CONFIG_FILE)} records the trained run this "
        f"run evaluates without training, with other settings ({'; '.join(refused)}): its "
        "results would be written over the run's, scored otherwise than the run recorded. "
        f"Leave the flag out to evaluate the run as it was recorded, "
        f"{_another_run(config.output_dir)}")
  for name, value in adopted.items():
    logging.info("evaluating the run's model with its setting %s=%s (%s), not given here",
                 name, theirs.describe_setting(name, value), RUN_CONFIG_FILE)
  return dataclasses.replace(config, **adopted) if adopted else config


def _flag_value(value: Any) -> str:
  """A setting as a flag would spell it."""
  if dataclasses.is_dataclass(value):
    return json.dumps(dataclasses.asdict(value))
  return str(value).lower() if isinstance(value, bool) else str(value)


def _real_path(path: str) -> str:
  """A local path with its links resolved (`os.path.realpath`); a URL as given."""
  return path if files.is_url(path) else os.path.realpath(path)


def _source_flag(config: FineTuningConfig) -> str:
  """The `--init_*` flag that names the initial source."""
  return next(f"--{name}" for name in ("init_checkpoint", "init_hf_dir", "init_tfbert")
              if getattr(config, name))


def evaluated_model(config: FineTuningConfig
                    ) -> tuple[FineTuningConfig, Optional[RunModel]]:
  """What a run that does not train evaluates and predicts with, decided before any work.

  google-research/bert's convention: evaluation and prediction without training read the
  latest checkpoint of the output directory. So a run without `do_train`, in a directory
  holding a trained run (`trained_model`), evaluates that run's model: its latest
  checkpoint, exactly the trained weights (`restore_run_checkpoint`), or without
  checkpoints its `model.keras`. Its `model.keras`, when there, becomes `init_tfbert` (the
  run's model config, labels and vocabulary come with it, as with
  `--init_tfbert=<run>/model.keras`), and the settings the run recorded that define its
  model and task (`run_settings`); a directory of another kind of run is refused
  (`check_run_kind`). An `--init_*` source inside the directory (its
  `model.keras`, `best/model.keras`; links resolved) is the run's own, and is evaluated as
  given; one outside it is refused: the evaluation would score another model and write its results
  over the run's. Without a trained run an `--init_*` source is needed: random weights are
  never evaluated.

  Returns:
    (the config to run, the run's model to restore or None).

  Raises:
    ValueError: nothing to evaluate (no trained run, no source), or an outside source in a
      directory holding a trained run; naming the directory and what to pass.
  """
  if config.do_train:
    return config, None
  own = trained_model(config.output_dir) if files.isdir(config.output_dir) else None
  recorded = recorded_settings(config.output_dir) if files.isdir(config.output_dir) else None
  check_run_kind(config, recorded)
  source = init_source(config)
  if own is None:
    if source is None:
      raise ValueError(
          f"nothing to evaluate: {config.output_dir} holds no trained model (no "
          f"{run_directory.CHECKPOINTS_DIR}/, no {MODEL_FILE}); pass --init_tfbert/"
          "--init_hf_dir/--init_checkpoint, or --do_train")
    return config, None
  if source is not None:
    if not files.inside(_real_path(source), _real_path(config.output_dir)):
      flag = _source_flag(config)
      raise ValueError(
          f"{flag} {source}: {config.output_dir} holds a trained run (its model: "
          f"{own.describe()}), and this run evaluates without training: which model, and "
          f"whose results would be written over the run's? To evaluate the run's model, "
          f"drop {flag}; to evaluate {source}, pass another --output_dir")
    logging.info("evaluating %s %s (given, in the run's directory), not the run's latest "
                 "model (%s)", _source_flag(config), source, own.describe())
    return run_settings(config, recorded), None
  config = run_settings(config, recorded)
  if not own.checkpoint:  # `restore_run_checkpoint` names a checkpoint and its step.
    logging.info("evaluating the run's model: %s", own.model_file)
  if own.model_file:
    config = dataclasses.replace(config, init_tfbert=own.model_file)
  return config, own


def restore_run_checkpoint(model: keras.Model, own: RunModel,
                           source: source_heads.Source, bert_config_given: bool = False
                           ) -> None:
  """Loads the run's latest checkpoint (`own.checkpoint`) into `model`: exactly the
  trained weights.

  The training loop's checkpoint holds the model's trainable variables in the optimizer's
  list (`_trainable_variables`, the order of `model.trainable_variables`; the model's own
  object graph does not reach the variables of its layer lists), which is how its resume
  finds them; they are read from there, in that order, each shape checked. A checkpoint
  that cannot be read names an earlier one or the run's model.keras
  (`_read_run_checkpoint`); with `bert_config_given` a misfit names --bert_config_file.

  Raises:
    ValueError: the model's labels are not the run's model's (`source`, its `model.keras`),
      or the checkpoint cannot be read or does not hold this model's variables; naming the
      checkpoint.
  """
  labels = getattr(model, "labels", None)
  if labels is not None and source.labels is not None and tuple(labels) != source.labels:
    raise ValueError(f"{own.checkpoint}: the run's model has the labels "
                     f"{list(source.labels)}, this run's are {list(labels)} (in this order): "
                     "evaluate with the run's labels")
  hint = ("evaluate with the run's bert_config.json and labels"
          + (" (drop --bert_config_file)" if bert_config_given else "")
          + ", or use another --output_dir")
  keys, shapes, reader = _read_run_checkpoint(own, lambda reader: (
      _trainable_keys(reader), reader.get_variable_to_shape_map(), reader))
  variables = model.trainable_variables
  if len(keys) != len(variables):
    raise ValueError(f"{own.checkpoint} holds {len(keys)} trainable variables, this model "
                     f"{len(variables)}: {hint}")
  misfit = [f"{v.path}: {tuple(shapes[k])} vs {tuple(v.shape)}"
            for v, k in zip(variables, keys) if tuple(shapes[k]) != tuple(v.shape)]
  if misfit:
    raise ValueError(f"{own.checkpoint} does not fit this model ({'; '.join(misfit[:3])}): "
                     f"{hint}")
  values = _read_run_checkpoint(own, lambda _: [reader.get_tensor(key) for key in keys])
  for variable, value in zip(variables, values):
    variable.assign(value)
  logging.info("evaluating the run's model: %s (applied step %s)", own.checkpoint, own.step)


def _read_run_checkpoint(own: RunModel, read: Callable[[Any], Any]) -> Any:
  """`read(reader)` of the run's checkpoint (`own.checkpoint`); any failure reading it (a
  missing, cut or corrupt file) is one message naming the checkpoint and what to do.

  Raises:
    ValueError: naming the checkpoint, an earlier one of the run or its model.keras.
  """
  try:
    return read(tf.compat.v1.train.NewCheckpointReader(own.checkpoint))
  except Exception as error:  # pylint: disable=broad-except  # Whatever the reader raises.
    text = error.message if isinstance(error, tf.errors.OpError) else str(error)
    reason = (text.strip().splitlines() or [type(error).__name__])[0]
    raise ValueError(f"{own.checkpoint} cannot be read as a training checkpoint ({reason}): "
                     f"{_unreadable_checkpoint_advice(own)}") from None


def _unreadable_checkpoint_advice(own: RunModel) -> str:
  """What to do when the run's latest checkpoint cannot be read: evaluate an earlier one,
  or the run's model.keras, or restore the checkpoint."""
  folder = os.path.dirname(own.checkpoint)
  earlier = sorted((int(m.group(1)) for m in map(_CHECKPOINT_INDEX.fullmatch,
                                                  files.listdir(folder))
                    if m and int(m.group(1)) != own.step), reverse=True)
  ways = []
  if earlier:
    ways.append(f"to evaluate the earlier {os.path.join(folder, f'ckpt-{earlier[0]}')}, move "
                f"{own.checkpoint}.* out of {folder}")
  if own.model_file:
    ways.append(f"to evaluate the run's final model, pass --init_tfbert={own.model_file}")
  ways.append("or restore the checkpoint, or pass another --output_dir")
  return "; ".join(ways)


def _trainable_keys(reader) -> list[str]:
  """The checkpoint keys of the training optimizer's `_trainable_variables`, in order (the
  outermost optimizer's: a loss-scaling or accumulating wrapper's list is its inner's)."""
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
  queue = [c.node_id for c in graph.nodes[0].children if c.local_name == "optimizer"]
  seen = set(queue)
  while queue:
    node = graph.nodes[queue.pop(0)]
    for child in node.children:
      if child.local_name == "_trainable_variables":
        items = sorted(graph.nodes[child.node_id].children, key=lambda c: int(c.local_name))
        return [next(a.checkpoint_key for a in graph.nodes[c.node_id].attributes
                     if a.name == "VARIABLE_VALUE") for c in items]
      if child.node_id not in seen:
        seen.add(child.node_id)
        queue.append(child.node_id)
  raise ValueError("no optimizer with trainable variables in it")


def resumed_run(config: FineTuningConfig) -> Optional[RunModel]:
  """The run a training rerun without an `--init_*` source resumes: its output directory's
  latest checkpoint (`trained_model`), whose `bert_config.json` and `vocab.txt` are the
  model's, as for an evaluation without training (`evaluated_model`); None otherwise (a
  pretraining config, which has no `do_train`, resumes on its own)."""
  if (not getattr(config, "do_train", False) or init_source(config)
      or not files.isdir(config.output_dir)):
    return None
  own = trained_model(config.output_dir)
  return own if own is not None and own.checkpoint else None


def resumed_settings(config: FineTuningConfig) -> FineTuningConfig:
  """`config` with the `vocab_file` and `bert_config_file` of the run it resumes
  (`resumed_run`), when not given: the paths its run_config.json records (the rerun is
  compared with them), logged; a setting the run did not record, or whose file is gone,
  stays unset, and the run's own copy (`<output_dir>/vocab.txt`, `bert_config.json`) is
  read (`resolve_vocab_file`, `initial_source`)."""
  if resumed_run(config) is None:
    return config
  recorded = recorded_settings(config.output_dir) or {}
  adopted = {}
  for name in ("vocab_file", "bert_config_file"):
    value = recorded.get(name)
    if not getattr(config, name) and isinstance(value, str) and value and files.exists(value):
      adopted[name] = value
      logging.info("resuming the run with its setting %s=%s (%s), not given here", name,
                   value, RUN_CONFIG_FILE)
  return dataclasses.replace(config, **adopted) if adopted else config


RANDOM_INITIALIZATION = "random initialization"  # The source name of a model without one.


def initial_weights(config: FineTuningConfig
                    ) -> tuple[BertConfig, Optional[dict[str, np.ndarray]], str]:
  """(model config, Google-name weights or None, source name): `initial_source`'s, with the
  source as its name."""
  bert_config, weights, source = initial_source(config)
  return bert_config, weights, source.name


def initial_source(config: FineTuningConfig, own: Optional[RunModel] = None
                   ) -> tuple[BertConfig, Optional[dict[str, np.ndarray]], source_heads.Source]:
  """(model config, Google-name weights or None, `source_heads.Source`) of the chosen
  initialization.

  `bert_config_file`, when given, is the model's config; otherwise it comes from the source
  (`bert_config.json` beside a Google checkpoint, the Hugging Face `config.json`, the
  `.keras` model's config) or, for the run's own checkpoint (`own`, `evaluated_model`),
  the run's `bert_config.json`, as for a training rerun that resumes it (`resumed_run`:
  its checkpoint is restored by the training loop). Without a source the model starts from
  random weights.
  """
  def given_config(default_file=None):
    path = config.bert_config_file or default_file
    if not path:
      raise ValueError("--bert_config_file is needed: no --init_checkpoint/--init_hf_dir/"
                       f"--init_tfbert to take the model config from{_no_run(config)}")
    return BertConfig.from_json_file(path, *(
        ["--bert_config_file"] if path == config.bert_config_file else []))

  if config.init_checkpoint:
    prefix = config.init_checkpoint
    weights = google_checkpoint.read_google_checkpoint(prefix)
    return (given_config(os.path.join(os.path.dirname(prefix), "bert_config.json")), weights,
            source_heads.Source(prefix))
  if config.init_hf_dir:
    hf_config, weights, _ = huggingface.load_hf_checkpoint(config.init_hf_dir)
    bert_config = given_config() if config.bert_config_file else hf_config
    task = huggingface.read_hf_task(config.init_hf_dir)  # Its id2label's names, in id order.
    return bert_config, weights, source_heads.Source(config.init_hf_dir, task.architecture,
                                                     task.labels)
  if config.init_tfbert:
    model = convert.read_tfbert_model(config.init_tfbert)  # Errors name the file.
    bert_config = given_config() if config.bert_config_file else model.config
    return (bert_config, google_checkpoint.google_weights(model),
            source_heads.of_model(config.init_tfbert, model))
  # `restore_run_checkpoint` loads the evaluated run's checkpoint; the training loop a
  # resumed one's: either is the source (`assign_initial_weights` says so, no weights given).
  run = own if own is not None and own.checkpoint else resumed_run(config)
  if run is not None:
    recorded = os.path.join(config.output_dir, "bert_config.json")
    if not config.bert_config_file and not files.exists(recorded):
      raise ValueError(f"{recorded} is missing: the run's checkpoint {run.checkpoint} cannot "
                       "be built without its model config; restore it, or pass the run's "
                       "--bert_config_file")
    return given_config(recorded), None, source_heads.Source(run.checkpoint)
  return given_config(), None, source_heads.Source(RANDOM_INITIALIZATION)


def assign_initial_weights(model: keras.Model, weights: Optional[dict[str, np.ndarray]],
                           source: str, head: str, head_is_trained: bool,
                           reinit_head: bool = False) -> google_checkpoint.LoadReport:
  """Loads `weights` into `model` (fresh `head` allowed); prints what was loaded.

  A source head that does not fit the model's (another number of labels) is refused,
  naming each tensor, unless `reinit_head`: then the source's head tensors are skipped
  (listed in the log) and the head keeps its fresh values, as does the pooler when the
  source has none (a `BertForTokenClassification` directory starting a classifier).

  Args:
    model: A built model.
    weights: Google-name weights from `initial_weights`, or None: random weights, or those
      of the run's checkpoint (`source`, not `RANDOM_INITIALIZATION`) that the training loop
      restores when it resumes the run (`resumed_run`).
    source: Where they come from (for messages).
    head: The attribute name of the task head, which may be missing from the source ("":
      a model without a head, e.g. a sentence encoder: the encoder is all it loads).
    head_is_trained: False warns when the source has no head (predicting with a fresh one).
    reinit_head: Load the encoder only; the head starts fresh whatever the source has.

  Returns:
    The `LoadReport` (nothing used without weights).

  Raises:
    ValueError: naming `source` and every head tensor that does not fit, with the flag that
      starts a fresh head; or (`assign_google_weights`) a missing or misfit encoder weight.
  """
  if weights is None:
    if source == RANDOM_INITIALIZATION:
      logging.info("starting from random weights (no init_checkpoint/init_hf_dir/init_tfbert)")
    else:
      logging.info("the weights come from the run's checkpoint %s, restored by the training "
                   "loop when it resumes the run", source)
    return google_checkpoint.LoadReport(source=source, used=(), set_weights=())
  variables = google_names.google_variable_map(model)
  heads = (head,) if head else ()
  head_names = google_checkpoint.component_names(model, variables, heads)
  in_source = sorted(head_names & set(weights))
  if reinit_head:
    weights = {n: w for n, w in weights.items() if n not in head_names}
    pooler = [n for n in variables if n.startswith(convert.POOLER_SCOPE)]
    fresh_pooler = [n for n in pooler if n not in weights]
    weights.update({n: variables[n].numpy() for n in fresh_pooler})
    logging.warning(
        "reinit_head: %s starts fresh; skipped from %s: %s%s", head, source,
        ", ".join(in_source) or "nothing (it has no head)",
        f"; the pooler starts fresh too (not in the source): {', '.join(fresh_pooler)}"
        if fresh_pooler else "")
  else:
    misfit = [f"{n}: source {tuple(np.shape(weights[n]))} vs model "
              f"{tuple(variables[n].shape)}" for n in in_source
              if tuple(np.shape(weights[n])) != tuple(variables[n].shape)]
    if misfit:
      raise ValueError(f"{source}: its task head does not fit this model's {head} "
                       f"({'; '.join(misfit)}): pass --reinit_head (reinit_head=True) to "
                       "load the encoder alone and train a fresh head")
  report = google_checkpoint.assign_google_weights(model, weights, source, allow_unused=True,
                                                   allow_missing=heads)
  logging.info(report.summary())
  if report.missing and not reinit_head:
    logging.info("%s starts fresh: %s has none (%s)", head, source, ", ".join(report.missing))
  if (report.missing or reinit_head) and not head_is_trained:
    logging.warning("predicting with an untrained %s: the source has none", head)
  return report


def check_vocab_fits(model: keras.Model, vocab_size: int, vocab: str = "the vocabulary",
                     model_config: str = "the model config", trained: bool = False) -> None:
  """The vocabulary has no more entries than the model's embedding table (its ids past
  vocab_size would fail at the first lookup) and, for `trained` weights, not fewer by more
  than a table's padding (`tokenization.check_vocab_fits`).

  Args:
    model: The built model.
    vocab_size: The vocabulary's entries.
    vocab: The vocabulary, as a message names it (`describe_vocab`).
    model_config: Where the model's config comes from (`describe_model_config`).
    trained: whether the model starts from trained weights (`init_source`).

  Raises:
    ValueError: naming both, both sizes and what to do.
  """
  tokenization.check_vocab_fits(vocab_size, model.config.vocab_size, vocab, model_config,
                                trained)


# Warn when more of a task file's word pieces than this are [UNK]: the vocabulary does not
# fit the text. Measured, a fitting vocab (uncased lower-cased, cased not): 0-0.01% on the
# SST-2, MRPC, RTE and STS-B dev files, 0.8% on WNUT-17 dev (tweets, emoji). A mismatch: the
# uncased vocab without lower-casing 14-19% on MRPC, RTE and STS-B (SST-2 is lower case
# already: 0.03%), another model's 15-entry vocab 92-95% on SST-2. 5% is 6x the worst
# fitting share and a third of the mildest mismatch.
UNK_WARNING_SHARE = 0.05
_unk_reported = weakref.WeakKeyDictionary()  # {tokenizer: paths reported}: once per run.


def report_unk_share(path: str, features: dict, tokenizer: tokenization.WordPieceTokenizer
                     ) -> float:
  """Logs the [UNK] share of the word pieces of `path`'s built `features` (`input_ids`
  where `input_mask` is 1, [CLS] and [SEP] left out), once per file and tokenizer, and
  warns above `UNK_WARNING_SHARE` naming the file and the vocabulary. Returns the share."""
  ids = np.asarray(features["input_ids"])[np.asarray(features["input_mask"]) > 0]
  ids = ids[(ids != tokenizer.cls_id) & (ids != tokenizer.sep_id)]
  share = float(np.mean(ids == tokenizer.unk_id)) if ids.size else 0.0
  reported = _unk_reported.setdefault(tokenizer, set())
  if path not in reported:
    reported.add(path)
    logging.info("%s: [UNK] %.2f%% of %d word pieces", path, 100 * share, ids.size)
    if share > UNK_WARNING_SHARE:
      logging.warning(
          "%s: %.1f%% of its word pieces are [UNK] (over %.0f%%): the vocabulary %s does "
          "not fit the text; check --vocab_file (the checkpoint's own) and --do_lower_case",
          path, 100 * share, 100 * UNK_WARNING_SHARE, tokenizer.vocab_file)
  return share


def describe_vocab(config: FineTuningConfig, vocab_file: str) -> str:
  """The run's vocabulary (`resolve_vocab_file`'s) as a message names it: its flag when
  given, else the file found in its place."""
  if config.vocab_file:
    return f"--vocab_file={config.vocab_file}"
  return f"{vocab_file} (the vocabulary found without --vocab_file)"


def describe_model_config(config: FineTuningConfig, own: Optional[RunModel] = None) -> str:
  """Where `initial_source` takes the model's config from, as a message names it: the flag
  and the file."""
  if config.bert_config_file:
    return f"--bert_config_file={config.bert_config_file}"
  if config.init_checkpoint:
    beside = os.path.join(os.path.dirname(config.init_checkpoint), "bert_config.json")
    return f"{beside} (beside --init_checkpoint={config.init_checkpoint})"
  if config.init_hf_dir:
    return f"--init_hf_dir={config.init_hf_dir} (its config.json)"
  if own is not None and own.model_file and config.init_tfbert == own.model_file:
    return f"{own.model_file} (the run's model, its config)"  # `evaluated_model`'s.
  if config.init_tfbert:
    return f"--init_tfbert={config.init_tfbert} (its config)"
  if own is not None and own.checkpoint:
    return f"{os.path.join(config.output_dir, 'bert_config.json')} (the run's)"
  return "the model config"


def check_segments_fit(model: keras.Model, segments: int) -> None:
  """The model has a token-type embedding row for every segment id the task's inputs use
  (text pairs use 0 and 1); checked before any work, not as a gather error at the first step.

  Raises:
    ValueError: naming type_vocab_size and the segments.
  """
  if model.config.type_vocab_size < segments:
    raise ValueError(
        f"the task's inputs are text pairs (segment ids 0..{segments - 1}) but the model's "
        f"type_vocab_size is {model.config.type_vocab_size} (bert_config.json): use a "
        f"config with type_vocab_size >= {segments}")


def save_without_optimizer(model: keras.Model, path: str, vocab_file: Optional[str] = None,
                           do_lower_case: Optional[bool] = None) -> None:
  """Saves `model` as a `.keras` file without optimizer state (AdamW's slots triple it).

  The file appears under `path` only when complete (`convert.save_tfbert_model`). With
  `vocab_file` and `do_lower_case` (the run's), it records their fingerprint and casing
  (`convert.text_record`), so loading it with another vocabulary is refused; no tokenizer
  file is written beside it (the run directory holds its own).
  """
  plain = type(model).from_config(model.get_config())
  plain.build()
  plain.set_weights(model.get_weights())
  convert.save_tfbert_model(plain, path, vocab_file, do_lower_case, tokenizer_files=False)


def run_vocabulary(config: FineTuningConfig) -> tuple[Optional[str], Optional[bool]]:
  """(the run's vocabulary, its casing) for the records of the models it writes: the
  `vocab.txt` its output directory holds (`claim_run_directory`), else `vocab_file`, and
  the resolved `do_lower_case`; (None, None) when either is unknown."""
  vocab = os.path.join(config.output_dir, VOCAB_FILE)
  if not files.isfile(vocab):
    vocab = config.vocab_file
  if not vocab or config.do_lower_case is None:
    return None, None
  return vocab, config.do_lower_case


def save_trained(model: keras.Model, config: FineTuningConfig, train_results: dict,
                 chief: bool) -> list[str]:
  """After training ends: the chief writes `model.keras` (no optimizer), then
  `train_results.json`; returns the names of what training left in `output_dir`."""
  if chief:
    save_without_optimizer(model, os.path.join(config.output_dir, "model.keras"),
                           *run_vocabulary(config))
    atomic.write_json(os.path.join(config.output_dir, "train_results.json"), train_results)
  written = ["model.keras", "train_results.json"]
  if config.eval_every_steps:
    written += ["metrics.jsonl", "train", "eval"]
    if files.isdir(os.path.join(config.output_dir, BEST_DIR)):  # Not when no score improved
      written.append(BEST_DIR)  # (every evaluation NaN): nothing is announced that is absent.
  return written


EVAL_RESULTS_FILE = "eval_results.json"  # The scores per evaluated file, in output_dir.


def evaluated_step(output_dir: str, own: Optional[RunModel]) -> Optional[int]:
  """The applied step of the model a run without training evaluates: its latest
  checkpoint's (`own.step`), else the step `train_results.json` records beside its
  `model.keras`; None when unknown (a source outside the run)."""
  if own is None:
    return None
  if own.step is not None:
    return own.step
  path = os.path.join(output_dir, "train_results.json")
  if not files.isfile(path):
    return None
  try:
    step = json.loads(files.read_text(path)).get("step")
  except (ValueError, AttributeError):
    return None
  return step if isinstance(step, int) else None


def merge_eval_results(output_dir: str, new: dict[str, Any], step: Optional[int],
                       written: Sequence[str] = ()) -> dict[str, Any]:
  """`eval_results.json`'s content after an evaluation of the files keyed in `new`
  ({file key: {score: value}}): each new entry, with "step" (the applied step it was computed
  at, None when unknown), replaces the entry of its key, and the entries of other files in
  the existing `eval_results.json` are kept (each with its own, maybe older, "step"), named
  in the log. An existing value that is no file's entry (an older flat format) is dropped,
  named in the log. An entry records the file(s) it scored ("file", the task's absolute
  path); a new entry of a key whose recorded entry scored another file (or recorded none)
  says whose scores it replaces, and the predictions of that key among `written` (what the
  run wrote: `<key>_predictions.*`), as run_squad does for its predictions. `new` is not
  changed."""
  new = {key: {**entry, "step": step} if isinstance(entry, dict) else entry
         for key, entry in new.items()}
  path = os.path.join(output_dir, EVAL_RESULTS_FILE)
  old = {}
  if files.isfile(path):
    try:
      old = json.loads(files.read_text(path))
    except ValueError:
      logging.warning("%s: not JSON, replaced by the scores of %s", path, ", ".join(new))
      old = {}
    if not isinstance(old, dict):
      old = {}
  for key, entry in new.items():
    before = old.get(key)
    if not isinstance(entry, dict) or not isinstance(before, dict):
      continue
    predictions = "".join(f" and {os.path.basename(name)}" for name in written
                          if os.path.basename(name).startswith(f"{key}_predictions."))
    if before.get("file") is None and entry.get("file") is not None:
      logging.warning("%s: replacing the scores of %s (their file was not recorded)%s with "
                      "those of %s", path, key, predictions, _scored_files(entry["file"]))
    elif entry.get("file") is not None and before["file"] != entry["file"]:
      logging.warning("%s: replacing the scores of %s of %s%s with those of %s; to keep "
                      "both, evaluate into another --output_dir", path, key,
                      _scored_files(before["file"]), predictions,
                      _scored_files(entry["file"]))
  kept = {key: entry for key, entry in old.items()
          if key not in new and isinstance(entry, dict)}
  dropped = [key for key, entry in old.items() if key not in new and not isinstance(entry, dict)]
  if kept:
    logging.info(
        "%s: wrote the scores of %s (applied step %s); kept from earlier evaluations: %s",
        path, ", ".join(new) or "none", step,
        ", ".join(f"{key} (applied step {entry.get('step')})" for key, entry in kept.items()))
  if dropped:
    logging.warning("%s: dropped %s, not scores keyed by file (an older format)", path,
                    ", ".join(dropped))
  return {**kept, **new}


def _scored_files(scored: Any) -> str:
  """An eval_results.json entry's "file": one path, or the files of a set, as a list."""
  return ", ".join(scored) if isinstance(scored, (list, tuple)) else str(scored)


def init_source(config: FineTuningConfig) -> Optional[str]:
  """The initial checkpoint's path (`init_checkpoint`, `init_hf_dir` or `init_tfbert`)."""
  return config.init_checkpoint or config.init_hf_dir or config.init_tfbert


def check_sources(config: FineTuningConfig) -> None:
  """The initialization the config names exists, in the form its flag takes; checked before
  anything reads it, so the error names the flag (a missing `--init_hf_dir` said "missing
  vocabulary" before). The outputs too must be writable where they are named
  (`paths.output_problems`; not a config check: a config read back from a moved run's
  `run_config.json` names outputs of another machine).

  Raises:
    FileNotFoundError: naming the flag and the path.
    ValueError: `--init_checkpoint` naming a directory (a Google checkpoint is a prefix); an
      output that is an existing file, lies below one or cannot be created.
  """
  paths.check_outputs(paths.fields(config, config.OUTPUT_PATHS))
  for flag in ("init_hf_dir", "init_tfbert"):  # Not "no such directory", nor read later.
    source = getattr(config, flag)
    if source:
      files.check_not_dangling(source, f"--{flag}")
  if config.init_hf_dir and not files.isdir(config.init_hf_dir):
    raise FileNotFoundError(f"--init_hf_dir {config.init_hf_dir}: no such directory (a "
                            "Hugging Face model directory: config.json, model.safetensors)")
  if config.init_hf_dir and not any(files.exists(os.path.join(config.init_hf_dir, name))
                                    for name in ("config.json", "modules.json")):
    export = files.exists(os.path.join(config.init_hf_dir, "saved_model.pb"))
    raise ValueError(f"--init_hf_dir {config.init_hf_dir}: not a Hugging Face model directory "
                     "(no config.json or modules.json)" + (
                         ": it is a SavedModel export, which serves but does not train; start "
                         "from the run's model.keras with --init_tfbert" if export else ""))
  if config.init_tfbert and not files.exists(config.init_tfbert):
    raise FileNotFoundError(f"--init_tfbert {config.init_tfbert}: no such file (a tfbert "
                            ".keras model, e.g. <run>/model.keras)")
  # Another kind of model (a SavedModel export, a run or Hugging Face directory, ...) is
  # named as export_tflite's --model and convert_checkpoint's --input name it: a directory
  # was told to name a model.keras in it that was not there (sweep 33, A89, A92, A93).
  problem = convert.other_kind(config.init_tfbert) if config.init_tfbert else None
  if problem:
    raise ValueError(f"--init_tfbert {problem}")
  if config.init_tfbert and files.isdir(config.init_tfbert):
    raise ValueError(f"--init_tfbert {config.init_tfbert} is a directory: name the .keras "
                     f"model in it (e.g. {os.path.join(config.init_tfbert, 'model.keras')})")
  if config.init_checkpoint:
    google_checkpoint.check_prefix(config.init_checkpoint, "--init_checkpoint")


# The settings that size and window a run's sequences: a new run from a tfbert run's model
# takes them from that run's record when not given (`source_run_settings`).
SEQUENCE_SETTINGS = ("max_seq_length", "doc_stride", "max_query_length")


def _source_record(init_tfbert: str) -> tuple[Optional[str], Optional[dict[str, Any]]]:
  """(the folder, the settings) of the run_config.json recorded by the tfbert run whose
  model `init_tfbert` names: beside it, or one level up for `<run>/best/model.keras`
  (`casing.checkpoint_directories`); (None, None) without one."""
  found = [(folder, recorded_settings(folder))
           for folder in casing.checkpoint_directories(init_tfbert)]
  return next(((f, r) for f, r in found if r is not None), (None, None))


def source_run_settings(config: FineTuningConfig) -> FineTuningConfig:
  """`config` with the sequence settings (`SEQUENCE_SETTINGS`) of the tfbert run whose model
  `init_tfbert` names, where that run's run_config.json is read for its casing
  (`tfbert.text.casing.checkpoint_directories`: beside the `.keras` file, or one level up for
  `<run>/best/model.keras`): the model was trained on sequences that long, its later
  positions never were. A setting this config has in the same place as the record (a
  field, or a part of a dataclass-valued field, e.g. SQuAD's `features`) and that was not
  given (`FineTuningConfig.given`) is the source run's, logged; one given is this run's,
  logged where it differs from the record. The run's own directory is `run_settings`'.

  Raises:
    ValueError: the source's settings do not fit the settings given here; naming both.
  """
  if not config.init_tfbert or not files.exists(config.init_tfbert):
    return config
  folder, recorded = _source_record(config.init_tfbert)
  if recorded is None or (files.isdir(config.output_dir)
                          and _real_path(folder) == _real_path(config.output_dir)):
    return config
  path = os.path.join(folder, RUN_CONFIG_FILE)
  adopted, parts, differ = {}, {}, []

  def consider(name, mine, kept, given):
    """Whether the source's `kept` replaces this run's `mine` (not given), logged."""
    if mine == kept:
      return False
    if given:
      differ.append(f"{name}={_flag_value(mine)} (the source run recorded "
                    f"{_flag_value(kept)})")
      return False
    logging.info("starting from %s with its run's setting %s=%s (%s), not given here",
                 config.init_tfbert, name, _flag_value(kept), path)
    return True

  for field in dataclasses.fields(config):
    mine, kept = getattr(config, field.name), recorded.get(field.name)
    if field.name in SEQUENCE_SETTINGS and field.name in recorded:
      if consider(field.name, mine, kept, config.given(field.name, mine, _default(field))):
        adopted[field.name] = kept
    elif dataclasses.is_dataclass(mine) and isinstance(kept, dict):
      whole = config.given_settings is not None and field.name in config.given_settings
      for part in dataclasses.fields(mine):
        value = getattr(mine, part.name)
        if part.name in SEQUENCE_SETTINGS and part.name in kept and consider(
            part.name, value, kept[part.name],
            whole or config.given(part.name, value, _default(part))):
          parts.setdefault(field.name, {})[part.name] = kept[part.name]
  if differ:
    logging.info("%s given here %s from the run whose model --init_tfbert names (%s): "
                 "this run uses the values given", "; ".join(differ),
                 "differs" if len(differ) == 1 else "differ", path)
  try:
    adopted.update({name: dataclasses.replace(getattr(config, name), **values)
                    for name, values in parts.items()})
    return dataclasses.replace(config, **adopted) if adopted else config
  except ValueError as error:
    taken = "; ".join([f"{n}={_flag_value(v)}" for n, v in adopted.items()
                       if n not in parts] + [f"{p}={_flag_value(v)}"
                                             for values in parts.values()
                                             for p, v in values.items()])
    raise ValueError(f"--init_tfbert {config.init_tfbert}: its run's settings {taken} "
                     f"({path}), taken as not given here, do not fit the settings given "
                     f"({error}): give them explicitly") from None


def source_sequence_values(values: dict[str, Any], given: Optional[frozenset]) -> dict[str, Any]:
  """A tool's setting `values` (by flag name) with each sequence setting (`SEQUENCE_SETTINGS`)
  that was not `given` taken, before the tool builds its config, from the run that will
  supply it: the run in `values["output_dir"]` itself (a rerun: `run_settings`), else the
  tfbert run whose model `values["init_tfbert"]` names (`source_run_settings`); each taken
  one logged. The config's own checks then read the settings the run will use: SQuAD's
  window check read `--max_seq_length=64` given with `--max_query_length` left at the flag's
  64 and refused, where the run's 16 was to be taken.

  Raises:
    ValueError: a run_config.json that is not a JSON object (`recorded_settings`).
  """
  if given is None:
    return values
  output_dir, source = values.get("output_dir"), values.get("init_tfbert")
  folder = recorded = None
  if output_dir and files.isdir(output_dir):
    folder, recorded = output_dir, recorded_settings(output_dir)
  rerun = recorded is not None
  if not rerun and source and files.exists(source):
    folder, recorded = _source_record(source)
  if recorded is None:
    return values
  kept = {name: value for name, value in recorded.items() if name in SEQUENCE_SETTINGS}
  for part in recorded.values():
    if isinstance(part, dict):
      kept.update({name: value for name, value in part.items() if name in SEQUENCE_SETTINGS})
  taken = {name: value for name, value in kept.items()
           if name in values and name not in given and values[name] != value}
  path = os.path.join(folder, RUN_CONFIG_FILE)
  for name, value in taken.items():
    if rerun:
      logging.info("taking the run's setting %s=%s (%s), not given here", name,
                   _flag_value(value), path)
    else:
      logging.info("starting from %s with its run's setting %s=%s (%s), not given here",
                   source, name, _flag_value(value), path)
  return {**values, **taken}


def _sequence_values(config: FineTuningConfig) -> dict[str, Any]:
  """`config`'s sequence settings (`SEQUENCE_SETTINGS`) by flag name: fields, and parts of
  dataclass-valued fields (SQuAD's `features`)."""
  found = {}
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if field.name in SEQUENCE_SETTINGS:
      found[field.name] = value
    elif dataclasses.is_dataclass(value):
      found.update({part.name: getattr(value, part.name) for part in dataclasses.fields(value)
                    if part.name in SEQUENCE_SETTINGS})
  return found


def sourced_flagfile(flagfile: Optional[str], given: FineTuningConfig,
                     sourced: FineTuningConfig) -> Optional[str]:
  """`flagfile` (the tool's resolved flags, for flags.txt) with the sequence settings
  `source_run_settings` took from the source run (`given` -> `sourced`): flags.txt records
  every flag at its value, and a replay (`--flagfile=<run>/flags.txt`) gives each, so it
  must hold the values the run used, not the defaults it did not."""
  if flagfile is None:
    return None
  before, after = _sequence_values(given), _sequence_values(sourced)
  for name, value in after.items():
    if before.get(name) != value:
      line = "" if value is None else f"--{name}={_flag_value(value)}\n"  # None: unset.
      pattern = re.compile(rf"^--{name}=.*\n", re.MULTILINE)
      flagfile = (pattern.sub(lambda _: line, flagfile) if pattern.search(flagfile)
                  else flagfile + line)
  return flagfile


def resolve_casing(config):
  """`config` with the casing to tokenize with, checked before any work (`tfbert.text.casing`).

  The evidence is the initial checkpoint's (its `tokenizer_config.json`, its tfbert run
  directory's `run_config.json`) and the vocabulary's content; without an initial
  checkpoint, a rerun's own output directory's `run_config.json`.

  Raises:
    tfbert.text.casing.CasingMismatchError: naming both sources (see `resolve_do_lower_case`).
  """
  vocab_file = resolve_vocab_file(config)
  _check_vocab_beside_source(config, vocab_file)
  evidence = casing.checkpoint_casing(init_source(config), vocab_file)
  if init_source(config) is None and files.isdir(config.output_dir):  # Not a new one's parent.
    evidence = casing.checkpoint_casing(config.output_dir) + evidence
  try:
    do_lower_case = casing.resolve_do_lower_case(config.do_lower_case, evidence,
                                                 allow_mismatch=config.allow_casing_mismatch)
  except casing.CasingMismatchError:
    # Another model's vocabulary (a cased one beside an uncased model) is that first: its
    # casing is only a symptom (sweep 28, A94).
    _check_source_vocab_fits(config, vocab_file)
    raise
  logging.info("tokenizing with do_lower_case=%s (%s)", do_lower_case,
               casing.describe(evidence))
  return dataclasses.replace(config, do_lower_case=do_lower_case)


def _source_vocab_size(config: FineTuningConfig) -> Optional[int]:
  """The vocab_size of the model config the run takes (`initial_source`'s) when a config
  file gives it without reading weights, else None."""
  try:
    if config.bert_config_file:
      return BertConfig.from_json_file(config.bert_config_file).vocab_size
    if config.init_checkpoint:
      return BertConfig.from_json_file(os.path.join(os.path.dirname(config.init_checkpoint),
                                                    "bert_config.json")).vocab_size
    if config.init_hf_dir:
      return BertConfig.from_hf_json_file(os.path.join(config.init_hf_dir,
                                                       "config.json")).vocab_size
  except (OSError, ValueError):
    pass  # The source's own reading names what is wrong with it, later.
  return None


def _check_source_vocab_fits(config: FineTuningConfig, vocab_file: str,
                             sources_vocab: Optional[bool] = None) -> None:
  """`check_vocab_fits` before the model is built, where a config file gives vocab_size;
  `sources_vocab`: `is_sources_vocab`, when the caller has compared them already."""
  vocab_size = _source_vocab_size(config)
  if vocab_size is not None:
    if sources_vocab is None:
      sources_vocab = is_sources_vocab(config, vocab_file)
    tokenization.check_vocab_fits(tokenization.vocab_entries(vocab_file), vocab_size,
                                  describe_vocab(config, vocab_file),
                                  describe_model_config(config),
                                  trained=bool(init_source(config)) and not sources_vocab)


def is_sources_vocab(config: FineTuningConfig, vocab_file: str, own: bool = False) -> bool:
  """Whether `vocab_file` holds the word pieces of the `vocab.txt` that comes with the
  initial checkpoint (or, `own`, with the run's own model): the vocabulary its weights were
  trained with, whatever its size against the embedding table. A run trained from a config
  whose vocab_size exceeds its vocabulary (rows left unused) had its own model.keras refused
  by every later run as "another vocabulary" (sweep 32, A13)."""
  beside = _vocab_in(_source_places(config) + ([config.output_dir] if own else []))
  return beside is not None and (tokenization.load_vocab(beside)
                                 == tokenization.load_vocab(vocab_file))


def _source_places(config) -> list[str]:
  """The directories whose `vocab.txt` comes with the initial checkpoint (see
  `resolve_vocab_file`)."""
  places = [config.init_hf_dir] if config.init_hf_dir else []
  return places + [files.parent(path) for path in (config.init_checkpoint, config.init_tfbert)
                   if path]


def _vocab_in(places: Sequence[str]) -> Optional[str]:
  """The `vocab.txt` of the first of `places` that holds one, or None."""
  for place in places:
    path = os.path.join(place, "vocab.txt")
    if files.exists(path):
      return path
  return None


def _check_vocab_beside_source(config: FineTuningConfig, vocab_file: str) -> None:
  """Refuses a given `--vocab_file` whose word pieces differ from those of the `vocab.txt`
  that comes with the initial checkpoint: every id would look up another piece's embedding.
  A vocabulary of the same size and casing in another order was taken without a word and
  scored (sweep 31, A36); run_pretraining refuses the same. One that only adds entries after
  the source's is the source's.

  Raises:
    ValueError: before any work, naming both files and the first id where they differ.
  """
  if not config.vocab_file:
    return  # The one beside the source, or the run's own.
  beside = _vocab_in(_source_places(config))
  ours = tokenization.load_vocab(vocab_file) if beside else None
  theirs = tokenization.load_vocab(beside) if beside else None
  # Another size says more: named first.
  _check_source_vocab_fits(config, vocab_file,
                           sources_vocab=beside is not None and ours == theirs)
  if beside is None:
    return
  first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
  if first is not None:
    raise ValueError(
        f"--vocab_file={vocab_file} is not the vocabulary of {init_source(config)}: its "
        f"id {first} is {ours[first]!r} where the source's vocab.txt ({beside}) has "
        f"{theirs[first]!r}, so every id from there on would look up another word piece's "
        "embedding; leave --vocab_file out to use the source's, or pass that one")


def resolve_vocab_file(config: FineTuningConfig) -> str:
  """`vocab_file`, else the `vocab.txt` beside the initial checkpoint.

  That is: in the `init_hf_dir` directory, beside the `init_checkpoint` prefix, or beside
  the `init_tfbert` `.keras` file (where a fine-tuning run and `convert` put it); for a run
  that evaluates its output directory's own checkpoint (`evaluated_model`), or resumes
  it (`resumed_run`), the run's.

  Raises:
    ValueError: when neither exists.
  """
  if config.vocab_file:
    return config.vocab_file
  places = _source_places(config)
  # An evaluation without training reads the run's own model (`evaluated_model`); a
  # pretraining config, which always trains, has no `do_train`.
  if not places and (not getattr(config, "do_train", True) or resumed_run(config)):
    places.append(config.output_dir)
  found = _vocab_in(places)
  if found:
    return found
  if places:
    raise ValueError(f"--vocab_file is needed: no vocab.txt in {', '.join(places)}")
  raise ValueError("--vocab_file is needed: no --init_checkpoint/--init_hf_dir/--init_tfbert "
                   f"to take vocab.txt from{_no_run(config)}")


def _no_run(config) -> str:
  """", and <output_dir> holds no checkpoint of a run to resume" for a fine-tuning config
  (`resumed_run`); "" for a pretraining one (no `do_train`, no `output_dir`)."""
  if not hasattr(config, "do_train"):
    return ""
  return f", and {config.output_dir} holds no checkpoint of a run to resume"


def shuffled_batches(examples, num_examples: int, batch_size: int, seed: int, *,
                     start: int = 0, batches_per_step: int = 1,
                     keep: Optional[Sequence[int]] = None,
                     length_bucket: int = 0, group_by_length: int = 0,
                     step_rows: int = 0) -> tf.data.Dataset:
  """Endless batches of `examples`, each epoch a permutation fixed by (`seed`, epoch).

  The examples form one endless stream: position p is example `perm_e[p % N]` of epoch
  e = p // N, where `perm_e` orders the examples by `stateless_uniform` keys of
  (`seed`, e). Batch i holds positions [i * batch_size, (i + 1) * batch_size). So the
  sequence is a pure function of the seed: every iterator yields the same, whatever was
  created or consumed before it (unlike a stateful shuffle, which draws a new order for
  each new iterator; Keras' `fit` makes one to build the model before the one it trains
  on), and a resumed run seeks to its batch in O(one epoch) without reading what it skips.

  Args:
    examples: a structure of arrays (or tensors) with `num_examples` rows.
    num_examples: N (> 0).
    batch_size: rows per batch.
    seed: the shuffling seed.
    start: the first batch.
    batches_per_step: with `keep`: the period of the batches kept.
    keep: keep batch i only when i % batches_per_step is in `keep` (the replicas of one
      worker: batch i is replica i % R's part of micro-step i // R); None keeps all.
    length_bucket: > 0: each batch's per-position tensors are cut from S to the smallest
      multiple of `length_bucket` (or S) holding its longest example
      (`tfbert.tasks.length_buckets`); 0: every batch keeps S.
    group_by_length: > 0: the stream is taken in windows of `group_by_length` applied
      steps (`step_rows` rows each); a window's rows are sorted by length (longest first,
      ties by position) and dealt to its steps in turn, and the steps' order within the
      window is a permutation fixed by (`seed`, window): each applied step holds examples of
      similar length (Hugging Face's `group_by_length`), little padding is left for
      `length_bucket` to cut, and the stream stays a pure function of the seed (so resume,
      accumulation and replicas see the same rows per applied step). 0: no grouping.
    step_rows: rows per applied step, all replicas and micro-steps (with `group_by_length`).

  Returns:
    An endless tf.data.Dataset of the structure of `examples`, rows [batch_size, ...]
    (per-position tensors [batch_size, L] with buckets, L varying between batches).
  """
  if num_examples < 1:
    raise ValueError(f"cannot shuffle an empty dataset (size {num_examples})")
  first = start * batch_size
  window = group_by_length * step_rows  # Rows per grouping window (0: none).
  if group_by_length and (step_rows < 1 or step_rows % batch_size):
    raise ValueError(f"group_by_length needs step_rows ({step_rows}) to be a multiple of the "
                     f"batch size ({batch_size})")
  begin = first - first % window if window else first  # The window holding row `first`.
  first_epoch = begin // num_examples

  def permutation(epoch):
    keys = tf.random.stateless_uniform(
        [num_examples], seed=tf.stack([tf.constant(seed, tf.int64), epoch]))
    return tf.data.Dataset.from_tensor_slices(tf.argsort(keys))

  rows = (tf.data.Dataset.counter(first_epoch).flat_map(permutation)
          .skip(begin - first_epoch * num_examples))
  if window:
    rows = _grouped(rows, examples, window, step_rows, seed, begin // window)
  positions = rows.skip(first - begin).batch(batch_size, drop_remainder=True)
  if keep is not None:
    kept = tf.constant(list(keep), tf.int64)
    positions = (positions.enumerate(start)
                 .filter(lambda i, _: tf.reduce_any(tf.equal(i % batches_per_step, kept)))
                 .map(lambda i, rows: rows))
  tensors = tf.nest.map_structure(tf.convert_to_tensor, examples)
  cut = _bucket_cut(examples, length_bucket)

  def rows_of(rows):
    return cut(tf.nest.map_structure(lambda t: tf.gather(t, rows), tensors))

  return data_options.released_promptly(positions.map(
      rows_of, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(
          tf.data.AUTOTUNE))


def _grouped(rows: tf.data.Dataset, examples, window: int, step_rows: int, seed: int,
             first_window: int) -> tf.data.Dataset:
  """`rows` (example indices) regrouped window by window (`shuffled_batches`)."""
  lengths = tf.constant(length_buckets.example_lengths(examples))
  steps = window // step_rows

  def regroup(index, rows):
    # Longest first, ties by position in the window: a stable sort of -length.
    order = tf.argsort(-tf.gather(lengths, rows), stable=True)
    dealt = tf.reshape(tf.gather(rows, order), [steps, step_rows])
    keys = tf.random.stateless_uniform(
        [steps], seed=tf.stack([tf.constant(seed, tf.int64), -1 - index]))
    return tf.data.Dataset.from_tensor_slices(tf.gather(dealt, tf.argsort(keys))).unbatch()

  return (rows.batch(window, drop_remainder=True).enumerate(first_window)
          .flat_map(regroup))


def _bucket_cut(examples, length_bucket: int) -> Callable:
  """The batch -> batch function cutting to length buckets (the identity for 0)."""
  if not length_bucket:
    return lambda batch: batch
  seq_length = length_buckets.sequence_length(examples)
  buckets = length_buckets.bucket_lengths(seq_length, length_bucket)
  return lambda batch: length_buckets.cut_batch(batch, seq_length, buckets)


class TrainingMonitor(keras.callbacks.Callback):
  """Stops after `steps` applied steps, fails fast on a non-finite loss, times the run.

  Args:
    steps: applied (optimizer) steps to run.
    batch_size: examples per applied step.
    check_finite: raise FloatingPointError on a non-finite loss (off for mixed_float16,
      whose loss scaling skips overflowing steps by design).
  """

  def __init__(self, steps: int, batch_size: int, check_finite: bool = True):
    super().__init__()
    self.steps, self.batch_size, self.check_finite = steps, batch_size, check_finite
    self.micro_steps, self.first_step_end, self.end, self.last_logs = 0, None, None, {}

  def on_train_batch_end(self, batch, logs=None):
    self.micro_steps += 1
    self.last_logs = dict(logs or {})
    loss = self.last_logs.get("loss")
    if self.check_finite and loss is not None and not math.isfinite(loss):
      raise FloatingPointError(f"non-finite loss ({loss}) at micro-step {self.micro_steps} "
                               f"(applied step {self._applied() + 1} of {self.steps})")
    applied = self._applied()
    if applied >= 1 and self.first_step_end is None:
      self.first_step_end = (time.perf_counter(), applied)
    if applied >= self.steps:
      self.end = (time.perf_counter(), applied)
      self.model.stop_training = True

  def _applied(self) -> int:
    return int(self.model.optimizer.iterations.numpy())

  def summary(self) -> dict[str, float]:
    """Last logs, applied steps and examples/s after the first (tracing) step."""
    result = {k: float(v) for k, v in self.last_logs.items()}
    result["steps"] = self._applied()
    if hasattr(self.model.optimizer, "dynamic_scale"):
      result["loss_scale"] = float(self.model.optimizer.dynamic_scale.numpy())
    if self.first_step_end and self.end and self.end[1] > self.first_step_end[1]:
      seconds = self.end[0] - self.first_step_end[0]
      result["examples_per_second"] = (
          (self.end[1] - self.first_step_end[1]) * self.batch_size / seconds)
    logging.info("trained %s", " ".join(f"{k}={v:.4g}" for k, v in result.items()))
    return result


MAX_SKIPPED_WINDOWS = training_loop.MAX_SKIPPED_WINDOWS


def keras_epochs(steps: int, gradient_accumulation_steps: int, num_examples: int,
                 batch_size: int) -> tuple[int, int]:
  """(Keras epochs, micro-steps per Keras epoch) for `steps` applied steps.

  About one pass over the data each, whole windows each, and split evenly: Keras reports
  the last epoch's running mean as the run's loss, so a last epoch of one step (343 steps
  as 3 x 114 + 1) would report one batch's loss. The data iterator, and so the data
  order, carries across Keras epochs.
  """
  k = gradient_accumulation_steps
  micro_steps = steps * k
  per_pass = max(k, num_examples // (batch_size // k) // k * k)
  epochs = math.ceil(micro_steps / per_pass)
  per_epoch = math.ceil(micro_steps / epochs / k) * k
  return epochs, per_epoch


def fit_steps(model: keras.Model, dataset: tf.data.Dataset, *, steps: int,
              gradient_accumulation_steps: int, num_examples: int, batch_size: int,
              verbose: int = 1,
              callbacks: Sequence[keras.callbacks.Callback] = ()) -> dict[str, float]:
  """Runs the compiled `model` for `steps` applied steps; returns `TrainingMonitor.summary`.

  Args:
    model: A model compiled with a `tfbert.training.optimization` stack.
    dataset: Endless micro-batches of `batch_size // gradient_accumulation_steps` examples.
    steps: Applied (optimizer) steps.
    gradient_accumulation_steps: Micro-batches per applied step (k).
    num_examples: Examples per epoch (for Keras' epoch length and progress bar).
    batch_size: Examples per applied step (all micro-batches and replicas).
    verbose: Keras' progress bar setting.
    callbacks: More callbacks (TensorBoard, ...).

  With loss scaling (mixed_float16) overflowing windows are skipped by design: the loss
  is not checked for finiteness, and Keras gets epochs for `MAX_SKIPPED_WINDOWS` more
  windows (the monitor still stops at `steps` applied steps).
  """
  k = gradient_accumulation_steps
  loss_scaling = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
  epochs, per_epoch = keras_epochs(steps, k, num_examples, batch_size)
  if loss_scaling:
    epochs += math.ceil(MAX_SKIPPED_WINDOWS * k / per_epoch)
  monitor = TrainingMonitor(steps, batch_size, check_finite=not loss_scaling)
  model.fit(dataset, epochs=epochs, steps_per_epoch=per_epoch, shuffle=False,
            verbose=verbose, callbacks=[monitor, *callbacks])
  return monitor.summary()


def compile_and_fit(model: keras.Model, strategy: tf.distribute.Strategy,
                    dataset: tf.data.Dataset, config: FineTuningConfig, *, steps: int,
                    total_steps: int, num_examples: int) -> dict[str, float]:
  """Compiles `model` with `config`'s optimizer stack and trains it by Keras `fit`.

  The model's own `train_step` computes its loss (`tfbert.models`). One device or
  mirrored; `train` is what the tools use.

  Args:
    model: The model, built in `strategy`'s scope.
    strategy: The run's strategy.
    dataset: Endless micro-batches (`shuffled_batches` of `train_batch_size // k`).
    config: The run configuration.
    steps: Applied steps to run now.
    total_steps: Applied steps of the whole schedule (warmup and decay).
    num_examples: Examples per epoch.

  Returns:
    `TrainingMonitor.summary()`.
  """
  with strategy.scope():
    model.compile(optimizer=optimization.create_optimizer(config.optimizer_config(total_steps)),
                  jit_compile=False)
  return fit_steps(
      model, dataset, steps=steps, gradient_accumulation_steps=config.gradient_accumulation_steps,
      num_examples=num_examples, batch_size=config.train_batch_size, verbose=config.verbose,
      callbacks=[keras.callbacks.TensorBoard(  # update_freq counts micro-steps (batches).
          os.path.join(config.output_dir, "train"),
          update_freq=config.log_steps * config.gradient_accumulation_steps)])


# What sets a fine-tuning run's applied steps (`loop_config`), as the tools' flags say it.
RUN_END = "--max_train_steps, or the schedule's end: --num_train_epochs"


def loop_config(config: FineTuningConfig, steps: int,
                evaluates: bool) -> training_loop.LoopConfig:
  """The training loop's part of `config` for a run of `steps` applied steps."""
  return training_loop.LoopConfig(
      num_train_steps=steps, train_batch_size=config.train_batch_size,
      gradient_accumulation_steps=config.gradient_accumulation_steps,
      log_steps=config.log_steps, save_checkpoints_steps=config.save_checkpoints_steps,
      keep_checkpoint_max=config.keep_checkpoint_max,
      eval_every_steps=config.eval_every_steps if evaluates else 0,
      stop_at_step=min(config.stop_at_step, steps) if config.stop_at_step else None,
      best_metric=config.best_metric if evaluates else "",
      early_stopping_patience=config.early_stopping_patience if evaluates else 0,
      jit_compile=config.jit_compile, check_finite=config.dtype != "mixed_float16",
      verbose=config.verbose, run_end=RUN_END)


BEST_DIR = training_loop.BEST_DIR


def keep_best(model: keras.Model, config: FineTuningConfig, step: int, scores: dict) -> None:
  """Writes `<output_dir>/best/`: `model.keras` (no optimizer), the run's `vocab.txt` (so
  `--init_tfbert=<output_dir>/best/model.keras` needs no other flag) and
  `eval_results.json` (`training_loop.keep_best`)."""
  vocab = os.path.join(config.output_dir, VOCAB_FILE)

  def write_model(staging: str) -> None:
    save_without_optimizer(model, os.path.join(staging, "model.keras"), *run_vocabulary(config))
    if files.isfile(vocab):
      files.copy(vocab, os.path.join(staging, VOCAB_FILE))

  training_loop.keep_best(config.output_dir, write_model, config.best_metric, step, scores)


def train(model: keras.Model, strategy: tf.distribute.Strategy, config: FineTuningConfig,
          examples, num_examples: int, *, steps: int, total_steps: int,
          evaluate: Optional[Callable[[], dict]] = None,
          eval_files: Sequence[str] = ()) -> dict[str, Any]:
  """Trains (or resumes) `model` in `tfbert.training.training_loop`; returns the last log.

  Checkpoints go to `<output_dir>/checkpoints/` (another worker's to its own directory);
  rerunning resumes from the latest, the data stream continuing at its micro-step. With
  `evaluate`, the chief logs each evaluation (TensorBoard `eval/`, metrics.jsonl) and keeps
  the best model (`keep_best`) by `config.best_metric`.

  Args:
    model: the task model, built in `strategy`'s scope (not compiled).
    strategy: the run's strategy.
    config: the run configuration.
    examples: (inputs, labels) arrays, `num_examples` rows each.
    num_examples: N.
    steps: applied steps of this run (`max_train_steps` may end it before the schedule).
    total_steps: applied steps of the learning-rate schedule.
    evaluate: returns evaluation scalars; every worker calls it.
    eval_files: the files `evaluate` scores, recorded by name, size and sha256 with the best
      value and `best_metric`: a resume on other ones, or with another metric, starts the
      best and the patience count over (`training_loop.TrainingLoop`'s `evaluation`).

  Returns:
    The last log's scalars with "steps" (applied steps done), "finished" (all steps done
    or stopped early) and, when evaluated, "eval".

  Raises:
    tfbert.training.training_loop.Preempted: SIGTERM; the checkpoint is saved.
  """
  num_workers, index, chief = distribution.worker_info(strategy)
  with strategy.scope():
    optimizer = optimization.create_optimizer(config.optimizer_config(total_steps))
    model.compile(optimizer=optimizer)
    optimizer.build(model.trainable_variables)
  loop = training_loop.TrainingLoop(
      strategy, model, loop_config(config, steps, evaluate is not None), config.output_dir,
      num_workers=num_workers, worker_index=index, is_chief=chief, evaluate=evaluate,
      on_best=lambda step, scores: keep_best(model, config, step, scores),
      evaluation={"data": run_directory.data_identity(eval_files)} if evaluate else None)
  loop.remove_leftovers()
  loop.restore()
  replicas = strategy.num_replicas_in_sync
  local = replicas // num_workers
  per_replica = config.train_batch_size // config.gradient_accumulation_steps // replicas
  batches = distribution.LocalBatches(strategy, shuffled_batches(
      examples, num_examples, per_replica, config.seed, start=loop.micro_step * replicas,
      batches_per_step=replicas,
      keep=range(index * local, (index + 1) * local) if num_workers > 1 else None,
      length_bucket=config.length_bucket, group_by_length=config.group_by_length,
      step_rows=config.train_batch_size))
  last = loop.train(batches)
  result = {**last, "steps": loop.step, "finished": loop.finished}
  logging.info("trained " + " ".join(f"{k}={v:.4g}" for k, v in result.items()
                                     if isinstance(v, (int, float))))
  return result


# model -> {(strategy, input names): its prediction step}: one trace per model, not one per
# evaluation during training.
_PREDICTION_STEPS = weakref.WeakKeyDictionary()


def _prediction_step(model: keras.Model, strategy: tf.distribute.Strategy,
                     names: tuple[str, ...], seq_length: int):
  """`run_batch(iterator)`: one global batch's outputs by name, gathered from every replica
  (with "example_index"); made once per (model, strategy, input names, S). `iterator` is a
  `tf.data` iterator of this worker's per-replica batches, dealt to its local replicas in
  turn as `distribution.LocalBatches` deals them (traced once per element spec; a batch cut
  to its length bucket has per-position outputs padded back to S, so the replicas' parts
  gather into one tensor)."""
  steps = _PREDICTION_STEPS.setdefault(model, {})
  key = (id(strategy), names, seq_length)
  if key in steps and steps[key][0] is strategy:
    return steps[key][1]

  def step(batch):
    features = {name: batch[name] for name in names}
    outputs = model(features, training=False)
    outputs = outputs if isinstance(outputs, dict) else {"output": outputs}
    outputs = length_buckets.pad_outputs(outputs, seq_length)
    return {"example_index": batch["example_index"],
            **{k: tf.cast(v, tf.float32) for k, v in outputs.items()}}

  @tf.function(autograph=False)
  def run_batch(iterator):
    batch = strategy.experimental_distribute_values_from_function(lambda _: next(iterator))
    outputs = strategy.run(step, args=(batch,))
    # One gather per tensor: gathering the whole dict at once under MirroredStrategy with
    # ReductionToOneDevice returned the first replica's rows only (measured, TF 2.20).
    return {name: strategy.gather(value, axis=0) for name, value in outputs.items()}

  steps[key] = (strategy, run_batch)
  return run_batch


def eval_loss(model: keras.Model, outputs: dict[str, np.ndarray], labels: Any) -> float:
  """The training loss's definition on held-out data: the mean of `model.example_losses`.

  TensorBoard's `eval` run shows it beside the training `loss` (the same tag), so the two
  curves overlay. The mean is taken in float64 over every example (no batch weighting).

  Args:
    model: a task model (`example_losses(outputs, labels)` -> float32 [N]).
    outputs: the model's outputs on every example, arrays [N, ...] by name (`predict`).
    labels: the training labels of the same examples (an array, or arrays by output name).

  Returns:
    The mean loss over the N examples.
  """
  tensors = {name: tf.constant(value) for name, value in outputs.items()}
  losses = model.example_losses(tensors, tf.nest.map_structure(tf.constant, labels))
  return float(np.mean(losses.numpy().astype(np.float64)))


def predict(model: keras.Model, strategy: tf.distribute.Strategy, inputs: dict[str, np.ndarray],
            batch_size: int, length_bucket: int = 0) -> dict[str, np.ndarray]:
  """The model's outputs on `inputs`, sharded over every replica of every worker.

  Rows are padded to whole global batches (`batch_size`, all replicas) and dealt as
  training batches are: global batch s, replica r gets rows [r * b, (r + 1) * b) of it
  (b = batch_size / replicas); each worker runs its replicas' rows, the outputs are
  gathered from every replica (`strategy.gather`) to every worker, and the padding rows
  dropped: each example is scored exactly once, and every worker returns all outputs.

  Args:
    model: the task model.
    strategy: the run's strategy.
    inputs: arrays [N, ...] by input name (N >= 1).
    batch_size: rows per global batch (a multiple of the replicas).
    length_bucket: > 0: each replica's rows are cut to their length bucket
      (`tfbert.tasks.length_buckets`) and per-position outputs padded back to S with zeros
      (at positions no example has); 0: every batch keeps S.

  Returns:
    The model's outputs by name, numpy arrays [N, ...] in the order of `inputs`.
  """
  num_workers, index, _ = distribution.worker_info(strategy)
  replicas = strategy.num_replicas_in_sync
  local = replicas // num_workers
  if batch_size % replicas:
    raise ValueError(f"the prediction batch size ({batch_size}) must be a multiple of the "
                     f"replicas ({replicas})")
  count = len(next(iter(inputs.values())))
  steps = max(1, math.ceil(count / batch_size))
  padded = steps * batch_size
  rows = {name: np.concatenate([value, np.repeat(value[:1], padded - count, axis=0)])
          for name, value in inputs.items()}
  rows["example_index"] = np.concatenate([np.arange(count), np.full(padded - count, -1)])
  per_replica = batch_size // replicas
  dataset = tf.data.Dataset.from_tensor_slices(rows).batch(per_replica)
  mine = range(index * local, (index + 1) * local)
  dataset = (dataset.enumerate().filter(
      lambda i, _: tf.reduce_any(tf.equal(i % replicas, tf.constant(list(mine), tf.int64))))
      .map(lambda i, batch: batch))
  seq_length = length_buckets.sequence_length(inputs)
  dataset = data_options.released_promptly(dataset.map(_bucket_cut(inputs, length_bucket)))
  iterator = iter(dataset)
  run_batch = _prediction_step(model, strategy, tuple(inputs), seq_length)
  parts = [run_batch(iterator) for _ in range(steps)]
  merged = {name: np.concatenate([part[name].numpy() for part in parts]) for name in parts[0]}
  order = merged.pop("example_index")
  kept = order >= 0
  if sorted(order[kept].tolist()) != list(range(count)):
    raise AssertionError("sharded prediction did not score every example exactly once")
  return {name: value[kept][np.argsort(order[kept])] for name, value in merged.items()}
