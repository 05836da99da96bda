"""The training loop of every tfbert run: pretraining, SQuAD and classifier fine-tuning.

`TrainingLoop` trains a compiled model by `strategy.run(model.train_step)` (the model's own
step, with the `tfbert.training.optimization` stack's accumulation, clipping and loss
scaling) on one device, `MirroredStrategy` or `MultiWorkerMirroredStrategy`, in chunks of
micro-steps, one `tf.function` call each (`graph_micro_steps`); a chunk ends at every log,
evaluation and checkpoint step. It is not `model.fit`: Keras 3's `fit` fails under
`MultiWorkerMirroredStrategy` (keras-team/keras#20585), and `fit` cannot checkpoint its data
position or resume within an epoch. The models still train with `compile` + `fit` on one
device or mirrored.

What the loop keeps in a run directory (the chief's; another worker keeps its checkpoints
in `<directory>/.worker<i>/`, never over the chief's, and writes nothing else):

  checkpoints/    model + optimizer (slots, accumulators, micro-step counter, loss scale) +
                  the metrics since the last log (`metrics_window`) + the evaluation state
                  (best value and step, evaluations since the best, whether the run stopped
                  early, what the best was measured on) + the data position when the run
                  has one to keep (a tf.data iterator), at every multiple of
                  `save_checkpoints_steps` applied steps and where the run stops;
                  `keep_checkpoint_max` of them. TF writes each under a temporary name and
                  renames it; `remove_leftovers` removes what a kill left.
  train/, eval/   TensorBoard events of the training metrics and of the evaluations (the
                  same tags where they mean the same thing), so TensorBoard shows two runs.
  metrics.jsonl   one line per log, {"step", ...scalars}, and per evaluation,
                  {"step", "split": "eval", ...scalars}; a resumed run first drops the lines
                  after its checkpoint, so the file is the uninterrupted run's.

Steps are applied steps (the optimizer's `iterations`): a window that mixed_float16's loss
scaling skips is followed by another, as `fit` did. Logs come at every multiple of
`log_steps` and at `num_train_steps`; evaluations at every
multiple of `eval_every_steps` and at `num_train_steps`, each before the checkpoint of its
step. With `best_metric`, an evaluation that improves it calls `on_best` (the task keeps that
model apart from the rotation); `early_stopping_patience` evaluations without improvement
end the run there (a rerun of it then trains no further); an evaluation whose `best_metric`
is NaN (undefined: a correlation of constant values) is neither, with a warning. The best
value is recorded with what it was measured on (the metric, the evaluation's data): a
resume that evaluates otherwise (another held-out file, another `best_metric`) starts the
best and the patience count over, saying so, instead of comparing numbers of two
evaluations.

`examples_per_second` counts the log window's applied steps x `train_batch_size` over the
seconds spent in them, leaving out a run's first step: that call traces (and, with XLA,
compiles) the step, which would make a resumed run's first point look slow. The first step
runs alone for that reason; a log window of it alone logs no `examples_per_second`.

Preemption: SIGTERM (what schedulers send before they take a machine) sets a flag that the
loop reads at the end of every chunk; the workers agree on it (an all-reduce, so one
signalled worker stops them all at the same step), save a checkpoint of that step and
raise `Preempted`, which the tools turn into exit status `EXIT_PREEMPTED` (75, sysexits'
EX_TEMPFAIL: try again). Rerunning the command resumes there. A chunk is at most
`log_steps` applied steps, which bounds the wait.

Interruption: the first Ctrl-C (SIGINT) during training is read as SIGTERM is: at the end of
the chunk the loop saves a checkpoint of the step reached and raises `Interrupted` naming it
(a rerun resumes there; steps trained before the first checkpoint are kept); exit status
`EXIT_INTERRUPTED` (130, as a shell reports Ctrl-C). A second Ctrl-C (`KeyboardInterrupt`)
stops the loop at once, even inside that save; the save's temporaries (`ckpt-N_temp/`) are
removed and `Interrupted` names the checkpoint kept (the newest complete one, if any).
"""

import contextlib
import dataclasses
import json
import math
import os
import re
import signal
import threading
import time
from typing import Callable, ContextManager, Optional, Sequence

import keras
import tensorflow as tf
from absl import logging

from tfbert.runtime import atomic, files, json_values, paths, run_directory, validation
from tfbert.runtime.progress import StepProgress
from tfbert.training.accumulation import find_accumulator
from tfbert.training.metric_direction import minimized

EXIT_PREEMPTED = 75  # sysexits.h EX_TEMPFAIL: a temporary failure; run the command again.
EXIT_INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C.
# Windows in a row a mixed_float16 run may skip (gradients overflowed; the loss scale halves
# each time, so 60 take 2**15 below 2**-44) before the run fails.
MAX_SKIPPED_WINDOWS = 60


class Preempted(Exception):
  """The run was asked to stop (SIGTERM) and saved a checkpoint at `step`; rerun to resume.

  `exit_status` is what a tool exits with (`tfbert.runtime.cli`).
  """
  exit_status = EXIT_PREEMPTED

  def __init__(self, step: int, checkpoint: str):
    super().__init__(f"preempted (SIGTERM): saved {checkpoint} at applied step {step}; run "
                     "the same command again to resume")
    self.step, self.checkpoint = step, checkpoint


class Interrupted(Exception):
  """Ctrl-C stopped training. The first one saved `checkpoint` at applied step `step`, as
  SIGTERM does; a second one (`KeyboardInterrupt`) stopped at once (`step` None), and
  `checkpoint` (None: none saved yet) is the one kept. A rerun resumes from `checkpoint`; a
  save cut short left nothing behind.

  `exit_status` is what a tool exits with (`tfbert.runtime.cli`).
  """
  exit_status = EXIT_INTERRUPTED

  def __init__(self, checkpoint: Optional[str], removed: Sequence[str] = (),
               step: Optional[int] = None):
    cut = (f"removed the unfinished save {', '.join(removed)}; " if removed else "")
    if step is not None:
      kept = (f"saved {checkpoint} at applied step {step}; run the same command again to "
              "resume")
    elif checkpoint:
      kept = f"kept {checkpoint}; run the same command again to resume from it"
    else:
      kept = "no checkpoint saved yet; run the same command again to start over"
    super().__init__(f"interrupted (Ctrl-C): {cut}{kept}")
    self.checkpoint, self.removed, self.step = checkpoint, tuple(removed), step


@dataclasses.dataclass(frozen=True)
class LoopConfig:
  """How a run trains, logs, evaluates and saves; the run configs' fields of the same names.

  Attributes:
    num_train_steps: applied steps of the whole run.
    train_batch_size: examples per applied step (all micro-steps, all replicas).
    gradient_accumulation_steps: micro-steps per applied step.
    log_steps: applied steps between logs.
    save_checkpoints_steps: applied steps between checkpoints.
    keep_checkpoint_max: checkpoints kept (the oldest are deleted).
    eval_every_steps: applied steps between evaluations (0: only at the end, when the run
      has an evaluation).
    stop_at_step: stop there (after a checkpoint) instead of at `num_train_steps`.
    best_metric: the evaluation scalar whose best value is kept ("" none); a name ending in
      "loss" or "perplexity" is minimized (`minimized`), any other maximized.
    early_stopping_patience: stop after this many evaluations without a better
      `best_metric` (0: never); a NaN one does not count.
    jit_compile: XLA-compile the per-replica step.
    run_eagerly: run every step eagerly (debugging; the same numbers).
    check_finite: fail on a non-finite logged loss (off for mixed_float16, whose loss
      scaling skips overflowing steps by design).
    verbose: 0: no progress lines; otherwise the chief prints one per log
      (`tfbert.runtime.progress.StepProgress`).
    run_end: what sets `num_train_steps`, as the tool's flags spell it (messages name it:
      `stop_at_step_message`); the default is the field's own flag (run_pretraining's).
  """
  num_train_steps: int
  train_batch_size: int
  gradient_accumulation_steps: int = 1
  log_steps: int = 10
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  eval_every_steps: int = 0
  stop_at_step: Optional[int] = None
  best_metric: str = ""
  early_stopping_patience: int = 0
  jit_compile: bool = False
  run_eagerly: bool = False
  check_finite: bool = True
  verbose: int = 1
  run_end: str = "--num_train_steps"

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    return schedule_checks(self) + [
        (not self.early_stopping_patience or self.best_metric,
         f"early_stopping_patience ({self.early_stopping_patience}) needs a best_metric"),
        (self.stop_at_step is None or self.stop_at_step <= self.num_train_steps,
         f"stop_at_step ({self.stop_at_step}) must be in [1, num_train_steps "
         f"({self.num_train_steps})]"),
        (not (self.run_eagerly and self.jit_compile), "run_eagerly and jit_compile exclude "
         "each other"),
    ]


# The directories the runs create inside their run directory (`--output_dir`, run_pretraining's
# `--model_dir`) -> what each keeps: the loop's, and run_pretraining's default export.
RUN_ENTRIES = {"checkpoints": "the loop's checkpoints", "train": "TensorBoard logs of training",
               "eval": "TensorBoard logs of evaluation", "best": "the best evaluation's model",
               "export": "run_pretraining's export"}
RUN_DIRECTORY_FIELDS = ("output_dir", "model_dir")  # A run config's run directory.


def run_entry_problems(config) -> list[str]:
  """`tfbert.runtime.paths.entry_problems` of the run directory a run config names
  (`RUN_DIRECTORY_FIELDS`; none: []) and `RUN_ENTRIES`: an existing file where the run
  creates a directory, named before any work."""
  for field in RUN_DIRECTORY_FIELDS:
    directory = getattr(config, field, None)
    if isinstance(directory, str) and directory:
      return paths.entry_problems(f"--{field}", directory, RUN_ENTRIES)
  return []


def schedule_checks(config) -> list[validation.Check]:
  """The checks of the loop's settings that every run config carries under the same names
  (`log_steps`, `save_checkpoints_steps`, `keep_checkpoint_max`, `eval_every_steps`,
  `early_stopping_patience`, `stop_at_step`): the run configs check them when built, before
  the loop's own config exists. And its run directory's entries (`run_entry_problems`)."""
  return [(False, problem) for problem in run_entry_problems(config)] + [
      # One check each: the message names only the settings at fault (sweep 34, A64).
      *[(getattr(config, name) >= 1, f"{name} ({getattr(config, name)}) must be >= 1")
        for name in ("log_steps", "save_checkpoints_steps", "keep_checkpoint_max")],
      (config.eval_every_steps >= 0,
       f"eval_every_steps ({config.eval_every_steps}) must be >= 0"),
      (config.early_stopping_patience >= 0,
       f"early_stopping_patience ({config.early_stopping_patience}) must be >= 0"),
      (config.stop_at_step is None or config.stop_at_step >= 1,
       f"stop_at_step ({config.stop_at_step}) must be >= 1"),
  ]


class EvalState(tf.Module):
  """The evaluation state a checkpoint keeps: best value and step, evaluations since, and
  what the best value was measured on (`evaluation`: `evaluation_record`'s JSON; "" in a
  checkpoint written before tfbert recorded it, or before any run of it evaluated)."""

  def __init__(self):
    super().__init__(name="eval_state")
    self.best_value = tf.Variable(float("nan"), dtype=tf.float64, trainable=False)
    self.best_step = tf.Variable(-1, dtype=tf.int64, trainable=False)
    self.evals_since_best = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.stopped_early = tf.Variable(False, trainable=False)
    self.evaluation = tf.Variable("", dtype=tf.string, trainable=False)

  def improves(self, value: float, metric: str) -> bool:
    best = float(self.best_value.numpy())
    if math.isnan(best):
      return not math.isnan(value)
    return value < best if minimized(metric) else value > best

  @property
  def measured(self) -> bool:
    """Whether an evaluation has been counted (a best value, or evaluations without one)."""
    return int(self.best_step.numpy()) >= 0 or int(self.evals_since_best.numpy()) > 0

  def start_over(self) -> None:
    """Forgets the best value and the evaluations since it (the patience count)."""
    self.best_value.assign(float("nan"))
    self.best_step.assign(-1)
    self.evals_since_best.assign(0)


def evaluation_record(best_metric: str, evaluation: Optional[dict]) -> dict:
  """What a best value is measured on: `best_metric` and `evaluation` (the run's description
  of what its evaluation scores: its data's identity, `tfbert.runtime.run_directory.
  data_identity`, under "data"; how many examples; ...). Values of two records compare
  only when the records are equal."""
  return {"best_metric": best_metric, **(evaluation or {})}


def evaluation_changes(recorded: dict, current: dict) -> list[str]:
  """How `current` differs from `recorded` (`evaluation_record`s), one entry per change:
  "best_metric: "loss" -> "mlm_accuracy"", "data: <file>: same size, other content (..)"."""
  found = []
  for key in sorted(set(recorded) | set(current)):
    old, new = recorded.get(key), current.get(key)
    if old == new:
      continue
    files_changed = (run_directory.data_changes(old or [], new or []) if key == "data" and
                     isinstance(old or [], list) and isinstance(new or [], list) else [])
    found += ([f"{key}: {change}" for change in files_changed] or
              [f"{key}: {json.dumps(old)} -> {json.dumps(new)}"])
  return found


def graph_micro_steps(strategy: tf.distribute.Strategy, train_step):
  """The training loop's unit: `micro_steps(iterator, count)` runs `count` micro-steps.

  Each micro-step is one call of a `tf.function` that runs `strategy.run(train_step)` on
  the iterator's next batch, as Keras `fit` does with `steps_per_execution=1`. Not a
  `tf.range` loop inside one `tf.function`: that ran SQuAD fine-tuning steps (BERT H256/L4,
  S 128, B 16, float32, 2 CPU cores) 4-8% slower than one call per step, measured in fresh
  processes alternating (BENCHMARKS.md, fine-tuning step rate); one call costs well under
  a millisecond of Python, against hundreds of milliseconds per step.
  """

  @tf.function(autograph=False)
  def one_step(iterator):
    strategy.run(train_step, args=(next(iterator),))

  def micro_steps(iterator, count):
    for _ in range(int(count)):
      one_step(iterator)

  return micro_steps


BEST_DIR = "best"  # Under the run directory: the best evaluation's model, beside no rotation.
BEST_KIND = "best model"  # What `best/` is (`tfbert.runtime.atomic.OUTPUT_MARKER`).


def keep_best(directory: str, write_model: Callable[[str], None], metric: str, step: int,
              scores: dict) -> str:
  """Writes `<directory>/best/`: the model (`write_model(staging)` writes it into the
  staging directory) and `eval_results.json` ({"step", "best_metric", scalars}), whole or
  not at all (`tfbert.runtime.atomic`); returns the path."""
  path = os.path.join(directory, BEST_DIR)

  def write(staging: str) -> None:
    files.makedirs(staging)
    write_model(staging)
    atomic.write_json(os.path.join(staging, "eval_results.json"),
                      {"step": step, "best_metric": metric, **scores})

  atomic.write_with(path, write, tag="best", kind=BEST_KIND)
  logging.info(f"best {metric} so far ({scores[metric]:.4f} at applied step {step}): kept in "
               f"{path}")
  return path


def is_checkpoint_temporary(name: str) -> bool:
  """Whether a name under checkpoints/ is what TF leaves when killed while saving.

  `ckpt-N_temp/` (a sharded save's parts before the merge), `*.tempstate<digits>` (a
  tensor bundle before its rename), `checkpoint.tmp<hex>` (the state file before its rename).
  """
  return bool(re.fullmatch(r".+_temp|.+\.tempstate\d+|checkpoint\.tmp[0-9a-f]+", name))


def _metric_rows(log_dir: str, step: int):
  """(line, row) of each whole metrics.jsonl line of a step <= `step`; a last line cut by a
  kill is not JSON, or has no newline, and is left out."""
  path = os.path.join(log_dir, "metrics.jsonl")
  if not files.exists(path):
    return
  with files.open_file(path) as f:
    for line in f:
      try:
        row = json.loads(line)
      except json.JSONDecodeError:
        continue
      if line.endswith("\n") and row["step"] <= step:
        yield line, row


def truncate_metrics(log_dir: str, step: int) -> None:
  """Keeps the metrics.jsonl lines of steps <= `step` (the restored one; 0: none).

  Lines after the restored checkpoint will be logged again; a last line cut by a kill is
  not JSON and goes too.
  """
  if files.exists(os.path.join(log_dir, "metrics.jsonl")):
    atomic.write_text(os.path.join(log_dir, "metrics.jsonl"),
                      "".join(line for line, _ in _metric_rows(log_dir, step)))


def stop_at_step_message(step: int, config: LoopConfig, already: bool = False) -> str:
  """The line of a run that stops (`already`: stopped before, trains nothing) at
  `config.stop_at_step` before `config.num_train_steps`: a one-off pause, which a replayed
  flags.txt of an older run may still hold (a tool records the flag no more)."""
  remain = config.num_train_steps - step
  where = "at" if step == config.stop_at_step else "past"
  head = (f"the run is already at applied step {step}, {where} --stop_at_step="
          f"{config.stop_at_step}: trained nothing" if already else
          f"stopped at applied step {step} (--stop_at_step={config.stop_at_step})")
  return (f"{head}; {remain} applied step{'s' if remain != 1 else ''} remain to the run's "
          f"end at applied step {config.num_train_steps} ({config.run_end}); until then the "
          "tools write only checkpoints (no model.keras, evaluation, predictions or export). "
          "Rerun without --stop_at_step (or with a larger one) to train the rest")


def finished_evaluation_note(log_dir: str, step: int, evaluates: bool) -> str:
  """What a rerun of a finished run (at `step`) says of its evaluation during training
  (`evaluates`): not rerun, whatever files it names now; the last one logged (metrics.jsonl
  in `log_dir`) is where its scores are. "" without one."""
  if not evaluates:
    return ""
  evaluated = [row["step"] for _, row in _metric_rows(log_dir, step) if "split" in row]
  last = (f" (the last, at applied step {evaluated[-1]}, is in {run_directory.METRICS_FILE})"
          if evaluated else "")
  return f"; the evaluation during training is not rerun{last}"


def last_logged(log_dir: str, step: int) -> dict:
  """The training scalars of the last metrics.jsonl line at or before `step` (evaluation
  lines, marked "split", left out), without its "step"; {} when there is none (another
  worker's directory, a run that never logged)."""
  last = {}
  for _, row in _metric_rows(log_dir, step):
    if "split" not in row:  # A scalar written as null (NaN, `json_values`) reads as NaN.
      last = {k: json_values.number(v) for k, v in row.items() if k != "step"}
  return last


def write_scalars(writer: tf.summary.SummaryWriter, log_dir: str, head: dict,
                  scalars: dict) -> None:
  """`scalars` to TensorBoard at head["step"] and as a metrics.jsonl line."""
  with writer.as_default(step=head["step"]):
    for name, value in scalars.items():
      tf.summary.scalar(name, value)
  writer.flush()
  with files.open_file(os.path.join(log_dir, "metrics.jsonl"), "a") as f:
    f.write(json_values.dumps({**head, **scalars}) + "\n")  # A kill may cut it: `truncate_metrics`.


def own_directory(directory: str, is_chief: bool, worker_index: int) -> str:
  """`directory` for the chief; `<directory>/.worker<i>` for another worker."""
  return directory if is_chief else os.path.join(directory, f".worker{worker_index}")


class _StopSignals:
  """While entered (main thread only; elsewhere a no-op): sets `sigterm` on SIGTERM and
  `sigint` on the first SIGINT (Ctrl-C), each read at the end of a chunk (save, then stop);
  a second SIGINT raises `KeyboardInterrupt` at once (the save is abandoned)."""

  def __init__(self):
    self.sigterm = self.sigint = False
    self._previous = {}

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for signum in (signal.SIGTERM, signal.SIGINT):
        self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def _handle(self, signum, frame):
    del frame
    if signum == signal.SIGTERM:
      self.sigterm = True
      logging.info("SIGTERM: saving a checkpoint at the end of this chunk of steps")
    elif self.sigint:
      raise KeyboardInterrupt
    else:
      self.sigint = True
      logging.warning("Ctrl-C: saving a checkpoint at the end of this chunk of steps, then "
                      "stopping (press Ctrl-C again to stop at once without it)")

  def __exit__(self, *exc):
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)
    self._previous = {}


class TrainingLoop:
  """Trains, logs, evaluates, checkpoints and resumes one run (see the module docstring).

  Args:
    strategy: the run's strategy; `model` and its optimizer were built in its scope.
    model: a model compiled with its optimizer; `model.train_step(batch)` is one micro-step
      and `model.metrics` its running metrics (`get_metrics_result`, `reset_metrics`).
    config: how to train, log, evaluate and save.
    directory: the run directory (the chief's).
    num_workers, worker_index, is_chief: this process's place in the cluster.
    data_position: a trackable (a tf.data iterator) checkpointed as "data_position", or None
      when the caller positions its data from the restored step.
    evaluate: returns the evaluation scalars (every worker calls it: it may use
      collectives); None: no evaluation.
    on_best: called by the chief with (step, scalars) when `best_metric` improves.
    data_errors: a context manager around every chunk (to name the file of a data error).
    evaluation: what `evaluate` scores, as JSON values (its data's identity under "data",
      `tfbert.runtime.run_directory.data_identity`, with the content's sha256; how many
      examples): recorded with the best value, with `best_metric` (`evaluation_record`). A
      resume whose record differs (other held-out data, another metric) starts the best
      value and the patience count over, and says so: values measured otherwise are never
      compared.
  """

  def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model, config: LoopConfig,
               directory: str, *, num_workers: int = 1, worker_index: int = 0,
               is_chief: bool = True, data_position=None,
               evaluate: Optional[Callable[[], dict]] = None,
               on_best: Optional[Callable[[int, dict], None]] = None,
               data_errors: Callable[[], ContextManager] = contextlib.nullcontext,
               evaluation: Optional[dict] = None):
    self.strategy, self.model, self.config = strategy, model, config
    self.optimizer = model.optimizer
    self.directory = directory
    self.num_workers, self.worker_index, self.is_chief = num_workers, worker_index, is_chief
    self.evaluate, self.on_best, self.data_errors = evaluate, on_best, data_errors
    self._warned_nan = False  # A NaN best_metric's warning is given once.
    self.metrics_window = _metrics_window(strategy, model)
    self.eval_state = EvalState()
    # None when this run keeps no best: the restored record then stays as it was.
    self.evaluation = (evaluation_record(config.best_metric, evaluation)
                       if evaluate is not None and config.best_metric else None)
    if self.evaluation is not None:  # A fresh run's checkpoints record it too.
      self.eval_state.evaluation.assign(json.dumps(self.evaluation, sort_keys=True))
    self._check_entries()
    objects = dict(model=model, optimizer=self.optimizer, metrics_window=self.metrics_window,
                   eval_state=self.eval_state)
    self.data_position = data_position
    if data_position is not None:
      objects["data_position"] = data_position
    self.manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(**objects), os.path.join(self.own_directory, "checkpoints"),
        config.keep_checkpoint_max)
    self.writer = self.eval_writer = None
    if is_chief:
      self.writer = tf.summary.create_file_writer(os.path.join(directory, "train"))
      if evaluate is not None:
        self.eval_writer = tf.summary.create_file_writer(os.path.join(directory, "eval"))
    self.progress = None

  @property
  def own_directory(self) -> str:
    return own_directory(self.directory, self.is_chief, self.worker_index)

  def _check_entries(self) -> None:
    """Raises ValueError naming each directory this loop creates that is something else
    (`tfbert.runtime.paths.entry_problems`), before the first is created."""
    if self.is_chief:
      problems = paths.entry_problems("the run directory", self.directory, RUN_ENTRIES)
    else:
      worker = os.path.basename(self.own_directory)
      problems = (paths.entry_problems("the run directory", self.directory,
                                       {worker: "this worker's checkpoints"})
                  or paths.entry_problems("the worker directory", self.own_directory,
                                          {"checkpoints": RUN_ENTRIES["checkpoints"]}))
    if problems:
      raise ValueError("; ".join(problems))

  @property
  def step(self) -> int:
    """Applied steps so far."""
    return int(self.optimizer.iterations.numpy())

  @property
  def micro_step(self) -> int:
    """Micro-steps so far (the accumulator's counter; applied steps without one)."""
    accumulator = find_accumulator(self.optimizer)
    return self.step if accumulator is None else int(accumulator.micro_step.numpy())

  @property
  def stopped_early(self) -> bool:
    return bool(self.eval_state.stopped_early.numpy())

  @property
  def finished(self) -> bool:
    """Whether the run is complete: all its steps, or stopped early."""
    return self.step >= self.config.num_train_steps or self.stopped_early

  def remove_leftovers(self, also: Sequence[str] = ()) -> list[str]:
    """Removes checkpoint temporaries a killed run left (a rerun's first act); logs them
    with `also` (what the caller removed besides) and returns them all."""
    removed = [*also, *self._remove_temporaries()]
    if removed:
      logging.info(f"removed {len(removed)} leftover(s) of a killed run: {', '.join(removed)}")
    return removed

  def restore(self) -> tuple[int, bool]:
    """Restores the latest checkpoint, if any: (applied step, whether it held the data position).

    (0, False) without a checkpoint. The chief then drops the metrics.jsonl lines after
    the restored step.

    Model and optimizer must match. The metrics window, the evaluation state and the data
    position are restored when the checkpoint has them (one written before tfbert kept
    them resumes without). A best value measured on another evaluation than this run's
    (`evaluation`) is logged and forgotten, with its patience count.

    A newest checkpoint that cannot be read (cut short by a full disk or a copy, damaged) is
    named in one warning line and the run falls back to the previous one kept.

    Raises:
      ValueError: the checkpoint belongs to another model, or none of the kept checkpoints
        can be read.
    """
    held_position = False
    kept = list(reversed(self.manager.checkpoints))  # Newest first.
    if kept:  # A checkpoint without the record leaves "" (`_check_evaluation`).
      self.eval_state.evaluation.assign("")
    for index, path in enumerate(kept):
      try:
        held_position = self._restore_from(path)
        break
      # TensorFlow's checkpoint reader: OpErrors (DataLossError: a cut index), and an
      # IndexError "Read less bytes than requested" for a cut data file (TF 2.20).
      except (tf.errors.OpError, IndexError) as error:
        text = error.message if isinstance(error, tf.errors.OpError) else str(error)
        reason = (text.strip().splitlines() or [type(error).__name__])[0]
        if index + 1 == len(kept):
          raise ValueError(f"{path} cannot be read ({reason}) and no older checkpoint is "
                           f"kept in {os.path.dirname(path)}; remove it to start over"
                           ) from None
        logging.warning(f"{path} cannot be read ({reason}); resuming from the previous "
                        f"checkpoint, {kept[index + 1]}")
    if self.evaluation is not None:
      self._check_evaluation()
    if self.is_chief:
      truncate_metrics(self.directory, self.step)
    return self.step, held_position

  def _check_evaluation(self) -> None:
    """Starts the best value over when the restored one was measured on another evaluation
    (`evaluation_record`), naming what changed and the old best; then records this run's."""
    state = self.eval_state
    text = state.evaluation.numpy().decode("utf-8")
    if state.measured and text:
      recorded = json.loads(text)
      changes = evaluation_changes(recorded, self.evaluation)
      if changes:
        logging.info(
            f"the evaluation differs from the one the checkpoint's best "
            f"{recorded.get('best_metric')} was measured on ({'; '.join(changes)}): that best "
            f"({float(state.best_value.numpy()):.4f} at applied step "
            f"{int(state.best_step.numpy())}, {int(state.evals_since_best.numpy())} "
            "evaluation(s) since) is not compared with this run's; the best value and the "
            "patience count start over")
        state.start_over()
    elif state.measured:
      logging.info("note: the checkpoint does not record what its best value was measured on "
                   "(written before tfbert recorded it): this run compares its evaluations "
                   "with it, as if they scored the same data and metric")
    state.evaluation.assign(json.dumps(self.evaluation, sort_keys=True))

  def _restore_from(self, path: str) -> bool:
    """Restores the checkpoint `path`; returns whether it held the data position."""
    # The reader itself, not `tf.train.list_variables`: that takes a prefix `ram://` calls a
    # directory (a prefix of its files' names) for a checkpoint directory.
    reader = tf.compat.v1.train.NewCheckpointReader(path)
    saved = {name.split("/")[0] for name in reader.get_variable_to_shape_map()}
    objects = {"model": self.model, "optimizer": self.optimizer}
    optional = {"metrics_window": self.metrics_window, "eval_state": self.eval_state,
                "data_position": self.data_position}
    objects.update({k: v for k, v in optional.items() if k in saved and v is not None})
    _check_replicas(path, reader, self.metrics_window)
    try:
      tf.train.Checkpoint(**objects).restore(path).assert_existing_objects_matched()
    except (ValueError, AssertionError) as error:
      first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
      raise ValueError(f"{path} cannot be restored into this model ({first_line}): the run "
                       f"in {self.directory} trained another model; use another directory"
                       ) from None
    if "metrics_window" in objects:
      for copy, parts in zip(self.metrics_window.values,
                             _metric_parts(self.strategy, self.model)):
        for part, value in zip(parts, tf.unstack(copy)):
          part.assign(value)
    logging.info(f"resumed from {path} at applied step {self.step}")
    return "data_position" in objects

  def save(self) -> str:
    """Writes a checkpoint of the current applied step; returns its path."""
    for copy, parts in zip(self.metrics_window.values, _metric_parts(self.strategy, self.model)):
      copy.assign(tf.stack([part.read_value() for part in parts]))
    return self.manager.save(checkpoint_number=self.step)

  def train(self, batches) -> dict:
    """Trains from the current step to `stop_at_step` or the end; returns the last log.

    Args:
      batches: per-replica micro-batches (`tfbert.training.distribution.LocalBatches`).

    Returns:
      The last log's scalars and "step" (and "eval": the last evaluation's scalars). A run
      stopped inside a log window returns the metrics so far, not written. A finished run
      rerun trains nothing and returns its last logged line with "resumed_finished": True.

    Raises:
      Preempted: after SIGTERM, once the checkpoint of the step reached is saved.
      Interrupted: after Ctrl-C, likewise; or at once after a second Ctrl-C.
      FloatingPointError: a non-finite logged loss (with `check_finite`).
    """
    c = self.config
    train_step = tf.function(self.model.train_step, jit_compile=c.jit_compile,
                             autograph=False)
    micro_steps = graph_micro_steps(self.strategy, train_step)

    def eager_micro_steps(iterator, count):
      for _ in range(int(count)):
        self.strategy.run(self.model.train_step, args=(next(iterator),))

    if c.run_eagerly:  # Also the optimizer's and accumulator's own tf.functions.
      tf.config.run_functions_eagerly(True)
    try:
      with _StopSignals() as signals:
        try:
          return self._loop(batches, eager_micro_steps if c.run_eagerly else micro_steps,
                            signals)
        except KeyboardInterrupt as interrupt:
          raise self._interrupted() from interrupt
    finally:
      tf.config.run_functions_eagerly(False)

  def _loop(self, batches, micro_steps, signals: _StopSignals) -> dict:
    c = self.config
    step, last = self.step, {}
    stop = c.stop_at_step or c.num_train_steps
    if self.stopped_early:
      logging.info(f"the run stopped early at applied step {step} (early_stopping_patience); "
                   "nothing more to train")
      return {"step": step, "stopped_early": True}
    if step >= stop and step < c.num_train_steps:  # Paused there already (a replayed one?).
      logging.warning(stop_at_step_message(step, c, already=True))
      return {"step": step, **last_logged(self.directory, step)}
    if step >= stop:  # A finished run rerun: nothing to train; report what it logged last.
      logging.info(f"the run is at applied step {step}: nothing more to train"
                   + finished_evaluation_note(self.directory, step, self.evaluate is not None))
      return {"step": step, **last_logged(self.directory, step), "resumed_finished": True}
    if self.is_chief and c.verbose:
      self.progress = StepProgress(c.num_train_steps, start_step=step)
    logged_step, seconds = step, 0.0  # The log window: since logged_step, in seconds.
    timed = 0  # Applied steps of the window whose time `seconds` holds.
    traced = False  # The first call traces (and compiles) the step: kept out of the speed.
    stalled = 0  # Windows in a row that applied no step.
    while step < stop:
      chunk = min(_to_multiple(step, c.log_steps), _to_multiple(step, c.save_checkpoints_steps),
                  stop - step)
      if c.eval_every_steps and self.evaluate is not None:
        chunk = min(chunk, _to_multiple(step, c.eval_every_steps))
      if not traced:
        chunk = 1
      start = time.perf_counter()
      with self.data_errors():
        micro_steps(batches, tf.constant(chunk * c.gradient_accumulation_steps))
      if traced:
        seconds += time.perf_counter() - start
        timed += self.step - step
      else:
        traced = True
        logging.info(f"the first step took {time.perf_counter() - start:.1f} s (tracing"
                     f"{' and XLA compilation' if c.jit_compile else ''}); "
                     "examples_per_second leaves it out")
      # Applied steps: a window whose gradients overflowed (mixed_float16) applies nothing,
      # and the run trains another in its place.
      stalled = stalled + chunk if self.step == step else 0
      if stalled > MAX_SKIPPED_WINDOWS:
        raise FloatingPointError(f"{stalled} windows in a row after applied step {step} had "
                                 "non-finite gradients at every loss scale")
      step = self.step
      if step % c.log_steps == 0 or step == c.num_train_steps:
        last = self._log(self.step, timed * c.train_batch_size / seconds if timed else None,
                         logged_step)
        logged_step, seconds, timed = step, 0.0, 0
      if self.evaluate is not None and (step == c.num_train_steps or (
          c.eval_every_steps and step % c.eval_every_steps == 0)):
        last = {**last, "eval": self._evaluate(step)}  # Before the checkpoint of step.
      stopping = self.stopped_early
      if step % c.save_checkpoints_steps == 0 or step == stop or stopping:
        self.save()
      if stopping:
        logging.info(f"early stopping at applied step {step}: {c.best_metric} did not improve "
                     f"in {c.early_stopping_patience} evaluations (best "
                     f"{float(self.eval_state.best_value.numpy()):.4f} at applied step "
                     f"{int(self.eval_state.best_step.numpy())})")
        last["stopped_early"] = True
        break
      stop_signal = self._stop_signal(signals)
      if stop_signal == "SIGINT":  # At `stop` the checkpoint of `step` is saved already.
        checkpoint = self.save() if step < stop else self.manager.latest_checkpoint
        raise Interrupted(checkpoint, step=step)
      if step < stop and stop_signal == "SIGTERM":
        raise Preempted(step, self.save())
    if logged_step != step:  # Stopped inside a log window: its metrics so far, not written.
      last = {**last, "step": self.step, **self._scalars(float("nan"))}
    if step == c.stop_at_step and step < c.num_train_steps and not last.get("stopped_early"):
      logging.info(stop_at_step_message(step, c))
    return last

  def _interrupted(self) -> Interrupted:
    """After Ctrl-C: removes the temporaries of a save it cut short; names what is kept."""
    removed = self._remove_temporaries()
    return Interrupted(tf.train.latest_checkpoint(
        os.path.join(self.own_directory, "checkpoints")), removed)

  def _remove_temporaries(self) -> list[str]:
    """Removes the checkpoint temporaries (`is_checkpoint_temporary`); returns their paths."""
    checkpoints = os.path.join(self.own_directory, "checkpoints")
    removed = []
    for name in sorted(files.listdir(checkpoints)) if files.isdir(checkpoints) else []:
      if is_checkpoint_temporary(name):
        atomic.remove_quietly(os.path.join(checkpoints, name))
        removed.append(os.path.join(checkpoints, name))
    return removed

  def _stop_signal(self, signals: _StopSignals) -> Optional[str]:
    """"SIGINT" or "SIGTERM" when any worker got it (an all-reduce across workers: every
    worker stops at the same step), Ctrl-C first; else None."""
    flags = [signals.sigint, signals.sigterm]
    if self.num_workers > 1:
      flag = tf.constant([int(f) for f in flags], tf.int32)
      # One value per worker (on its first local replica): the sums count signalled workers.
      local = self.strategy.num_replicas_in_sync // self.num_workers
      values = self.strategy.experimental_distribute_values_from_function(
          lambda context: flag if context.replica_id_in_sync_group % local == 0 else
          tf.zeros([2], tf.int32))
      flags = [int(v) > 0 for v in
               self.strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None).numpy()]
    return "SIGINT" if flags[0] else "SIGTERM" if flags[1] else None

  def _scalars(self, examples_per_second: Optional[float]) -> dict:
    """The training metrics since the last log; `examples_per_second` None: left out (a
    window of the tracing step alone has no speed to show)."""
    result = {k: float(v) for k, v in self.model.get_metrics_result().items()}
    accumulator = find_accumulator(self.optimizer)
    result["learning_rate"] = float(self.optimizer.learning_rate)
    if accumulator is not None:
      result["gradient_norm"] = float(accumulator.gradient_norm.numpy())
      result["skipped_windows"] = float(accumulator.skipped_windows.numpy())
    if examples_per_second is not None:
      result["examples_per_second"] = examples_per_second
    if hasattr(self.optimizer, "dynamic_scale"):
      result["loss_scale"] = float(self.optimizer.dynamic_scale.numpy())
    return result

  def _log(self, step: int, examples_per_second: Optional[float], previous_step: int) -> dict:
    scalars = self._scalars(examples_per_second)
    self.model.reset_metrics()
    if not math.isfinite(scalars["loss"]) and self.config.check_finite:
      steps = (f"in applied steps {previous_step + 1}..{step}" if step > previous_step else
               f"at step {step + 1} (its update was skipped)")
      raise FloatingPointError(f"non-finite loss ({scalars['loss']}) {steps}")
    if self.is_chief:
      write_scalars(self.writer, self.directory, {"step": step}, scalars)
      if self.progress is not None:
        self.progress.update(step, scalars)
    return {"step": step, **scalars}

  def _evaluate(self, step: int) -> dict:
    """Runs the evaluation; the chief logs it; keeps the best (`best_metric`)."""
    start = time.perf_counter()
    scalars = {k: float(v) for k, v in self.evaluate().items()}
    if self.is_chief:
      write_scalars(self.eval_writer, self.directory, {"step": step, "split": "eval"}, scalars)
      logging.info(f"eval at applied step {step} ({time.perf_counter() - start:.1f} s): " +
                   ", ".join(f"{name} {value:.4f}" for name, value in scalars.items()))
    metric = self.config.best_metric
    if metric:
      check_best_metric(metric, scalars)
      state = self.eval_state
      if math.isnan(scalars[metric]):  # Undefined (a correlation of constant values).
        if self.is_chief and not self._warned_nan:
          self._warned_nan = True
          logging.warning(f"eval at applied step {step}: best_metric {metric} is NaN "
                          "(undefined): an evaluation where it is NaN neither improves the "
                          "best nor counts toward early_stopping_patience (said once)")
      elif state.improves(scalars[metric], metric):
        state.best_value.assign(scalars[metric])
        state.best_step.assign(step)
        state.evals_since_best.assign(0)
        if self.is_chief and self.on_best is not None:
          self.on_best(step, scalars)
      else:
        state.evals_since_best.assign_add(1)
        patience = self.config.early_stopping_patience
        if patience and int(state.evals_since_best.numpy()) >= patience:
          state.stopped_early.assign(True)
    return scalars


def check_best_metric(metric: str, scalars) -> None:
  """Raises ValueError unless `metric` is among the evaluation's scalar names `scalars`,
  naming them and which are minimized (`minimized`)."""
  if metric not in scalars:
    raise ValueError(f"best_metric {metric!r} is not among the evaluation's scalars "
                     f"({', '.join(sorted(scalars))}): pass --best_metric=<one of them> "
                     "(names ending in 'loss' or 'perplexity' are minimized, the others "
                     "maximized)")


def _to_multiple(step: int, every: int) -> int:
  """Steps from `step` to the next multiple of `every`."""
  return every - step % every


def _metrics_window(strategy: tf.distribute.Strategy, model: keras.Model) -> tf.Module:
  """Checkpointable copies of the metrics' per-replica state (one [local replicas] each).

  Keras keeps metric variables out of a `tf.train.Checkpoint`, and restoring a sum over
  replicas would split it evenly among them (different float sums); so `save` copies each
  replica's own values here and `restore` puts them back, and a log window cut by a
  checkpoint logs the uninterrupted run's values after a resume.
  """
  window = tf.Module(name="metrics_window")
  window.values = [tf.Variable(tf.zeros([len(parts)], parts[0].dtype), trainable=False)
                   for parts in _metric_parts(strategy, model)]
  return window


def _check_replicas(path: str, reader, window: tf.Module) -> None:
  """Refuses a checkpoint written with another number of local replicas, naming both.

  Its metrics window (and the data position, read per replica batch) belong to the replica
  layout it was written with; the run resumes with that layout, not another one.
  """
  shapes = reader.get_variable_to_shape_map()
  for index, variable in enumerate(window.values):
    saved = shapes.get(f"metrics_window/values/{index}/.ATTRIBUTES/VARIABLE_VALUE")
    if saved is not None and list(saved) != variable.shape.as_list():
      raise ValueError(
          f"{path} was written by a run with {saved[0]} replica(s) per worker, and this run "
          f"has {variable.shape[0]}: a run resumes with the replicas it started with "
          "(--distribution_strategy, --num_cpu_devices, the workers of TF_CONFIG); rerun it "
          "so, or start another output directory")


def _metric_parts(strategy: tf.distribute.Strategy, model: keras.Model) -> list:
  """For each metric variable, its local per-replica variables."""
  return [strategy.experimental_local_results(variable.value)
          for tracker in model.metrics for variable in tracker.variables]
