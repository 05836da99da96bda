"""One runner for every fine-tuning task: `run_task(task, config)`.

In this order, the same for every task (`tfbert.tasks.task.Task` supplies the hooks):

0. Checks before any work: the config's own checks (at construction), the sequence
   settings and casing of a tfbert run whose model `init_tfbert` names, when not given
   (`fine_tuning.source_run_settings`, `fine_tuning.resolve_casing`), every input file
   (`task.read_inputs`), `best_metric` against the scalars evaluation will return
   (`task.evaluation_metrics`), the labels, the checks against the strategy's replicas
   (`fine_tuning.start_run`), the vocabulary against the model's embedding table and S
   against its positions. A failure here writes nothing.
1. The model: `task.build_model` in the strategy's scope, initialized from a Google
   checkpoint, a Hugging Face directory or a tfbert `.keras` file (the head may be fresh).
   A run that does not train evaluates the run in its output directory (its latest
   checkpoint, exactly, else its `model.keras`), or the source given; with neither it is
   refused before any work (`fine_tuning.evaluated_model`): never random weights.
2. The run directory is claimed (`fine_tuning.claim_run_directory`: a lock, the records a
   rerun must match, the vocabulary). A run that fails before its first step gives it up.
3. Training (`do_train`) in the training loop (`fine_tuning.train`): one device, mirrored
   or multi-worker; accumulation; precision; checkpoints and exact resume; SIGTERM saves
   and exits 75; with `eval_every_steps`, `task.evaluate` during training, the best model
   in `best/` (recorded with the files it scores, `task.eval_files`: a resume on others
   starts the best over) and early stopping. Steps: int(N x num_train_epochs) //
   train_batch_size, cut at `max_train_steps`. Then `model.keras` and `train_results.json`.
4. `task.outputs`: evaluation and prediction files; the runner writes their scores as
   `eval_results.json`, one entry per evaluated file with the applied step it was computed
   at; an evaluation of other files keeps the entries of the files it did not evaluate
   (`fine_tuning.merge_eval_results`, logged).
5. The export (`export_dir`, `task.export`). Only the chief writes; every worker trains,
   evaluates and predicts (sharded).
"""

import dataclasses
import os
import time
from typing import Any, Callable, Optional

import keras
import tensorflow as tf
from absl import logging

from tfbert.checkpoints import google_checkpoint
from tfbert.runtime import atomic, files, run_directory, traces
from tfbert.serving import export
from tfbert.tasks import fine_tuning, source_heads
from tfbert.tasks.task import RunContext, Task
from tfbert.text.tokenization import WordPieceTokenizer
from tfbert.training import training_loop

EVAL_RESULTS_FILE = fine_tuning.EVAL_RESULTS_FILE


@traces.released()  # The run's traces die with it (tfbert.runtime.traces).
def run_task(task: Task, config: fine_tuning.FineTuningConfig,
             flagfile: Optional[str] = None) -> dict[str, Any]:
  """Trains, evaluates, predicts and exports as `config` says (see the module docstring).

  Args:
    task: the task's hooks.
    config: the run configuration (the task's `FineTuningConfig` subclass).
    flagfile: the tool's resolved flags, recorded as `output_dir/flags.txt` by a training
      run (`--flagfile=` replays it).

  Returns:
    dict with "train" (train_results.json's values) when training, the entries of
    `task.outputs` ("eval", "predictions", "scores", ... as the task names them), and
    "written" (paths of what the run wrote).
  """
  if config.eval_every_steps and not config.best_metric:
    config = dataclasses.replace(config, best_metric=task.default_best_metric(config))
  fine_tuning.check_sources(config)  # What the config starts from exists: named by its flag.
  # Without training: the run's own model (its latest checkpoint), or the source given.
  config, own = fine_tuning.evaluated_model(config)
  # A training rerun that resumes the run: its vocabulary and model config, when not given.
  config = fine_tuning.resumed_settings(config)
  # A source run's model (--init_tfbert): its sequence settings and casing, when not given.
  sourced = fine_tuning.source_run_settings(config)
  flagfile, config = fine_tuning.sourced_flagfile(flagfile, config, sourced), sourced
  config = fine_tuning.resolve_casing(config)  # Before any work.
  inputs = task.read_inputs(config)  # Before anything is built or written.
  check_best_metric(task, config, inputs)
  if config.export_dir:  # Only an export of this task's model, by this run, is replaced.
    # Another run's export first (a replayed flags.txt), as the claim would say it.
    run_directory.check_outputs(config.output_dir, {"export_dir": config.export_dir})
    atomic.check_replaceable(
        files.absolute(config.export_dir), export.EXPORT_KIND,
        export.export_task(task.model_class) if task.model_class else None,
        files.absolute(config.output_dir))
  labels = task.labels(config, inputs)
  strategy = fine_tuning.start_run(config)
  tokenizer = WordPieceTokenizer(fine_tuning.resolve_vocab_file(config), config.do_lower_case)
  model = build_model(task, config, labels, strategy, own)
  fine_tuning.check_vocab_fits(model, tokenizer.vocab_size,
                               fine_tuning.describe_vocab(config, tokenizer.vocab_file),
                               fine_tuning.describe_model_config(config, own),
                               trained=bool(fine_tuning.init_source(config) or own)
                               and not fine_tuning.is_sources_vocab(
                                   config, tokenizer.vocab_file, own=bool(own)))
  fine_tuning.check_segments_fit(model, task.segments(config))
  export.check_seq_length(model, task.max_seq_length(config))  # Before the claim.
  train_files = task.train_files(config, inputs)
  held_out = run_directory.held_out_problem(train_files, task.eval_files(config, inputs))
  if held_out:
    logging.warning(held_out)
  with fine_tuning.claim_run_directory(model, config, tokenizer.vocab_file, flagfile, strategy,
                                       train_files=train_files):
    context = RunContext(config=config, strategy=strategy, tokenizer=tokenizer, model=model,
                         inputs=inputs, work_dir=fine_tuning.work_directory(config, strategy),
                         chief=fine_tuning.is_chief(strategy))
    result = _run(task, context, fine_tuning.evaluated_step(config.output_dir, own))
  result["written"] = fine_tuning.written_paths(config.output_dir, result["written"])
  return result


def check_best_metric(task: Task, config: fine_tuning.FineTuningConfig, inputs) -> None:
  """With `eval_every_steps`: `best_metric` must name one of the scalars `task.evaluate`
  returns (`task.evaluation_metrics` for `config` and the `inputs` read), checked before
  anything is built or written. The first evaluation found it, after the run directory was
  claimed and a step had trained.

  Raises:
    ValueError: naming the flag, its value and the scalars the evaluation returns.
  """
  if not config.eval_every_steps:
    return
  names = task.evaluation_metrics(config, inputs)
  if names is not None:
    training_loop.check_best_metric(config.best_metric, names)


def build_model(task: Task, config: fine_tuning.FineTuningConfig, labels,
                strategy: tf.distribute.Strategy,
                own: Optional[fine_tuning.RunModel] = None) -> keras.Model:
  """The task model, built in `strategy`'s scope and initialized as `config` says, or with
  the run's own latest checkpoint (`own`, a run that does not train:
  `fine_tuning.evaluated_model`), exactly.

  The source's encoder weights must all be there and fit exactly (the pooler only where the
  task's model reads it, `task.uses_pooler`); tensors the model has no weight for are
  reported as unused, and the head (`task.head`) keeps its fresh values when the source has
  none, or always with `config.reinit_head`. A source head of another task, or of other
  labels, is refused; the same labels in another order are matched by name
  (`tfbert.tasks.source_heads`).

  Raises:
    ValueError: the source lacks an encoder weight, or shapes differ (a head that does not
      fit names `--reinit_head`).
  """
  bert_config, weights, source = fine_tuning.initial_source(config, own)
  if weights is not None and config.bert_config_file:  # Named as the flag (sweep 27, A117).
    cause = google_checkpoint.config_mismatch(
        bert_config, weights, f"--bert_config_file={config.bert_config_file}")
    if cause:
      raise ValueError(f"{cause}: --bert_config_file does not describe {source.name}; leave "
                       "it out to take the source's own config, or pass the one it was "
                       "trained with")
  with strategy.scope():
    model = task.build_model(config, bert_config, labels)
    model.build()
  if weights is not None or own is None or not own.checkpoint:
    weights = source_heads.match_source_head(  # A classifier's task: its source's must match.
        model, weights, source, task.head, config.reinit_head,
        getattr(config, "task_name", None), task.generic_task_names)
    weights = task.adapt_initial_weights(model, weights, source.name)
    fine_tuning.assign_initial_weights(model, weights, source.name, task.head,
                                       head_is_trained=task.head_is_trained(config),
                                       reinit_head=config.reinit_head)
  if own is not None and own.checkpoint:  # Over its model.keras: the latest weights.
    fine_tuning.restore_run_checkpoint(model, own, source, bool(config.bert_config_file))
  return model


def _run(task: Task, context: RunContext, step: Optional[int] = None) -> dict[str, Any]:
  """The work of `run_task` in the claimed output directory; `step`: the applied step of
  the model evaluated without training (`fine_tuning.evaluated_step`)."""
  config, chief = context.config, context.chief
  result, written = {}, []
  if config.do_train:
    evaluate = (lambda: task.evaluate(context)) if config.eval_every_steps else None
    result["train"] = train(task, context, evaluate)
    if not result["train"]["finished"]:  # stop_at_step: rerun without it to resume.
      result["written"] = ["checkpoints"] if chief else []
      return result
    written += fine_tuning.save_trained(context.model, config, result["train"], chief)
    step = result["train"].get("step")
  outputs = task.outputs(context)
  result.update(outputs.result)
  written += outputs.written
  if outputs.eval_results is not None:
    merged = fine_tuning.merge_eval_results(config.output_dir, outputs.eval_results, step,
                                            outputs.written)
    if chief:
      atomic.write_json(os.path.join(config.output_dir, EVAL_RESULTS_FILE), merged)
    written.append(EVAL_RESULTS_FILE)
  if not chief:  # Another worker: its checkpoints only.
    result["written"] = []
    return result
  if config.export_dir:
    task.export(context)
    written.append(files.absolute(config.export_dir))  # Not a name in output_dir.
  result["written"] = written
  return result


def train(task: Task, context: RunContext,
          evaluate: Optional[Callable[[], dict]] = None) -> dict[str, Any]:
  """Fine-tunes (or resumes) the model on `task.train_data` in the training loop
  (`fine_tuning.train`); returns the last logs with "examples" (N) and "seconds".

  With `evaluate`, the files it scores (`task.eval_files`) are recorded with the best value:
  a resume on an edited dev file starts the best and the patience count over."""
  config = context.config
  data = task.train_data(context)
  n = data.num_examples
  total_steps = max(1, int(n * config.num_train_epochs) // config.train_batch_size)
  steps = min(total_steps, config.max_train_steps or total_steps)
  logging.info(f"training on {data.description}: {steps} of {total_steps} applied steps of "
               f"{config.train_batch_size}")
  eval_files = task.eval_files(config, context.inputs) if evaluate is not None else ()
  start = time.perf_counter()
  summary = fine_tuning.train(context.model, context.strategy, config, data.examples, n,
                              steps=steps, total_steps=total_steps, evaluate=evaluate,
                              eval_files=eval_files)
  return {**summary, "examples": n, "seconds": time.perf_counter() - start}
